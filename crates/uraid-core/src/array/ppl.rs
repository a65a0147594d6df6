//! The partial parity log in the engine (records and arithmetic: `crate::ppl`): closes the
//! write hole. Before a stripe head changes data and parity in place, the parity of the data
//! it leaves alone (partial P on the P member's log, partial Q on the Q member's; at depth 1
//! on members the write leaves idle: `placement`) is written FUA; the head's writes start only
//! when it is durable. Log writes go out in generations, like the bitmap's: every head that
//! computed in a turn shares one write per member.
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
//! partial parity even when that member is lost. A stripe written whole by a batch keeps one
//! record for all its heads (`LiveStripe`).
//!
//! Acknowledging. A partial-stripe write (not FUA, not written from the request's buffer) is
//! acknowledged once its entries are durable, before its writes in place, as md's raid5-cache
//! does in write-back mode: it is unflushed, so a power cut may lose it, and the replay keeps
//! everything else intact; until its writes complete the head holds the data, and a flush waits
//! for them (its reset or advance drains the logged writes it covers). They go from copies
//! (`write_behind`), so the head's next batch need not wait for them. Generations overlap
//! (`generation`): a head's goes as soon as it has computed, and each acknowledges only its
//! own; a head under a range waits for the generation that logs the range. A random write
//! whose entries queue behind other generations is acknowledged sooner, when queued
//! (`ack_when_admitted`): its writes in place still wait for them, and a flush waits for it
//! to join a generation before the advance or reset that covers it.
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
//! generation does not fit the ring (rare: rings are circular, `ring`) and when a member
//! joins. A user flush (or FUA write) while the rings hold entries starts an advance
//! (`advance`), which retires what the flush covers while later writes go on being logged
//! (the flush completes once that is durable in place, mostly before the tail: see
//! `advance`); so does a ring filling up (`ring`).

use super::Array;
use super::handle::Phase;
use crate::fast_hash::{HashMap, HashSet};
use crate::geometry::DiskRole;
use crate::ppl::{LOG_HEADER_SECTORS, LogEntry, LogParity, SectorMask, full_mask, is_full};
use crate::stripe::{HeadId, StripeView, WriteMethod, WritePlan, plan_write_without_rmw};
use crate::units::{DiskIndex, StripeNumber};
use smallvec::SmallVec;
use std::borrow::Cow;
use std::collections::BTreeMap;

mod advance;
mod batch;
mod generation;
mod placement;
mod ring;
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
    /// The members are disks that seek (where a log write on a member busy elsewhere costs a
    /// seek there and back): a write at depth 1 may log on two idle members, and a RAID6 one
    /// at depth on three (`placement`; RAID4/5 at depth does so on any member kind).
    pub rotational: bool,
    /// Stripes from one this engine serves to its next: the runtime's workers take stripes in
    /// turn (worker `i` of `n` serves stripes `i`, `i + n`, ...), so a sequential stream's
    /// previous stripe in this engine is `n` back, and only then is it seen as a stream
    /// (`range_span`). 1: every stripe.
    pub stride_stripes: u64,
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
    /// A full-stripe write inside a range still to be logged: no entries of its own.
    ranged: bool,
    /// Its writes were acknowledged when it came (`PartialParityLog::acks` then; 0: not).
    acked: u64,
}

/// Whether a full-stripe write is inside a range (see the module docs).
enum Cover {
    Durable,
    Pending,
}

/// A head's entries: per parity member, its entry and partial parity block.
type Entries = Vec<(DiskIndex, LogEntry, Option<Vec<u8>>)>;

/// A head's span-1 entries not yet retired (`PartialParityLog::placed`).
type Placed = SmallVec<[(u64, LogParity, u16); 2]>;

/// Per stripe head (by its first member sector): the sectors written since everything was
/// last durable, and logged writes still in flight.
#[derive(Clone, Default)]
struct Live {
    modified: Vec<(usize, SectorMask)>,
    writing: u32,
    /// Written only under ranges: no entry of its own on the rings.
    ranged: bool,
    /// `PartialParityLog::advances` when the union began: a union born below an advance's
    /// number began before that advance did, and may hold sectors its flush makes durable.
    born: u64,
}

/// A stripe written whole by a batch (`batch`) since everything was last durable: as if each
/// of its heads were in `live`, ranged, with every data block in its union. One record a
/// stripe, not one a head: a 1 MiB sequential write over NBD spent a fifth of its engine CPU
/// making and looking up 4 KiB heads' records in a map that held one per head of the array
/// written since the last flush (`uraid bench serve --target raid5-log`). A head's own
/// record in `live`, if any, stands over its stripe's.
#[derive(Clone, Default)]
struct LiveStripe {
    /// Batches of the stripe waiting for the log or writing (one at a time).
    writing: u32,
    born: u64,
    /// Heads the batch logs an entry of their own for (span 1): in `live`, counted there
    /// until it has written.
    own: Vec<u64>,
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
    /// Where log writes go on each member's ring.
    rings: ring::Rings,
    live: HashMap<u64, Live>,
    /// Per stripe (by number), whole-stripe batches' unions (see `LiveStripe`).
    stripes: HashMap<u64, LiveStripe>,
    chunk_sectors: u64,
    /// Heads with an entry on the ring since the last reset.
    on_ring: HashSet<u64>,
    /// Per head, its span-1 entries not yet retired: generation, parity, ring. Inline for a
    /// head's P and Q in one generation: an entry is added for every logged write.
    placed: HashMap<u64, Placed>,
    /// Durable ranges since the last reset: start -> end (member sectors; disjoint).
    ranges: BTreeMap<u64, u64>,
    /// Ranges waiting for their generation: start -> (end, the head or batch that logs it).
    pending_ranges: BTreeMap<u64, (u64, Owner)>,
    /// Heads whose entries for the current batch are durable: whether they count in `live`,
    /// and `advances` when their generation started (an advance drains the older ones).
    logged: std::collections::BTreeMap<HeadId, (bool, u64)>,
    /// Heads whose earlier batch writes behind (`write_behind`), with its `logged` record.
    behind: std::collections::BTreeMap<HeadId, (bool, u64)>,
    /// Heads waiting for the next generation, with their entries and blocks (none: a write
    /// that needs no entry, waiting for the first reset of the run).
    waiting: Vec<Waiting>,
    /// Requests (flushes, FUA writes) that complete when reset number `.1` has, or advance
    /// number `.2`.
    flush_waiters: Vec<(usize, u64, u64)>,
    /// Heads' writes acknowledged before their entries were durable, counted: a flush waits
    /// until those acknowledged before it (`acks` then: `.1`) have joined a generation
    /// before it waits for a reset or an advance, which cover generations, not heads waiting
    /// (`Array::log_flush`).
    acks: u64,
    deferred_flushes: Vec<(usize, u64)>,
    /// Advances started (see `advance`), and the one in progress.
    advances: u64,
    advance: Option<advance::Advance>,
    /// The run's first reset has written its headers: writes that need no entry go at once.
    started: bool,
    /// Generations in flight, oldest first (on members that seek at most
    /// `MAX_GENERATIONS_IN_FLIGHT_ROTATIONAL`), or a reset's member flushes or headers alone.
    in_flight: Vec<generation::Flight>,
    /// Numbers the entries of `in_flight` (`Pending::Log` names its own).
    flights: u64,
    /// The newest generation durable: generations in flight may complete out of order.
    newest_done: u64,
    reset: Reset,
    /// Another reset is wanted once the one under way is done (`log_member_joined`).
    reset_again: bool,
    /// Logged heads whose in-place writes have not completed.
    writing: usize,
    pub(super) log_writes: u64,
    pub(super) log_bytes: u64,
    pub(super) resets: u64,
    /// Writes that could not be logged (a block of their union unreadable): unprotected.
    pub(super) unprotected: u64,
    /// Partial parity blocks already encoded into their log write, for the next entries.
    spare_blocks: Vec<Vec<u8>>,
    /// Buffers of completed log writes, for the next.
    spare_bufs: Vec<crate::buffer::BlockBuf>,
}

impl PartialParityLog {
    /// Whether a durable range holds member sector `at`.
    fn durable_range(&self, at: u64) -> bool {
        self.ranges.range(..=at).next_back().is_some_and(|(_, end)| *end > at)
    }

    /// Whether full-stripe writes may go under durable ranges: not while a reset or an
    /// advance (which retire every range) is under way, which would wait for them.
    fn ranges_usable(&self) -> bool {
        self.reset == Reset::No && self.advance.is_none()
    }

    /// The union of head `key`, begun now if it has none (then, or when its stripe's was).
    fn live_at(&mut self, key: u64) -> &mut Live {
        let born = self.stripe_of(key).map_or(self.advances, |s| s.born);
        self.live.entry(key).or_insert_with(|| Live { born, ..Live::default() })
    }

    /// Whether head `key` was written since everything was last durable (it has a union).
    fn written(&self, key: u64) -> bool {
        self.live.contains_key(&key) || self.stripe_of(key).is_some()
    }

    /// The union record of head `key`'s stripe, if a batch wrote it.
    fn stripe_of(&self, key: u64) -> Option<&LiveStripe> {
        self.stripes.get(&(key / self.chunk_sectors))
    }

    /// Takes the flushes waiting for a reset or an advance that is done. Neither starts while
    /// the other is under way (a reset drops an advance), so every reset started is done at
    /// either's end, and every advance started but the one under way; an advance a reset
    /// dropped counts as done: its waiters came before that reset, which covers them.
    fn take_done_waiters(&mut self) -> Vec<usize> {
        let resets = self.resets;
        let advances = self.advances - u64::from(self.advance.is_some());
        let (done, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.flush_waiters)
            .into_iter()
            .partition(|w| w.1 <= resets || w.2 <= advances);
        self.flush_waiters = later;
        done.into_iter().map(|w| w.0).collect()
    }

    /// Generations below `tail` are retired on every ring.
    fn retire(&mut self, tail: u64) {
        self.rings.retire(tail);
        self.placed.retain(|_, v| {
            v.retain(|e| e.0 >= tail);
            !v.is_empty()
        });
    }

    /// Whether a replay could take a head's older entry below `tail` for its newest: a head
    /// with entries of one parity in two generations below it, not on the same rings. Losing
    /// the rings of the newer one would leave the older, whose partial parity predates the
    /// newer write (`tests/log_replay.rs`), so a flush waits for the tail to retire both.
    fn replay_may_fall_back(&self, tail: u64) -> bool {
        self.placed.values().any(|entries| {
            [LogParity::P, LogParity::Q].iter().any(|parity| {
                let mut rings: BTreeMap<u64, Vec<u16>> = BTreeMap::new();
                for &(generation, _, ring) in
                    entries.iter().filter(|e| e.1 == *parity && e.0 < tail)
                {
                    rings.entry(generation).or_default().push(ring);
                }
                let mut sets = rings.into_values().map(|mut r| {
                    r.sort_unstable();
                    r
                });
                sets.next().is_some_and(|first| sets.any(|s| s != first))
            })
        })
    }

    /// Whether a range still to be logged holds member sector `at`.
    fn pending_range(&self, at: u64) -> bool {
        self.pending_ranges.range(..=at).next_back().is_some_and(|(_, (end, _))| *end > at)
    }
}

impl Array {
    /// Whether a waiting head or batch under a range still to be logged has its range in a
    /// generation in flight: it may share that generation, never go in a later one, which
    /// may be durable first (generations overlap) and let its writes out with nothing on the
    /// rings covering them (seed 33009049: a torn full-stripe write that no replay mended).
    fn log_range_in_flight(&self, w: &Waiting) -> bool {
        let l = self.ppl.as_ref().expect("a log");
        let keys: Vec<u64> = match w.owner {
            Owner::Head(id) => vec![self.head_member_range(id).0],
            Owner::Batch(index) => self.batch_keys(index).collect(),
        };
        let in_flight = |owner: &Owner| l.in_flight.iter().any(|f| f.logs(*owner));
        keys.iter().any(|&at| {
            l.pending_ranges
                .range(..=at)
                .next_back()
                .is_some_and(|(_, (end, owner))| *end > at && in_flight(owner))
        })
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
            rings: ring::Rings::new(self.failed.len(), cfg.ring_sectors),
            live: HashMap::default(),
            stripes: HashMap::default(),
            chunk_sectors: self.geometry.chunk_sectors(),
            on_ring: HashSet::default(),
            placed: HashMap::default(),
            ranges: BTreeMap::new(),
            pending_ranges: BTreeMap::new(),
            logged: std::collections::BTreeMap::new(),
            behind: std::collections::BTreeMap::new(),
            waiting: Vec::new(),
            flush_waiters: Vec::new(),
            acks: 0,
            deferred_flushes: Vec::new(),
            advances: 0,
            advance: None,
            started: false,
            in_flight: Vec::new(),
            flights: 0,
            newest_done: 0,
            reset: Reset::Draining,
            reset_again: false,
            writing: 0,
            log_writes: 0,
            log_bytes: 0,
            resets: 0,
            unprotected: 0,
            spare_blocks: Vec::new(),
            spare_bufs: Vec::new(),
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
            "reset {:?} (resets {}), advance {:?} (started {}), waiting {waiting:?}, \
             in flight {:?}, writing {}, logged {:?}, flush waiters {:?}, on ring {}",
            l.reset,
            l.resets,
            l.advance,
            l.advances,
            l.in_flight.iter().map(|f| (f.generation, f.outstanding)).collect::<Vec<_>>(),
            l.writing,
            l.logged,
            l.flush_waiters,
            l.on_ring.len() + l.stripes.len()
        ))
    }

    /// Unions the log keeps (see the module docs): heads' records, stripes' records.
    #[doc(hidden)]
    #[must_use]
    pub fn log_unions(&self) -> Option<(usize, usize)> {
        self.ppl.as_ref().map(|l| (l.live.len(), l.stripes.len()))
    }

    /// A member joins (a spare to recover): its ring holds nothing of ours, so the log
    /// starts again on every member. A reset past its drain may have sent its headers before
    /// the member was live: another follows it. (Needed first when a replay walked each ring
    /// from its start, and found nothing on a ring with no header there: seed 106193. Rings
    /// are read whole now, and the reset still retires everything the new ring never held.)
    pub(super) fn log_member_joined(&mut self) {
        let Some(l) = self.ppl.as_mut() else { return };
        match l.reset {
            Reset::No => l.reset = Reset::Draining,
            Reset::Draining => {}
            Reset::Flushing(_) | Reset::Headers(_) => l.reset_again = true,
        }
    }

    /// Whether a flush (or FUA write) waits for the log and the writes in place it waits for
    /// may still be outstanding: no advance has yet flushed the members (a reset, or an
    /// advance draining or yet to start).
    pub(super) fn log_flush_draining(&self) -> bool {
        self.ppl.as_ref().is_some_and(|l| {
            !l.flush_waiters.is_empty()
                && l.advance.as_ref().is_none_or(|a| a.stage == advance::Stage::Draining)
        })
    }

    pub(super) fn log_busy(&self) -> bool {
        self.ppl.as_ref().is_some_and(|l| {
            !l.waiting.is_empty()
                || !l.in_flight.is_empty()
                || matches!(l.reset, Reset::Flushing(_) | Reset::Headers(_))
                || (l.reset == Reset::Draining && l.writing == 0)
        }) || self.log_advance_busy()
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
        let key = self.head_member_range(id).0;
        let Some(union) = self.log_union(key) else { return Vec::new() };
        let head = self.cache.head(id);
        let lost = self.lost(id);
        let map = self.geometry.stripe_map(head.key.stripe);
        map.data_disk
            .iter()
            .copied()
            .filter(|d| union.iter().any(|m| m.0 == d.get()))
            .filter(|d| !writes.contains(d) && !head.devs[d.get()].uptodate && !lost[d.get()])
            .collect()
    }

    /// The write plan with the log's extra reads counted, and those reads (`log_extra_reads`):
    /// a read-modify-write that must also read blocks of the union gives way to a
    /// reconstruct-write that reads fewer, which reads every data block it does not
    /// overwrite, the union's among them. (A head rewritten before the next flush, its
    /// union's blocks evicted: RAID5 of 4+1 with two of them reads 3, not 4.)
    pub(super) fn log_plan(
        &self,
        id: HeadId,
        view: &StripeView<'_>,
        plan: WritePlan,
    ) -> (WritePlan, Vec<DiskIndex>) {
        // Both methods write the same blocks, so the union's blocks to read are the same.
        let extra = self.log_extra_reads(id, &plan.writes);
        let more = extra.iter().filter(|d| !plan.reads.contains(d)).count();
        if plan.method == WriteMethod::ReadModifyWrite
            && more > 0
            && let Ok(rcw) = plan_write_without_rmw(view)
            && rcw.method == WriteMethod::ReconstructWrite
            && rcw.reads.len() < plan.reads.len() + more
        {
            return (rcw, extra);
        }
        (plan, extra)
    }

    /// Before head `id` writes in place: true if it may go now; false if it waits for its
    /// entries to be durable (parked in `Phase::LogWait`, `start_writing` is called again).
    pub(super) fn log_admit(&mut self, id: HeadId, discard: bool) -> bool {
        let Some(l) = self.ppl.as_ref() else { return true };
        if l.logged.contains_key(&id) {
            return true;
        }
        let whole = !discard && self.method(id) == Some(WriteMethod::FullStripe);
        match self.range_cover(id).filter(|_| whole) {
            Some(Cover::Durable) => {
                self.mark_ranged(id);
                let l = self.ppl.as_mut().expect("checked");
                l.logged.insert(id, (true, l.advances));
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
                l.waiting.push(Waiting { owner, discard, entries, ranged: true, acked: 0 });
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
                let live = l.live_at(key);
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
        let owner = Owner::Head(id);
        l.waiting.push(Waiting { owner, discard, entries, ranged: false, acked: 0 });
        self.state(id).phase = Phase::LogWait;
        self.ack_when_admitted(id);
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
        if l.ranges_usable() && l.durable_range(key) {
            return Some(Cover::Durable);
        }
        l.pending_range(key).then_some(Cover::Pending)
    }

    /// Head `key`'s union: its own record's, else its stripe's (every data block) if a batch
    /// wrote it; None if it was not written since everything was last durable.
    fn log_union(&self, key: u64) -> Option<Cow<'_, [(usize, SectorMask)]>> {
        let l = self.ppl.as_ref()?;
        if let Some(live) = l.live.get(&key) {
            return Some(Cow::Borrowed(&live.modified));
        }
        l.stripe_of(key)
            .map(|_| Cow::Owned(self.whole_stripe_modified(StripeNumber(key / l.chunk_sectors))))
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
        let fresh = !l.live.contains_key(&key);
        let live = l.live_at(key);
        live.ranged |= fresh;
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
        let Some(prev) = self.stream_prev(key) else { return 1 };
        if in_range(key) {
            return 1;
        }
        let len = if in_range(prev) {
            MAX_RANGE_SECTORS
        } else if l.written(prev) {
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

    /// The head a stream writes before the head at `key` in this engine: the row before it in
    /// its chunk, or at a chunk's first row the last row of this engine's previous stripe
    /// (`stride_stripes` back). With two workers every stripe's previous one is the other
    /// worker's, and before this no full-stripe write was seen as a stream's: each logged a
    /// range of its own stripe, and every fifth reset the log (`uraid bench serve`, RAID5 x5
    /// on memory members, 1 MiB sequential writes at 0.81 of the hole left open).
    fn stream_prev(&self, key: u64) -> Option<u64> {
        let (unit, chunk) = (self.unit_sectors, self.geometry.chunk_sectors());
        if !key.is_multiple_of(chunk) {
            return key.checked_sub(unit);
        }
        let stride = self.ppl.as_ref().expect("a log").cfg.stride_stripes.max(1);
        (key / chunk).checked_sub(stride).map(|s| (s + 1) * chunk - unit)
    }

    /// Whether `writes` (of head `id`) include a parity block.
    fn writes_parity(&self, id: HeadId, writes: &[DiskIndex]) -> bool {
        let map = self.geometry.stripe_map(self.cache.head(id).key.stripe);
        writes.iter().any(|w| Some(*w) == map.p_disk || Some(*w) == map.q_disk)
    }

    /// Whether a data block in the log's union for this head failed to read (a member not
    /// failed): the head must rebuild it for its entry.
    pub(super) fn log_union_unreadable(&self, id: HeadId) -> bool {
        let Some(union) = self.log_union(self.head_member_range(id).0) else { return false };
        self.heads[&id]
            .suspect
            .iter()
            .any(|m| !self.failed[m.get()] && union.iter().any(|(d, _)| *d == m.get()))
    }

    /// Whether a read-error rewrite of `writes` must be logged: it rewrites parity of a
    /// stripe with data written since the last durable point.
    pub(super) fn log_covers_rewrite(&self, id: HeadId, writes: &[DiskIndex]) -> bool {
        let Some(l) = self.ppl.as_ref() else { return false };
        l.written(self.head_member_range(id).0) && self.writes_parity(id, writes)
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
        let writes: SmallVec<[DiskIndex; 4]> = self.heads[&id].writes.iter().copied().collect();
        let unit = self.unit_sectors;
        let mut entry = LogEntry {
            member_sector: key,
            parity: LogParity::P,
            modified: self.log_union(key).map(Cow::into_owned).unwrap_or_default(),
            block_crc: None,
            span,
        };
        if whole {
            // Logged too, block-less (as md's PPL does): a replay recomputes the parity from
            // the data, so that a torn full-stripe write on an array that is (or becomes)
            // degraded leaves P and Q consistent with each other and with what is there.
            entry.modified = self.whole_stripe_modified(self.cache.head(id).key.stripe);
        } else {
            // Only blocks this generation writes: a read-error rewrite after the batch's data
            // writes completed, computed again after an advance or reset, must not count that
            // data as being written once it is durable (seed 20013895: a lost member's
            // flushed block read as zeros at the replay). A failed member's block stays for
            // the partial parity to see (which then leaves it out of the union).
            for p in self.batch(id).iter().filter(|p| p.kind == super::Kind::Write) {
                for b in &p.blocks {
                    let d = map.data_disk[usize::from(b.data_slot)].get();
                    if !writes.iter().any(|w| w.get() == d) && !self.failed[d] {
                        continue;
                    }
                    entry.add(d, b.first, b.sectors, unit);
                }
            }
        }
        let parities: SmallVec<[(DiskIndex, LogParity); 2]> =
            [(map.p_disk, LogParity::P), (map.q_disk, LogParity::Q)]
                .into_iter()
                .filter_map(|(d, p)| {
                    d.filter(|d| !lost[d.get()] || writes.contains(d)).map(|d| (d, p))
                })
                .collect();
        let mut out = Vec::with_capacity(parities.len());
        for (member, parity) in parities {
            let mut e = LogEntry { parity, ..entry.clone() };
            let spare = if whole { Vec::new() } else { self.ppl_block() };
            let block = if whole {
                None
            } else if let Some((b, failed_in)) = self.partial_parity(id, &e, spare) {
                // A failed member's sectors in it are not being written as far as a replay
                // goes: it solves them from the partial parity (`crate::ppl::replay_blocks`).
                if failed_in {
                    e.modified.retain(|(d, _)| !self.failed[*d]);
                }
                e.block_crc = Some(crate::ppl::crc32c(&b));
                Some(b)
            } else {
                // Neither the union's blocks nor all the others are here: a read error in the
                // union on a degraded stripe. Block-less: a replay recomputes from the data.
                self.ppl.as_mut().expect("a log").unprotected += 1;
                None
            };
            out.push((member, e, block));
        }
        self.place_entries(id, &mut out);
        if entry.span > 1 && !out.is_empty() {
            let end = key + u64::from(entry.span) * unit;
            let owner = Owner::Head(id);
            self.ppl.as_mut().expect("a log").pending_ranges.insert(key, (end, owner));
        }
        out
    }

    /// A buffer for a partial parity block, of any contents: one a log write took its copy of
    /// already (`spare_blocks`, kept by `queue_log_write`), or a new one. A random write logs
    /// one per parity, and a new one costs an allocation that was as dear as computing it.
    fn ppl_block(&mut self) -> Vec<u8> {
        let l = self.ppl.as_mut().expect("a log");
        l.spare_blocks.pop().unwrap_or_default()
    }

    /// The entry's partial parity from the head after compute, in `out` (any contents): the
    /// new parity minus the modified sectors, or (when a modified block is not here) the sum
    /// of every other sector; and whether it holds the union's sectors of failed members (the
    /// first way). Written with ordinary stores: its checksum and its log write read it next.
    fn partial_parity(
        &self,
        id: HeadId,
        e: &LogEntry,
        mut out: Vec<u8>,
    ) -> Option<(Vec<u8>, bool)> {
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
        // Adds the sectors of `b` that `take` picks into `out`, times d's coefficient for Q: a
        // call per run of sectors (a whole block is one), not per sector.
        let add = |out: &mut [u8], d: usize, b: &[u8], take: &dyn Fn(usize) -> bool| {
            let sectors = out.len().min(b.len()) / 512;
            let mut s = 0;
            while s < sectors {
                let start = s;
                while s < sectors && take(s) {
                    s += 1;
                }
                if s == start {
                    s += 1;
                    continue;
                }
                let (o, src) = (&mut out[start * 512..s * 512], &b[start * 512..s * 512]);
                match coefficient(d) {
                    Some(c) => uraid_parity::mul_const_acc(o, src, c),
                    None => uraid_parity::xor_acc_cached(o, &[src]),
                }
            }
        };
        let has = |mask: &[u64], s: usize| mask[s / 64] & (1 << (s % 64)) != 0;
        let parity = match e.parity {
            LogParity::P => map.p_disk,
            LogParity::Q => map.q_disk,
        }
        .expect("a live parity member");
        // A failed member's block is not here to take out: its sectors stay in the sum, and
        // the entry leaves it out of its union (`log_entries`).
        let failed = |d: usize| self.failed[d];
        let parity_block = &head.buffers[parity.get()][..];
        out.resize(parity_block.len(), 0);
        if e.modified.iter().all(|(d, _)| failed(*d) || block(*d).is_some()) {
            let unit = self.unit_sectors;
            if e.parity == LogParity::P
                && e.modified.iter().all(|(d, m)| !failed(*d) && is_full(m, unit))
            {
                // Whole blocks of P (a random write's case): one pass.
                let mut srcs: smallvec::SmallVec<[&[u8]; 4]> = smallvec::smallvec![parity_block];
                srcs.extend(e.modified.iter().map(|(d, _)| block(*d).expect("checked")));
                uraid_parity::xor_gen_cached(&mut out, &srcs);
                return Some((out, false));
            }
            out.copy_from_slice(parity_block);
            for (d, mask) in e.modified.iter().filter(|(d, _)| !failed(*d)) {
                add(&mut out, *d, block(*d).expect("checked"), &|s| has(mask, s));
            }
            return Some((out, e.modified.iter().any(|(d, _)| failed(*d))));
        }
        out.fill(0);
        for d in map.data_disk.iter().map(|d| d.get()) {
            let mask = e.mask(d);
            if mask.is_some_and(|m| m.iter().all(|w| *w == u64::MAX)) {
                continue;
            }
            add(&mut out, d, block(d)?, &|s| mask.is_none_or(|m| !has(m, s)));
        }
        Some((out, false))
    }

    /// A logged head's in-place writes completed.
    pub(super) fn log_writes_done(&mut self, id: HeadId) {
        self.log_record_done(id, false);
    }

    /// Head `id`'s logged writes completed: those of its current batch, or (`behind`) those
    /// of an earlier one written from copies.
    fn log_record_done(&mut self, id: HeadId, behind: bool) {
        let key = self.head_member_range(id).0;
        let Some(l) = self.ppl.as_mut() else { return };
        let records = if behind { &mut l.behind } else { &mut l.logged };
        let Some((counted, _)) = records.remove(&id) else { return };
        l.writing -= 1;
        if counted {
            l.live.get_mut(&key).expect("a counted head is live").writing -= 1;
        }
    }

    /// Head `id`'s batch writes behind (`write_behind`): its record moves aside, so that the
    /// next batch logs anew, and an advance still drains these writes.
    pub(super) fn log_behind(&mut self, id: HeadId) {
        let Some(l) = self.ppl.as_mut() else { return };
        if let Some(record) = l.logged.remove(&id) {
            let earlier = l.behind.insert(id, record);
            debug_assert!(earlier.is_none(), "one batch writes behind at a time");
        }
    }

    /// Head `id`'s writes behind completed.
    pub(super) fn log_behind_done(&mut self, id: HeadId) {
        self.log_record_done(id, true);
    }

    /// A flush (or a FUA write, once written) in request `slot`: with entries on the rings, it
    /// completes when they are retired or their writes are durable (true; see `advance`): by
    /// an advance, or by the next reset when one is under way or wanted. Else false: the
    /// caller flushes as usual. While writes acknowledged before it wait for a generation
    /// (`ack_when_admitted`) it waits for them to join one first.
    pub(super) fn log_flush(&mut self, slot: usize) -> bool {
        let Some(l) = self.ppl.as_mut() else { return false };
        if l.waiting.iter().any(|w| w.acked != 0) {
            l.deferred_flushes.push((slot, l.acks));
            self.request_mut(slot).outstanding += 1;
            return true;
        }
        self.log_flush_now(slot)
    }

    /// `log_flush` once no write acknowledged before it waits for a generation.
    pub(super) fn log_flush_now(&mut self, slot: usize) -> bool {
        let Some(l) = self.ppl.as_mut() else { return false };
        let pending = l.reset != Reset::No || !l.waiting.is_empty() || !l.in_flight.is_empty();
        if l.on_ring.is_empty() && l.stripes.is_empty() && !pending {
            return false;
        }
        // The next reset or advance to start: one already under way may have drained before
        // writes this flush must cover completed (`resets` counts those started), unless it
        // covers them all (`flush_may_join`).
        let by_advance = l.reset == Reset::No && l.started;
        let advance =
            if by_advance { l.advances + u64::from(!l.flush_may_join()) } else { u64::MAX };
        l.flush_waiters.push((slot, l.resets + 1, advance));
        if by_advance && l.advance.is_none() {
            l.start_advance();
        } else if !by_advance && l.reset == Reset::No {
            l.reset = Reset::Draining;
        }
        self.request_mut(slot).outstanding += 1;
        true
    }
}
