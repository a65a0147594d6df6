//! The array engine on memory members, driven the way the runtime will drive it. Every test
//! reads back and verifies what it wrote; the counts are the seed lessons' minimums.

mod common;

use common::*;
use uraid_core::array::{ArrayError, MemberOp, ReqId};
use uraid_core::{DiskIndex, Level, Sector};

#[test]
fn write_then_read_back_everywhere() {
    for (level, disks) in [
        (Level::Raid4, 4),
        (Level::Raid5, 3),
        (Level::Raid5, 5),
        (Level::Raid6, 4),
        (Level::Raid6, 7),
    ] {
        let mut a = array(level, disks, 64 << 10, 4096);
        let mut mem = Mem::new(disks);
        let size = a.size_sectors();
        let mut expect = vec![0u8; (size * 512) as usize];
        // Unaligned writes of odd sizes, then a whole-array read.
        for (i, (start, sectors)) in
            [(0, 1), (7, 300), (129, 2000), (size - 130, 130), (1000, 1)].into_iter().enumerate()
        {
            let data = pattern(i as u64 + 1, (sectors * 512) as usize);
            expect[(start * 512) as usize..((start + sectors) * 512) as usize]
                .copy_from_slice(&data);
            write(&mut a, &mut mem, start, data);
        }
        assert_eq!(read(&mut a, &mut mem, 0, expect.len()), expect, "{level:?} x {disks}");
    }
}

#[test]
fn raid6_one_block_update_is_three_reads_three_writes_at_every_width() {
    for disks in 6..=10 {
        for (stripe_size, bytes) in [(4096u64, 4096usize), (64 << 10, 64 << 10)] {
            let mut a = array(Level::Raid6, disks, 64 << 10, stripe_size);
            let mut mem = Mem::new(disks);
            let before = mem.total();
            // One write per stripe (a cached stripe would need fewer reads), at varying data
            // slots and units, each one block inside a chunk.
            let data_disks = disks as u64 - 2;
            let units = (64 << 10) / bytes as u64;
            let block_sectors = bytes as u64 / 512;
            for i in 0..16u64 {
                let chunk = i * data_disks + (i * 3) % data_disks;
                let sector = chunk * 128 + (i * 5) % units * block_sectors;
                write(&mut a, &mut mem, sector, pattern(i, bytes));
            }
            let c = mem.total();
            assert_eq!(
                (c.reads - before.reads, c.writes - before.writes),
                (48, 48),
                "RAID6 x {disks}, {bytes}"
            );
            assert_eq!(c.read_bytes, 48 * bytes as u64);
        }
    }
}

#[test]
fn raid5_one_block_update_is_two_reads_two_writes() {
    let mut a = array(Level::Raid5, 6, 64 << 10, 4096);
    let mut mem = Mem::new(6);
    for i in 0..10u64 {
        write(&mut a, &mut mem, i * 1000 / 8 * 8, pattern(i, 4096));
    }
    let c = mem.total();
    assert_eq!((c.reads, c.writes), (20, 20));
}

#[test]
fn full_stripe_writes_read_nothing() {
    let mut a = array(Level::Raid6, 10, 128 << 10, 4096);
    let mut mem = Mem::new(10);
    let stripe_bytes = 8 * (128 << 10);
    write(&mut a, &mut mem, 0, pattern(5, stripe_bytes * 2));
    let c = mem.total();
    assert_eq!(c.reads, 0);
    assert_eq!(c.write_bytes, 2 * 10 * (128 << 10));
    // md's skip_copy: data goes to the members from the request buffer, parity is computed
    // from there; nothing is copied through the cache.
    assert_eq!(a.stats().bytes_copied, 0);
    assert_eq!(read(&mut a, &mut mem, 0, stripe_bytes * 2), pattern(5, stripe_bytes * 2));
    // The heads stay cached with stale data blocks: a partial update of those stripes must
    // read what it needs from the members, not the stale head copies.
    let mut data = pattern(5, stripe_bytes * 2);
    let upd = pattern(6, 4096);
    write(&mut a, &mut mem, 24, upd.clone());
    data[24 * 512..24 * 512 + 4096].copy_from_slice(&upd);
    assert_eq!(read(&mut a, &mut mem, 0, stripe_bytes * 2), data);
    for failed in [0u16, 9] {
        let mut d = array(Level::Raid6, 10, 128 << 10, 4096);
        d.fail_member(DiskIndex(failed));
        d.fail_member(DiskIndex(failed + 1 - 2 * (failed / 9)));
        assert_eq!(read(&mut d, &mut mem, 0, stripe_bytes * 2), data, "parity consistent");
    }
}

#[test]
fn healthy_reads_bypass_the_cache_and_degraded_reads_read_each_block_once() {
    let mut a = array(Level::Raid6, 10, 128 << 10, 4096);
    let mut mem = Mem::new(10);
    let bytes = (a.size_sectors() * 512) as usize;
    let data = pattern(9, bytes);
    write(&mut a, &mut mem, 0, data.clone());
    let copied = a.stats().bytes_copied;
    let before = mem.total();
    assert_eq!(read(&mut a, &mut mem, 0, bytes), data);
    let c = mem.total();
    assert_eq!(c.read_bytes - before.read_bytes, bytes as u64, "member bytes read = user bytes");
    assert_eq!(a.stats().bytes_copied, copied, "nothing copied through the cache");
    // One member fails (a fresh engine: nothing cached from the writes): sequential reads of
    // 4 KiB, 64 KiB and 1 MiB read every surviving data block and P once, Q never.
    for req in [4096, 64 << 10, 1 << 20] {
        let mut a = array(Level::Raid6, 10, 128 << 10, 4096);
        a.fail_member(DiskIndex(3));
        let before = mem.total();
        for off in (0..bytes).step_by(req) {
            let len = req.min(bytes - off);
            assert_eq!(read(&mut a, &mut mem, (off / 512) as u64, len), data[off..off + len]);
        }
        let c = mem.total();
        assert_eq!(
            c.read_bytes - before.read_bytes,
            bytes as u64,
            "degraded {req}: bytes read = user bytes"
        );
    }
}

#[test]
fn degraded_writes_read_back_and_a_failing_read_is_rebuilt() {
    let mut a = array(Level::Raid5, 5, 64 << 10, 4096);
    let mut mem = Mem::new(5);
    let bytes = (a.size_sectors() * 512) as usize;
    let mut data = pattern(3, bytes);
    write(&mut a, &mut mem, 0, data.clone());
    a.fail_member(DiskIndex(1));
    for (i, (start, sectors)) in [(3u64, 9u64), (128, 256), (900, 17)].into_iter().enumerate() {
        let new = pattern(100 + i as u64, (sectors * 512) as usize);
        data[(start * 512) as usize..((start + sectors) * 512) as usize].copy_from_slice(&new);
        write(&mut a, &mut mem, start, new);
    }
    assert_eq!(read(&mut a, &mut mem, 0, bytes), data);
    // A fresh array over the same members, with a read error on another member instead.
    let mut b = array(Level::Raid5, 5, 64 << 10, 4096);
    b.fail_member(DiskIndex(1));
    assert_eq!(read(&mut b, &mut mem, 0, bytes), data);
}

#[test]
fn a_read_error_on_a_healthy_member_is_rebuilt_from_parity() {
    let mut a = array(Level::Raid6, 6, 64 << 10, 4096);
    let mut mem = Mem::new(6);
    let bytes = (a.size_sectors() * 512) as usize;
    let data = pattern(11, bytes);
    write(&mut a, &mut mem, 0, data.clone());
    let mut b = array(Level::Raid6, 6, 64 << 10, 4096);
    mem.bad_reads.insert((2, 3));
    mem.bad_reads.insert((4, 100));
    assert_eq!(read(&mut b, &mut mem, 0, bytes), data);
    // md's read-error correction: rebuilt from parity and rewritten, the member stays in.
    assert_eq!(b.failed_members(), vec![]);
    assert!(mem.bad_reads.is_empty(), "the bad sectors were rewritten");
    assert_eq!(b.stats().read_errors_corrected, 2);
    // The rewritten blocks now read directly, and hold the right data.
    let before = mem.total().reads;
    assert_eq!(read(&mut b, &mut mem, 0, bytes), data);
    assert_eq!(b.stats().read_errors_corrected, 2);
    assert!(mem.total().reads > before);
    // A repeated failure (the rewrite fails too) fails the member; the data still reads.
    let mut c = array(Level::Raid6, 6, 64 << 10, 4096);
    mem.bad_reads.insert((1, 8));
    mem.bad_writes.insert((1, 8));
    assert_eq!(read(&mut c, &mut mem, 0, bytes), data);
    assert_eq!(c.failed_members(), vec![DiskIndex(1)]);
    assert_eq!(read(&mut c, &mut mem, 0, bytes), data);
}

/// A block rewritten over a read error goes with FUA: its contents may be in parity alone (a
/// crash tore the block where the log's replay could not read it), and a second crash must
/// not bring its torn sectors back under data already served from parity (simulator seed
/// 517). The user's own writes still go without.
#[test]
fn a_block_rewritten_over_a_read_error_is_durable_at_once() {
    let mut a = array(Level::Raid5, 5, 64 << 10, 4096);
    let mut mem = Mem::new(5);
    let bytes = (a.size_sectors() * 512) as usize;
    let data = pattern(15, bytes);
    write(&mut a, &mut mem, 0, data.clone());
    // Member 0's first block: stale on the medium (torn) and unreadable; parity has it right.
    mem.disks[0][..4096].fill(0xee);
    mem.durable[0][..4096].fill(0xee);
    mem.bad_reads.insert((0, 0));
    let mut a = array(Level::Raid5, 5, 64 << 10, 4096);
    assert_eq!(read(&mut a, &mut mem, 0, 4096), data[..4096]);
    assert_eq!(mem.durable[0][..4096], data[..4096], "the rewrite reached stable storage");
    let writes: Vec<(u16, u64, bool)> = mem
        .log
        .iter()
        .filter(|io| io.op == MemberOp::Write && io.area == uraid_core::array::IoArea::Data)
        .map(|io| (io.member.0, io.sector.0, io.fua))
        .collect();
    assert_eq!(writes.iter().filter(|w| w.2).collect::<Vec<_>>(), [&(0, 0, true)]);
    assert!(writes.len() > 5, "the first write went without FUA");
}

/// A read error inside a partial write's pre-reads: the block is rebuilt, the stripe written
/// with it, and the bad block rewritten.
#[test]
fn a_read_error_during_rmw_is_corrected() {
    let mut a = array(Level::Raid5, 5, 64 << 10, 4096);
    let mut mem = Mem::new(5);
    let bytes = (a.size_sectors() * 512) as usize;
    let mut data = pattern(12, bytes);
    write(&mut a, &mut mem, 0, data.clone());
    // Stripe 0 (left-symmetric, 5 disks): data on 0..=3, P on 4. Update a block on disk 0 while
    // disk 0's old block cannot be read.
    mem.bad_reads.insert((0, 0));
    let new = pattern(13, 4096);
    write(&mut a, &mut mem, 0, new.clone());
    data[..4096].copy_from_slice(&new);
    assert_eq!(a.failed_members(), vec![]);
    let mut fresh = array(Level::Raid5, 5, 64 << 10, 4096);
    assert_eq!(read(&mut fresh, &mut mem, 0, bytes), data);
    fresh.fail_member(DiskIndex(2));
    assert_eq!(read(&mut fresh, &mut mem, 0, bytes), data, "parity is consistent");
}

/// A read error on a block the write does not change: a reconstruct-write planned to read it,
/// the read failed, and the cheaper plan left (a read-modify-write) would not need the block.
/// The write still rebuilds it and rewrites it over the bad sector, as a read would: left
/// unreadable, the stripe would be one failure from losing it.
#[test]
fn a_read_error_on_a_block_the_write_leaves_is_corrected() {
    for (level, disks) in [(Level::Raid5, 4), (Level::Raid6, 5)] {
        let g = uraid_core::Geometry::new(level, level.default_layout(), disks, 4096).unwrap();
        let map = g.stripe_map(uraid_core::StripeNumber(0)).clone();
        let mut a = array(level, disks, 4096, 4096);
        let mut mem = Mem::new(disks);
        let bytes = (a.size_sectors() * 512) as usize;
        let mut data = pattern(14, bytes);
        write(&mut a, &mut mem, 0, data.clone());
        // Overwrite every data block of stripe 0 but the last (a reconstruct-write reads only
        // that one) while the last cannot be read.
        let last = *map.data_disk.last().unwrap();
        mem.bad_reads.insert((last.0, 0));
        let new = pattern(15, (map.data_disk.len() - 1) * 4096);
        data[..new.len()].copy_from_slice(&new);
        write(&mut a, &mut mem, 0, new);
        assert_eq!(a.failed_members(), vec![], "{level:?}");
        assert!(mem.bad_reads.is_empty(), "{level:?}: the bad sector was rewritten");
        assert_eq!(a.stats().read_errors_corrected, 1, "{level:?}");
        let mut fresh = array(level, disks, 4096, 4096);
        assert_eq!(read(&mut fresh, &mut mem, 0, bytes), data, "{level:?}");
        // Parity consistent: the first data block rebuilt with Q lost too (RAID6).
        fresh.fail_member(map.data_disk[0]);
        if let Some(q) = map.q_disk {
            fresh.fail_member(q);
        }
        assert_eq!(read(&mut fresh, &mut mem, 0, bytes), data, "{level:?}: parity is consistent");
    }
}

/// The same on a degraded RAID6, where parity that failed to read cannot be recomputed by a
/// plain reconstruct-write (a data block is on the failed member): the write rebuilds that
/// block from P, then recomputes P and Q and rewrites Q over its bad sector. Left stale, Q
/// would have rebuilt garbage once another member failed, had its sector read again.
#[test]
fn a_parity_read_error_during_a_degraded_rmw_is_corrected() {
    unreadable_parity_with_a_data_member_failed_is_rewritten(true);
}

/// As above with P unreadable: the block of the failed member can be rebuilt only from Q,
/// and P is recomputed and rewritten by a reconstruct-write; a read-modify-write would have
/// updated Q alone and left P stale, harmless while it stays unreadable but served as good
/// once a replacement's copy or a remapped sector made it readable (simulator seed 2051).
#[test]
fn an_unreadable_p_with_a_data_member_failed_is_rewritten_by_the_write() {
    unreadable_parity_with_a_data_member_failed_is_rewritten(false);
}

/// RAID6 of 6, data slot 0's member failed, Q (or P) unreadable in the first stripe unit,
/// a write to slot 1 there: the unreadable parity is rewritten over its bad sector, and the
/// data reads back with the other parity lost too.
fn unreadable_parity_with_a_data_member_failed_is_rewritten(q_unreadable: bool) {
    let g = uraid_core::Geometry::new(Level::Raid6, Level::Raid6.default_layout(), 6, 64 << 10)
        .unwrap();
    let map = g.stripe_map(uraid_core::StripeNumber(0)).clone();
    let mut a = array(Level::Raid6, 6, 64 << 10, 4096);
    let mut mem = Mem::new(6);
    let bytes = (a.size_sectors() * 512) as usize;
    let mut data = pattern(14, bytes);
    write(&mut a, &mut mem, 0, data.clone());
    let mut b = array(Level::Raid6, 6, 64 << 10, 4096);
    b.fail_member(map.data_disk[0]);
    let (bad, other) = if q_unreadable {
        (map.q_disk.unwrap(), map.p_disk.unwrap())
    } else {
        (map.p_disk.unwrap(), map.q_disk.unwrap())
    };
    mem.bad_reads.insert((bad.0, 0));
    // Slot 1's first block: an rmw would read it, P and Q.
    let at = 128;
    let new = pattern(15, 4096);
    write(&mut b, &mut mem, at, new.clone());
    data[at as usize * 512..at as usize * 512 + 4096].copy_from_slice(&new);
    assert!(mem.bad_reads.is_empty(), "the parity rewritten over its bad sector");
    assert_eq!(b.failed_members(), vec![map.data_disk[0]]);
    // Lose the other parity too: slot 0 now rebuilds from the rewritten one.
    let mut c = array(Level::Raid6, 6, 64 << 10, 4096);
    c.fail_member(map.data_disk[0]);
    c.fail_member(other);
    assert_eq!(read(&mut c, &mut mem, 0, bytes), data);
}

#[test]
fn beyond_redundancy_and_bad_requests_are_refused() {
    let mut a = array(Level::Raid5, 4, 64 << 10, 4096);
    let mut mem = Mem::new(4);
    a.submit_read(ReqId(1), Sector(a.size_sectors()), vec![0; 512]);
    a.submit_read(ReqId(2), Sector(0), vec![0; 100]);
    let done = run(&mut a, &mut mem);
    assert!(matches!(done[0].1, Err(ArrayError::OutOfRange { .. })));
    assert!(matches!(done[1].1, Err(ArrayError::Unaligned { bytes: 100 })));
    a.fail_member(DiskIndex(0));
    a.fail_member(DiskIndex(1));
    let size = a.size_sectors();
    a.submit_read(ReqId(3), Sector(0), vec![0; (size * 512) as usize]);
    a.submit_write(ReqId(4), Sector(8), vec![1; 4096]);
    let done = run(&mut a, &mut mem);
    assert_eq!(done.len(), 2);
    for (_, r, _) in done {
        assert_eq!(r, Err(ArrayError::BeyondRedundancy));
    }
}

#[test]
fn many_requests_in_flight_through_a_small_cache() {
    // 60 overlapping writes submitted at once through a 4-head cache (requests wait for heads),
    // then a read: the result is the writes applied in submission order.
    for (level, disks) in [(Level::Raid5, 5), (Level::Raid6, 6)] {
        let mut a = array_with_cache(level, disks, 16 << 10, 4096, 4);
        let mut mem = Mem::new(disks);
        let size = a.size_sectors();
        let mut expect = vec![0u8; (size * 512) as usize];
        for i in 0..60u64 {
            let start = (i * 7_477) % (size - 200);
            let sectors = 1 + (i * 37) % 190;
            let data = pattern(i + 50, (sectors * 512) as usize);
            expect[(start * 512) as usize..((start + sectors) * 512) as usize]
                .copy_from_slice(&data);
            a.submit_write(ReqId(i), Sector(start), data);
        }
        let done = run(&mut a, &mut mem);
        assert_eq!(done.len(), 60);
        assert!(done.iter().all(|(_, r, _)| r.is_ok()));
        assert_eq!(a.cache().allocated(), 4);
        assert_eq!(read(&mut a, &mut mem, 0, expect.len()), expect, "{level:?}");
    }
}

/// Seed 003: sequential writes smaller than a stripe, submitted together (plugged), are held
/// back until they fill their stripes and go out as full-stripe writes with no reads.
#[test]
fn plugged_partial_writes_fill_stripes_and_read_nothing() {
    let mut a = array(Level::Raid6, 8, 128 << 10, 4096);
    let mut mem = Mem::new(8);
    let stripe_bytes = 6 * (128 << 10);
    let total = stripe_bytes * 3;
    let data = pattern(21, total);
    a.plug();
    for (i, off) in (0..total).step_by(128 << 10).enumerate() {
        let chunk = data[off..off + (128 << 10)].to_vec();
        a.submit_write(ReqId(i as u64), Sector((off / 512) as u64), chunk);
    }
    assert!(a.busy(), "held-back writes keep the array busy");
    a.unplug();
    for (_, r, _) in run(&mut a, &mut mem) {
        r.unwrap();
    }
    assert_eq!(mem.total().reads, 0, "no pre-reads: every stripe was filled");
    assert_eq!(read(&mut a, &mut mem, 0, total), data);
}

/// A lone partial write is held only while the submitter is plugged; unplugging starts it
/// (read-modify-write), so nothing waits forever.
#[test]
fn a_lone_held_write_starts_at_unplug() {
    let mut a = array(Level::Raid5, 5, 64 << 10, 4096);
    let mut mem = Mem::new(5);
    a.plug();
    a.submit_write(ReqId(1), Sector(8), pattern(3, 4096));
    assert!(a.next_io().is_none(), "held while plugged");
    a.unplug();
    let done = run(&mut a, &mut mem);
    assert_eq!(done.len(), 1);
    assert_eq!(mem.total().reads, 2);
    assert_eq!(mem.total().writes, 2);
    assert_eq!(read(&mut a, &mut mem, 8, 4096), pattern(3, 4096));
}

/// A held write is not starved by a stream of full-stripe writes: after the preread-bypass
/// threshold it starts even though the submitter stays plugged.
#[test]
fn full_stripe_writes_do_not_starve_a_held_write() {
    use uraid_core::array::PREREAD_BYPASS_THRESHOLD;
    let mut a = array_with_cache(Level::Raid5, 3, 4096, 4096, 512);
    let mut mem = Mem::new(3);
    a.plug();
    a.submit_write(ReqId(0), Sector(0), pattern(1, 4096)); // half a stripe: held
    let stripe: u64 = 2 * 4096;
    let mut started = false;
    for s in 1..=(PREREAD_BYPASS_THRESHOLD + 2) {
        a.submit_write(ReqId(s), Sector(s * stripe / 512), pattern(s, stripe as usize));
        while let Some(io) = a.next_io() {
            if io.member.get() != 2 && io.sector.0 == 0 && io.op == MemberOp::Read {
                started = true;
            }
            let ok = mem.perform(&mut a, &io);
            a.complete_io(io.tag, ok);
        }
    }
    assert!(started, "the held write started while still plugged");
    a.unplug();
    let done = run(&mut a, &mut mem);
    assert!(done.iter().all(|(_, r, _)| r.is_ok()));
    assert_eq!(read(&mut a, &mut mem, 0, 4096), pattern(1, 4096));
}

/// FLUSH: every write acknowledged before it is durable (data and parity) when it completes,
/// and it pushes held-back writes out at once.
#[test]
fn flush_makes_acknowledged_writes_durable_and_pushes_held_writes() {
    let mut a = array(Level::Raid6, 6, 64 << 10, 4096);
    let mut mem = Mem::new(6);
    write(&mut a, &mut mem, 0, pattern(30, 3 << 20));
    assert_ne!(mem.durable, mem.disks, "nothing flushed yet");
    a.submit_flush(ReqId(99));
    let done = run(&mut a, &mut mem);
    assert_eq!(done.len(), 1);
    assert!(done[0].1.is_ok());
    assert_eq!(mem.durable, mem.disks, "data and parity durable");
    let flushes = mem.log.iter().filter(|io| io.op == MemberOp::Flush).count();
    assert_eq!(flushes, 6, "one flush per member");
    // A held-back partial write starts at a flush even while plugged (a fresh engine: nothing
    // cached, so the write needs pre-reads).
    let mut a = array(Level::Raid6, 6, 64 << 10, 4096);
    a.plug();
    a.submit_write(ReqId(1), Sector(16), pattern(31, 4096));
    assert!(a.next_io().is_none(), "held while plugged");
    a.submit_flush(ReqId(2));
    let first = a.next_io().expect("the flush pushed the held write out");
    assert_eq!(first.op, MemberOp::Read);
    let ok = mem.perform(&mut a, &first);
    a.complete_io(first.tag, ok);
    let done = run(&mut a, &mut mem);
    assert_eq!(done.len(), 2);
    a.unplug();
}

/// FUA: the write's data and parity member writes are all FUA; no other write is.
#[test]
fn fua_writes_send_data_and_parity_fua() {
    let mut a = array(Level::Raid6, 7, 64 << 10, 4096);
    let mut mem = Mem::new(7);
    a.plug();
    a.submit_write_fua(ReqId(1), Sector(8), pattern(40, 8192));
    let done = run(&mut a, &mut mem);
    assert!(done[0].1.is_ok(), "a FUA write is not held back even when plugged");
    a.unplug();
    let writes: Vec<_> = mem.log.iter().filter(|io| io.op == MemberOp::Write).collect();
    assert_eq!(writes.len(), 6, "two stripe heads: a data block, P and Q each");
    assert!(writes.iter().all(|io| io.fua));
    assert_eq!(mem.durable, mem.disks, "durable without a flush");
    write(&mut a, &mut mem, 64, pattern(41, 4096));
    assert!(mem.log.iter().filter(|io| io.op == MemberOp::Write).skip(6).all(|io| !io.fua));
}

/// Discard: whole stripes discarded on every member (parity too), partial ones written with
/// zeros; the range reads back as zeros, the rest is kept, and parity stays consistent.
#[test]
fn discard_zeroes_the_range_and_keeps_parity_consistent() {
    for (level, disks) in [(Level::Raid5, 4), (Level::Raid6, 6)] {
        let mut a = array(level, disks, 16 << 10, 4096);
        let mut mem = Mem::new(disks);
        let bytes = (a.size_sectors() * 512) as usize;
        let mut data = pattern(50, bytes);
        write(&mut a, &mut mem, 0, data.clone());
        let stripe = (disks - usize::from(level.max_degraded())) * (16 << 10);
        // From the middle of stripe 1 to the middle of stripe 5.
        let (from, to) = (stripe + 12 * 512, 5 * stripe + 4096);
        a.submit_discard(ReqId(7), Sector((from / 512) as u64), ((to - from) / 512) as u64);
        let done = run(&mut a, &mut mem);
        assert!(done[0].1.is_ok());
        data[from..to].fill(0);
        let discards: u64 =
            mem.log.iter().filter(|io| io.op == MemberOp::Discard).map(|io| io.sectors * 512).sum();
        assert_eq!(
            discards,
            (3 * stripe / (disks - usize::from(level.max_degraded())) * disks) as u64
        );
        assert_eq!(read(&mut a, &mut mem, 0, bytes), data);
        for failed in 0..disks {
            let mut d = array(level, disks, 16 << 10, 4096);
            d.fail_member(DiskIndex(failed as u16));
            assert_eq!(read(&mut d, &mut mem, 0, bytes), data, "member {failed} failed");
        }
    }
}

/// The runtime completes member I/O in batches, not one by one: a failed rewrite fails the
/// member in the middle of a whole-array read, and every byte still reads back right.
#[test]
fn a_failed_rewrite_fails_the_member_with_io_completing_in_batches() {
    let mut a = array_with_cache(Level::Raid5, 4, 64 << 10, 4096, 64);
    let mut mem = Mem::new(4);
    let bytes = (a.size_sectors() * 512) as usize;
    let data = pattern(11, bytes);
    write(&mut a, &mut mem, 0, data.clone());
    let mut c = array_with_cache(Level::Raid5, 4, 64 << 10, 4096, 64);
    for s in 16..24 {
        mem.bad_reads.insert((2, s));
        mem.bad_writes.insert((2, s));
    }
    c.submit_read(ReqId(5), Sector(0), vec![0u8; bytes]);
    loop {
        let mut batch = Vec::new();
        while let Some(io) = c.next_io() {
            batch.push(io);
        }
        if batch.is_empty() {
            break;
        }
        let results: Vec<bool> = batch.iter().map(|io| mem.perform(&mut c, io)).collect();
        for (io, ok) in batch.iter().zip(results) {
            c.complete_io(io.tag, ok);
        }
    }
    let got = c.take_completed().pop().unwrap().2;
    assert!(got == data);
    assert_eq!(c.failed_members(), vec![DiskIndex(2)]);
}

/// md's stripe_cache_size changes while requests are in flight: growing starts waiting work,
/// shrinking frees heads as they go idle; everything reads back.
#[test]
fn stripe_cache_size_changes_while_running() {
    let mut a = array_with_cache(Level::Raid6, 6, 16 << 10, 4096, 2);
    let mut mem = Mem::new(6);
    let size = a.size_sectors();
    let mut model = vec![0u8; (size * 512) as usize];
    for i in 0..40u64 {
        let sector = (i * 37) % (size - 16);
        let data = pattern(i + 100, 8 * 512);
        model[(sector * 512) as usize..][..data.len()].copy_from_slice(&data);
        a.submit_write(ReqId(i), Sector(sector), data);
    }
    for (step, heads) in [(5, 64), (20, 1), (30, 16)] {
        for _ in 0..step {
            if let Some(io) = a.next_io() {
                let ok = mem.perform(&mut a, &io);
                a.complete_io(io.tag, ok);
            }
        }
        a.set_stripe_cache_size(heads).unwrap();
        assert!(a.cache().allocated() >= heads.min(a.cache().active()));
    }
    let done = run(&mut a, &mut mem);
    assert_eq!(done.len(), 40);
    assert!(done.iter().all(|(_, r, _)| r.is_ok()));
    assert_eq!(a.cache().allocated(), 16);
    assert_eq!(a.set_stripe_cache_size(0), Err(ArrayError::BadCacheSize));
    // Past md's largest: refused, not allocated (a typo's extra digits ran a machine out of
    // memory).
    assert_eq!(a.set_stripe_cache_size(32769), Err(ArrayError::BadCacheSize));
    assert_eq!(a.cache().allocated(), 16);
    assert_eq!(read(&mut a, &mut mem, 0, model.len()), model);
}
