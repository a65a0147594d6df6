//! Whole-stripe batches under the partial parity log (`array::ppl::batch`): a batch outside a
//! durable range logs its range and waits for it, never falling back to 4 KiB stripe heads; a
//! stream's next stripes inside that range go with no log write; a stripe whose head has an
//! entry of its own goes through the heads.

mod common;

use common::{
    CHUNK_64K as CHUNK, Mem, array, assert_consistent, assert_rebuilds, pattern, read, run, write,
};
use uraid_core::array::{Array, IoArea, MemberIo, MemberOp, PartialParityLogConfig, ReqId};
use uraid_core::ppl::heads_to_resync;
use uraid_core::{DiskIndex, Level, Sector};

const UUID: [u8; 16] = [7; 16];
const UNIT_SECTORS: u64 = 8;

fn logged_array(level: Level, members: usize) -> Array {
    common::with_log(array(level, members, CHUNK, 4096), UUID, false)
}

fn data_disks(level: Level, members: usize) -> usize {
    members - usize::from(level.max_degraded())
}

/// The heads (first member sectors) a replay of the rings as they stand would resync.
fn resynced_heads(mem: &Mem) -> Vec<u64> {
    heads_to_resync(&mem.scans(UUID)).into_iter().map(|(sector, _)| sector).collect()
}

fn log_writes(mem: &Mem) -> usize {
    mem.log.iter().filter(|io| io.area == IoArea::Log).count()
}

fn take_ios(a: &mut Array) -> Vec<MemberIo> {
    std::iter::from_fn(|| a.next_io()).collect()
}

/// A fresh engine's log starts with a reset (flushes, then empty headers): the stream's
/// first stripes wait for it and for their range, then go out one write per member each.
#[test]
fn a_stream_on_a_fresh_log_is_batched_from_its_first_stripe() {
    for (level, members) in [(Level::Raid5, 5), (Level::Raid6, 6)] {
        let mut a = logged_array(level, members);
        let mut mem = Mem::new(members);
        let data = pattern(5, 3 * data_disks(level, members) * CHUNK as usize);
        write(&mut a, &mut mem, 0, data.clone());
        assert_eq!(a.stats().stripe_batches, 3, "{level:?}");
        let t = mem.total();
        assert_eq!(t.reads, 0, "{level:?}: no reads");
        assert_eq!(t.writes, 3 * members as u64, "{level:?}: one data write per member and stripe");
        assert_eq!(a.cache().active(), 0, "no stripe head taken");
        let last_log = mem.log.iter().rposition(|io| io.area == IoArea::Log).unwrap();
        let first_data =
            mem.log.iter().position(|io| io.area == IoArea::Data && io.op == MemberOp::Write);
        assert!(first_data.unwrap() > last_log, "{level:?}: logged before written in place");
        let resynced = resynced_heads(&mem);
        for head in (0..3 * CHUNK / 512).step_by(UNIT_SECTORS as usize) {
            assert!(resynced.contains(&head), "{level:?}: head {head} under a live range");
        }
        assert_eq!(read(&mut a, &mut mem, 0, data.len()), data);
        assert_consistent(&mut a, &mut mem, 3);
        assert_rebuilds(level, members, &mut mem, 3, &data);
        // A flush retires the log: nothing left to resync.
        a.submit_flush(ReqId(77));
        for (_, r, _) in run(&mut a, &mut mem) {
            r.unwrap();
        }
        assert!(resynced_heads(&mem).is_empty(), "{level:?}: retired");
    }
}

/// No data write of a waiting batch is handed out in the same turn as a log write: each
/// waits for the generation (or reset) before it to complete.
#[test]
fn a_batch_writes_nothing_in_place_until_its_range_is_durable() {
    let mut a = logged_array(Level::Raid5, 5);
    let mut mem = Mem::new(5);
    let data = pattern(6, 2 * 4 * CHUNK as usize);
    a.submit_write(ReqId(1), Sector(0), data.clone());
    let mut turns = Vec::new();
    loop {
        let ios = take_ios(&mut a);
        if ios.is_empty() {
            break;
        }
        let data_writes =
            ios.iter().filter(|io| io.area == IoArea::Data && io.op == MemberOp::Write).count();
        let log = ios.iter().filter(|io| io.area == IoArea::Log || io.op == MemberOp::Flush);
        turns.push((log.count(), data_writes));
        for io in &ios {
            let ok = mem.perform(&mut a, io);
            a.complete_io(io.tag, ok);
        }
    }
    // The reset's flushes, its headers, the ranges (stripe 0's own on its P member, and the
    // stream's ahead of stripe 1 on stripe 1's), then the two stripes.
    assert_eq!(turns, vec![(5, 0), (5, 0), (2, 0), (0, 10)]);
    let done = a.take_completed();
    assert_eq!(done.len(), 1);
    done[0].1.clone().unwrap();
    assert_eq!(read(&mut a, &mut mem, 0, data.len()), data);
}

/// The stream's next write lands inside the range its first one logged (a stream's range
/// runs ahead of it): batches with no log write at all.
#[test]
fn a_streams_next_stripes_need_no_log_write() {
    let mut a = logged_array(Level::Raid6, 6);
    let mut mem = Mem::new(6);
    let stripe = 4 * CHUNK as usize;
    let first = pattern(8, 2 * stripe);
    write(&mut a, &mut mem, 0, first.clone());
    let logged = log_writes(&mem);
    let next = pattern(9, 3 * stripe);
    write(&mut a, &mut mem, (2 * stripe / 512) as u64, next.clone());
    assert_eq!(log_writes(&mem), logged, "inside the durable range");
    assert_eq!(a.stats().stripe_batches, 5);
    let resynced = resynced_heads(&mem);
    for head in (0..5 * CHUNK / 512).step_by(UNIT_SECTORS as usize) {
        assert!(resynced.contains(&head), "head {head} under a live range");
    }
    let mut expected = first;
    expected.extend(next);
    assert_eq!(read(&mut a, &mut mem, 0, expected.len()), expected);
    assert_consistent(&mut a, &mut mem, 5);
}

/// A partial write's head has an entry of its own on the rings (its partial parity): no
/// range may cover it, so a whole-stripe write there goes through the heads until a flush
/// retires the entry; then it batches again.
#[test]
fn a_head_with_its_own_entry_keeps_its_stripe_on_heads() {
    let mut a = logged_array(Level::Raid5, 5);
    let mut mem = Mem::new(5);
    let stripe = 4 * CHUNK as usize;
    let patch = pattern(10, 4096);
    write(&mut a, &mut mem, 8, patch);
    let whole = pattern(11, stripe);
    write(&mut a, &mut mem, 0, whole.clone());
    assert_eq!(a.stats().stripe_batches, 0, "through the heads");
    assert_eq!(read(&mut a, &mut mem, 0, stripe), whole);
    assert_consistent(&mut a, &mut mem, 1);
    a.submit_flush(ReqId(78));
    for (_, r, _) in run(&mut a, &mut mem) {
        r.unwrap();
    }
    let again = pattern(12, stripe);
    write(&mut a, &mut mem, 0, again.clone());
    assert_eq!(a.stats().stripe_batches, 1, "retired: a batch again");
    assert_eq!(read(&mut a, &mut mem, 0, stripe), again);
    assert_consistent(&mut a, &mut mem, 1);
    assert_rebuilds(Level::Raid5, 5, &mut mem, 1, &again);
}

/// A member fails while a batch waits for its range: the batch leaves it out, the write
/// succeeds, and the stripe reads back whole from the others.
#[test]
fn a_member_failed_while_a_batch_waits_is_left_out() {
    let mut a = logged_array(Level::Raid6, 6);
    let mut mem = Mem::new(6);
    let data = pattern(13, 4 * CHUNK as usize);
    a.submit_write(ReqId(1), Sector(0), data.clone());
    let flushes = take_ios(&mut a);
    assert!(flushes.iter().all(|io| io.op == MemberOp::Flush), "the reset comes first");
    a.fail_member(DiskIndex(3));
    for io in &flushes {
        let ok = mem.perform(&mut a, io);
        a.complete_io(io.tag, ok);
    }
    let done = run(&mut a, &mut mem);
    assert_eq!(done.len(), 1);
    done[0].1.clone().unwrap();
    assert_eq!(a.stats().stripe_batches, 1);
    assert_eq!(mem.counts[3].writes, 0, "nothing written to the failed member");
    assert_eq!(read(&mut a, &mut mem, 0, data.len()), data);
}

/// One of two engines (the runtime's workers take stripes in turn) sees a stream as every
/// other stripe: with `stride_stripes` 2 its third stripe on lies inside the range its
/// second logged, and writes with no log write. As the only engine (stride 1) it would take
/// each for a lone full-stripe write: a range of its own stripe each, and a reset of the log
/// at every fifth (the real server's 1 MiB sequential writes, before the stride).
#[test]
fn a_stream_served_every_other_stripe_runs_under_one_range() {
    let stripe = 4 * CHUNK as usize;
    for stride in [2u64, 1] {
        let mut a = array(Level::Raid5, 5, CHUNK, 4096);
        a.enable_partial_parity_log(&PartialParityLogConfig {
            ring_sectors: common::LOG_RING_SECTORS,
            uuid: UUID,
            epoch: 1,
            rotational: false,
            stride_stripes: stride,
        });
        let mut mem = Mem::new(5);
        let mut logged = Vec::new();
        let mut written = Vec::new();
        for s in (0..12usize).step_by(2) {
            let data = pattern(40 + s as u64, stripe);
            write(&mut a, &mut mem, (s * stripe / 512) as u64, data.clone());
            logged.push(log_writes(&mem));
            written.push((s, data));
        }
        if stride == 2 {
            assert_eq!(logged[2..], [logged[1]; 4], "stripes 4-10 inside the stream's range");
            assert_eq!(a.log_stats().unwrap().2, 1, "the run's first reset only");
            let resynced = resynced_heads(&mem);
            for (s, _) in &written {
                let head = *s as u64 * CHUNK / 512;
                assert!(resynced.contains(&head), "stripe {s}'s first head under a live range");
            }
        } else {
            assert!(logged.windows(2).all(|w| w[1] > w[0]), "a log write per stripe: {logged:?}");
        }
        for (s, data) in &written {
            assert_eq!(read(&mut a, &mut mem, (s * stripe / 512) as u64, stripe), *data);
        }
        assert_consistent(&mut a, &mut mem, 12);
    }
}

/// A batch's stripe keeps one union, not one per head (a stream written with no flush kept
/// a record per 4 KiB of it), and a later partial write of one of its heads still counts
/// every data block of it as being written until a flush: its entry's union holds them all.
#[test]
fn a_batched_stripe_is_one_union_that_a_later_partial_write_counts_whole() {
    let mut a = logged_array(Level::Raid5, 5);
    let mut mem = Mem::new(5);
    let stripe = 4 * CHUNK as usize;
    let mut expected = pattern(60, 3 * stripe);
    write(&mut a, &mut mem, 0, expected.clone());
    assert_eq!(a.stats().stripe_batches, 3);
    assert_eq!(a.log_unions(), Some((0, 3)), "one record a stripe, none a head");
    // Stripe 1, data slot 2, its second head.
    let at = stripe + 2 * CHUNK as usize + 4096;
    let small = pattern(61, 4096);
    write(&mut a, &mut mem, (at / 512) as u64, small.clone());
    expected[at..at + 4096].copy_from_slice(&small);
    let head = CHUNK / 512 + UNIT_SECTORS;
    let e = uraid_core::ppl::entries_to_replay(&mem.scans(UUID))
        .into_iter()
        .find(|e| e.entry.member_sector == head)
        .expect("the partial write's entry");
    let members: Vec<usize> = e.entry.modified.iter().map(|m| m.0).collect();
    assert_eq!(members.len(), 4, "every data block of the stripe: {members:?}");
    assert_eq!(a.log_unions(), Some((1, 3)));
    assert_eq!(read(&mut a, &mut mem, 0, expected.len()), expected);
    assert_consistent(&mut a, &mut mem, 3);
    assert_rebuilds(Level::Raid5, 5, &mut mem, 3, &expected);
    a.submit_flush(ReqId(77));
    for (_, r, _) in run(&mut a, &mut mem) {
        r.unwrap();
    }
    assert_eq!(a.log_unions(), Some((0, 0)), "a flush makes everything durable");
}
