//! A recovery that meets a block it cannot rebuild (a survivor's sector unreadable with the
//! array degraded to its limit) lists it in the rebuilt member's bad block log, and the
//! unreadable one in its own member's, and goes on, as md does: the array is whole again,
//! exactly the lost blocks read as errors, the rest reads back, and a write there makes them
//! good. A member whose log refuses the listing stops the recovery as before.

mod common;

use common::*;
use uraid_core::array::{Array, ArrayError, ReqId, SyncKind};
use uraid_core::{DiskIndex, Geometry, Level, Sector};

const CHUNK: u64 = 16 << 10;
/// The survivor's unreadable member sectors: 30 stripe heads of 4 KiB, more than the read
/// errors a member may have corrected before it is failed (20).
const BAD: std::ops::Range<u64> = 200..440;

fn recover_all(a: &mut Array, mem: &mut Mem, targets: &[u16]) -> Vec<Result<(), ArrayError>> {
    let mut results = Vec::new();
    let window = 128;
    let mut at = 0;
    while at < MEMBER_SECTORS {
        let n = window.min(MEMBER_SECTORS - at);
        a.submit_sync(ReqId(1000 + at), SyncKind::Recovery, Sector(at), n);
        let done = run(a, mem);
        assert_eq!(done.len(), 1);
        results.push(done[0].1.clone());
        if done[0].1.is_err() {
            break; // as the runtime's recovery stops
        }
        at += n;
        for &t in targets {
            a.set_recovery_offset(DiskIndex(t), Sector(at));
        }
    }
    results
}

/// Reads the array one stripe unit at a time: Err where the unit is lost.
fn read_units(a: &mut Array, mem: &mut Mem) -> Vec<Result<Vec<u8>, ArrayError>> {
    let units = a.size_sectors() / 8;
    (0..units)
        .map(|u| {
            a.submit_read(ReqId(u), Sector(u * 8), vec![0; 4096]);
            let (_, r, buf) = run(a, mem).pop().unwrap();
            r.map(|()| buf)
        })
        .collect()
}

#[test]
fn a_recovery_lists_what_it_cannot_rebuild_and_goes_on() {
    // RAID5: one member rebuilt; RAID6: two, with a third member's sectors unreadable.
    for (level, disks, targets, survivor) in
        [(Level::Raid5, 4, vec![1u16], 2u16), (Level::Raid6, 6, vec![0, 4], 3)]
    {
        let g = Geometry::new(level, level.default_layout(), disks, CHUNK).unwrap();
        let mut a = array(level, disks, CHUNK, 4096);
        let mut mem = Mem::new(disks);
        let bytes = (a.size_sectors() * 512) as usize;
        let data = pattern(11, bytes);
        write(&mut a, &mut mem, 0, data.clone());
        for &t in &targets {
            a.fail_member(DiskIndex(t));
            mem.disks[usize::from(t)].fill(0xee);
            a.start_recovery(DiskIndex(t), Sector(0));
        }
        mem.bad_reads.extend(BAD.map(|s| (survivor, s)));
        let results = recover_all(&mut a, &mut mem, &targets);
        assert!(results.iter().all(Result::is_ok), "{level:?}: {results:?}");
        assert!(a.recovering().is_empty(), "{level:?}: every member rebuilt");
        assert_eq!(a.failed_members(), vec![], "{level:?}: the survivor stays");
        let heads = (BAD.end - BAD.start) / 8;
        let want = heads * 8 * targets.len() as u64;
        assert_eq!(a.stats().sectors_listed_bad, want, "{level:?}");
        for &m in targets.iter().chain([&survivor]) {
            let listed: Vec<u64> = mem.listed.iter().filter(|l| l.0 == m).map(|l| l.1).collect();
            assert_eq!(listed, BAD.collect::<Vec<_>>(), "{level:?}: member {m}'s list");
        }
        // Exactly the blocks of the lost members in those rows read as errors.
        let lost_member = |m: u16| targets.contains(&m) || m == survivor;
        for (u, got) in read_units(&mut a, &mut mem).into_iter().enumerate() {
            let at = g.map_sector(Sector(u as u64 * 8));
            let lost = lost_member(at.disk.0) && BAD.contains(&at.member_sector.0);
            let want = &data[u * 4096..(u + 1) * 4096];
            match got {
                Ok(buf) => assert!(!lost && buf == want, "{level:?}: unit {u} (lost {lost})"),
                Err(e) => {
                    assert!(lost, "{level:?}: unit {u} failed: {e}");
                    assert_eq!(e, ArrayError::BeyondRedundancy);
                }
            }
        }
        assert_eq!(a.failed_members(), vec![], "{level:?}: reads failed no member");
        // Rewriting the whole array makes everything good again, parity included.
        let new = pattern(12, bytes);
        write(&mut a, &mut mem, 0, new.clone());
        assert!(read(&mut a, &mut mem, 0, bytes) == new, "{level:?}: rewritten");
        assert_consistent(&mut a, &mut mem, MEMBER_SECTORS * 512 / CHUNK_64K);
    }
}

#[test]
fn a_member_that_cannot_list_stops_the_recovery_there() {
    let (level, disks, target, survivor) = (Level::Raid5, 4, 1u16, 2u16);
    let mut a = array(level, disks, CHUNK, 4096);
    let mut mem = Mem::new(disks);
    let data = pattern(13, (a.size_sectors() * 512) as usize);
    write(&mut a, &mut mem, 0, data);
    a.fail_member(DiskIndex(target));
    a.start_recovery(DiskIndex(target), Sector(0));
    mem.bad_reads.extend(BAD.map(|s| (survivor, s)));
    mem.no_bad_block_log.insert(target);
    let results = recover_all(&mut a, &mut mem, &[target]);
    // The windows before the bad range are rebuilt, the one holding it fails, and the
    // offset stays there.
    let first_bad = (BAD.start / 128) as usize;
    assert_eq!(results.len(), first_bad + 1, "{results:?}");
    assert!(results[..first_bad].iter().all(Result::is_ok), "{results:?}");
    assert_eq!(results[first_bad], Err(ArrayError::CannotListBadBlock));
    assert_eq!(a.recovering(), vec![(DiskIndex(target), Sector(first_bad as u64 * 128))]);
    assert_eq!(a.stats().sectors_listed_bad, 0);
    assert!(mem.listed.iter().all(|l| l.0 == survivor), "only the survivor listed anything");
}

/// A user read of a degraded array that meets a survivor's unreadable sector (the data is lost:
/// nothing else holds it) fails as before, and now, as md's "read error not correctable"
/// does, lists the unreadable block in the survivor's bad block log: the member stays, and a
/// second read fails on the listing without listing it again.
#[test]
fn a_read_past_the_redundancy_lists_the_survivors_unreadable_block() {
    for (level, disks, lost, survivor) in
        [(Level::Raid5, 4, vec![1u16], 2u16), (Level::Raid6, 6, vec![0, 4], 3)]
    {
        let g = Geometry::new(level, level.default_layout(), disks, CHUNK).unwrap();
        let mut a = array(level, disks, CHUNK, 4096);
        let mut mem = Mem::new(disks);
        let bytes = (a.size_sectors() * 512) as usize;
        let data = pattern(14, bytes);
        write(&mut a, &mut mem, 0, data.clone());
        for &m in &lost {
            a.fail_member(DiskIndex(m));
        }
        mem.bad_reads.extend(BAD.map(|s| (survivor, s)));
        for pass in 0..2 {
            for (u, got) in read_units(&mut a, &mut mem).into_iter().enumerate() {
                let at = g.map_sector(Sector(u as u64 * 8));
                let gone = (lost.contains(&at.disk.0) || at.disk.0 == survivor)
                    && BAD.contains(&at.member_sector.0);
                match got {
                    Ok(buf) => assert!(!gone && buf == data[u * 4096..][..4096], "unit {u}"),
                    Err(e) => assert!(gone && e == ArrayError::BeyondRedundancy, "unit {u}: {e}"),
                }
            }
            let listed: Vec<u64> =
                mem.listed.iter().filter(|l| l.0 == survivor).map(|l| l.1).collect();
            assert_eq!(listed, BAD.collect::<Vec<_>>(), "{level:?}, pass {pass}: listed once");
            assert!(mem.listed.iter().all(|l| l.0 == survivor), "{level:?}: {:?}", mem.listed);
            assert_eq!(a.failed_members(), lost.iter().map(|&m| DiskIndex(m)).collect::<Vec<_>>());
        }
    }
}
