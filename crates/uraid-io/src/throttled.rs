//! A wrapper that makes any member behave, in time, like a disk: each I/O's completion becomes
//! visible only once its modelled finish time has passed on the injected clock.
//!
//! The model, per I/O in submission order (one actuator, one data channel):
//!
//! ```text
//! start    = max(now, channel free, previous start + 1/iops_max)
//! seek     = seek_ns if the I/O does not begin where the previous one ended, else 0
//! channel free = start + seek + len / bandwidth      (transfer and seek serialize)
//! finish   = channel free + latency_ns               (fixed latency overlaps other I/Os)
//! ```
//!
//! Worked example, `hdd_7200()`: a random 4 KiB read costs 5.5 ms seek + 20 us transfer, so
//! back-to-back random reads finish every ~5.52 ms: ~181 IOPS. A sequential 1 MiB read costs
//! 1 MiB / 200 MB/s = 5.24 ms with no seek: 200 MB/s. Flush and discard move no data; they
//! wait for the channel (everything submitted before them) and add the latency.

use crate::clock::Clock;
use crate::counters::MemberCounters;
use crate::member::{IoCompletion, IoOp, IoRequest, MediaAccess, Member, MemberInfo};
use std::collections::BTreeMap;
use std::io;
use std::sync::Arc;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DiskModel {
    pub bandwidth_bytes_per_s: u64,
    /// 0: no limit beyond what seek and transfer impose.
    pub iops_max: u64,
    /// Added to every I/O, overlapping other I/Os (command overhead, flash read time).
    pub latency_ns: u64,
    /// Charged, serialized, when an I/O does not start where the previous one ended.
    pub seek_ns: u64,
}

impl DiskModel {
    /// A 7200 rpm SAS/SATA disk: ~200 MB/s sequential; a random I/O pays an average seek plus
    /// rotational latency. The data sheet's ~8 ms average seek with NCQ reordering a deep queue
    /// comes to ~5.5 ms per random I/O, i.e. ~180 random IOPS (the 150-200 disks measure).
    #[must_use]
    pub fn hdd_7200() -> DiskModel {
        DiskModel {
            bandwidth_bytes_per_s: 200_000_000,
            iops_max: 0,
            latency_ns: 100_000,
            seek_ns: 5_500_000,
        }
    }

    /// A PCIe 3 NVMe SSD: ~3 GB/s, ~500k IOPS, ~80 us per I/O, no seek.
    #[must_use]
    pub fn nvme() -> DiskModel {
        DiskModel {
            bandwidth_bytes_per_s: 3_000_000_000,
            iops_max: 500_000,
            latency_ns: 80_000,
            seek_ns: 0,
        }
    }

    fn transfer_ns(&self, len_bytes: usize) -> u64 {
        let ns = (len_bytes as u128 * 1_000_000_000) / u128::from(self.bandwidth_bytes_per_s);
        u64::try_from(ns).expect("a transfer under 584 years")
    }
}

pub struct Throttled<M: Member, C: Clock> {
    inner: M,
    /// The inner member's, rotational when the model seeks.
    info: MemberInfo,
    clock: C,
    model: DiskModel,
    channel_free_ns: u64,
    last_start_ns: Option<u64>,
    /// Where the previous I/O ended: the next one there needs no seek.
    head_offset_bytes: Option<u64>,
    /// tag -> modelled finish time, for I/Os the inner member has not completed.
    finish_ns: BTreeMap<u64, u64>,
    /// Completed by the inner member, waiting for their time: (finish, tag) -> completion.
    held: BTreeMap<(u64, u64), IoCompletion>,
}

impl<M: Member, C: Clock> Throttled<M, C> {
    pub fn new(inner: M, model: DiskModel, clock: C) -> Throttled<M, C> {
        assert!(model.bandwidth_bytes_per_s > 0, "a disk moves data");
        let info = MemberInfo { rotational: model.seek_ns > 0, ..inner.info().clone() };
        Throttled {
            inner,
            info,
            clock,
            model,
            channel_free_ns: 0,
            last_start_ns: None,
            head_offset_bytes: None,
            finish_ns: BTreeMap::new(),
            held: BTreeMap::new(),
        }
    }

    pub fn inner(&self) -> &M {
        &self.inner
    }

    /// The finish time of an I/O submitted now, advancing the model's state.
    fn schedule(&mut self, req: &IoRequest) -> u64 {
        let now = self.clock.now_ns();
        let mut start = now.max(self.channel_free_ns);
        if let (Some(last), true) = (self.last_start_ns, self.model.iops_max > 0) {
            start = start.max(last + 1_000_000_000 / self.model.iops_max);
        }
        let data = matches!(req.op, IoOp::Read | IoOp::Write { .. });
        let mut busy_ns = 0;
        if data {
            let sequential = self.head_offset_bytes == Some(req.offset_bytes);
            busy_ns = self.model.transfer_ns(req.len_bytes);
            busy_ns += if sequential { 0 } else { self.model.seek_ns };
            self.head_offset_bytes = Some(req.end_bytes());
        }
        self.last_start_ns = Some(start);
        self.channel_free_ns = start + busy_ns;
        self.channel_free_ns + self.model.latency_ns
    }

    /// Moves the inner member's completions to `held`, keyed by their finish time.
    fn collect(&mut self, wait: bool) -> io::Result<()> {
        let mut done = Vec::new();
        self.inner.reap(&mut done, wait)?;
        for c in done {
            let finish = self.finish_ns.remove(&c.tag).expect("a completion of a scheduled I/O");
            self.held.insert((finish, c.tag), c);
        }
        Ok(())
    }

    /// Appends held completions whose time has come, in finish order; returns how many.
    fn release(&mut self, out: &mut Vec<IoCompletion>) -> usize {
        let now = self.clock.now_ns();
        let mut count = 0;
        while let Some(entry) = self.held.first_entry() {
            if entry.key().0 > now {
                break;
            }
            out.push(entry.remove());
            count += 1;
        }
        count
    }
}

impl<M: Member, C: Clock> Member for Throttled<M, C> {
    fn info(&self) -> &MemberInfo {
        &self.info
    }

    fn counters(&self) -> &Arc<MemberCounters> {
        self.inner.counters()
    }

    unsafe fn submit(&mut self, req: IoRequest) {
        let finish = self.schedule(&req);
        let previous = self.finish_ns.insert(req.tag, finish);
        assert!(previous.is_none(), "tag {} is already in flight", req.tag);
        // SAFETY: forwarded: our caller's contract is the inner member's.
        unsafe { self.inner.submit(req) };
    }

    fn flush_submissions(&mut self) -> io::Result<()> {
        self.inner.flush_submissions()
    }

    fn reap(&mut self, out: &mut Vec<IoCompletion>, wait: bool) -> io::Result<()> {
        self.collect(false)?;
        if self.release(out) > 0 || !wait {
            return Ok(());
        }
        while self.in_flight() > 0 {
            if let Some(&(finish, _)) = self.held.keys().next() {
                self.clock.sleep_until_ns(finish);
            } else {
                self.collect(true)?;
            }
            if self.release(out) > 0 {
                break;
            }
        }
        Ok(())
    }

    fn in_flight(&self) -> usize {
        self.inner.in_flight() + self.held.len()
    }

    fn allocated(&self, span: std::ops::Range<u64>) -> Option<Vec<std::ops::Range<u64>>> {
        self.inner.allocated(span)
    }

    fn list_bad(&mut self, span: std::ops::Range<u64>) -> bool {
        self.inner.list_bad(span)
    }

    fn list_unproducible(&mut self, span: std::ops::Range<u64>) -> bool {
        self.inner.list_unproducible(span)
    }

    fn list_bad_replacement(&mut self, span: std::ops::Range<u64>) -> bool {
        self.inner.list_bad_replacement(span)
    }

    fn next_due_ns(&self) -> Option<u64> {
        self.held.keys().next().map(|&(finish, _)| finish)
    }
}

impl<M: Member + MediaAccess, C: Clock> MediaAccess for Throttled<M, C> {
    fn read_media(&self, offset_bytes: u64, buf: &mut [u8]) -> io::Result<()> {
        self.inner.read_media(offset_bytes, buf)
    }

    fn write_media(&mut self, offset_bytes: u64, data: &[u8]) -> io::Result<()> {
        self.inner.write_media(offset_bytes, data)
    }
}
