//! A member whose bad block log (md's per-member list of ranges known to hold no good data:
//! a write there failed, and md kept the member) names ranges: reads that overlap one fail
//! with `IoFailure::KnownBad` without reaching the device, so the engine rebuilds those blocks
//! from parity and rewrites them, as md reads around its bad blocks. A write that completes
//! over part of a range makes that part good again (md clears an entry the same way).
//!
//! With recording on (`BadBlockList::recording`), a data write that fails is listed instead
//! of failing the member, as md does with its log: the range is made durable in the log
//! first (`PersistBadBlocks`, under the list's lock), and only then does the write complete,
//! as a success: the engine's parity already holds the new data, and the range is read
//! around from now on. Where the log cannot take it (full, unwritable, below the data area),
//! the write fails and so does the member.
//!
//! One list per member device, shared by every worker's instance of it (each worker opens
//! its own); a worker only ever touches the stripes it owns.
//!
//! A rewritten range leaves the log on the device once a member flush makes its rewrite
//! durable: ranges rewritten before a flush was submitted are dropped when that flush
//! completes (`FlushMark`), and whatever is left at the stop. Until the third session of
//! 2026-12-05 only the stop dropped them, and a crash after a flushed rewrite left the range
//! listed: its good data was read around, and a torn write to its stripe left nothing to
//! rebuild it from.

use crate::counters::MemberCounters;
use crate::member::{IoCompletion, IoFailure, IoOp, IoRequest, Member, MemberInfo};
use std::collections::HashMap;
use std::io;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// Makes a member's bad block list durable: given the ranges to keep (device bytes, sorted,
/// disjoint), under the list's lock. Err (the log is full or cannot be written) refuses them.
pub type PersistBadBlocks = Box<dyn Fn(&[Range<u64>]) -> io::Result<()> + Send + Sync>;

/// A member device's bad block list (see the module docs).
pub struct BadBlockList {
    state: Mutex<ListState>,
    /// Whether `bad` is non-empty: reads look only then (no lock on a healthy member).
    listed: AtomicBool,
    recording: Option<Recording>,
    /// Whether failed writes are listed now (see `set_listing`).
    listing: AtomicBool,
    /// Whether the log on the device may hold a range rewritten since (`durable` is not
    /// `bad`): a flush looks at the list only then.
    rewritten: AtomicBool,
}

/// The ranges the device's log held, already rewritten, when a flush was submitted: durable
/// once it completes, so they may leave the log then (`BadBlockList::flushed`).
#[derive(Debug)]
struct FlushMark(Vec<Range<u64>>);

struct Recording {
    /// Failed writes from this byte on (the data area) are listed.
    from_byte: u64,
    persist: PersistBadBlocks,
}

struct ListState {
    /// What reads avoid: the log as found, plus failed writes, minus ranges written since.
    bad: Vec<Range<u64>>,
    /// What the log on the device says. Rewritten ranges leave it only at `settle`, after a
    /// flush: before, a crash could lose their new data.
    durable: Vec<Range<u64>>,
}

impl BadBlockList {
    /// The ranges `bad` (device bytes, any order), never added to.
    #[must_use]
    pub fn fixed(bad: Vec<Range<u64>>) -> Arc<BadBlockList> {
        Self::with(bad, None)
    }

    /// The ranges `bad` as the log holds them; failed writes from `from_byte` on are added
    /// and made durable by `persist`.
    #[must_use]
    pub fn recording(
        bad: Vec<Range<u64>>,
        from_byte: u64,
        persist: PersistBadBlocks,
    ) -> Arc<BadBlockList> {
        Self::with(bad, Some(Recording { from_byte, persist }))
    }

    fn with(bad: Vec<Range<u64>>, recording: Option<Recording>) -> Arc<BadBlockList> {
        let bad = normalized(bad);
        Arc::new(BadBlockList {
            listed: AtomicBool::new(!bad.is_empty()),
            state: Mutex::new(ListState { durable: bad.clone(), bad }),
            recording,
            listing: AtomicBool::new(true),
            rewritten: AtomicBool::new(false),
        })
    }

    /// Pauses (`false`) or resumes the listing of failed writes, for a recording list. A
    /// device being copied onto as a replacement lists nothing: md gives a replacement up at
    /// its first failed write, since the copy must be whole; once it holds the slot it is a
    /// member like the others.
    pub fn set_listing(&self, on: bool) {
        self.listing.store(on, Ordering::Release);
    }

    fn state(&self) -> std::sync::MutexGuard<'_, ListState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The ranges reads avoid now.
    #[must_use]
    pub fn bad(&self) -> Vec<Range<u64>> {
        self.state().bad.clone()
    }

    /// The ranges the device's log holds.
    #[cfg(test)]
    fn durable(&self) -> Vec<Range<u64>> {
        self.state().durable.clone()
    }

    fn overlaps(&self, span: &Range<u64>) -> bool {
        self.listed.load(Ordering::Acquire) && overlaps(&self.state().bad, span)
    }

    /// `good` now holds good data: cut it out of the ranges reads avoid.
    fn cleared(&self, good: &Range<u64>) {
        let mut st = self.state();
        st.bad = cut(&st.bad, good);
        self.listed.store(!st.bad.is_empty(), Ordering::Release);
        if self.recording.is_some() && st.durable != st.bad {
            self.rewritten.store(true, Ordering::Release);
        }
    }

    /// A member flush is being submitted: what it will make durable of the rewrites (None
    /// when the log holds nothing rewritten, the usual case, which takes no lock).
    fn flush_started(&self) -> Option<FlushMark> {
        if !self.rewritten.load(Ordering::Acquire) {
            return None;
        }
        let st = self.state();
        let mark = subtract(&st.durable, &st.bad);
        (!mark.is_empty()).then_some(FlushMark(mark))
    }

    /// The flush `mark` was taken for completed: its rewrites are durable, and the log drops
    /// them, but for ranges listed again since (a write there failed after the mark). A log
    /// that cannot be written keeps them: the stop tries again (`settle`) and reports it.
    fn flushed(&self, mark: &FlushMark) {
        let Some(rec) = &self.recording else { return };
        let mut guard = self.state();
        let st = &mut *guard;
        let drop = subtract(&mark.0, &st.bad);
        let durable = subtract(&st.durable, &drop);
        if durable != st.durable && (rec.persist)(&durable).is_ok() {
            st.durable = durable;
        }
        self.rewritten.store(st.durable != st.bad, Ordering::Release);
    }

    /// Whether a failed write of `span` would be listed (recording, listing, in the data area).
    fn listable(&self, span: &Range<u64>) -> bool {
        self.recording.as_ref().is_some_and(|rec| span.start >= rec.from_byte)
            && self.listing.load(Ordering::Acquire)
    }

    /// A write of `span` failed: lists it durably if the log can take it (the write then
    /// counts as done). Also for writes made outside the runtime's members (the log's replay
    /// at assemble, `uraid_md::ppl`).
    pub fn list_failed_write(&self, span: &Range<u64>) -> bool {
        self.listable(span) && self.list(span)
    }

    /// Lists `span` durably whether or not failed writes are listed now (`set_listing`): a
    /// block the array can neither read nor rebuild, which a copy onto this device must mark
    /// rather than leave blank (md's replace, `MemberOp::ListBadReplacement`).
    pub fn list_unproducible(&self, span: &Range<u64>) -> bool {
        let in_data = self.recording.as_ref().is_some_and(|rec| span.start >= rec.from_byte);
        in_data && self.list(span)
    }

    /// Lists `span` durably if the log can take it.
    fn list(&self, span: &Range<u64>) -> bool {
        let Some(rec) = &self.recording else { return false };
        let mut st = self.state();
        let mut durable = st.durable.clone();
        durable.push(span.clone());
        let durable = normalized(durable);
        if (rec.persist)(&durable).is_err() {
            return false;
        }
        st.durable = durable;
        let mut bad = std::mem::take(&mut st.bad);
        bad.push(span.clone());
        st.bad = normalized(bad);
        self.listed.store(true, Ordering::Release);
        true
    }

    /// Everything written so far is durable (the caller flushed): the log may drop what has
    /// been rewritten. A list that never records has nothing to write.
    pub fn settle(&self) -> io::Result<()> {
        let Some(rec) = &self.recording else { return Ok(()) };
        let mut guard = self.state();
        let st = &mut *guard;
        if st.durable != st.bad {
            (rec.persist)(&st.bad)?;
            st.durable.clone_from(&st.bad);
        }
        self.rewritten.store(false, Ordering::Release);
        Ok(())
    }
}

/// `ranges` sorted by start, empty ones dropped, overlapping and touching ones merged: the
/// form `overlaps` takes.
#[must_use]
pub fn normalized(mut ranges: Vec<Range<u64>>) -> Vec<Range<u64>> {
    ranges.retain(|r| r.start < r.end);
    ranges.sort_by_key(|r| r.start);
    let mut merged: Vec<Range<u64>> = Vec::with_capacity(ranges.len());
    for r in ranges {
        match merged.last_mut() {
            Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
            _ => merged.push(r),
        }
    }
    merged
}

/// Whether `r` overlaps one of `bad` (`normalized`: sorted and disjoint, so a binary search).
#[must_use]
pub fn overlaps(bad: &[Range<u64>], r: &Range<u64>) -> bool {
    let first_ending_after = bad.partition_point(|b| b.end <= r.start);
    bad.get(first_ending_after).is_some_and(|b| b.start < r.end)
}

/// `bad` with `good` cut out.
fn cut(bad: &[Range<u64>], good: &Range<u64>) -> Vec<Range<u64>> {
    let mut out = Vec::with_capacity(bad.len() + 1);
    for b in bad {
        if b.end <= good.start || good.end <= b.start {
            out.push(b.clone());
            continue;
        }
        if b.start < good.start {
            out.push(b.start..good.start);
        }
        if good.end < b.end {
            out.push(good.end..b.end);
        }
    }
    out
}

/// `ranges` (`normalized`) with every range of `minus` cut out.
fn subtract(ranges: &[Range<u64>], minus: &[Range<u64>]) -> Vec<Range<u64>> {
    minus.iter().fold(ranges.to_vec(), |left, m| cut(&left, m))
}

/// A member instance reading around its device's `BadBlockList`.
pub struct KnownBad<M: Member> {
    inner: M,
    list: Arc<BadBlockList>,
    /// Writes in flight this wrapper must hear back about (over a bad range, or in the data
    /// area while recording): tag to the bytes they cover.
    writes: HashMap<u64, Range<u64>>,
    /// Flushes in flight whose completion drops rewritten ranges from the log: tag to mark.
    flushes: HashMap<u64, FlushMark>,
    failed: Vec<IoCompletion>,
}

impl<M: Member> KnownBad<M> {
    pub fn new(inner: M, list: Arc<BadBlockList>) -> KnownBad<M> {
        KnownBad {
            inner,
            list,
            writes: HashMap::new(),
            flushes: HashMap::new(),
            failed: Vec::new(),
        }
    }

    /// The ranges still bad.
    #[must_use]
    pub fn bad(&self) -> Vec<Range<u64>> {
        self.list.bad()
    }
}

impl<M: Member> Member for KnownBad<M> {
    fn info(&self) -> &MemberInfo {
        self.inner.info()
    }

    fn counters(&self) -> &Arc<MemberCounters> {
        self.inner.counters()
    }

    unsafe fn submit(&mut self, req: IoRequest) {
        let span = req.offset_bytes..req.end_bytes();
        match req.op {
            IoOp::Read if self.list.overlaps(&span) => {
                let counters = self.inner.counters();
                counters.record_submit(req.op, req.len_bytes);
                counters.record_error();
                self.failed.push(IoCompletion { tag: req.tag, result: Err(IoFailure::KnownBad) });
                return;
            }
            IoOp::Write { .. } if self.list.listable(&span) || self.list.overlaps(&span) => {
                self.writes.insert(req.tag, span);
            }
            IoOp::Flush => {
                if let Some(mark) = self.list.flush_started() {
                    self.flushes.insert(req.tag, mark);
                }
            }
            _ => {}
        }
        // SAFETY: forwarded: our caller's contract is the inner member's.
        unsafe { self.inner.submit(req) };
    }

    fn flush_submissions(&mut self) -> io::Result<()> {
        self.inner.flush_submissions()
    }

    fn reap(&mut self, out: &mut Vec<IoCompletion>, wait: bool) -> io::Result<()> {
        let failed = !self.failed.is_empty();
        out.append(&mut self.failed);
        let start = out.len();
        self.inner.reap(out, wait && !failed)?;
        if !self.flushes.is_empty() {
            for c in &out[start..] {
                if let Some(mark) = self.flushes.remove(&c.tag)
                    && c.result.is_ok()
                {
                    self.list.flushed(&mark);
                }
            }
        }
        if !self.writes.is_empty() {
            for c in &mut out[start..] {
                let Some(span) = self.writes.remove(&c.tag) else { continue };
                match &c.result {
                    Ok(()) => self.list.cleared(&span),
                    // The device refused the write (not a power cut, not a bug of ours).
                    Err(
                        IoFailure::Os { .. } | IoFailure::Short { .. } | IoFailure::Injected(_),
                    ) if self.list.list_failed_write(&span) => {
                        c.result = Ok(());
                    }
                    Err(_) => {}
                }
            }
        }
        Ok(())
    }

    fn in_flight(&self) -> usize {
        self.inner.in_flight() + self.failed.len()
    }

    /// A listed range reads as an error, not zeros, whatever the device holds there: it
    /// counts as data (the array rebuilds it from the other members).
    fn allocated(&self, span: Range<u64>) -> Option<Vec<Range<u64>>> {
        let mut ranges = self.inner.allocated(span.clone())?;
        let bad = self.list.bad();
        ranges.extend(bad.iter().map(|b| b.start.max(span.start)..b.end.min(span.end)));
        Some(normalized(ranges))
    }

    fn next_due_ns(&self) -> Option<u64> {
        if self.failed.is_empty() { self.inner.next_due_ns() } else { Some(0) }
    }

    fn list_bad(&mut self, span: Range<u64>) -> bool {
        self.list.list_failed_write(&span)
    }

    fn list_unproducible(&mut self, span: Range<u64>) -> bool {
        self.list.list_unproducible(&span)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::member_memory::MemoryMember;

    fn run<M: Member>(m: &mut KnownBad<M>, req: IoRequest) -> Result<(), IoFailure> {
        // SAFETY: the test keeps every buffer alive and untouched until the reap below.
        unsafe { m.submit(req) };
        m.flush_submissions().unwrap();
        let mut out = Vec::new();
        while out.is_empty() {
            m.reap(&mut out, true).unwrap();
        }
        out.pop().unwrap().result
    }

    #[test]
    fn overlaps_finds_any_range_it_touches() {
        let bad = normalized(vec![100..200, 0..0, 300..400, 150..250]);
        assert_eq!(bad, vec![100..250, 300..400]);
        for (r, want) in [(0..100, false), (0..101, true), (249..300, true), (250..300, false)] {
            assert_eq!(overlaps(&bad, &r), want, "{r:?}");
        }
        assert!(overlaps(&bad, &(399..1000)) && !overlaps(&bad, &(400..1000)));
        assert!(!overlaps(&[], &(0..10)));
    }

    #[test]
    fn reads_over_a_bad_range_fail_until_a_write_makes_it_good() {
        let list = BadBlockList::fixed(vec![8192..12288, 4096..8192]);
        let mut m = KnownBad::new(MemoryMember::new("m", 1 << 20), list);
        assert_eq!(m.bad(), vec![4096..12288], "merged");
        let mut buf = vec![0u8; 4096];
        assert!(run(&mut m, IoRequest::read(1, 0, &mut buf)).is_ok());
        assert_eq!(run(&mut m, IoRequest::read(2, 8192, &mut buf)), Err(IoFailure::KnownBad));
        let mut big = vec![0u8; 16384];
        assert_eq!(run(&mut m, IoRequest::read(3, 0, &mut big)), Err(IoFailure::KnownBad));
        let data = vec![7u8; 4096];
        assert!(run(&mut m, IoRequest::write(4, 8192, &data, false)).is_ok());
        assert_eq!(m.bad(), vec![4096..8192], "rewritten, good again");
        assert!(run(&mut m, IoRequest::read(5, 8192, &mut buf)).is_ok());
        assert_eq!(buf, data);
        assert_eq!(run(&mut m, IoRequest::read(6, 4096, &mut buf)), Err(IoFailure::KnownBad));
    }

    /// Every list a persist wrote, in order.
    type Persisted = Arc<Mutex<Vec<Vec<Range<u64>>>>>;

    /// A list recording into what it returns (the lists each persist wrote), refusing more
    /// than `room` ranges.
    fn recording(room: usize) -> (Arc<BadBlockList>, Persisted) {
        let log = Arc::new(Mutex::new(Vec::new()));
        let seen = log.clone();
        let persist: PersistBadBlocks = Box::new(move |ranges| {
            if ranges.len() > room {
                return Err(io::Error::other("the log is full"));
            }
            seen.lock().unwrap().push(ranges.to_vec());
            Ok(())
        });
        (BadBlockList::recording(vec![], 8192, persist), log)
    }

    #[test]
    fn a_failed_data_write_is_listed_durably_and_counts_as_done() {
        let (list, log) = recording(2);
        let mut faulty = crate::Faulty::new(MemoryMember::new("m", 1 << 20), 1);
        faulty.fail_writes(16384..20480);
        faulty.fail_writes(0..4096);
        let mut m = KnownBad::new(faulty, list.clone());
        let data = vec![5u8; 4096];
        // Below the data area (metadata): the member fails, as before.
        assert!(run(&mut m, IoRequest::write(1, 0, &data, false)).is_err());
        assert!(list.bad().is_empty());
        assert!(run(&mut m, IoRequest::write(2, 16384, &data, false)).is_ok(), "listed");
        assert_eq!(*log.lock().unwrap(), vec![vec![16384..20480]], "durable before done");
        let mut buf = vec![0u8; 4096];
        assert_eq!(run(&mut m, IoRequest::read(3, 16384, &mut buf)), Err(IoFailure::KnownBad));
        // A second instance of the member (another worker's) reads around it too.
        let mut other = KnownBad::new(MemoryMember::new("m", 1 << 20), list.clone());
        assert_eq!(run(&mut other, IoRequest::read(4, 12288, &mut buf)), Ok(()));
        assert_eq!(run(&mut other, IoRequest::read(5, 16384, &mut buf)), Err(IoFailure::KnownBad));
        // Rewritten: good for reads at once, out of the log only once settled (flushed).
        m.inner.heal();
        assert!(run(&mut m, IoRequest::write(6, 16384, &data, false)).is_ok());
        assert!(list.bad().is_empty());
        assert_eq!(list.durable(), vec![16384..20480]);
        list.settle().unwrap();
        assert!(list.durable().is_empty());
        assert_eq!(log.lock().unwrap().last().unwrap(), &Vec::<Range<u64>>::new());
    }

    fn flush(m: &mut KnownBad<impl Member>, tag: u64) -> Result<(), IoFailure> {
        run(m, IoRequest::flush(tag))
    }

    #[test]
    fn a_flush_drops_the_ranges_rewritten_before_it_from_the_log() {
        let (list, log) = recording(4);
        let mut faulty = crate::Faulty::new(MemoryMember::new("m", 1 << 20), 1);
        faulty.fail_writes(16384..24576);
        faulty.fail_writes(40960..45056);
        let mut m = KnownBad::new(faulty, list.clone());
        let data = vec![5u8; 4096];
        assert!(run(&mut m, IoRequest::write(1, 16384, &data, false)).is_ok(), "listed");
        assert!(run(&mut m, IoRequest::write(2, 20480, &data, false)).is_ok(), "listed");
        assert!(run(&mut m, IoRequest::write(3, 40960, &data, false)).is_ok(), "listed");
        assert_eq!(list.durable(), vec![16384..24576, 40960..45056]);
        let writes_before = log.lock().unwrap().len();
        // Nothing rewritten: a flush writes no log.
        flush(&mut m, 4).unwrap();
        assert_eq!(log.lock().unwrap().len(), writes_before);
        m.inner.heal();
        assert!(run(&mut m, IoRequest::write(5, 16384, &data, false)).is_ok(), "rewritten");
        assert_eq!(list.durable(), vec![16384..24576, 40960..45056], "not durable yet");
        flush(&mut m, 6).unwrap();
        assert_eq!(list.durable(), vec![20480..24576, 40960..45056]);
        assert_eq!(log.lock().unwrap().last().unwrap(), &list.durable(), "the log written");
        // Rewritten, then listed again before the flush completes: it stays in the log. The
        // mark is taken as the flush is submitted, the write fails before it completes.
        assert!(run(&mut m, IoRequest::write(7, 20480, &data, false)).is_ok(), "rewritten");
        let mark = list.flush_started().expect("a rewrite to drop");
        m.inner.fail_writes(20480..24576);
        assert!(run(&mut m, IoRequest::write(8, 20480, &data, false)).is_ok(), "listed again");
        list.flushed(&mark);
        assert_eq!(list.durable(), vec![20480..24576, 40960..45056]);
        // A rewrite after the flush was submitted waits for the next flush.
        m.inner.heal();
        let mark = list.flush_started();
        assert!(mark.is_none(), "nothing rewritten when it was submitted");
        assert!(run(&mut m, IoRequest::write(9, 40960, &data, false)).is_ok(), "rewritten");
        assert_eq!(list.durable(), vec![20480..24576, 40960..45056]);
        // A flush that fails drops nothing.
        let faulty = crate::Faulty::new(MemoryMember::new("m", 1 << 20), 1);
        let mut failing = KnownBad::new(faulty, list.clone());
        failing.inner.fail_member();
        assert!(flush(&mut failing, 10).is_err());
        assert_eq!(list.durable(), vec![20480..24576, 40960..45056]);
        flush(&mut m, 11).unwrap();
        assert_eq!(list.durable(), vec![20480..24576]);
        assert_eq!(list.bad(), vec![20480..24576]);
        assert!(!list.rewritten.load(Ordering::Acquire), "the log holds nothing rewritten");
    }

    #[test]
    fn a_full_log_leaves_the_write_failed() {
        let (list, log) = recording(1);
        let mut faulty = crate::Faulty::new(MemoryMember::new("m", 1 << 20), 1);
        faulty.fail_writes(8192..65536);
        let mut m = KnownBad::new(faulty, list.clone());
        let data = vec![5u8; 4096];
        assert!(run(&mut m, IoRequest::write(1, 8192, &data, false)).is_ok());
        assert!(run(&mut m, IoRequest::write(2, 12288, &data, false)).is_ok(), "merged: one");
        assert!(run(&mut m, IoRequest::write(3, 32768, &data, false)).is_err(), "no room");
        assert_eq!(list.durable(), vec![8192..16384]);
        assert_eq!(log.lock().unwrap().len(), 2);
    }

    #[test]
    fn a_paused_list_leaves_the_write_failed_until_resumed() {
        let (list, log) = recording(4);
        let mut faulty = crate::Faulty::new(MemoryMember::new("m", 1 << 20), 1);
        faulty.fail_writes(8192..16384);
        let mut m = KnownBad::new(faulty, list.clone());
        let data = vec![5u8; 4096];
        list.set_listing(false);
        assert!(run(&mut m, IoRequest::write(1, 8192, &data, false)).is_err(), "a replacement's");
        assert!(list.bad().is_empty() && log.lock().unwrap().is_empty());
        list.set_listing(true);
        assert!(run(&mut m, IoRequest::write(2, 8192, &data, false)).is_ok(), "a member's");
        assert_eq!(list.bad(), vec![8192..12288]);
    }
}
