//! The test rig every workload runs on: an engine (`Array`) and the real driver loop
//! (`uraid_io::Driver`) over members wrapped in `Recording`, plus a model of what the array
//! should hold, against which every read is checked when it completes.
//!
//! Queue depth. `run(requests, iodepth)` keeps up to `iodepth` requests outstanding the way a
//! block layer does: it plugs the engine around each batch of submissions and stays plugged
//! while it has more requests to send, so partial-stripe writes are held (md's delayed list)
//! until later requests fill their stripes. The driver runs each wave until the engine is idle;
//! when the only work left is writes held for the plugged submitter, it reports
//! `DriverError::Stalled`, which is the moment a block layer with room in its queue submits its
//! next request. With the queue full (or nothing left to send) the rig unplugs, and the held
//! writes go. On memory members a wave is performed in one go, so the figures count member
//! I/Os exactly and do not depend on timing.

use super::Case;
use super::recording::{Logged, Recording};
use crate::arena::fill_random;
use anyhow::{Context, Result, bail, ensure};
use std::collections::BTreeMap;
use uraid_core::array::{Array, ArrayConfig, ReqId};
use uraid_core::stripe::STRIPE_CACHE_SIZE_DEFAULT;
use uraid_core::{DiskIndex, DiskRole, Geometry, Level, SECTOR_BYTES, Sector, StripeNumber};
use uraid_io::{
    CountersSnapshot, DiskModel, Driver, DriverError, ManualClock, Member, MemoryMember, Throttled,
};

/// An array's shape and its members' size.
#[derive(Clone, Debug)]
pub struct Spec {
    pub level: Level,
    pub members: usize,
    pub chunk_bytes: u64,
    pub stripe_size_bytes: u64,
    pub member_bytes: u64,
}

impl Spec {
    #[must_use]
    pub fn geometry(&self) -> Geometry {
        let layout = self.level.default_layout();
        Geometry::new(self.level, layout, self.members, self.chunk_bytes).expect("a valid shape")
    }

    #[must_use]
    pub fn data_disks(&self) -> usize {
        self.members - usize::from(self.level.max_degraded())
    }

    /// Data bytes in one stripe.
    #[must_use]
    pub fn stripe_bytes(&self) -> u64 {
        self.data_disks() as u64 * self.chunk_bytes
    }

    /// The row description for a workload on this array.
    #[must_use]
    pub fn case(&self, bs_bytes: u64, iodepth: usize, pattern: &'static str) -> Case {
        Case {
            level: self.level.number(),
            members: self.members,
            chunk_bytes: self.chunk_bytes,
            stripe_size_bytes: self.stripe_size_bytes,
            bs_bytes,
            iodepth,
            state: "healthy".to_owned(),
            pattern,
        }
    }

    fn config(&self) -> ArrayConfig {
        ArrayConfig {
            geometry: self.geometry(),
            stripe_size_bytes: self.stripe_size_bytes,
            stripe_cache_size: STRIPE_CACHE_SIZE_DEFAULT,
            member_sectors: self.member_bytes / SECTOR_BYTES,
        }
    }
}

/// A user request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Req {
    Read { sector: u64, bytes: usize },
    Write { sector: u64, bytes: usize },
    Flush,
}

pub struct Rig<M: Member> {
    pub spec: Spec,
    pub array: Array,
    pub driver: Driver<Recording<M>>,
    /// What the array holds: every write lands here when it is submitted.
    model: Vec<u8>,
    outstanding: BTreeMap<u64, Req>,
    next_id: u64,
    payload_seed: u64,
    plugged: bool,
    /// Timing mode (see `set_timing`): each request's buffer, kept for replay.
    saved: Option<BTreeMap<(bool, u64, usize), Vec<u8>>>,
    /// Requests replayed from `saved`: neither filled nor checked.
    replayed: std::collections::BTreeSet<u64>,
    /// A replayed write's payload is copied into a new buffer as it is submitted (see
    /// `set_copy_payloads`).
    copy_payloads: bool,
}

impl Rig<MemoryMember> {
    /// An array on zeroed memory members (all-zero stripes have all-zero parity: consistent).
    pub fn memory(spec: &Spec) -> Result<Rig<MemoryMember>> {
        Rig::new(spec, memory_members(spec, 0)?)
    }

    /// As `memory`, with a ring of `ring_bytes` for the partial parity log after each
    /// member's data area (the engine has no log until `enable_partial_parity_log`).
    pub fn memory_with_ring(spec: &Spec, ring_bytes: u64) -> Result<Rig<MemoryMember>> {
        let mut rig = Rig::new(spec, memory_members(spec, ring_bytes)?)?;
        // The driver's builders take it by value: a member-less stand-in holds its place.
        let stand_in = Driver::new(vec![Box::new(Recording::new(MemoryMember::new("none", 0)))]);
        let driver = std::mem::replace(&mut rig.driver, stand_in);
        rig.driver = driver.with_log_offset_bytes(spec.member_bytes);
        Ok(rig)
    }
}

/// Zeroed memory members of `spec`'s size and `extra_bytes` more.
fn memory_members(spec: &Spec, extra_bytes: u64) -> Result<Vec<MemoryMember>> {
    let size = usize::try_from(spec.member_bytes + extra_bytes)?;
    Ok((0..spec.members).map(|i| MemoryMember::new(&format!("mem{i}"), size)).collect())
}

/// A memory member that behaves, in simulated time, like a modelled disk.
pub type Modelled = Throttled<MemoryMember, ManualClock>;

impl Rig<Modelled> {
    /// An array on zeroed memory members modelled as `model` on `clock`, each with
    /// `extra_bytes` after its data area for what `place` tells the driver lives there (the
    /// bitmap, the log rings).
    pub fn modelled(
        spec: &Spec,
        model: DiskModel,
        clock: &ManualClock,
        extra_bytes: usize,
        place: impl FnOnce(Driver<Recording<Modelled>>) -> Driver<Recording<Modelled>>,
    ) -> Result<Rig<Modelled>> {
        let size = usize::try_from(spec.member_bytes)? + extra_bytes;
        let disk =
            |name: &str, size| Throttled::new(MemoryMember::new(name, size), model, clock.clone());
        let members = (0..spec.members).map(|i| disk(&format!("disk{i}"), size)).collect();
        let mut rig = Rig::new(spec, members)?;
        // The driver's builders take it by value: a member-less stand-in holds its place.
        let stand_in = Driver::new(vec![Box::new(Recording::new(disk("none", 0)))]);
        rig.driver = place(std::mem::replace(&mut rig.driver, stand_in));
        Ok(rig)
    }
}

impl<M: Member> Rig<M> {
    pub fn new(spec: &Spec, members: Vec<M>) -> Result<Rig<M>> {
        ensure!(members.len() == spec.members, "{} members for {spec:?}", members.len());
        let mut array = Array::new(spec.config())?;
        // As the runtime runs it; the rig's `release_held_writes` calls stand for the
        // runtime's timer, which ends a hold once no request comes.
        array.set_write_back(true);
        let size = usize::try_from(array.size_sectors() * SECTOR_BYTES)?;
        let members = members.into_iter().map(|m| Box::new(Recording::new(m))).collect();
        Ok(Rig {
            spec: spec.clone(),
            array,
            driver: Driver::new(members),
            model: vec![0; size],
            outstanding: BTreeMap::new(),
            next_id: 0,
            payload_seed: 1,
            plugged: false,
            saved: None,
            replayed: std::collections::BTreeSet::new(),
            copy_payloads: false,
        })
    }

    #[must_use]
    pub fn size_bytes(&self) -> u64 {
        self.model.len() as u64
    }

    /// A new engine over the same members: nothing cached, no member failed.
    pub fn fresh_engine(&mut self) -> Result<()> {
        self.array = Array::new(self.spec.config())?;
        self.array.set_write_back(true);
        Ok(())
    }

    pub fn fail(&mut self, member: usize) {
        self.array.fail_member(DiskIndex(u16::try_from(member).expect("a member index")));
    }

    /// Every member's counters added up.
    #[must_use]
    pub fn counters(&self) -> CountersSnapshot {
        self.driver.counters_total()
    }

    /// Every member's I/O log since the last call, in member order.
    pub fn take_logs(&mut self) -> Vec<Vec<Logged>> {
        (0..self.spec.members).map(|m| self.driver.member_mut(m).take_log()).collect()
    }

    /// What `member` holds at `offset_bytes` of its data area.
    #[must_use]
    pub fn role(&self, member: usize, offset_bytes: u64) -> DiskRole {
        let stripe = StripeNumber(offset_bytes / self.spec.chunk_bytes);
        self.array_geometry().stripe_map(stripe).roles[member]
    }

    fn array_geometry(&self) -> Geometry {
        self.spec.geometry()
    }

    /// Writes the whole array with full-stripe writes (fresh contents for the model).
    pub fn fill(&mut self) -> Result<()> {
        let step = (self.spec.stripe_bytes() * 4).min(self.size_bytes());
        let size = self.size_bytes();
        let reqs = (0..size).step_by(step as usize).map(|at| Req::Write {
            sector: at / SECTOR_BYTES,
            bytes: usize::try_from(step.min(size - at)).expect("fits"),
        });
        self.run(reqs, 4)
    }

    /// Reads the whole array back and checks it against the model.
    pub fn verify_all(&mut self) -> Result<()> {
        let size = self.size_bytes();
        let step = 1u64 << 20;
        let reqs = (0..size).step_by(step as usize).map(|at| Req::Read {
            sector: at / SECTOR_BYTES,
            bytes: usize::try_from(step.min(size - at)).expect("fits"),
        });
        self.run(reqs, 8).context("reading back the whole array")
    }

    /// Reads the whole array back with a fresh engine: healthy, then with one member failed,
    /// then (RAID6) two.
    pub fn verify_with_failures(&mut self) -> Result<()> {
        self.fresh_engine()?;
        self.verify_all()?;
        for failed in 0..usize::from(self.spec.level.max_degraded()) {
            self.fail(failed * 3 % self.spec.members);
            self.verify_all().with_context(|| format!("{} members failed", failed + 1))?;
        }
        Ok(())
    }

    /// Performs `reqs` keeping up to `iodepth` outstanding (see the module comment).
    pub fn run(&mut self, reqs: impl IntoIterator<Item = Req>, iodepth: usize) -> Result<()> {
        assert!(iodepth > 0, "a queue holds at least one request");
        let mut reqs = reqs.into_iter().peekable();
        loop {
            while self.outstanding.len() < iodepth
                && let Some(req) = reqs.next()
            {
                self.set_plugged(true);
                self.submit(req);
            }
            if reqs.peek().is_none() {
                self.set_plugged(false);
            }
            let result = self.driver.run_until_idle(&mut self.array);
            self.collect()?;
            match result {
                Ok(()) => {}
                Err(DriverError::Stalled) if self.plugged => {
                    // Only writes held for us are left. With room in the queue we submit the
                    // next request; with the queue full, we wait for these and they go.
                    if self.outstanding.len() >= iodepth {
                        self.set_plugged(false);
                    }
                }
                Err(e) => return Err(e).context("driving the array"),
            }
            if self.outstanding.is_empty() && reqs.peek().is_none() {
                if !self.array.holds_writes_back() {
                    return Ok(());
                }
                // No request comes: the runtime's timer ends the hold.
                self.array.release_held_writes();
            }
        }
    }

    /// Performs `reqs` as fio does, open loop: a new request goes in as soon as one of the
    /// `iodepth` outstanding is acknowledged (`run` instead waits for the array to go idle
    /// between batches, which hides work done after an acknowledgement). Ends when every
    /// request is done and the array is idle.
    pub fn run_open(&mut self, reqs: impl IntoIterator<Item = Req>, iodepth: usize) -> Result<()> {
        assert!(iodepth > 0, "a queue holds at least one request");
        self.set_plugged(false);
        let mut reqs = reqs.into_iter().peekable();
        while reqs.peek().is_some() || !self.outstanding.is_empty() {
            while self.outstanding.len() < iodepth
                && let Some(req) = reqs.next()
            {
                self.submit(req);
            }
            let idle = self.driver.in_flight() == 0 && !self.array.busy();
            if idle && !self.outstanding.is_empty() {
                bail!("stalled with {} requests outstanding", self.outstanding.len());
            }
            self.driver.turn(&mut self.array, true).context("driving the array")?;
            self.collect()?;
        }
        // No request comes: the runtime's timer ends the hold.
        self.array.release_held_writes();
        self.driver.run_until_idle(&mut self.array).context("draining the array")?;
        self.collect()
    }

    /// Timing mode, for CPU measurements: a request of the same kind, place and size as one done
    /// before in this mode reuses that request's buffer as it came back, with no fill, no model
    /// update and no check (a write then writes again what the region already holds; a read
    /// was checked the first time). So timed passes cost only the array's work. Leaving the
    /// mode drops the buffers. Members log no I/O in this mode (`take_logs` finds none).
    pub fn set_timing(&mut self, on: bool) {
        self.saved = on.then(BTreeMap::new);
        for m in 0..self.spec.members {
            self.driver.member_mut(m).set_recording(!on);
        }
    }

    /// In timing mode, copies each replayed write's payload into a new buffer as it is
    /// submitted, as a server receives it from its socket: the array then finds it in the
    /// caches. Replayed as they came back, a pass's payloads (32 MiB for 8192 4 KiB writes)
    /// are out of the caches, and the parity kernels' cache probe takes that stripe for a
    /// streamed one and writes its parity past the caches (94-99% of RAID5's random writes
    /// did), which a server's writes do not see.
    pub fn set_copy_payloads(&mut self, on: bool) {
        self.copy_payloads = on;
    }

    fn set_plugged(&mut self, plugged: bool) {
        if plugged && !self.plugged {
            self.array.plug();
        } else if !plugged && self.plugged {
            self.array.unplug();
        }
        self.plugged = plugged;
    }

    fn submit(&mut self, req: Req) {
        self.next_id += 1;
        let id = ReqId(self.next_id);
        self.outstanding.insert(self.next_id, req);
        if let Some(buf) = self.saved.as_mut().and_then(|s| s.remove(&key(req))) {
            self.replayed.insert(self.next_id);
            let copy = self.copy_payloads && matches!(req, Req::Write { .. });
            let buf = if copy { buf.as_slice().to_vec() } else { buf };
            match req {
                Req::Read { sector, .. } => self.array.submit_read(id, Sector(sector), buf),
                Req::Write { sector, .. } => self.array.submit_write(id, Sector(sector), buf),
                Req::Flush => self.array.submit_flush(id),
            }
            return;
        }
        match req {
            Req::Flush => self.array.submit_flush(id),
            Req::Read { sector, bytes } => {
                self.array.submit_read(id, Sector(sector), vec![0; bytes]);
            }
            Req::Write { sector, bytes } => {
                let mut buf = vec![0; bytes];
                self.payload_seed += 1;
                fill_random(&mut buf, self.payload_seed);
                let at = usize::try_from(sector * SECTOR_BYTES).expect("fits");
                self.model[at..at + bytes].copy_from_slice(&buf);
                self.array.submit_write(id, Sector(sector), buf);
            }
        }
    }

    /// Takes finished requests; checks every read against the model.
    fn collect(&mut self) -> Result<()> {
        for (ReqId(id), result, buf) in self.array.take_completed() {
            let req = self.outstanding.remove(&id).expect("a request we submitted");
            result.with_context(|| format!("{req:?}"))?;
            let replayed = self.replayed.remove(&id);
            if let (Req::Read { sector, bytes }, false) = (req, replayed) {
                let at = usize::try_from(sector * SECTOR_BYTES).expect("fits");
                if buf != self.model[at..at + bytes] {
                    bail!(
                        "{req:?} returned wrong data (failed: {:?})",
                        self.array.failed_members()
                    );
                }
            }
            if let Some(saved) = &mut self.saved {
                saved.insert(key(req), buf);
            }
        }
        Ok(())
    }
}

/// A request's kind, place and size.
fn key(req: Req) -> (bool, u64, usize) {
    match req {
        Req::Read { sector, bytes } => (false, sector, bytes),
        Req::Write { sector, bytes } => (true, sector, bytes),
        Req::Flush => (false, u64::MAX, 0),
    }
}
