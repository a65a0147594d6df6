//! A user request cut into pieces at row boundaries (row = chunk x data disks of array address
//! space, one full stripe), each piece for worker `row % workers`, and put back together when
//! the last piece finishes.
//!
//! Buffers. The engine owns a request's buffer as a `Vec<u8>` while it works, and a `Vec` cannot
//! be split into two owning halves, so a request of several pieces costs copies; one that fits in
//! a row (the common case: a full-stripe write, a chunk-sized read) costs none, its `Vec` goes to
//! the engine and back untouched. For several pieces, piece 0 gets the caller's own `Vec`
//! truncated to its length (its capacity kept), the other pieces get new `Vec`s (a write's copied
//! from the caller's tail before the truncation); at completion the tails are appended to piece
//! 0's `Vec`, which needs no reallocation. So the caller gets back its own allocation, whole,
//! and the copies are the bytes beyond the first row: once for a read, twice for a write (out,
//! and back so that the returned buffer still holds what was written). `RuntimeStats::
//! split_bytes_copied` counts them. Example: chunk 64 KiB, 3 data disks (192 KiB rows), a 256
//! KiB read at 0: pieces 192 + 64 KiB on workers 0 and 1, 64 KiB copied at reassembly.
//!
//! A caller that can hold its buffer in pieces avoids those copies: `Op::ReadSegments` and
//! `Op::WriteSegments` take one `Vec` per piece, cut where `Runtime::segment_bytes` says, each
//! goes to its worker's engine as it is and comes back in `Completed::segments`, untouched by
//! the runtime (the NBD server reads payloads into them and writes replies from them, vectored).

use crate::RuntimeError;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use uraid_core::Sector;

/// A user request.
#[derive(Debug)]
pub enum Op {
    /// Reads `buf.len()` bytes at `offset_bytes` into `buf`.
    Read { offset_bytes: u64, buf: Vec<u8> },
    /// Writes `buf` at `offset_bytes`; with `fua`, durable when it completes.
    Write { offset_bytes: u64, buf: Vec<u8>, fua: bool },
    /// Makes every write completed before it durable, on every worker's members.
    Flush,
    /// The range reads back as zeros afterwards.
    Discard { offset_bytes: u64, len_bytes: u64 },
    /// As `Read`, into `bufs` in order, which must be cut as `Runtime::segment_bytes` says
    /// (else the request fails with `RuntimeError::Segments`): nothing is copied to cut or join.
    ReadSegments { offset_bytes: u64, bufs: Vec<Vec<u8>> },
    /// As `Write`, from `bufs` cut as for `ReadSegments`.
    WriteSegments { offset_bytes: u64, bufs: Vec<Vec<u8>>, fua: bool },
}

/// A finished request: its result and the caller's buffer (empty for Flush and Discard), or
/// its buffers for `ReadSegments` and `WriteSegments`.
#[derive(Debug)]
pub struct Completed {
    pub result: Result<(), RuntimeError>,
    pub buf: Vec<u8>,
    /// The buffers of `ReadSegments` / `WriteSegments`, in order (empty for other requests).
    pub segments: Vec<Vec<u8>>,
}

impl Completed {
    /// A request that ends with `buf` (and no segments).
    #[must_use]
    pub fn whole(result: Result<(), RuntimeError>, buf: Vec<u8>) -> Completed {
        Completed { result, buf, segments: Vec::new() }
    }
}

/// Called once, on the thread of the worker that finished the last piece: it must be quick
/// (send on a channel, wake a task) or it delays that worker's I/O.
pub type Callback = Box<dyn FnOnce(Completed) + Send>;

/// What a worker's engine does with a piece.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PieceOp {
    Read,
    Write {
        fua: bool,
    },
    Flush,
    Discard {
        sectors: u64,
    },
    /// Block status of `sectors` (`status`): answered from the engine's state and the
    /// members' holes, with no member I/O.
    Status {
        sectors: u64,
    },
    /// md's sync work over member sectors `[piece.sector, +sectors)` (one row's share).
    Sync {
        kind: uraid_core::array::SyncKind,
        sectors: u64,
    },
}

pub(crate) struct Piece {
    pub op: PieceOp,
    pub sector: Sector,
    pub buf: Vec<u8>,
    /// Position among the parent's pieces, in address order.
    pub index: usize,
    pub parent: Arc<Parent>,
}

impl Piece {
    /// Fails the piece: its worker is gone.
    pub fn gone(self) {
        self.parent.piece_done(self.index, Err(RuntimeError::Gone), self.buf);
    }
}

/// The request the pieces belong to.
pub(crate) struct Parent {
    state: Mutex<ParentState>,
    /// The runtime's `split_bytes_copied`.
    copied: Arc<AtomicU64>,
    /// The caller gave the pieces' buffers (`Op::ReadSegments`, `WriteSegments`): they go
    /// back as they are, not joined.
    segmented: bool,
}

struct ParentState {
    remaining: usize,
    /// The first error any piece met (the request fails as a whole).
    error: Option<RuntimeError>,
    /// Returned piece buffers, by index; reassembled at the end.
    bufs: Vec<Vec<u8>>,
    done: Option<Callback>,
}

impl Parent {
    pub fn new(pieces: usize, done: Callback, copied: Arc<AtomicU64>) -> Arc<Parent> {
        assert!(pieces > 0, "a request has pieces");
        let state = ParentState {
            remaining: pieces,
            error: None,
            bufs: (0..pieces).map(|_| Vec::new()).collect(),
            done: Some(done),
        };
        Arc::new(Parent { state: Mutex::new(state), copied, segmented: false })
    }

    /// A request whose pieces' buffers are the caller's segments, returned unjoined.
    pub fn segmented(pieces: usize, done: Callback, copied: Arc<AtomicU64>) -> Arc<Parent> {
        let mut parent = Parent::new(pieces, done, copied);
        Arc::get_mut(&mut parent).expect("not shared yet").segmented = true;
        parent
    }

    /// Records one piece's end; the last one reassembles and calls back (outside the lock).
    pub fn piece_done(&self, index: usize, result: Result<(), RuntimeError>, buf: Vec<u8>) {
        let finished = {
            let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            assert!(s.remaining > 0, "piece {index} finished after its request");
            assert!(s.bufs[index].is_empty(), "piece {index} finished twice");
            s.remaining -= 1;
            s.bufs[index] = buf;
            if let Err(e) = result {
                s.error.get_or_insert(e);
            }
            if s.remaining > 0 {
                return;
            }
            let done = s.done.take().expect("called back once");
            (std::mem::take(&mut s.bufs), s.error.take(), done)
        };
        let (bufs, error, done) = finished;
        let result = error.map_or(Ok(()), Err);
        if self.segmented {
            return done(Completed { result, buf: Vec::new(), segments: bufs });
        }
        done(Completed::whole(result, self.reassemble(bufs)));
    }

    fn reassemble(&self, mut bufs: Vec<Vec<u8>>) -> Vec<u8> {
        let mut whole = std::mem::take(&mut bufs[0]);
        let tail: usize = bufs[1..].iter().map(Vec::len).sum();
        if tail > 0 {
            // One memcpy per piece (`extend` over a flattened iterator copies byte by byte:
            // it was 31% of the CPU of 1 MiB reads served over NBD).
            whole.reserve_exact(tail);
            for b in &bufs[1..] {
                whole.extend_from_slice(b);
            }
            self.copied.fetch_add(tail as u64, Ordering::Relaxed);
        }
        whole
    }
}

/// One piece of a request's range: `sectors` at `sector`, for `worker`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Span {
    pub sector: u64,
    pub sectors: u64,
    pub worker: usize,
}

/// Cuts `sector..sector + sectors` at row boundaries; each row goes to worker `row % workers`.
/// One worker gets the whole range as one span (nothing to shard).
pub(crate) fn split(sector: u64, sectors: u64, row_sectors: u64, workers: usize) -> Vec<Span> {
    assert!(row_sectors > 0 && workers > 0, "rows {row_sectors}, workers {workers}");
    if workers == 1 || sectors == 0 {
        return vec![Span { sector, sectors, worker: 0 }];
    }
    let end = sector + sectors;
    let mut spans = Vec::with_capacity(usize::try_from(sectors / row_sectors + 2).unwrap_or(2));
    let mut at = sector;
    while at < end {
        let row = at / row_sectors;
        let next = ((row + 1) * row_sectors).min(end);
        spans.push(Span {
            sector: at,
            sectors: next - at,
            worker: (row % workers as u64) as usize,
        });
        at = next;
    }
    spans
}

/// Cuts `buf` for `spans` (sector lengths) as the module docs say: piece 0 keeps the caller's
/// allocation; the tails are new `Vec`s, filled from `buf` only when `copy` (a write).
pub(crate) fn split_buf(
    mut buf: Vec<u8>,
    spans: &[Span],
    copy: bool,
    copied: &AtomicU64,
) -> Vec<Vec<u8>> {
    let bytes = |s: &Span| usize::try_from(s.sectors * 512).expect("a piece fits in memory");
    let first = bytes(&spans[0]);
    let mut out = Vec::with_capacity(spans.len());
    out.push(Vec::new());
    let mut at = first;
    for s in &spans[1..] {
        let n = bytes(s);
        out.push(if copy { buf[at..at + n].to_vec() } else { vec![0; n] });
        at += n;
    }
    assert_eq!(at, buf.len(), "the spans cover the buffer");
    if copy {
        copied.fetch_add((at - first) as u64, Ordering::Relaxed);
    }
    buf.truncate(first);
    out[0] = buf;
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_cut_at_rows_and_rotate_over_workers() {
        let s = split(100, 700, 384, 2);
        let w = |sector, sectors, worker| Span { sector, sectors, worker };
        assert_eq!(s, vec![w(100, 284, 0), w(384, 384, 1), w(768, 32, 0)]);
        assert_eq!(split(384, 384, 384, 3), vec![w(384, 384, 1)], "a full row is one piece");
        assert_eq!(split(0, 5000, 384, 1), vec![w(0, 5000, 0)], "one worker: no cut");
    }

    #[test]
    fn buffers_split_and_reassemble_to_the_same_bytes() {
        let copied = Arc::new(AtomicU64::new(0));
        let data: Vec<u8> = (0..700 * 512u32).map(|i| (i % 251) as u8).collect();
        let spans = split(100, 700, 384, 2);
        let bufs = split_buf(data.clone(), &spans, true, &copied);
        assert_eq!(bufs.iter().map(Vec::len).sum::<usize>(), data.len());
        assert_eq!(copied.load(Ordering::Relaxed), (416 * 512) as u64, "the tails, once");
        let (tx, rx) = std::sync::mpsc::channel();
        let parent = Parent::new(3, Box::new(move |c| tx.send(c).unwrap()), copied.clone());
        for (i, b) in bufs.into_iter().enumerate().rev() {
            parent.piece_done(i, Ok(()), b);
        }
        let c = rx.recv().unwrap();
        assert!(c.result.is_ok());
        assert_eq!(c.buf, data, "the caller's bytes come back whole");
        assert_eq!(copied.load(Ordering::Relaxed), (2 * 416 * 512) as u64, "out and back");
    }
}
