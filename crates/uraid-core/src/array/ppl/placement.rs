//! Which members' rings a head's partial parity goes to when nothing else is being logged (a
//! client at depth 1). md puts it on the parity member's, which is then busy with the head's
//! own write in place: on a disk that seeks, each such log write is a seek to the ring and back
//! (4 KiB writes at depth 1 on modelled HDDs: 0.32 of the speed without the log sequential,
//! 0.81 random). What the entry must survive is the loss of a member whose blocks the replay
//! needs it for: a data member the head's union leaves alone (its block is rebuilt from
//! parity, which the tear left inconsistent). So other holders are as safe:
//! * a data member whose whole block is in the union but that the batch does not write: its
//!   loss loses only sectors that were being written (one copy, no extra I/O);
//! * on rotational members, two data members the union leaves alone: either's loss leaves the
//!   other's copy (two log writes, which flash pays for in bytes and IOPS, for no seek saved).
//!
//! RAID6 keeps P's and Q's entries on their own members (surviving any two losses elsewhere
//! would take three copies of both). A replay writes an entry's parity to the parity member
//! whichever ring held it (`crate::ppl`).

use super::{Array, Entries};
use crate::ppl::{LogParity, full_mask};
use crate::stripe::HeadId;
use crate::units::DiskIndex;

impl Array {
    /// Moves a RAID4/5 head's entry (`out`, as `log_entries` made it: one P entry on the parity
    /// member) to idle members when the log is idle (see the module docs).
    pub(super) fn place_when_idle(&self, id: HeadId, out: &mut Entries) {
        let l = self.ppl.as_ref().expect("a log");
        let idle = l.waiting.is_empty() && l.in_flight.is_none();
        let [(_, entry, Some(_))] = &out[..] else { return };
        if !idle || entry.parity != LogParity::P {
            return;
        }
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
