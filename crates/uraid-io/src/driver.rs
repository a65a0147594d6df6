//! The driver loop: runs a sans-IO `Array` against its members on one thread.
//!
//! Each turn pulls every member I/O the engine has ready, merges them, submits them all, hands
//! each member's batch to the device at once (`flush_submissions`), then reaps what has finished
//! and reports it with `complete_io`. It blocks only when nothing has finished and nothing new can
//! be submitted.
//!
//! Merging: stripe heads are 4 KiB, so a 64 KiB read-modify-write asks for 16 contiguous 4 KiB
//! reads of old data, P and Q each. The driver sorts a turn's I/Os by member, then by kind and
//! offset (write-intent bitmap page writes first: see `Part::rank`), and submits each run that is
//! exactly contiguous on its member, of the same kind (Read, or Write with the same fua) and within
//! `MergeLimits`, as ONE vectored member I/O: 3 + 3 member I/Os of 64 KiB instead of 48 + 48.
//! Contiguous discards merge too, up to [`DISCARD_MERGE_BYTES`] (the engine discards a stripe head,
//! 4 KiB a member, at a time: a 200 MiB discard of RAID5 x 5 was 12,800 hole punches on each member
//! and took 3.4 s, 0.38 s merged). Flushes are never merged, and a Flush stays after every I/O the
//! engine issued to its member before it in the turn (sorting happens only between flushes). On a
//! disk that seeks, a run that continues where the member's last I/O ended goes first
//! (`seek_order`). Each member I/O carries the engine I/Os it merged; each is reported on
//! completion.
//! A merged I/O that fails is resubmitted as its parts, one member I/O each, and each part is
//! reported with its own result: the engine's read-error correction then sees exactly which block
//! failed and rewrites only that one.
//!
//! Buffer contract (what makes `Member::submit` sound here): a member I/O's buffer is memory the
//! engine owns, lent through `Array::io_buf` / `io_buf_mut`: a user request's `Vec<u8>` or a stripe
//! head's `Box<[u8]>` block. The engine keeps that allocation alive and at a fixed address, and
//! does not read or write the lent range, from the moment it hands out the `MemberIo` until the
//! driver reports it with `complete_io` (the request is not completed, the head is not released
//! or resized away while it has I/O in flight). Moving or growing the containers (`Vec<Request>`,
//! the head pool) moves the `Vec`/`Box` headers, never their heap buffers. So the driver takes the
//! pointer right after `next_io` and must report every I/O exactly once, which it does by reaping
//! until nothing is in flight before returning, on an error path too (`drain`). Merging keeps
//! this true: a merged I/O's segments are exactly the lent ranges of the engine I/Os it carries
//! (one segment each, never widened), each is reported only after the member I/O that carries it
//! (or, after a failure, its own resubmission) has been reaped, and a Read's ranges never
//! overlap (the engine lends each range to one I/O at a time).

use crate::counters::CountersSnapshot;
use crate::member::{
    BufPtr, FailedIo, INLINE_SEGMENTS, IoCompletion, IoFailure, IoOp, IoRequest, MAX_SEGMENTS,
    Member, Segment, Segments,
};
use smallvec::SmallVec;
use std::io;
use std::ops::Range;
use thiserror::Error;
use uraid_core::SECTOR_BYTES;
use uraid_core::array::{Array, IoArea, IoTag, MemberIo, MemberOp};

mod merge_order;
mod seek_order;

#[derive(Debug, Error)]
#[non_exhaustive]
pub enum DriverError {
    #[error("member {member} ({name}): {source}")]
    Member {
        member: usize,
        name: String,
        #[source]
        source: io::Error,
    },
    #[error("the engine is busy but has no member I/O to perform and none in flight (plugged?)")]
    Stalled,
}

/// How large a merged member I/O may grow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MergeLimits {
    /// A run stops before it would exceed this many bytes (a single larger engine I/O is
    /// submitted alone, as it is).
    pub max_bytes: usize,
    /// At most this many engine I/Os (segments) in one member I/O; 1 turns merging off.
    pub max_segments: usize,
}

impl MergeLimits {
    /// Every engine I/O is a member I/O of its own.
    pub const OFF: MergeLimits = MergeLimits { max_bytes: usize::MAX, max_segments: 1 };
}

impl Default for MergeLimits {
    /// 1 MiB: a device's typical max_sectors_kb, and as many 4 KiB stripe head blocks as
    /// `MAX_SEGMENTS`.
    fn default() -> MergeLimits {
        MergeLimits { max_bytes: 1 << 20, max_segments: MAX_SEGMENTS }
    }
}

/// One engine I/O as the driver holds it from `next_io` until it is reported.
#[derive(Clone, Copy, Debug)]
struct Part {
    tag: IoTag,
    member: usize,
    op: IoOp,
    offset_bytes: u64,
    len_bytes: usize,
    /// Null for Flush and Discard.
    buf: BufPtr,
    /// Flushes to this member earlier in the turn: no I/O is sorted across a Flush.
    epoch: u32,
    /// A write-intent bitmap page write (`IoArea::Bitmap`).
    bitmap: bool,
    /// For the device replacing the member only (`MemberOp::CopyWrite`): never merged with
    /// a write to the member.
    to_replacement: bool,
    /// For the member only, not its replacement (`MemberIo::before_replacement`).
    before_replacement: bool,
}

impl Part {
    fn end_bytes(&self) -> u64 {
        self.offset_bytes + self.len_bytes as u64
    }

    /// Sort order within a member and epoch: bitmap page writes first, then mergeable kinds
    /// together, each by offset; a Flush last, after every I/O issued before it. A bitmap
    /// page write gates every stripe write of its generation: behind the turn's pre-reads on a
    /// device that serves in order, it would hold them all until that member's last read
    /// (4 KiB random writes at iodepth 16, 4 KiB bitmap chunks, modelled SSDs: 0.83 of the
    /// IOPS without a bitmap, 0.96 with the page writes first; `uraid bench io --only bitmap`).
    fn rank(&self) -> u8 {
        if self.bitmap {
            return 0;
        }
        match self.op {
            IoOp::Read => 1,
            IoOp::Write { fua: false } => 2,
            IoOp::Write { fua: true } => 3,
            IoOp::Discard => 4,
            IoOp::Flush => 5,
        }
    }

    /// Whether `next` (sorted after this run's last part `self`) extends the run.
    fn continued_by(&self, next: &Part) -> bool {
        matches!(self.op, IoOp::Read | IoOp::Write { .. } | IoOp::Discard)
            && (next.member, next.epoch, next.op, next.to_replacement, next.before_replacement)
                == (self.member, self.epoch, self.op, self.to_replacement, self.before_replacement)
            && next.offset_bytes == self.end_bytes()
    }
}

#[cfg(test)]
impl Part {
    /// A data I/O with no buffer, for the ordering tests.
    fn for_test(tag: u64, member: usize, op: IoOp, offset_bytes: u64, len_bytes: usize) -> Part {
        Part {
            tag: IoTag(tag),
            member,
            op,
            offset_bytes,
            len_bytes,
            buf: BufPtr::null(),
            epoch: 0,
            bitmap: false,
            to_replacement: false,
            before_replacement: false,
        }
    }
}

/// The engine I/Os one member I/O carries (one unless merged), in device order.
type Parts = SmallVec<[Part; INLINE_SEGMENTS]>;

/// How far contiguous discards merge into one member discard: it carries no memory, so only
/// the number of its parts, which the driver keeps until it completes, bounds it.
pub const DISCARD_MERGE_BYTES: usize = 64 << 20;

/// How many of `sorted`'s first parts make one member I/O: a run exactly contiguous on one
/// member, of one mergeable kind, within `limits` (discards within [`DISCARD_MERGE_BYTES`]).
fn run_len(sorted: &[Part], limits: MergeLimits) -> usize {
    // `MergeLimits::OFF` (one segment a member I/O) keeps discards apart too.
    let limits = if sorted[0].op == IoOp::Discard && limits.max_segments > 1 {
        MergeLimits { max_bytes: DISCARD_MERGE_BYTES, max_segments: usize::MAX }
    } else {
        limits
    };
    let mut bytes = sorted[0].len_bytes;
    let mut n = 1;
    while let Some(next) = sorted.get(n) {
        let fits = n < limits.max_segments && bytes + next.len_bytes <= limits.max_bytes;
        if !fits || !sorted[n - 1].continued_by(next) {
            break;
        }
        bytes += next.len_bytes;
        n += 1;
    }
    n
}

pub struct Driver<M: Member + ?Sized = dyn Member> {
    members: Vec<Box<M>>,
    /// Where each member's data area starts (md's data_offset), the same on every member.
    data_offset_bytes: u64,
    /// Where the internal write-intent bitmap starts on each member (md's superblock offset +
    /// bitmap_offset), for the engine's `IoArea::Bitmap` I/O.
    bitmap_offset_bytes: Option<u64>,
    /// Where this engine's partial parity log ring starts on each member, for `IoArea::Log`.
    log_offset_bytes: Option<u64>,
    limits: MergeLimits,
    /// Members with submissions not yet handed to the device.
    unflushed: Vec<bool>,
    /// Engine I/Os submitted and not yet reported.
    in_flight: usize,
    /// Member I/Os in flight, indexed by their member tag.
    flights: Vec<Option<Parts>>,
    free_flights: Vec<usize>,
    /// This turn's engine I/Os, kept to reuse the allocation.
    ready: Vec<Part>,
    /// Scratch of `merge_order::order_for_merging`.
    order: merge_order::Scratch,
    /// This turn's member I/Os, as ranges of `ready`.
    runs: Vec<std::ops::Range<usize>>,
    /// Per member: whether its disk seeks, and where its last data I/O ended (`seek_order`).
    seeks: Vec<bool>,
    head: Vec<Option<u64>>,
    reaped: Vec<IoCompletion>,
    /// Per member: its last failed I/O (`last_failure`).
    failures: Vec<Option<FailedIo>>,
}

impl<M: Member + ?Sized> Driver<M> {
    #[must_use]
    pub fn new(members: Vec<Box<M>>) -> Driver<M> {
        assert!(!members.is_empty(), "an array has members");
        let count = members.len();
        let seeks = members.iter().map(|m| m.info().rotational).collect();
        Driver {
            members,
            data_offset_bytes: 0,
            bitmap_offset_bytes: None,
            log_offset_bytes: None,
            limits: MergeLimits::default(),
            unflushed: vec![false; count],
            in_flight: 0,
            flights: Vec::new(),
            free_flights: Vec::new(),
            ready: Vec::new(),
            order: merge_order::Scratch::new(count),
            runs: Vec::new(),
            seeks,
            head: vec![None; count],
            reaped: Vec::new(),
            failures: vec![None; count],
        }
    }

    /// Sets how far contiguous member I/Os merge (see the module docs).
    #[must_use]
    pub fn with_merge_limits(mut self, limits: MergeLimits) -> Driver<M> {
        self.set_merge_limits(limits);
        self
    }

    /// As `with_merge_limits`, between runs.
    pub fn set_merge_limits(&mut self, limits: MergeLimits) {
        let segments = limits.max_segments;
        assert!((1..=MAX_SEGMENTS).contains(&segments), "{segments} segments per I/O");
        self.limits = limits;
    }

    #[must_use]
    pub fn merge_limits(&self) -> MergeLimits {
        self.limits
    }

    /// Sets where the write-intent bitmap starts on every member (needed once the engine has
    /// `enable_write_intent`).
    #[must_use]
    pub fn with_bitmap_offset_bytes(mut self, bytes: u64) -> Driver<M> {
        assert!(bytes.is_multiple_of(SECTOR_BYTES), "bitmap offset {bytes} is whole sectors");
        self.bitmap_offset_bytes = Some(bytes);
        self
    }

    /// Sets where this engine's partial parity log ring starts on every member (needed once
    /// the engine has `enable_partial_parity_log`).
    #[must_use]
    pub fn with_log_offset_bytes(mut self, bytes: u64) -> Driver<M> {
        assert!(bytes.is_multiple_of(SECTOR_BYTES), "log offset {bytes} is whole sectors");
        self.log_offset_bytes = Some(bytes);
        self
    }

    /// Sets md's data_offset: engine sector 0 is this byte offset on every member.
    #[must_use]
    pub fn with_data_offset_bytes(mut self, bytes: u64) -> Driver<M> {
        assert!(bytes.is_multiple_of(SECTOR_BYTES), "data_offset {bytes} is whole sectors");
        self.data_offset_bytes = bytes;
        self
    }

    #[must_use]
    pub fn members(&self) -> &[Box<M>] {
        &self.members
    }

    /// The parts of data-area sectors `sectors` that `member` holds data in (its holes read
    /// back as zeros), sectors rounded outward; None where the member cannot say.
    #[must_use]
    pub fn allocated(&self, member: usize, sectors: Range<u64>) -> Option<Vec<Range<u64>>> {
        let base = self.data_offset_bytes;
        let span = base + sectors.start * SECTOR_BYTES..base + sectors.end * SECTOR_BYTES;
        let ranges = self.members[member].allocated(span)?;
        let sector = |b: u64| (b - base) / SECTOR_BYTES;
        Some(ranges.iter().map(|r| sector(r.start)..sector(r.end + SECTOR_BYTES - 1)).collect())
    }

    pub fn member_mut(&mut self, member: usize) -> &mut M {
        assert_eq!(self.in_flight, 0, "members change only while nothing is in flight");
        &mut self.members[member]
    }

    /// Puts `instance` in place of `member` (a spare taking a failed member's slot, or an
    /// empty slot after a remove) and returns the old instance; refused (the new instance is
    /// handed back) while the old one still has I/O in flight.
    pub fn replace_member(&mut self, member: usize, instance: Box<M>) -> Result<Box<M>, Box<M>> {
        if self.members[member].in_flight() > 0 {
            return Err(instance);
        }
        self.unflushed[member] = false;
        self.seeks[member] = instance.info().rotational;
        self.head[member] = None;
        self.failures[member] = None;
        Ok(std::mem::replace(&mut self.members[member], instance))
    }

    /// Puts `wrap(instance)` in place of `member`'s instance without waiting for its I/O to
    /// drain: the wrapper must take the instance's in-flight I/O over (its completions come
    /// back through it under the same tags), as `Replacing` does.
    pub fn wrap_member(&mut self, member: usize, wrap: impl FnOnce(Box<M>) -> Box<M>) {
        let instance = self.members.remove(member);
        self.members.insert(member, wrap(instance));
    }

    /// Whether `member` has I/O in flight.
    #[must_use]
    pub fn member_busy(&self, member: usize) -> bool {
        self.members[member].in_flight() > 0
    }

    /// Every member's counters, in member order.
    #[must_use]
    pub fn counters(&self) -> Vec<CountersSnapshot> {
        self.members.iter().map(|m| m.counters().snapshot()).collect()
    }

    /// The sum over all members.
    #[must_use]
    pub fn counters_total(&self) -> CountersSnapshot {
        self.counters().into_iter().fold(CountersSnapshot::default(), CountersSnapshot::sum)
    }

    /// Performs member I/O until the engine is idle. Finished requests stay in the engine for
    /// `take_completed`.
    pub fn run_until_idle(&mut self, array: &mut Array) -> Result<(), DriverError> {
        let result = self.run_loop(array);
        if result.is_err() {
            self.drain(array);
        }
        result
    }

    fn run_loop(&mut self, array: &mut Array) -> Result<(), DriverError> {
        loop {
            let submitted = self.submit_ready(array);
            self.flush_submissions()?;
            if self.in_flight == 0 {
                if !array.busy() {
                    return Ok(());
                }
                if submitted == 0 {
                    return Err(DriverError::Stalled);
                }
            }
            // Wait only when there is nothing new to submit: new submissions first keep the
            // members' queues full.
            self.reap(array, submitted == 0)?;
        }
    }

    /// One turn, for a runtime that accepts new requests between turns: submits what the engine
    /// has ready, hands it to the devices and reports what has finished. With `wait`, blocks
    /// until something finishes if nothing new was submitted and I/O is in flight. On an error
    /// every I/O in flight is reaped first (the buffer contract), as in `run_until_idle`.
    pub fn turn(&mut self, array: &mut Array, wait: bool) -> Result<(), DriverError> {
        let result = self.turn_inner(array, wait);
        if result.is_err() {
            self.drain(array);
        }
        result
    }

    fn turn_inner(&mut self, array: &mut Array, wait: bool) -> Result<(), DriverError> {
        let submitted = self.submit_ready(array);
        self.flush_submissions()?;
        if self.in_flight > 0 {
            self.reap(array, wait && submitted == 0)?;
        }
        Ok(())
    }

    /// Engine I/Os submitted and not yet reported to the engine (a merged member I/O counts
    /// once for each engine I/O it carries).
    #[must_use]
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Submits every I/O the engine has ready, merged where contiguous (see the module docs),
    /// and does its bad block listings; returns how many engine I/Os.
    pub fn submit_ready(&mut self, array: &mut Array) -> usize {
        let mut ready = std::mem::take(&mut self.ready);
        let mut listed = 0;
        loop {
            let mut listings = Vec::new();
            while let Some(io) = array.next_io() {
                if matches!(io.op, MemberOp::ListBad | MemberOp::ListBadReplacement) {
                    listings.push(io);
                } else {
                    let part = self.part(array, &io);
                    ready.push(part);
                }
            }
            if listings.is_empty() {
                break;
            }
            // Done here and now (`Member::list_bad`); what they complete may queue more.
            for io in listings {
                let start = self.data_offset_bytes + io.sector.bytes();
                let span = start..start + io.bytes() as u64;
                let member = &mut self.members[io.member.get()];
                let ok = if io.op == MemberOp::ListBadReplacement {
                    member.list_bad_replacement(span)
                } else {
                    member.list_bad(span)
                };
                array.complete_io(io.tag, ok);
                listed += 1;
            }
        }
        self.order.order_for_merging(&mut ready);
        let mut runs = std::mem::take(&mut self.runs);
        runs.clear();
        let mut at = 0;
        while at < ready.len() {
            let n = run_len(&ready[at..], self.limits);
            runs.push(at..at + n);
            at += n;
        }
        seek_order::sequential_first(&ready, &mut runs, &mut self.head, &self.seeks);
        for run in &runs {
            self.submit_parts(ready[run.clone()].iter().copied().collect());
        }
        self.runs = runs;
        let count = ready.len();
        self.in_flight += count;
        ready.clear();
        self.ready = ready;
        count + listed
    }

    /// Takes `io`'s buffer pointer, right after `next_io` (the buffer contract).
    fn part(&mut self, array: &mut Array, io: &MemberIo) -> Part {
        let member = io.member.get();
        assert!(member < self.members.len(), "I/O for member {member} of {}", self.members.len());
        let (op, buf) = match io.op {
            MemberOp::Read => (IoOp::Read, BufPtr::from_mut(array.io_buf_mut(io))),
            MemberOp::Write => (IoOp::Write { fua: io.fua }, BufPtr::from_ref(array.io_buf(io))),
            MemberOp::CopyWrite => (IoOp::Write { fua: false }, BufPtr::from_ref(array.io_buf(io))),
            MemberOp::Flush => (IoOp::Flush, BufPtr::null()),
            MemberOp::Discard => (IoOp::Discard, BufPtr::null()),
            MemberOp::ListBad | MemberOp::ListBadReplacement => {
                unreachable!("listings are done in submit_ready")
            }
        };
        let offset_bytes = match (io.op, io.area) {
            (MemberOp::Flush, _) => 0,
            (_, IoArea::Data) => self.data_offset_bytes + io.sector.bytes(),
            (_, IoArea::Bitmap) => {
                let at = self.bitmap_offset_bytes.expect("a bitmap offset for bitmap I/O");
                at + io.sector.bytes()
            }
            (_, IoArea::Log) => {
                let at = self.log_offset_bytes.expect("a log offset for log I/O");
                at + io.sector.bytes()
            }
        };
        // Log writes, like bitmap pages, hold the head's writes back: they go first.
        let bitmap = io.area != IoArea::Data;
        let to_replacement = io.op == MemberOp::CopyWrite;
        let len_bytes = io.bytes();
        Part {
            tag: io.tag,
            member,
            op,
            offset_bytes,
            len_bytes,
            buf,
            epoch: 0,
            bitmap,
            to_replacement,
            before_replacement: io.before_replacement,
        }
    }

    /// Submits one member I/O carrying `parts` (contiguous, one kind); it has no engine I/O of
    /// its own to count.
    fn submit_parts(&mut self, parts: Parts) {
        let first = parts[0];
        let tag = self.free_flights.pop().unwrap_or(self.flights.len());
        let req = match first.op {
            IoOp::Read | IoOp::Write { .. } => {
                let segs: Segments =
                    parts.iter().map(|p| Segment { buf: p.buf, len_bytes: p.len_bytes }).collect();
                let mut req = IoRequest::vectored(tag as u64, first.op, first.offset_bytes, segs);
                req.to_replacement = first.to_replacement;
                req.before_replacement = first.before_replacement;
                req
            }
            IoOp::Flush => IoRequest::flush(tag as u64),
            IoOp::Discard => {
                let len_bytes = parts.iter().map(|p| p.len_bytes).sum();
                IoRequest::discard(tag as u64, first.offset_bytes, len_bytes)
            }
        };
        assert!(parts.len() == 1 || first.op != IoOp::Flush, "flushes never merge");
        assert_eq!(req.end_bytes(), parts[parts.len() - 1].end_bytes(), "the parts are contiguous");
        if tag == self.flights.len() {
            self.flights.push(None);
        }
        assert!(self.flights[tag].is_none(), "member tag {tag} is free");
        let member = first.member;
        self.flights[tag] = Some(parts);
        // SAFETY: every segment is an engine buffer lent for its part's I/O: it stays allocated,
        // unmoved and untouched until `complete_io(part.tag)`, which `reap_member` calls only
        // after the member has returned this I/O's completion (or that of the part's own
        // resubmission); the parts' ranges are distinct lent ranges, so a Read's segments do not
        // overlap (the contract in this module's docs).
        unsafe { self.members[member].submit(req) };
        self.unflushed[member] = true;
    }

    fn flush_submissions(&mut self) -> Result<(), DriverError> {
        for m in 0..self.members.len() {
            if std::mem::take(&mut self.unflushed[m]) {
                let r = self.members[m].flush_submissions();
                r.map_err(|source| self.member_error(m, source))?;
            }
        }
        Ok(())
    }

    /// Reaps finished I/Os from every member and reports them to the engine. With `wait` and
    /// nothing finished anywhere, blocks on the first member with I/O in flight.
    fn reap(&mut self, array: &mut Array, wait: bool) -> Result<(), DriverError> {
        let mut reaped = std::mem::take(&mut self.reaped);
        reaped.clear();
        for m in 0..self.members.len() {
            self.reap_member(m, &mut reaped, false, true, array)?;
        }
        if wait && self.in_flight > 0 && reaped.is_empty() {
            let m = self.member_to_wait_on();
            self.reap_member(m, &mut reaped, true, true, array)?;
        }
        self.reaped = reaped;
        // The parts of failed merged I/Os, resubmitted one by one.
        self.flush_submissions()
    }

    /// The member with I/O in flight whose next completion is due first: on modelled clocks,
    /// waiting on any other would move time past completions that come earlier. Members that
    /// cannot tell (real devices) come first: waiting on them moves no model's time.
    fn member_to_wait_on(&self) -> usize {
        let busy = (0..self.members.len()).filter(|&m| self.members[m].in_flight() > 0);
        let m = busy.min_by_key(|&m| self.members[m].next_due_ns().unwrap_or(0));
        m.expect("a member holds the I/O in flight")
    }

    /// Reaps member `m` and reports its engine I/Os; with `split`, a failed merged I/O is
    /// resubmitted as its parts instead (left for the caller to flush).
    fn reap_member(
        &mut self,
        m: usize,
        reaped: &mut Vec<IoCompletion>,
        wait: bool,
        split: bool,
        array: &mut Array,
    ) -> Result<(), DriverError> {
        if self.members[m].in_flight() == 0 {
            return Ok(());
        }
        let start = reaped.len();
        let r = self.members[m].reap(reaped, wait);
        r.map_err(|source| self.member_error(m, source))?;
        for c in &reaped[start..] {
            let tag = usize::try_from(c.tag).expect("a member tag is a flight index");
            let parts = self.flights.get_mut(tag).and_then(Option::take);
            let parts = parts.expect("a completion of a member I/O in flight");
            self.free_flights.push(tag);
            assert!(parts.iter().all(|p| p.member == m), "member {m} completes its own I/O");
            if let Err(failure) = &c.result {
                self.note_failure(&parts, failure);
            }
            if c.result.is_err() && parts.len() > 1 && split {
                for &part in &parts {
                    self.submit_parts(std::iter::once(part).collect());
                }
                continue;
            }
            for part in parts {
                assert!(self.in_flight > 0, "a completion of member {m} with nothing in flight");
                self.in_flight -= 1;
                if matches!(c.result, Err(IoFailure::KnownBad | IoFailure::Replaced)) {
                    array.complete_io_known_bad(part.tag);
                } else {
                    array.complete_io(part.tag, c.result.is_ok());
                }
            }
        }
        Ok(())
    }

    /// After an error: waits for every I/O still in flight and reports it, so that no device
    /// writes into engine memory after this returns. A member whose reap keeps failing is given
    /// up on (its I/O is then reported failed to the engine only if it completes later). A failed
    /// merged I/O is not split here: each of its parts is reported failed.
    fn drain(&mut self, array: &mut Array) {
        let mut reaped = Vec::new();
        for m in 0..self.members.len() {
            while self.members[m].in_flight() > 0 {
                if self.reap_member(m, &mut reaped, true, false, array).is_err() {
                    break;
                }
            }
        }
    }

    /// The last I/O of `member` that failed on the device (not one the driver declined:
    /// a range in its bad block log, a replaced device's), for the message that says why
    /// the member failed.
    #[must_use]
    pub fn last_failure(&self, member: usize) -> Option<&FailedIo> {
        self.failures[member].as_ref()
    }

    fn note_failure(&mut self, parts: &[Part], failure: &IoFailure) {
        if matches!(failure, IoFailure::KnownBad | IoFailure::Replaced) {
            return;
        }
        let first = &parts[0];
        self.failures[first.member] = Some(FailedIo {
            op: first.op,
            offset_bytes: first.offset_bytes,
            len_bytes: parts.iter().map(|p| p.len_bytes).sum(),
            failure: failure.clone(),
        });
    }

    fn member_error(&self, member: usize, source: io::Error) -> DriverError {
        DriverError::Member { member, name: self.members[member].info().name.clone(), source }
    }
}

#[cfg(test)]
mod tests {
    //! The merge plan on synthetic engine I/Os. Goal: exactly contiguous runs of one kind merge,
    //! anything else does not, the limits hold, and a Flush keeps its place. Method: order a
    //! turn's parts as `submit_ready` does and list the runs as engine tags.

    use super::{IoOp, MergeLimits, Part, merge_order::Scratch, run_len};

    const KIB: usize = 1024;
    const READ: IoOp = IoOp::Read;
    const WRITE: IoOp = IoOp::Write { fua: false };
    const WRITE_FUA: IoOp = IoOp::Write { fua: true };

    /// (member, op, offset KiB, length KiB)
    type Io = (usize, IoOp, usize, usize);

    /// Tagged 0, 1, ... in the engine's order.
    fn parts(ios: &[Io]) -> Vec<Part> {
        let part = |(i, &(member, op, at, len)): (usize, &Io)| {
            Part::for_test(i as u64, member, op, (at * KIB) as u64, len * KIB)
        };
        ios.iter().enumerate().map(part).collect()
    }

    fn runs_with(ios: &[Io], limits: MergeLimits) -> Vec<Vec<u64>> {
        let mut ready = parts(ios);
        Scratch::new(4).order_for_merging(&mut ready);
        let mut rest = &ready[..];
        let mut runs = Vec::new();
        while !rest.is_empty() {
            let n = run_len(rest, limits);
            runs.push(rest[..n].iter().map(|p| p.tag.0).collect());
            rest = &rest[n..];
        }
        runs
    }

    fn runs(ios: &[Io]) -> Vec<Vec<u64>> {
        runs_with(ios, MergeLimits::default())
    }

    fn run_lens(ios: &[Io], limits: MergeLimits) -> Vec<usize> {
        runs_with(ios, limits).iter().map(Vec::len).collect()
    }

    #[test]
    fn contiguous_reads_merge_in_offset_order_whatever_the_engine_order() {
        let ios = [(0, READ, 8, 4), (0, READ, 0, 4), (0, READ, 4, 4), (0, READ, 12, 4)];
        assert_eq!(runs(&ios), vec![vec![1, 2, 0, 3]]);
    }

    #[test]
    fn a_gap_an_overlap_or_another_member_splits_the_run() {
        let ios = [(0, READ, 0, 4), (0, READ, 8, 4), (0, READ, 12, 4), (1, READ, 4, 4)];
        assert_eq!(runs(&ios), vec![vec![0], vec![1, 2], vec![3]]);
        let overlap = [(0, READ, 0, 8), (0, READ, 4, 4)];
        assert_eq!(runs(&overlap), vec![vec![0], vec![1]]);
    }

    #[test]
    fn reads_and_writes_do_not_merge_nor_writes_of_different_fua() {
        let ios = [(0, READ, 0, 4), (0, WRITE, 4, 4), (0, WRITE_FUA, 8, 4), (0, WRITE, 8, 4)];
        // By kind, then offset: the read, the two plain writes (contiguous), the FUA one.
        assert_eq!(runs(&ios), vec![vec![0], vec![1, 3], vec![2]]);
        let fua = [(0, WRITE_FUA, 0, 4), (0, WRITE_FUA, 4, 4)];
        assert_eq!(runs(&fua), vec![vec![0, 1]]);
    }

    /// Without the bitmap's rank the page write (tag 3) would go after the reads and the plain
    /// write: [0, 1], [2], [3].
    #[test]
    fn a_bitmap_page_write_goes_first_on_its_member_but_not_across_a_flush() {
        let mut ready = parts(&[
            (0, READ, 0, 4),
            (0, READ, 64, 4),
            (0, WRITE, 8, 4),
            (0, WRITE_FUA, 1 << 20, 4),
            (1, READ, 0, 4),
            (1, IoOp::Flush, 0, 0),
            (1, WRITE_FUA, 1 << 20, 4),
        ]);
        ready[3].bitmap = true;
        ready[6].bitmap = true;
        Scratch::new(4).order_for_merging(&mut ready);
        let order: Vec<u64> = ready.iter().map(|p| p.tag.0).collect();
        assert_eq!(order, vec![3, 0, 1, 2, 4, 5, 6]);
    }

    #[test]
    fn contiguous_discards_merge_past_the_data_caps() {
        let ios = [(0, IoOp::Discard, 0, 4), (0, IoOp::Discard, 4, 4), (0, IoOp::Discard, 12, 4)];
        assert_eq!(runs(&ios), vec![vec![0, 1], vec![2]], "a gap ends the run");
        let many: Vec<Io> = (0..20_000).map(|i| (0, IoOp::Discard, 4 * i, 4)).collect();
        let cap = super::DISCARD_MERGE_BYTES / (4 * KIB);
        assert_eq!(run_lens(&many, MergeLimits::default()), vec![cap, 20_000 - cap]);
        assert_eq!(run_lens(&many[..3], MergeLimits::OFF), vec![1; 3], "merging off");
        let mixed = [(0, IoOp::Discard, 0, 4), (0, WRITE, 4, 4), (1, IoOp::Discard, 8, 4)];
        assert_eq!(run_lens(&mixed, MergeLimits::default()), vec![1, 1, 1]);
    }

    #[test]
    fn a_flush_stays_after_the_ios_before_it_and_before_those_after_it() {
        let ios = [
            (0, WRITE, 4, 4),
            (0, READ, 100, 4),
            (0, IoOp::Flush, 0, 0),
            (0, WRITE, 0, 4),
            (1, WRITE, 0, 4),
            (0, IoOp::Flush, 0, 0),
        ];
        // Write 3 is contiguous with write 0 but on the other side of the flush.
        assert_eq!(runs(&ios), vec![vec![1], vec![0], vec![2], vec![3], vec![5], vec![4]]);
    }

    #[test]
    fn the_byte_and_segment_caps_hold() {
        let ios: Vec<Io> = (0..300).map(|i| (0, READ, 4 * i, 4)).collect();
        assert_eq!(run_lens(&ios, MergeLimits::default()), vec![256, 44], "1 MiB of 4 KiB");
        let limits = MergeLimits { max_bytes: 64 * KIB, max_segments: 256 };
        assert_eq!(run_lens(&ios[..40], limits), vec![16, 16, 8]);
        let limits = MergeLimits { max_bytes: 1 << 20, max_segments: 3 };
        assert_eq!(run_lens(&ios[..7], limits), vec![3, 3, 1]);
        let big = [(0, READ, 0, 2048), (0, READ, 2048, 4)];
        assert_eq!(runs(&big), vec![vec![0], vec![1]], "a larger I/O goes alone");
        assert_eq!(run_lens(&ios[..5], MergeLimits::OFF), vec![1; 5]);
    }
}
