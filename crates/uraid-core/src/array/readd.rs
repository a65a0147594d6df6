//! A member coming back by re-add (md's `--re-add`): a device that left the array while it had
//! a write-intent bitmap missed only writes whose bits are still set (the engine clears no bit
//! while a member is failed or being recovered), so it is in sync everywhere else and needs
//! rebuilding only there. md marks it recovering from 0 and skips clean bitmap chunks as its
//! recovery passes them; here the chunks dirty when it comes back are its stale ranges: reads
//! and writes treat it as in sync outside them at once, and a recovery over those ranges alone
//! brings it in sync.
//!
//! Why that is enough: a write planned before the re-add, with the member failed, has its bit
//! set (wanted at planning, before any I/O), so its region is stale. A write planned after it
//! reaches the member where it is in sync, and where it is stale waits for nothing: the
//! region's recovery, serialised with it by the stripe head, rebuilds the member's block from
//! the others afterwards, or it finds the head already rebuilt and writes the member too.

use super::Array;
use crate::units::{DiskIndex, Sector};

impl Array {
    /// Brings `member` (failed) back by re-add: in sync but where the bitmap has bits set,
    /// which a `SyncKind::Recovery` over the returned member-sector ranges rebuilds (then
    /// `set_recovery_offset` to the end, as for any recovery). None without a bitmap: the
    /// member must be recovered whole (`start_recovery`).
    pub fn start_readd(&mut self, member: DiskIndex) -> Option<Vec<(u64, u64)>> {
        let member_sectors = self.size_sectors / self.geometry.data_disks() as u64;
        let ranges = self.bitmap_ranges_below(member_sectors)?;
        Some(self.recover_stale(member, ranges))
    }

    /// md's replace, when the member being replaced fails: the new device takes its place,
    /// in sync below `front` (what the copy has done: copied, or written to both) but where
    /// bits are set (writes made since the member failed, with the device not yet in its
    /// place, reached neither), and rebuilt above it. None without a bitmap: the writes
    /// since the failure are not known, so it must be recovered whole.
    pub fn take_over_replacement(
        &mut self,
        member: DiskIndex,
        front: Sector,
    ) -> Option<Vec<(u64, u64)>> {
        self.replacing[member.get()] = false;
        // Log writes queued before the replacement began were the member's alone: written
        // nowhere now. The others were for both devices, and the new one, which holds the
        // slot now, gets them (a generation missing there would look torn to a replay).
        self.drop_queued_log_writes(member, |io| io.before_replacement);
        let member_sectors = self.size_sectors / self.geometry.data_disks() as u64;
        let front = front.0.min(member_sectors);
        let mut ranges = self.bitmap_ranges_below(front)?;
        match ranges.last_mut() {
            Some(last) if last.0 + last.1 == front => last.1 = member_sectors - last.0,
            _ if front < member_sectors => ranges.push((front, member_sectors - front)),
            _ => {}
        }
        Some(self.recover_stale(member, ranges))
    }

    /// Starts `member`'s recovery, in sync at once outside `ranges`; returns them.
    fn recover_stale(&mut self, member: DiskIndex, ranges: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
        self.start_recovery(member, Sector(0));
        self.stale[member.get()] = Some(ranges.clone());
        ranges
    }

    /// The member-sector ranges below `limit` whose bitmap bits are set or wanted (None
    /// without a bitmap).
    fn bitmap_ranges_below(&self, limit: u64) -> Option<Vec<(u64, u64)>> {
        let wi = self.write_intent.as_ref()?;
        let chunk_sectors = wi.chunk_sectors();
        let mut ranges: Vec<(u64, u64)> = Vec::new();
        for chunk in wi.stale_chunks() {
            let start = chunk * chunk_sectors;
            let end = (start + chunk_sectors).min(limit);
            match ranges.last_mut() {
                Some(last) if last.0 + last.1 == start => last.1 = end - last.0,
                _ if start < end => ranges.push((start, end - start)),
                _ => {}
            }
        }
        Some(ranges)
    }

    /// Whether `member`, back by re-add, is in sync over member sectors `[start, end)`
    /// whatever its recovery offset: none of its stale ranges meets them.
    pub(super) fn clean_since_readd(&self, member: usize, start: u64, end: u64) -> bool {
        self.stale[member]
            .as_ref()
            .is_some_and(|ranges| ranges.iter().all(|&(s, n)| s + n <= start || end <= s))
    }
}
