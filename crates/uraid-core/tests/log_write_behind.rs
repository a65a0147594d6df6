//! Writes in place of a stream's batch acknowledged once logged go from copies of its blocks
//! (`array::write_behind`): the head's next batch reads, computes and logs beside them, and
//! only its own writes in place wait for them. A flush still covers them. A random batch's
//! go from the head's buffers, and a next batch there waits for them (the last test).

mod common;

use common::{Mem, array, assert_consistent, complete, drain, finished, pattern, read, run};
use uraid_core::Sector;
use uraid_core::array::{Array, IoArea, MemberIo, MemberOp, ReqId, SyncKind};
use uraid_core::ppl::{entries_to_replay, replayed_parity};
use uraid_core::{DiskIndex, Level};

const UUID: [u8; 16] = [5; 16];

/// RAID5 x5, 64 KiB chunks, 4 KiB stripe units: stripe 0's head 1 (member sectors 8..16) has
/// data slot s on member s (array sector 128 s + 8) and P on member 4.
fn logged_array() -> Array {
    common::with_log(array(Level::Raid5, 5, common::CHUNK_64K, 4096), UUID, false)
}

fn members(ios: &[MemberIo]) -> Vec<usize> {
    let mut m: Vec<usize> = ios.iter().map(|io| io.member.get()).collect();
    m.sort_unstable();
    m
}

/// Head 1's member sectors, and its first byte on a member.
const H: u64 = 8;
const AT: usize = 4096;

/// Head 1 holds `old` in its four data slots, flushed; returns the array and members. The
/// last write ends where slot 0's block begins, so a write there continues a stream.
fn filled(old: &[Vec<u8>]) -> (Array, Mem) {
    let mut a = logged_array();
    let mut mem = Mem::new(5);
    for (s, block) in old.iter().enumerate() {
        common::write(&mut a, &mut mem, s as u64 * 128 + H, block.clone());
    }
    common::write(&mut a, &mut mem, 0, pattern(99, 4096));
    a.submit_flush(ReqId(900));
    run(&mut a, &mut mem);
    (a, mem)
}

/// Completes what a write just submitted reads (the head holds the stripe after `filled`,
/// so nothing, but a block written behind would not be read either way), then its log
/// writes, with no write in place among them.
fn logged(a: &mut Array, mem: &mut Mem) {
    let mut ios = drain(a);
    if ios.iter().all(|io| io.op == MemberOp::Read) {
        complete(a, mem, ios);
        ios = drain(a);
    }
    assert!(!ios.is_empty() && ios.iter().all(|io| io.area == IoArea::Log), "{ios:?}");
    complete(a, mem, ios);
}

/// Write A (slot 0), a stream's, acknowledged once logged, its writes in place handed out
/// from copies, not completed.
fn first_write_behind(a: &mut Array, mem: &mut Mem, data: &[u8]) -> Vec<MemberIo> {
    let copied = a.stats().bytes_copied;
    a.submit_write(ReqId(1), Sector(H), data.to_vec());
    logged(a, mem);
    assert_eq!(finished(a), vec![ReqId(1)], "acknowledged once logged");
    let behind = drain(a);
    assert_eq!(members(&behind), vec![0, 4], "slot 0 and P: {behind:?}");
    assert!(behind.iter().all(|io| io.op == MemberOp::Write && io.area == IoArea::Data));
    let copied = a.stats().bytes_copied - copied;
    assert_eq!(copied, 3 * 4096, "the request into the head, then slot 0 and P");
    behind
}

#[test]
fn the_next_write_logs_while_the_last_ones_writes_are_in_flight() {
    let old: Vec<Vec<u8>> = (0..4).map(|s| pattern(10 + s, 4096)).collect();
    let (mut a, mut mem) = filled(&old);
    let (first, second) = (pattern(2, 4096), pattern(3, 4096));
    let behind = first_write_behind(&mut a, &mut mem, &first);
    // Write B (slot 1, the same head) while A's writes are in flight: it computes, logs and
    // is acknowledged beside them.
    a.submit_write(ReqId(2), Sector(128 + H), second.clone());
    logged(&mut a, &mut mem);
    assert_eq!(finished(&mut a), vec![ReqId(2)], "acknowledged beside A's writes");
    // Its own writes wait for A's: two writes of P never overlap on member 4.
    assert!(drain(&mut a).is_empty());
    // A power cut now, with A's write torn (slot 0 landed, P not): the replay takes B's
    // entry, whose union holds slot 0 too, and the stripe is consistent again, so a member
    // lost now rebuilds the slots nobody wrote.
    let live = entries_to_replay(&mem.scans(UUID));
    let e = live.iter().find(|e| e.entry.member_sector == H).expect("B's entry");
    let union: Vec<usize> = e.entry.modified.iter().map(|m| m.0).collect();
    assert_eq!(union, vec![0, 1]);
    let torn0 = a.io_buf(behind.iter().find(|io| io.member.get() == 0).unwrap()).to_vec();
    let data: Vec<Option<&[u8]>> = (0..4)
        .map(|m| Some(if m == 0 { &torn0[..] } else { &mem.disks[m][AT..AT + 4096] }))
        .collect();
    let parity = replayed_parity(&e.entry, e.block.as_deref().unwrap(), 4096, &data, |_| 0);
    for lost in [2usize, 3] {
        let mut rebuilt = parity.clone();
        for (_, d) in data.iter().enumerate().filter(|(m, _)| *m != lost) {
            rebuilt.iter_mut().zip(d.unwrap()).for_each(|(r, b)| *r ^= b);
        }
        assert!(rebuilt == old[lost], "slot {lost} rebuilt from the replayed parity");
    }
    // A's writes complete: B's go.
    complete(&mut a, &mut mem, behind);
    let writes = drain(&mut a);
    assert_eq!(members(&writes), vec![1, 4], "{writes:?}");
    complete(&mut a, &mut mem, writes);
    run(&mut a, &mut mem);
    assert!(read(&mut a, &mut mem, H, 4096) == first);
    assert!(read(&mut a, &mut mem, 128 + H, 4096) == second);
    assert_consistent(&mut a, &mut mem, 1);
}

#[test]
fn a_flush_covers_writes_behind() {
    let old: Vec<Vec<u8>> = (0..4).map(|s| pattern(20 + s, 4096)).collect();
    let (mut a, mut mem) = filled(&old);
    let behind = first_write_behind(&mut a, &mut mem, &pattern(4, 4096));
    a.submit_flush(ReqId(3));
    let ios = drain(&mut a);
    assert!(ios.iter().all(|io| io.op != MemberOp::Flush), "no member flush before A's writes");
    complete(&mut a, &mut mem, ios);
    assert!(finished(&mut a).is_empty(), "the flush waits for A's writes in place");
    complete(&mut a, &mut mem, behind);
    let done: Vec<ReqId> = run(&mut a, &mut mem).into_iter().map(|d| d.0).collect();
    assert_eq!(done, vec![ReqId(3)]);
    assert!(mem.durable[0][AT..AT + 4096] == pattern(4, 4096)[..], "A's block is durable");
}

#[test]
fn a_check_waits_for_writes_behind() {
    let old: Vec<Vec<u8>> = (0..4).map(|s| pattern(30 + s, 4096)).collect();
    let (mut a, mut mem) = filled(&old);
    let behind = first_write_behind(&mut a, &mut mem, &pattern(5, 4096));
    // A check reads every member: it must not read P or slot 0 with A's writes in flight.
    a.submit_sync(ReqId(4), SyncKind::Check, Sector(H), 8);
    assert!(drain(&mut a).is_empty(), "the check's reads wait");
    complete(&mut a, &mut mem, behind);
    let before = a.mismatches().1;
    run(&mut a, &mut mem);
    assert_eq!(a.mismatches().1, before, "no mismatch");
}

#[test]
fn a_write_behind_that_fails_fails_its_member_and_loses_nothing() {
    let old: Vec<Vec<u8>> = (0..4).map(|s| pattern(40 + s, 4096)).collect();
    let (mut a, mut mem) = filled(&old);
    let (first, second) = (pattern(6, 4096), pattern(7, 4096));
    let behind = first_write_behind(&mut a, &mut mem, &first);
    // Write B to the same head, then member 0's write behind fails (the disk dies mid-write).
    a.submit_write(ReqId(2), Sector(128 + H), second.clone());
    logged(&mut a, &mut mem);
    assert_eq!(finished(&mut a), vec![ReqId(2)]);
    mem.bad_writes.insert((0, H));
    complete(&mut a, &mut mem, behind);
    assert_eq!(a.failed_members().iter().map(|d| d.get()).collect::<Vec<_>>(), vec![0]);
    run(&mut a, &mut mem);
    // What the members hold, read by a fresh engine with member 0 failed (nothing cached):
    // slot 0 comes from P, which B's write left right, and every block is as written.
    let mut fresh = array(Level::Raid5, 5, common::CHUNK_64K, 4096);
    fresh.fail_member(DiskIndex(0));
    assert!(read(&mut fresh, &mut mem, H, 4096) == first, "slot 0 rebuilt from P");
    assert!(read(&mut fresh, &mut mem, 128 + H, 4096) == second);
    for s in 2..4u64 {
        assert!(read(&mut fresh, &mut mem, s * 128 + H, 4096) == old[s as usize]);
    }
}

#[test]
fn a_random_writes_in_place_go_from_the_head_and_the_next_batch_waits_for_them() {
    let old: Vec<Vec<u8>> = (0..4).map(|s| pattern(50 + s, 4096)).collect();
    let (mut a, mut mem) = filled(&old);
    let (first, second) = (pattern(8, 4096), pattern(9, 4096));
    let copied = a.stats().bytes_copied;
    // Slot 1, which continues no write: a random one.
    a.submit_write(ReqId(1), Sector(128 + H), first.clone());
    logged(&mut a, &mut mem);
    assert_eq!(finished(&mut a), vec![ReqId(1)], "acknowledged once logged");
    let writes = drain(&mut a);
    assert_eq!(members(&writes), vec![1, 4], "{writes:?}");
    let copied = a.stats().bytes_copied - copied;
    assert_eq!(copied, 4096, "the request into the head, and no more: written from the head");
    // Another write to the head waits for them: they are its buffers.
    a.submit_write(ReqId(2), Sector(256 + H), second.clone());
    assert!(drain(&mut a).is_empty(), "nothing before the writes in place complete");
    complete(&mut a, &mut mem, writes);
    let done: Vec<ReqId> = run(&mut a, &mut mem).into_iter().map(|d| d.0).collect();
    assert_eq!(done, vec![ReqId(2)]);
    assert!(read(&mut a, &mut mem, 128 + H, 4096) == first);
    assert!(read(&mut a, &mut mem, 256 + H, 4096) == second);
    assert_consistent(&mut a, &mut mem, 1);
}
