//! md's sync requests on memory members: check finds and locates mismatches, repair fixes
//! them (RAID6: the data block the syndrome names), resync makes parity follow the data, and
//! recovery rebuilds a replaced member while reads and writes go on.

mod common;

use common::*;
use uraid_core::array::{Array, ReqId, SyncKind};
use uraid_core::{DiskIndex, Geometry, Level, Sector};

const CHUNK: u64 = 16 << 10;

fn sync(a: &mut Array, mem: &mut Mem, kind: SyncKind, from: u64, sectors: u64) {
    a.submit_sync(ReqId(1000), kind, Sector(from), sectors);
    let done = run(a, mem);
    assert_eq!(done.len(), 1);
    done[0].1.clone().unwrap();
}

/// The member block of the stripe unit at member sector `at` for data slot `slot`.
fn member_of(level: Level, disks: usize, at: u64, slot: usize) -> usize {
    let g = Geometry::new(level, level.default_layout(), disks, CHUNK).unwrap();
    let stripe = uraid_core::StripeNumber(at / g.chunk_sectors());
    g.stripe_map(stripe).data_disk[slot].get()
}

fn parity_member(level: Level, disks: usize, at: u64, q: bool) -> usize {
    let g = Geometry::new(level, level.default_layout(), disks, CHUNK).unwrap();
    let map = g.stripe_map(uraid_core::StripeNumber(at / g.chunk_sectors()));
    if q { map.q_disk.unwrap().get() } else { map.p_disk.unwrap().get() }
}

fn every_degraded_read_matches(level: Level, disks: usize, mem: &mut Mem, data: &[u8]) {
    for failed in 0..disks {
        let mut d = array(level, disks, CHUNK, 4096);
        d.fail_member(DiskIndex(failed as u16));
        assert!(read(&mut d, mem, 0, data.len()) == data, "member {failed} failed");
    }
}

#[test]
fn check_counts_and_locates_repair_fixes() {
    for (level, disks) in [(Level::Raid5, 5), (Level::Raid6, 6)] {
        let mut a = array(level, disks, CHUNK, 4096);
        let mut mem = Mem::new(disks);
        let bytes = (a.size_sectors() * 512) as usize;
        let data = pattern(1, bytes);
        write(&mut a, &mut mem, 0, data.clone());
        let member_sectors = MEMBER_SECTORS;
        let mut a = array(level, disks, CHUNK, 4096);
        sync(&mut a, &mut mem, SyncKind::Check, 0, member_sectors);
        assert_eq!(a.mismatches().1, 0, "a fresh array is consistent");
        // Corrupt P at member sector 40 (stripe unit 5 of stripe 1).
        let p = parity_member(level, disks, 40, false);
        mem.disks[p][40 * 512 + 100] ^= 0x5a;
        let mut a = array(level, disks, CHUNK, 4096);
        sync(&mut a, &mut mem, SyncKind::Check, 0, member_sectors);
        let (found, count) = a.mismatches();
        assert_eq!(count, 8, "one 4 KiB unit");
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].member_sector, Sector(40));
        let located = (level == Level::Raid6).then_some(DiskIndex(p as u16));
        assert_eq!(found[0].member, located, "RAID6 names P; RAID5 cannot tell");
        assert_ne!(mem.disks[p][40 * 512 + 100], {
            let mut fresh = Mem::new(disks);
            let mut b = array(level, disks, CHUNK, 4096);
            write(&mut b, &mut fresh, 0, data.clone());
            fresh.disks[p][40 * 512 + 100]
        });
        let mut a = array(level, disks, CHUNK, 4096);
        sync(&mut a, &mut mem, SyncKind::Repair, 0, member_sectors);
        assert_eq!(a.mismatches().1, 8);
        let mut a = array(level, disks, CHUNK, 4096);
        sync(&mut a, &mut mem, SyncKind::Check, 0, member_sectors);
        assert_eq!(a.mismatches().1, 0, "repaired");
        every_degraded_read_matches(level, disks, &mut mem, &data);
    }
}

/// RAID6: the syndrome names a bad data block; repair corrects that block (md would rewrite
/// P and Q and keep the bad data).
#[test]
fn raid6_repair_corrects_the_data_block_the_syndrome_names() {
    let (level, disks) = (Level::Raid6, 7);
    let mut a = array(level, disks, CHUNK, 4096);
    let mut mem = Mem::new(disks);
    let bytes = (a.size_sectors() * 512) as usize;
    let data = pattern(2, bytes);
    write(&mut a, &mut mem, 0, data.clone());
    let at = 3 * (CHUNK / 512) + 8; // stripe 3, unit 1
    let bad = member_of(level, disks, at, 2);
    for i in 0..50 {
        mem.disks[bad][(at * 512) as usize + i * 13] ^= 0xff - i as u8;
    }
    let mut a = array(level, disks, CHUNK, 4096);
    sync(&mut a, &mut mem, SyncKind::Check, 0, MEMBER_SECTORS);
    let (found, count) = a.mismatches();
    assert_eq!((count, found.len()), (8, 1));
    assert_eq!(found[0].member, Some(DiskIndex(bad as u16)));
    let mut a = array(level, disks, CHUNK, 4096);
    sync(&mut a, &mut mem, SyncKind::Repair, 0, MEMBER_SECTORS);
    let mut a = array(level, disks, CHUNK, 4096);
    assert_eq!(read(&mut a, &mut mem, 0, bytes), data, "the data block itself was corrected");
    sync(&mut a, &mut mem, SyncKind::Check, 0, MEMBER_SECTORS);
    assert_eq!(a.mismatches().1, 0);
}

/// RAID6 missing one member still checks the parity it has left (md's handle_parity_checks6):
/// Q lost, P against the data; data or P lost, Q against the data (a lost data block computed
/// from P). A mismatch names no member (one parity cannot locate it); repair rewrites the
/// parity checked. Such stripes were skipped, and the check said 0 mismatches.
#[test]
fn raid6_missing_one_member_checks_the_parity_left() {
    let (level, disks) = (Level::Raid6, 7);
    let at = 3 * (CHUNK / 512) + 8; // stripe 3, unit 1
    let (p, q) = (parity_member(level, disks, at, false), parity_member(level, disks, at, true));
    let (d0, d2) = (member_of(level, disks, at, 0), member_of(level, disks, at, 2));
    // (lost, corrupted, rewritten by repair)
    for (lost, bad, rewritten) in [(d0, d2, q), (p, d2, q), (q, p, p), (d0, q, q)] {
        let mut a = array(level, disks, CHUNK, 4096);
        let mut mem = Mem::new(disks);
        let bytes = (a.size_sectors() * 512) as usize;
        write(&mut a, &mut mem, 0, pattern(3, bytes));
        // The lost member's blocks must not be read: make them garbage.
        mem.disks[lost].iter_mut().for_each(|b| *b = !*b);
        let degraded = || {
            let mut a = array(level, disks, CHUNK, 4096);
            a.fail_member(DiskIndex(lost as u16));
            a
        };
        let mut a = degraded();
        sync(&mut a, &mut mem, SyncKind::Check, 0, MEMBER_SECTORS);
        assert_eq!(a.mismatches().1, 0, "lost {lost}: consistent");
        for i in 0..20 {
            mem.disks[bad][(at * 512) as usize + i * 7] ^= 0x3c;
        }
        let before_repair = mem.disks[rewritten].clone();
        let mut a = degraded();
        sync(&mut a, &mut mem, SyncKind::Check, 0, MEMBER_SECTORS);
        let (found, count) = a.mismatches();
        assert_eq!((count, found.len()), (8, 1), "lost {lost}, {bad} corrupted");
        assert_eq!((found[0].member_sector, found[0].member), (Sector(at), None));
        let mut a = degraded();
        sync(&mut a, &mut mem, SyncKind::Repair, 0, MEMBER_SECTORS);
        assert_eq!(a.mismatches().1, 8);
        let changed: Vec<usize> = (0..before_repair.len())
            .filter(|&i| before_repair[i] != mem.disks[rewritten][i])
            .collect();
        assert!(
            changed.iter().all(|&i| (i as u64 / 4096) == at / 8) && !changed.is_empty(),
            "lost {lost}: repair rewrote member {rewritten} in that unit only"
        );
        let mut a = degraded();
        sync(&mut a, &mut mem, SyncKind::Check, 0, MEMBER_SECTORS);
        assert_eq!(a.mismatches().1, 0, "lost {lost}: repaired");
    }
}

/// Resync after an unclean shutdown: parity follows the data.
#[test]
fn resync_makes_parity_follow_the_data() {
    for (level, disks) in [(Level::Raid5, 4), (Level::Raid6, 6)] {
        let mut a = array(level, disks, CHUNK, 4096);
        let mut mem = Mem::new(disks);
        let bytes = (a.size_sectors() * 512) as usize;
        let mut data = pattern(3, bytes);
        write(&mut a, &mut mem, 0, data.clone());
        // A crash mid-write: a data block reached its member, P and Q did not.
        let at = 2 * (CHUNK / 512);
        let d = member_of(level, disks, at, 0);
        let new = pattern(4, 4096);
        mem.disks[d][(at * 512) as usize..][..4096].copy_from_slice(&new);
        let array_at = (2 * (disks - usize::from(level.max_degraded())) as u64 * CHUNK) as usize;
        data[array_at..array_at + 4096].copy_from_slice(&new);
        let mut a = array(level, disks, CHUNK, 4096);
        sync(&mut a, &mut mem, SyncKind::Resync, 0, MEMBER_SECTORS);
        assert_eq!(a.mismatches().1, 8);
        assert_eq!(read(&mut a, &mut mem, 0, bytes), data, "data kept");
        every_degraded_read_matches(level, disks, &mut mem, &data);
    }
}

/// Recovery onto a replacement member in windows while reads and writes go on: nothing is
/// read from it above its recovery offset, writes there are left to recovery, and at the end
/// it holds exactly what it should.
#[test]
fn recovery_rebuilds_a_replacement_while_io_continues() {
    for (level, disks, target) in [(Level::Raid5, 5, 1u16), (Level::Raid6, 6, 4)] {
        let mut a = array(level, disks, CHUNK, 4096);
        let mut mem = Mem::new(disks);
        let bytes = (a.size_sectors() * 512) as usize;
        let mut data = pattern(5, bytes);
        write(&mut a, &mut mem, 0, data.clone());
        // The member dies and a blank replacement takes its slot.
        a.fail_member(DiskIndex(target));
        mem.disks[usize::from(target)].fill(0);
        a.start_recovery(DiskIndex(target), Sector(0));
        let window = 96; // sectors: not a multiple of the chunk, on purpose
        let mut at = 0;
        let mut step = 0u64;
        while at < MEMBER_SECTORS {
            let n = window.min(MEMBER_SECTORS - at);
            sync(&mut a, &mut mem, SyncKind::Recovery, at, n);
            at += n;
            a.set_recovery_offset(DiskIndex(target), Sector(at));
            // User I/O between windows: a write and a whole-array read.
            step += 1;
            let off = ((step * 7919 * 512) as usize) % (bytes - 8192) / 512 * 512;
            let new = pattern(100 + step, 8192);
            write(&mut a, &mut mem, (off / 512) as u64, new.clone());
            data[off..off + 8192].copy_from_slice(&new);
            let reads_before = mem.counts[usize::from(target)].read_bytes;
            let got = read(&mut a, &mut mem, 0, bytes);
            if let Some(i) = (0..bytes).find(|&i| got[i] != data[i]) {
                panic!("{level:?}: byte {i} wrong after window ending at {at} (write at {off})");
            }
            let read_from_target = mem.counts[usize::from(target)].read_bytes - reads_before;
            assert!(read_from_target <= at * 512, "never read above the recovery offset");
        }
        assert!(a.recovering().is_empty());
        assert_eq!(a.failed_members(), vec![]);
        every_degraded_read_matches(level, disks, &mut mem, &data);
        let mut fresh = array(level, disks, CHUNK, 4096);
        sync(&mut fresh, &mut mem, SyncKind::Check, 0, MEMBER_SECTORS);
        assert_eq!(fresh.mismatches().1, 0);
    }
}

/// A head recovery rebuilt vouches for itself only: a read of the rest of its chunk on the
/// member being recovered must still be rebuilt from parity, not read from the member
/// (found by the simulator: the chunk's last head rebuilt made the whole chunk look in
/// sync, and a direct read returned the blank replacement's contents).
#[test]
fn a_rebuilt_head_does_not_vouch_for_the_rest_of_its_chunk() {
    let (level, disks, target) = (Level::Raid5, 4, 1u16);
    let mut a = array(level, disks, CHUNK, 4096);
    let mut mem = Mem::new(disks);
    let bytes = (a.size_sectors() * 512) as usize;
    let data = pattern(9, bytes);
    write(&mut a, &mut mem, 0, data.clone());
    a.fail_member(DiskIndex(target));
    mem.disks[usize::from(target)].fill(0xee);
    a.start_recovery(DiskIndex(target), Sector(0));
    // Only the last stripe unit of the first chunk is rebuilt; the offset stays at 0.
    let chunk_sectors = CHUNK / 512;
    sync(&mut a, &mut mem, SyncKind::Recovery, chunk_sectors - 8, 8);
    let got = read(&mut a, &mut mem, 0, bytes);
    if let Some(i) = (0..bytes).find(|&i| got[i] != data[i]) {
        panic!("byte {i} read from the unrebuilt part of the replacement");
    }
}

/// A read error on parity during a read-modify-write: parity is computed from the data
/// (reconstruct-write) and rewritten, which heals the sector; it must not be left stale with
/// only the data written (found by the simulator: the write was acknowledged with P stale).
#[test]
fn a_parity_read_error_in_rmw_rewrites_parity_from_the_data() {
    for (level, disks) in [(Level::Raid5, 5), (Level::Raid6, 6)] {
        let mut first = array(level, disks, CHUNK, 4096);
        let mut mem = Mem::new(disks);
        let stripe_bytes = (CHUNK as usize) * (disks - level.max_degraded() as usize);
        write(&mut first, &mut mem, 0, pattern(1, stripe_bytes));
        let p = parity_member(level, disks, 0, false) as u16;
        mem.bad_reads.insert((p, 0));
        // A fresh engine: nothing cached, so the one-unit write is a read-modify-write.
        let mut a = array(level, disks, CHUNK, 4096);
        write(&mut a, &mut mem, 0, pattern(2, 4096));
        assert!(!mem.bad_reads.contains(&(p, 0)), "{level:?}: P rewritten over the bad sector");
        let mut fresh = array(level, disks, CHUNK, 4096);
        sync(&mut fresh, &mut mem, SyncKind::Check, 0, MEMBER_SECTORS);
        assert_eq!(fresh.mismatches().1, 0, "{level:?}: parity follows the data");
    }
}

/// A member lost while a degraded read's blocks are being read (failed by the runtime, or by
/// another head's I/O): the head plans again with the parity the new loss needs instead of
/// rebuilding from too little (found by the simulator: RAID6 rebuilt two blocks from P alone).
#[test]
fn a_member_lost_during_a_degraded_read_makes_the_head_plan_again() {
    let (level, disks) = (Level::Raid6, 6);
    let mut first = array(level, disks, CHUNK, 4096);
    let mut mem = Mem::new(disks);
    let bytes = (CHUNK as usize) * 4;
    let data = pattern(3, bytes);
    write(&mut first, &mut mem, 0, data.clone());
    let mut a = array(level, disks, CHUNK, 4096);
    let lost = member_of(level, disks, 0, 0);
    let second = member_of(level, disks, 0, 1);
    a.fail_member(DiskIndex(lost as u16));
    a.submit_read(ReqId(7), Sector(0), vec![0u8; 4096]);
    let mut ios = Vec::new();
    while let Some(io) = a.next_io() {
        ios.push(io);
    }
    // The second member's block arrives, then that member is lost before the rest arrive.
    ios.sort_by_key(|io| io.member.get() != second);
    for (i, io) in ios.iter().enumerate() {
        let ok = mem.perform(&mut a, io);
        a.complete_io(io.tag, ok);
        if i == 0 {
            a.fail_member(DiskIndex(second as u16));
        }
    }
    let done = run(&mut a, &mut mem);
    assert_eq!(done.len(), 1);
    assert!(done[0].2 == data[..4096], "the block rebuilt from P and Q");
}
