//! Log generations overlap. A head whose entries are ready while generations are in flight
//! goes out at once in one of its own (on members that seek, up to four at once), and
//! generations complete in any order: each acknowledges only its own writes, and a replay of
//! the rings takes a newer generation while an older one is not yet written.

mod common;

use common::{
    CHUNK_64K as CHUNK, Mem, array, assert_consistent, complete, drain, finished, pattern, read,
    run,
};
use uraid_core::array::{Array, IoArea, MemberIo, MemberOp, PartialParityLogConfig, ReqId};
use uraid_core::ppl::{entries_to_replay, heads_to_resync};
use uraid_core::{Level, Sector};

const UUID: [u8; 16] = [7; 16];

/// RAID5 x5, 64 KiB chunks: stripe n's head starts at member sector 128 n.
fn logged_array(rotational: bool) -> Array {
    logged_array_with_ring(rotational, common::LOG_RING_SECTORS)
}

fn logged_array_with_ring(rotational: bool, ring_sectors: u64) -> Array {
    let mut a = array(Level::Raid5, 5, CHUNK, 4096);
    let cfg = PartialParityLogConfig {
        ring_sectors,
        uuid: UUID,
        epoch: 1,
        rotational,
        stride_stripes: 1,
    };
    a.enable_partial_parity_log(&cfg);
    a
}

/// Completes the reads of a write just submitted; returns the log writes that follow now.
fn reads_then_log(a: &mut Array, mem: &mut Mem) -> Vec<MemberIo> {
    let reads = drain(a);
    assert!(!reads.is_empty(), "an rmw reads");
    assert!(reads.iter().all(|io| io.op == MemberOp::Read && io.area == IoArea::Data));
    complete(a, mem, reads);
    let log = drain(a);
    assert!(log.iter().all(|io| io.area == IoArea::Log), "only log writes: {log:?}");
    log
}

#[test]
fn a_second_generation_goes_while_the_first_is_in_flight_and_may_complete_first() {
    let mut a = logged_array(false);
    let mut mem = Mem::new(5);
    // The log's first reset, out of the way.
    common::write(&mut a, &mut mem, 5 * 512, pattern(1, 4096));
    let first = pattern(2, 4096);
    a.submit_write(ReqId(1), Sector(0), first.clone());
    let held = reads_then_log(&mut a, &mut mem);
    assert!(!held.is_empty(), "stripe 0's generation");
    // Stripe 6's write computes while stripe 0's generation is in flight: its own goes now.
    let second = pattern(3, 4096);
    a.submit_write(ReqId(2), Sector(6 * 512), second.clone());
    let log = reads_then_log(&mut a, &mut mem);
    assert!(!log.is_empty(), "the second generation waited for the first");
    // The newer generation is durable first: its write is acknowledged, the older one's not.
    complete(&mut a, &mut mem, log);
    assert_eq!(finished(&mut a), vec![ReqId(2)]);
    // A replay now would take stripe 6's entry, and none for stripe 0.
    let live: Vec<u64> =
        entries_to_replay(&mem.scans(UUID)).iter().map(|e| e.entry.member_sector).collect();
    assert!(live.contains(&(6 * 128)) && !live.contains(&0), "live entries at {live:?}");
    // Stripe 6 writes in place while stripe 0's generation is still in flight.
    let writes = drain(&mut a);
    assert!(!writes.is_empty() && writes.iter().all(|io| io.area == IoArea::Data));
    assert!(writes.iter().all(|io| io.op == MemberOp::Write && io.sector.0 == 6 * 128));
    complete(&mut a, &mut mem, writes);
    complete(&mut a, &mut mem, held);
    let done: Vec<ReqId> = run(&mut a, &mut mem).into_iter().map(|d| d.0).collect();
    assert_eq!(done, vec![ReqId(1)]);
    assert!(read(&mut a, &mut mem, 0, 4096) == first);
    assert!(read(&mut a, &mut mem, 6 * 512, 4096) == second);
    assert_consistent(&mut a, &mut mem, 7);
}

/// On members that seek each generation is a seek pair on its members: four go at once, and
/// a fifth head waits to share the next.
#[test]
fn on_members_that_seek_four_generations_go_at_once() {
    let mut a = logged_array(true);
    let mut mem = Mem::new(5);
    common::write(&mut a, &mut mem, 5 * 512, pattern(1, 4096));
    let mut held = Vec::new();
    for stripe in 0..6u64 {
        a.submit_write(ReqId(stripe), Sector(stripe * 1024), pattern(stripe + 2, 4096));
        let log = reads_then_log(&mut a, &mut mem);
        assert_eq!(log.is_empty(), stripe >= 4, "stripe {stripe}: {log:?}");
        held.push(log);
    }
    // The first generation completes: the heads of stripes 8 and 10 share the next.
    complete(&mut a, &mut mem, held.remove(0));
    let log = drain(&mut a);
    assert!(
        log.iter().any(|io| io.area == IoArea::Log),
        "the waiting heads go once one is durable"
    );
    complete(&mut a, &mut mem, held.into_iter().flatten().chain(log).collect());
    let done = run(&mut a, &mut mem);
    assert_eq!(done.len(), 6);
    for stripe in 0..6u64 {
        assert!(read(&mut a, &mut mem, stripe * 1024, 4096) == pattern(stripe + 2, 4096));
    }
    let live = entries_to_replay(&mem.scans(UUID));
    let heads: Vec<u64> = live.iter().map(|e| e.entry.member_sector).collect();
    for stripe in [8u64, 10] {
        assert!(heads.contains(&(stripe * 128)), "stripe {stripe}'s entry: {heads:?}");
    }
    assert_consistent(&mut a, &mut mem, 12);
}

/// A full-stripe write under a range still to be logged waits for the generation that logs
/// it, though a later one (with nothing of its own to write) would be durable first.
#[test]
fn a_write_under_a_range_in_flight_waits_for_that_generation() {
    let mut a = logged_array(false);
    let mut mem = Mem::new(5);
    // Stripe 0 written since the log's first reset: the stream's next stripe logs a range.
    common::write(&mut a, &mut mem, 0, pattern(1, 4 * CHUNK as usize));
    let stripe = |n: u64| Sector(n * 4 * CHUNK / 512);
    a.submit_write(ReqId(1), stripe(1), pattern(2, 4 * CHUNK as usize));
    let held = drain(&mut a);
    assert!(!held.is_empty() && held.iter().all(|io| io.area == IoArea::Log), "{held:?}");
    a.submit_write(ReqId(2), stripe(2), pattern(3, 4 * CHUNK as usize));
    let early = drain(&mut a);
    assert!(early.is_empty(), "stripe 2 went before its range was durable: {early:?}");
    complete(&mut a, &mut mem, held);
    let done = run(&mut a, &mut mem);
    assert_eq!(done.len(), 2);
    for n in 1..3 {
        assert!(
            read(&mut a, &mut mem, stripe(n).0, 4 * CHUNK as usize)
                == pattern(n + 1, 4 * CHUNK as usize)
        );
    }
    // The range a replay would resync covers stripe 2's heads (member sectors 256 on).
    let resync = heads_to_resync(&mem.scans(UUID));
    assert!(resync.iter().any(|h| h.0 == 256), "{resync:?}");
    assert_consistent(&mut a, &mut mem, 3);
}

/// Rings that fill start an advance, and generations that do not fit meanwhile wait for it,
/// also while its tail's generation is in flight beside others, and a tail due goes alone
/// when no head fits beside it: the rings are reset only when not even the tail fits (a
/// reset stops the log: drain, flush, headers).
#[test]
fn generations_that_do_not_fit_wait_for_the_advance_under_way() {
    // A ring of 64 sectors: about six generations of one entry each.
    let mut a = logged_array_with_ring(false, 64);
    let mut mem = Mem::new(5);
    let mut rng = 7u64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    // 4 KiB writes to random blocks of the first 16 stripes, eight at a time, completing
    // member I/O oldest first.
    let mut written = std::collections::HashMap::new();
    let mut queue: std::collections::VecDeque<MemberIo> = std::collections::VecDeque::new();
    let (mut submitted, mut done) = (0u64, 0usize);
    while done < 400 {
        while submitted < 400 && submitted - (done as u64) < 8 {
            let sector = next() % (16 * 512 / 8) * 8;
            let data = pattern(1000 + submitted, 4096);
            written.insert(sector, data.clone());
            a.submit_write(ReqId(submitted), Sector(sector), data);
            submitted += 1;
        }
        queue.extend(drain(&mut a));
        let io = queue.pop_front().expect("I/O while writes are outstanding");
        let ok = mem.perform(&mut a, &io);
        a.complete_io(io.tag, ok);
        done += a.take_completed().len();
    }
    complete(&mut a, &mut mem, queue.into_iter().collect());
    run(&mut a, &mut mem);
    let (_, _, resets, _) = a.log_stats().unwrap();
    let advances = a.stats().log_advances;
    // The run's first reset and one more (a reset whenever the tail's generation was in
    // flight: 13; whenever no head fitted beside a tail due, once heads join generations
    // while the members flush: 9).
    assert!(advances > 20 && resets <= 2, "{resets} resets, {advances} advances");
    for (sector, data) in &written {
        assert!(read(&mut a, &mut mem, *sector, 4096) == *data, "sector {sector}");
    }
}

/// A head that computes while a flush's advance has its member flushes out goes at once in a
/// generation of its own (its union begins after the advance did: the advance retires nothing
/// of it), rather than wait for the flushes and then for the tail's generation.
#[test]
fn a_fresh_head_is_logged_while_the_advance_flushes_the_members() {
    let mut a = logged_array(false);
    let mut mem = Mem::new(5);
    common::write(&mut a, &mut mem, 0, pattern(1, 4096));
    // Head 1 (slot 2 of stripe 0's next row) starts its reads; then the flush comes.
    let fresh = pattern(2, 4096);
    a.submit_write(ReqId(101), Sector(256 + 8), fresh.clone());
    let reads = drain(&mut a);
    assert!(reads.len() == 2 && reads.iter().all(|io| io.op == MemberOp::Read), "{reads:?}");
    a.submit_flush(ReqId(100));
    let flushes = drain(&mut a);
    assert!(flushes.len() == 5 && flushes.iter().all(|io| io.op == MemberOp::Flush), "{flushes:?}");
    // Its reads complete with the flushes out: its generation goes now.
    complete(&mut a, &mut mem, reads);
    let log = drain(&mut a);
    assert!(!log.is_empty(), "the fresh head waited for the member flushes");
    assert!(log.iter().all(|io| io.area == IoArea::Log), "{log:?}");
    complete(&mut a, &mut mem, log);
    assert_eq!(finished(&mut a), vec![ReqId(101)], "acknowledged once logged");
    complete(&mut a, &mut mem, flushes);
    let done: Vec<ReqId> = run(&mut a, &mut mem).into_iter().map(|d| d.0).collect();
    assert_eq!(done, vec![ReqId(100)]);
    assert_eq!(a.stats().log_advances, 1);
    // The advance retired head 0's entry; head 1's outlives it.
    let live: Vec<u64> =
        entries_to_replay(&mem.scans(UUID)).iter().map(|e| e.entry.member_sector).collect();
    assert_eq!(live, vec![8]);
    assert!(read(&mut a, &mut mem, 0, 4096) == pattern(1, 4096));
    assert!(read(&mut a, &mut mem, 256 + 8, 4096) == fresh);
    assert_consistent(&mut a, &mut mem, 1);
}

/// A write whose entries wait behind other generations is acknowledged when it is admitted,
/// before they are durable (`ack_when_admitted`). A flush that comes then must still cover
/// it: it waits for the write to join a generation, for its write in place, and for member
/// flushes after that.
#[test]
fn a_flush_covers_a_write_acknowledged_before_its_entries_were_durable() {
    let mut a = logged_array(true); // members that seek: at most four generations in flight
    let mut mem = Mem::new(5);
    common::write(&mut a, &mut mem, 5 * 512, pattern(1, 4096));
    let mut held = Vec::new();
    for stripe in [6u64, 8, 10, 12] {
        a.submit_write(ReqId(stripe), Sector(stripe * 512), pattern(stripe, 4096));
        held.extend(reads_then_log(&mut a, &mut mem));
    }
    // A fifth finds four generations in flight: it waits for the next, acknowledged now.
    let data = pattern(14, 4096);
    a.submit_write(ReqId(14), Sector(14 * 512), data.clone());
    assert!(reads_then_log(&mut a, &mut mem).is_empty(), "no room for a fifth generation");
    assert!(finished(&mut a).contains(&ReqId(14)), "acknowledged before its entries");
    a.submit_flush(ReqId(100));
    complete(&mut a, &mut mem, held);
    let (mut written, mut flushed_after, mut flush_done) = (false, false, false);
    loop {
        let ios = drain(&mut a);
        if ios.is_empty() {
            break;
        }
        flushed_after |= written && ios.iter().any(|io| io.op == MemberOp::Flush);
        let ours = |io: &MemberIo| {
            io.area == IoArea::Data && io.op == MemberOp::Write && io.sector.0 == 14 * 128
        };
        let now = ios.iter().any(ours);
        complete(&mut a, &mut mem, ios);
        written |= now;
        if finished(&mut a).contains(&ReqId(100)) {
            assert!(written && flushed_after, "the flush completed before the write was durable");
            flush_done = true;
        }
    }
    assert!(flush_done && !a.busy());
    assert!(read(&mut a, &mut mem, 14 * 512, 4096) == data);
    assert_consistent(&mut a, &mut mem, 15);
}
