//! What a replay of the partial parity log counts a lost member's blocks as
//! (`uraid_core::ppl::replay_blocks`): in its head's union, what the parity holds (a write
//! acknowledged and completed but not yet flushed comes back); a member failed when the
//! entry was made is left out of the union, its block solved from the partial parity.

mod common;

use common::{CHUNK_64K as CHUNK, Mem, array, pattern, write};
use uraid_core::array::{Array, ReqId};
use uraid_core::ppl::{FoundEntry, entries_to_replay, replay_blocks, replayed_parity};
use uraid_core::{DiskIndex, Geometry, Level, StripeNumber};

const UUID: [u8; 16] = [5; 16];

/// RAID5 x5, left-symmetric: stripe 0 has data slots 0..3 on members 0..3 and P on member 4;
/// slot `s` of head 0 is array sector `s * 128`.
fn logged_array() -> Array {
    common::with_log(array(Level::Raid5, 5, CHUNK, 4096), UUID, false)
}

/// The replay of head 0 with member `lost` gone, as uraid-md and the simulator do it: P
/// rewritten on member 4. Returns the entry replayed.
fn replay_head0(mem: &mut Mem, lost: usize) -> FoundEntry {
    let g = Geometry::new(Level::Raid5, Level::Raid5.default_layout(), 5, CHUNK).unwrap();
    let map = g.stripe_map(StripeNumber(0));
    let scans: Vec<_> = mem.scans(UUID).into_iter().filter(|s| s.member.get() != lost).collect();
    let found: Vec<FoundEntry> =
        entries_to_replay(&scans).into_iter().filter(|e| e.entry.member_sector == 0).collect();
    assert_eq!(found.len(), 1, "{found:?}");
    let held: Vec<Option<&[u8]>> =
        (0..5).map(|m| (m != lost).then(|| &mem.disks[m][..4096])).collect();
    let refs: Vec<&FoundEntry> = found.iter().collect();
    let blocks = replay_blocks(Level::Raid5, map, &refs, &held);
    let data: Vec<Option<&[u8]>> = blocks.iter().map(Option::as_deref).collect();
    let e = &found[0];
    let parity = replayed_parity(&e.entry, e.block.as_deref().unwrap(), 4096, &data, |_| 0);
    mem.disks[4][..4096].copy_from_slice(&parity);
    found.into_iter().next().unwrap()
}

/// Member `lost`'s block of head 0 rebuilt from the others and P.
fn rebuilt(mem: &Mem, lost: usize) -> Vec<u8> {
    (0..4096).map(|i| (0..5).filter(|&m| m != lost).fold(0u8, |x, m| x ^ mem.disks[m][i])).collect()
}

/// A write acknowledged and completed but not flushed, then a crash and its member lost: its
/// entry is live (no flush retired it), and the replay takes the block from the parity, not
/// zeros. The block beside it, written and flushed before, reads back too.
#[test]
fn a_completed_write_on_a_member_lost_after_a_crash_comes_back_from_the_parity() {
    let mut a = logged_array();
    let mut mem = Mem::new(5);
    write(&mut a, &mut mem, 0, pattern(1, 4096));
    a.submit_flush(ReqId(99));
    common::run(&mut a, &mut mem);
    write(&mut a, &mut mem, 128, pattern(2, 4096));
    let e = replay_head0(&mut mem, 1);
    assert!(e.entry.modified.iter().any(|m| m.0 == 1), "slot 1 is in the union: {e:?}");
    assert_eq!(rebuilt(&mem, 1), pattern(2, 4096));
    assert_eq!(mem.disks[0][..4096], pattern(1, 4096)[..]);
}

/// A write to a failed member's block (the degraded array keeps it in P alone): the entry's
/// partial parity could not take that block out, so the entry leaves the member out of its
/// union, and the replay solves the block from the partial parity.
#[test]
fn a_member_failed_when_logged_is_left_out_of_the_union() {
    let mut a = logged_array();
    let mut mem = Mem::new(5);
    a.fail_member(DiskIndex(1));
    write(&mut a, &mut mem, 0, pattern(1, 4096));
    write(&mut a, &mut mem, 128, pattern(2, 4096));
    let e = replay_head0(&mut mem, 1);
    assert!(e.entry.modified.iter().all(|m| m.0 != 1), "{e:?}");
    assert_eq!(rebuilt(&mem, 1), pattern(2, 4096));
    assert_eq!(mem.disks[0][..4096], pattern(1, 4096)[..]);
}

/// Once a flush completes, a crash and the loss of any one member must bring back every block
/// it made durable. Here head 0's slot 1 write is logged at depth 1 on member 0's ring (an
/// idle member: `array::ppl::placement`), after an older entry for its slot 0 on member 4's.
/// A flush completes at its advance's member flushes, before the tail that retires both
/// entries, only if no replay could then take an older entry for a newer one
/// (`replay_may_fall_back`, since the fifth session of 2026-11-27): here one could, since
/// losing member 0 leaves the older entry, whose partial parity predates slot 1's write, and
/// the replay would rewrite P so that member 0's flushed block is rebuilt wrong. This test and
/// the simulator's seed 41018011 caught the first version, which had no such check.
#[test]
fn no_entry_a_completed_flush_leaves_live_replays_flushed_data_wrong() {
    let mut a = logged_array();
    let mut mem = Mem::new(5);
    write(&mut a, &mut mem, 0, pattern(1, 4096));
    write(&mut a, &mut mem, 128, pattern(2, 4096));
    let rings: Vec<Vec<usize>> = mem
        .scans(UUID)
        .iter()
        .map(|s| s.entries.iter().map(|e| e.entry.modified.len()).collect())
        .collect();
    assert_eq!(rings[0], vec![2], "slot 1's entry (union of slots 0 and 1) on member 0's ring");
    assert_eq!(rings[4], vec![1], "slot 0's on member 4's");
    a.submit_flush(ReqId(99));
    // A turn at a time, until the flush completes; what is handed out after it never runs.
    let mut flushed = false;
    while !flushed {
        let ios: Vec<_> = std::iter::from_fn(|| a.next_io()).collect();
        assert!(!ios.is_empty(), "the flush completes");
        for io in &ios {
            let ok = mem.perform(&mut a, io);
            a.complete_io(io.tag, ok);
        }
        flushed = a.take_completed().iter().any(|c| c.0 == ReqId(99));
    }
    // The crash: the members keep what is durable; then one is lost.
    mem.disks.clone_from(&mem.durable);
    let blocks = [pattern(1, 4096), pattern(2, 4096), vec![0; 4096], vec![0; 4096]];
    for lost in 0..5 {
        let mut m = Mem::new(5);
        m.disks.clone_from(&mem.disks);
        m.rings.clone_from(&mem.rings);
        let scans: Vec<_> = m.scans(UUID).into_iter().filter(|s| s.member.get() != lost).collect();
        if entries_to_replay(&scans).iter().any(|e| e.entry.member_sector == 0) {
            replay_head0(&mut m, lost);
        }
        for (slot, block) in blocks.iter().enumerate() {
            let held =
                if slot == lost { rebuilt(&m, lost) } else { m.disks[slot][..4096].to_vec() };
            assert!(held == *block, "member {lost} lost: slot {slot} reads back wrong");
        }
    }
}
