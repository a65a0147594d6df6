//! What the server exports: any `BlockBackend`. The uraid runtime is one; `MemoryBackend` (a
//! ramdisk with an error switch) is another, for tests and demos.
//!
//! Contract: `submit` starts an operation and calls `done` exactly once when it has finished,
//! possibly on another thread, possibly before `submit` returns. A write is finished when the
//! backend would return its data to a later read; with `fua` (and for a flush) only when it is
//! durable. The server acknowledges nothing before `done` runs, which is what makes "nothing
//! acknowledged is lost" hold.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use thiserror::Error;
use uraid_core::array::ArrayError;
use uraid_runtime::{Completed, Op, Runtime, RuntimeError};

/// One operation on the exported range. Offsets and lengths are in bytes; the server has
/// already checked them against the export size and the block size constraints.
#[derive(Debug)]
pub enum BackendOp {
    /// Reads `len_bytes` at `offset_bytes`; `done` gets the data.
    Read { offset_bytes: u64, len_bytes: u32 },
    /// Reads `buf.len()` bytes at `offset_bytes` into `buf`, whatever it holds: the server
    /// recycles its reply buffers this way. `done` gets `buf` with the data.
    ReadInto { offset_bytes: u64, buf: Vec<u8> },
    /// Writes `buf` at `offset_bytes`; with `fua`, durable when done. `done` gets `buf` back.
    Write { offset_bytes: u64, buf: Vec<u8>, fua: bool },
    /// Every write finished before it is durable when done.
    Flush,
    /// The range is no longer needed (NBD_CMD_TRIM).
    Discard { offset_bytes: u64, len_bytes: u64 },
}

/// Called once with the read data (or the write's buffer, or an empty `Vec`), or the error.
pub type BackendDone = Box<dyn FnOnce(Result<Vec<u8>, BackendError>) + Send>;

/// A read or write whose buffer is in segments, cut where `BlockBackend::segment_bytes` says
/// (the server reads payloads into them and sends replies from them, vectored).
#[derive(Debug)]
pub enum SegmentsOp {
    /// Fills `bufs` in order from `offset_bytes`, whatever they hold.
    Read { offset_bytes: u64, bufs: Vec<Vec<u8>> },
    /// Writes `bufs` in order at `offset_bytes`; with `fua`, durable when done.
    Write { offset_bytes: u64, bufs: Vec<Vec<u8>>, fua: bool },
}

/// Called once with the segments (read data, or the written buffers) or the error; the
/// segments come back on error too, for reuse.
pub type SegmentsDone = Box<dyn FnOnce(Result<(), BackendError>, Vec<Vec<u8>>) + Send>;

/// A run of bytes with one block status (NBD's base:allocation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockExtent {
    pub len_bytes: u64,
    /// Reads back as zeros.
    pub zero: bool,
    /// Not allocated in the backend's storage (implies nothing about reads unless `zero`).
    pub hole: bool,
}

/// Called once with the extents from the asked offset on, in order (they may cover less than
/// was asked, never nothing), or the error.
pub type StatusDone = Box<dyn FnOnce(Result<Vec<BlockExtent>, BackendError>) + Send>;

#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum BackendError {
    #[error("{len_bytes} bytes at {offset_bytes} end beyond the export")]
    OutOfRange { offset_bytes: u64, len_bytes: u64 },
    #[error("{len_bytes} bytes at {offset_bytes} are not whole sectors")]
    Unaligned { offset_bytes: u64, len_bytes: u64 },
    /// The data could not be read or written (members failed beyond redundancy, the array
    /// stopped, a medium error).
    #[error("I/O error: {0}")]
    Io(String),
    /// The backend does not do this (a discard where a member cannot discard to zeros).
    #[error("not supported: {0}")]
    NotSupported(String),
}

pub trait BlockBackend: Send + Sync + 'static {
    fn size_bytes(&self) -> u64;

    /// The request size and alignment with no read-modify-write (md's chunk, or a full
    /// stripe); the server rounds it to a power of two as NBD requires.
    fn preferred_block_bytes(&self) -> u32;

    fn submit(&self, op: BackendOp, done: BackendDone);

    /// Whether it takes discards: only then does the NBD export offer trim (ublk, discard).
    fn can_discard(&self) -> bool {
        true
    }

    /// Whether a discard now makes its range read back as zeros. Then a write of zeros that
    /// may leave holes (NBD without NO_HOLE, ublk without NOUNMAP) is a discard, which frees
    /// what sparse members hold instead of filling it. Asked per request: an array may stop
    /// taking discards while it runs.
    fn discard_zeroes(&self) -> bool {
        false
    }

    /// Whether `block_status` says anything: only then is base:allocation offered.
    fn reports_allocation(&self) -> bool {
        false
    }

    /// The block status of `len_bytes` at `offset_bytes` (checked against the export), as
    /// `StatusDone` says. A range said to be zeros must read back as zeros at that moment.
    fn block_status(&self, offset_bytes: u64, len_bytes: u64, done: StatusDone) {
        let _ = offset_bytes;
        done(Ok(vec![BlockExtent { len_bytes, zero: false, hole: false }]));
    }

    /// Where to cut a read or write of `len_bytes` at `offset_bytes` so that
    /// `submit_segments` moves it without copying: the segments' lengths, in order. By
    /// default one segment.
    fn segment_bytes(&self, offset_bytes: u64, len_bytes: u32) -> Vec<usize> {
        let _ = offset_bytes;
        vec![len_bytes as usize]
    }

    /// Hold what this thread submits from now on, to start it in one go at `unplug` (the
    /// block layer's plugging: the runtime wakes each worker once per burst). The caller
    /// unplugs before it waits for anything. By default nothing is held.
    fn plug(&self) {}

    /// Start what this thread held since `plug`, and hold nothing more.
    fn unplug(&self) {}

    /// As `submit` for a read or write in segments. By default the segments are joined into
    /// one buffer for `submit` and cut again afterwards (no copy for a single segment).
    fn submit_segments(&self, op: SegmentsOp, done: SegmentsDone) {
        let (op, lens) = match op {
            SegmentsOp::Read { offset_bytes, bufs } => {
                let lens: Vec<usize> = bufs.iter().map(Vec::len).collect();
                (BackendOp::ReadInto { offset_bytes, buf: join(bufs) }, lens)
            }
            SegmentsOp::Write { offset_bytes, bufs, fua } => {
                let lens: Vec<usize> = bufs.iter().map(Vec::len).collect();
                (BackendOp::Write { offset_bytes, buf: join(bufs), fua }, lens)
            }
        };
        self.submit(
            op,
            Box::new(move |result| match result {
                Ok(buf) => done(Ok(()), cut(buf, &lens)),
                Err(e) => done(Err(e), Vec::new()),
            }),
        );
    }
}

/// One buffer of `bufs`' bytes (the first one itself when it is alone).
fn join(mut bufs: Vec<Vec<u8>>) -> Vec<u8> {
    if bufs.len() == 1 {
        return bufs.pop().expect("one");
    }
    bufs.concat()
}

/// `buf` cut into segments of `lens` (`buf` itself for one segment).
fn cut(buf: Vec<u8>, lens: &[usize]) -> Vec<Vec<u8>> {
    assert_eq!(lens.iter().sum::<usize>(), buf.len(), "the segments cover the buffer");
    if lens.len() == 1 {
        return vec![buf];
    }
    let mut at = 0;
    lens.iter()
        .map(|&n| {
            at += n;
            buf[at - n..at].to_vec()
        })
        .collect()
}

/// The uraid array. The runtime does not publish its geometry, so it prefers 4 KiB (its
/// stripe head); `ServerConfig::preferred_block_bytes` gives the chunk or full stripe.
impl BlockBackend for Runtime {
    fn size_bytes(&self) -> u64 {
        Runtime::size_bytes(self)
    }

    fn can_discard(&self) -> bool {
        self.discard_refused_by().is_none()
    }

    /// The engine's discard zeroes: whole stripes are discarded on members that read
    /// discarded ranges back as zeros (the only members it takes discards on), the partial
    /// stripes at the ends are written with zeros.
    fn discard_zeroes(&self) -> bool {
        self.can_discard()
    }

    fn preferred_block_bytes(&self) -> u32 {
        4096
    }

    fn reports_allocation(&self) -> bool {
        true
    }

    /// From the engine (no newer data in its stripe heads) and the members' holes.
    fn block_status(&self, offset_bytes: u64, len_bytes: u64, done: StatusDone) {
        Runtime::block_status(self, offset_bytes, len_bytes, move |r| {
            let extents = r.map_err(|e| runtime_error(&e)).map(|extents| {
                let bytes = |e: &uraid_runtime::Extent| e.sectors * 512;
                extents
                    .iter()
                    .map(|e| BlockExtent { len_bytes: bytes(e), zero: e.zero, hole: e.hole })
                    .collect()
            });
            done(extents);
        });
    }

    fn submit(&self, op: BackendOp, done: BackendDone) {
        let op = match op {
            BackendOp::Read { offset_bytes, len_bytes } => {
                Op::Read { offset_bytes, buf: vec![0; len_bytes as usize] }
            }
            BackendOp::ReadInto { offset_bytes, buf } => Op::Read { offset_bytes, buf },
            BackendOp::Write { offset_bytes, buf, fua } => Op::Write { offset_bytes, buf, fua },
            BackendOp::Flush => Op::Flush,
            BackendOp::Discard { offset_bytes, len_bytes } => {
                Op::Discard { offset_bytes, len_bytes }
            }
        };
        Runtime::submit(self, op, move |c: Completed| {
            done(c.result.map(|()| c.buf).map_err(|e| runtime_error(&e)));
        });
    }

    /// The runtime's cut among its workers: each segment goes to its worker's engine as it
    /// is, so a request spanning rows is neither cut nor joined by copying.
    fn segment_bytes(&self, offset_bytes: u64, len_bytes: u32) -> Vec<usize> {
        Runtime::segment_bytes(self, offset_bytes, u64::from(len_bytes))
    }

    fn plug(&self) {
        Runtime::plug(self);
    }

    fn unplug(&self) {
        Runtime::unplug(self);
    }

    fn submit_segments(&self, op: SegmentsOp, done: SegmentsDone) {
        let op = match op {
            SegmentsOp::Read { offset_bytes, bufs } => Op::ReadSegments { offset_bytes, bufs },
            SegmentsOp::Write { offset_bytes, bufs, fua } => {
                Op::WriteSegments { offset_bytes, bufs, fua }
            }
        };
        Runtime::submit(self, op, move |c: Completed| {
            done(c.result.map_err(|e| runtime_error(&e)), c.segments);
        });
    }
}

fn runtime_error(e: &RuntimeError) -> BackendError {
    match e {
        RuntimeError::Unaligned { offset_bytes, len_bytes } => {
            BackendError::Unaligned { offset_bytes: *offset_bytes, len_bytes: *len_bytes }
        }
        RuntimeError::Array(ArrayError::OutOfRange { sector, sectors, .. }) => {
            BackendError::OutOfRange { offset_bytes: sector * 512, len_bytes: sectors * 512 }
        }
        RuntimeError::DiscardUnsupported { .. } => BackendError::NotSupported(e.to_string()),
        other => BackendError::Io(other.to_string()),
    }
}

/// A ramdisk: every operation finishes before `submit` returns. `set_failing(true)` makes
/// every later operation fail with `BackendError::Io`, as a dead array would.
pub struct MemoryBackend {
    data: Mutex<Vec<u8>>,
    preferred_block_bytes: u32,
    failing: AtomicBool,
}

impl MemoryBackend {
    #[must_use]
    pub fn new(size_bytes: usize, preferred_block_bytes: u32) -> MemoryBackend {
        MemoryBackend {
            data: Mutex::new(vec![0; size_bytes]),
            preferred_block_bytes,
            failing: AtomicBool::new(false),
        }
    }

    pub fn set_failing(&self, failing: bool) {
        self.failing.store(failing, Ordering::SeqCst);
    }

    /// A copy of `len_bytes` at `offset_bytes`, to check what clients wrote.
    #[must_use]
    pub fn snapshot(&self, offset_bytes: usize, len_bytes: usize) -> Vec<u8> {
        let data = self.data.lock().unwrap_or_else(PoisonError::into_inner);
        data[offset_bytes..offset_bytes + len_bytes].to_vec()
    }

    fn run(&self, op: BackendOp) -> Result<Vec<u8>, BackendError> {
        if self.failing.load(Ordering::SeqCst) {
            return Err(BackendError::Io("memory backend set to fail".into()));
        }
        let mut data = self.data.lock().unwrap_or_else(PoisonError::into_inner);
        let range = |offset_bytes: u64, len_bytes: u64| {
            let end = offset_bytes.checked_add(len_bytes).filter(|&e| e <= data.len() as u64);
            let end = end.ok_or(BackendError::OutOfRange { offset_bytes, len_bytes })?;
            Ok::<_, BackendError>(offset_bytes as usize..end as usize)
        };
        match op {
            BackendOp::Read { offset_bytes, len_bytes } => {
                Ok(data[range(offset_bytes, u64::from(len_bytes))?].to_vec())
            }
            BackendOp::ReadInto { offset_bytes, mut buf } => {
                let r = range(offset_bytes, buf.len() as u64)?;
                buf.copy_from_slice(&data[r]);
                Ok(buf)
            }
            BackendOp::Write { offset_bytes, buf, fua: _ } => {
                let r = range(offset_bytes, buf.len() as u64)?;
                data[r].copy_from_slice(&buf);
                Ok(buf)
            }
            BackendOp::Flush => Ok(Vec::new()),
            BackendOp::Discard { offset_bytes, len_bytes } => {
                let r = range(offset_bytes, len_bytes)?;
                data[r].fill(0);
                Ok(Vec::new())
            }
        }
    }
}

impl BlockBackend for MemoryBackend {
    fn size_bytes(&self) -> u64 {
        self.data.lock().unwrap_or_else(PoisonError::into_inner).len() as u64
    }

    fn preferred_block_bytes(&self) -> u32 {
        self.preferred_block_bytes
    }

    fn discard_zeroes(&self) -> bool {
        true
    }

    fn submit(&self, op: BackendOp, done: BackendDone) {
        done(self.run(op));
    }

    fn reports_allocation(&self) -> bool {
        true
    }

    /// Zeros by looking, a 4 KiB block at a time (from `offset_bytes`); nothing is a hole.
    fn block_status(&self, offset_bytes: u64, len_bytes: u64, done: StatusDone) {
        if self.failing.load(Ordering::SeqCst) {
            return done(Err(BackendError::Io("memory backend set to fail".into())));
        }
        let data = self.data.lock().unwrap_or_else(PoisonError::into_inner);
        let end = offset_bytes.saturating_add(len_bytes);
        if end > data.len() as u64 {
            return done(Err(BackendError::OutOfRange { offset_bytes, len_bytes }));
        }
        let mut extents: Vec<BlockExtent> = Vec::new();
        let mut at = offset_bytes;
        while at < end {
            let next = (at / 4096 + 1) * 4096;
            let piece = at as usize..next.min(end) as usize;
            let zero = data[piece.clone()].iter().all(|b| *b == 0);
            let len_bytes = piece.len() as u64;
            match extents.last_mut() {
                Some(last) if last.zero == zero => last.len_bytes += len_bytes,
                _ => extents.push(BlockExtent { len_bytes, zero, hole: false }),
            }
            at = next;
        }
        drop(data);
        done(Ok(extents));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A backend that cuts at 4 KiB but has no `submit_segments` of its own: the default
    /// joins the segments for `submit` and cuts the result back into the same lengths.
    struct Cutting(MemoryBackend);

    impl BlockBackend for Cutting {
        fn size_bytes(&self) -> u64 {
            self.0.size_bytes()
        }

        fn preferred_block_bytes(&self) -> u32 {
            4096
        }

        fn submit(&self, op: BackendOp, done: BackendDone) {
            self.0.submit(op, done);
        }

        fn segment_bytes(&self, offset_bytes: u64, len_bytes: u32) -> Vec<usize> {
            let first = 4096 - (offset_bytes % 4096) as usize;
            let first = first.min(len_bytes as usize);
            let rest = len_bytes as usize - first;
            std::iter::once(first)
                .chain((0..rest.div_ceil(4096)).map(|i| (rest - i * 4096).min(4096)))
                .collect()
        }
    }

    #[test]
    fn default_segments_join_and_cut_back_to_the_same_lengths() {
        let b = Cutting(MemoryBackend::new(64 << 10, 4096));
        let lens = b.segment_bytes(1024, 10_240);
        assert_eq!(lens, vec![3072, 4096, 3072]);
        let data: Vec<u8> = (0..10_240u32).map(|i| (i % 253) as u8).collect();
        let bufs = cut(data.clone(), &lens);
        let (tx, rx) = std::sync::mpsc::channel();
        let op = SegmentsOp::Write { offset_bytes: 1024, bufs, fua: false };
        let tx2 = tx.clone();
        b.submit_segments(op, Box::new(move |r, segs| tx2.send((r, segs)).unwrap()));
        let (r, segs) = rx.recv().unwrap();
        r.unwrap();
        assert_eq!(segs.iter().map(Vec::len).collect::<Vec<_>>(), lens, "written, cut back");
        let bufs = lens.iter().map(|&n| vec![0; n]).collect();
        let op = SegmentsOp::Read { offset_bytes: 1024, bufs };
        b.submit_segments(op, Box::new(move |r, segs| tx.send((r, segs)).unwrap()));
        let (r, segs) = rx.recv().unwrap();
        r.unwrap();
        assert_eq!(segs.iter().map(Vec::len).collect::<Vec<_>>(), lens);
        assert_eq!(segs.concat(), data, "read back in the same segments");
        assert_eq!(b.0.snapshot(1024, 10_240), data);
    }
}
