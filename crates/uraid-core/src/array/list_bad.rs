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
        let unreadable: Vec<DiskIndex> =
            st.suspect.iter().copied().filter(|m| !self.failed[m.get()]).collect();
        let sector = Sector(self.head_member_range(id).0);
        let members: Vec<DiskIndex> = targets.iter().chain(&unreadable).copied().collect();
        for &member in &members {
            let tag = self.new_tag();
            self.queue.push_back(MemberIo {
                tag,
                member,
                op: MemberOp::ListBad,
                sector,
                sectors: self.unit_sectors,
                buf: super::IoBuf::None,
                fua: false,
                area: IoArea::Data,
                before_replacement: false,
            });
            self.inflight.insert(tag, member, Pending::ListBad { head: id, member });
        }
        let st = self.state(id);
        // Neither is rewritten: the lost block is not rebuilt, the unreadable one is listed.
        st.suspect.clear();
        st.rebuilt = targets;
        st.phase = Phase::ListingBad { outstanding: members.len(), refused: false };
        true
    }

    /// One listing of `list_unrebuildable` completed (`ok`: durable in the member's log).
    pub(super) fn list_bad_done(&mut self, id: HeadId, member: DiskIndex, ok: bool) {
        let st = self.state(id);
        let Phase::ListingBad { outstanding, refused } = &mut st.phase else {
            unreachable!("a listing completes on a head that lists")
        };
        *outstanding -= 1;
        *refused |= !ok && st.rebuilt.contains(&member);
        if *outstanding > 0 {
            return;
        }
        let refused = *refused;
        st.phase = Phase::Idle;
        st.writes_done = true;
        if refused {
            // Counted as rebuilt it would serve its blank or stale block as data.
            st.rebuilt.clear();
            st.error = Some(ArrayError::CannotListBadBlock);
        } else {
            let listed = st.rebuilt.len() as u64;
            self.stats.sectors_listed_bad += listed * self.unit_sectors;
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
