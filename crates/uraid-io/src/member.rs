//! The member-device interface: many I/Os in flight, completions reaped later (io_uring's
//! shape), so that one driver thread keeps every member busy without a thread per I/O.
//!
//! The one unsafe contract of this crate lives here: `Member::submit` takes a raw buffer
//! pointer that must stay valid, unmoved and untouched by anyone else until the I/O's
//! completion has been reaped. Backends rely on it and nothing else; the driver upholds it for
//! buffers lent by the engine (see `driver.rs`).

use crate::counters::MemberCounters;
use std::io;
use std::sync::Arc;
use thiserror::Error;

/// What a member I/O does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoOp {
    Read,
    /// `fua`: durable when it completes (Forced Unit Access), with no separate flush.
    Write {
        fua: bool,
    },
    /// Makes every write completed before it was submitted durable.
    Flush,
    /// The range's contents become unspecified; the device may free the space.
    Discard,
}

/// A buffer address handed to a member. Creating one is safe; dereferencing it is not, and
/// happens only inside backends under the `Member::submit` contract.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufPtr(*mut u8);

// SAFETY: a BufPtr is dereferenced only under the `Member::submit` contract, which keeps the
// memory valid and untouched by its owner until the completion is reaped, on whatever thread the
// member then runs: no other thread can access the memory meanwhile, so moving the pointer (and
// the member holding it) to another thread creates no data race.
unsafe impl Send for BufPtr {}

impl BufPtr {
    #[must_use]
    pub fn null() -> BufPtr {
        BufPtr(std::ptr::null_mut())
    }

    #[must_use]
    pub fn from_mut(buf: &mut [u8]) -> BufPtr {
        BufPtr(buf.as_mut_ptr())
    }

    /// For a write's buffer: the pointer is `*mut` only for uniformity and is never written
    /// through (a write only reads its buffer).
    #[must_use]
    pub fn from_ref(buf: &[u8]) -> BufPtr {
        BufPtr(buf.as_ptr().cast_mut())
    }

    #[must_use]
    pub fn get(self) -> *mut u8 {
        self.0
    }
}

/// One I/O as a member receives it: byte offsets on the member device itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IoRequest {
    /// Returned with the completion; the submitter's to choose.
    pub tag: u64,
    pub op: IoOp,
    pub offset_bytes: u64,
    pub len_bytes: usize,
    /// Memory read into or written from; null for Flush and Discard.
    pub buf: BufPtr,
}

impl IoRequest {
    #[must_use]
    pub fn read(tag: u64, offset_bytes: u64, buf: &mut [u8]) -> IoRequest {
        let (len_bytes, buf) = (buf.len(), BufPtr::from_mut(buf));
        IoRequest { tag, op: IoOp::Read, offset_bytes, len_bytes, buf }
    }

    #[must_use]
    pub fn write(tag: u64, offset_bytes: u64, buf: &[u8], fua: bool) -> IoRequest {
        let (len_bytes, buf) = (buf.len(), BufPtr::from_ref(buf));
        IoRequest { tag, op: IoOp::Write { fua }, offset_bytes, len_bytes, buf }
    }

    #[must_use]
    pub fn flush(tag: u64) -> IoRequest {
        IoRequest { tag, op: IoOp::Flush, offset_bytes: 0, len_bytes: 0, buf: BufPtr::null() }
    }

    #[must_use]
    pub fn discard(tag: u64, offset_bytes: u64, len_bytes: usize) -> IoRequest {
        IoRequest { tag, op: IoOp::Discard, offset_bytes, len_bytes, buf: BufPtr::null() }
    }

    #[must_use]
    pub fn end_bytes(&self) -> u64 {
        self.offset_bytes + self.len_bytes as u64
    }

    /// The buffer as a slice.
    ///
    /// # Safety
    /// The request must have been passed to `Member::submit` and not yet reaped, so that its
    /// contract holds: `buf` points at `len_bytes` valid bytes nobody else accesses.
    #[must_use]
    pub unsafe fn data<'a>(&self) -> &'a [u8] {
        assert!(!self.buf.0.is_null(), "a data buffer for {:?}", self.op);
        // SAFETY: the caller guarantees the submit contract for this request.
        unsafe { std::slice::from_raw_parts(self.buf.0, self.len_bytes) }
    }

    /// The buffer as a mutable slice; only for reads.
    ///
    /// # Safety
    /// As for `data`; in addition no other slice of this buffer may be alive.
    #[must_use]
    pub unsafe fn data_mut<'a>(&self) -> &'a mut [u8] {
        assert_eq!(self.op, IoOp::Read, "only a read writes into its buffer");
        assert!(!self.buf.0.is_null(), "a read has a buffer");
        // SAFETY: the caller guarantees the submit contract and that this is the only slice.
        unsafe { std::slice::from_raw_parts_mut(self.buf.0, self.len_bytes) }
    }
}

/// Why a member I/O failed.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum IoFailure {
    #[error("device error (errno {errno})")]
    Os { errno: i32 },
    #[error("short transfer: {done} of {expected} bytes")]
    Short { done: usize, expected: usize },
    #[error("I/O of {len} bytes at {offset} ends beyond the member's {size} bytes")]
    OutOfRange { offset: u64, len: usize, size: u64 },
    #[error("injected fault: {0}")]
    Injected(&'static str),
    #[error("power lost while the I/O was in flight")]
    PowerLost,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IoCompletion {
    pub tag: u64,
    pub result: Result<(), IoFailure>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberInfo {
    pub name: String,
    pub size_bytes: u64,
    /// Offsets, lengths (and for O_DIRECT, buffer addresses) must be multiples of this.
    pub logical_block_bytes: u32,
}

impl MemberInfo {
    /// Whether `req` lies inside the device (Flush always does).
    pub fn check_range(&self, req: &IoRequest) -> Result<(), IoFailure> {
        if req.op == IoOp::Flush || req.end_bytes() <= self.size_bytes {
            return Ok(());
        }
        Err(IoFailure::OutOfRange {
            offset: req.offset_bytes,
            len: req.len_bytes,
            size: self.size_bytes,
        })
    }
}

pub trait Member: Send {
    fn info(&self) -> &MemberInfo;

    fn counters(&self) -> &Arc<MemberCounters>;

    /// Queues an I/O. Failures are reported in its completion, never here.
    ///
    /// # Safety
    /// For Read and Write, `req.buf` must point at `req.len_bytes` bytes that stay valid, do not
    /// move, and are neither read nor written by anyone else (a Write's may be read) until this
    /// I/O's completion has been returned by `reap`.
    unsafe fn submit(&mut self, req: IoRequest);

    /// Hands queued I/Os to the device (one system call for the whole batch where possible).
    fn flush_submissions(&mut self) -> io::Result<()>;

    /// Appends finished I/Os to `out`. With `wait`, blocks until at least one has finished,
    /// unless nothing is in flight.
    fn reap(&mut self, out: &mut Vec<IoCompletion>, wait: bool) -> io::Result<()>;

    /// I/Os submitted and not yet reaped.
    fn in_flight(&self) -> usize;

    /// For members on a modelled clock (`Throttled`): when the next completion is due, so that a
    /// driver waiting on several members waits for the earliest (waiting on another would move
    /// simulated time past completions that should have been handled first). None: unknown.
    fn next_due_ns(&self) -> Option<u64> {
        None
    }
}

/// Direct access to a member's medium, bypassing queue and counters: what fault injection and
/// tests use to look at (and, after a simulated power cut, rewrite) what is stored.
pub trait MediaAccess {
    fn read_media(&self, offset_bytes: u64, buf: &mut [u8]) -> io::Result<()>;
    fn write_media(&mut self, offset_bytes: u64, data: &[u8]) -> io::Result<()>;
}
