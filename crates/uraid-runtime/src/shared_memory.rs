//! A memory member whose medium is shared by every worker: each worker opens its own
//! `SharedMemoryMember` (own queue, own counters, no lock between workers' queues) on one
//! `SharedMemory`, as each worker opens its own file descriptor and ring on a file.
//!
//! The medium is cut into 64 KiB sections, each behind its own `Mutex`: workers touch disjoint
//! rows (the runtime shards by row), and a row covers one chunk of each member, so with chunks
//! of 64 KiB or more (md's default is 512 KiB) two workers never want the same section and a
//! lock per section keeps one worker's copy from serialising the other's. (With 1 MiB sections
//! the 128 KiB-chunk bench saw neighbouring rows, on different workers, fight over one lock:
//! 2 workers ran at 1.05x of 1.) An I/O that
//! crosses a section boundary takes the sections one after the other; it never holds two locks,
//! so there is no lock order to get wrong. The lock is what makes concurrent access sound; the
//! sharding is what makes it uncontended.
//!
//! Semantics are `MemoryMember`'s: I/Os are queued at submit and performed in submission order
//! at reap (a vectored I/O segment by segment); Discard zeroes; Flush has nothing to do.

use std::io;
use std::sync::{Arc, Mutex, PoisonError};
use uraid_io::{IoCompletion, IoOp, IoRequest, MediaAccess, Member, MemberCounters, MemberInfo};

/// Bytes per locked section.
pub const SECTION_BYTES: usize = 64 << 10;

/// One device's medium, shared (cloning shares it).
#[derive(Clone)]
pub struct SharedMemory {
    name: String,
    size_bytes: usize,
    sections: Arc<[Mutex<Box<[u8]>>]>,
}

impl SharedMemory {
    /// A zeroed medium of `size_bytes`.
    #[must_use]
    pub fn new(name: &str, size_bytes: usize) -> SharedMemory {
        let sections = (0..size_bytes.div_ceil(SECTION_BYTES))
            .map(|s| {
                let len = SECTION_BYTES.min(size_bytes - s * SECTION_BYTES);
                Mutex::new(vec![0u8; len].into_boxed_slice())
            })
            .collect();
        SharedMemory { name: name.to_owned(), size_bytes, sections }
    }

    #[must_use]
    pub fn size_bytes(&self) -> usize {
        self.size_bytes
    }

    /// A new handle with its own queue and counters: what one worker submits to.
    #[must_use]
    pub fn member(&self) -> SharedMemoryMember {
        let info = MemberInfo {
            name: self.name.clone(),
            size_bytes: self.size_bytes as u64,
            logical_block_bytes: 512,
        };
        SharedMemoryMember {
            media: self.clone(),
            info,
            queued: Vec::new(),
            counters: Arc::default(),
        }
    }

    /// Calls `f(section bytes, offset into the I/O)` for each section piece of
    /// `at..at + len`, in order, holding one section's lock at a time.
    fn for_each_span(&self, at: usize, len: usize, mut f: impl FnMut(&mut [u8], usize)) {
        assert!(at + len <= self.size_bytes, "{at}+{len} beyond {} bytes", self.size_bytes);
        let mut done = 0;
        while done < len {
            let pos = at + done;
            let (section, within) = (pos / SECTION_BYTES, pos % SECTION_BYTES);
            // A poisoned lock means another worker panicked mid-copy: the bytes are still
            // bytes, and that worker's panic is what reports the failure.
            let mut bytes = self.sections[section].lock().unwrap_or_else(PoisonError::into_inner);
            let n = (len - done).min(bytes.len() - within);
            f(&mut bytes[within..within + n], done);
            done += n;
        }
    }

    /// Copies `at..at + dst.len()` into `dst`.
    pub fn read(&self, at: usize, dst: &mut [u8]) {
        self.for_each_span(at, dst.len(), |src, off| {
            dst[off..off + src.len()].copy_from_slice(src);
        });
    }

    /// Copies `src` to `at..at + src.len()`.
    pub fn write(&self, at: usize, src: &[u8]) {
        self.for_each_span(at, src.len(), |dst, off| {
            dst.copy_from_slice(&src[off..off + dst.len()]);
        });
    }

    fn zero(&self, at: usize, len: usize) {
        self.for_each_span(at, len, |dst, _| dst.fill(0));
    }
}

/// One worker's handle on a `SharedMemory`.
pub struct SharedMemoryMember {
    media: SharedMemory,
    info: MemberInfo,
    queued: Vec<IoRequest>,
    counters: Arc<MemberCounters>,
}

impl SharedMemoryMember {
    #[must_use]
    pub fn media(&self) -> &SharedMemory {
        &self.media
    }

    fn perform(&self, req: &IoRequest) {
        let mut at = usize::try_from(req.offset_bytes).expect("a memory offset fits in usize");
        match req.op {
            IoOp::Read => {
                // SAFETY: `req` was submitted and is being reaped now, so the submit contract
                // holds, and this is the only slice of its segments alive.
                for seg in unsafe { req.data_mut() } {
                    self.media.read(at, seg);
                    at += seg.len();
                }
            }
            IoOp::Write { .. } => {
                // SAFETY: as above (a write's segments are only read).
                for seg in unsafe { req.data() } {
                    self.media.write(at, seg);
                    at += seg.len();
                }
            }
            IoOp::Discard => self.media.zero(at, req.len_bytes),
            IoOp::Flush => {}
        }
    }
}

impl Member for SharedMemoryMember {
    fn info(&self) -> &MemberInfo {
        &self.info
    }

    fn counters(&self) -> &Arc<MemberCounters> {
        &self.counters
    }

    unsafe fn submit(&mut self, req: IoRequest) {
        self.counters.record_submit(req.op, req.len_bytes);
        self.queued.push(req);
    }

    fn flush_submissions(&mut self) -> io::Result<()> {
        Ok(())
    }

    fn reap(&mut self, out: &mut Vec<IoCompletion>, _wait: bool) -> io::Result<()> {
        for req in std::mem::take(&mut self.queued) {
            let result = self.info.check_range(&req);
            if result.is_ok() {
                self.perform(&req);
            } else {
                self.counters.record_error();
            }
            out.push(IoCompletion { tag: req.tag, result });
        }
        Ok(())
    }

    fn in_flight(&self) -> usize {
        self.queued.len()
    }
}

impl MediaAccess for SharedMemoryMember {
    fn read_media(&self, offset_bytes: u64, buf: &mut [u8]) -> io::Result<()> {
        let at = usize::try_from(offset_bytes).map_err(|_| io::ErrorKind::UnexpectedEof)?;
        if at + buf.len() > self.media.size_bytes {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        self.media.read(at, buf);
        Ok(())
    }

    fn write_media(&mut self, offset_bytes: u64, data: &[u8]) -> io::Result<()> {
        let at = usize::try_from(offset_bytes).map_err(|_| io::ErrorKind::UnexpectedEof)?;
        if at + data.len() > self.media.size_bytes {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        self.media.write(at, data);
        Ok(())
    }
}
