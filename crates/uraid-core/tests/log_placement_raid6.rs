//! RAID6 at depth on flash (`array::ppl::placement`): the entry on the busier of the P and Q
//! members goes to the written data member (P's when P is busier, Q's when Q is). A torn write
//! (any of its three writes in place lost to a power cut) followed by the loss of any two
//! members is then mended by the replay from what is left: every block the write left alone
//! reads back as it was, and the stripe is consistent.
//!
//! Why this holds: with the written member lost its sectors were being written (any value
//! will do), and the replay takes them from the parity whose entry was lost with it, which no
//! entry rewrites, so the rewritten one comes out consistent with it
//! (`uraid_core::ppl::replay_blocks`); an untouched member lost with it comes from the other
//! entry. With both holders lost (the written member and a parity member) the untouched
//! members are all there. Before log version 5 the replay took the written member's block from
//! P whatever was lost, and a torn Q, left unrewritten beside it, rebuilt an untouched member
//! wrong: moving Q's entry failed this test and the simulator (seed 40000124).

mod common;

use common::{CHUNK_64K as CHUNK, Mem, array, pattern, write};
use uraid_core::array::{Array, IoArea, MemberOp, ReqId};
use uraid_core::ppl::{FoundEntry, LogParity, entries_to_replay, replay_blocks, replayed_parity};
use uraid_core::{DiskRole, Geometry, Level, Sector, StripeMap, StripeNumber, reconstruct};

const UUID: [u8; 16] = [9; 16];
const MEMBERS: usize = 8;
/// Array sectors of one stripe: six data chunks of 128 sectors.
const STRIPE: u64 = (MEMBERS as u64 - 2) * 128;
const UNIT: usize = 4096;

fn logged() -> Array {
    common::with_log(array(Level::Raid6, MEMBERS, CHUNK, 4096), UUID, false)
}

/// Which of stripe 0's parity members is kept busier than its written member while stripe 0
/// logs.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Busier {
    /// P (member 7): stripe 1's log write (on its P and Q, members 6 and 7) is held.
    P,
    /// Q (member 0): the pre-reads of stripe 1's slot 0 (members 0, 6, 7) and stripe 2's slot
    /// 1 (members 0, 5, 6) are held: two I/Os on Q, one on P.
    Q,
}

/// Stripe 0 (left-symmetric: P on member 7, Q on member 0, data slots 0..5 on members 1..6)
/// with slots 1..5 on the members (put there directly, so that no stripe head holds them),
/// P and Q consistent; then slot 0 rewritten while other stripes' I/Os are held in flight
/// (`busier`). Stripe 0's writes in place to the members in `torn` are lost to a power cut.
fn torn_write_at_depth(map: &StripeMap, torn: &[usize], busier: Busier) -> Mem {
    let mut a = logged();
    let mut mem = Mem::new(MEMBERS);
    let mut blocks = vec![vec![0u8; UNIT]; MEMBERS];
    for (slot, d) in map.data_disk.iter().enumerate().skip(1) {
        blocks[d.get()] = pattern(50 + slot as u64, UNIT);
    }
    let pq: Vec<bool> =
        (0..MEMBERS).map(|m| map.roles[m] == DiskRole::P || map.roles[m] == DiskRole::Q).collect();
    let mut refs: Vec<&mut [u8]> = blocks.iter_mut().map(Vec::as_mut_slice).collect();
    reconstruct(Level::Raid6, map, &mut refs, &pq).unwrap();
    for (disk, block) in mem.disks.iter_mut().zip(&blocks) {
        disk[..UNIT].copy_from_slice(block);
    }
    // The log's first reset, out of the way.
    write(&mut a, &mut mem, 3 * STRIPE, pattern(49, UNIT));
    a.submit_write(ReqId(1), Sector(0), pattern(60, UNIT));
    a.submit_write(ReqId(2), Sector(STRIPE), pattern(61, UNIT));
    if busier == Busier::Q {
        a.submit_write(ReqId(3), Sector(2 * STRIPE + 128), pattern(62, UNIT));
    }
    let reads: Vec<_> = std::iter::from_fn(|| a.next_io()).collect();
    assert!(reads.iter().all(|io| io.op == MemberOp::Read), "rmw reads D, P, Q: {reads:?}");
    let (others, stripe0): (Vec<_>, Vec<_>) = reads.into_iter().partition(|io| io.sector.0 >= 128);
    let held = match busier {
        Busier::P => {
            for io in others {
                let ok = mem.perform(&mut a, &io);
                a.complete_io(io.tag, ok);
            }
            let held: Vec<_> = std::iter::from_fn(|| a.next_io()).collect();
            assert!(held.iter().all(|io| io.area == IoArea::Log), "stripe 1's log write: {held:?}");
            held
        }
        Busier::Q => others,
    };
    for io in stripe0 {
        let ok = mem.perform(&mut a, &io);
        a.complete_io(io.tag, ok);
    }
    let mut held = held.into_iter();
    while let Some(io) = a.next_io().or_else(|| held.next()) {
        let lost = io.area == IoArea::Data
            && io.op == MemberOp::Write
            && io.sector.0 == 0
            && torn.contains(&io.member.get());
        let ok = lost || mem.perform(&mut a, &io);
        a.complete_io(io.tag, ok);
    }
    assert!(!a.busy());
    mem
}

/// The replay of head 0 with members `lost` gone, as uraid-md does it, then the lost blocks
/// rebuilt from the rest: the head's blocks, per member.
fn replayed_and_rebuilt(mem: &Mem, map: &StripeMap, lost: &[usize]) -> Vec<Vec<u8>> {
    let scans: Vec<_> =
        mem.scans(UUID).into_iter().filter(|s| !lost.contains(&s.member.get())).collect();
    let found: Vec<FoundEntry> =
        entries_to_replay(&scans).into_iter().filter(|e| e.entry.member_sector == 0).collect();
    let mut blocks: Vec<Vec<u8>> = mem.disks.iter().map(|d| d[..UNIT].to_vec()).collect();
    let held: Vec<Option<&[u8]>> =
        (0..MEMBERS).map(|m| (!lost.contains(&m)).then(|| &mem.disks[m][..UNIT])).collect();
    let refs: Vec<&FoundEntry> = found.iter().collect();
    let replayed = replay_blocks(Level::Raid6, map, &refs, &held);
    let data: Vec<Option<&[u8]>> = replayed.iter().map(Option::as_deref).collect();
    let slot = |m: usize| match map.roles[m] {
        DiskRole::Data { syndrome_slot, .. } => usize::from(syndrome_slot),
        _ => 0,
    };
    for e in &found {
        let member = e.parity_member(map).unwrap().get();
        if !lost.contains(&member) {
            let block = e.block.as_deref().unwrap_or(&[]);
            blocks[member] = replayed_parity(&e.entry, block, UNIT, &data, slot);
        }
    }
    let lost_flags: Vec<bool> = (0..MEMBERS).map(|m| lost.contains(&m)).collect();
    let mut refs: Vec<&mut [u8]> = blocks.iter_mut().map(Vec::as_mut_slice).collect();
    reconstruct(Level::Raid6, map, &mut refs, &lost_flags).unwrap();
    blocks
}

#[test]
fn p_entry_on_the_written_member_then_any_two_lost_keeps_every_untouched_block() {
    every_tear_survives_any_two_lost(Busier::P);
}

#[test]
fn q_entry_on_the_written_member_then_any_two_lost_keeps_every_untouched_block() {
    every_tear_survives_any_two_lost(Busier::Q);
}

fn every_tear_survives_any_two_lost(busier: Busier) {
    let g = Geometry::new(Level::Raid6, Level::Raid6.default_layout(), MEMBERS, CHUNK).unwrap();
    let map = g.stripe_map(StripeNumber(0));
    let (p, q) = (map.p_disk.unwrap().get(), map.q_disk.unwrap().get());
    let written = map.data_disk[0].get();
    // Every subset of the three writes in place lost: new data with P, Q or both old (the
    // replay mends these), or the data old under new parity.
    for torn in (0..8).map(|bits| {
        [written, p, q]
            .into_iter()
            .enumerate()
            .filter(move |(i, _)| bits & 1 << i != 0)
            .map(|(_, m)| m)
    }) {
        let torn: Vec<usize> = torn.collect();
        survives_any_two_lost(map, &torn, busier);
    }
}

fn survives_any_two_lost(map: &StripeMap, torn: &[usize], busier: Busier) {
    let (p, q) = (map.p_disk.unwrap().get(), map.q_disk.unwrap().get());
    let written = map.data_disk[0].get();
    let mem = torn_write_at_depth(map, torn, busier);
    // Where the entries went: the busier parity member's on the written member.
    let mut holders: Vec<(usize, LogParity)> = mem
        .scans(UUID)
        .iter()
        .flat_map(|s| {
            s.entries
                .iter()
                .filter(|e| e.entry.member_sector == 0 && e.block.is_some())
                .map(move |e| (s.member.get(), e.entry.parity))
        })
        .collect();
    holders.sort_unstable();
    let mut want = match busier {
        Busier::P => vec![(written, LogParity::P), (q, LogParity::Q)],
        Busier::Q => vec![(p, LogParity::P), (written, LogParity::Q)],
    };
    want.sort_unstable();
    assert_eq!(holders, want, "P on {p}, Q on {q}, written {written}");
    let landed = mem.disks[written][..UNIT] == pattern(60, UNIT)[..];
    assert_eq!(landed, !torn.contains(&written), "the new data is in place unless torn");
    for x in 0..MEMBERS {
        for y in x + 1..MEMBERS {
            let blocks = replayed_and_rebuilt(&mem, map, &[x, y]);
            for (slot, d) in map.data_disk.iter().enumerate().skip(1) {
                let want = pattern(50 + slot as u64, UNIT);
                let what = format!("slot {slot}, members {x} and {y} lost, {torn:?} torn");
                assert!(blocks[d.get()] == want, "{what}");
            }
            // And the stripe is consistent: P and Q agree with the data as rebuilt.
            let mut again = blocks.clone();
            let pq: Vec<bool> = (0..MEMBERS).map(|m| m == p || m == q).collect();
            let mut refs: Vec<&mut [u8]> = again.iter_mut().map(Vec::as_mut_slice).collect();
            reconstruct(Level::Raid6, map, &mut refs, &pq).unwrap();
            assert!(again == blocks, "consistent: members {x} and {y} lost, {torn:?} torn");
        }
    }
}
