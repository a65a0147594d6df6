//! A wrapper that injects member faults, for tests and the fault model of the issue:
//! reads or writes failing at chosen byte ranges, every I/O failing after the first N, the
//! whole member failing, and a power cut that loses unflushed writes and tears in-flight ones
//! (the model is in `power.rs`).
//!
//! An injected failure never reaches the inner member; it completes at the next `reap` with
//! `IoFailure::Injected` and counts as an I/O and an error on the shared counters.

use crate::counters::MemberCounters;
use crate::member::{IoCompletion, IoFailure, IoOp, IoRequest, MediaAccess, Member, MemberInfo};
use crate::power::{PowerCutReport, VolatileCache};
use std::io;
use std::ops::Range;
use std::sync::Arc;

pub struct Faulty<M: Member + MediaAccess> {
    inner: M,
    read_faults: Vec<Range<u64>>,
    write_faults: Vec<Range<u64>>,
    /// Every I/O after this many fails.
    fail_after_count: Option<u64>,
    submitted_count: u64,
    member_failed: bool,
    /// Completions decided here, delivered at the next reap.
    injected: Vec<IoCompletion>,
    cache: VolatileCache,
    /// xorshift64 state for tearing: the same seed tears the same way.
    rng: u64,
}

impl<M: Member + MediaAccess> Faulty<M> {
    /// `seed` decides how power cuts tear in-flight writes.
    pub fn new(inner: M, seed: u64) -> Faulty<M> {
        Faulty {
            inner,
            read_faults: Vec::new(),
            write_faults: Vec::new(),
            fail_after_count: None,
            submitted_count: 0,
            member_failed: false,
            injected: Vec::new(),
            cache: VolatileCache::default(),
            rng: seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1,
        }
    }

    /// Reads overlapping `bytes` fail.
    pub fn fail_reads(&mut self, bytes: Range<u64>) {
        self.read_faults.push(bytes);
    }

    /// Writes overlapping `bytes` fail (and change nothing).
    pub fn fail_writes(&mut self, bytes: Range<u64>) {
        self.write_faults.push(bytes);
    }

    /// The next `count` I/Os behave; every one after fails.
    pub fn fail_after_ios(&mut self, count: u64) {
        self.fail_after_count = Some(self.submitted_count + count);
    }

    /// Every I/O from now on fails.
    pub fn fail_member(&mut self) {
        self.member_failed = true;
    }

    /// Removes every injected fault.
    pub fn heal(&mut self) {
        self.read_faults.clear();
        self.write_faults.clear();
        self.fail_after_count = None;
        self.member_failed = false;
    }

    pub fn inner(&self) -> &M {
        &self.inner
    }

    /// Cuts the power: waits for the I/Os in flight (they complete with `PowerLost` at the next
    /// reap), tears in-flight writes at a seeded sector boundary, and puts every sector that an
    /// undurable write changed back to its durable contents. The member works again afterwards,
    /// as a disk does after the power returns.
    pub fn power_cut(&mut self) -> io::Result<PowerCutReport> {
        self.inner.flush_submissions()?;
        let mut lost = Vec::new();
        while self.inner.in_flight() > 0 {
            self.inner.reap(&mut lost, true)?;
        }
        for c in lost {
            self.inner.counters().record_error();
            self.injected.push(IoCompletion { tag: c.tag, result: Err(IoFailure::PowerLost) });
        }
        let rng = &mut self.rng;
        let (plan, report) = self.cache.power_cut(|n| {
            *rng ^= *rng << 13;
            *rng ^= *rng >> 7;
            *rng ^= *rng << 17;
            *rng % n
        });
        for (offset, data) in plan {
            self.inner.write_media(offset, &data)?;
        }
        Ok(report)
    }

    /// Why `req` fails, if it does: a range fault fails every I/O that overlaps it, a vectored
    /// one as a whole.
    fn fault(&self, req: &IoRequest) -> Option<&'static str> {
        let overlaps = |faults: &[Range<u64>]| {
            faults.iter().any(|f| f.start < req.end_bytes() && req.offset_bytes < f.end)
        };
        if self.member_failed {
            return Some("member failed");
        }
        if self.fail_after_count.is_some_and(|n| self.submitted_count > n) {
            return Some("failing after N I/Os");
        }
        match req.op {
            IoOp::Read if overlaps(&self.read_faults) => Some("read error at an injected range"),
            IoOp::Write { .. } if overlaps(&self.write_faults) => {
                Some("write error at an injected range")
            }
            _ => None,
        }
    }
}

impl<M: Member + MediaAccess> Member for Faulty<M> {
    fn info(&self) -> &MemberInfo {
        self.inner.info()
    }

    fn counters(&self) -> &Arc<MemberCounters> {
        self.inner.counters()
    }

    unsafe fn submit(&mut self, req: IoRequest) {
        self.submitted_count += 1;
        if let Some(reason) = self.fault(&req) {
            let counters = self.inner.counters();
            counters.record_submit(req.op, req.len_bytes);
            counters.record_error();
            let result = Err(IoFailure::Injected(reason));
            self.injected.push(IoCompletion { tag: req.tag, result });
            return;
        }
        match req.op {
            IoOp::Write { fua } => {
                let inner = &self.inner;
                let current = |offset: u64| {
                    let mut old = vec![0u8; 512];
                    inner.read_media(offset, &mut old).expect("the medium reads");
                    old
                };
                // SAFETY: `req` is being submitted under the `Member::submit` contract. The
                // cache keeps the segments as one run, so a power cut tears a vectored write
                // at a sector boundary of the whole I/O, across segments.
                let data = unsafe { req.gather() };
                self.cache.write_submitted(req.tag, req.offset_bytes, data, fua, current);
            }
            IoOp::Flush => self.cache.flush_submitted(req.tag),
            IoOp::Read | IoOp::Discard => {}
        }
        // SAFETY: forwarded: our caller's contract is the inner member's.
        unsafe { self.inner.submit(req) };
    }

    fn flush_submissions(&mut self) -> io::Result<()> {
        self.inner.flush_submissions()
    }

    fn reap(&mut self, out: &mut Vec<IoCompletion>, wait: bool) -> io::Result<()> {
        let injected = !self.injected.is_empty();
        out.append(&mut self.injected);
        let start = out.len();
        self.inner.reap(out, wait && !injected)?;
        for c in &out[start..] {
            self.cache.completed(c.tag, c.result.is_ok());
        }
        Ok(())
    }

    fn in_flight(&self) -> usize {
        self.inner.in_flight() + self.injected.len()
    }

    fn next_due_ns(&self) -> Option<u64> {
        if self.injected.is_empty() { self.inner.next_due_ns() } else { Some(0) }
    }
}

impl<M: Member + MediaAccess> MediaAccess for Faulty<M> {
    fn read_media(&self, offset_bytes: u64, buf: &mut [u8]) -> io::Result<()> {
        self.inner.read_media(offset_bytes, buf)
    }

    fn write_media(&mut self, offset_bytes: u64, data: &[u8]) -> io::Result<()> {
        self.inner.write_media(offset_bytes, data)
    }
}
