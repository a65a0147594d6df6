//! A head written again before a flush, its union's blocks no longer in the stripe cache: its
//! partial parity needs them (`array::ppl::log_extra_reads`), and the write plan counts those
//! reads (`Array::log_plan`): a reconstruct-write that reads fewer replaces the
//! read-modify-write.

mod common;

use common::{Mem, array_with_cache, pattern, read, run, write};
use uraid_core::Level;
use uraid_core::array::{Array, MemberOp, ReqId};
use uraid_core::ppl::{entries_to_replay, replayed_parity};

const UUID: [u8; 16] = [9; 16];

/// Member reads of writing `data` at `sector`.
fn reads_of_write(a: &mut Array, mem: &mut Mem, sector: u64, data: Vec<u8>) -> u64 {
    let before = mem.total().reads;
    write(a, mem, sector, data);
    mem.total().reads - before
}

/// RAID5 x5 (4+1), 64 KiB chunks, a stripe cache of one head: head 0 (member sectors 0..8)
/// has data slot s on member s (array sector 128 s) and P on member 4. A write to head 1
/// (array sector 8) between two writes to head 0 evicts it.
#[test]
fn a_rewrite_whose_union_was_evicted_reads_the_fewest_blocks() {
    let mut a = common::with_log(
        array_with_cache(Level::Raid5, 5, common::CHUNK_64K, 4096, 1),
        UUID,
        false,
    );
    let mut mem = Mem::new(5);
    let blocks: Vec<Vec<u8>> = (0..4).map(|s| pattern(40 + s, 4096)).collect();
    let evict = |a: &mut _, mem: &mut Mem, n| {
        let r = reads_of_write(a, mem, 8, pattern(n, 4096));
        assert_eq!(r, 2, "head 1: read-modify-write of one block");
    };
    // Slot 3 first, flushed: it stays out of the union.
    write(&mut a, &mut mem, 384, blocks[3].clone());
    a.submit_flush(ReqId(900));
    run(&mut a, &mut mem);
    evict(&mut a, &mut mem, 0);
    assert_eq!(reads_of_write(&mut a, &mut mem, 0, blocks[0].clone()), 2, "old slot 0 and P");
    evict(&mut a, &mut mem, 1);
    // Union {0}: read-modify-write reads slot 1, P and slot 0 (3), reconstruct-write slots 0,
    // 2 and 3 (3): the tie goes to read-modify-write, as without the log.
    assert_eq!(reads_of_write(&mut a, &mut mem, 128, blocks[1].clone()), 3);
    evict(&mut a, &mut mem, 2);
    // Union {0, 1}: read-modify-write would read 4 (slot 2, P, slots 0 and 1); the
    // reconstruct-write reads slots 0, 1 and 3.
    let before = mem.log.len();
    assert_eq!(reads_of_write(&mut a, &mut mem, 256, blocks[2].clone()), 3);
    let mut read_members: Vec<usize> = mem.log[before..]
        .iter()
        .filter(|io| io.op == MemberOp::Read)
        .map(|io| io.member.get())
        .collect();
    read_members.sort_unstable();
    assert_eq!(read_members, vec![0, 1, 3], "slots 0, 1 and 3; not P");
    // Its entry's partial parity is slot 3 alone, and with the union's blocks as they are it
    // gives P back.
    let live = entries_to_replay(&mem.scans(UUID));
    let e = live.iter().find(|e| e.entry.member_sector == 0).expect("head 0's entry");
    let union: Vec<usize> = e.entry.modified.iter().map(|m| m.0).collect();
    assert_eq!(union, vec![0, 1, 2]);
    assert_eq!(e.block.as_deref().unwrap(), &blocks[3][..], "slot 3");
    let data: Vec<Option<&[u8]>> = (0..4).map(|m| Some(&mem.disks[m][..4096])).collect();
    let parity = replayed_parity(&e.entry, e.block.as_deref().unwrap(), 4096, &data, |_| 0);
    assert_eq!(parity, mem.disks[4][..4096], "P as written");
    for (s, b) in blocks.iter().enumerate() {
        assert_eq!(&read(&mut a, &mut mem, s as u64 * 128, 4096), b);
    }
}
