//! Pieces are handled when the runtime asks for member I/O, so that every request submitted
//! in one turn shapes the same batch of a stripe head.

mod common;

use common::{Mem, array, pattern, write};
use uraid_core::array::{MemberOp, ReqId};
use uraid_core::{Geometry, Level, Sector, StripeNumber};

/// Eight 4 KiB reads, one per data chunk of a degraded RAID6 stripe, all at the same offset in
/// their chunk: one stripe head. Submitted together, they produce one batch whose member reads
/// (every surviving data block and P, never Q) all go out before any completes; handled one by
/// one, the first would have read its own block alone and the rest waited for it.
#[test]
fn reads_submitted_together_share_one_degraded_batch() {
    let chunk = 64u64 << 10;
    let mut a = array(Level::Raid6, 10, chunk, 4096);
    let mut mem = Mem::new(10);
    let stripe_bytes = 8 * chunk as usize;
    let data = pattern(5, stripe_bytes);
    write(&mut a, &mut mem, 0, data.clone());

    let mut a = array(Level::Raid6, 10, chunk, 4096);
    let g = Geometry::new(Level::Raid6, Level::Raid6.default_layout(), 10, chunk).unwrap();
    let map = g.stripe_map(StripeNumber(0));
    let failed = map.data_disk[3];
    a.fail_member(failed);
    for slot in 0..8u64 {
        let sector = slot * chunk / 512;
        a.submit_read(ReqId(slot), Sector(sector), vec![0u8; 4096]);
    }
    let mut first_turn = Vec::new();
    while let Some(io) = a.next_io() {
        first_turn.push(io);
    }
    assert!(first_turn.iter().all(|io| io.op == MemberOp::Read && io.sectors == 8));
    let mut members: Vec<usize> = first_turn.iter().map(|io| io.member.get()).collect();
    members.sort_unstable();
    let mut expected: Vec<usize> = map
        .data_disk
        .iter()
        .map(|d| d.get())
        .filter(|&d| d != failed.get())
        .chain([map.p_disk.unwrap().get()])
        .collect();
    expected.sort_unstable();
    assert_eq!(members, expected, "every surviving data block and P, once, in the first turn");
    for io in &first_turn {
        let ok = mem.perform(&mut a, io);
        a.complete_io(io.tag, ok);
    }
    assert!(a.next_io().is_none(), "nothing read twice");
    let mut done = a.take_completed();
    done.sort_by_key(|d| d.0.0);
    assert_eq!(done.len(), 8);
    for (id, result, buf) in done {
        result.unwrap();
        let at = (id.0 * chunk) as usize;
        assert_eq!(buf, data[at..at + 4096], "chunk {}", id.0);
    }
}
