//! A flush under the partial parity log retires the entries it covers by an advance while the
//! rings have room (`array::ppl::advance`): heads whose unions began after it was asked for
//! go on being logged meanwhile, heads with older unions wait for it and are logged again
//! with their own sectors only, and the rings' newest tail retires what it made durable.

mod common;

use common::{CHUNK_64K as CHUNK, LOG_RING_SECTORS, Mem, array, pattern, run, write};
use uraid_core::array::{Array, IoArea, MemberIo, PartialParityLogConfig, ReqId};
use uraid_core::ppl::{entries_to_replay, full_mask, scan_ring};
use uraid_core::{DiskIndex, Level, Sector};

const UUID: [u8; 16] = [9; 16];

fn logged_array(ring_sectors: u64) -> Array {
    let mut a = array(Level::Raid5, 5, CHUNK, 4096);
    let cfg = PartialParityLogConfig { ring_sectors, uuid: UUID, epoch: 1 };
    a.enable_partial_parity_log(&cfg);
    a
}

/// The live entries a replay of the rings as they stand would take: (head, modified members).
fn live_entries(mem: &Mem) -> Vec<(u64, Vec<usize>)> {
    let mut out: Vec<(u64, Vec<usize>)> = entries_to_replay(&mem.scans(UUID))
        .into_iter()
        .map(|e| (e.entry.member_sector, e.entry.modified.iter().map(|m| m.0).collect()))
        .collect();
    out.sort();
    out
}

/// Runs the engine a turn at a time (every I/O it hands out, then their completions): per
/// turn, the requests finished and the log writes' members.
fn turns(a: &mut Array, mem: &mut Mem) -> Vec<(Vec<u64>, Vec<u16>)> {
    let mut out = Vec::new();
    loop {
        let ios: Vec<MemberIo> = std::iter::from_fn(|| a.next_io()).collect();
        if ios.is_empty() {
            assert!(!a.busy());
            return out;
        }
        for io in &ios {
            let ok = mem.perform(a, io);
            a.complete_io(io.tag, ok);
        }
        let mut done: Vec<u64> = a.take_completed().into_iter().map(|d| d.0.0).collect();
        done.sort_unstable();
        let log: Vec<u16> =
            ios.iter().filter(|io| io.area == IoArea::Log).map(|io| io.member.0).collect();
        out.push((done, log));
    }
}

fn turn_of(turns: &[(Vec<u64>, Vec<u16>)], id: u64) -> usize {
    turns.iter().position(|t| t.0.contains(&id)).expect("finished")
}

/// Stripe 0 of RAID5 x5 (left-symmetric): data slots 0..3 on members 0..3, P on member 4;
/// slot `s` of head 0 starts at array sector `s * 128`. Head 1 (member sector 8) is the next
/// 4 KiB row.
#[test]
fn a_flush_advances_while_fresh_heads_are_logged() {
    let mut a = logged_array(LOG_RING_SECTORS);
    let mut mem = Mem::new(5);
    // Before the flush: head 0, slot 0 (a partial write: an entry of its own).
    write(&mut a, &mut mem, 0, pattern(1, 4096));
    assert_eq!(live_entries(&mem), vec![(0, vec![0])]);
    let resets = a.log_stats().unwrap().2;
    // The flush, a write to a fresh head (head 1, slot 2) and one to head 0's slot 1, whose
    // union holds slot 0's unflushed sectors until the flush makes them durable.
    a.submit_flush(ReqId(100));
    a.submit_write(ReqId(101), Sector(256 + 8), pattern(2, 4096));
    a.submit_write(ReqId(102), Sector(128), pattern(3, 4096));
    let turns = turns(&mut a, &mut mem);
    let (flush, fresh, old) = (turn_of(&turns, 100), turn_of(&turns, 101), turn_of(&turns, 102));
    assert!(fresh <= flush, "the fresh head is logged during the advance: {turns:?}");
    assert!(old > flush, "head 0 waits for the advance: {turns:?}");
    let tail_turn = turns[..=flush].iter().rposition(|t| !t.1.is_empty()).expect("a tail");
    let mut tail_members = turns[tail_turn].1.clone();
    tail_members.sort_unstable();
    assert_eq!(tail_members, vec![0, 1, 2, 3, 4], "the tail goes to every ring");
    let (_, _, resets_after, unprotected) = a.log_stats().unwrap();
    assert_eq!(resets_after, resets, "no reset");
    assert_eq!(unprotected, 0);
    assert_eq!(a.stats().log_advances, 1);
    // Head 0's new entry holds slot 1 only (slot 0 is durable): if member 0 were lost now,
    // its flushed block would read back, not zeros. Head 1's holds slot 2.
    assert_eq!(live_entries(&mem), vec![(0, vec![1]), (8, vec![2])]);
    let head0 =
        entries_to_replay(&mem.scans(UUID)).into_iter().find(|e| e.entry.member_sector == 0);
    assert_eq!(head0.unwrap().entry.modified, vec![(1, full_mask(8))]);
}

/// A flush whose tail does not fit a ring resets the rings instead (an advance leaves them as
/// they are: only a full ring is reset); everything before it retires either way.
#[test]
fn a_flush_resets_full_rings() {
    // The run's first reset leaves a header (8 sectors) on every ring; each 4 KiB write on
    // its own head then takes a header and a block (16 sectors) of member 4's ring: after
    // ten of them, 4 sectors are left, too few for the tail's header.
    let ring = 8 + 10 * 16 + 4;
    let mut a = logged_array(ring);
    let mut mem = Mem::new(5);
    for i in 0..10u64 {
        write(&mut a, &mut mem, i * 8, pattern(10 + i, 4096));
    }
    let resets = a.log_stats().unwrap().2;
    a.submit_flush(ReqId(200));
    for (_, r, _) in run(&mut a, &mut mem) {
        r.unwrap();
    }
    assert_eq!(a.log_stats().unwrap().2, resets + 1, "a reset");
    assert_eq!(a.stats().log_advances, 0);
    assert!(live_entries(&mem).is_empty());
    // With room again, the next flush advances.
    write(&mut a, &mut mem, 0, pattern(40, 4096));
    assert_eq!(live_entries(&mem), vec![(0, vec![0])]);
    a.submit_flush(ReqId(201));
    for (_, r, _) in run(&mut a, &mut mem) {
        r.unwrap();
    }
    assert_eq!(a.log_stats().unwrap().2, resets + 1);
    assert_eq!(a.stats().log_advances, 1);
    assert!(live_entries(&mem).is_empty(), "retired by the tail");
}

/// A spare that joins while a reset writes its headers gets one of its own: another reset
/// follows. (With none at its ring's start a replay finds nothing there and drops every
/// generation that went to it; flushes no longer reset the log to cover that: seed 106193.)
#[test]
fn a_spare_joining_during_a_reset_gets_a_header() {
    let mut a = logged_array(LOG_RING_SECTORS);
    let mut mem = Mem::new(5);
    a.submit_write(ReqId(1), Sector(0), pattern(50, 4096));
    // The run's first reset: its member flushes (with the write's reads), then its headers.
    loop {
        let mut ios: Vec<MemberIo> = std::iter::from_fn(|| a.next_io()).collect();
        let headers = ios.iter().any(|io| io.area == IoArea::Log);
        // Member 4's first, while the other headers are still in flight.
        ios.sort_by_key(|io| io.member.get() != 4);
        for io in &ios {
            // Member 4's header write fails; a blank spare takes its place before the reset
            // is done.
            let fails = headers && io.member.get() == 4 && io.area == IoArea::Log;
            let ok = !fails && mem.perform(&mut a, io);
            a.complete_io(io.tag, ok);
            if fails {
                mem.rings[4].fill(0);
                a.start_recovery(DiskIndex(4), Sector(0));
            }
        }
        if headers {
            break;
        }
    }
    for (_, r, _) in run(&mut a, &mut mem) {
        r.unwrap();
    }
    assert_eq!(a.log_stats().unwrap().2, 2, "a second reset");
    let spare = scan_ring(&mem.rings[4], UUID, DiskIndex(4));
    assert!(!spare.headers.is_empty(), "the spare's ring starts with a header");
    // Its generations are found: the write's P entry is on member 4 (stripe 0's P).
    assert_eq!(live_entries(&mem), vec![(0, vec![0])]);
}
