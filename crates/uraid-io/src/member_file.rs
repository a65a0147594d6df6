//! A member on a regular file or block device: io_uring with O_DIRECT where the system allows,
//! many I/Os in flight, one `io_uring_enter` per batch, no thread per I/O.
//!
//! Fallbacks, each announced on stderr once when the member opens: a filesystem that refuses
//! O_DIRECT gets buffered I/O; a kernel or sandbox without io_uring gets the synchronous
//! pread/pwrite path in `file_sync.rs` (still no threads: the batch runs at `flush_submissions`).
//!
//! A vectored I/O (several segments, merged by the driver) goes to the ring as one Readv/Writev
//! whose iovec array lives in the I/O's slot until its completion is reaped; a one-segment I/O
//! as a plain Read/Write.
//!
//! Routing under O_DIRECT (offsets and lengths are the engine's, multiples of 512 bytes):
//! - aligned offset and length, and every segment's address and length aligned: straight to the
//!   device from the caller's buffers;
//! - aligned offset and length, some segment misaligned (the engine's `Vec<u8>`s): the whole
//!   I/O through one pooled `AlignedBuf` bounce buffer;
//! - offset or length not a multiple of the logical block size (512-byte I/O on a 4Kn device):
//!   through a second, buffered descriptor of the same file, which the kernel keeps coherent
//!   with direct I/O (a direct I/O writes back and invalidates the page-cache range first).

use crate::buffer_pool::{AlignedBuf, BUF_ALIGN_BYTES, BufferPool};
use crate::counters::MemberCounters;
use crate::file_open::{Opened, open_member};
use crate::file_sync::{DISCARD_MODE, FileOp, iov_len, perform};
use crate::member::{IoCompletion, IoFailure, IoOp, IoRequest, MediaAccess, Member, MemberInfo};
use crate::ring::Ring;
use io_uring::{opcode, squeue, types};
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

/// How a file member opens its device; every choice explicit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileOptions {
    /// Use O_DIRECT when the filesystem accepts it (else buffered, with a warning).
    pub direct: bool,
    /// Use io_uring when the kernel allows it (else the synchronous path, with a warning).
    pub io_uring: bool,
    /// Submission queue size: the most I/Os in the kernel at once (a power of two).
    pub ring_entries: u32,
    /// Open for reading only (writes then fail on the device): for reading an array out
    /// from members that cannot or must not be written (`uraid assemble -o`).
    pub read_only: bool,
}

impl Default for FileOptions {
    fn default() -> FileOptions {
        FileOptions { direct: true, io_uring: true, ring_entries: 256, read_only: false }
    }
}

struct Slot {
    req: IoRequest,
    bounce: Option<AlignedBuf>,
    buffered: bool,
}

/// The iovec array of one slot's I/O, which the kernel reads while the I/O is in flight: the
/// `Vec`'s heap buffer stays put when the outer `Vec` of slots grows, and is reused by the next
/// I/O of the slot (no allocation per I/O once warm).
#[derive(Default)]
struct IoVecs(Vec<libc::iovec>);

// SAFETY: the iovecs point at a slot's bounce buffer (owned by the member) or at the caller's
// memory under the `Member::submit` contract, which keeps it untouched by others until reaped on
// whatever thread the member runs: moving them with the member creates no data race, as for
// `BufPtr`.
unsafe impl Send for IoVecs {}

enum Queue {
    // Boxed: the ring is ten times the size of the other variant.
    Uring(Box<Ring>),
    /// Slots waiting for `flush_submissions`, then results waiting for `reap`.
    Sync {
        queued: Vec<usize>,
        done: Vec<(u64, i32)>,
    },
}

pub struct FileMember {
    info: MemberInfo,
    /// O_DIRECT when `direct`, else the same as `buffered`.
    file: File,
    buffered: File,
    direct: bool,
    /// A regular file (holes are asked for by `allocated`), not a block device.
    regular: bool,
    queue: Queue,
    slots: Vec<Option<Slot>>,
    /// Indexed as `slots`.
    iovecs: Vec<IoVecs>,
    free_slots: Vec<usize>,
    pool: BufferPool,
    counters: Arc<MemberCounters>,
    /// Ring results not yet finished (a push that failed at once).
    results: Vec<(u64, i32)>,
    /// I/Os refused at submit (out of range), reported at the next reap.
    rejected: Vec<IoCompletion>,
}

impl FileMember {
    /// Creates (or truncates) a sparse regular file of `size_bytes` and opens it.
    pub fn create(path: &Path, size_bytes: u64, opts: FileOptions) -> io::Result<FileMember> {
        let f = File::create(path)?;
        f.set_len(size_bytes)?;
        drop(f);
        FileMember::open(path, opts)
    }

    pub fn open(path: &Path, opts: FileOptions) -> io::Result<FileMember> {
        let Opened { info, file, buffered, direct } =
            open_member(path, opts.direct, !opts.read_only)?;
        let regular = buffered.metadata()?.file_type().is_file();
        let queue = match opts.io_uring.then(|| Ring::new(opts.ring_entries)) {
            Some(Ok(ring)) => Queue::Uring(Box::new(ring)),
            Some(Err(e)) => {
                say!("warning: {}: io_uring unavailable ({e}); using pread/pwrite", info.name);
                Queue::Sync { queued: Vec::new(), done: Vec::new() }
            }
            None => Queue::Sync { queued: Vec::new(), done: Vec::new() },
        };
        Ok(FileMember {
            info,
            file,
            buffered,
            direct,
            regular,
            queue,
            slots: Vec::new(),
            iovecs: Vec::new(),
            free_slots: Vec::new(),
            pool: BufferPool::new(64),
            counters: Arc::default(),
            results: Vec::new(),
            rejected: Vec::new(),
        })
    }

    /// Whether I/O bypasses the page cache.
    #[must_use]
    pub fn is_direct(&self) -> bool {
        self.direct
    }

    /// Whether I/O goes through io_uring (else the synchronous fallback).
    #[must_use]
    pub fn uses_io_uring(&self) -> bool {
        matches!(self.queue, Queue::Uring(_))
    }

    /// Bounce buffers allocated so far (flat once the pool has warmed up).
    #[must_use]
    pub fn bounce_allocated_count(&self) -> u64 {
        self.pool.allocated_count()
    }

    /// Decides how `req` reaches the device (see the module docs) and fills its slot.
    fn route(&mut self, req: IoRequest) -> Slot {
        let block = u64::from(self.info.logical_block_bytes);
        let data = matches!(req.op, IoOp::Read | IoOp::Write { .. });
        if !self.direct || !data {
            return Slot { req, bounce: None, buffered: false };
        }
        let extent_aligned =
            req.offset_bytes.is_multiple_of(block) && (req.len_bytes as u64).is_multiple_of(block);
        if !extent_aligned {
            return Slot { req, bounce: None, buffered: true };
        }
        let segs_aligned = req.segs.iter().all(|s| {
            (s.buf.get() as usize).is_multiple_of(BUF_ALIGN_BYTES)
                && (s.len_bytes as u64).is_multiple_of(block)
        });
        if segs_aligned {
            return Slot { req, bounce: None, buffered: false };
        }
        let mut bounce = self.pool.get(req.len_bytes);
        if let IoOp::Write { .. } = req.op {
            let mut at = 0;
            // SAFETY: `req` is being submitted under the `Member::submit` contract.
            for seg in unsafe { req.data() } {
                bounce[at..at + seg.len()].copy_from_slice(seg);
                at += seg.len();
            }
        }
        Slot { req, bounce: Some(bounce), buffered: false }
    }

    /// Fills `iov` with where `slot`'s data goes: its bounce buffer, or the caller's segments.
    fn fill_iovecs(slot: &mut Slot, iov: &mut Vec<libc::iovec>) {
        iov.clear();
        if let Some(bounce) = slot.bounce.as_mut() {
            let len = slot.req.len_bytes;
            iov.push(libc::iovec { iov_base: bounce.as_mut_ptr().cast(), iov_len: len });
        } else {
            let segs = slot.req.segs.iter();
            iov.extend(
                segs.map(|s| libc::iovec { iov_base: s.buf.get().cast(), iov_len: s.len_bytes }),
            );
        }
    }

    fn file_op<'a>(req: &IoRequest, iov: &'a [libc::iovec]) -> FileOp<'a> {
        let (offset, len) = (req.offset_bytes, req.len_bytes);
        if req.has_data() {
            assert_eq!(iov_len(iov), len, "the iovecs cover the I/O");
        }
        match req.op {
            IoOp::Read => FileOp::Read { iov, offset },
            IoOp::Write { fua } => FileOp::Write { iov, offset, fua },
            IoOp::Flush => FileOp::Flush,
            IoOp::Discard => FileOp::Discard { len, offset },
        }
    }

    fn entry(fd: types::Fd, op: FileOp<'_>) -> squeue::Entry {
        match op {
            FileOp::Read { iov: [one], offset } => {
                opcode::Read::new(fd, one.iov_base.cast(), one.iov_len as u32)
                    .offset(offset)
                    .build()
            }
            FileOp::Read { iov, offset } => {
                opcode::Readv::new(fd, iov.as_ptr(), iov.len() as u32).offset(offset).build()
            }
            FileOp::Write { iov, offset, fua } => {
                let flags = if fua { libc::RWF_DSYNC } else { 0 };
                if let [one] = iov {
                    let (ptr, len) = (one.iov_base.cast_const().cast(), one.iov_len as u32);
                    opcode::Write::new(fd, ptr, len).offset(offset).rw_flags(flags).build()
                } else {
                    let (ptr, count) = (iov.as_ptr(), iov.len() as u32);
                    opcode::Writev::new(fd, ptr, count).offset(offset).rw_flags(flags).build()
                }
            }
            FileOp::Flush => opcode::Fsync::new(fd).flags(types::FsyncFlags::DATASYNC).build(),
            FileOp::Discard { len, offset } => {
                opcode::Fallocate::new(fd, len as u64).offset(offset).mode(DISCARD_MODE).build()
            }
        }
    }

    /// Puts `slot` in a free slot and fills that slot's iovecs.
    fn alloc_slot(&mut self, mut slot: Slot) -> usize {
        let index = self.free_slots.pop().unwrap_or(self.slots.len());
        if index == self.slots.len() {
            self.slots.push(None);
            self.iovecs.push(IoVecs::default());
        }
        assert!(self.slots[index].is_none(), "slot {index} is free");
        Self::fill_iovecs(&mut slot, &mut self.iovecs[index].0);
        self.slots[index] = Some(slot);
        index
    }

    /// Finishes one I/O from its result (bytes, or -errno).
    fn finish(&mut self, index: usize, res: i32) -> IoCompletion {
        let slot = self.slots[index].take().expect("a completion for a live slot");
        self.free_slots.push(index);
        let expected = match slot.req.op {
            IoOp::Read | IoOp::Write { .. } => slot.req.len_bytes,
            IoOp::Flush | IoOp::Discard => 0,
        };
        let result = match usize::try_from(res) {
            Err(_) => Err(IoFailure::Os { errno: -res }),
            Ok(done) if done != expected => Err(IoFailure::Short { done, expected }),
            Ok(_) => Ok(()),
        };
        if let Some(bounce) = slot.bounce {
            if result.is_ok() && slot.req.op == IoOp::Read {
                // SAFETY: the I/O is being reaped now; the submit contract still holds.
                unsafe { slot.req.scatter(&bounce[..slot.req.len_bytes]) };
            }
            self.pool.put(bounce);
        }
        if result.is_err() {
            self.counters.record_error();
        }
        IoCompletion { tag: slot.req.tag, result }
    }
}

impl Member for FileMember {
    fn info(&self) -> &MemberInfo {
        &self.info
    }

    fn counters(&self) -> &Arc<MemberCounters> {
        &self.counters
    }

    unsafe fn submit(&mut self, req: IoRequest) {
        self.counters.record_submit(req.op, req.len_bytes);
        if let Err(failure) = self.info.check_range(&req) {
            self.counters.record_error();
            self.rejected.push(IoCompletion { tag: req.tag, result: Err(failure) });
            return;
        }
        let slot = self.route(req);
        let file = if slot.buffered { &self.buffered } else { &self.file };
        let fd = types::Fd(file.as_raw_fd());
        let index = self.alloc_slot(slot);
        let req = &self.slots[index].as_ref().expect("just filled").req;
        let op = Self::file_op(req, &self.iovecs[index].0);
        match &mut self.queue {
            Queue::Uring(ring) => {
                let entry = Self::entry(fd, op).user_data(index as u64);
                // SAFETY: the buffers are the caller's (valid until reaped, by the submit
                // contract) or the slot's bounce buffer, which lives until `finish`; the iovec
                // array is the slot's, untouched until the slot is reused after `finish`; the
                // fds live as long as self, and Drop waits for every I/O in the ring.
                if let Err(e) = unsafe { ring.push(entry) } {
                    self.results.push((index as u64, -e.raw_os_error().unwrap_or(libc::EIO)));
                }
            }
            Queue::Sync { queued, .. } => queued.push(index),
        }
    }

    fn flush_submissions(&mut self) -> io::Result<()> {
        match &mut self.queue {
            Queue::Uring(ring) => ring.submit(),
            Queue::Sync { queued, done } => {
                for index in std::mem::take(queued) {
                    let slot = self.slots[index].as_ref().expect("a queued slot");
                    let file = if slot.buffered { &self.buffered } else { &self.file };
                    let op = Self::file_op(&slot.req, &self.iovecs[index].0);
                    // SAFETY: the buffers are the caller's under the submit contract, or the
                    // slot's bounce buffer.
                    let res = unsafe { perform(file, op) };
                    done.push((index as u64, res));
                }
                Ok(())
            }
        }
    }

    fn reap(&mut self, out: &mut Vec<IoCompletion>, wait: bool) -> io::Result<()> {
        let rejected = !self.rejected.is_empty();
        out.append(&mut self.rejected);
        if matches!(self.queue, Queue::Sync { .. }) {
            // Nothing runs in the background: an unflushed batch runs now.
            self.flush_submissions()?;
        }
        let mut results = std::mem::take(&mut self.results);
        let wait = wait && results.is_empty() && !rejected;
        if let Queue::Uring(ring) = &mut self.queue {
            ring.reap(&mut results, wait)?;
        } else if let Queue::Sync { done, .. } = &mut self.queue {
            results.append(done);
        }
        for (index, res) in results.drain(..) {
            let completion = self.finish(index as usize, res);
            out.push(completion);
        }
        self.results = results;
        Ok(())
    }

    fn in_flight(&self) -> usize {
        self.slots.len() - self.free_slots.len() + self.rejected.len()
    }

    /// A block device may be thin, but lseek cannot tell: only files are asked.
    fn allocated(&self, span: std::ops::Range<u64>) -> Option<Vec<std::ops::Range<u64>>> {
        if !self.regular {
            return None;
        }
        crate::allocation::data_ranges(&self.buffered, span)
    }
}

impl Drop for FileMember {
    /// The kernel may still write into buffers of I/Os in the ring: wait for all of them before
    /// the bounce buffers (and, by the submit contract, the caller's) can go away.
    fn drop(&mut self) {
        if let Queue::Uring(ring) = &mut self.queue {
            let mut results = Vec::new();
            while ring.pending() > 0 && ring.reap(&mut results, true).is_ok() {}
        }
    }
}

impl MediaAccess for FileMember {
    fn read_media(&self, offset_bytes: u64, buf: &mut [u8]) -> io::Result<()> {
        self.buffered.read_exact_at(buf, offset_bytes)
    }

    fn write_media(&mut self, offset_bytes: u64, data: &[u8]) -> io::Result<()> {
        self.buffered.write_all_at(data, offset_bytes)
    }
}
