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
//! Each worker's member is a `MemoryMember` on this medium: its semantics exactly (I/Os queued
//! at submit and performed in submission order at reap; Discard zeroes; Flush does nothing).

use std::sync::{Arc, Mutex, PoisonError};
use uraid_io::{Medium, MemoryMember};

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
        MemoryMember::on(&self.name, self.clone())
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
}

/// One worker's handle on a `SharedMemory`: `MemoryMember`'s queue, counters and semantics on
/// the shared medium.
pub type SharedMemoryMember = MemoryMember<SharedMemory>;

impl Medium for SharedMemory {
    fn size_bytes(&self) -> usize {
        self.size_bytes
    }

    fn read(&self, at: usize, dst: &mut [u8]) {
        SharedMemory::read(self, at, dst);
    }

    fn write(&mut self, at: usize, src: &[u8]) {
        SharedMemory::write(self, at, src);
    }

    fn zero(&mut self, at: usize, len: usize) {
        self.for_each_span(at, len, |dst, _| dst.fill(0));
    }
}
