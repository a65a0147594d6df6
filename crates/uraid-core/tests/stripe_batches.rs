//! Whole stripes written as one batch each (`array::batch_write`): one member write per member,
//! parity from the request's buffer, no stripe head; and everything else that touches the
//! stripe meanwhile waits for it.

mod common;

use common::{Mem, array, assert_consistent, assert_rebuilds, pattern, read, run, write};
use uraid_core::array::{Array, ArrayError, MemberIo, MemberOp, ReqId};
use uraid_core::{DiskIndex, Level, Sector};

const CHUNK: u64 = common::CHUNK_64K;

#[test]
fn a_whole_stripe_is_one_write_per_member_and_no_read() {
    for (level, members) in [(Level::Raid4, 4), (Level::Raid5, 5), (Level::Raid6, 6)] {
        let mut a = array(level, members, CHUNK, 4096);
        let mut mem = Mem::new(members);
        let data_disks = members - usize::from(level.max_degraded());
        let data = pattern(7, 2 * data_disks * CHUNK as usize);
        write(&mut a, &mut mem, 0, data.clone());
        let t = mem.total();
        assert_eq!(t.reads, 0, "{level:?}: a full-stripe write reads nothing");
        assert_eq!(t.writes, 2 * members as u64, "{level:?}: one write per member per stripe");
        assert_eq!(t.write_bytes, 2 * members as u64 * CHUNK);
        assert_eq!(a.stats().stripe_batches, 2);
        assert_eq!(a.stats().stripe_writes_full, 2 * CHUNK / 4096, "counted in heads");
        assert_eq!(a.cache().active(), 0, "no stripe head taken");
        assert_eq!(read(&mut a, &mut mem, 0, data.len()), data);
        assert_consistent(&mut a, &mut mem, 2);
        assert_rebuilds(level, members, &mut mem, 2, &data);
    }
}

/// A write that starts and ends mid-stripe: the whole stripe between is a batch, the ends go
/// through heads, and all of it reads back.
#[test]
fn the_partial_stripes_at_either_end_go_through_heads() {
    let mut a = array(Level::Raid5, 5, CHUNK, 4096);
    let mut mem = Mem::new(5);
    let stripe = 4 * CHUNK as usize;
    let start = stripe / 2;
    let data = pattern(3, 2 * stripe);
    write(&mut a, &mut mem, (start / 512) as u64, data.clone());
    assert_eq!(a.stats().stripe_batches, 1, "stripe 1 whole");
    let back = read(&mut a, &mut mem, 0, 3 * stripe);
    assert!(back[..start].iter().all(|b| *b == 0));
    assert_eq!(back[start..start + data.len()], data[..]);
    assert_consistent(&mut a, &mut mem, 3);
}

/// The member I/Os the engine hands out until it has none, not performed.
fn take_ios(a: &mut Array) -> Vec<MemberIo> {
    std::iter::from_fn(|| a.next_io()).collect()
}

/// While a batch is in flight, a partial write and another whole-stripe write of its stripe
/// start nothing; once it completes they run, in order, and the stripe ends consistent.
#[test]
fn writes_to_a_stripe_being_batched_wait_for_it() {
    let mut a = array(Level::Raid6, 6, CHUNK, 4096);
    let mut mem = Mem::new(6);
    let stripe = 4 * CHUNK as usize;
    let first = pattern(1, stripe);
    a.submit_write(ReqId(1), Sector(0), first.clone());
    let batch = take_ios(&mut a);
    assert_eq!(batch.len(), 6);
    assert!(batch.iter().all(|io| io.op == MemberOp::Write && io.sectors == CHUNK / 512));
    a.submit_write(ReqId(2), Sector(CHUNK / 512 + 8), pattern(2, 4096));
    let second = pattern(3, stripe);
    a.submit_write(ReqId(3), Sector(0), second.clone());
    a.submit_read(ReqId(4), Sector(0), vec![0; 4096]);
    let meanwhile = take_ios(&mut a);
    assert!(
        meanwhile.iter().all(|io| io.op == MemberOp::Read && io.sectors == 8),
        "only the healthy read goes out: {meanwhile:?}"
    );
    for io in meanwhile.iter().chain(&batch) {
        let ok = mem.perform(&mut a, io);
        a.complete_io(io.tag, ok);
    }
    let mut done = run(&mut a, &mut mem);
    done.extend(a.take_completed());
    assert_eq!(done.len(), 4);
    let read_back = done.iter().find(|d| d.0 == ReqId(4)).unwrap();
    assert!(read_back.2 == first[..4096] || read_back.2 == vec![0; 4096], "old or new data");
    assert_eq!(a.stats().stripe_batches, 1, "the second whole-stripe write went through heads");
    // Write 2 was submitted before write 3, which covers it: write 3 wins.
    let expected = second;
    assert_eq!(read(&mut a, &mut mem, 0, stripe), expected);
    assert_consistent(&mut a, &mut mem, 1);
    assert_rebuilds(Level::Raid6, 6, &mut mem, 1, &expected);
}

/// A head cached from an earlier partial write holds blocks the batch overwrites: the batch
/// drops it, so a later read-modify-write reads the new parity instead of using stale blocks.
#[test]
fn a_batch_drops_the_stripes_cached_heads() {
    let mut a = array(Level::Raid5, 5, CHUNK, 4096);
    let mut mem = Mem::new(5);
    let stripe = 4 * CHUNK as usize;
    write(&mut a, &mut mem, 8, pattern(1, 4096));
    assert!(a.cache().inactive() > 0, "the partial write's head stays cached");
    let whole = pattern(2, stripe);
    write(&mut a, &mut mem, 0, whole.clone());
    assert_eq!(a.stats().stripe_batches, 1);
    let patch = pattern(3, 4096);
    write(&mut a, &mut mem, 16, patch.clone());
    let mut expected = whole;
    expected[16 * 512..17 * 512 + 3584].copy_from_slice(&patch);
    assert_eq!(read(&mut a, &mut mem, 0, stripe), expected);
    assert_consistent(&mut a, &mut mem, 1);
    assert_rebuilds(Level::Raid5, 5, &mut mem, 1, &expected);
}

/// A member write of a batch fails: the member fails, the write still succeeds (the other
/// members and parity hold it); a second failure in the same batch on RAID5 is beyond its
/// redundancy and the write fails.
#[test]
fn a_failed_member_write_in_a_batch_fails_the_member() {
    let stripe = 4 * CHUNK as usize;
    let mut a = array(Level::Raid5, 5, CHUNK, 4096);
    let mut mem = Mem::new(5);
    mem.bad_writes.insert((2, 0));
    let data = pattern(4, stripe);
    write(&mut a, &mut mem, 0, data.clone());
    assert_eq!(a.failed_members(), vec![DiskIndex(2)]);
    assert_eq!(read(&mut a, &mut mem, 0, stripe), data, "member 2's block rebuilt");

    let mut a = array(Level::Raid5, 5, CHUNK, 4096);
    let mut mem = Mem::new(5);
    mem.bad_writes.insert((1, 0));
    mem.bad_writes.insert((3, 0));
    a.submit_write(ReqId(1), Sector(0), data);
    let done = run(&mut a, &mut mem);
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].1, Err(ArrayError::BeyondRedundancy));
}
