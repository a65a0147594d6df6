//! Driving one stripe head (md's `handle_stripe`): take the pieces queued on it as a batch,
//! decide with the planners, issue the member reads, compute, issue the member writes, serve
//! the batch's reads, release the head. Pieces that arrive meanwhile form the next batch.

use super::{Array, ArrayError, IoBuf, Kind, MemberIo, MemberOp, Pending, PerMember};
use crate::geometry::{DiskRole, StripeMap};
use crate::request::BlockRange;
use crate::stripe::{
    BlockView, Cover, DevIo, HeadId, StripeKey, StripeView, WriteMethod, WritePlan, plan_read,
    plan_write, plan_write_without_rmw,
};
use crate::units::{DiskIndex, SECTOR_BYTES, Sector};

/// Whether a partial-stripe write that needs reads would wait now (`others_busy`): one of a
/// stream, and a random one.
#[derive(Clone, Copy, Debug)]
pub(super) struct Busy {
    pub stream: bool,
    pub random: bool,
}

/// One request's sectors on one stripe head.
#[derive(Clone, Debug)]
pub(super) struct Piece {
    pub slot: usize,
    pub kind: Kind,
    pub blocks: Vec<BlockRange>,
    /// Counted in its request's `held` (`write_back`).
    pub held: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Phase {
    Idle,
    /// A partial-stripe write that needs pre-reads, held back while other I/O is in flight
    /// (or the submitter is plugged) so that more writes can fill the stripe (md's delayed
    /// list). Started when the array goes idle or after `PREREAD_BYPASS_THRESHOLD` full-stripe
    /// writes have overtaken it.
    Delayed {
        since: u64,
        /// Its writes look random (`random_writes`, judged when it was delayed; a piece that
        /// joins plans it again). `start_delayed_random` runs on most turns and need not ask
        /// again of every head a stream left waiting.
        random: bool,
    },
    /// Member reads in flight; then compute and write (`for_write`) or serve reads.
    Reading {
        for_write: bool,
        outstanding: usize,
    },
    /// `intent`: counted in the write-intent bitmap (a read-error rewrite changes nothing and
    /// is not).
    Writing {
        outstanding: usize,
        intent: bool,
    },
    /// A sync batch's member reads in flight.
    SyncReading {
        outstanding: usize,
    },
    /// Member discards of a whole-stripe discard batch in flight.
    Discarding {
        outstanding: usize,
    },
    /// Listings of blocks a recovery cannot rebuild, or a replace cannot copy, in flight
    /// (`list_bad.rs`); `required` of them must succeed, and `refused`: one did not.
    ListingBad {
        outstanding: usize,
        required: usize,
        refused: bool,
    },
    /// Writes planned and computed, waiting for their write-intent bits to be durable.
    BitmapWait,
    /// Writes planned and computed, waiting for their partial parity log entries.
    LogWait,
    /// Logged and acknowledged, waiting for the previous batch's writes in place
    /// (`write_behind`): writes of one block never overlap on a member.
    BehindWait,
}

// Independent flags of one batch's progress, not a state that an enum would name better.
#[allow(clippy::struct_excessive_bools)]
pub(super) struct HeadState {
    /// Pieces waiting for the next batch.
    pub(super) queued: Vec<Piece>,
    pub(super) batch: Vec<Piece>,
    pub(super) phase: Phase,
    pub(super) writes_done: bool,
    /// A member failed during the batch's reads: plan again.
    replan: bool,
    /// The members lost when the batch's reads were planned: if another is lost by the time
    /// they complete (failed by another head's I/O, or by the runtime), what was read may
    /// not rebuild what is missing now, so the batch plans again.
    planned_lost: PerMember<bool>,
    /// When the batch was first held back (kept across re-plans so it cannot starve).
    pub(super) delayed_since: Option<u64>,
    /// The hold is over (array idle, or overtaken too often): start even if others are busy.
    pub(super) hold_released: bool,
    method: Option<WriteMethod>,
    pub(super) writes: Vec<DiskIndex>,
    /// A Recovery batch: the members it rebuilt and writes, decided when it computed. Only
    /// they are in sync here once it is done: a member whose recovery started while the batch
    /// was in flight was not written (asked again at the end, as until the seventh session of
    /// 2026-11-29, it was taken as rebuilt with its new device's blank blocks: uraid-md's
    /// `lifecycle_chaos`, a second spare added during a recovery on two workers).
    pub(super) rebuilt: Vec<DiskIndex>,
    /// Members whose block in this head failed to read: rebuilt from parity like a failed
    /// member's, then rewritten to them (md's read-error correction).
    pub(super) suspect: Vec<DiskIndex>,
    /// Of those, the members whose read failed on a range their bad block log lists already
    /// (`Array::complete_io_known_bad`): not listed again.
    pub(super) listed_already: Vec<DiskIndex>,
    /// Blocks this batch rewrites over read errors. They go with FUA: after a crash that
    /// tore a block the log's replay could not read, only parity holds its contents, and a
    /// repair lost to a second crash would bring the torn sectors back under data already
    /// read from parity (found by the simulator with cuts beside latent bad sectors).
    pub(super) repairs: Vec<DiskIndex>,
    /// Data blocks written straight from a request buffer (md's skip_copy): member, request
    /// slot, byte offset in its buffer. The head's own copy of them is stale afterwards.
    pub(super) skip_copy: Vec<(DiskIndex, usize, usize)>,
    pub(super) error: Option<ArrayError>,
    /// The batch's writes were acknowledged once their log entries were durable (see
    /// `ppl::ack_logged_writes`): its write pieces are done, their slots maybe reused.
    pub(super) acked_early: bool,
    /// Acknowledged early and a stream's: its writes in place go from copies, since the
    /// stream's next batch is coming to this head (`write_behind`). A random batch's go from
    /// the head's buffers (unless a next batch is queued already): one there is rare, and
    /// waits for them.
    pub(super) copy_behind: bool,
    /// An earlier batch's writes in place, from copies (`write_behind`).
    pub(super) behind: Option<super::write_behind::Behind>,
    /// Held by the write-back of a stream's partial stripes (`write_back`), its writes
    /// acknowledged: the write-back's clock when the hold began (its entry in `order`).
    pub(super) held_back: Option<u64>,
}

/// Takes the next batch from the queued pieces: whole-stripe discards never share a batch with
/// reads or writes, so that each batch is planned one way and arrival order is kept.
fn take_batch(queued: &mut Vec<Piece>) -> Vec<Piece> {
    let Some(first) = queued.first() else { return Vec::new() };
    let class = first.kind.batch_class();
    let n = queued.iter().take_while(|p| p.kind.batch_class() == class).count();
    queued.drain(..n).collect()
}

impl Kind {
    /// Pieces of one class may share a batch: reads and writes; whole-stripe discards; syncs
    /// of one kind.
    fn batch_class(self) -> Kind {
        match self {
            Kind::Read | Kind::Write => Kind::Write,
            other => other,
        }
    }
}

impl Array {
    /// Queues a piece on its stripe head. Pieces wait in arrival order when no head is free,
    /// and a piece never overtakes an earlier waiting one (overlapping writes keep their order).
    pub(super) fn add_piece(&mut self, key: StripeKey, piece: Piece) {
        if let Some(id) = self.held_head(key) {
            self.heads.get_mut(&id).expect("checked").queued.push(piece);
            self.handle_or_defer(id);
            return;
        }
        if !self.waiting.is_empty() {
            self.push_waiting(key, piece);
            return;
        }
        if let Err(piece) = self.start_piece(key, piece) {
            self.push_waiting(key, piece);
        }
    }

    fn push_waiting(&mut self, key: StripeKey, piece: Piece) {
        *self.waiting_keys.entry(key).or_default() += 1;
        self.waiting.push_back((key, piece));
    }

    fn pop_waiting(&mut self) -> Option<(StripeKey, Piece)> {
        let (key, piece) = self.waiting.pop_front()?;
        self.forget_waiting_key(key);
        Some((key, piece))
    }

    fn forget_waiting_key(&mut self, key: StripeKey) {
        let n = self.waiting_keys.get_mut(&key).expect("a waiting piece's key is counted");
        *n -= 1;
        if *n == 0 {
            self.waiting_keys.remove(&key);
        }
    }

    /// The head the engine holds for `key`, if any.
    pub(super) fn held_head(&self, key: StripeKey) -> Option<HeadId> {
        self.cache.lookup(key).filter(|id| self.heads.contains_key(id))
    }

    /// Takes a head for the piece; gives the piece back when no head is free, or while its
    /// stripe is being written as a batch (`batch_write`: its completion starts waiting work).
    fn start_piece(&mut self, key: StripeKey, piece: Piece) -> Result<(), Piece> {
        if self.batches.writing(key.stripe) {
            return Err(piece);
        }
        let Some(id) = self.cache.get(key) else {
            return Err(piece);
        };
        let state = HeadState {
            queued: vec![piece],
            batch: Vec::new(),
            phase: Phase::Idle,
            writes_done: false,
            replan: false,
            planned_lost: PerMember::new(),
            delayed_since: None,
            hold_released: false,
            method: None,
            writes: Vec::new(),
            rebuilt: Vec::new(),
            suspect: Vec::new(),
            listed_already: Vec::new(),
            repairs: Vec::new(),
            skip_copy: Vec::new(),
            error: None,
            acked_early: false,
            copy_behind: false,
            behind: None,
            held_back: None,
        };
        self.heads.insert(id, state);
        self.handle_or_defer(id);
        Ok(())
    }

    /// New pieces are handled when the runtime next asks for member I/O (`next_io`), not as
    /// each arrives: nothing could go out earlier anyway, and by then every request submitted
    /// since the last turn has queued its pieces. A head then plans one batch for all of them:
    /// a degraded stripe's surviving blocks are read together, whatever the request sizes,
    /// instead of a first batch for the first piece and another as it completes.
    fn handle_or_defer(&mut self, id: HeadId) {
        if self.deferred_ids.insert(id) {
            self.deferred.push(id);
        }
    }

    /// Whether a partial-stripe write that needs reads waits for more writes to fill its
    /// stripe (md's delayed list), by what its writes look like (`random_writes`).
    /// A stream's waits while other I/O is queued or in flight (or announced by a plug): the
    /// next requests fill its stripe. Writes in place of batches already acknowledged (see
    /// `ppl::ack_logged_writes`) and a tail no request waits for (`ppl::generation`'s
    /// `Flight::background`) do not count: no client waits on them to send more, so holding
    /// for them only adds their latency.
    /// A random write waits only for a plug, for batches waiting for the log, and (with the
    /// log) for other I/O while a flush waits for the log's advance to drain. Until the session of
    /// 2026-11-27 it waited like a stream's, and at depth random writes went in waves: each
    /// wave's reads waited for the last one's writes (`bench io --only ppl`, RAID5 random
    /// qd16 without the log: SSD 123 -> 171 MB/s, NVMe 227 -> 313, HDD 0.58 -> 0.70; with
    /// it 108 -> 113 and 221 -> 233). A flush waiting for the log waits for the writes in
    /// place the log's advance drains; reads started meanwhile slow them and split the log's
    /// generations (with the log's I/O not counted then, a flush every 8 writes on NVMe fell
    /// from 174 to 153 MB/s). Once the advance flushes the members, reads slow nothing it
    /// waits for, so the held writes go then: until the fourth session of 2026-11-28 they
    /// waited for the flush to complete, or for the next flush to start them (`bench io
    /// --only ppl`, 4 KiB random qd16 with a flush every 8, RAID5 / RAID6: NVMe 0.592 / 0.597
    /// -> 0.779 / 0.769 of the open hole's speed, SSD 0.649 / 0.635 -> 0.790 / 0.767; every
    /// 64: up 0.02-0.04 on flash, 0.004-0.018 on the HDD).
    pub(super) fn others_busy(&self) -> Busy {
        // (`inflight` holds every I/O issued, the queued ones too.)
        let others = self.inflight.len() > self.background_ios;
        let batches = self.log_holds_batches();
        Busy {
            stream: self.plugged || others || batches,
            random: self.plugged || batches || (others && self.log_flush_draining()),
        }
    }

    /// Whether every write in head `id`'s batch looks random: it lies within its stripe (no
    /// request runs on into the next one) and does not continue a recent write. The next
    /// requests will not fill such a stripe; a stream's will.
    pub(super) fn random_writes(&self, id: HeadId) -> bool {
        let per = self.geometry.stripe_data_sectors();
        let stripe = self.cache.head(id).key.stripe.0;
        self.heads[&id].batch.iter().all(|p| {
            let r = self.request(p.slot);
            let n = r.buf.len() as u64 / crate::SECTOR_BYTES;
            !r.continues_stream
                && n > 0
                && r.sector.0 / per == stripe
                && (r.sector.0 + n - 1) / per == stripe
        })
    }

    /// Handles the heads that received pieces since the last call. Whether other I/O is busy
    /// is judged as before the first of them: the heads of one request (a 64 KiB write spans
    /// 16 heads of 4 KiB) must not delay each other, or their reads go out in two rounds.
    pub(super) fn handle_deferred(&mut self) {
        if self.deferred.is_empty() {
            return; // the common case: every `next_io` of a turn after the first
        }
        self.busy_before_settle = Some(self.others_busy());
        while !self.deferred.is_empty() {
            for id in std::mem::take(&mut self.deferred) {
                if self.deferred_ids.remove(&id) && self.heads.contains_key(&id) {
                    self.handle(id);
                }
            }
        }
        self.busy_before_settle = None;
    }

    pub(super) fn state(&mut self, id: HeadId) -> &mut HeadState {
        self.heads.get_mut(&id).expect("an engine-held head")
    }

    /// Moves the head's batch along as far as it can go without member I/O.
    pub(super) fn handle(&mut self, id: HeadId) {
        loop {
            let st = self.state(id);
            if let Phase::Delayed { since, .. } = st.phase {
                // New pieces join the batch that has not started; plan it again.
                let n =
                    st.queued.iter().take_while(|p| p.kind.batch_class() == Kind::Write).count();
                st.batch.extend(st.queued.drain(..n));
                st.delayed_since = Some(since);
                st.phase = Phase::Idle;
            }
            if st.phase != Phase::Idle {
                return;
            }
            if st.batch.is_empty() {
                // While an earlier batch writes behind, only writes go on (see `write_behind`).
                let next = st.queued.first().map(|p| p.kind.batch_class());
                if st.behind.is_some() && next != Some(Kind::Write) {
                    return;
                }
                if st.queued.is_empty() {
                    return self.release(id);
                }
                st.batch = take_batch(&mut st.queued);
                st.writes_done = false;
                st.error = None;
                st.suspect.clear();
                st.listed_already.clear();
                st.repairs.clear();
                st.acked_early = false;
            }
            let has_writes = st.batch.iter().any(|p| p.kind == Kind::Write);
            let first = st.batch.first().map(|p| p.kind);
            if let (None, Some(Kind::Sync(kind)), false) = (&st.error, first, st.writes_done) {
                self.start_sync(id, kind);
            } else if st.error.is_none() && first == Some(Kind::Discard) && !st.writes_done {
                self.start_discard(id);
            } else if st.error.is_none() && has_writes && !st.writes_done {
                self.start_write(id);
                if matches!(self.state(id).phase, Phase::Delayed { .. }) {
                    return;
                }
            } else if st.error.is_none()
                && st.batch.iter().any(|p| p.kind == Kind::Read)
                && !self.reads_served(id)
            {
                self.start_read(id);
            } else {
                self.finish_batch(id);
            }
        }
    }

    fn view_blocks(&self, id: HeadId, writes: bool) -> PerMember<BlockView> {
        let head = self.cache.head(id);
        let map = self.geometry.stripe_map(head.key.stripe);
        let st = &self.heads[&id];
        let lost = self.lost(id);
        let mut blocks: PerMember<BlockView> = (0..self.failed.len())
            .map(|m| BlockView {
                failed: lost[m],
                uptodate: head.devs[m].uptodate,
                towrite: Cover::None,
            })
            .collect();
        if writes {
            for b in st.batch.iter().filter(|p| p.kind == Kind::Write).flat_map(|p| &p.blocks) {
                let block = &mut blocks[map.data_disk[usize::from(b.data_slot)].get()];
                let cover =
                    if b.sectors == self.unit_sectors { Cover::Full } else { Cover::Partial };
                block.towrite = block.towrite.max_cover(cover);
            }
        }
        blocks
    }

    /// The write plan amended for blocks that failed to read here (not failed members).
    fn plan_for_unreadable(
        &self,
        id: HeadId,
        blocks: &[BlockView],
        mut plan: WritePlan,
    ) -> WritePlan {
        let map = self.geometry.stripe_map(self.cache.head(id).key.stripe);
        let view = StripeView { level: self.geometry.level(), map, blocks };
        // Parity that failed to read (not a failed member) is recomputed from the data and
        // rewritten, which corrects the bad sector; planned as lost it would be left stale.
        let end = self.head_member_end(id);
        let unreadable_parity: Vec<usize> = self.heads[&id]
            .suspect
            .iter()
            .map(|d| d.get())
            .filter(|&m| !matches!(map.roles[m], DiskRole::Data { .. }) && self.in_sync(m, end))
            .collect();
        if !unreadable_parity.is_empty() {
            let given = blocks;
            let mut blocks = blocks.to_vec();
            for &m in &unreadable_parity {
                blocks[m].failed = false;
                blocks[m].uptodate = false;
            }
            let view = StripeView { level: self.geometry.level(), map, blocks: &blocks };
            // On a degraded stripe that is a degraded reconstruct-write: the failed member's
            // block rebuilt from the other parity first, unless it would need this one.
            match plan_write_without_rmw(&view) {
                Ok(p) if !p.reads.iter().any(|d| unreadable_parity.contains(&d.get())) => {
                    plan = p;
                }
                // Else with the unreadable parity planned as lost: a reconstruct-write still
                // computes it from the data (rebuilt from the parity left where a member is
                // lost), and it is rewritten with the stripe; a read-modify-write would update
                // only the parity it read and leave it stale, readable again once a copy of the
                // member or a remapped sector no longer says so (seed 2051, a replacement).
                _ => {
                    let view = StripeView { level: self.geometry.level(), map, blocks: given };
                    if let Ok(p) = plan_write_without_rmw(&view) {
                        plan = p;
                    }
                }
            }
        }
        // A block of the log's union that failed to read is rebuilt before the write: its
        // entry's partial parity needs it (else the write would go unprotected). So is any
        // data block that failed to read and that a read-modify-write would leave (a
        // reconstruct-write planned to read it): rebuilt, `start_writing` rewrites it over
        // its bad sector, as a read would; left, the stripe stays one failure from losing it.
        if (self.log_union_unreadable(id)
            || (plan.method == WriteMethod::ReadModifyWrite
                && self.unreadable_data_left(id, map, blocks)))
            && let Ok(p) = plan_write_without_rmw(&view)
        {
            plan = p;
        }
        plan
    }

    /// Whether a data block whose read failed here (its member in sync) is neither cached nor
    /// being written.
    fn unreadable_data_left(&self, id: HeadId, map: &StripeMap, blocks: &[BlockView]) -> bool {
        self.heads[&id].suspect.iter().any(|d| {
            let m = d.get();
            matches!(map.roles[m], DiskRole::Data { .. })
                && !blocks[m].uptodate
                && blocks[m].towrite == Cover::None
                && self.in_sync(m, self.head_member_end(id))
        })
    }

    fn start_write(&mut self, id: HeadId) {
        let blocks = self.view_blocks(id, true);
        let map = self.geometry.stripe_map(self.cache.head(id).key.stripe);
        let view = StripeView { level: self.geometry.level(), map, blocks: &blocks };
        let Ok(plan) = plan_write(&view) else {
            self.state(id).error = Some(ArrayError::BeyondRedundancy);
            return;
        };
        let plan = self.plan_for_unreadable(id, &blocks, plan);
        let (plan, log_reads) = self.log_plan(id, &view, plan);
        let fua = self.batch_fua(id);
        let busy = self.busy_before_settle.unwrap_or_else(|| self.others_busy());
        let random = self.random_writes(id);
        let others_busy = if random { busy.random } else { busy.stream };
        let needs_reads =
            !plan.reads.is_empty() && plan.method != WriteMethod::DegradedReconstructWrite;
        if self.hold_for_stream(id, needs_reads, fua) {
            return;
        }
        let since = self.heads[&id].delayed_since.unwrap_or(self.full_stripe_writes);
        let overtaken = self.full_stripe_writes - since > super::PREREAD_BYPASS_THRESHOLD;
        if others_busy
            && !overtaken
            && !self.heads[&id].hold_released
            && !fua
            && !plan.reads.is_empty()
            && plan.method != WriteMethod::DegradedReconstructWrite
        {
            self.state(id).phase = Phase::Delayed { since, random };
            if !self.delayed.contains(&id) {
                self.delayed.push(id);
            }
            if random && !self.delayed_random.contains(&id) {
                self.delayed_random.push(id);
            }
            return;
        }
        let st = self.state(id);
        st.delayed_since = None;
        st.hold_released = false;
        if plan.method == WriteMethod::FullStripe {
            self.full_stripe_writes += 1;
            self.start_overtaken();
        }
        let mut reads = plan.reads;
        for d in log_reads {
            if !reads.contains(&d) {
                reads.push(d);
            }
        }
        let st = self.state(id);
        st.method = Some(plan.method);
        st.writes = plan.writes;
        let (sector, sectors) = self.head_member_range(id);
        self.write_intent_prepare(sector, sectors);
        if reads.is_empty() {
            self.compute_and_write(id);
        } else {
            self.issue(id, &reads, MemberOp::Read);
            self.state(id).phase = Phase::Reading { for_write: true, outstanding: reads.len() };
        }
    }

    /// Members holding data blocks the batch reads that are not yet in the head.
    fn wanted(&self, id: HeadId) -> Vec<DiskIndex> {
        let head = self.cache.head(id);
        let map = self.geometry.stripe_map(head.key.stripe);
        let mut wanted: Vec<DiskIndex> = self.heads[&id]
            .batch
            .iter()
            .filter(|p| p.kind == Kind::Read)
            .flat_map(|p| &p.blocks)
            .map(|b| map.data_disk[usize::from(b.data_slot)])
            .filter(|d| !head.devs[d.get()].uptodate)
            .collect();
        wanted.sort_unstable();
        wanted.dedup();
        wanted
    }

    fn reads_served(&self, id: HeadId) -> bool {
        self.wanted(id).is_empty()
    }

    fn start_read(&mut self, id: HeadId) {
        let wanted = self.wanted(id);
        let blocks = self.view_blocks(id, false);
        let map = self.geometry.stripe_map(self.cache.head(id).key.stripe);
        let view = StripeView { level: self.geometry.level(), map, blocks: &blocks };
        match plan_read(&view, &wanted) {
            Err(_) => self.fail_unreadable(id),
            Ok(plan) if plan.reads.is_empty() => {
                self.rebuild_failed(id);
                self.correct_read_errors(id);
            }
            Ok(plan) => {
                self.issue(id, &plan.reads, MemberOp::Read);
                self.state(id).phase =
                    Phase::Reading { for_write: false, outstanding: plan.reads.len() };
            }
        }
    }

    /// The member sectors a head's blocks occupy (the same on every member).
    pub(super) fn head_member_range(&self, id: HeadId) -> (u64, u64) {
        let key = self.cache.head(id).key;
        let sector =
            key.stripe.0 * self.geometry.chunk_sectors() + u64::from(key.unit) * self.unit_sectors;
        (sector, self.unit_sectors)
    }

    /// Queues one whole-block member I/O per member in `members`.
    pub(super) fn issue(&mut self, id: HeadId, members: &[DiskIndex], op: MemberOp) {
        if op == MemberOp::Read {
            let lost = self.lost(id);
            self.state(id).planned_lost = lost;
        }
        let sector = Sector(self.head_member_range(id).0);
        let batch_fua = op == MemberOp::Write && self.batch_fua(id);
        // Read-error rewrites are rare: most batches look no further than this.
        let repairing = op == MemberOp::Write && !self.heads[&id].repairs.is_empty();
        if op == MemberOp::Write && self.heads[&id].acked_early {
            self.background_ios += members.len();
        }
        for &member in members {
            debug_assert!(
                self.heads[&id].behind.as_ref().is_none_or(|b| !b.writes(member)),
                "no member I/O on a block while a copy of it is written"
            );
            let tag = self.new_tag();
            let direct = self.heads[&id].skip_copy.iter().find(|s| s.0 == member);
            let buf = match (op, direct) {
                (MemberOp::Write, Some(&(_, slot, offset))) => IoBuf::Request { slot, offset },
                (MemberOp::Read | MemberOp::Write | MemberOp::CopyWrite, _) => {
                    IoBuf::Head { head: id, member, offset: 0 }
                }
                (
                    MemberOp::Flush
                    | MemberOp::Discard
                    | MemberOp::ListBad
                    | MemberOp::ListBadReplacement,
                    _,
                ) => IoBuf::None,
            };
            self.queue.push_back(MemberIo {
                tag,
                member,
                op,
                sector,
                sectors: self.unit_sectors,
                buf,
                fua: batch_fua || (repairing && self.heads[&id].repairs.contains(&member)),
                area: super::IoArea::Data,
                before_replacement: false,
            });
            self.inflight.insert(tag, member, Pending::Head { head: id, member });
            let dev = &mut self.cache.head_mut(id).devs[member.get()];
            dev.io = if op == MemberOp::Read { DevIo::Reading } else { DevIo::Writing };
        }
    }

    /// `member`'s block of `id` could not be read: read again from parity and rewritten (md's
    /// read-error correction); the member fails only when errors repeat (the rewrite fails, or
    /// too many of them).
    fn read_failed(&mut self, id: HeadId, member: DiskIndex) {
        self.note_read_error(member);
        let known_bad = self.known_bad;
        let st = self.state(id);
        if !st.suspect.contains(&member) {
            st.suspect.push(member);
        }
        if known_bad && !st.listed_already.contains(&member) {
            st.listed_already.push(member);
        }
    }

    pub(super) fn head_io_done(&mut self, id: HeadId, member: DiskIndex, ok: bool) {
        let st = &self.heads[&id];
        let discarding = matches!(st.phase, Phase::Discarding { .. });
        let skipped = st.skip_copy.iter().any(|s| s.0 == member);
        let dev = &mut self.cache.head_mut(id).devs[member.get()];
        let was_read = dev.io == DevIo::Reading;
        dev.io = DevIo::Idle;
        if !was_read && st.acked_early {
            self.background_ios -= 1;
        }
        dev.dirty = false;
        // A discarded block is zeros on the member, a skip_copy block went from the request
        // buffer: either way the head's copy is stale.
        dev.uptodate = ok && !discarding && (was_read || !skipped);
        if ok {
            if !was_read {
                // A block rewritten over a read error is good again: the member is no
                // longer lost for this head (else a later loss in the same batch counted it
                // twice and refused a stripe still within redundancy: found by the simulator).
                self.state(id).suspect.retain(|m| *m != member);
            }
        } else if was_read {
            self.read_failed(id, member);
        } else {
            self.mark_failed(member);
        }
        let too_many = self.beyond_redundancy();
        let newly_lost = self.lost_since_planned(id);
        let st = self.state(id);
        match &mut st.phase {
            Phase::Reading { for_write, outstanding } => {
                *outstanding -= 1;
                st.replan |= !ok;
                if *outstanding > 0 {
                    return;
                }
                st.replan |= newly_lost;
                let for_write = *for_write;
                st.phase = Phase::Idle;
                self.reads_done(id, for_write);
            }
            Phase::SyncReading { outstanding } => {
                *outstanding -= 1;
                if *outstanding > 0 {
                    return;
                }
                st.phase = Phase::Idle;
                self.sync_reads_done(id);
            }
            Phase::Writing { outstanding, .. } | Phase::Discarding { outstanding } => {
                *outstanding -= 1;
                if too_many {
                    st.error = Some(ArrayError::BeyondRedundancy);
                }
                if *outstanding > 0 {
                    return;
                }
                self.member_writes_done(id);
            }
            Phase::Idle
            | Phase::Delayed { .. }
            | Phase::ListingBad { .. }
            | Phase::BitmapWait
            | Phase::LogWait
            | Phase::BehindWait => {
                unreachable!("an I/O completed on an idle head")
            }
        }
        self.handle(id);
    }

    /// The batch's member reads have all completed: compute and write, or serve the reads.
    fn reads_done(&mut self, id: HeadId, for_write: bool) {
        let st = self.state(id);
        let replan = std::mem::take(&mut st.replan);
        if replan {
            // Plan again with the member failed (rebuild from parity, or refuse).
        } else if for_write {
            self.compute_and_write(id);
        } else {
            self.rebuild_failed(id);
            self.correct_read_errors(id);
        }
    }

    /// The batch's member writes (or discards) have all completed.
    fn member_writes_done(&mut self, id: HeadId) {
        let st = self.state(id);
        let counted =
            matches!(st.phase, Phase::Writing { intent: true, .. } | Phase::Discarding { .. });
        st.phase = Phase::Idle;
        st.writes_done = true;
        if counted {
            if self.writes_set_bits(id) {
                let (sector, sectors) = self.head_member_range(id);
                self.write_intent_done(sector, sectors);
            }
            self.log_writes_done(id);
        }
    }

    /// When the batch's last read completes: whether a member is lost now that was not when
    /// the reads were planned, or is back (by re-add: in sync at once where it missed no
    /// write) and was not read. Either way the reads do not fit the computation that follows
    /// (it would take the unread block as good: the simulator's seed 1313): plan again.
    fn lost_since_planned(&self, id: HeadId) -> bool {
        if !matches!(self.heads[&id].phase, Phase::Reading { outstanding: 1, .. }) {
            return false;
        }
        let planned = &self.heads[&id].planned_lost;
        self.lost(id).iter().zip(planned).any(|(now, then)| now != then)
    }

    /// The sync batch's member reads have all completed: compute, or first read a member
    /// that came back meanwhile (`back_unread_since_planned`).
    fn sync_reads_done(&mut self, id: HeadId) {
        if self.back_unread_since_planned(id) {
            let Some(&Kind::Sync(kind)) = self.batch(id).first().map(|p| &p.kind) else {
                unreachable!("a sync batch")
            };
            self.start_sync(id, kind);
        } else {
            self.finish_sync_reads(id);
        }
    }

    /// Once a sync batch's reads are in: whether a member lost when they were planned is back
    /// now (by re-add, in sync here) and its block was not read. A recovery would rebuild
    /// from the unread buffer as if it were the member's data (the simulator's seed 47175199:
    /// a spare rebuilt wrong, once the simulator started a second recovery beside one under
    /// way); a check would compare against it. `start_sync` again reads what is missing. A
    /// member lost since planning needs nothing: its block was read before.
    fn back_unread_since_planned(&self, id: HeadId) -> bool {
        let planned = &self.heads[&id].planned_lost;
        let devs = &self.cache.head(id).devs;
        let lost = self.lost(id);
        (0..lost.len()).any(|m| planned.get(m) == Some(&true) && !lost[m] && !devs[m].uptodate)
    }

    /// After a read batch rebuilt blocks whose member reads failed: write them back.
    fn correct_read_errors(&mut self, id: HeadId) {
        let suspect = std::mem::take(&mut self.state(id).suspect);
        let writes: Vec<DiskIndex> = suspect
            .into_iter()
            .filter(|m| !self.failed[m.get()] && self.cache.head(id).devs[m.get()].uptodate)
            .collect();
        if writes.is_empty() {
            return;
        }
        self.stats.read_errors_corrected += writes.len() as u64;
        self.state(id).repairs.extend(&writes);
        if self.log_covers_rewrite(id, &writes) {
            // Parity rebuilt from data written since the last flush: a crash could undo some
            // of that data but keep the parity, so the rewrite is logged like a write (found
            // by the simulator: a Q rewritten after an rmw that could not read it).
            self.state(id).writes = writes;
            self.start_writing(id);
            return;
        }
        self.issue(id, &writes, MemberOp::Write);
        self.state(id).phase = Phase::Writing { outstanding: writes.len(), intent: false };
    }

    /// Discards the head's unit on every member, parity included.
    fn start_discard(&mut self, id: HeadId) {
        // Every cached block is stale now, a failed member's too: it is not discarded on a
        // member, so its completion would never mark it, and a later read must rebuild it
        // (as zeros) from the discarded survivors rather than serve the old contents.
        for dev in &mut self.cache.head_mut(id).devs {
            dev.uptodate = false;
        }
        let members = self.live_members();
        if members.is_empty() {
            self.state(id).writes_done = true;
            return;
        }
        // A discard changes data and parity like a write: a crash in the middle tears the
        // stripe, so its write-intent bit must be durable first (found by the simulator).
        if !self.log_admit(id, true) {
            return;
        }
        let (sector, sectors) = self.head_member_range(id);
        if !self.write_intent_admit(id, sector, sectors) {
            return;
        }
        self.stats.stripe_discards += 1;
        self.issue(id, &members, MemberOp::Discard);
        self.state(id).phase = Phase::Discarding { outstanding: members.len() };
    }

    /// Whether a request in the batch asked for FUA.
    pub(super) fn batch_fua(&self, id: HeadId) -> bool {
        let st = &self.heads[&id];
        !st.acked_early
            && st.batch.iter().any(|p| {
                p.kind == Kind::Write && self.requests[p.slot].as_ref().is_some_and(|r| r.fua)
            })
    }

    /// The members whose blocks this head must rebuild rather than read: failed members and
    /// those whose read failed here.
    pub(super) fn lost(&self, id: HeadId) -> PerMember<bool> {
        let end = self.head_member_end(id);
        // Filled in place: a collect went through SmallVec's generic `extend`, at several
        // times the cost, and this runs three or four times a write.
        let mut lost = PerMember::from_elem(false, self.failed.len());
        for (m, lost) in lost.iter_mut().enumerate() {
            *lost = !self.in_sync(m, end);
        }
        for m in &self.heads[&id].suspect {
            lost[m.get()] = true;
        }
        lost
    }

    pub(super) fn start_writing(&mut self, id: HeadId) {
        // Blocks of members whose reads failed here, now rebuilt or overwritten, are rewritten
        // with the stripe (md's read-error correction).
        for m in self.heads[&id].suspect.clone() {
            let uptodate = self.cache.head(id).devs[m.get()].uptodate;
            if uptodate && !self.failed[m.get()] && !self.state(id).writes.contains(&m) {
                self.state(id).writes.push(m);
                self.state(id).repairs.push(m);
                self.stats.read_errors_corrected += 1;
            }
        }
        if self.state(id).writes.is_empty() {
            self.state(id).writes_done = true;
            return;
        }
        if !self.log_admit(id, false) {
            return;
        }
        if self.writing_behind(id) {
            self.state(id).phase = Phase::BehindWait;
            return;
        }
        let writes = std::mem::take(&mut self.state(id).writes);
        let (sector, sectors) = self.head_member_range(id);
        if self.writes_set_bits(id) && !self.write_intent_admit(id, sector, sectors) {
            self.state(id).writes = writes;
            return;
        }
        let st = &self.heads[&id];
        if st.acked_early && (st.copy_behind || !st.queued.is_empty()) {
            return self.write_behind(id, &writes);
        }
        self.issue(id, &writes, MemberOp::Write);
        self.state(id).phase = Phase::Writing { outstanding: writes.len(), intent: true };
    }

    fn finish_batch(&mut self, id: HeadId) {
        let rebuilt = std::mem::take(&mut self.state(id).rebuilt);
        if self.state(id).error.is_none() {
            self.copy_out_reads(id);
            if !rebuilt.is_empty() {
                self.note_recovered(id, &rebuilt);
            }
        }
        self.log_writes_done(id);
        let st = self.state(id);
        let error = st.error.take();
        let batch = std::mem::take(&mut st.batch);
        let acked = std::mem::take(&mut st.acked_early);
        st.method = None;
        st.skip_copy.clear();
        for piece in batch {
            if acked && piece.kind == Kind::Write {
                continue; // completed when its log entries were durable
            }
            let req = self.request_mut(piece.slot);
            req.outstanding -= 1;
            req.held -= usize::from(piece.held);
            if let Some(e) = &error {
                req.error.get_or_insert(e.clone());
            }
            self.finish_if_done(piece.slot);
        }
    }

    /// The head has no work left: give it back to the cache and start waiting work.
    fn release(&mut self, id: HeadId) {
        self.heads.remove(&id);
        self.cache.put(id);
        self.start_waiting();
    }

    /// Starts pieces waiting for a head, in order, while heads are free. Once no head is free,
    /// waiting pieces whose stripe head is already held still join it (a delayed partial stripe
    /// is filled by the next request rather than started with reads). Such a piece exists only
    /// when an earlier piece of its key got a head here (a key with a held head takes new
    /// pieces at once), so the queue is searched only then, not at every release. A piece never
    /// overtakes an earlier one for the same head: a key has a head for all its waiting pieces
    /// or for none.
    pub(super) fn start_waiting(&mut self) {
        let mut key_still_waits = false;
        while let Some((key, piece)) = self.pop_waiting() {
            if let Some(held) = self.held_head(key) {
                self.heads.get_mut(&held).expect("checked").queued.push(piece);
                self.handle_or_defer(held);
                continue;
            }
            match self.start_piece(key, piece) {
                Ok(()) => key_still_waits |= self.waiting_keys.contains_key(&key),
                Err(piece) => {
                    // No head free: it stays first.
                    *self.waiting_keys.entry(key).or_default() += 1;
                    self.waiting.push_front((key, piece));
                    break;
                }
            }
        }
        if key_still_waits {
            self.join_held_heads();
        }
    }

    /// Moves waiting pieces whose head is held onto it, keeping the others in order.
    fn join_held_heads(&mut self) {
        for (key, piece) in std::mem::take(&mut self.waiting) {
            match self.held_head(key) {
                Some(held) => {
                    self.forget_waiting_key(key);
                    self.heads.get_mut(&held).expect("checked").queued.push(piece);
                    self.handle_or_defer(held);
                }
                None => self.waiting.push_back((key, piece)),
            }
        }
    }

    /// Starts every delayed head.
    pub(super) fn start_delayed(&mut self) {
        self.start_delayed_if(|_| true);
    }

    /// Starts the delayed head held longest (the list is in the order heads were delayed).
    pub(super) fn start_oldest_delayed(&mut self) {
        while !self.delayed.is_empty() {
            let id = self.delayed.remove(0);
            if self.heads.get(&id).is_some_and(|st| matches!(st.phase, Phase::Delayed { .. })) {
                self.state(id).hold_released = true;
                self.handle(id);
                return;
            }
        }
    }

    /// Starts delayed heads whose writes look random (`random_writes`): those on
    /// `delayed_random` (usually none: a stream's heads wait to be filled, and this runs on
    /// every turn).
    pub(super) fn start_delayed_random(&mut self) {
        let random = |st: &HeadState| matches!(st.phase, Phase::Delayed { random: true, .. });
        let mut started = Vec::new();
        for id in std::mem::take(&mut self.delayed_random) {
            // Not one that has left the list since (its phase says so), or that starting
            // another started.
            if self.heads.get(&id).is_some_and(random) {
                started.push(id);
                self.state(id).hold_released = true;
                self.handle(id);
            }
        }
        // Once, not per head started: the list can hold a whole queue's worth of heads.
        self.delayed.retain(|d| !started.contains(d));
    }

    /// Starts delayed heads that full-stripe writes have overtaken too often (no starvation).
    pub(super) fn start_overtaken(&mut self) {
        let now = self.full_stripe_writes;
        self.start_delayed_if(|since| now - since > super::PREREAD_BYPASS_THRESHOLD);
    }

    fn start_delayed_if(&mut self, due: impl Fn(u64) -> bool) {
        let (start, keep): (Vec<HeadId>, Vec<HeadId>) =
            std::mem::take(&mut self.delayed).into_iter().partition(|id| {
                match self.heads.get(id).map(|st| st.phase) {
                    Some(Phase::Delayed { since, .. }) => due(since),
                    _ => true, // no longer delayed: drop it from the list
                }
            });
        self.delayed = keep;
        for id in start {
            if self.heads.get(&id).is_some_and(|st| matches!(st.phase, Phase::Delayed { .. })) {
                self.state(id).hold_released = true;
                self.handle(id);
            }
        }
    }

    pub(super) fn method(&self, id: HeadId) -> Option<WriteMethod> {
        self.heads[&id].method
    }

    pub(super) fn batch(&self, id: HeadId) -> &[Piece] {
        &self.heads[&id].batch
    }

    pub(super) fn range_bytes(b: &BlockRange) -> (std::ops::Range<usize>, usize) {
        let start = usize::try_from(b.first * SECTOR_BYTES).expect("fits");
        let len = usize::try_from(b.sectors * SECTOR_BYTES).expect("fits");
        let buf = usize::try_from(b.buf_sector * SECTOR_BYTES).expect("fits");
        (start..start + len, buf)
    }
}

impl Cover {
    fn max_cover(self, other: Cover) -> Cover {
        match (self, other) {
            (Cover::Full, _) | (_, Cover::Full) => Cover::Full,
            (Cover::Partial, _) | (_, Cover::Partial) => Cover::Partial,
            _ => Cover::None,
        }
    }
}
