//! The log's generations and resets: the entries of the heads and batches waiting in a turn
//! go as one FUA write per member, their completion (which lets the writes they cover go, and
//! acknowledges partial-stripe writes early), and retiring the rings (see the parent's docs).

use super::{Array, Cover, Owner, Reset, Waiting};
use crate::array::handle::Phase;
use crate::array::{IoArea, IoBuf, Kind, MemberIo, MemberOp, Pending};
use crate::buffer::BlockBuf;
use crate::fast_hash::HashSet;
use crate::ppl::{LogEntry, LogHeader, MAX_LOG_ENTRIES, header_sectors};
use crate::stripe::{HeadId, WriteMethod};
use crate::units::{DiskIndex, Sector};
use smallvec::SmallVec;
use std::collections::BTreeMap;

/// Generations in flight at once on members that seek: each is a seek pair on its members,
/// so heads that come while this many are in flight share the next. Flash has no limit.
const MAX_GENERATIONS_IN_FLIGHT_ROTATIONAL: usize = 4;
/// Partial parity blocks, and log write buffers, kept for reuse (`PartialParityLog`'s
/// `spare_blocks` and `spare_bufs`).
const MAX_SPARE_BLOCKS: usize = 64;
const MAX_SPARE_BUFS: usize = 16;
/// Pages a kept log write buffer may hold (it keeps its largest size: `BlockBuf::resize_any`):
/// a generation of `MAX_LOG_ENTRIES` whole 4 KiB blocks and its header takes 63, and the
/// spares hold at most 4 MiB. At 16 pages, RAID6 at depth dropped most of its buffers and
/// made new ones (the log_cpu rows: 4% of the CPU with the log in `resize_any`, and page
/// faults).
const MAX_SPARE_BUF_PAGES: usize = 64;

/// A generation in flight (or a reset's member flushes, or its headers).
pub(in crate::array) struct Flight {
    /// Unique among flights (`Pending::Log` names it).
    id: u64,
    /// Its header's generation number (0: a reset's member flushes).
    pub(super) generation: u64,
    /// Its log writes (or flushes) outstanding.
    pub(super) outstanding: usize,
    /// Its heads and batches, and whether each head counts in `live`.
    owners: Vec<(Owner, bool)>,
    /// `PartialParityLog::advances` when it started.
    pub(super) advance: u64,
    /// It carries an advance's tail (`advance`).
    tail: bool,
    /// Nothing waits for it: an advance's tail with no entries and no flush waiting. Its log
    /// writes count as background I/O (`Array::others_busy`), as writes in place of
    /// acknowledged batches do: holding a stream's head for them gains nothing, since no
    /// request completes when they do.
    background: bool,
    /// Its log writes' buffers (`IoBuf::Log` names them), freed with it.
    bufs: Vec<BlockBuf>,
    /// It logs heads whose writes were acknowledged before it was durable: an advance that
    /// does not drain it does not cover them (`flush_may_join`).
    pub(super) acked: bool,
}

/// What `take_log_heads` found.
enum Taken {
    Heads(Vec<Waiting>),
    /// Nothing fits until the advance under way retires older generations.
    Wait,
    /// Nothing fits: the rings are reset first.
    Full,
    /// Nothing fits, and no advance was under way: one has started.
    Advance,
}

impl Array {
    /// Starts the next log write (or the reset it needs). Called when the runtime asks for
    /// member I/O, so that every head of a turn shares one generation.
    ///
    /// No group commit beyond the turn: a head's generation goes as soon as it has computed,
    /// beside those in flight (they are independent: each acknowledges and releases only its
    /// own heads, and a replay takes every whole generation it finds). Waiting for heads
    /// still reading, to share one log write, made random writes at depth go in waves: the
    /// members idled while a generation was in flight, and the logged array ran 0.66 of the
    /// open hole's speed on the bench's SSD (`bench io --only ppl`, RAID5 random qd16) where
    /// a log write per head runs 0.87.
    pub(in crate::array) fn start_log_generation(&mut self) {
        self.step_log_advance();
        let Some(l) = self.ppl.as_ref() else { return };
        let at_limit =
            l.cfg.rotational && l.in_flight.len() >= MAX_GENERATIONS_IN_FLIGHT_ROTATIONAL;
        if !l.in_flight.is_empty() && (l.reset != Reset::No || at_limit) {
            return;
        }
        if l.reset == Reset::Draining && l.writing == 0 {
            // Every logged write is done.
            self.start_log_reset();
            return;
        }
        let tail = l.tail_due();
        if l.reset != Reset::No || (l.waiting.is_empty() && tail.is_none()) {
            return;
        }
        // During an advance only some heads may join (see `advance`).
        let joinable = self.log_joinable_now();
        if !joinable.contains(&true) && tail.is_none() {
            return;
        }
        let live_members: Vec<usize> =
            (0..self.failed.len()).filter(|&m| !self.failed[m]).collect();
        let heads = match self.take_log_heads(&joinable, &live_members, tail.is_some()) {
            Taken::Heads(heads) => {
                self.log_note_old_unions(&heads);
                heads
            }
            Taken::Wait => return,
            // It may be drained already (nothing logged is being written).
            Taken::Advance => return self.start_log_generation(),
            Taken::Full => {
                self.ppl.as_mut().expect("checked").reset = Reset::Draining;
                return self.start_log_generation();
            }
        };
        let l = self.ppl.as_mut().expect("checked");
        if let Some(tail) = tail {
            l.tail = tail;
            l.advance.as_mut().expect("a tail is an advance's").stage =
                super::advance::Stage::TailInFlight;
        }
        l.generation += 1;
        let generation = l.generation;
        let owners = heads.iter().map(|w| (w.owner, !w.entries.is_empty() || w.ranged)).collect();
        let acked = heads.iter().any(|w| w.acked != 0);
        l.start_flight(generation, owners, tail.is_some(), acked);
        // Before the flight can complete: a flush let go now finds it in flight.
        self.release_deferred_flushes();
        let per_member = self.entries_per_member(heads, generation);
        let has_entries: Vec<bool> = per_member.iter().map(|e| !e.is_empty()).collect();
        let holders = self.log_tail_holders(&has_entries, &live_members, tail.is_some());
        let mut members = [0u8; 32];
        for m in (0..holders.len()).filter(|&m| holders[m]) {
            members[m / 8] |= 1 << (m % 8);
        }
        for (m, entries) in per_member.into_iter().enumerate() {
            if holders[m] {
                self.queue_log_write(DiskIndex(m as u16), generation, members, entries);
            }
        }
        self.ppl.as_mut().expect("a log").advance_if_rings_fill(&live_members);
        self.log_flight_done_if_empty();
    }

    /// The heads' entries by the member whose ring takes them, noted in `placed`.
    fn entries_per_member(
        &mut self,
        heads: Vec<Waiting>,
        generation: u64,
    ) -> Vec<Vec<(LogEntry, Option<Vec<u8>>)>> {
        // Sized first: a generation carries an entry per logged write.
        let mut counts = vec![0; self.failed.len()];
        for (m, _, _) in heads.iter().flat_map(|w| &w.entries) {
            counts[m.get()] += 1;
        }
        let mut per_member: Vec<Vec<_>> = counts.into_iter().map(Vec::with_capacity).collect();
        let l = self.ppl.as_mut().expect("a log");
        for (m, e, b) in heads.into_iter().flat_map(|w| w.entries) {
            if e.span == 1 {
                l.placed.entry(e.member_sector).or_default().push((generation, e.parity, m.0));
            }
            per_member[m.get()].push((e, b));
        }
        per_member
    }

    /// The members a generation goes to: those with entries, and when it carries an
    /// advance's tail, enough more that any members the array can lose leave a copy (the
    /// replay takes the newest tail any ring holds: `crate::ppl::entries_to_replay`), picked
    /// least busy. Until the fourth session of 2026-11-27 a tail went to every member: on
    /// members that seek, a seek pair each per advance.
    fn log_tail_holders(
        &self,
        has_entries: &[bool],
        live_members: &[usize],
        tail: bool,
    ) -> Vec<bool> {
        let mut holders: Vec<bool> =
            has_entries.iter().zip(&self.failed).map(|(e, failed)| *e && !failed).collect();
        if tail {
            let copies = (self.geometry.max_degraded() + 1).min(live_members.len());
            let have = holders.iter().filter(|h| **h).count();
            let mut others: Vec<usize> =
                live_members.iter().copied().filter(|&m| !holders[m]).collect();
            others.sort_by_key(|&m| self.inflight.load(DiskIndex(m as u16)));
            for m in others.into_iter().take(copies.saturating_sub(have)) {
                holders[m] = true;
            }
        }
        holders
    }

    /// The flight just started had nothing to write: it is done at once.
    fn log_flight_done_if_empty(&mut self) {
        let l = self.ppl.as_ref().expect("a log");
        let f = l.in_flight.last().expect("a flight started");
        if f.outstanding == 0 {
            self.log_generation_done(f.id);
        }
    }

    /// Takes the waiting heads (of those `joinable`, in order) whose entries fit every
    /// member's ring and header, leaving room on every live member for a header when the
    /// generation carries a tail, and for an advance's tail after this one. When nothing fits
    /// an advance starts (Advance) or the one under way will make room (Wait); Full: not even
    /// its tail fits, so a reset first.
    fn take_log_heads(&mut self, joinable: &[bool], live_members: &[usize], tail: bool) -> Taken {
        let l = self.ppl.as_mut().expect("a log");
        let unit = l.unit_sectors;
        let tail_ahead = l.advance.as_ref().is_some_and(|a| {
            matches!(a.stage, super::advance::Stage::Draining | super::advance::Stage::Flushing(_))
        });
        // Room for an advance's tail stays free on every ring, advance or not: an advance
        // that starts with a ring full can retire nothing (its tail must be written first),
        // so the log would reset. Before, only an advance under way kept it, and one that
        // started just after a generation filled a ring reset at once (RAID6 4 KiB
        // sequential qd16 with 128 KiB rings in `bench io --only ppl`: 95 resets on NVMe).
        let reserve = header_sectors(0);
        // Per member: entries, and the sectors of their blocks and masks (the header's size
        // follows from the entries).
        let mut count = vec![0usize; l.rings.members()];
        let mut used = vec![0u64; l.rings.members()];
        let mut chosen = vec![false; l.waiting.len()];
        let mut full = false;
        for (i, Waiting { entries, .. }) in l.waiting.iter().enumerate() {
            if !joinable[i] {
                continue;
            }
            // Per member, this head's entries together (a RAID6 head at depth 1 may put both
            // of its entries on one member: `placement`); a head has at most six.
            let fits = entries.iter().all(|(m, _, _)| {
                let (n, sectors) = entries
                    .iter()
                    .filter(|(other, _, _)| other == m)
                    .fold((0, 0), |(n, s), (_, e, _)| (n + 1, s + e.stored_sectors(unit)));
                let m = m.get();
                count[m] + n <= MAX_LOG_ENTRIES
                    && l.rings
                        .place(m, header_sectors(count[m] + n) + used[m] + sectors + reserve)
                        .is_some()
            });
            if !fits {
                full = true;
                break;
            }
            for (m, e, _) in entries {
                count[m.get()] += 1;
                used[m.get()] += e.stored_sectors(unit);
            }
            chosen[i] = true;
        }
        let tail_fits = live_members
            .iter()
            .all(|&m| l.rings.place(m, header_sectors(count[m]) + used[m]).is_some());
        if full && !chosen.contains(&true) && !tail {
            // The advance under way retires older generations: wait for it, unless its tail
            // is still to be placed and has no room either. (Its tail's generation may be in
            // flight beside others: a reset then would stop the log for nothing.)
            let room = live_members.iter().all(|&m| l.rings.place(m, header_sectors(0)).is_some());
            if l.advance.is_none() && room {
                // An advance retires what the rings hold without stopping the log.
                l.start_advance();
                return Taken::Advance;
            }
            let advancing = l.advance.is_some();
            return if advancing && (room || !tail_ahead) { Taken::Wait } else { Taken::Full };
        }
        // A tail that fits goes alone if no head does: it retires older generations, which
        // makes room for them (a reset would stop the log for what the tail does anyway).
        if tail && !tail_fits {
            return Taken::Full;
        }
        let (mut heads, mut rest) = (Vec::new(), Vec::new());
        for (w, chosen) in std::mem::take(&mut l.waiting).into_iter().zip(chosen) {
            if chosen {
                heads.push(w);
            } else {
                rest.push(w);
            }
        }
        l.waiting = rest;
        Taken::Heads(heads)
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
        let len = (sectors * 512) as usize;
        let mut buf = take_spare_buf(&mut l.spare_bufs, len);
        buf.resize_any(len);
        header.encode_generation_into(&blocks, &mut buf);
        // Copied into the log write: kept for the next entries (up to `MAX_SPARE_BLOCKS`).
        let spares = &mut l.spare_blocks;
        for b in blocks.into_iter().flatten() {
            if spares.len() < MAX_SPARE_BLOCKS {
                spares.push(b);
            }
        }
        let sector = if matches!(l.reset, Reset::Headers(_)) {
            l.rings.take_place_for_reset(member.get(), sectors, generation)
        } else {
            let (sector, wrapped) = l.rings.take_place(member.get(), sectors, generation);
            self.stats.log_ring_wraps += u64::from(wrapped);
            sector
        };
        self.push_log_io(member, MemberOp::Write, sector, buf);
    }

    fn push_log_io(&mut self, member: DiskIndex, op: MemberOp, sector: u64, buf: BlockBuf) {
        let l = self.ppl.as_mut().expect("a log");
        let sectors = (buf.len() / 512) as u64;
        if op == MemberOp::Write {
            l.log_writes += 1;
            l.log_bytes += buf.len() as u64;
        }
        let f = l.in_flight.last_mut().expect("log I/O belongs to the flight just started");
        f.outstanding += 1;
        self.background_ios += usize::from(f.background);
        let slot = f.bufs.len();
        f.bufs.push(buf);
        let flight = f.id;
        let tag = self.new_tag();
        let write = op == MemberOp::Write;
        self.queue.push_back(MemberIo {
            tag,
            member,
            op,
            sector: Sector(sector),
            sectors: if write { sectors } else { 0 },
            buf: if write { IoBuf::Log { flight, slot } } else { IoBuf::None },
            fua: write,
            area: if write { IoArea::Log } else { IoArea::Data },
            before_replacement: false,
        });
        self.inflight.insert(tag, member, Pending::Log { member, flight });
    }

    /// Flush every member (everything logged is durable in place), then an empty header
    /// with the new tail at the start of every ring.
    fn start_log_reset(&mut self) {
        let live = self.live_members();
        let l = self.ppl.as_mut().expect("a log");
        l.resets += 1;
        // It retires everything an advance under way would have (its flushes are ignored).
        l.advance = None;
        l.start_flight(0, Vec::new(), false, false);
        l.reset = Reset::Flushing(live.len());
        for m in live {
            self.push_log_io(m, MemberOp::Flush, 0, BlockBuf::default());
        }
        self.log_flight_done_if_empty();
    }

    /// A log write or flush completed; a failed one fails its member (as a bitmap write).
    pub(in crate::array) fn log_io_done(&mut self, member: DiskIndex, flight: u64, ok: bool) {
        if !ok {
            self.mark_failed(member);
        }
        let l = self.ppl.as_mut().expect("log I/O with a log");
        let f = l.in_flight.iter_mut().find(|f| f.id == flight).expect("its flight");
        f.outstanding -= 1;
        self.background_ios -= usize::from(f.background);
        if f.outstanding == 0 {
            self.log_generation_done(flight);
        }
    }

    fn log_generation_done(&mut self, flight: u64) {
        let l = self.ppl.as_mut().expect("a log");
        let at = l.in_flight.iter().position(|f| f.id == flight).expect("in flight");
        let Flight { generation, owners: heads, advance, tail, bufs, .. } = l.in_flight.remove(at);
        let room = MAX_SPARE_BUFS.saturating_sub(l.spare_bufs.len());
        let small = bufs.into_iter().filter(|b| b.pages() <= MAX_SPARE_BUF_PAGES);
        l.spare_bufs.extend(small.take(room));
        l.newest_done = l.newest_done.max(generation);
        match l.reset {
            Reset::Flushing(_) => self.log_reset_flushed(),
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
                // Only heads with entries: their writes keep the rings busy, so a flush resets
                // the log and waits for them; a head with none would let a flush overtake its
                // writes.
                let mut ids = Vec::new();
                let mut batches = Vec::new();
                for (owner, counted) in heads {
                    match owner {
                        Owner::Head(id) => {
                            l.writing += 1;
                            l.logged.insert(id, (counted, advance));
                            if counted {
                                ids.push(id);
                            }
                        }
                        Owner::Batch(index) => batches.push(index),
                    }
                }
                for id in ids {
                    self.stats.writes_acked_when_logged += self.ack_logged_writes(id);
                }
                for index in batches {
                    self.log_batch_released(index);
                }
                self.wake_log_waiters();
                if tail {
                    self.finish_log_advance();
                }
            }
        }
    }

    /// A reset's member flushes are done: everything logged is durable in place, so every
    /// union and ring entry is retired (but for heads admitted meanwhile, waiting for the
    /// next generation: their unions stand), and an empty header with the new tail goes to
    /// the start of every ring.
    fn log_reset_flushed(&mut self) {
        let l = self.ppl.as_mut().expect("a log");
        l.live.retain(|_, v| v.writing > 0);
        l.stripes.retain(|_, v| v.writing > 0);
        let keep: HashSet<u64> = l.live.keys().copied().collect();
        l.on_ring = keep;
        l.ranges.clear();
        l.generation += 1;
        l.tail = l.generation;
        let live = self.live_members();
        let l = self.ppl.as_mut().expect("a log");
        l.reset = Reset::Headers(live.len());
        let generation = l.generation;
        l.start_flight(generation, Vec::new(), false, false);
        let mut members = [0u8; 32];
        for m in &live {
            members[m.get() / 8] |= 1 << (m.get() % 8);
        }
        for m in live {
            self.queue_log_write(m, generation, members, Vec::new());
        }
        self.log_flight_done_if_empty();
    }

    /// After a reset: flushes waiting for it complete; waiting heads' entries are computed
    /// again (their unions' older blocks are durable now); another reset starts if a flush
    /// came after this one's member flushes, or a member joined after its drain.
    fn log_reset_done(&mut self) {
        let l = self.ppl.as_mut().expect("a log");
        // Its headers are durable: everything older is retired on every ring.
        let tail = l.tail;
        l.retire(tail);
        let ready = l.take_done_waiters();
        let again = std::mem::take(&mut l.reset_again);
        if again || !l.flush_waiters.is_empty() {
            l.reset = Reset::Draining;
        }
        let keep = vec![false; l.waiting.len()];
        self.recompute_waiting(&keep);
        self.complete_log_waiters(ready);
    }

    /// Completes flushes (and FUA writes) whose log entries are retired.
    pub(super) fn complete_log_waiters(&mut self, slots: Vec<usize>) {
        for slot in slots {
            self.request_mut(slot).outstanding -= 1;
            self.finish_if_done(slot);
        }
    }

    /// Waiting heads' and batches' entries computed again, but where `keep` says: after a
    /// reset or an advance, the older blocks of their unions are durable.
    pub(super) fn recompute_waiting(&mut self, keep: &[bool]) {
        let l = self.ppl.as_mut().expect("a log");
        let waiting = std::mem::take(&mut l.waiting);
        // Kept heads log span-1 entries of their own: no pending range is theirs.
        l.pending_ranges.clear();
        for (w, _) in waiting.iter().zip(keep).filter(|(_, k)| !**k) {
            let keys = match w.owner {
                Owner::Head(_) if w.entries.is_empty() && !w.ranged => continue,
                Owner::Head(id) => vec![self.head_member_range(id).0],
                Owner::Batch(index) => self.batch_keys(index).collect(),
            };
            let l = self.ppl.as_mut().expect("a log");
            if let Owner::Head(id) = w.owner
                && l.behind.contains_key(&id)
            {
                // Its earlier batch writes behind, logged after what was made durable
                // (an advance drains the older ones): that union stands, less this head's
                // own count, added again below.
                l.live.get_mut(&keys[0]).expect("a head writing behind is live").writing -= 1;
                continue;
            }
            for &key in &keys {
                l.live.remove(&key);
                l.on_ring.remove(&key);
            }
            if let Owner::Batch(_) = w.owner {
                l.stripes.remove(&(keys[0] / l.chunk_sectors));
            }
        }
        for (w, keep) in waiting.into_iter().zip(keep) {
            if *keep {
                self.ppl.as_mut().expect("a log").waiting.push(w);
                continue;
            }
            let id = match w.owner {
                Owner::Head(id) => id,
                Owner::Batch(index) => {
                    self.log_batch_wait(index);
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
                    let live = l.live_at(key);
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
    }

    /// A head's entries are computed and wait for their generation: its partial-stripe writes
    /// are acknowledged now (`ack_logged_writes` says which), not once the entries are durable.
    /// Nothing but the acknowledgement moves: the writes in place still wait for the entries,
    /// and the head holds the new data (reads see it) until they complete. A crash before the
    /// entries are durable loses these unflushed writes and nothing else (nothing was written
    /// in place). Why: random writes at depth waited for generations ahead of theirs, and on a
    /// member whose cache is volatile and has no FUA each log write is a flush of the disk
    /// (`scripts/bench-log-on-disk`). `uraid bench io --only ppl`: 44 -> 58 of 84 goals, the
    /// random and flush rows up to 0.17 (RAID6 on SSD with 128 KiB rings down 0.07 at qd16).
    /// A flush waits for these heads to join a generation first (`log_flush`).
    pub(in crate::array) fn ack_when_admitted(&mut self, id: HeadId) {
        // Acknowledged already (a rewrite over a read error logged after the batch's writes):
        // its write pieces' requests may be gone (the simulator's seed 46411851).
        if self.heads[&id].acked_early {
            return;
        }
        let l = self.ppl.as_ref().expect("a log");
        // Behind another generation (or heads waiting for one): an idle log writes the entry
        // at once, and acknowledging a stream's first write early only shifts the stream.
        let behind = !l.in_flight.is_empty() || l.waiting.len() > 1;
        // Only a head with entries: its writes keep the log busy, so a flush waits for them
        // (one with none, waiting for the run's first headers, would let a flush overtake
        // its writes in place: the simulator's seed 46270675).
        let entries = l.waiting.last().is_some_and(|w| !w.entries.is_empty());
        // A write a later one continues (a stream's first, at depth) is a stream's too.
        let continued = self.heads[&id].batch.iter().any(|p| self.request(p.slot).continued);
        if !behind || !entries || continued || !self.random_writes(id) {
            return;
        }
        let acked = self.ack_logged_writes(id);
        if acked == 0 {
            return;
        }
        self.stats.writes_acked_when_admitted += acked;
        let l = self.ppl.as_mut().expect("a log");
        l.acks += 1;
        let w = l.waiting.last_mut().expect("just admitted");
        debug_assert!(w.owner == Owner::Head(id), "the head just admitted");
        w.acked = l.acks;
    }

    /// Flushes that waited for writes acknowledged before them to join a generation, now that
    /// they have, wait for a reset or an advance as any other.
    fn release_deferred_flushes(&mut self) {
        let l = self.ppl.as_mut().expect("a log");
        if l.deferred_flushes.is_empty() {
            return;
        }
        let oldest = l.waiting.iter().map(|w| w.acked).filter(|a| *a != 0).min();
        let oldest = oldest.unwrap_or(u64::MAX);
        let (ready, later): (Vec<_>, Vec<_>) =
            std::mem::take(&mut l.deferred_flushes).into_iter().partition(|f| f.1 < oldest);
        l.deferred_flushes = later;
        for (slot, _) in ready {
            self.request_mut(slot).outstanding -= 1;
            if !self.log_flush_now(slot) {
                // Nothing logged to wait for (not expected: a generation is in flight).
                self.flush_request_members(slot);
            }
        }
    }

    /// A partial-stripe batch whose entries are durable is acknowledged now, before its
    /// writes in place (md's raid5-cache does the same in write-back mode): a crash from here
    /// on loses at most these unflushed writes, never other data (the replay restores its
    /// parity), and until the writes complete the head holds the new data, so reads see it. A
    /// flush waits for them (its reset or advance drains the logged writes it covers). Not for
    /// FUA writes (durable on completion) nor for blocks written straight from the request's
    /// buffer (full stripes: the buffer is needed until then). Returns how many it acknowledged.
    fn ack_logged_writes(&mut self, id: HeadId) -> u64 {
        let Some(st) = self.heads.get(&id) else { return 0 };
        let writes = st.batch.iter().any(|p| p.kind == Kind::Write);
        // Acknowledged already: this generation logs a rewrite over a read error.
        if !writes
            || st.acked_early
            || !st.skip_copy.is_empty()
            || st.error.is_some()
            || self.batch_fua(id)
        {
            return 0;
        }
        if self.method(id) == Some(WriteMethod::FullStripe) {
            return 0;
        }
        let slots: SmallVec<[(usize, bool); 4]> =
            st.batch.iter().filter(|p| p.kind == Kind::Write).map(|p| (p.slot, p.held)).collect();
        // Judged now: the requests' slots may be reused once they are done.
        let copy_behind = !self.random_writes(id);
        let st = self.state(id);
        st.acked_early = true;
        st.copy_behind = copy_behind;
        let acked = slots.len() as u64;
        for (slot, held) in slots {
            let r = self.request_mut(slot);
            r.outstanding -= 1;
            r.held -= usize::from(held);
            r.log_acked = true;
            self.finish_if_done(slot);
        }
        acked
    }

    fn wake_log_waiters(&mut self) {
        let l = self.ppl.as_ref().expect("a log");
        let ready: Vec<HeadId> = l.logged.keys().copied().collect();
        for id in ready {
            if self.heads.get(&id).is_some_and(|st| st.phase == Phase::LogWait) {
                self.state(id).phase = Phase::Idle;
                if self.batch(id).first().map(|p| p.kind) != Some(Kind::Discard) {
                    self.start_writing(id);
                }
                self.handle(id);
            }
        }
    }

    /// The bytes of a log write: flight `flight`'s `slot`-th.
    pub(in crate::array) fn log_buf(&self, flight: u64, slot: usize) -> &[u8] {
        let l = self.ppl.as_ref().expect("a log");
        &l.in_flight.iter().find(|f| f.id == flight).expect("a log write's flight").bufs[slot]
    }
}

/// A kept log write buffer for `len` bytes: the smallest that holds them already (growing one
/// zeroes its new pages), else the largest; or a new one.
fn take_spare_buf(spares: &mut Vec<BlockBuf>, len: usize) -> BlockBuf {
    let pages = len.div_ceil(crate::buffer::BLOCK_ALIGN);
    let index = 0..spares.len();
    let fits =
        index.clone().filter(|&i| spares[i].pages() >= pages).min_by_key(|&i| spares[i].pages());
    let at = fits.or_else(|| index.max_by_key(|&i| spares[i].pages()));
    at.map(|i| spares.swap_remove(i)).unwrap_or_default()
}

impl Flight {
    /// Whether this generation logs `owner`'s entries.
    pub(super) fn logs(&self, owner: Owner) -> bool {
        self.owners.iter().any(|o| o.0 == owner)
    }
}

impl super::PartialParityLog {
    fn start_flight(
        &mut self,
        generation: u64,
        owners: Vec<(Owner, bool)>,
        tail: bool,
        acked: bool,
    ) {
        self.flights += 1;
        let advance = self.advances;
        let (id, bufs) = (self.flights, Vec::new());
        let background = tail && owners.is_empty() && !self.flushes_wait_for(advance);
        let f = Flight {
            id,
            generation,
            outstanding: 0,
            owners,
            advance,
            tail,
            background,
            bufs,
            acked,
        };
        self.in_flight.push(f);
    }
}
