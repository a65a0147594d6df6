//! The member-device interface: many I/Os in flight, completions reaped later (io_uring's
//! shape), so that one driver thread keeps every member busy without a thread per I/O.
//!
//! The one unsafe contract of this crate lives here: `Member::submit` takes raw buffer
//! pointers (an I/O vector of one or more segments) that must stay valid, unmoved and untouched
//! by anyone else until the I/O's completion has been reaped. Backends rely on it and nothing
//! else; the driver upholds it for buffers lent by the engine (see `driver.rs`).

use crate::counters::MemberCounters;
use smallvec::SmallVec;
use std::io;
use std::ops::Range;
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

/// One piece of an I/O's memory: `len_bytes` bytes at `buf`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    pub buf: BufPtr,
    pub len_bytes: usize,
}

/// Segments held inline by an `IoRequest`: 16 covers a 64 KiB I/O merged from 4 KiB stripe head
/// blocks (the common merge) without a heap allocation; longer vectors spill to the heap.
pub const INLINE_SEGMENTS: usize = 16;

/// The most segments an I/O may carry: well under Linux's IOV_MAX (1024), and the driver's
/// merge cap.
pub const MAX_SEGMENTS: usize = 256;

pub type Segments = SmallVec<[Segment; INLINE_SEGMENTS]>;

/// One I/O as a member receives it: byte offsets on the member device itself.
///
/// A Read or Write carries an I/O vector: `segs` in order fill (or send) the contiguous device
/// range `offset_bytes..end_bytes()`, and `len_bytes` is the sum of their lengths. Flush and
/// Discard carry no segments.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IoRequest {
    /// Returned with the completion; the submitter's to choose.
    pub tag: u64,
    pub op: IoOp,
    pub offset_bytes: u64,
    /// The device range's length: the sum of the segments' for Read and Write.
    pub len_bytes: usize,
    /// Memory read into or written from, in device order; empty for Flush and Discard.
    pub segs: Segments,
    /// A Write meant for the device replacing this member only (md's replace: the engine's
    /// `MemberOp::CopyWrite`, see `Replacing`). Members that are not replacing treat it as
    /// an ordinary write.
    pub to_replacement: bool,
    /// A log write the engine queued for this member before its replacement began
    /// (`uraid_core::array::MemberIo::before_replacement`): for the member alone while both
    /// are written, and for no device once the replacement holds the slot.
    pub before_replacement: bool,
}

impl IoRequest {
    #[must_use]
    pub fn read(tag: u64, offset_bytes: u64, buf: &mut [u8]) -> IoRequest {
        let seg = Segment { buf: BufPtr::from_mut(buf), len_bytes: buf.len() };
        IoRequest::vectored(tag, IoOp::Read, offset_bytes, std::iter::once(seg).collect())
    }

    #[must_use]
    pub fn write(tag: u64, offset_bytes: u64, buf: &[u8], fua: bool) -> IoRequest {
        let seg = Segment { buf: BufPtr::from_ref(buf), len_bytes: buf.len() };
        let op = IoOp::Write { fua };
        IoRequest::vectored(tag, op, offset_bytes, std::iter::once(seg).collect())
    }

    /// A Read or Write of several segments (for a Write, built with `BufPtr::from_ref`).
    #[must_use]
    pub fn vectored(tag: u64, op: IoOp, offset_bytes: u64, segs: Segments) -> IoRequest {
        assert!(matches!(op, IoOp::Read | IoOp::Write { .. }), "{op:?} carries no data");
        assert!(!segs.is_empty() && segs.len() <= MAX_SEGMENTS, "{} segments", segs.len());
        let len_bytes = segs.iter().map(|s| s.len_bytes).sum();
        IoRequest {
            tag,
            op,
            offset_bytes,
            len_bytes,
            segs,
            to_replacement: false,
            before_replacement: false,
        }
    }

    #[must_use]
    pub fn flush(tag: u64) -> IoRequest {
        IoRequest {
            tag,
            op: IoOp::Flush,
            offset_bytes: 0,
            len_bytes: 0,
            segs: Segments::new(),
            to_replacement: false,
            before_replacement: false,
        }
    }

    #[must_use]
    pub fn discard(tag: u64, offset_bytes: u64, len_bytes: usize) -> IoRequest {
        IoRequest {
            tag,
            op: IoOp::Discard,
            offset_bytes,
            len_bytes,
            segs: Segments::new(),
            to_replacement: false,
            before_replacement: false,
        }
    }

    #[must_use]
    pub fn end_bytes(&self) -> u64 {
        self.offset_bytes + self.len_bytes as u64
    }

    /// Whether the request moves data (Read or Write), and so has segments.
    #[must_use]
    pub fn has_data(&self) -> bool {
        matches!(self.op, IoOp::Read | IoOp::Write { .. })
    }

    /// Each segment's memory as a slice, in device order.
    ///
    /// # Safety
    /// The request must have been passed to `Member::submit` and not yet reaped, so that its
    /// contract holds: every segment points at its `len_bytes` valid bytes nobody else accesses.
    pub unsafe fn data<'a>(&self) -> impl Iterator<Item = &'a [u8]> + use<'a, '_> {
        self.assert_data();
        self.segs.iter().map(|s| {
            // SAFETY: the caller guarantees the submit contract for this request.
            unsafe { std::slice::from_raw_parts(s.buf.0, s.len_bytes) }
        })
    }

    /// Each segment's memory as a mutable slice, in device order; only for reads.
    ///
    /// # Safety
    /// As for `data`; in addition no other slice of these buffers may be alive.
    pub unsafe fn data_mut<'a>(&self) -> impl Iterator<Item = &'a mut [u8]> + use<'a, '_> {
        assert_eq!(self.op, IoOp::Read, "only a read writes into its buffers");
        self.assert_data();
        self.segs.iter().map(|s| {
            // SAFETY: the caller guarantees the submit contract and that this is the only
            // slice; segments of one request never overlap (each is a distinct lent range).
            unsafe { std::slice::from_raw_parts_mut(s.buf.0, s.len_bytes) }
        })
    }

    /// Copies the data a Write sends into one contiguous `Vec`.
    ///
    /// # Safety
    /// As for `data`.
    #[must_use]
    pub unsafe fn gather(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len_bytes);
        // SAFETY: forwarded from the caller.
        for seg in unsafe { self.data() } {
            out.extend_from_slice(seg);
        }
        out
    }

    /// Copies `src` (`len_bytes` long) into a Read's segments, in order.
    ///
    /// # Safety
    /// As for `data_mut`.
    pub unsafe fn scatter(&self, src: &[u8]) {
        assert_eq!(src.len(), self.len_bytes, "a whole read's data");
        let mut at = 0;
        // SAFETY: forwarded from the caller.
        for seg in unsafe { self.data_mut() } {
            seg.copy_from_slice(&src[at..at + seg.len()]);
            at += seg.len();
        }
    }

    fn assert_data(&self) {
        assert!(self.has_data(), "a data buffer for {:?}", self.op);
        assert!(self.segs.iter().all(|s| !s.buf.0.is_null()), "every segment has memory");
        let sum: usize = self.segs.iter().map(|s| s.len_bytes).sum();
        assert_eq!(sum, self.len_bytes, "the segments cover the I/O exactly");
    }
}

/// Why a member I/O failed.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum IoFailure {
    /// The device's own error, as the OS gave it (`EIO`, `ENOSPC` for a file on a full
    /// file system, ...).
    #[error("{}", std::io::Error::from_raw_os_error(*errno))]
    Os { errno: i32 },
    #[error("short transfer: {done} of {expected} bytes")]
    Short { done: usize, expected: usize },
    #[error("I/O of {len} bytes at {offset} ends beyond the member's {size} bytes")]
    OutOfRange { offset: u64, len: usize, size: u64 },
    #[error("injected fault: {0}")]
    Injected(&'static str),
    #[error("power lost while the I/O was in flight")]
    PowerLost,
    /// A read of a range the member's bad block log names (`known_bad`): not sent.
    #[error("the range is in the member's bad block log")]
    KnownBad,
    /// A read the member's old device failed after its replacement took the slot
    /// (`replacing`): the new device must not be blamed for it.
    #[error("the replaced device failed a read sent before its replacement took the slot")]
    Replaced,
}

/// A member I/O that failed, kept so that a member's failure can say why (md's kernel log
/// names the failed request; here the driver keeps each member's last one).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FailedIo {
    pub op: IoOp,
    pub offset_bytes: u64,
    pub len_bytes: usize,
    pub failure: IoFailure,
}

impl std::fmt::Display for FailedIo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let op = match self.op {
            IoOp::Read => "read",
            IoOp::Write { fua: false } => "write",
            IoOp::Write { fua: true } => "FUA write",
            IoOp::Flush => return write!(f, "flush failed: {}", self.failure),
            IoOp::Discard => "discard",
        };
        let (len, offset) = (self.len_bytes, self.offset_bytes);
        write!(f, "{op} of {len} bytes at byte {offset} failed: {}", self.failure)
    }
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
    /// The device seeks (the kernel's `queue/rotational`): the driver orders a turn's I/O to
    /// save seeks (`driver`).
    pub rotational: bool,
    /// A discard makes the range read back as zeros, which the array's parity relies on (a
    /// hole punched in a file; write-zeroes on a block device). Without it the array takes no
    /// discards: one sent would fail, and the member with it.
    pub discard: bool,
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
    /// For Read and Write, every segment of `req.segs` must point at its `len_bytes` bytes that
    /// stay valid, do not move, and are neither read nor written by anyone else (a Write's may be
    /// read) until this I/O's completion has been returned by `reap`; a Read's segments must not
    /// overlap one another.
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

    /// Lists device bytes `span` in the member's bad block log (md's), durably: reads of it
    /// fail as known bad from then on (`KnownBad`), until a write there. False where the
    /// member keeps no log or the log cannot take it. Synchronous: a recovery lists a block
    /// only where it cannot rebuild one, which is rare, and the log is a few sectors.
    fn list_bad(&mut self, span: Range<u64>) -> bool {
        let _ = span;
        false
    }

    /// `list_bad` for a block the array cannot produce at all, even while this device's
    /// failed writes are not listed (a device being copied onto: `BadBlockList::set_listing`).
    /// By default `list_bad`.
    fn list_unproducible(&mut self, span: Range<u64>) -> bool {
        self.list_bad(span)
    }

    /// `list_unproducible` on the device replacing this member (md's replace: a block the copy
    /// can neither read nor rebuild; `MemberOp::ListBadReplacement`). False where there is
    /// none: only `Replacing` has one.
    fn list_bad_replacement(&mut self, span: Range<u64>) -> bool {
        let _ = span;
        false
    }

    /// The parts of device bytes `span` that hold data, in order and apart: the rest reads
    /// back as zeros (holes of a sparse file; NBD block status). None where the member cannot
    /// say (memory, block devices, a pulled member), which counts as data throughout.
    fn allocated(&self, span: Range<u64>) -> Option<Vec<Range<u64>>> {
        let _ = span;
        None
    }
}

/// A boxed member is a member (so that wrappers like `KnownBad` can sit over any of them).
impl Member for Box<dyn Member> {
    fn info(&self) -> &MemberInfo {
        (**self).info()
    }

    fn counters(&self) -> &Arc<MemberCounters> {
        (**self).counters()
    }

    unsafe fn submit(&mut self, req: IoRequest) {
        // SAFETY: forwarded: our caller's contract is the boxed member's.
        unsafe { (**self).submit(req) }
    }

    fn flush_submissions(&mut self) -> io::Result<()> {
        (**self).flush_submissions()
    }

    fn reap(&mut self, out: &mut Vec<IoCompletion>, wait: bool) -> io::Result<()> {
        (**self).reap(out, wait)
    }

    fn in_flight(&self) -> usize {
        (**self).in_flight()
    }

    fn next_due_ns(&self) -> Option<u64> {
        (**self).next_due_ns()
    }

    fn list_bad(&mut self, span: Range<u64>) -> bool {
        (**self).list_bad(span)
    }

    fn list_unproducible(&mut self, span: Range<u64>) -> bool {
        (**self).list_unproducible(span)
    }

    fn list_bad_replacement(&mut self, span: Range<u64>) -> bool {
        (**self).list_bad_replacement(span)
    }

    fn allocated(&self, span: Range<u64>) -> Option<Vec<Range<u64>>> {
        (**self).allocated(span)
    }
}

/// Direct access to a member's medium, bypassing queue and counters: what fault injection and
/// tests use to look at (and, after a simulated power cut, rewrite) what is stored.
pub trait MediaAccess {
    fn read_media(&self, offset_bytes: u64, buf: &mut [u8]) -> io::Result<()>;
    fn write_media(&mut self, offset_bytes: u64, data: &[u8]) -> io::Result<()>;
}
