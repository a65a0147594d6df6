//! What a replay counts a lost member's data as. An entry's parity is rewritten from its
//! partial parity and its union's sectors as the members hold them (`replayed_parity`); a
//! member lost (or a block unreadable) at the replay leaves some of those sectors unknown.
//!
//! * Outside the union a lost sector was not being written: the partial parity holds it
//!   (per sector row, P's and Q's partial parity are the parity of the data outside the
//!   union). A member failed when the entry was made is outside it too: its block was not
//!   there to take out of the partial parity, which therefore holds it (`uraid_core::array`'s
//!   `log_entries`).
//! * Inside the union it was written since the last flush (acknowledged, perhaps complete,
//!   perhaps torn): its value comes from the parity the members hold, which is right when
//!   that write completed. A torn write's own sectors may read anything after a crash (md's
//!   PPL promises no more); only those can come out wrong here, since the rows a torn write
//!   left inconsistent are rows of its union. RAID6 with one of the head's two entries missing
//!   (on the ring of a written data member lost with it, log version 5 on), its parity member
//!   there: from that parity, which no entry rewrites. The one an entry rewrites comes out
//!   consistent with it; the other way round a torn write would leave the unrewritten parity
//!   disagreeing with the data, and a later rebuild of two members would be wrong.
//!
//! Until the third session of 2026-11-27 a lost sector in the union counted as zeros: a
//! write acknowledged and completed, but not yet flushed, on a member lost after a crash
//! read back as zeros, where the parity held it.

use super::{FoundEntry, LogParity, mask_has};
use crate::geometry::StripeMap;
use crate::layout::Level;

const SECTOR: usize = 512;

/// A stripe head's blocks as a replay of its entries (`entries`: its newest generation's, P's
/// and Q's) counts them: `blocks` (per member as held now: None where lost or unreadable) with
/// every lost data block filled in, sector by sector (see the module docs). A sector that
/// cannot be solved (more lost than the parity at hand) stays zeros. Lost parity members stay
/// None.
#[must_use]
pub fn replay_blocks(
    level: Level,
    map: &StripeMap,
    entries: &[&FoundEntry],
    blocks: &[Option<&[u8]>],
) -> Vec<Option<Vec<u8>>> {
    let mut out: Vec<Option<Vec<u8>>> = blocks.iter().map(|b| b.map(<[u8]>::to_vec)).collect();
    let lost_data: Vec<usize> =
        map.data_disk.iter().map(|d| d.get()).filter(|&d| blocks[d].is_none()).collect();
    let Some(unit) = blocks.iter().flatten().map(|b| b.len()).next() else { return out };
    if lost_data.is_empty() || entries.is_empty() {
        return out;
    }
    for &d in &lost_data {
        out[d] = Some(vec![0; unit]);
    }
    let partial = |parity: LogParity| {
        entries.iter().find(|e| e.entry.parity == parity).map(|e| match e.block.as_deref() {
            Some(b) if !b.is_empty() => b.to_vec(),
            // Block-less: every data sector is in the union, so none lies outside it.
            _ => vec![0; unit],
        })
    };
    let (pp_p, pp_q) = (partial(LogParity::P), partial(LogParity::Q));
    let in_union = |d: usize, r: usize| {
        entries.iter().any(|e| e.entry.mask(d).is_some_and(|m| mask_has(m, r)))
    };
    let members = blocks.len();
    let unrewritten_peer = rewritten_beside_unrewritten(map, entries, blocks);
    for r in 0..unit / SECTOR {
        let at = r * SECTOR..(r + 1) * SECTOR;
        let outside: Vec<usize> = lost_data.iter().copied().filter(|&d| !in_union(d, r)).collect();
        let inside: Vec<usize> = lost_data.iter().copied().filter(|&d| in_union(d, r)).collect();
        // Outside the union: the row of the data outside it, with the partial parity as its
        // parity.
        let mut outside_known = true;
        if !outside.is_empty() {
            let mut row = vec![vec![0u8; SECTOR]; members];
            let mut lost = vec![false; members];
            for d in map.data_disk.iter().map(|d| d.get()).filter(|&d| !in_union(d, r)) {
                match blocks[d] {
                    Some(b) => row[d].copy_from_slice(&b[at.clone()]),
                    None => lost[d] = true,
                }
            }
            for (disk, pp) in [(map.p_disk, &pp_p), (map.q_disk, &pp_q)] {
                let Some(disk) = disk else { continue };
                match pp {
                    Some(pp) => row[disk.get()].copy_from_slice(&pp[at.clone()]),
                    None => lost[disk.get()] = true,
                }
            }
            outside_known = solve(level, map, &mut row, &lost);
            if outside_known {
                for &d in &outside {
                    out[d].as_mut().expect("filled")[at.clone()].copy_from_slice(&row[d]);
                }
            }
        }
        if !inside.is_empty() {
            let known = Inside { members: &inside, outside_known, untrusted: unrewritten_peer };
            fill_inside(level, map, &mut out, blocks, at, &known);
        }
    }
    out
}

/// A sector row's lost data blocks in the union (`members`), and what the row may use.
struct Inside<'a> {
    members: &'a [usize],
    /// Whether the row's lost blocks outside the union are filled in.
    outside_known: bool,
    /// A parity member not to solve from, if the row can spare it
    /// (`rewritten_beside_unrewritten`).
    untrusted: Option<usize>,
}

/// Fills in sector row `at` of the lost blocks in the union: from the whole row as the
/// members hold it, parity trusted (but the `untrusted` member's, where the row can spare
/// it).
fn fill_inside(
    level: Level,
    map: &StripeMap,
    out: &mut [Option<Vec<u8>>],
    blocks: &[Option<&[u8]>],
    at: std::ops::Range<usize>,
    inside: &Inside<'_>,
) {
    let members = blocks.len();
    let mut row = vec![vec![0u8; SECTOR]; members];
    let mut lost = vec![false; members];
    for (m, cell) in row.iter_mut().enumerate() {
        match (&out[m], blocks[m]) {
            (_, None) if inside.members.contains(&m) || !inside.outside_known => lost[m] = true,
            (Some(b), _) => cell.copy_from_slice(&b[at.clone()]),
            (None, _) => lost[m] = true,
        }
    }
    if let Some(untrusted) = inside.untrusted
        && lost.iter().filter(|l| **l).count() < usize::from(level.max_degraded())
    {
        lost[untrusted] = true;
    }
    if solve(level, map, &mut row, &lost) {
        for &d in inside.members {
            out[d].as_mut().expect("filled")[at.clone()].copy_from_slice(&row[d]);
        }
    }
}

/// RAID6 with one of a head's two entries missing (lost with the data member whose ring held
/// it: `crate::array::ppl::placement`) and its parity member there: the member of the parity
/// the present entry rewrites. A lost block in the union must come from the other parity,
/// which stays as the members hold it: taken from the rewritten one, a torn write could leave
/// the two disagreeing, and a later rebuild of two members would be wrong (see the module
/// docs).
fn rewritten_beside_unrewritten(
    map: &StripeMap,
    entries: &[&FoundEntry],
    blocks: &[Option<&[u8]>],
) -> Option<usize> {
    let (p, q) = (map.p_disk?.get(), map.q_disk?.get());
    let has = |parity| entries.iter().any(|e| e.entry.parity == parity);
    match (has(LogParity::P), has(LogParity::Q)) {
        (true, false) if blocks[q].is_some() => Some(p),
        (false, true) if blocks[p].is_some() => Some(q),
        _ => None,
    }
}

/// The entries to replay (`entries_to_replay`) per stripe head (by its first member sector):
/// a head's are replayed together (`replay_blocks`).
#[must_use]
pub fn entries_by_head(found: &[FoundEntry]) -> std::collections::BTreeMap<u64, Vec<&FoundEntry>> {
    let mut heads = std::collections::BTreeMap::<u64, Vec<&FoundEntry>>::new();
    for f in found {
        heads.entry(f.entry.member_sector).or_default().push(f);
    }
    heads
}

/// Reconstructs one sector row in place; false when more is lost than the level survives.
fn solve(level: Level, map: &StripeMap, row: &mut [Vec<u8>], lost: &[bool]) -> bool {
    let mut refs: Vec<&mut [u8]> = row.iter_mut().map(Vec::as_mut_slice).collect();
    crate::reconstruct::reconstruct(level, map, &mut refs, lost).is_ok()
}

/// The lost data blocks of a stripe head as the blocks its members hold give them (`blocks`:
/// per member, None where lost or unreadable; parity as a replay left it), when no more are
/// lost than the level survives. A replay writes back those of members that are there but could
/// not read their block (a latent bad sector): the sectors a cut tore beside the bad one would
/// otherwise stay on the disk disagreeing with parity, out of every read's way while the bad
/// sector stays bad, but used by a later rebuild of another member once a write that the next
/// cut tears makes the block readable again.
#[must_use]
pub fn rebuilt_data(
    level: Level,
    map: &StripeMap,
    blocks: &[Option<&[u8]>],
) -> Vec<(crate::units::DiskIndex, Vec<u8>)> {
    let lost: Vec<bool> = blocks.iter().map(Option::is_none).collect();
    let Some(unit) = blocks.iter().flatten().map(|b| b.len()).next() else { return Vec::new() };
    if !lost.contains(&true) {
        return Vec::new();
    }
    let mut bufs: Vec<Vec<u8>> =
        blocks.iter().map(|b| b.map_or_else(|| vec![0; unit], <[u8]>::to_vec)).collect();
    if !solve(level, map, &mut bufs, &lost) {
        return Vec::new();
    }
    map.data_disk
        .iter()
        .filter(|d| lost[d.get()])
        .map(|&d| (d, std::mem::take(&mut bufs[d.get()])))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ppl::LogEntry;
    use crate::{DiskIndex, Geometry, StripeNumber};

    const UNIT: usize = 4096;

    fn block(seed: u8) -> Vec<u8> {
        (0..UNIT).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed.wrapping_mul(7))).collect()
    }

    /// Members' blocks with parity computed from the data.
    fn with_parity(level: Level, map: &StripeMap, data: &[(usize, Vec<u8>)]) -> Vec<Vec<u8>> {
        let mut blocks = vec![vec![0u8; UNIT]; map.roles.len()];
        for (d, b) in data {
            blocks[*d].clone_from(b);
        }
        let lost: Vec<bool> = (0..blocks.len())
            .map(|m| {
                Some(DiskIndex(m as u16)) == map.p_disk || Some(DiskIndex(m as u16)) == map.q_disk
            })
            .collect();
        let mut refs: Vec<&mut [u8]> = blocks.iter_mut().map(Vec::as_mut_slice).collect();
        crate::reconstruct::reconstruct(level, map, &mut refs, &lost).unwrap();
        blocks
    }

    /// The head's entries: union `sectors` of member `d`, partial parity from `data` (the
    /// data after the write) with the union zeroed.
    fn entries(
        level: Level,
        map: &StripeMap,
        data: &[(usize, Vec<u8>)],
        d: usize,
        sectors: std::ops::Range<usize>,
    ) -> Vec<FoundEntry> {
        let outside: Vec<(usize, Vec<u8>)> = data
            .iter()
            .map(|(m, b)| {
                let mut b = b.clone();
                if *m == d {
                    b[sectors.start * SECTOR..sectors.end * SECTOR].fill(0);
                }
                (*m, b)
            })
            .collect();
        let pp = with_parity(level, map, &outside);
        let mut e = LogEntry {
            member_sector: 0,
            parity: LogParity::P,
            modified: Vec::new(),
            block_crc: None,
            span: 1,
        };
        e.add(d, sectors.start as u64, (sectors.end - sectors.start) as u64, 8);
        [(map.p_disk, LogParity::P), (map.q_disk, LogParity::Q)]
            .into_iter()
            .filter_map(|(disk, parity)| disk.map(|disk| (disk, parity)))
            .map(|(disk, parity)| FoundEntry {
                epoch: 1,
                generation: 1,
                unit_sectors: 8,
                member: disk,
                entry: LogEntry { parity, ..e.clone() },
                block: Some(pp[disk.get()].clone()),
            })
            .collect()
    }

    fn replay(
        level: Level,
        map: &StripeMap,
        found: &[FoundEntry],
        held: &[Vec<u8>],
        lost: &[usize],
    ) -> Vec<Option<Vec<u8>>> {
        let blocks: Vec<Option<&[u8]>> =
            held.iter().enumerate().map(|(m, b)| (!lost.contains(&m)).then_some(&b[..])).collect();
        let refs: Vec<&FoundEntry> = found.iter().collect();
        replay_blocks(level, map, &refs, &blocks)
    }

    /// RAID5: a write to data slot 0 that completed (not yet flushed: its entry is live); its
    /// member lost, the block comes from the parity, not zeros.
    #[test]
    fn a_lost_block_in_the_union_of_a_completed_write_comes_from_the_parity() {
        let g = Geometry::new(Level::Raid5, Level::Raid5.default_layout(), 4, 65536).unwrap();
        let map = g.stripe_map(StripeNumber(0));
        let d: Vec<usize> = map.data_disk.iter().map(|d| d.get()).collect();
        let data: Vec<(usize, Vec<u8>)> = d.iter().map(|&m| (m, block(m as u8 + 1))).collect();
        let held = with_parity(Level::Raid5, map, &data);
        let found = entries(Level::Raid5, map, &data, d[0], 0..8);
        let got = replay(Level::Raid5, map, &found, &held, &[d[0]]);
        assert_eq!(got[d[0]].as_deref(), Some(&data[0].1[..]));
    }

    /// RAID5: torn (the new data on slot 0, the parity old); a member outside the union lost:
    /// its block comes from the partial parity, whatever the parity holds.
    #[test]
    fn a_lost_block_outside_the_union_comes_from_the_partial_parity() {
        let g = Geometry::new(Level::Raid5, Level::Raid5.default_layout(), 4, 65536).unwrap();
        let map = g.stripe_map(StripeNumber(0));
        let d: Vec<usize> = map.data_disk.iter().map(|d| d.get()).collect();
        let old: Vec<(usize, Vec<u8>)> = d.iter().map(|&m| (m, block(m as u8 + 1))).collect();
        let mut new = old.clone();
        new[0].1 = block(99);
        let mut held = with_parity(Level::Raid5, map, &old);
        held[d[0]].clone_from(&new[0].1);
        let found = entries(Level::Raid5, map, &new, d[0], 0..8);
        let got = replay(Level::Raid5, map, &found, &held, &[d[1]]);
        assert_eq!(got[d[1]].as_deref(), Some(&old[1].1[..]));
    }

    /// RAID6 with two data members lost: one in the union (sectors 0..4 of slot 0), one
    /// outside it. Completed: both come back whole. Torn (P and Q old): the one outside and
    /// the sectors of slot 0 outside the union still come back right.
    #[test]
    fn raid6_two_lost_one_in_the_union() {
        let g = Geometry::new(Level::Raid6, Level::Raid6.default_layout(), 6, 65536).unwrap();
        let map = g.stripe_map(StripeNumber(0));
        let d: Vec<usize> = map.data_disk.iter().map(|d| d.get()).collect();
        let old: Vec<(usize, Vec<u8>)> = d.iter().map(|&m| (m, block(m as u8 + 1))).collect();
        let mut new = old.clone();
        new[0].1[..4 * SECTOR].copy_from_slice(&block(77)[..4 * SECTOR]);
        let found = entries(Level::Raid6, map, &new, d[0], 0..4);
        let done = with_parity(Level::Raid6, map, &new);
        let got = replay(Level::Raid6, map, &found, &done, &[d[0], d[2]]);
        assert_eq!(got[d[0]].as_deref(), Some(&new[0].1[..]));
        assert_eq!(got[d[2]].as_deref(), Some(&new[2].1[..]));
        let mut torn = with_parity(Level::Raid6, map, &old);
        torn[d[0]].clone_from(&new[0].1);
        let got = replay(Level::Raid6, map, &found, &torn, &[d[0], d[2]]);
        assert_eq!(got[d[2]].as_deref(), Some(&old[2].1[..]));
        assert_eq!(got[d[0]].as_ref().unwrap()[4 * SECTOR..], old[0].1[4 * SECTOR..]);
        // And with P lost instead of a second data member: Q's entry and Q serve.
        let p = map.p_disk.unwrap().get();
        let got = replay(Level::Raid6, map, &found, &done, &[d[0], p]);
        assert_eq!(got[d[0]].as_deref(), Some(&new[0].1[..]));
        assert!(got[p].is_none());
    }

    /// RAID6, slot 0 rewritten whole with Q's entry on its ring (`placement`), P's write
    /// torn; slot 0 and slot 2 lost after the crash, Q's entry with slot 0. Slot 0 comes from
    /// Q, which no entry rewrites (from P it would be the old data, and P rewritten from it
    /// would disagree with Q): the stripe is consistent, and slot 2 comes back right.
    #[test]
    fn raid6_with_one_entry_lost_a_block_in_the_union_comes_from_the_other_parity() {
        let g = Geometry::new(Level::Raid6, Level::Raid6.default_layout(), 6, 65536).unwrap();
        let map = g.stripe_map(StripeNumber(0));
        let d: Vec<usize> = map.data_disk.iter().map(|d| d.get()).collect();
        let old: Vec<(usize, Vec<u8>)> = d.iter().map(|&m| (m, block(m as u8 + 1))).collect();
        let mut new = old.clone();
        new[0].1 = block(99);
        let mut found = entries(Level::Raid6, map, &new, d[0], 0..8);
        found.retain(|f| f.entry.parity == LogParity::P);
        let p = map.p_disk.unwrap().get();
        let mut held = with_parity(Level::Raid6, map, &new);
        held[p].clone_from(&with_parity(Level::Raid6, map, &old)[p]);
        let got = replay(Level::Raid6, map, &found, &held, &[d[0], d[2]]);
        assert_eq!(got[d[0]].as_deref(), Some(&new[0].1[..]));
        assert_eq!(got[d[2]].as_deref(), Some(&old[2].1[..]));
    }

    /// More lost than the replay can solve (a damaged array): no panic, the lost blocks stay
    /// zeros and the ones present come back as they were.
    #[test]
    fn beyond_redundancy_the_lost_blocks_stay_zeros() {
        let g = Geometry::new(Level::Raid6, Level::Raid6.default_layout(), 6, 65536).unwrap();
        let map = g.stripe_map(StripeNumber(0));
        let d: Vec<usize> = map.data_disk.iter().map(|d| d.get()).collect();
        let data: Vec<(usize, Vec<u8>)> = d.iter().map(|&m| (m, block(m as u8 + 1))).collect();
        let held = with_parity(Level::Raid6, map, &data);
        let found = entries(Level::Raid6, map, &data, d[0], 0..8);
        // Three lost outside the union (slot 0's): two partial parities cannot solve them.
        let got = replay(Level::Raid6, map, &found, &held, &[d[1], d[2], d[3]]);
        for &m in &d[1..] {
            assert_eq!(got[m].as_deref(), Some(&[0u8; UNIT][..]));
        }
        assert_eq!(got[d[0]].as_deref(), Some(&held[d[0]][..]));
    }

    /// The lost data blocks come back from parity (a lost parity block is not returned), and
    /// beyond what the level survives nothing does.
    #[test]
    fn rebuilt_data_is_the_lost_data_as_parity_gives_it() {
        let g = Geometry::new(Level::Raid6, Level::Raid6.default_layout(), 6, 65536).unwrap();
        let map = g.stripe_map(StripeNumber(0));
        let d: Vec<usize> = map.data_disk.iter().map(|d| d.get()).collect();
        let data: Vec<(usize, Vec<u8>)> = d.iter().map(|&m| (m, block(m as u8 + 1))).collect();
        let held = with_parity(Level::Raid6, map, &data);
        let p = map.p_disk.unwrap().get();
        let mut blocks: Vec<Option<&[u8]>> = held.iter().map(|b| Some(&b[..])).collect();
        blocks[d[1]] = None;
        blocks[p] = None;
        let got = rebuilt_data(Level::Raid6, map, &blocks);
        assert_eq!(got, vec![(DiskIndex(d[1] as u16), held[d[1]].clone())]);
        blocks[d[2]] = None;
        assert!(rebuilt_data(Level::Raid6, map, &blocks).is_empty(), "three lost");
        let all: Vec<Option<&[u8]>> = held.iter().map(|b| Some(&b[..])).collect();
        assert!(rebuilt_data(Level::Raid6, map, &all).is_empty(), "none lost");
    }
}
