//! Which generations of the log a replay counts as whole when a member being rebuilt lacks
//! them (`uraid_core::ppl::entries_to_replay`). A generation is whole when every member it
//! went to holds its header: else its log write was torn and its writes in place never
//! started. A member back by re-add holds no copy of the generations whose write to it failed
//! with it; those must still count (the simulator's seed 47281415).

use uraid_core::DiskIndex;
use uraid_core::ppl::{FoundEntry, LogEntry, LogParity, RingScan, entries_to_replay};

const EPOCH: u64 = 2;
const UNIT_SECTORS: u64 = 8;

/// A header of generation `g` of the epoch, its tail at the epoch's reset, written to
/// `members`.
fn header(g: u64, members: &[usize]) -> (u64, u64, u64, [u8; 32]) {
    let mut mask = [0u8; 32];
    for &m in members {
        mask[m / 8] |= 1 << (m % 8);
    }
    (EPOCH, g, 2, mask)
}

fn ring(member: usize, generations: &[(u64, &[usize])], rebuilding: bool) -> RingScan {
    RingScan {
        member: DiskIndex(member as u16),
        entries: Vec::new(),
        headers: generations.iter().map(|&(g, to)| header(g, to)).collect(),
        rebuilding,
    }
}

/// Generation 3 (head 312's P entry, data member 0 written) went to members 1 and 2; member
/// 2's copy is not on its ring. The reset (generation 2) went to all four.
fn scans(member_2: RingScan) -> Vec<RingScan> {
    let all: &[usize] = &[0, 1, 2, 3];
    let block = vec![7u8; 4096];
    let entry = LogEntry {
        member_sector: 312,
        parity: LogParity::P,
        modified: vec![(0, smallvec::smallvec![255])],
        block_crc: Some(crc32c::crc32c(&block)),
        span: 1,
    };
    let mut one = ring(1, &[(2, all), (3, &[1, 2])], false);
    one.entries.push(FoundEntry {
        epoch: EPOCH,
        generation: 3,
        unit_sectors: UNIT_SECTORS,
        member: DiskIndex(1),
        entry,
        block: Some(block),
    });
    vec![ring(0, &[(2, all)], false), one, member_2, ring(3, &[(2, all)], false)]
}

#[test]
fn a_generation_a_re_added_member_missed_when_it_failed_is_replayed() {
    let all: &[usize] = &[0, 1, 2, 3];
    let found = entries_to_replay(&scans(ring(2, &[(2, all)], true)));
    assert_eq!(
        found.iter().map(|e| (e.generation, e.entry.member_sector)).collect::<Vec<_>>(),
        [(3, 312)]
    );
}

#[test]
fn a_generation_a_member_in_sync_lacks_was_torn() {
    let all: &[usize] = &[0, 1, 2, 3];
    assert!(entries_to_replay(&scans(ring(2, &[(2, all)], false))).is_empty());
}

/// The member being rebuilt holds a newer generation: its copy of generation 3 was torn by
/// the crash (generations overlap), not lost when it failed.
#[test]
fn a_generation_torn_on_a_member_being_rebuilt_that_holds_newer_ones_is_not_replayed() {
    let all: &[usize] = &[0, 1, 2, 3];
    let member_2 = ring(2, &[(2, all), (4, &[2, 3])], true);
    let mut scans = scans(member_2);
    scans[3].headers.push(header(4, &[2, 3]));
    assert!(entries_to_replay(&scans).iter().all(|e| e.generation != 3));
}
