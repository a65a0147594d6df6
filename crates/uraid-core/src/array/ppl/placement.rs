//! Which members' rings a head's partial parity goes to. md puts it on the parity member's,
//! which is then busy with the head's own write in place. When nothing else is being logged
//! (a client at depth 1): on a disk that seeks, each such log write is a seek to the ring and back
//! (4 KiB writes at depth 1 on modelled HDDs: 0.32 of the speed without the log sequential,
//! 0.81 random). What the entry must survive is the loss of a member whose blocks the replay
//! needs it for: a data member the head's union leaves alone (its block is rebuilt from
//! parity, which the tear left inconsistent). So other holders are as safe:
//! * (RAID4/5) a data member whose whole block is in the union but that the batch does not
//!   write: its loss loses only sectors that were being written (one copy, no extra I/O);
//! * (RAID4/5) on rotational members, two data members the union leaves alone: either's loss
//!   leaves the other's copy (two log writes, which flash pays for in bytes and IOPS, for no
//!   seek saved).
//!
//! At depth, where the log is never idle, the entries go to data members the union leaves
//! alone as above (two for RAID4/5, three for RAID6 on rotational members) when that many have
//! no I/O queued or in flight: a sequential stream at depth keeps its parity member and one data
//! member busy (reading the next batch, writing the last one behind), so a log write there
//! waits behind both, and on a disk that seeks it is a seek to the ring and back in the middle
//! of the stream (`uraid bench io --only ppl`, 4 KiB sequential qd16 on the modelled HDD with 2
//! MiB rings: RAID5 0.643 -> 0.775, RAID6 0.559 -> 0.623; with 128 KiB rings 0.429 -> 0.406 and
//! 0.268 -> 0.278, random rows within 0.014). On flash the second copy costs an idle member one
//! write (RAID5 since the second session of 2026-11-28: on the SSD with 2 MiB rings 0.902 ->
//! 1.000, NVMe 0.987 -> 0.993; with 128 KiB rings, where each copy takes half a ring, SSD the
//! same, NVMe 0.805 -> 0.759; random rows within 0.003). RAID6's three copies of two entries
//! cost flash more than the wait (SSD 2 MiB 0.857 -> 0.739). Otherwise a RAID4/5 entry goes
//! to the least busy of the parity member and the data members whose whole block is in the
//! union (written by this batch or not: the first rule's argument holds for both), counting
//! each member's I/Os queued or in flight: the parity member also reads and writes the head's
//! parity, and the generation's log write waits behind whatever its member has queued. It
//! moves only to a member with at least two I/Os fewer: measured with one and three fewer too
//! (`uraid bench io --only ppl`, RAID5 SSD random qd16 on 2 MiB / 128 KiB rings: 0.882 / 0.876
//! with one, 0.888 / 0.879 with two, 0.892 / 0.862 with three; the rest within 0.02 either
//! way).
//!
//! RAID6, whose entries must survive any two losses, needs three holders: on rotational
//! members, P's and Q's entries go together to three data members the write leaves alone (the
//! union may hold them: any two losses leave a copy), when there are three and the ring is
//! roomy enough for both in one generation; else to the P and Q members as before, except
//! that the entry on the busier of the two (P's on a tie) goes to a data member whose whole
//! block is in the union when that member has at least one I/O fewer queued or in flight (a
//! healthy stripe only). Any two losses still leave what the replay needs: with that member
//! lost its block was being written, and the replay takes it from the parity whose entry was
//! lost with it, which it leaves as the members hold it and the other parity's rewrite then
//! agrees with (`crate::ppl::replay_blocks`, log version 5); an untouched member lost beside it
//! comes from the other entry; with both holders lost every untouched member is there. Before
//! version 5 the replay took that block from P whatever was lost, so only P's entry could move:
//! a torn Q left unrewritten beside it rebuilt an untouched member wrong (`uraid-sim` seed
//! 40000124, `tests/log_placement_raid6.rs`). It spreads the log over three members' queues
//! instead of two (`uraid bench io --only ppl`, RAID6 x6 4 KiB random qd16 with 2 MiB rings,
//! P's entry only: SSD 0.760 -> 0.810, NVMe 0.814 -> 0.863, HDD 0.847 -> 0.883; 4 KiB
//! sequential qd16 on the SSD 0.857 -> 0.916; with no margin, within 0.02 of these; either
//! entry, the fourth session of 2026-11-28: random qd16 SSD 0.810 -> 0.827, NVMe 0.863 ->
//! 0.888, HDD 0.883 -> 0.902; sequential qd16 with 128 KiB rings, SSD 0.841 -> 0.893, NVMe
//! 0.646 -> 0.672). Moving the other entry too, to a second such member, did better
//! sequentially (128 KiB rings: SSD 0.925, NVMe 0.711) but worse at random on the HDD (0.893),
//! so it is not done. A replay writes an entry's parity to the parity member whichever ring
//! held it (`crate::ppl`).

use super::{Array, Entries};
use crate::ppl::{LOG_HEADER_SECTORS, LogEntry, LogParity, is_full};
use crate::stripe::HeadId;
use crate::units::DiskIndex;

impl Array {
    /// Moves a head's entries (`out`, as `log_entries` made them: on the parity members) to
    /// idle members when the log is idle, else to a less busy one (see the module docs).
    pub(super) fn place_entries(&self, id: HeadId, out: &mut Entries) {
        let l = self.ppl.as_ref().expect("a log");
        let busy = !l.waiting.is_empty() || !l.in_flight.is_empty();
        match &out[..] {
            [(_, e, Some(_))] if e.parity == LogParity::P => self.place_p(id, out, busy),
            [(_, p, Some(_)), (_, q, Some(_))] if p.parity != q.parity => {
                let untouched = l.cfg.rotational
                    && self.ring_holds_both(p, q)
                    && self.place_p_and_q(id, out, busy);
                if !untouched {
                    self.place_on_written(id, out);
                }
            }
            _ => {}
        }
    }

    /// Whether a generation with both entries (and the header after it that an advance may
    /// need) fits in either free stretch of a ring that holds only a reset's header: else a
    /// small ring could reset forever with the head never fitting (simulator seed 850, a 24
    /// KiB ring).
    fn ring_holds_both(&self, p: &LogEntry, q: &LogEntry) -> bool {
        let l = self.ppl.as_ref().expect("a log");
        let unit = self.unit_sectors;
        let need = 2 * LOG_HEADER_SECTORS + p.stored_sectors(unit) + q.stored_sectors(unit);
        l.cfg.ring_sectors >= 2 * need + LOG_HEADER_SECTORS
    }

    /// RAID6 on rotational members: P's and Q's entries together on three data members the
    /// write leaves alone, so that any two losses leave one copy of both; if `idle_only`,
    /// members with no I/O queued or in flight.
    fn place_p_and_q(&self, id: HeadId, out: &mut Entries, idle_only: bool) -> bool {
        let map = self.geometry.stripe_map(self.cache.head(id).key.stripe);
        let lost = self.lost(id);
        let writes = &self.heads[&id].writes;
        let holders: Vec<DiskIndex> = map
            .data_disk
            .iter()
            .copied()
            .filter(|d| !lost[d.get()] && !writes.contains(d))
            .filter(|d| !idle_only || self.inflight.load(*d) == 0)
            .take(3)
            .collect();
        if holders.len() < 3 {
            return false;
        }
        let entries = std::mem::take(out);
        for holder in holders {
            out.extend(entries.iter().map(|(_, e, b)| (holder, e.clone(), b.clone())));
        }
        true
    }

    /// RAID6: the entry on the busier of the P and Q members goes to the least busy data
    /// member whose whole block is in the union, when that member has fewer I/Os queued or in
    /// flight (see the module docs for why either may).
    fn place_on_written(&self, id: HeadId, out: &mut Entries) {
        /// I/Os fewer than the parity member's that the holder must have.
        const MARGIN: usize = 1;
        let lost = self.lost(id);
        if lost.iter().any(|l| *l) {
            return;
        }
        let load = |d: DiskIndex| self.inflight.load(d);
        // The busier parity member's (P's on a tie).
        let Some(at) = (0..out.len()).rev().max_by_key(|&i| load(out[i].0)) else { return };
        let map = self.geometry.stripe_map(self.cache.head(id).key.stripe);
        let (entry, unit) = (&out[at].1, self.unit_sectors);
        let holder = map
            .data_disk
            .iter()
            .copied()
            .filter(|d| whole_in_union(entry, *d, unit))
            .min_by_key(|d| load(*d));
        if let Some(holder) = holder
            && load(holder) + MARGIN <= load(out[at].0)
        {
            out[at].0 = holder;
        }
    }

    /// RAID4/5 at depth: the P entry on the least busy member that may hold it alone.
    fn place_p_least_busy(&self, data: &[DiskIndex], lost: &[bool], out: &mut Entries) {
        /// I/Os fewer than the parity member's that a holder must have.
        const MARGIN: usize = 2;
        let (entry, unit) = (&out[0].1, self.unit_sectors);
        let load = |d: DiskIndex| self.inflight.load(d);
        let mut best = (out[0].0, load(out[0].0));
        for &d in data {
            if !lost[d.get()] && whole_in_union(entry, d, unit) && load(d) + MARGIN <= best.1 {
                best = (d, load(d));
            }
        }
        out[0].0 = best.0;
    }

    /// RAID4/5: the P entry on one member whose loss cannot need it, or on two that it might;
    /// at depth (`busy`), on two idle ones or the least busy one (see the module docs).
    fn place_p(&self, id: HeadId, out: &mut Entries, busy: bool) {
        let rotational = self.ppl.as_ref().expect("a log").cfg.rotational;
        let map = self.geometry.stripe_map(self.cache.head(id).key.stripe);
        let lost = self.lost(id);
        if busy {
            if !place_p_on_untouched(&map.data_disk, &lost, out, |d| self.inflight.load(d) == 0) {
                self.place_p_least_busy(&map.data_disk, &lost, out);
            }
            return;
        }
        let (entry, unit) = (&out[0].1, self.unit_sectors);
        let writes = &self.heads[&id].writes;
        let holder = map
            .data_disk
            .iter()
            .copied()
            .find(|d| !lost[d.get()] && !writes.contains(d) && whole_in_union(entry, *d, unit));
        if let Some(holder) = holder {
            out[0].0 = holder;
            return;
        }
        if rotational {
            place_p_on_untouched(&map.data_disk, &lost, out, |_| true);
        }
    }
}

/// RAID4/5 on rotational members: the P entry on two data members the union leaves alone
/// (and that `usable` takes), if there are two.
fn place_p_on_untouched(
    data: &[DiskIndex],
    lost: &[bool],
    out: &mut Entries,
    usable: impl Fn(DiskIndex) -> bool,
) -> bool {
    let entry = &out[0].1;
    let mut untouched = data
        .iter()
        .copied()
        .filter(|d| !lost[d.get()] && entry.mask(d.get()).is_none() && usable(*d));
    let (Some(first), Some(second)) = (untouched.next(), untouched.next()) else { return false };
    let (_, entry, block) = out.pop().expect("one entry");
    out.push((first, entry.clone(), block.clone()));
    out.push((second, entry, block));
    true
}

/// Whether `entry`'s union holds member `d`'s block whole.
fn whole_in_union(entry: &LogEntry, d: DiskIndex, unit_sectors: u64) -> bool {
    entry.mask(d.get()).is_some_and(|m| is_full(m, unit_sectors))
}
