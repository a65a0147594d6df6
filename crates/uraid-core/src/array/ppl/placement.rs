//! Which members' rings a head's partial parity goes to when nothing else is being logged (a
//! client at depth 1). md puts it on the parity member's, which is then busy with the head's
//! own write in place: on a disk that seeks, each such log write is a seek to the ring and back
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
//! RAID6, whose entries must survive any two losses, needs three holders: on rotational
//! members, P's and Q's entries go together to three data members the write leaves alone (the
//! union may hold them: any two losses leave a copy), when there are three and the ring is
//! roomy enough for both in one generation; else to the P and Q members as before. A replay
//! writes an entry's parity to the parity member whichever ring held it (`crate::ppl`).

use super::{Array, Entries};
use crate::ppl::{LOG_HEADER_SECTORS, LogEntry, LogParity, full_mask};
use crate::stripe::HeadId;
use crate::units::DiskIndex;

impl Array {
    /// Moves a head's entries (`out`, as `log_entries` made them: on the parity members) to
    /// idle members when the log is idle (see the module docs).
    pub(super) fn place_when_idle(&self, id: HeadId, out: &mut Entries) {
        let l = self.ppl.as_ref().expect("a log");
        if !l.waiting.is_empty() || l.in_flight.is_some() {
            return;
        }
        match &out[..] {
            [(_, e, Some(_))] if e.parity == LogParity::P => self.place_p(id, out),
            [(_, p, Some(_)), (_, q, Some(_))]
                if l.cfg.rotational && p.parity != q.parity && self.ring_holds_both(p, q) =>
            {
                self.place_p_and_q(id, out);
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
    /// write leaves alone, so that any two losses leave one copy of both.
    fn place_p_and_q(&self, id: HeadId, out: &mut Entries) {
        let map = self.geometry.stripe_map(self.cache.head(id).key.stripe);
        let lost = self.lost(id);
        let writes = &self.heads[&id].writes;
        let holders: Vec<DiskIndex> = map
            .data_disk
            .iter()
            .copied()
            .filter(|d| !lost[d.get()] && !writes.contains(d))
            .take(3)
            .collect();
        if holders.len() < 3 {
            return;
        }
        let entries = std::mem::take(out);
        for holder in holders {
            out.extend(entries.iter().map(|(_, e, b)| (holder, e.clone(), b.clone())));
        }
    }

    /// RAID4/5: the P entry on one member whose loss cannot need it, or on two that it might.
    fn place_p(&self, id: HeadId, out: &mut Entries) {
        let l = self.ppl.as_ref().expect("a log");
        let entry = &out[0].1;
        let map = self.geometry.stripe_map(self.cache.head(id).key.stripe);
        let lost = self.lost(id);
        let writes = &self.heads[&id].writes;
        let full = full_mask(self.unit_sectors);
        let in_union = |d: usize| entry.modified.iter().find(|(m, _)| *m == d).map(|(_, m)| m);
        let holder =
            map.data_disk.iter().copied().find(|d| {
                !lost[d.get()] && !writes.contains(d) && in_union(d.get()) == Some(&full)
            });
        if let Some(holder) = holder {
            out[0].0 = holder;
            return;
        }
        if !l.cfg.rotational {
            return;
        }
        let untouched: Vec<DiskIndex> = map
            .data_disk
            .iter()
            .copied()
            .filter(|d| !lost[d.get()] && in_union(d.get()).is_none())
            .take(2)
            .collect();
        if let [first, second] = untouched[..] {
            let (_, entry, block) = out.pop().expect("one entry");
            out.push((first, entry.clone(), block.clone()));
            out.push((second, entry, block));
        }
    }
}
