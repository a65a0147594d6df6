//! md's replace (`mdadm --replace`): a member that is still in sync is copied to the device
//! taking its place while it stays in the array, so the array keeps its redundancy the whole
//! time (uraid once failed the member first and rebuilt a spare, a window with none).
//!
//! The engine knows only which members are being replaced. The member layer pairs the member
//! with its replacement (`uraid_io::Replacing`): reads go to the member, writes to both, and
//! `MemberOp::CopyWrite` to the replacement alone. `SyncKind::Replace` walks the array: per
//! stripe head it reads the member's block (or, where that read fails, rebuilds it from the
//! rest, as recovery would) and copy-writes it. Heads serialise it with user writes, so no
//! write can slip between a copy's read and its write; writes anywhere else reach both
//! devices. When the walk has passed the end the lifecycle layer swaps the devices.

use super::Array;
use super::handle::Phase;
use super::io::{IoArea, MemberOp};
use crate::stripe::HeadId;
use crate::units::DiskIndex;

impl Array {
    /// `member` is being replaced: `SyncKind::Replace` copies it from now on.
    pub fn start_replacement(&mut self, member: DiskIndex) {
        self.replacing[member.get()] = true;
        // The replacement gets every write from now on, bitmap pages and log generations
        // included, but none of those written before: as for a spare, the whole bitmap goes
        // out again and the log starts over on every ring.
        if let Some(wi) = self.write_intent.as_mut() {
            wi.rewrite_for_new_member();
        }
        self.log_member_joined();
        // Log writes queued before now (generations and reset headers built before the join;
        // a runtime takes the queue between turns, and holds writes while a failure is
        // unrecorded) are the member's alone. On the replacement, an older generation's
        // header would make its ring look like a witness of the run, and a replay after the
        // member's loss would then take the older live generations that only the member
        // held for torn, and skip them (the simulator's seed 48549930 was this, by another
        // road). Data and bitmap writes still go to both: the copy and the bitmap's rewrite
        // cover them either way.
        for io in self.queue.iter_mut().filter(|io| io.member == member && io.area == IoArea::Log) {
            io.before_replacement = true;
        }
    }

    /// The replacement is over (done, or given up): copies stop.
    pub fn end_replacement(&mut self, member: DiskIndex) {
        self.replacing[member.get()] = false;
    }

    /// Members being replaced.
    #[must_use]
    pub fn replacing(&self) -> Vec<DiskIndex> {
        let r = self.replacing.iter().enumerate();
        r.filter(|(_, r)| **r).map(|(m, _)| DiskIndex(m as u16)).collect()
    }

    /// Whether a member being replaced has failed (its copy must stop where it got to).
    pub(super) fn replacing_failed(&self) -> bool {
        (0..self.replacing.len()).any(|m| self.replacing[m] && self.failed[m])
    }

    /// Members being replaced that can be copied here: not failed (a failed one's
    /// replacement is the lifecycle layer's to turn into a recovery).
    pub(super) fn replacing_here(&self, id: HeadId) -> Vec<DiskIndex> {
        let end = self.head_member_end(id);
        (0..self.replacing.len())
            .filter(|&m| self.replacing[m] && self.in_sync(m, end))
            .map(|m| DiskIndex(m as u16))
            .collect()
    }

    /// The reads a Replace batch needs before its copies: the blocks of the members being
    /// replaced, or, where one of them is lost to a read error, every block it can be
    /// rebuilt from. Empty: go on to `copy_to_replacements`.
    pub(super) fn replace_reads(&self, id: HeadId) -> Vec<DiskIndex> {
        let lost = self.lost(id);
        let targets = self.replacing_here(id);
        let rebuild = !self.replaced_blocks_unread(id, &targets, &lost).is_empty();
        let head = self.cache.head(id);
        (0..lost.len())
            .filter(|&m| !lost[m] && !head.devs[m].uptodate)
            .filter(|&m| rebuild || targets.contains(&DiskIndex(m as u16)))
            .map(|m| DiskIndex(m as u16))
            .collect()
    }

    /// The members of `targets` whose block failed to read here and is not rebuilt yet.
    pub(super) fn replaced_blocks_unread(
        &self,
        id: HeadId,
        targets: &[DiskIndex],
        lost: &[bool],
    ) -> Vec<DiskIndex> {
        let head = self.cache.head(id);
        targets.iter().copied().filter(|t| lost[t.get()] && !head.devs[t.get()].uptodate).collect()
    }

    /// The batch has what it copies: rebuild a block whose read failed, then copy-write.
    pub(super) fn copy_to_replacements(&mut self, id: HeadId) {
        if self.replacing_failed() {
            // Failed while this head read: not copied.
            self.state(id).error = Some(super::ArrayError::ReplacedMemberFailed);
            self.state(id).writes_done = true;
            return;
        }
        let targets = self.replacing_here(id);
        if !self.replaced_blocks_unread(id, &targets, &self.lost(id)).is_empty() {
            self.rebuild_lost_blocks(id);
        }
        // The member's own bad block stays as it is: the member is leaving.
        self.state(id).suspect.clear();
        let copies: Vec<DiskIndex> =
            targets.into_iter().filter(|t| self.cache.head(id).devs[t.get()].uptodate).collect();
        if copies.is_empty() {
            self.state(id).writes_done = true;
            return;
        }
        self.stats.replace_copies += copies.len() as u64;
        self.issue(id, &copies, MemberOp::CopyWrite);
        self.state(id).phase = Phase::Writing { outstanding: copies.len(), intent: false };
    }
}
