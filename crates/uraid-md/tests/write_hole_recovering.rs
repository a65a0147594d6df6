//! The write hole with a member being rebuilt at the crash. A RAID6 of 5 on files: pattern A
//! over row 0, flushed, then pattern B over the first 4 KiB of it (a partial-stripe write,
//! logged), not flushed. The member files are copied while the array runs: a crash image, in
//! which B's data member is then marked as being rebuilt (md's recovery offset, half the
//! member: row 0 is below it, so the member is in sync there), the head's parity blocks are
//! put back to before B (the crash lost them), and another data member of the row is deleted.
//! Assembled from what is left, the deleted member's block must read as A.
//!
//! Until the eighth session of 2026-11-29 the replay took a member being rebuilt for missing
//! everywhere: it counted its block as lost (its value from the parity: A) and rewrote the
//! parity for A while the member held B, so the deleted member's block came back as A xor B's
//! change. The simulator found it once it cut the power during recoveries (seed 40000047).

use std::path::PathBuf;
use uraid_core::{Geometry, Layout, Level, StripeMap, StripeNumber};
use uraid_md::{MdArray, MdOptions};

mod common;
use common::{
    CHUNK_SECTORS, DATA_OFFSET_SECTORS, MEMBER_BYTES, copy_all, fill, make_array_at,
    mark_recovering, read_member, superblock, tempdir, wait_for, write_member,
};

const DATA_OFFSET: u64 = DATA_OFFSET_SECTORS * 512;
const CHUNK: u64 = CHUNK_SECTORS as u64 * 512;
const BLOCK: usize = 4096;

/// Members of the RAID6 both tests make.
const N: usize = 5;

/// The geometry of the RAID6 of `n` (md's layout 2, left-symmetric) and its row 0's map.
fn raid6_of(n: usize) -> (Geometry, StripeMap) {
    let g =
        Geometry::new(Level::Raid6, Layout::from_md(Level::Raid6, 2).unwrap(), n, CHUNK).unwrap();
    let map = g.stripe_map(StripeNumber(0)).clone();
    (g, map)
}

fn options() -> MdOptions {
    MdOptions { workers: Some(2), ..MdOptions::default() }
}

#[test]
fn write_hole_closed_with_a_member_being_rebuilt() {
    let dir = tempdir("write-hole-recovering");
    let (g, map) = raid6_of(N);
    let parity: Vec<usize> = map.p_disk.iter().chain(&map.q_disk).map(|d| d.get()).collect();
    let (rebuilt, victim) = (map.data_disk[0].get(), map.data_disk[1].get());
    let live = make_array_at(&dir.path().join("live"), uraid_format::Level::Raid6, N, None);
    let md = MdArray::assemble(&live, &options()).unwrap();
    assert!(md.info().log.is_some(), "the array has room for the log");
    let row = g.data_disks() * CHUNK as usize;
    let a = fill(1, row);
    let rt = md.runtime().clone();
    rt.write_at(0, &a).unwrap();
    rt.flush().unwrap();
    let old: Vec<Vec<u8>> =
        parity.iter().map(|&m| read_member(&live[m], DATA_OFFSET, BLOCK)).collect();
    let b = fill(2, BLOCK);
    rt.write_at(0, &b).unwrap();
    let landed = || {
        read_member(&live[rebuilt], DATA_OFFSET, BLOCK) == b
            && parity
                .iter()
                .zip(&old)
                .all(|(&m, old)| read_member(&live[m], DATA_OFFSET, BLOCK) != *old)
    };
    assert!(wait_for(landed), "B's writes in place reached the members");
    let crash = copy_all(&live, &dir.path().join("crash"));
    drop(rt);
    md.stop().unwrap();
    assert!(!superblock(&crash[0]).is_clean(), "copied while the array ran: dirty");
    let member_sectors = MEMBER_BYTES / 512 - DATA_OFFSET_SECTORS;
    mark_recovering(&crash[rebuilt], member_sectors / 2);
    for (&m, old) in parity.iter().zip(&old) {
        write_member(&crash[m], DATA_OFFSET, old); // the parity writes lost in the crash
    }
    std::fs::remove_file(&crash[victim]).unwrap();
    let left: Vec<PathBuf> =
        crash.iter().enumerate().filter(|(i, _)| *i != victim).map(|(_, p)| p.clone()).collect();

    let md = MdArray::assemble(&left, &options()).expect("dirty and degraded, with the log");
    assert!(md.info().log_replayed >= 1, "the partial parity was replayed");
    let recovering = md.status().members.iter().any(|m| m.recovery_offset_sectors.is_some());
    assert!(recovering, "B's member is being rebuilt: {:?}", md.status().members);
    let got = md.runtime().read_at(CHUNK, BLOCK).unwrap();
    assert!(got == a[CHUNK as usize..][..BLOCK], "the lost member's block reads as A");
    let mut want = a.clone();
    want[..BLOCK].copy_from_slice(&b);
    assert!(md.runtime().read_at(0, row).unwrap() == want, "the whole row: A with B");
    md.stop().unwrap();
}

/// A member back by re-add and being rebuilt (md's RECOVERY_BITMAP) at a crash the log
/// replays. The replay counts it missing above its recovery offset, so it mends none of its
/// parity blocks there while it rewrites the others; resumed by the bitmap, the member would
/// be trusted where no bit is set. It is rebuilt whole above the offset instead (the
/// simulator's seed 47283071: a head's Q rewritten by the replay, its
/// P on the re-added member left, and with two members missing a block read back wrong).
#[test]
fn a_re_added_member_is_rebuilt_whole_after_a_replay() {
    let dir = tempdir("write-hole-readd");
    let (g, map) = raid6_of(N);
    let (written, readded) = (map.data_disk[0].get(), map.data_disk[1].get());
    let live =
        make_array_at(&dir.path().join("live"), uraid_format::Level::Raid6, N, Some(64 << 10));
    let md = MdArray::assemble(&live, &options()).unwrap();
    let rt = md.runtime().clone();
    rt.write_at(0, &fill(1, g.data_disks() * CHUNK as usize)).unwrap();
    rt.flush().unwrap();
    let b = fill(2, BLOCK);
    rt.write_at(0, &b).unwrap();
    // Its write in place went after its log entry was durable: the entry is in the image.
    assert!(wait_for(|| read_member(&live[written], DATA_OFFSET, BLOCK) == b));
    let crash = copy_all(&live, &dir.path().join("crash"));
    drop(rt);
    md.stop().unwrap();
    let member_sectors = MEMBER_BYTES / 512 - DATA_OFFSET_SECTORS;
    let at = member_sectors / 2;
    mark_recovering(&crash[readded], at);
    let mut sb = superblock(&crash[readded]);
    sb.feature_map |= uraid_format::feature::RECOVERY_BITMAP;
    sb.seal();
    write_member(&crash[readded], 4096, &sb.encode());

    // Held after its first window, so that its extent shows.
    let held = uraid_md::SyncSpeed { min_kib: 1, max_kib: 1 };
    let md = MdArray::assemble(&crash, &MdOptions { speed: held, ..options() }).unwrap();
    assert!(md.info().log_replayed >= 1, "the partial parity was replayed");
    let mut total = None;
    let seen = wait_for(|| {
        total = md.status().sync.filter(|s| s.action == "recover").map(|s| s.total_sectors);
        total.is_some()
    });
    assert!(seen, "a recovery runs");
    assert_eq!(total, Some(member_sectors - at), "whole above the offset, not by the bits");
    // And recorded so at once: a crash now must not resume it by the bitmap.
    let sb = superblock(&crash[readded]);
    assert_ne!(sb.feature_map & uraid_format::feature::RECOVERY_OFFSET, 0, "being rebuilt");
    assert_eq!(sb.feature_map & uraid_format::feature::RECOVERY_BITMAP, 0, "not a re-add's");
    md.set_sync_speed(uraid_md::SyncSpeed::default());
    md.wait_sync_idle(std::time::Duration::from_secs(60)).expect("the syncs end");
    md.stop().unwrap();
}
