//! The write-back of a stream's partial stripes (`array/write_back.rs`): a stream's writes are
//! acknowledged before any member I/O, held until the stream fills their stripes, and written
//! as full stripes; a flush, a read, the caller's timer or the hold's age end the hold.

mod common;

use common::*;
use uraid_core::array::{Array, MemberOp, ReqId};
use uraid_core::{Level, Sector};

const BLOCK: usize = 4096;

/// RAID5 x4, 64 KiB chunks, 4 KiB stripe heads, the write-back on.
fn stream_array() -> (Array, Mem) {
    let mut a = array(Level::Raid5, 4, CHUNK_64K, 4096);
    a.set_write_back(true);
    (a, Mem::new(4))
}

/// Submits 4 KiB write `i` of a stream from sector 0; returns the requests finished with no
/// member I/O performed.
fn submit(a: &mut Array, i: u64) -> Vec<ReqId> {
    a.submit_write(ReqId(i), Sector(i * 8), pattern(i, BLOCK));
    finished(a)
}

/// A stream of `n` writes from sector 0: the first two written, the rest held.
fn held_stream(n: u64) -> (Array, Mem) {
    let (mut a, mut mem) = stream_array();
    for i in 0..2 {
        submit(&mut a, i);
        run(&mut a, &mut mem);
    }
    for i in 2..n {
        assert_eq!(submit(&mut a, i), vec![ReqId(i)], "write {i} held");
    }
    (a, mem)
}

fn stream_data(n: u64) -> Vec<u8> {
    (0..n).flat_map(|i| pattern(i, BLOCK)).collect()
}

#[test]
fn a_stream_at_depth_1_writes_whole_stripes_with_no_reads() {
    let (mut a, mut mem) = stream_array();
    // Two stripes (3 data blocks of 16 heads each), one write at a time.
    let n = 96;
    for i in 0..n {
        let done = submit(&mut a, i);
        if i >= 2 && i % 48 < 32 {
            // It continues a write that continued another: held, acknowledged at once.
            assert_eq!(done, vec![ReqId(i)], "write {i} acknowledged before any member I/O");
            assert!(drain(&mut a).is_empty(), "write {i} held");
        } else {
            // A stream's first two, and the third data member's blocks, which leave no
            // read to do: written at once, acknowledged when written.
            assert!(done.is_empty(), "write {i} waits for its member I/O");
            run(&mut a, &mut mem);
        }
    }
    // The two first writes (not yet a stream's) were read-modify-writes (2 reads each); the
    // rest went out whole (units 0 and 1 of stripe 0 with their first block still cached).
    assert_eq!(mem.total().reads, 4);
    assert!(!a.holds_writes_back());
    assert_eq!(a.stats().stripe_writes_full, 30, "{:?}", a.stats());
    assert_eq!(a.stats().writes_held_back, 62, "{:?}", a.stats());
    assert_eq!(read(&mut a, &mut mem, 0, n as usize * BLOCK), stream_data(n));
    assert_consistent(&mut a, &mut mem, 2);
}

#[test]
fn a_flush_makes_held_writes_durable_before_it_completes() {
    let (mut a, mut mem) = held_stream(10);
    assert!(drain(&mut a).is_empty(), "held: nothing written");
    a.submit_flush(ReqId(100));
    let mut flushed = false;
    loop {
        // Member flushes first: a flush sent beside the writes would overtake them.
        let mut ios = drain(&mut a);
        if ios.is_empty() {
            break;
        }
        ios.sort_by_key(|io| io.op != MemberOp::Flush);
        complete(&mut a, &mut mem, ios);
        assert!(!flushed);
        flushed = finished(&mut a).contains(&ReqId(100));
    }
    assert!(flushed, "the flush completed");
    // What the members made durable holds every write acknowledged before the flush.
    for i in 0..10u64 {
        let (disk, at) = (0usize, usize::try_from(i * 8 * 512).unwrap());
        // Stream blocks 0..16 are data disk 0's first chunk (left-symmetric: member 0).
        assert_eq!(&mem.durable[disk][at..at + BLOCK], &pattern(i, BLOCK)[..], "block {i}");
    }
    assert!(!a.holds_writes_back());
}

#[test]
fn a_read_of_a_held_write_returns_it() {
    let (mut a, mut mem) = held_stream(6);
    assert_eq!(read(&mut a, &mut mem, 3 * 8, BLOCK), pattern(3, BLOCK));
    assert_eq!(read(&mut a, &mut mem, 0, 6 * BLOCK), stream_data(6));
}

#[test]
fn random_writes_and_a_streams_first_two_are_not_held() {
    let (mut a, mut mem) = stream_array();
    // A write that begins where another ended, once, is not held: by chance, random ones do.
    for (i, block) in [(0u64, 40u64), (1, 7), (2, 8), (3, 100)] {
        a.submit_write(ReqId(i), Sector(block * 8), pattern(i, BLOCK));
        assert!(finished(&mut a).is_empty(), "write {i} waits for its member I/O");
        run(&mut a, &mut mem);
    }
    assert_eq!(a.stats().writes_held_back, 0);
    assert!(!a.holds_writes_back());
}

#[test]
fn a_hold_ends_once_four_stripes_of_writes_came_since() {
    let (mut a, mut mem) = stream_array();
    // A stream of three writes that stops within stripe 0: its third is held.
    for i in 0..3 {
        submit(&mut a, i);
        run(&mut a, &mut mem);
    }
    assert!(a.holds_writes_back());
    // Another stream far away, 4 stripes of 192 KiB (its own heads held and filled).
    let far = 3 * 384; // stripe 3
    for i in 0..192u64 {
        a.submit_write(ReqId(10 + i), Sector(far + i * 8), pattern(10 + i, BLOCK));
        run(&mut a, &mut mem);
    }
    assert!(a.holds_writes_back(), "the far stream's last heads");
    // One more write: four stripes' worth since stripe 0's head was held.
    a.submit_write(ReqId(300), Sector(far + 192 * 8), pattern(300, BLOCK));
    run(&mut a, &mut mem);
    let members_hold_it = (0..4).any(|m| mem.disks[m][2 * 4096..3 * 4096] == pattern(2, BLOCK));
    assert!(members_hold_it, "stripe 0's held write went to its member");
    assert_eq!(read(&mut a, &mut mem, 2 * 8, BLOCK), pattern(2, BLOCK));
}

#[test]
fn the_timer_releases_held_writes_and_nothing_is_lost() {
    for level in [Level::Raid5, Level::Raid6] {
        let disks = if level == Level::Raid6 { 6 } else { 4 };
        let mut a = array(level, disks, CHUNK_64K, 4096);
        a.set_write_back(true);
        let mut mem = Mem::new(disks);
        // 50 writes: stripes left partial, held until the timer.
        for i in 0..50 {
            a.submit_write(ReqId(i), Sector(i * 8), pattern(i, BLOCK));
            run(&mut a, &mut mem);
        }
        assert!(a.holds_writes_back());
        a.release_held_writes();
        run(&mut a, &mut mem);
        assert!(!a.holds_writes_back());
        assert_consistent(&mut a, &mut mem, 1);
        let mut fresh = array(level, disks, CHUNK_64K, 4096);
        assert_eq!(read(&mut fresh, &mut mem, 0, 50 * BLOCK), stream_data(50), "{level:?}");
    }
}

#[test]
fn a_stream_longer_than_the_cache_is_held_throughout() {
    // 32 heads, ten stripes of 16: the stream reuses every head several times. A hold's
    // entry left from a head's earlier stripe once released the head's later hold at once
    // (224 reads, 62 full-stripe writes of 160).
    let (mut a, mut mem) = stream_array();
    a.set_stripe_cache_size(32).unwrap();
    let n = 480;
    for i in 0..n {
        submit(&mut a, i);
        run(&mut a, &mut mem);
    }
    assert_eq!(mem.total().reads, 4, "only the first two writes read: {:?}", a.stats());
    assert_eq!(a.stats().stripe_writes_full, 158, "{:?}", a.stats());
    assert_eq!(read(&mut a, &mut mem, 0, n as usize * BLOCK), stream_data(n));
    assert_consistent(&mut a, &mut mem, 2);
}
