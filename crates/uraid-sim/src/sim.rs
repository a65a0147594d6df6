//! The simulation loop: user requests in, member I/Os performed on simulated members in an
//! order the seed picks, completions checked against the oracle after every step.

use crate::config::{Sabotage, SimConfig};
use crate::member::SimMember;
use crate::oracle::{Oracle, ReadWatch, pattern};
use crate::report::{SimFailure, SimStats};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use uraid_core::array::{Array, IoArea, MemberIo, MemberOp, ReqId, SyncKind};
use uraid_core::{DiskIndex, SECTOR_BYTES, Sector};

pub(crate) struct Inflight {
    pub io: MemberIo,
    /// A write's data as the engine handed it over (it must not change until completion).
    pub data: Option<Vec<u8>>,
    pub flush_mark: u64,
    /// The same for the new disk of the member's replacement, if it has one (a flush goes
    /// to both).
    pub replacement_mark: Option<u64>,
    /// A log write queued for a member that has left its slot since (its replacement took
    /// it): written nowhere, as `uraid_io::Replacing` drops it.
    pub dropped: bool,
}

#[derive(Debug)]
pub(crate) enum User {
    Read(ReadWatch),
    Write {
        id: u64,
        sector: u64,
        sectors: u64,
        fua: bool,
    },
    Flush(u64),
    /// The flush that ends a rebuild: the member counts as in sync once it completes.
    RecoveryFlush(u64),
    /// A flush during a rebuild, after which uraid-md records `at` as the member's recovery
    /// offset (a restart goes on from there).
    RecoveryCheckpoint {
        t: u64,
        member: usize,
        at: u64,
    },
    /// The flush that ends a replacement's copy (`replace`).
    ReplaceFlush(u64),
    /// The flush before safe mode's clean mark (`safe_mode`).
    SafeModeFlush(u64),
    /// Expected to be refused (out of range).
    Invalid,
    Sync {
        kind: SyncKind,
        member_sector: u64,
        sectors: u64,
    },
}

/// Member-sector ranges (start, sectors): what a re-add's recovery covers.
pub(crate) type Ranges = Vec<(u64, u64)>;

pub struct Sim {
    pub(crate) cfg: SimConfig,
    pub(crate) rng: StdRng,
    pub(crate) array: Array,
    pub(crate) members: Vec<SimMember>,
    pub(crate) oracle: Oracle,
    pub(crate) inflight: Vec<Inflight>,
    pub(crate) user: BTreeMap<u64, User>,
    pub(crate) next_id: u64,
    pub(crate) step: u64,
    pub(crate) stats: SimStats,
    /// FNV-1a over every event: two runs of a seed must agree.
    pub(crate) trace: u64,
    /// A member being rebuilt: (member, next window start, window in flight).
    pub(crate) recovery: Option<(usize, u64, bool)>,
    /// For a member back by re-add: the member-sector ranges its recovery covers (else all).
    pub(crate) readd: Option<Ranges>,
    /// Members back in the engine (recovering) whose own pass waits for the one under way,
    /// with their re-add ranges: uraid-md queues each slot's pass first and runs one at a
    /// time, while every pass rebuilds in each head it touches every member recovering there.
    pub(crate) recovery_queue: std::collections::VecDeque<(usize, Option<Ranges>)>,
    /// Where the recovery under way goes on after a restart: what uraid-md's superblocks
    /// record, once a flush made the rebuilt blocks below it durable.
    pub(crate) recovery_checkpoint: u64,
    /// Per member: its recovery is a re-add's, recorded so in the superblocks (md's
    /// RECOVERY_BITMAP): a restart resumes it where bits are set. A replacement's take-over
    /// is recorded as a whole recovery (see uraid-md's `replacement_takes_over`).
    pub(crate) bitmap_recovery: Vec<bool>,
    /// Per member: md would refuse its re-add (parity rewritten without it since it left).
    pub(crate) readd_blocked: Vec<bool>,
    /// Member sectors of data written and read per member, data area (for I/O counts).
    pub(crate) data_read_sectors: u64,
    pub(crate) data_written_sectors: u64,
    /// Sync requests that finished (id, result is ok), for `sync_now`.
    pub(crate) syncs_done: Vec<u64>,
    pub(crate) plugged: bool,
    /// `--watch`: an array sector, its member and member sector; its events are printed.
    pub(crate) watch: Option<(u64, usize, u64)>,
    /// Per member: the metadata (md's superblocks) says it is faulty. A restart takes the
    /// failed set from here, not from the engine: a failure not yet recorded is forgotten.
    pub(crate) recorded_faulty: Vec<bool>,
    /// md's replace under way (`replace`), when the next one starts (a step), and the
    /// random stream that draws them (apart, so that seeds without one run as before).
    pub(crate) replacement: Option<crate::replace::Replacement>,
    pub(crate) replace_at: Option<u64>,
    pub(crate) replace_rng: StdRng,
    /// Per slot: how many replacements' new disks have taken it, now and when its last
    /// replacement began (a log write queued before then is for the disk of then).
    pub(crate) slot_disks: Vec<u64>,
    pub(crate) slot_disk_at_replacement: Vec<u64>,
    /// Completions are being reaped as a runtime turn does, nothing submitted between them.
    pub(crate) reap_burst: bool,
    /// Faults aimed at a replacement's first steps (`replace::join_faults`): the step at
    /// which its member is pulled, and the one at which the power goes.
    pub(crate) join_pull_at: Option<u64>,
    pub(crate) join_cut_at: Option<u64>,
    /// A power cut due right after a flush's acknowledgement (`faults::cut_after_flush`),
    /// and the random stream that draws them (apart, as `replace_rng`).
    pub(crate) cut_due: bool,
    pub(crate) cut_rng: StdRng,
    /// When the runtime's timer ends the write-back's holds (a stream of its own, so the
    /// workload of a seed is the same with the write-back or without).
    hold_rng: StdRng,
    /// Whether a restart reads the array back (`restart`), apart from the other streams.
    pub(crate) readback_rng: StdRng,
    /// md's safe mode (`safe_mode`).
    pub(crate) safe_mode: crate::safe_mode::SafeMode,
    /// Where the last write ended: half the writes continue there (since the eighth session
    /// of 2026-11-28), so that streams form and the write-back holds their partial stripes.
    stream_end: u64,
}

impl Sim {
    #[must_use]
    pub fn new(cfg: SimConfig) -> Sim {
        let mut rng = StdRng::seed_from_u64(cfg.seed);
        let mut array = Array::new(cfg.array_config()).expect("a valid configuration");
        let data_bytes = (cfg.member_sectors * SECTOR_BYTES) as usize;
        let mut bitmap = vec![0u8; cfg.bitmap_bytes()];
        // md's bitmap superblock starts with its magic; the engine leaves the header alone.
        if !bitmap.is_empty() {
            bitmap[..4].copy_from_slice(b"bitm");
        }
        let n_members = cfg.members;
        let members: Vec<SimMember> = (0..cfg.members)
            .map(|_| {
                let mut m = SimMember::new(data_bytes, |_| 0, &bitmap, cfg.log_bytes());
                m.bad_block_log = cfg.bad_block_logs;
                m.speed = if rng.random_bool(0.2) { 1 } else { 8 };
                m
            })
            .collect();
        if let Some(wi) = cfg.write_intent(bitmap) {
            array.enable_write_intent(&wi);
        }
        if let Some(log) = cfg.log(1) {
            array.enable_partial_parity_log(&log);
        }
        cfg.configure(&mut array);
        let oracle = Oracle::new(array.size_sectors());
        let mut replace_rng = StdRng::seed_from_u64(cfg.seed ^ 0x7e91_ace0_5eed_0001);
        let replace_at = crate::replace::first_replacement(&mut replace_rng);
        let cut_rng = StdRng::seed_from_u64(cfg.seed ^ 0xc07a_f7e2_f105_0002);
        let hold_rng = StdRng::seed_from_u64(cfg.seed ^ 0x401d_0000_7153_0003);
        let readback_rng = StdRng::seed_from_u64(cfg.seed ^ 0x4ead_bac4_0000_0004);
        let safe_mode = crate::safe_mode::SafeMode::new(cfg.seed);
        Sim {
            cfg,
            rng,
            array,
            oracle,
            inflight: Vec::new(),
            user: BTreeMap::new(),
            next_id: 1,
            step: 0,
            stats: SimStats::default(),
            trace: 0xcbf2_9ce4_8422_2325,
            recovery: None,
            readd: None,
            recovery_queue: std::collections::VecDeque::new(),
            recovery_checkpoint: 0,
            data_read_sectors: 0,
            data_written_sectors: 0,
            syncs_done: Vec::new(),
            plugged: false,
            watch: None,
            recorded_faulty: vec![false; members.len()],
            readd_blocked: vec![false; members.len()],
            bitmap_recovery: vec![false; members.len()],
            members,
            replacement: None,
            replace_at,
            replace_rng,
            slot_disks: vec![0; n_members],
            slot_disk_at_replacement: vec![0; n_members],
            reap_burst: false,
            join_pull_at: None,
            join_cut_at: None,
            cut_due: false,
            cut_rng,
            hold_rng,
            readback_rng,
            safe_mode,
            stream_end: 0,
        }
    }

    /// Prints every event touching array sector `sector` (a replay's magnifying glass).
    pub fn watch(&mut self, sector: u64) {
        let a = self.cfg.geometry().map_sector(Sector(sector));
        self.watch = Some((sector, a.disk.get(), a.member_sector.0));
        eprintln!("watching array sector {sector}: member {} sector {}", a.disk, a.member_sector.0);
    }

    /// With a watch: prints member I/O to the watched member sector (and which write's data
    /// it carries), so a replay shows how a sector came to hold what it holds.
    fn note_io(&self, what: &str, io: &MemberIo, data: Option<&[u8]>) {
        let Some((sector, member, member_sector)) = self.watch else { return };
        // Every member's I/O at that member sector: the stripe's whole story.
        let covers = (io.member.get() == member || io.op != MemberOp::Flush)
            && io.area == IoArea::Data
            && (io.op == MemberOp::Flush
                || (io.sector.0..io.sector.0 + io.sectors).contains(&member_sector));
        let bitmap = io.area == IoArea::Bitmap && io.member.get() == member;
        if io.area == IoArea::Log {
            eprintln!(
                "step {} {what} log {:?} member {} tag {} {}+{}",
                self.step, io.op, io.member, io.tag.0, io.sector.0, io.sectors
            );
            return;
        }
        if !covers && !bitmap {
            return;
        }
        if bitmap {
            let bits = data.map(|d| d[crate::config::BITMAP_HEADER_BYTES..][..4].to_vec());
            eprintln!("step {} {what} bitmap write member {member} bits {bits:x?}", self.step);
            return;
        }
        let carries = data.map(|d| {
            let at = ((member_sector - io.sector.0) * SECTOR_BYTES) as usize;
            crate::oracle::decode(sector, &d[at..at + SECTOR_BYTES as usize])
        });
        let carries = if io.member.get() == member { carries } else { None };
        eprintln!(
            "step {} {what} {:?} member {} tag {} {}+{} fua {} carries {carries:?}",
            self.step, io.op, io.member, io.tag.0, io.sector.0, io.sectors, io.fua
        );
    }

    fn note_user(&self, what: &str, id: u64, sector: u64, sectors: u64) {
        if self.watch.is_some_and(|(s, _, _)| (sector..sector + sectors).contains(&s)) {
            eprintln!("step {} {what} {id} at {sector}+{sectors}", self.step);
        }
    }

    pub(crate) fn note(&self, what: impl FnOnce() -> String) {
        if self.watch.is_some() {
            eprintln!("step {} {}", self.step, what());
        }
    }

    pub(crate) fn fail(&self, message: impl Into<String>) -> SimFailure {
        SimFailure { seed: self.cfg.seed, step: self.step, message: message.into() }
    }

    pub(crate) fn mix(&mut self, values: &[u64]) {
        for v in values {
            for b in v.to_le_bytes() {
                self.trace = (self.trace ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
            }
        }
    }

    /// Runs the whole workload, then checks everything reads back and parity is consistent.
    pub fn run(mut self) -> Result<(SimStats, u64), SimFailure> {
        let mut submitted = 0;
        while submitted < self.cfg.requests || !self.user.is_empty() || !self.inflight.is_empty() {
            self.step += 1;
            if self.step > 2_000_000 {
                return Err(self.fail("no progress after 2,000,000 steps"));
            }
            // Before the turn's submissions: the runtime's worker takes messages (a
            // replacement beginning) between turns, when the engine still holds what the last
            // turn's completions queued (until the fourth session of 2026-12-05 it began here
            // only with the queue empty, and log writes queued before it never came up).
            self.replacement_step()?;
            self.join_faults()?;
            self.pump();
            if std::mem::take(&mut self.cut_due) && self.may_cut() {
                self.stats.cuts_after_flush += 1;
                self.power_cut()?;
            }
            // The lifecycle layer writes the superblocks some time after a failure.
            if self.failures_unrecorded() && self.rng.random_bool(0.02) {
                self.record_failures();
            }
            let room = self.user.len() < self.cfg.queue_depth && submitted < self.cfg.requests;
            let roll = self.rng.random_range(0..1000);
            if self.cfg.faults && roll < 12 {
                self.fault()?;
            } else if roll < 20 {
                self.background()?;
            } else if room && (self.inflight.is_empty() || roll < 450) {
                self.submit_random()?;
                submitted += 1;
            } else if !self.inflight.is_empty() {
                self.complete_one()?;
            } else {
                self.unstick()?;
            }
            self.collect()?;
        }
        self.finish()?;
        self.add_engine_stats();
        self.stats.unknown_rereads = self.oracle.unknown_rereads;
        Ok((self.stats, self.trace))
    }

    /// Adds the engine's counters to the run's (at the end, and before a restart drops it).
    pub(crate) fn add_engine_stats(&mut self) {
        let e = self.array.stats();
        self.stats.acked_when_logged += e.writes_acked_when_logged;
        self.stats.acked_when_admitted += e.writes_acked_when_admitted;
        self.stats.held_back += e.writes_held_back;
        self.stats.writes_under_range += e.writes_under_log_range;
        self.stats.log_advances += e.log_advances;
        self.stats.log_ring_wraps += e.log_ring_wraps;
        self.stats.writes_behind += e.writes_behind;
        self.stats.stripe_batches += e.stripe_batches;
    }

    /// Nothing in flight but requests outstanding: the engine is waiting for a plug to end or
    /// a clock tick; anything else is a stall.
    pub(crate) fn unstick(&mut self) -> Result<(), SimFailure> {
        // Writes may be waiting for a failure's record: the lifecycle layer always makes it.
        self.record_failures();
        self.array.unplug();
        self.plugged = false;
        // An idle engine's holds end on the runtime's timer.
        self.array.release_held_writes();
        self.pump();
        if self.inflight.is_empty() {
            self.array.write_intent_tick();
            self.pump();
        }
        self.collect()?;
        if self.inflight.is_empty() && !self.user.is_empty() {
            // What completed may have let the engine move on (an advance started by the
            // end of the last one queues its member flushes at the next turn): the runtime's
            // worker takes another turn while a request is outstanding (seed 25022372).
            self.pump();
            self.collect()?;
        }
        if self.inflight.is_empty() && !self.user.is_empty() {
            let waiting: Vec<String> = self.user.values().map(|u| format!("{u:?}")).collect();
            return Err(self.fail(format!(
                "stalled: no member I/O, requests outstanding: {} (failed members {:?}, \
                 recovering {:?}, bitmap {:?}, log {:?})",
                waiting.join(", "),
                self.array.failed_members(),
                self.array.recovering(),
                self.array.write_intent_debug(),
                self.array.log_debug()
            )));
        }
        Ok(())
    }

    /// Takes every member I/O the engine has ready.
    pub(crate) fn pump(&mut self) {
        if self.reap_burst {
            return;
        }
        while let Some(io) = self.array.next_io() {
            let m = io.member.get();
            let data = matches!(io.op, MemberOp::Write | MemberOp::CopyWrite)
                .then(|| self.array.io_buf(&io).to_vec());
            let flush_mark = self.members[m].flush_mark();
            if io.area == IoArea::Data {
                match io.op {
                    MemberOp::Read => self.data_read_sectors += io.sectors,
                    MemberOp::Write | MemberOp::Discard => self.data_written_sectors += io.sectors,
                    MemberOp::Flush
                    | MemberOp::CopyWrite
                    | MemberOp::ListBad
                    | MemberOp::ListBadReplacement => {}
                }
            }
            self.stats.member_ios += 1;
            self.mix(&[io.tag.0, m as u64, io.sector.0, io.sectors, op_code(io.op)]);
            self.note_io("issue", &io, data.as_deref());
            // Queued before the replacement began: the member's alone (`Replacing`).
            let alone = io.before_replacement
                && self.cfg.sabotage != Some(Sabotage::ReplacementGetsEarlierLogWrites);
            let dropped = alone && self.slot_disks[m] != self.slot_disk_at_replacement[m];
            let replacement_mark = if alone { None } else { self.replacement_flush_mark(m) };
            self.stats.log_writes_before_replacement += u64::from(io.before_replacement);
            self.stats.log_writes_for_replaced_members += u64::from(dropped);
            self.inflight.push(Inflight { io, data, flush_mark, replacement_mark, dropped });
        }
    }

    /// An I/O in flight chosen at random, slow members' picked less often (its index).
    fn pick_inflight(&mut self) -> usize {
        let weights: Vec<u32> =
            self.inflight.iter().map(|f| self.members[f.io.member.get()].speed).collect();
        let mut pick = self.rng.random_range(0..weights.iter().sum::<u32>());
        weights
            .iter()
            .position(|&w| {
                if pick < w {
                    return true;
                }
                pick -= w;
                false
            })
            .expect("a pick below the total")
    }

    /// Completes one member I/O (`pick_inflight`).
    pub(crate) fn complete_one(&mut self) -> Result<(), SimFailure> {
        let index = self.pick_inflight();
        let f = self.inflight.swap_remove(index);
        let io = f.io;
        if f.dropped {
            self.complete_dropped(&io);
            return Ok(());
        }
        let mirror_data = f.data.clone();
        let member = &mut self.members[io.member.get()];
        let offset = member.offset(io.area, io.sector.0);
        let sabotage = self.cfg.sabotage;
        if io.op == MemberOp::Read && member.is_listed(offset, io.bytes()) {
            self.mix(&[io.tag.0, 2]);
            self.note_io("known bad", &io, None);
            self.stats.known_bad_reads += 1;
            self.array.complete_io_known_bad(io.tag);
            self.pump();
            return Ok(());
        }
        let ok = match io.op {
            MemberOp::Read => {
                let buf = self.array.io_buf_mut(&io);
                let ok = member.read(offset, buf);
                if ok && sabotage == Some(Sabotage::CorruptReads) && io.tag.0.is_multiple_of(64) {
                    buf[0] ^= 1;
                }
                ok
            }
            MemberOp::Write => {
                let data = f.data.expect("captured at submission");
                if self.array.io_buf(&io) != data.as_slice() {
                    return Err(self.fail(format!("the engine changed a write in flight: {io:?}")));
                }
                let listing =
                    member.fail_next_write && member.bad_block_log && io.area == IoArea::Data;
                let ok = member.write(offset, &data, io.fua);
                if listing && ok {
                    self.stats.writes_listed += 1;
                    self.note(|| {
                        format!("member {} lists {}+{}", io.member, io.sector.0, io.sectors)
                    });
                }
                ok
            }
            MemberOp::Discard => member.write(offset, &vec![0; io.bytes()], false),
            MemberOp::CopyWrite => {
                if f.data.as_deref() != Some(self.array.io_buf(&io)) {
                    return Err(self.fail(format!("the engine changed a copy in flight: {io:?}")));
                }
                true
            }
            MemberOp::ListBad => member.list(offset, io.bytes()),
            MemberOp::ListBadReplacement => {
                let m = io.member.get();
                let r = self.replacement.as_mut().filter(|r| r.member == m && !r.failed);
                r.is_some_and(|r| r.disk.list(offset, io.bytes()))
            }
            MemberOp::Flush if sabotage == Some(Sabotage::FlushesDoNothing) => !member.pulled,
            MemberOp::Flush => member.flush(f.flush_mark),
        };
        self.mirror(&io, offset, mirror_data, f.replacement_mark)?;
        self.mix(&[io.tag.0, u64::from(ok)]);
        self.note_io(if ok { "done" } else { "FAILED" }, &io, None);
        self.array.complete_io(io.tag, ok);
        self.pump();
        Ok(())
    }

    /// A log write for a member that has left its slot completes, written nowhere.
    fn complete_dropped(&mut self, io: &MemberIo) {
        self.mix(&[io.tag.0, 3]);
        self.note_io("dropped", io, None);
        self.array.complete_io(io.tag, true);
        self.pump();
    }

    /// The new disk of a replacement gets the member's writes, discards and flushes (md's
    /// replace: both devices), and copy-writes alone: those submitted while the replacement
    /// was under way (`mark`), as `uraid_io::Replacing` reads its mode once, when a request
    /// is submitted. Until the third session of 2026-12-05 a write submitted before the
    /// replacement began and completed after reached the new disk too, which the runtime never
    /// does: a log write in flight then gave the new disk a header of the run without the
    /// older generations its slot's old disk held (seed 48549930; see `docs/simulator.md`).
    fn mirror(
        &mut self,
        io: &MemberIo,
        offset: usize,
        data: Option<Vec<u8>>,
        mark: Option<u64>,
    ) -> Result<(), SimFailure> {
        if mark.is_none() && io.op != MemberOp::CopyWrite {
            return Ok(());
        }
        let data = match io.op {
            MemberOp::Write if self.cfg.sabotage == Some(Sabotage::ReplacementMissesWrites) => None,
            MemberOp::Write | MemberOp::CopyWrite => data,
            MemberOp::Discard => Some(vec![0; io.bytes()]),
            MemberOp::Flush => {
                self.replacement_flush(io.member.get(), mark);
                None
            }
            MemberOp::Read | MemberOp::ListBad | MemberOp::ListBadReplacement => None,
        };
        if let Some(data) = data
            && !self.replacement_write(io.member.get(), offset, &data, io.fua)
            && io.op == MemberOp::CopyWrite
        {
            return Err(self.fail(format!("a copy-write to a member not being replaced: {io:?}")));
        }
        Ok(())
    }

    /// Checks every user request the engine finished.
    pub(crate) fn collect(&mut self) -> Result<(), SimFailure> {
        for (id, result, buf) in self.array.take_completed() {
            self.complete_user(id, result, &buf)?;
        }
        Ok(())
    }

    /// Checks one user request the engine finished, and does what its completion starts.
    pub(crate) fn complete_user(
        &mut self,
        id: ReqId,
        result: Result<(), uraid_core::array::ArrayError>,
        buf: &[u8],
    ) -> Result<(), SimFailure> {
        self.mix(&[id.0, u64::from(result.is_ok())]);
        let Some(user) = self.user.remove(&id.0) else {
            return Err(self.fail(format!("request {} completed twice or never existed", id.0)));
        };
        match (user, result) {
            (User::Invalid, Err(_)) => self.stats.refused += 1,
            // The member being replaced failed: the copy stops short of this window.
            (
                User::Sync { kind: SyncKind::Replace, .. },
                Err(uraid_core::array::ArrayError::ReplacedMemberFailed),
            ) => self.replace_window_failed(),
            (User::Invalid, Ok(())) => {
                return Err(self.fail("an out-of-range request succeeded"));
            }
            (user, Err(e)) => {
                return Err(self.fail(format!(
                    "request {} ({user:?}) failed within redundancy: {e} (failed members \
                         {:?}, lost {:?})",
                    id.0,
                    self.array.failed_members(),
                    self.lost_members()
                )));
            }
            (User::Read(watch), Ok(())) => {
                if let Err(why) = self.oracle.read_completed(&watch, buf) {
                    return Err(self.fail(why));
                }
                self.stats.sectors_verified += watch.sectors;
            }
            (User::Write { id, sector, sectors, fua }, Ok(())) => {
                self.note_user("acked write", id, sector, sectors);
                self.oracle.write_completed(id, sector, sectors);
                if fua {
                    self.cut_after_flush();
                }
            }
            (User::SafeModeFlush(t), Ok(())) => self.oracle.flush_completed(t),
            (User::ReplaceFlush(t), Ok(())) => {
                self.oracle.flush_completed(t);
                self.replace_flushed();
            }
            (User::RecoveryCheckpoint { t, member, at }, Ok(())) => {
                self.oracle.flush_completed(t);
                if self.recovery.is_some_and(|(m, _, _)| m == member) {
                    self.recovery_checkpoint = self.recovery_checkpoint.max(at);
                }
            }
            (User::RecoveryFlush(t), Ok(())) => {
                self.oracle.flush_completed(t);
                self.recovery = None;
                self.stats.spares_rebuilt += 1;
                self.next_recovery();
            }
            (User::Flush(t), Ok(())) => {
                self.note(|| format!("flush {} acked", id.0));
                self.oracle.flush_completed(t);
                self.cut_after_flush();
            }
            (User::Sync { kind, member_sector, sectors }, Ok(())) => {
                self.sync_done(id.0, kind, member_sector, sectors)?;
            }
        }
        Ok(())
    }

    /// One random user request: reads, writes (some FUA, some whole stripes), flushes,
    /// discards, and now and then one out of range.
    fn submit_random(&mut self) -> Result<(), SimFailure> {
        let id = self.next_id;
        self.next_id += 1;
        if !self.plugged && self.rng.random_bool(0.05) {
            self.array.plug();
            self.plugged = true;
        } else if self.plugged && self.rng.random_bool(0.3) {
            self.array.unplug();
            self.plugged = false;
        }
        // The runtime's timer: no request came for a while.
        if self.hold_rng.random_bool(0.03) {
            self.array.release_held_writes();
        }
        let size = self.array.size_sectors();
        let roll = self.rng.random_range(0..100);
        if roll < 1 {
            self.user.insert(id, User::Invalid);
            let len = self.rng.random_range(1..=16u64) * SECTOR_BYTES;
            self.array.submit_read(ReqId(id), Sector(size - 1), vec![0; len as usize + 512]);
            return Ok(());
        }
        if (85..92).contains(&roll) {
            self.note(|| format!("flush {id} submitted"));
            let t = self.oracle.flush_submitted();
            self.user.insert(id, User::Flush(t));
            self.array.submit_flush(ReqId(id));
            self.stats.flushes += 1;
            return Ok(());
        }
        let (mut sector, mut sectors) = self.random_range(size, roll >= 92);
        let plain_write = roll >= 40 && !(92..96).contains(&roll);
        if plain_write && self.stream_end < size && self.hold_rng.random_bool(0.5) {
            sector = self.stream_end;
            // As one of several engines (`set_stream_stride`), a stream that ends a stripe
            // may go on at this engine's next one, the others' in between.
            if self.cfg.log_stride_stripes > 1 {
                let stripe = self.cfg.geometry().stripe_data_sectors();
                let skip = (self.cfg.log_stride_stripes - 1) * stripe;
                if sector.is_multiple_of(stripe) && self.hold_rng.random_bool(0.5) {
                    sector = (sector + skip).min(size - 1);
                }
            }
            sectors = sectors.min(size - sector);
        }
        let write = roll >= 40 && !self.oracle.write_in_flight(sector, sectors);
        if !write {
            // What NBD's block status would say of the range now, checked before the read.
            self.check_status(sector, sectors)?;
            let watch = self.oracle.read_submitted(sector, sectors);
            self.user.insert(id, User::Read(watch));
            self.array.submit_read(ReqId(id), Sector(sector), vec![0; (sectors * 512) as usize]);
            self.stats.reads += 1;
        } else if (92..96).contains(&roll) {
            self.oracle.write_submitted(0, sector, sectors, false);
            self.user.insert(id, User::Write { id: 0, sector, sectors, fua: false });
            self.mark_active();
            self.array.submit_discard(ReqId(id), Sector(sector), sectors);
            self.stats.discards += 1;
        } else {
            let fua = roll >= 96;
            self.note_user(if fua { "FUA write" } else { "write" }, id, sector, sectors);
            self.oracle.write_submitted(id, sector, sectors, fua);
            self.user.insert(id, User::Write { id, sector, sectors, fua });
            let buf = write_buf(id, sector, sectors);
            self.stream_end = sector + sectors;
            self.mark_active();
            if fua {
                self.array.submit_write_fua(ReqId(id), Sector(sector), buf);
            } else {
                self.array.submit_write(ReqId(id), Sector(sector), buf);
            }
            self.stats.writes += 1;
        }
        Ok(())
    }

    /// Block status of array sectors `[sector, +sectors)` as the runtime would answer it now
    /// (`Array::read_sources`, each member's holes taken as its sectors of zeros, an
    /// unreadable sector as data, a pulled member as unknown): every range said to be zeros
    /// must be one that a read now may return as zeros.
    fn check_status(&mut self, sector: u64, sectors: u64) -> Result<(), SimFailure> {
        let members = &self.members;
        let data = |m: DiskIndex, from: u64, n: u64| -> Option<Vec<std::ops::Range<u64>>> {
            let member = &members[m.get()];
            if member.pulled {
                return None;
            }
            let mut ranges: Vec<std::ops::Range<u64>> = Vec::new();
            for s in from..from + n {
                let at = member.offset(IoArea::Data, s);
                let len = SECTOR_BYTES as usize;
                if !member.readable(at, len) || member.data(at, len).iter().any(|b| *b != 0) {
                    match ranges.last_mut() {
                        Some(r) if r.end == s => r.end = s + 1,
                        _ => ranges.push(s..s + 1),
                    }
                }
            }
            Some(ranges)
        };
        let mut at = sector;
        let mut zeros = Vec::new();
        for part in self.array.read_sources(Sector(sector), sectors) {
            let (from, n) = (part.member_sector.0, part.sectors);
            for e in uraid_core::array::part_extents(&part, |m| data(m, from, n)) {
                if e.zero {
                    zeros.push((at, e.sectors));
                }
                at += e.sectors;
            }
        }
        for (at, n) in zeros {
            if let Err(why) = self.oracle.zeros_allowed(at, n) {
                return Err(self.fail(format!("block status said zeros: {why}")));
            }
            self.stats.status_zero_sectors += n;
        }
        self.stats.status_checks += 1;
        Ok(())
    }

    /// Aligned to stripe units half the time, any sector otherwise; a whole stripe now and
    /// then (or always, for discards, half the time).
    fn random_range(&mut self, size: u64, discard: bool) -> (u64, u64) {
        let g = self.cfg.geometry();
        let stripe = g.stripe_data_sectors();
        if self.rng.random_bool(if discard { 0.5 } else { 0.1 }) && stripe <= size {
            let first = self.rng.random_range(0..size / stripe);
            let count = self.rng.random_range(1..=(size / stripe - first).min(2));
            return (first * stripe, count * stripe);
        }
        let most = self.cfg.max_request_sectors.min(size);
        if self.rng.random_bool(0.5) {
            let unit = self.cfg.stripe_size_bytes / SECTOR_BYTES;
            let units = size / unit;
            let first = self.rng.random_range(0..units);
            let count = self.rng.random_range(1..=(most / unit).max(1)).min(units - first);
            return (first * unit, count * unit);
        }
        let sector = self.rng.random_range(0..size);
        (sector, self.rng.random_range(1..=most).min(size - sector))
    }

    /// Runs until every request in flight has finished (no new ones).
    pub(crate) fn run_until_idle(&mut self) -> Result<(), SimFailure> {
        while !self.user.is_empty() || !self.inflight.is_empty() {
            self.step += 1;
            self.pump();
            if self.inflight.is_empty() {
                self.unstick()?;
            } else {
                self.complete_one()?;
            }
            self.collect()?;
        }
        self.array.unplug();
        self.plugged = false;
        Ok(())
    }

    /// Submits a sync request and runs until it is done.
    pub(crate) fn sync_now(
        &mut self,
        kind: SyncKind,
        member_sector: u64,
        sectors: u64,
    ) -> Result<(), SimFailure> {
        let id = self.next_id;
        self.next_id += 1;
        self.user.insert(id, User::Sync { kind, member_sector, sectors });
        self.mark_active();
        self.array.submit_sync(ReqId(id), kind, Sector(member_sector), sectors);
        self.run_until_idle()?;
        if !self.syncs_done.contains(&id) {
            return Err(self.fail(format!("{kind:?} {member_sector}+{sectors} did not finish")));
        }
        Ok(())
    }

    /// Whether the engine has failed a member the metadata does not yet say is faulty.
    pub(crate) fn failures_unrecorded(&self) -> bool {
        self.array.failed_members().iter().any(|d| !self.recorded_faulty[d.get()])
    }

    /// The metadata records every member the engine has failed (uraid-md's monitor commits
    /// the superblocks), and the engine is told so.
    pub(crate) fn record_failures(&mut self) {
        for d in self.array.failed_members() {
            if !std::mem::replace(&mut self.recorded_faulty[d.get()], true) {
                self.stats.failures_recorded += 1;
                self.note(|| format!("member {d} recorded faulty"));
            }
            self.array.failure_recorded(d);
        }
    }

    pub(crate) fn member_index(m: usize) -> DiskIndex {
        DiskIndex(m as u16)
    }
}

pub(crate) fn write_buf(id: u64, sector: u64, sectors: u64) -> Vec<u8> {
    let mut buf = vec![0u8; (sectors * SECTOR_BYTES) as usize];
    for (i, s) in buf.chunks_mut(SECTOR_BYTES as usize).enumerate() {
        pattern(id, sector + i as u64, s);
    }
    buf
}

fn op_code(op: MemberOp) -> u64 {
    match op {
        MemberOp::Read => 1,
        MemberOp::Write => 2,
        MemberOp::Flush => 3,
        MemberOp::Discard => 4,
        MemberOp::CopyWrite => 5,
        MemberOp::ListBad => 6,
        MemberOp::ListBadReplacement => 7,
    }
}
