//! md's sync requests, one stripe head at a time: resync (recompute parity from the data after
//! an unclean shutdown), check (compare, count and locate mismatches), repair (fix them) and
//! recovery (rebuild a member that is coming back or replacing a failed one).
//!
//! The background process that walks the array in windows, rate-limits and records progress
//! lives in the runtime; here is what happens to one window: `submit_sync` queues a sync piece
//! on every stripe head of the member-sector range, and heads serialise it with user I/O to
//! the same stripes exactly as they serialise writes, so syncing runs while I/O continues.
//!
//! A member being recovered is in sync below its recovery offset (reads and writes as usual)
//! and missing above it (rebuilt for reads, left out of writes), as in md.

use super::handle::Phase;
use super::{Array, ArrayError, IoArea, IoTag, Kind, MemberIo, MemberOp, ReqId};
use crate::geometry::DiskRole;
use crate::layout::Level;
use crate::stripe::HeadId;
use crate::units::{DiskIndex, SECTOR_BYTES, Sector};

/// What a sync request does to each stripe head.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SyncKind {
    /// Recompute P (and Q) from the data and write them (after an unclean shutdown the data is
    /// trusted and parity follows it, as md does).
    Resync,
    /// Read everything, count and locate mismatches, write nothing.
    Check,
    /// As check, then fix: parity is rewritten; on RAID6 a single bad data block that the
    /// syndrome identifies is corrected instead.
    Repair,
    /// Rebuild the blocks of members being recovered and write them there.
    Recovery,
    /// Copy the blocks of members being replaced to their replacements (`replace.rs`).
    Replace,
}

/// A stripe unit whose parity did not match its data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mismatch {
    /// Member sector where the unit starts (the same on every member).
    pub member_sector: Sector,
    pub sectors: u64,
    /// The member holding the bad block, when it can be told: on RAID6 from the syndrome (P,
    /// Q or one data member); on RAID4/5 a mismatch cannot be located.
    pub member: Option<DiskIndex>,
}

/// Mismatches kept for reporting (md keeps only a count; a location list must stay bounded).
pub const MISMATCHES_KEPT: usize = 1024;

impl Array {
    /// Syncs member sectors `[member_sector, +sectors)` (whole stripe units; the range is
    /// widened to them). Completes when every stripe head in it is done.
    pub fn submit_sync(&mut self, id: ReqId, kind: SyncKind, member_sector: Sector, sectors: u64) {
        let member_sectors = self.size_sectors / self.geometry.data_disks() as u64;
        if member_sector.0.checked_add(sectors).is_none_or(|end| end > member_sectors) {
            let e =
                ArrayError::OutOfRange { sector: member_sector.0, sectors, size: member_sectors };
            self.done.push((id, Err(e), Vec::new()));
            return;
        }
        let Some(slot) = self.admit_range(id, Sector(0), 0, Vec::new()) else { return };
        let unit = self.unit_sectors;
        let first = member_sector.0 / unit;
        let end = (member_sector.0 + sectors).div_ceil(unit);
        let chunk = self.geometry.chunk_sectors();
        for u in first..end {
            let s = u * unit;
            let key = crate::stripe::StripeKey {
                stripe: crate::StripeNumber(s / chunk),
                unit: ((s % chunk) / unit) as u32,
            };
            self.request_mut(slot).outstanding += 1;
            let piece = super::handle::Piece {
                slot,
                kind: Kind::Sync(kind),
                blocks: Vec::new(),
                held: false,
            };
            self.add_piece(key, piece);
        }
        self.request_mut(slot).outstanding -= 1;
        self.finish_if_done(slot);
        self.start_delayed_when_idle();
    }

    /// Puts a member back (a re-added or replacement member) as being recovered: in sync below
    /// `recovery_offset` member sectors, rebuilt by `SyncKind::Recovery` above it.
    pub fn start_recovery(&mut self, member: DiskIndex, recovery_offset: Sector) {
        self.mark_back(member);
        self.read_errors[member.get()] = 0;
        self.recovery_offset[member.get()] = Some(recovery_offset.0);
        self.recovered[member.get()].clear();
        self.stale[member.get()] = None;
        if let Some(wi) = self.write_intent.as_mut() {
            wi.rewrite_for_new_member();
        }
        self.log_member_joined();
    }

    /// `member`'s slot holds another device now (a spare in place of a failed member; the
    /// runtime calls this as it swaps them): log writes still queued for the slot (held while
    /// another failure was unrecorded) were for the device that failed, and complete as
    /// written, nowhere. On the new device an older generation's header would make its ring
    /// look like a witness of the run (see `replace.rs`); the failed device's ring is never
    /// read, and the generation's effects are durable before the reset that follows the
    /// join writes anything the replay would read there.
    pub fn member_device_changed(&mut self, member: DiskIndex) {
        self.drop_queued_log_writes(member, |_| true);
    }

    /// Completes as written, and takes off the queue, the log writes queued for `member`
    /// that `stale` picks.
    pub(super) fn drop_queued_log_writes(
        &mut self,
        member: DiskIndex,
        stale: impl Fn(&MemberIo) -> bool,
    ) {
        let picked = |io: &MemberIo| io.member == member && io.area == IoArea::Log && stale(io);
        let tags: Vec<IoTag> = self.queue.iter().filter(|io| picked(io)).map(|io| io.tag).collect();
        if tags.is_empty() {
            return;
        }
        self.queue.retain(|io| !picked(io));
        for tag in tags {
            self.complete_io(tag, true);
        }
    }

    /// Records recovery progress: the member is in sync below `offset`; at or past the end of
    /// the members it is in sync everywhere.
    pub fn set_recovery_offset(&mut self, member: DiskIndex, offset: Sector) {
        let member_sectors = self.size_sectors / self.geometry.data_disks() as u64;
        self.recovery_offset[member.get()] = (offset.0 < member_sectors).then_some(offset.0);
        if offset.0 >= member_sectors {
            self.stale[member.get()] = None;
        }
        // Heads below the offset need no record of their own any more.
        let recovered = &mut self.recovered[member.get()];
        *recovered = recovered.split_off(&(offset.0 + 1));
    }

    /// Members being recovered, with their recovery offsets.
    #[must_use]
    pub fn recovering(&self) -> Vec<(DiskIndex, Sector)> {
        let offsets = self.recovery_offset.iter().enumerate();
        offsets.filter_map(|(m, o)| o.map(|o| (DiskIndex(m as u16), Sector(o)))).collect()
    }

    /// Mismatches found by check, repair and resync so far (the first `MISMATCHES_KEPT`), and
    /// the total count in sectors (md's mismatch_cnt).
    #[must_use]
    pub fn mismatches(&self) -> (&[Mismatch], u64) {
        (&self.mismatches, self.stats.mismatch_sectors)
    }

    /// Forgets where earlier actions found mismatches (the count stays: md's mismatch_cnt
    /// is read as a difference), so that the next action's first `MISMATCHES_KEPT` are kept
    /// and reported, not the ones a check before it already reported.
    pub fn clear_mismatches(&mut self) {
        self.mismatches.clear();
    }

    /// Whether `member` holds current data for a head ending at member sector `end`: below
    /// its recovery offset, or in a head recovery has rebuilt since (the offset advances only
    /// when a whole window is done, and a write to a rebuilt head before then must reach the
    /// member, or the member would miss it for good).
    pub(super) fn in_sync(&self, member: usize, end: u64) -> bool {
        !self.failed[member]
            && (self.recovery_offset[member].is_none_or(|o| end <= o)
                || self.recovered[member].contains(&end)
                || self.clean_since_readd(member, end - self.unit_sectors, end))
    }

    /// Whether `member` holds current data for all of member sectors `[start, end)` (whole
    /// stripe heads): every head there is below the recovery offset or rebuilt since. One
    /// rebuilt head says nothing of its neighbours, so each is asked for.
    pub(super) fn in_sync_range(&self, member: usize, start: u64, end: u64) -> bool {
        // Every healthy read asks this: answer without walking the heads unless the range
        // reaches above a recovery offset.
        if self.failed[member] {
            return false;
        }
        if self.recovery_offset[member].is_none_or(|o| end <= o)
            || self.clean_since_readd(member, start, end)
        {
            return true;
        }
        let unit = self.unit_sectors;
        let first_end = (start / unit + 1) * unit;
        (first_end..=end).step_by(unit as usize).all(|head_end| self.in_sync(member, head_end))
    }

    /// A Recovery batch finished writing head `id`: the members it rebuilt (`rebuilt`) are in
    /// sync there from now on, unless one failed meanwhile (a failed member's `recovered` is
    /// cleared when it comes back).
    pub(super) fn note_recovered(&mut self, id: HeadId, rebuilt: &[DiskIndex]) {
        let end = self.head_member_end(id);
        for m in rebuilt.iter().filter(|m| !self.failed[m.get()]) {
            self.recovered[m.get()].insert(end);
        }
    }

    /// Starts a sync batch: read every member that is not lost and not cached.
    pub(super) fn start_sync(&mut self, id: HeadId, kind: SyncKind) {
        let lost = self.lost(id);
        let lost_count = lost.iter().filter(|l| **l).count();
        let recovering = self.recovering_here(id);
        let ok = match kind {
            // RAID6 with one block lost still has a parity to check (md's
            // handle_parity_checks6); otherwise comparing needs every block.
            SyncKind::Check | SyncKind::Repair => {
                lost_count == 0 || (lost_count == 1 && self.geometry.level() == Level::Raid6)
            }
            SyncKind::Resync => lost_count == 0,
            SyncKind::Recovery | SyncKind::Replace => lost_count <= self.geometry.max_degraded(),
        };
        if !ok {
            if lost_count > self.geometry.max_degraded() {
                self.state(id).error = Some(ArrayError::BeyondRedundancy);
            }
            // A degraded stripe cannot be checked or resynced (md recovers instead).
            self.state(id).writes_done = true;
            return;
        }
        if kind == SyncKind::Recovery && recovering.is_empty() {
            self.state(id).writes_done = true;
            return;
        }
        let reads: Vec<DiskIndex> = if kind == SyncKind::Replace {
            if self.replacing_failed() {
                self.state(id).error = Some(ArrayError::ReplacedMemberFailed);
                self.state(id).writes_done = true;
                return;
            }
            // None being replaced here: no reads, and `copy_to_replacements` has nothing.
            self.replace_reads(id)
        } else {
            let head = self.cache.head(id);
            (0..lost.len())
                .filter(|&m| !lost[m] && !head.devs[m].uptodate)
                .map(|m| DiskIndex(m as u16))
                .collect()
        };
        if reads.is_empty() {
            self.finish_sync_reads(id);
        } else {
            self.issue(id, &reads, MemberOp::Read);
            self.state(id).phase = Phase::SyncReading { outstanding: reads.len() };
        }
    }

    /// Members being recovered that are missing in this head.
    pub(super) fn recovering_here(&self, id: HeadId) -> Vec<DiskIndex> {
        let end = self.head_member_end(id);
        (0..self.failed.len())
            .filter(|&m| !self.failed[m] && !self.in_sync(m, end))
            .map(|m| DiskIndex(m as u16))
            .collect()
    }

    pub(super) fn head_member_end(&self, id: HeadId) -> u64 {
        let key = self.cache.head(id).key;
        key.stripe.0 * self.geometry.chunk_sectors() + u64::from(key.unit + 1) * self.unit_sectors
    }

    /// The sync batch's reads are in: compute, compare, and write what must be written.
    pub(super) fn finish_sync_reads(&mut self, id: HeadId) {
        let Some(&Kind::Sync(kind)) = self.batch(id).first().map(|p| &p.kind) else {
            unreachable!("a sync batch")
        };
        if self.lost(id).iter().filter(|l| **l).count() > self.geometry.max_degraded() {
            if kind == SyncKind::Recovery && self.list_unrebuildable(id) {
                return;
            }
            if kind == SyncKind::Replace && self.list_uncopyable(id) {
                return;
            }
            self.state(id).error = Some(ArrayError::BeyondRedundancy);
            self.state(id).writes_done = true;
            return;
        }
        let writes = match kind {
            SyncKind::Replace => {
                // A member read failed: read the rest and rebuild from them first.
                let more = self.replace_reads(id);
                if more.is_empty() {
                    self.copy_to_replacements(id);
                } else {
                    self.issue(id, &more, MemberOp::Read);
                    self.state(id).phase = Phase::SyncReading { outstanding: more.len() };
                }
                return;
            }
            SyncKind::Recovery => {
                self.rebuild_lost_blocks(id);
                let rebuilt = self.recovering_here(id);
                self.state(id).rebuilt.clone_from(&rebuilt);
                rebuilt
            }
            SyncKind::Check | SyncKind::Repair | SyncKind::Resync => {
                if self.heads[&id].suspect.is_empty() {
                    self.compare_parity(id, kind)
                } else {
                    // A block failed to read: rebuild it (and rewrite it below) rather than
                    // compare against it.
                    self.rebuild_lost_blocks(id);
                    Vec::new()
                }
            }
        };
        let st = self.state(id);
        st.writes = writes;
        for m in st.writes.clone() {
            self.cache.head_mut(id).devs[m.get()].dirty = true;
        }
        self.start_writing(id);
    }

    /// Computes P (and Q) from the data, compares with what the members hold, records a
    /// mismatch, and returns the blocks to write for `kind`.
    fn compare_parity(&mut self, id: HeadId, kind: SyncKind) -> Vec<DiskIndex> {
        if self.geometry.level() == Level::Raid6 && kind != SyncKind::Resync {
            let lost = self.lost(id);
            if lost.iter().filter(|l| **l).count() == 1 {
                let member = lost.iter().position(|l| *l).expect("one is lost");
                return self.compare_remaining_parity(id, kind, member);
            }
        }
        let map = self.geometry.stripe_map(self.cache.head(id).key.stripe);
        let head = self.cache.head(id);
        let len = head.buffers[0].len();
        let p_idx = map.p_disk.expect("RAID4/5/6 have P").get();
        let mut p = vec![0u8; len];
        let mut q = map.q_disk.map(|_| vec![0u8; len]);
        if let Some(q) = q.as_mut() {
            let data: Vec<Option<&[u8]>> =
                map.syndrome.iter().map(|d| d.map(|d| &head.buffers[d.get()][..])).collect();
            uraid_parity::gen_syndrome(&mut p, q, &data);
        } else {
            let data: Vec<&[u8]> =
                map.data_disk.iter().map(|d| &head.buffers[d.get()][..]).collect();
            uraid_parity::xor_gen(&mut p, &data);
        }
        let p_bad = p[..] != head.buffers[p_idx][..];
        let q_bad = map.q_disk.is_some_and(|qd| q.as_deref() != Some(&head.buffers[qd.get()][..]));
        if !p_bad && !q_bad {
            return Vec::new();
        }
        let member = match (self.geometry.level(), p_bad, q_bad) {
            (Level::Raid6, true, false) => map.p_disk,
            (Level::Raid6, false, true) => map.q_disk,
            (Level::Raid6, true, true) => {
                let q_disk = map.q_disk.expect("RAID6 has Q").get();
                let dp: Vec<u8> =
                    p.iter().zip(&head.buffers[p_idx][..]).map(|(a, b)| a ^ b).collect();
                let q = q.as_ref().expect("RAID6 computes Q");
                let dq: Vec<u8> =
                    q.iter().zip(&head.buffers[q_disk][..]).map(|(a, b)| a ^ b).collect();
                single_bad_data_slot(&dp, &dq).and_then(|z| map.syndrome.get(z).copied().flatten())
            }
            _ => None,
        };
        self.stats.mismatch_sectors += len as u64 / SECTOR_BYTES;
        if self.mismatches.len() < MISMATCHES_KEPT {
            let start = self.head_member_end(id) - self.unit_sectors;
            let sectors = self.unit_sectors;
            self.mismatches.push(Mismatch { member_sector: Sector(start), sectors, member });
        }
        if kind == SyncKind::Check {
            return Vec::new();
        }
        let head = self.cache.head_mut(id);
        let bad_data = member.filter(|m| matches!(map.roles[m.get()], DiskRole::Data { .. }));
        if let (SyncKind::Repair, Some(z)) = (kind, bad_data) {
            // The syndrome names one data block: its error is P's difference. Fix it, keep
            // P and Q (both consistent with the corrected data).
            let e: Vec<u8> = p.iter().zip(&head.buffers[p_idx][..]).map(|(a, b)| a ^ b).collect();
            for (b, e) in head.buffers[z.get()].iter_mut().zip(&e) {
                *b ^= e;
            }
            return vec![z];
        }
        let mut writes = Vec::new();
        if p_bad {
            head.buffers[p_idx].copy_from_slice(&p);
            writes.push(DiskIndex(p_idx as u16));
        }
        if let (true, Some(qd), Some(q)) = (q_bad, map.q_disk, q) {
            head.buffers[qd.get()].copy_from_slice(&q);
            writes.push(qd);
        }
        writes
    }

    /// RAID6 check or repair with one block (`lost`) missing, as md's handle_parity_checks6
    /// does it: Q lost, P is checked against the data; otherwise Q is, the lost block (if
    /// data) computed from P first. With one parity left a mismatch cannot be pinned on a
    /// block, so it names none; repair rewrites the parity checked. It used to skip such
    /// stripes, and a check of a RAID6 missing one member said "0 mismatched sectors" having
    /// compared nothing.
    fn compare_remaining_parity(
        &mut self,
        id: HeadId,
        kind: SyncKind,
        lost: usize,
    ) -> Vec<DiskIndex> {
        let map = self.geometry.stripe_map(self.cache.head(id).key.stripe);
        let head = self.cache.head(id);
        let len = head.buffers[0].len();
        let p_idx = map.p_disk.expect("RAID6 has P").get();
        let q_idx = map.q_disk.expect("RAID6 has Q").get();
        // The lost data block from P, in scratch: put in the head, a wrong P would leave a
        // wrong block in the cache for reads.
        let rebuilt = matches!(map.roles[lost], DiskRole::Data { .. }).then(|| {
            let sources: Vec<&[u8]> = map
                .data_disk
                .iter()
                .map(|d| d.get())
                .filter(|&d| d != lost)
                .chain([p_idx])
                .map(|d| &head.buffers[d][..])
                .collect();
            let mut block = vec![0u8; len];
            uraid_parity::xor_gen(&mut block, &sources);
            block
        });
        let data: Vec<Option<&[u8]>> = map
            .syndrome
            .iter()
            .map(|d| {
                d.map(|d| match &rebuilt {
                    Some(block) if d.get() == lost => &block[..],
                    _ => &head.buffers[d.get()][..],
                })
            })
            .collect();
        let (mut p, mut q) = (vec![0u8; len], vec![0u8; len]);
        uraid_parity::gen_syndrome(&mut p, &mut q, &data);
        let (checked, computed) = if lost == q_idx { (p_idx, p) } else { (q_idx, q) };
        if computed[..] == head.buffers[checked][..] {
            return Vec::new();
        }
        self.stats.mismatch_sectors += len as u64 / SECTOR_BYTES;
        if self.mismatches.len() < MISMATCHES_KEPT {
            let start = self.head_member_end(id) - self.unit_sectors;
            let sectors = self.unit_sectors;
            self.mismatches.push(Mismatch { member_sector: Sector(start), sectors, member: None });
        }
        if kind == SyncKind::Check {
            return Vec::new();
        }
        self.cache.head_mut(id).buffers[checked].copy_from_slice(&computed);
        vec![DiskIndex(checked as u16)]
    }
}

/// For RAID6 P and Q differences `dp` (= e) and `dq` (= g^z * e) of one bad data block in
/// syndrome slot z: that z, if every byte agrees on it.
fn single_bad_data_slot(dp: &[u8], dq: &[u8]) -> Option<usize> {
    use uraid_parity::gf;
    let mut slot = None;
    for (&p, &q) in dp.iter().zip(dq) {
        match (p, q) {
            (0, 0) => {}
            (0, _) | (_, 0) => return None,
            (p, q) => {
                let z = usize::from(gf::log2(gf::div(q, p)));
                if *slot.get_or_insert(z) != z {
                    return None;
                }
            }
        }
    }
    slot
}
