//! A member whose bad block log (md's per-member list of ranges known to hold no good data:
//! a write there failed, and md kept the member) names ranges: reads that overlap one fail
//! with `IoFailure::KnownBad` without reaching the device, so the engine rebuilds those blocks
//! from parity and rewrites them, as md reads around its bad blocks. A write that completes
//! over part of a range makes that part good again (md clears an entry the same way).
//!
//! The list is per member instance (each worker opens its own); a worker only ever touches the
//! stripes it owns, so the instances never need to agree on what was rewritten.

use crate::counters::MemberCounters;
use crate::member::{IoCompletion, IoFailure, IoOp, IoRequest, Member, MemberInfo};
use std::collections::HashMap;
use std::io;
use std::ops::Range;
use std::sync::Arc;

pub struct KnownBad<M: Member> {
    inner: M,
    /// Byte ranges of the device, sorted, disjoint.
    bad: Vec<Range<u64>>,
    /// Writes in flight over a bad range: tag to the bytes they cover.
    writes: HashMap<u64, Range<u64>>,
    failed: Vec<IoCompletion>,
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

impl<M: Member> KnownBad<M> {
    /// `bad`: byte ranges of the device (any order; overlaps are merged).
    pub fn new(inner: M, bad: Vec<Range<u64>>) -> KnownBad<M> {
        KnownBad { inner, bad: normalized(bad), writes: HashMap::new(), failed: Vec::new() }
    }

    /// The ranges still bad.
    #[must_use]
    pub fn bad(&self) -> &[Range<u64>] {
        &self.bad
    }

    /// `good` now holds good data: cut it out of the bad ranges.
    fn cleared(&mut self, good: &Range<u64>) {
        let mut out = Vec::with_capacity(self.bad.len() + 1);
        for b in self.bad.drain(..) {
            if b.end <= good.start || good.end <= b.start {
                out.push(b);
                continue;
            }
            if b.start < good.start {
                out.push(b.start..good.start);
            }
            if good.end < b.end {
                out.push(good.end..b.end);
            }
        }
        self.bad = out;
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
            IoOp::Read if overlaps(&self.bad, &span) => {
                let counters = self.inner.counters();
                counters.record_submit(req.op, req.len_bytes);
                counters.record_error();
                self.failed.push(IoCompletion { tag: req.tag, result: Err(IoFailure::KnownBad) });
                return;
            }
            IoOp::Write { .. } if overlaps(&self.bad, &span) => {
                self.writes.insert(req.tag, span);
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
        if !self.writes.is_empty() {
            for c in &out[start..] {
                if let Some(span) = self.writes.remove(&c.tag)
                    && c.result.is_ok()
                {
                    self.cleared(&span);
                }
            }
        }
        Ok(())
    }

    fn in_flight(&self) -> usize {
        self.inner.in_flight() + self.failed.len()
    }

    fn next_due_ns(&self) -> Option<u64> {
        if self.failed.is_empty() { self.inner.next_due_ns() } else { Some(0) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::member_memory::MemoryMember;

    fn run(m: &mut KnownBad<MemoryMember>, req: IoRequest) -> Result<(), IoFailure> {
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
        let mut m = KnownBad::new(MemoryMember::new("m", 1 << 20), vec![8192..12288, 4096..8192]);
        assert_eq!(m.bad(), std::slice::from_ref(&(4096..12288)), "merged");
        let mut buf = vec![0u8; 4096];
        assert!(run(&mut m, IoRequest::read(1, 0, &mut buf)).is_ok());
        assert_eq!(run(&mut m, IoRequest::read(2, 8192, &mut buf)), Err(IoFailure::KnownBad));
        let mut big = vec![0u8; 16384];
        assert_eq!(run(&mut m, IoRequest::read(3, 0, &mut big)), Err(IoFailure::KnownBad));
        let data = vec![7u8; 4096];
        assert!(run(&mut m, IoRequest::write(4, 8192, &data, false)).is_ok());
        assert_eq!(m.bad(), std::slice::from_ref(&(4096..8192)), "rewritten, good again");
        assert!(run(&mut m, IoRequest::read(5, 8192, &mut buf)).is_ok());
        assert_eq!(buf, data);
        assert_eq!(run(&mut m, IoRequest::read(6, 4096, &mut buf)), Err(IoFailure::KnownBad));
    }
}
