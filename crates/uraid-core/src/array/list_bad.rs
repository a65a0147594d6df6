//! A recovery through a stripe it cannot rebuild: the classic unreadable sector on a survivor
//! while a RAID5 rebuilds. md does not stop the rebuild there (raid5.c's `handle_failed_sync`):
//! it lists the block in the bad block log of the member it rebuilds, and the unreadable one
//! in its own member's (`raid5_end_read_request`), and goes on. That stripe's data is lost
//! (it was as soon as the sector went bad with a member missing), but the rest of the array
//! gets its redundancy back, and the lost blocks read as errors, never as the rebuilt
//! member's blank or stale contents, until a write there makes them good again.
//!
//! Here the same: `MemberOp::ListBad` to every member being rebuilt in the head and to every
//! member whose read failed. The head counts as rebuilt only once each member being rebuilt
//! has listed its block; where one cannot (no log, or a full one) the sync fails as before,
//! and the recovery stops there saying where. A member whose read failed and whose log
//! cannot take it keeps the block unlisted: reads of it fail on the device instead.
//!
//! md's replace meets the same: the member being replaced cannot read a block (why it is
//! replaced) and another member cannot read its block of that stripe, so the block can be
//! neither copied nor rebuilt. md lists it on the replacement (`handle_failed_sync` lists on
//! `conf->disks[i].replacement` too) and goes on; uraid stopped the copy there, so that such
//! a member could not be replaced at all. Now `MemberOp::ListBadReplacement` lists it on the
//! device replacing the member, the other unreadable blocks on their members, and the copy
//! goes on; where the replacement cannot list it, the copy stops there as before.
//!
//! A user read that meets the same lost stripe fails, and lists the survivor's unreadable
//! block first (`fail_unreadable`), as md's "read error not correctable" does.
//!
//! Read errors on a survivor while the array is degraded to its limit are not counted
//! towards failing it (`note_read_error`): none of them can be corrected, and failing the
//! member would fail the array for a few sectors, where md keeps it (with a log) and so does
//! uraid (with or without).

use super::handle::Phase;
use super::{Array, ArrayError, IoArea, MemberIo, MemberOp, Pending};
use crate::stripe::HeadId;
use crate::units::{DiskIndex, Sector};

impl Array {
    /// A recovery batch whose reads left more blocks lost than parity rebuilds, read errors
    /// among them: lists the blocks it cannot rebuild (see the module docs) and returns true,
    /// or false where listing would not help (failed members alone put the array beyond its
    /// redundancy, or no read failed here).
    pub(super) fn list_unrebuildable(&mut self, id: HeadId) -> bool {
        let st = &self.heads[&id];
        if st.suspect.is_empty() || self.beyond_redundancy() {
            return false;
        }
        let targets = self.recovering_here(id);
        if targets.is_empty() {
            return false;
        }
        let listings: Vec<_> = targets.iter().map(|&m| (m, MemberOp::ListBad, true)).collect();
        self.list_bad(id, listings, &[]);
        self.state(id).rebuilt = targets;
        true
    }

    /// A replace batch (md's replace) whose member's block could not be read, and could not
    /// be rebuilt either (another read failed in the stripe): as md's `handle_failed_sync`
    /// does for a replacement, lists the block on the device replacing the member, and the
    /// other unreadable ones on their members, and the copy goes on. Where the replacement
    /// cannot list it, the batch fails and the copy stops there, as before. False where
    /// listing would not help (failed members alone put the array beyond its redundancy, or
    /// the replaced blocks were read).
    pub(super) fn list_uncopyable(&mut self, id: HeadId) -> bool {
        if self.heads[&id].suspect.is_empty() || self.beyond_redundancy() {
            return false;
        }
        let targets = self.replaced_blocks_unread(id, &self.replacing_here(id), &self.lost(id));
        if targets.is_empty() {
            return false;
        }
        let listings: Vec<_> =
            targets.iter().map(|&m| (m, MemberOp::ListBadReplacement, true)).collect();
        // The replaced members' own blocks: they are leaving, and md does not list there.
        self.list_bad(id, listings, &targets);
        true
    }

    /// Queues `listings` (member, op, required) and a `ListBad` for every member whose read
    /// failed here but those of `skip`; the head waits for them (`Phase::ListingBad`).
    fn list_bad(
        &mut self,
        id: HeadId,
        mut listings: Vec<(DiskIndex, MemberOp, bool)>,
        skip: &[DiskIndex],
    ) {
        let unreadable = self.heads[&id]
            .suspect
            .iter()
            .copied()
            .filter(|m| !self.failed[m.get()] && !skip.contains(m));
        listings.extend(unreadable.map(|m| (m, MemberOp::ListBad, false)));
        let sector = Sector(self.head_member_range(id).0);
        let required = listings.iter().filter(|l| l.2).count();
        for &(member, op, required) in &listings {
            let tag = self.new_tag();
            self.queue.push_back(MemberIo {
                tag,
                member,
                op,
                sector,
                sectors: self.unit_sectors,
                buf: super::IoBuf::None,
                fua: false,
                area: IoArea::Data,
                before_replacement: false,
            });
            self.inflight.insert(tag, member, Pending::ListBad { head: id, required });
        }
        let st = self.state(id);
        // Neither is rewritten: the lost block is not rebuilt, the unreadable one is listed.
        st.suspect.clear();
        st.phase = Phase::ListingBad { outstanding: listings.len(), required, refused: false };
    }

    /// A read that needs a block no member can give: with the array degraded to its limit, a
    /// survivor could not read its block of the stripe. The read fails, as before; first, as
    /// md's `raid5_end_read_request` does for a read error "not correctable", the unreadable
    /// block is listed in its member's bad block log (where it has one), so that the member
    /// keeps its place, a later rebuild finds it listed, and `examine --badblocks` shows what
    /// was lost. Failed members alone past the redundancy, no read error here, or only reads
    /// of what the logs list already: nothing to list.
    pub(super) fn fail_unreadable(&mut self, id: HeadId) {
        self.state(id).error = Some(ArrayError::BeyondRedundancy);
        let st = &self.heads[&id];
        let skip = st.listed_already.clone();
        let unreadable = st.suspect.iter().any(|m| !self.failed[m.get()] && !skip.contains(m));
        if unreadable && self.degraded_to_limit() && !self.beyond_redundancy() {
            self.list_bad(id, Vec::new(), &skip);
        }
    }

    /// One listing of `list_bad` completed (`ok`: durable in the log).
    pub(super) fn list_bad_done(&mut self, id: HeadId, required_one: bool, ok: bool) {
        let st = self.state(id);
        let Phase::ListingBad { outstanding, required, refused } = &mut st.phase else {
            unreachable!("a listing completes on a head that lists")
        };
        *outstanding -= 1;
        *refused |= !ok && required_one;
        if *outstanding > 0 {
            return;
        }
        let (refused, required) = (*refused, *required as u64);
        st.phase = Phase::Idle;
        st.writes_done = true;
        if refused {
            // Counted as rebuilt (or copied) it would serve its blank or stale block as data.
            st.rebuilt.clear();
            st.error = Some(ArrayError::CannotListBadBlock);
        } else {
            self.stats.sectors_listed_bad += required * self.unit_sectors;
        }
        self.handle(id);
    }

    /// Whether the array is degraded as far as its parity reaches (members failed or being
    /// recovered): a read error then cannot be corrected wherever a recovering member is
    /// not yet rebuilt, and md does not fail the member for it.
    pub(super) fn degraded_to_limit(&self) -> bool {
        let degraded = (0..self.failed.len())
            .filter(|&m| self.failed[m] || self.recovery_offset[m].is_some())
            .count();
        degraded >= self.geometry.max_degraded()
    }
}
