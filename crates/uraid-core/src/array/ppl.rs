//! The partial parity log in the engine (records and arithmetic: `crate::ppl`): closes the
//! write hole. Before a stripe head changes data and parity in place, the parity of the data
//! it leaves alone (partial P on the P member's log, partial Q on the Q member's) is written
//! FUA; the head's writes start only when it is durable. Log writes go out in generations,
//! like the bitmap's: every head that computed in a turn shares one write per member.
//!
//! Why not md's PPL as it is: md's covers RAID5 only and excludes the write-intent bitmap
//! (they share a superblock field). Here RAID6 is covered (partial Q on the Q member) and the
//! bitmap stays, so a crash with every member present is resynced by it exactly as md and the
//! kernel expect; the log is what makes a crash followed by the loss of a member safe.
//! Full-stripe writes and discards log block-less entries (as md's PPL does): a replay then
//! recomputes their parity from the data, which keeps P and Q consistent with each other on
//! an array that is, or becomes, degraded.
//!
//! Which sectors count as modified. A head's writes complete long before they are durable (a
//! member's volatile cache), so an entry's partial parity leaves out every sector written
//! since the last point where everything was durable, not only the batch's own: `live` keeps
//! that union per stripe head (rmw reads the union's blocks it lacks), at sector granularity:
//! the sectors of a block a write leaves alone were not being written, and stay in the
//! partial parity even when that member is lost.
//!
//! Acknowledging. A partial-stripe write (not FUA, not written from the request's buffer) is
//! acknowledged once its entries are durable, before its writes in place, as md's raid5-cache
//! does in write-back mode: it is unflushed, so a power cut may lose it, and the replay keeps
//! everything else intact; until its writes complete the head holds the data, and a flush waits
//! for them (it resets the log, which drains every logged write). Generations are group
//! commits: one waits for the heads that started their reads before its oldest head was
//! admitted, so that a queue's worth of writes shares one log write per member.
//!
//! Sequential streams. A full-stripe write whose previous stripe head was written since the
//! last reset logs a range instead of its own entry: a block-less entry covering the heads
//! ahead of it (1 MiB per member; 256 MiB once the stream runs into a range). Full-stripe
//! writes inside a durable range go out at once with no log write: a sequential stream logs
//! once per range, not once per generation (a seek each on a disk). A replay resyncs every
//! head of a live range (`crate::ppl::resynced_parity`) but those with a newer entry of their
//! own, so a range never covers a head with an older one on the rings (it ends before the
//! first), a head with one logs again, and a stream that would make a fifth range live
//! resets the log first: a replay resyncs about 1 GiB a member at most. Whole stripes
//! written as batches (no heads) log the same way, and wait for their range rather than
//! fall back to heads (`batch`).
//!
//! Retiring the log. Each engine has a ring per member. A reset waits for every logged write
//! to complete, flushes every member, and writes an empty header with the new tail at the
//! ring's start on every member; everything older is retired. A reset happens when a
//! generation does not fit the ring, when a member joins, and for every user flush (and FUA
//! write) while the rings hold entries: so a live entry on the rings always means its union
//! was written since the last completed flush, and at a replay a lost member's modified
//! sectors are ones that were being written (they read back as zeros; every other sector
//! reads back exactly).

use super::handle::Phase;
use super::{Array, IoArea, IoBuf, MemberIo, MemberOp, Pending};
use crate::buffer::BlockBuf;
use crate::geometry::DiskRole;
use crate::ppl::{
    LOG_HEADER_SECTORS, LogEntry, LogHeader, LogParity, MAX_LOG_ENTRIES, SectorMask, full_mask,
};
use crate::stripe::{HeadId, WriteMethod};
use crate::units::{DiskIndex, Sector, StripeNumber};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

mod batch;
pub(super) use batch::BatchAdmit;

/// A stream's first range: member sectors ahead of its head (1 MiB).
const FIRST_RANGE_SECTORS: u64 = 2048;
/// A range for a stream that ran into one (256 MiB a member).
const MAX_RANGE_SECTORS: u64 = 524_288;
/// Durable ranges at once before the log is reset (a replay resyncs them all).
const MAX_LIVE_RANGES: usize = 4;

/// How the runtime set up the log for this engine.
#[derive(Clone, Debug)]
pub struct PartialParityLogConfig {
    /// Sectors of this engine's ring on every member (`IoArea::Log` sector 0 is its start).
    pub ring_sectors: u64,
    pub uuid: [u8; 16],
    /// Orders runs (md's events at assembly): newer runs' entries supersede older ones.
    pub epoch: u64,
}

/// What a log write is for: a stripe head's writes, or a batch of full-stripe writes
/// (`batch_write`, by index) whose range it logs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Owner {
    Head(HeadId),
    Batch(usize),
}

/// A head (or batch) waiting for the next generation: its entries (recomputed after a reset,
/// whose flush makes blocks of its union durable) and whether it is a discard.
struct Waiting {
    owner: Owner,
    discard: bool,
    entries: Entries,
    /// `write_reads` when it was admitted: heads whose reads started before may join its
    /// generation (group commit).
    after: u64,
    /// A full-stripe write inside a range still to be logged: no entries of its own.
    ranged: bool,
}

/// Whether a full-stripe write is inside a range (see the module docs).
enum Cover {
    Durable,
    Pending,
}

/// A head's entries: per parity member, its entry and partial parity block.
type Entries = Vec<(DiskIndex, LogEntry, Option<Vec<u8>>)>;

/// Per stripe head (by its first member sector): the sectors written since everything was
/// last durable, and logged writes still in flight.
#[derive(Clone, Default)]
struct Live {
    modified: Vec<(usize, SectorMask)>,
    writing: u32,
    /// Written only under ranges: no entry of its own on the rings.
    ranged: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reset {
    No,
    /// Wanted: waits for logged writes and the generation in flight to finish.
    Draining,
    Flushing(usize),
    Headers(usize),
}

pub(super) struct PartialParityLog {
    cfg: PartialParityLogConfig,
    unit_sectors: u64,
    generation: u64,
    tail: u64,
    /// Per member: where its next generation goes on the ring.
    write_at: Vec<u64>,
    live: HashMap<u64, Live>,
    /// Heads with an entry on the ring since the last reset.
    on_ring: HashSet<u64>,
    /// Durable ranges since the last reset: start -> end (member sectors; disjoint).
    ranges: BTreeMap<u64, u64>,
    /// Ranges waiting for their generation: start -> (end, the head or batch that logs it).
    pending_ranges: BTreeMap<u64, (u64, Owner)>,
    /// Heads whose entries for the current batch are durable (and whether they count in
    /// `live`).
    logged: std::collections::BTreeMap<HeadId, bool>,
    /// Heads waiting for the next generation, with their entries and blocks (none: a write
    /// that needs no entry, waiting for the first reset of the run).
    waiting: Vec<Waiting>,
    /// Requests (flushes, FUA writes) that complete when reset number `.1` has.
    flush_waiters: Vec<(usize, u64)>,
    /// The run's first reset has written its headers: writes that need no entry go at once.
    started: bool,
    /// The generation in flight: writes outstanding, its heads and batches (and whether each
    /// head counts in `live`).
    in_flight: Option<(usize, Vec<(Owner, bool)>)>,
    /// The buffers of the log writes in flight (`IoBuf::Log` indexes them).
    writes: Vec<BlockBuf>,
    reset: Reset,
    /// Logged heads whose in-place writes have not completed.
    writing: usize,
    /// Counts heads that started reads for their writes (see `Waiting::after`).
    write_reads: u64,
    /// The numbers of the heads whose reads for their writes are in flight.
    reading: BTreeSet<u64>,
    pub(super) log_writes: u64,
    pub(super) log_bytes: u64,
    pub(super) resets: u64,
    /// Writes that could not be logged (a block of their union unreadable): unprotected.
    pub(super) unprotected: u64,
}

impl PartialParityLog {
    /// Whether a durable range holds member sector `at`.
    fn durable_range(&self, at: u64) -> bool {
        self.ranges.range(..=at).next_back().is_some_and(|(_, end)| *end > at)
    }

    /// Whether a range still to be logged holds member sector `at`.
    fn pending_range(&self, at: u64) -> bool {
        self.pending_ranges.range(..=at).next_back().is_some_and(|(_, (end, _))| *end > at)
    }
}

impl Array {
    /// Turns the partial parity log on (see the module docs). The first write waits for an
    /// empty header on every member's ring, which retires what an earlier run left there.
    pub fn enable_partial_parity_log(&mut self, cfg: &PartialParityLogConfig) {
        let header = LOG_HEADER_SECTORS;
        assert!(cfg.ring_sectors >= header + 4 * self.unit_sectors, "a ring holds a few blocks");
        self.ppl = Some(PartialParityLog {
            cfg: cfg.clone(),
            unit_sectors: self.unit_sectors,
            generation: 1,
            tail: 1,
            write_at: vec![0; self.failed.len()],
            live: HashMap::new(),
            on_ring: HashSet::new(),
            ranges: BTreeMap::new(),
            pending_ranges: BTreeMap::new(),
            logged: std::collections::BTreeMap::new(),
            waiting: Vec::new(),
            flush_waiters: Vec::new(),
            started: false,
            in_flight: None,
            writes: Vec::new(),
            reset: Reset::Draining,
            writing: 0,
            log_writes: 0,
            log_bytes: 0,
            resets: 0,
            unprotected: 0,
            write_reads: 0,
            reading: BTreeSet::new(),
        });
    }

    /// Log writes, bytes and ring resets so far; writes left unprotected.
    #[must_use]
    pub fn log_stats(&self) -> Option<(u64, u64, u64, u64)> {
        self.ppl.as_ref().map(|l| (l.log_writes, l.log_bytes, l.resets, l.unprotected))
    }

    /// The log's bookkeeping in words, for a stall report (the simulator's).
    #[doc(hidden)]
    #[must_use]
    pub fn log_debug(&self) -> Option<String> {
        let l = self.ppl.as_ref()?;
        let waiting: Vec<String> = l
            .waiting
            .iter()
            .map(|w| match w.owner {
                Owner::Head(id) => format!("{id:?} {:?}", self.heads.get(&id).map(|st| st.phase)),
                Owner::Batch(index) => format!("batch {index}"),
            })
            .collect();
        Some(format!(
            "reset {:?} (resets {}), waiting {waiting:?}, in flight {:?}, writing {}, logged {:?}, \
             flush waiters {:?}, on ring {}",
            l.reset,
            l.resets,
            l.in_flight.as_ref().map(|f| f.0),
            l.writing,
            l.logged,
            l.flush_waiters,
            l.on_ring.len()
        ))
    }

    /// A member joins (a spare to recover): its ring holds nothing of ours, so the log
    /// starts again on every member.
    pub(super) fn log_member_joined(&mut self) {
        if let Some(l) = self.ppl.as_mut().filter(|l| l.reset == Reset::No) {
            l.reset = Reset::Draining;
        }
    }

    pub(super) fn log_busy(&self) -> bool {
        self.ppl.as_ref().is_some_and(|l| {
            !l.waiting.is_empty()
                || l.in_flight.is_some()
                || matches!(l.reset, Reset::Flushing(_) | Reset::Headers(_))
                || (l.reset == Reset::Draining && l.writing == 0)
        })
    }

    /// Whether whole-stripe batches wait for a log generation: a stream about to go out, so
    /// the array is not idle (a partial stripe held at a request's end waits for the next
    /// request rather than start with reads). Heads waiting do not count: with random
    /// writes some always wait, and held partial stripes would wait for good.
    pub(super) fn log_holds_batches(&self) -> bool {
        self.ppl
            .as_ref()
            .is_some_and(|l| l.waiting.iter().any(|w| matches!(w.owner, Owner::Batch(_))))
    }

    /// Data members a partial-stripe write must also read for its entry: blocks written
    /// since the last durable point that the head does not hold (see the module docs).
    pub(super) fn log_extra_reads(&self, id: HeadId, writes: &[DiskIndex]) -> Vec<DiskIndex> {
        let Some(l) = self.ppl.as_ref() else { return Vec::new() };
        let key = self.head_member_range(id).0;
        let Some(live) = l.live.get(&key) else { return Vec::new() };
        let head = self.cache.head(id);
        let lost = self.lost(id);
        let map = self.geometry.stripe_map(head.key.stripe);
        map.data_disk
            .iter()
            .copied()
            .filter(|d| live.modified.iter().any(|m| m.0 == d.get()))
            .filter(|d| !writes.contains(d) && !head.devs[d.get()].uptodate && !lost[d.get()])
            .collect()
    }

    /// Before head `id` writes in place: true if it may go now; false if it waits for its
    /// entries to be durable (parked in `Phase::LogWait`, `start_writing` is called again).
    pub(super) fn log_admit(&mut self, id: HeadId, discard: bool) -> bool {
        let Some(l) = self.ppl.as_ref() else { return true };
        if l.logged.contains_key(&id) {
            return true;
        }
        let after = l.write_reads;
        let whole = !discard && self.method(id) == Some(WriteMethod::FullStripe);
        match self.range_cover(id).filter(|_| whole) {
            Some(Cover::Durable) => {
                self.mark_ranged(id);
                let l = self.ppl.as_mut().expect("checked");
                l.logged.insert(id, true);
                l.writing += 1;
                self.stats.writes_under_log_range += 1;
                return true;
            }
            Some(Cover::Pending) => {
                self.mark_ranged(id);
                self.stats.writes_under_log_range += 1;
                let l = self.ppl.as_mut().expect("checked");
                let entries = Vec::new();
                let owner = Owner::Head(id);
                l.waiting.push(Waiting { owner, discard, entries, after, ranged: true });
                self.state(id).phase = Phase::LogWait;
                return false;
            }
            None => {}
        }
        let entries = if !discard
            && matches!(self.method(id), Some(WriteMethod::DataOnly) | None)
            && !self.writes_parity(id, &self.heads[&id].writes)
        {
            None
        } else {
            // No live parity member: nothing to log.
            Some(self.log_entries(id, discard)).filter(|e| !e.is_empty())
        };
        let key = self.head_member_range(id).0;
        let l = self.ppl.as_mut().expect("checked");
        let entries = match entries {
            Some(entries) => {
                let live = l.live.entry(key).or_default();
                if let Some(e) = entries.first() {
                    live.modified.clone_from(&e.1.modified);
                }
                live.writing += 1;
                live.ranged = false;
                l.on_ring.insert(key);
                entries
            }
            // Nothing to log; but no write goes out before the run's first headers retire
            // what an earlier run left on the rings.
            None if l.started => return true,
            None => Vec::new(),
        };
        l.waiting.push(Waiting { owner: Owner::Head(id), discard, entries, after, ranged: false });
        self.state(id).phase = Phase::LogWait;
        false
    }

    /// Whether head `id` (a full-stripe write) is inside a range: a durable one (it may write
    /// now; not while a reset is wanted, which would wait for it) or one still to be logged.
    /// Not a head with an entry of its own on the rings: the replay takes the newest.
    fn range_cover(&self, id: HeadId) -> Option<Cover> {
        let l = self.ppl.as_ref()?;
        let key = self.head_member_range(id).0;
        if l.live.get(&key).is_some_and(|v| !v.ranged) {
            return None;
        }
        if l.reset == Reset::No && l.durable_range(key) {
            return Some(Cover::Durable);
        }
        l.pending_range(key).then_some(Cover::Pending)
    }

    /// Every data block of `stripe`, whole (ascending by member): the union of a full-stripe
    /// write.
    fn whole_stripe_modified(&self, stripe: StripeNumber) -> Vec<(usize, SectorMask)> {
        let map = self.geometry.stripe_map(stripe);
        let mut modified: Vec<(usize, SectorMask)> =
            map.data_disk.iter().map(|d| (d.get(), full_mask(self.unit_sectors))).collect();
        modified.sort_unstable_by_key(|m| m.0);
        modified
    }

    /// A full-stripe write under a range: its head counts as written since the last reset
    /// (a later partial write's entry covers every data block) and keeps the rings busy.
    fn mark_ranged(&mut self, id: HeadId) {
        let key = self.head_member_range(id).0;
        let modified = self.whole_stripe_modified(self.cache.head(id).key.stripe);
        self.mark_ranged_at(key, modified);
    }

    fn mark_ranged_at(&mut self, key: u64, modified: Vec<(usize, SectorMask)>) {
        let l = self.ppl.as_mut().expect("a log");
        let live = l.live.entry(key).or_insert_with(|| Live { ranged: true, ..Live::default() });
        live.modified = modified;
        live.writing += 1;
        l.on_ring.insert(key);
    }

    /// The heads a full-stripe write at `key` logs a range for (1: its own entry only). A
    /// stream continues one whose previous head is in a range (the longest) or was written
    /// since the last reset (the first). It ends before the first head with an entry
    /// of its own, the next range, or the members' end.
    fn range_span(&mut self, key: u64) -> u32 {
        let l = self.ppl.as_mut().expect("a log");
        // Pending ranges do not count: a reset recomputes them (their heads wait).
        if l.ranges.len() >= MAX_LIVE_RANGES {
            if l.reset == Reset::No {
                l.reset = Reset::Draining;
            }
            return 1;
        }
        let l = self.ppl.as_ref().expect("a log");
        let unit = self.unit_sectors;
        let in_range = |at: u64| l.durable_range(at) || l.pending_range(at);
        let Some(prev) = key.checked_sub(unit) else { return 1 };
        if in_range(key) {
            return 1;
        }
        let len = if in_range(prev) {
            MAX_RANGE_SECTORS
        } else if l.live.contains_key(&prev) {
            FIRST_RANGE_SECTORS
        } else {
            return 1;
        };
        let member_end = self.size_sectors / self.geometry.data_disks() as u64;
        let next_durable = l.ranges.range(key + 1..).next().map(|r| *r.0);
        let next_pending = l.pending_ranges.range(key + 1..).next().map(|r| *r.0);
        let mut end = [Some(key + len.max(unit)), Some(member_end), next_durable, next_pending]
            .into_iter()
            .flatten()
            .min()
            .expect("some end");
        for (k, v) in &l.live {
            if !v.ranged && *k > key && *k < end {
                end = *k;
            }
        }
        u32::try_from((end - key) / unit).unwrap_or(u32::MAX).max(1)
    }

    /// Whether `writes` (of head `id`) include a parity block.
    fn writes_parity(&self, id: HeadId, writes: &[DiskIndex]) -> bool {
        let map = self.geometry.stripe_map(self.cache.head(id).key.stripe);
        writes.iter().any(|w| Some(*w) == map.p_disk || Some(*w) == map.q_disk)
    }

    /// Whether a data block in the log's union for this head failed to read (a member not
    /// failed): the head must rebuild it for its entry.
    pub(super) fn log_union_unreadable(&self, id: HeadId) -> bool {
        let Some(l) = self.ppl.as_ref() else { return false };
        let Some(live) = l.live.get(&self.head_member_range(id).0) else { return false };
        self.heads[&id]
            .suspect
            .iter()
            .any(|m| !self.failed[m.get()] && live.modified.iter().any(|(d, _)| *d == m.get()))
    }

    /// Whether a read-error rewrite of `writes` must be logged: it rewrites parity of a
    /// stripe with data written since the last durable point.
    pub(super) fn log_covers_rewrite(&self, id: HeadId, writes: &[DiskIndex]) -> bool {
        let Some(l) = self.ppl.as_ref() else { return false };
        l.live.contains_key(&self.head_member_range(id).0) && self.writes_parity(id, writes)
    }

    /// The head's entries (P's and Q's, on their members; none when no parity member is
    /// live).
    fn log_entries(&mut self, id: HeadId, discard: bool) -> Entries {
        let key = self.head_member_range(id).0;
        let whole = discard || self.method(id) == Some(WriteMethod::FullStripe);
        let span = if whole && !discard { self.range_span(key) } else { 1 };
        let map = self.geometry.stripe_map(self.cache.head(id).key.stripe);
        // A parity block rebuilt over a read error is written too: it needs its entry.
        let lost = self.lost(id);
        let writes = self.heads[&id].writes.clone();
        let unit = self.unit_sectors;
        let l = self.ppl.as_ref().expect("a log");
        let mut entry = LogEntry {
            member_sector: key,
            parity: LogParity::P,
            modified: l.live.get(&key).map(|v| v.modified.clone()).unwrap_or_default(),
            block_crc: None,
            span,
        };
        if whole {
            // Logged too, block-less (as md's PPL does): a replay recomputes the parity from
            // the data, so that a torn full-stripe write on an array that is (or becomes)
            // degraded leaves P and Q consistent with each other and with what is there.
            entry.modified = self.whole_stripe_modified(self.cache.head(id).key.stripe);
        } else {
            for p in self.batch(id).iter().filter(|p| p.kind == super::Kind::Write) {
                for b in &p.blocks {
                    let d = map.data_disk[usize::from(b.data_slot)].get();
                    entry.add(d, b.first, b.sectors, unit);
                }
            }
        }
        let parities: Vec<(DiskIndex, LogParity)> =
            [(map.p_disk, LogParity::P), (map.q_disk, LogParity::Q)]
                .into_iter()
                .filter_map(|(d, p)| {
                    d.filter(|d| !lost[d.get()] || writes.contains(d)).map(|d| (d, p))
                })
                .collect();
        let mut out = Vec::new();
        for (member, parity) in parities {
            let mut e = LogEntry { parity, ..entry.clone() };
            let block = if whole {
                None
            } else if let Some(b) = self.partial_parity(id, &e) {
                e.block_crc = Some(crc32c::crc32c(&b));
                Some(b)
            } else {
                // Neither the union's blocks nor all the others are here: a read error in the
                // union on a degraded stripe. Block-less: a replay recomputes from the data.
                self.ppl.as_mut().expect("a log").unprotected += 1;
                None
            };
            out.push((member, e, block));
        }
        if entry.span > 1 && !out.is_empty() {
            let end = key + u64::from(entry.span) * unit;
            let owner = Owner::Head(id);
            self.ppl.as_mut().expect("a log").pending_ranges.insert(key, (end, owner));
        }
        out
    }

    /// The entry's partial parity from the head after compute: the new parity minus the
    /// modified sectors, or (when a modified block is not here) the sum of every other sector.
    fn partial_parity(&self, id: HeadId, e: &LogEntry) -> Option<Vec<u8>> {
        let map = self.geometry.stripe_map(self.cache.head(id).key.stripe);
        let head = self.cache.head(id);
        let block = |d: usize| -> Option<&[u8]> {
            self.skip_copy_source(id, d).or(head.devs[d].uptodate.then(|| &head.buffers[d][..]))
        };
        let coefficient = |d: usize| match (e.parity, map.roles[d]) {
            (LogParity::Q, DiskRole::Data { syndrome_slot, .. }) => {
                Some(uraid_parity::gf::exp2(usize::from(syndrome_slot)))
            }
            _ => None,
        };
        // Adds the sectors of `b` that `take` picks into `out`, times d's coefficient for Q.
        let add = |out: &mut [u8], d: usize, b: &[u8], take: &dyn Fn(usize) -> bool| {
            for (s, (o, src)) in out.chunks_mut(512).zip(b.chunks(512)).enumerate() {
                if take(s) {
                    match coefficient(d) {
                        Some(c) => uraid_parity::mul_const_acc(o, src, c),
                        None => uraid_parity::xor_acc(o, &[src]),
                    }
                }
            }
        };
        let has = |mask: &[u64], s: usize| mask[s / 64] & (1 << (s % 64)) != 0;
        let parity = match e.parity {
            LogParity::P => map.p_disk,
            LogParity::Q => map.q_disk,
        }
        .expect("a live parity member");
        // A failed member stays failed until a spare is rebuilt (which resets the log): a
        // replay will count its sectors as zeros, so they stay out of the sum here too.
        let failed = |d: usize| self.failed[d];
        if e.modified.iter().all(|(d, _)| failed(*d) || block(*d).is_some()) {
            let mut out = head.buffers[parity.get()].to_vec();
            for (d, mask) in e.modified.iter().filter(|(d, _)| !failed(*d)) {
                add(&mut out, *d, block(*d).expect("checked"), &|s| has(mask, s));
            }
            return Some(out);
        }
        let mut out = vec![0u8; head.buffers[parity.get()].len()];
        for d in map.data_disk.iter().map(|d| d.get()) {
            let mask = e.mask(d);
            if mask.is_some_and(|m| m.iter().all(|w| *w == u64::MAX)) {
                continue;
            }
            add(&mut out, d, block(d)?, &|s| mask.is_none_or(|m| !has(m, s)));
        }
        Some(out)
    }

    /// A logged head's in-place writes completed.
    pub(super) fn log_writes_done(&mut self, id: HeadId) {
        let key = self.head_member_range(id).0;
        let Some(l) = self.ppl.as_mut() else { return };
        let Some(counted) = l.logged.remove(&id) else { return };
        l.writing -= 1;
        if counted {
            l.live.get_mut(&key).expect("a counted head is live").writing -= 1;
        }
    }

    /// A flush (or a FUA write, once written) in request `slot`: with entries on the rings, it
    /// completes with the next reset instead of plain member flushes (true), so that the
    /// rings never hold an entry for writes a completed flush made durable: at a replay, a
    /// lost member's block in a live entry's union is one that was being written. Else
    /// false: the caller flushes as usual.
    pub(super) fn log_flush(&mut self, slot: usize) -> bool {
        let Some(l) = self.ppl.as_mut() else { return false };
        let pending = l.reset != Reset::No || !l.waiting.is_empty() || l.in_flight.is_some();
        if l.on_ring.is_empty() && !pending {
            return false;
        }
        // The next reset to start: one already past its member flushes cannot cover writes
        // completed after them (`resets` counts those started).
        l.flush_waiters.push((slot, l.resets + 1));
        if l.reset == Reset::No {
            l.reset = Reset::Draining;
        }
        self.request_mut(slot).outstanding += 1;
        true
    }

    /// Starts the next log write (or the reset it needs). Called when the runtime asks for
    /// member I/O, so that every head of a turn shares one generation.
    pub(super) fn start_log_generation(&mut self) {
        let Some(l) = self.ppl.as_ref() else { return };
        if l.in_flight.is_some() {
            return;
        }
        if l.reset == Reset::Draining && l.writing == 0 {
            // Every logged write is done.
            self.start_log_reset();
            return;
        }
        if l.reset != Reset::No || l.waiting.is_empty() {
            return;
        }
        // Group commit: heads that started reading for their writes before the oldest waiting
        // head was admitted join this generation rather than wait a whole log write for the
        // next (a log write per member per generation: the fewer generations, the fewer I/Os
        // and 4 KiB headers). Heads that started later do not hold it: no starvation.
        if l.reading.first().is_some_and(|&started| started <= l.waiting[0].after) {
            return;
        }
        let live_members: Vec<usize> =
            (0..self.failed.len()).filter(|&m| !self.failed[m]).collect();
        let l = self.ppl.as_mut().expect("checked");
        let unit = l.unit_sectors;
        // Heads join while every member's share fits its ring and its header.
        let mut count = vec![0usize; self.failed.len()];
        let mut used = vec![LOG_HEADER_SECTORS; self.failed.len()];
        let mut take = 0;
        for Waiting { entries, .. } in &l.waiting {
            let fits = entries.iter().all(|(m, e, _)| {
                let m = m.get();
                count[m] < MAX_LOG_ENTRIES
                    && l.write_at[m] + used[m] + e.stored_sectors(unit) <= l.cfg.ring_sectors
            });
            if !fits {
                break;
            }
            for (m, e, _) in entries {
                count[m.get()] += 1;
                used[m.get()] += e.stored_sectors(unit);
            }
            take += 1;
        }
        if take == 0 {
            l.reset = Reset::Draining;
            return self.start_log_generation();
        }
        let heads: Vec<_> = l.waiting.drain(..take).collect();
        l.generation += 1;
        let generation = l.generation;
        let ids = heads.iter().map(|w| (w.owner, !w.entries.is_empty() || w.ranged)).collect();
        l.in_flight = Some((0, ids));
        let mut per_member: Vec<Vec<(LogEntry, Option<Vec<u8>>)>> =
            vec![Vec::new(); self.failed.len()];
        for (m, e, b) in heads.into_iter().flat_map(|w| w.entries) {
            per_member[m.get()].push((e, b));
        }
        let mut members = [0u8; 32];
        for (m, entries) in per_member.iter().enumerate() {
            if !entries.is_empty() && live_members.contains(&m) {
                members[m / 8] |= 1 << (m % 8);
            }
        }
        for (m, entries) in per_member.into_iter().enumerate() {
            if entries.is_empty() || !live_members.contains(&m) {
                continue;
            }
            self.queue_log_write(DiskIndex(m as u16), generation, members, entries);
        }
        if self.ppl.as_ref().expect("a log").in_flight.as_ref().is_some_and(|f| f.0 == 0) {
            self.log_generation_done();
        }
    }

    fn queue_log_write(
        &mut self,
        member: DiskIndex,
        generation: u64,
        members: [u8; 32],
        entries: Vec<(LogEntry, Option<Vec<u8>>)>,
    ) {
        let l = self.ppl.as_mut().expect("a log");
        let (entries, blocks): (Vec<LogEntry>, Vec<Option<Vec<u8>>>) = entries.into_iter().unzip();
        let header = LogHeader {
            uuid: l.cfg.uuid,
            epoch: l.cfg.epoch,
            generation,
            tail: l.tail,
            unit_sectors: l.unit_sectors as u32,
            members,
            entries,
        };
        let sectors = header.sectors();
        let bytes = header.encode_generation(&blocks);
        let mut buf = BlockBuf::zeroed((sectors * 512) as usize);
        buf.copy_from_slice(&bytes);
        let sector = l.write_at[member.get()];
        l.write_at[member.get()] += sectors;
        self.push_log_io(member, MemberOp::Write, sector, buf);
    }

    fn push_log_io(&mut self, member: DiskIndex, op: MemberOp, sector: u64, buf: BlockBuf) {
        let l = self.ppl.as_mut().expect("a log");
        let sectors = (buf.len() / 512) as u64;
        let index = l.writes.len();
        if op == MemberOp::Write {
            l.log_writes += 1;
            l.log_bytes += buf.len() as u64;
        }
        l.writes.push(buf);
        if let Some(f) = l.in_flight.as_mut() {
            f.0 += 1;
        }
        let tag = self.new_tag();
        let write = op == MemberOp::Write;
        self.queue.push_back(MemberIo {
            tag,
            member,
            op,
            sector: Sector(sector),
            sectors: if write { sectors } else { 0 },
            buf: if write { IoBuf::Log { index } } else { IoBuf::None },
            fua: write,
            area: if write { IoArea::Log } else { IoArea::Data },
        });
        self.inflight.insert(tag, Pending::Log { member });
    }

    /// Flush every member (everything logged is durable in place), then an empty header
    /// with the new tail at the start of every ring.
    fn start_log_reset(&mut self) {
        let live: Vec<DiskIndex> = (0..self.failed.len())
            .filter(|&m| !self.failed[m])
            .map(|m| DiskIndex(m as u16))
            .collect();
        let l = self.ppl.as_mut().expect("a log");
        l.resets += 1;
        l.in_flight = Some((0, Vec::new()));
        l.reset = Reset::Flushing(live.len());
        for m in live {
            self.push_log_io(m, MemberOp::Flush, 0, BlockBuf::default());
        }
        if self.ppl.as_ref().expect("a log").in_flight.as_ref().is_some_and(|f| f.0 == 0) {
            self.log_generation_done();
        }
    }

    /// A log write or flush completed; a failed one fails its member (as a bitmap write).
    pub(super) fn log_io_done(&mut self, member: DiskIndex, ok: bool) {
        if !ok {
            self.failed[member.get()] = true;
        }
        let l = self.ppl.as_mut().expect("log I/O with a log");
        let f = l.in_flight.as_mut().expect("a generation in flight");
        f.0 -= 1;
        if f.0 == 0 {
            self.log_generation_done();
        }
    }

    fn log_generation_done(&mut self) {
        let l = self.ppl.as_mut().expect("a log");
        let (_, heads) = l.in_flight.take().expect("in flight");
        l.writes.clear();
        match l.reset {
            Reset::Flushing(_) => {
                // Durable in place: every union and ring entry is retired, but for heads
                // admitted meanwhile (waiting for the next generation: their unions stand).
                l.live.retain(|_, v| v.writing > 0);
                let keep: HashSet<u64> = l.live.keys().copied().collect();
                l.on_ring = keep;
                l.ranges.clear();
                l.generation += 1;
                l.tail = l.generation;
                l.write_at.fill(0);
                let live: Vec<DiskIndex> = (0..self.failed.len())
                    .filter(|&m| !self.failed[m])
                    .map(|m| DiskIndex(m as u16))
                    .collect();
                let l = self.ppl.as_mut().expect("a log");
                l.reset = Reset::Headers(live.len());
                l.in_flight = Some((0, Vec::new()));
                let generation = l.generation;
                let mut members = [0u8; 32];
                for m in &live {
                    members[m.get() / 8] |= 1 << (m.get() % 8);
                }
                for m in live {
                    self.queue_log_write(m, generation, members, Vec::new());
                }
                if self.ppl.as_ref().expect("a log").in_flight.as_ref().is_some_and(|f| f.0 == 0) {
                    self.log_generation_done();
                }
            }
            Reset::Headers(_) => {
                l.reset = Reset::No;
                l.started = true;
                self.log_reset_done();
            }
            Reset::No | Reset::Draining => {
                // Their ranges are durable: full-stripe writes inside them may go at once.
                let owners: HashSet<Owner> = heads.iter().map(|h| h.0).collect();
                let (done, pending): (BTreeMap<_, _>, BTreeMap<_, _>) =
                    std::mem::take(&mut l.pending_ranges)
                        .into_iter()
                        .partition(|r| owners.contains(&r.1.1));
                l.pending_ranges = pending;
                l.ranges.extend(done.into_iter().map(|(start, (end, _))| (start, end)));
                // Only heads with entries: their writes keep the rings busy, so a flush resets the log
                // and waits for them; a head with none would let a flush overtake its writes.
                let mut ids = Vec::new();
                let mut batches = Vec::new();
                for (owner, counted) in heads {
                    match owner {
                        Owner::Head(id) => {
                            l.writing += 1;
                            l.logged.insert(id, counted);
                            if counted {
                                ids.push(id);
                            }
                        }
                        Owner::Batch(index) => batches.push(index),
                    }
                }
                for id in ids {
                    self.ack_logged_writes(id);
                }
                for index in batches {
                    self.log_batch_released(index);
                }
                self.wake_log_waiters();
            }
        }
    }

    /// After a reset: flushes waiting for it complete; waiting heads' entries are computed
    /// again (their unions' older blocks are durable now); another reset starts if a flush
    /// came after this one's member flushes.
    fn log_reset_done(&mut self) {
        let l = self.ppl.as_mut().expect("a log");
        let done = l.resets;
        let (ready, later): (Vec<_>, Vec<_>) =
            std::mem::take(&mut l.flush_waiters).into_iter().partition(|w| w.1 <= done);
        l.flush_waiters = later;
        if !l.flush_waiters.is_empty() {
            l.reset = Reset::Draining;
        }
        let waiting = std::mem::take(&mut l.waiting);
        l.pending_ranges.clear();
        for w in &waiting {
            let keys = match w.owner {
                Owner::Head(_) if w.entries.is_empty() && !w.ranged => continue,
                Owner::Head(id) => vec![self.head_member_range(id).0],
                Owner::Batch(index) => self.batch_keys(index).collect(),
            };
            let l = self.ppl.as_mut().expect("a log");
            for key in keys {
                l.live.remove(&key);
                l.on_ring.remove(&key);
            }
        }
        for w in waiting {
            let id = match w.owner {
                Owner::Head(id) => id,
                Owner::Batch(index) => {
                    self.log_batch_wait(index, w.after);
                    continue;
                }
            };
            let whole = !w.discard && self.method(id) == Some(WriteMethod::FullStripe);
            if w.ranged || !w.entries.is_empty() {
                // Inside a range still to be logged (by a head ahead in the queue).
                if whole && matches!(self.range_cover(id), Some(Cover::Pending)) {
                    self.mark_ranged(id);
                    let l = self.ppl.as_mut().expect("a log");
                    l.waiting.push(Waiting { entries: Vec::new(), ranged: true, ..w });
                    continue;
                }
            }
            let entries = if w.entries.is_empty() && !w.ranged {
                None
            } else {
                Some(self.log_entries(id, w.discard)).filter(|e| !e.is_empty())
            };
            let key = self.head_member_range(id).0;
            let l = self.ppl.as_mut().expect("a log");
            match entries {
                Some(entries) if !entries.is_empty() => {
                    let live = l.live.entry(key).or_default();
                    live.modified.clone_from(&entries[0].1.modified);
                    live.writing += 1;
                    live.ranged = false;
                    l.on_ring.insert(key);
                    l.waiting.push(Waiting { entries, ranged: false, ..w });
                }
                // Nothing to log any more (a full-stripe write whose older entry is retired):
                // it may write at once, counted as logged by an empty generation.
                _ => l.waiting.push(Waiting { entries: Vec::new(), ranged: false, ..w }),
            }
        }
        for (slot, _) in ready {
            let req = self.request_mut(slot);
            req.outstanding -= 1;
            self.finish_if_done(slot);
        }
    }

    /// A partial-stripe batch whose entries are durable is acknowledged now, before its
    /// writes in place (md's raid5-cache does the same in write-back mode): a crash from here
    /// on loses at most these unflushed writes, never other data (the replay restores its
    /// parity), and until the writes complete the head holds the new data, so reads see it. A
    /// flush waits for them (it resets the log, which drains every logged write). Not for
    /// FUA writes (durable on completion) nor for blocks written straight from the request's
    /// buffer (full stripes: the buffer is needed until then).
    fn ack_logged_writes(&mut self, id: HeadId) {
        let Some(st) = self.heads.get(&id) else { return };
        let writes = st.batch.iter().any(|p| p.kind == super::Kind::Write);
        // Acknowledged already: this generation logs a rewrite over a read error.
        if !writes
            || st.acked_early
            || !st.skip_copy.is_empty()
            || st.error.is_some()
            || self.batch_fua(id)
        {
            return;
        }
        if self.method(id) == Some(WriteMethod::FullStripe) {
            return;
        }
        let slots: Vec<usize> =
            st.batch.iter().filter(|p| p.kind == super::Kind::Write).map(|p| p.slot).collect();
        self.state(id).acked_early = true;
        self.stats.writes_acked_when_logged += slots.len() as u64;
        for slot in slots {
            self.request_mut(slot).outstanding -= 1;
            self.finish_if_done(slot);
        }
    }

    /// A head starts reads for its writes: its number for the group commit (0 with no log).
    pub(super) fn log_write_reads_started(&mut self) -> u64 {
        self.ppl.as_mut().map_or(0, |l| {
            l.write_reads += 1;
            l.reading.insert(l.write_reads);
            l.write_reads
        })
    }

    /// The reads that head number `started` began for its writes have all completed.
    pub(super) fn log_write_reads_done(&mut self, started: u64) {
        if let Some(l) = self.ppl.as_mut() {
            l.reading.remove(&started);
        }
    }

    fn wake_log_waiters(&mut self) {
        let l = self.ppl.as_ref().expect("a log");
        let ready: Vec<HeadId> = l.logged.keys().copied().collect();
        for id in ready {
            if self.heads.get(&id).is_some_and(|st| st.phase == Phase::LogWait) {
                self.state(id).phase = Phase::Idle;
                if self.batch(id).first().map(|p| p.kind) != Some(super::Kind::Discard) {
                    self.start_writing(id);
                }
                self.handle(id);
            }
        }
    }

    /// The bytes of a log write.
    pub(super) fn log_buf(&self, index: usize) -> &[u8] {
        &self.ppl.as_ref().expect("a log").writes[index]
    }
}
