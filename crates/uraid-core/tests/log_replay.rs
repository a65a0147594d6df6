//! What a replay of the partial parity log counts a lost member's blocks as
//! (`uraid_core::ppl::replay_blocks`): in its head's union, what the parity holds (a write
//! acknowledged and completed but not yet flushed comes back); a member failed when the
//! entry was made is left out of the union, its block solved from the partial parity.

mod common;

use common::{CHUNK_64K as CHUNK, Mem, array, pattern, write};
use uraid_core::array::{Array, PartialParityLogConfig, ReqId};
use uraid_core::ppl::{FoundEntry, entries_to_replay, replay_blocks, replayed_parity};
use uraid_core::{DiskIndex, Geometry, Level, StripeNumber};

const UUID: [u8; 16] = [5; 16];

/// RAID5 x5, left-symmetric: stripe 0 has data slots 0..3 on members 0..3 and P on member 4;
/// slot `s` of head 0 is array sector `s * 128`.
fn logged_array() -> Array {
    let mut a = array(Level::Raid5, 5, CHUNK, 4096);
    let cfg = PartialParityLogConfig {
        ring_sectors: common::LOG_RING_SECTORS,
        uuid: UUID,
        epoch: 1,
        rotational: false,
    };
    a.enable_partial_parity_log(&cfg);
    a
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
