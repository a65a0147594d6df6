//! The write hole, closed on real files. Method: an array on sparse files (RAID5 of 4, RAID6
//! of 5) is assembled; pattern A is written over the first row and flushed; then pattern B
//! over one 4 KiB block of it, not flushed (a partial-stripe write: read-modify-write, which
//! logs the partial parity first). The member files are copied while the array still runs:
//! a crash image, dirty, with B on its data member and in its parity. In the copy the parity
//! block(s) of that stripe are put back to what they were after A (the crash lost the parity
//! write), and a member holding an unmodified data block of the stripe is deleted. Assembled
//! from what is left (dirty and degraded: no --force needed, the log is replayed), that block
//! must read as A. The negative control: the same image with the log area zeroed needs
//! --force and reads garbage there (A xor B's change), so the test can fail.

use std::path::{Path, PathBuf};
use uraid_core::{Geometry, Layout, Level, StripeNumber};
use uraid_format::Superblock1;
use uraid_md::{ConsistencyPolicy, MdArray, MdOptions, ppl};

mod common;
use common::{
    CHUNK_SECTORS, DATA_OFFSET_SECTORS, copy_all, fill, make_array_at, read_member, superblock,
    tempdir, write_member,
};

const DATA_OFFSET: u64 = DATA_OFFSET_SECTORS * 512;
const CHUNK: u64 = CHUNK_SECTORS as u64 * 512;
const BLOCK: usize = 4096;

/// `n` zeroed members of a clean array at `level` in `dir`, no bitmap.
fn make(dir: &Path, level: uraid_format::Level, n: usize) -> Vec<PathBuf> {
    make_array_at(dir, level, n, None)
}

fn options() -> MdOptions {
    MdOptions { workers: Some(2), ..MdOptions::default() }
}

fn log_area(path: &Path) -> ppl::LogArea {
    ppl::log_area(&superblock(path), None).expect("room for the log")
}

/// The crash: returns the crash image's members, A, B, and which slot holds the unmodified
/// block that is read back (data chunk 1 of row 0). `wrap`: before B, 4 KiB writes to the
/// row's other heads until the log's ring has wrapped, so that B's entry is found after it.
fn crash_image(
    dir: &Path,
    level: uraid_format::Level,
    n: usize,
    wrap: bool,
) -> (Vec<PathBuf>, Vec<u8>, Vec<u8>, usize) {
    let core_level = if n == 4 { Level::Raid5 } else { Level::Raid6 };
    let g = Geometry::new(core_level, Layout::from_md(core_level, 2).unwrap(), n, CHUNK).unwrap();
    let map = g.stripe_map(StripeNumber(0)).clone();
    let parity: Vec<usize> = map.p_disk.iter().chain(&map.q_disk).map(|d| d.get()).collect();
    let live = make(&dir.join("live"), level, n);
    let md = MdArray::assemble(&live, &options()).unwrap();
    assert!(md.info().log.is_some(), "the array has room for the log");
    let rt = md.runtime().clone();
    let row = g.data_disks() * CHUNK as usize;
    let mut a = fill(1, row);
    rt.write_at(0, &a).unwrap();
    rt.flush().unwrap();
    if wrap {
        // A generation per write (a header and a block on the row's parity members) until
        // the ring has wrapped; then a flush, whose advance retires them all, so that no
        // advance retires B before the crash (its writes would be durable: no hole).
        let area = md.info().log.expect("a log");
        let sb = superblock(&live[0]);
        let ring = ppl::log_setup(area, sb.set_uuid.0, sb.events).ring_bytes() as usize;
        for i in 0..4 * ring / (2 * BLOCK) {
            // Not in order: a stream's writes would be held (the write-back) and share
            // generations.
            let at = (1 + i * 7 % 15) * BLOCK;
            let block = fill(100 + i as u64, BLOCK);
            rt.write_at(at as u64, &block).unwrap();
            a[at..at + BLOCK].copy_from_slice(&block);
            if rt.stats().array.log_ring_wraps > 0 {
                break;
            }
        }
        assert!(rt.stats().array.log_ring_wraps > 0, "the ring wrapped");
        rt.flush().unwrap();
    }
    // The parity blocks of the stripe's first 4 KiB after A.
    let old: Vec<Vec<u8>> =
        parity.iter().map(|&m| read_member(&live[m], DATA_OFFSET, BLOCK)).collect();
    let mut want_p = vec![0u8; BLOCK];
    for k in 0..g.data_disks() {
        let block = &a[k * CHUNK as usize..][..BLOCK];
        want_p.iter_mut().zip(block).for_each(|(p, b)| *p ^= b);
    }
    assert_eq!(
        old[0], want_p,
        "P after A is the xor of A's blocks (the test reads the right member)"
    );
    let b = fill(2, BLOCK);
    rt.write_at(0, &b).unwrap();
    let stats = rt.stats().array;
    assert!(stats.stripe_writes_rmw + stats.stripe_writes_rcw > 0, "B is a partial-stripe write");
    // The engine may acknowledge a logged write before its writes in place: the crash image
    // is taken once B is on its data member and in every parity block.
    let d0 = map.data_disk[0].get();
    let landed = || {
        read_member(&live[d0], DATA_OFFSET, BLOCK) == b
            && parity
                .iter()
                .zip(&old)
                .all(|(&m, old)| read_member(&live[m], DATA_OFFSET, BLOCK) != *old)
    };
    assert!(common::wait_for(landed), "B's writes in place reached the members");
    let crash = copy_all(&live, &dir.join("crash"));
    drop(rt);
    md.stop().unwrap();
    assert!(!superblock(&crash[0]).is_clean(), "copied while the array ran: dirty");
    for (&m, old) in parity.iter().zip(&old) {
        assert!(&read_member(&crash[m], DATA_OFFSET, BLOCK) != old, "B reached parity {m}");
        write_member(&crash[m], DATA_OFFSET, old); // the parity write lost in the crash
    }
    let victim = map.data_disk[1].get();
    (crash, a, b, victim)
}

fn without(paths: &[PathBuf], slot: usize) -> Vec<PathBuf> {
    std::fs::remove_file(&paths[slot]).unwrap();
    paths.iter().enumerate().filter(|(i, _)| *i != slot).map(|(_, p)| p.clone()).collect()
}

fn write_hole_closed(tag: &str, level: uraid_format::Level, n: usize, wrap: bool) {
    let dir = tempdir(tag);
    let (crash, a, b, victim) = crash_image(dir.path(), level, n, wrap);
    let control = copy_all(&crash, &dir.path().join("control"));
    let given_force = copy_all(&crash, &dir.path().join("given-force"));

    let left = without(&crash, victim);
    let md = MdArray::assemble(&left, &options()).expect("dirty and degraded, with the log");
    assert!(md.info().log_replayed >= 1, "the partial parity was replayed");
    assert!(!md.info().forced, "the log, not --force, let it start");
    eprintln!("{tag}: {} parity blocks replayed", md.info().log_replayed);
    let rt = md.runtime().clone();
    let got = rt.read_at(CHUNK, BLOCK).unwrap();
    assert!(got == a[CHUNK as usize..][..BLOCK], "the block on the lost member reads as A");
    let mut want = a.clone();
    want[..BLOCK].copy_from_slice(&b);
    assert!(rt.read_at(0, want.len()).unwrap() == want, "the whole row: A with B");
    drop(rt);
    md.stop().unwrap();

    // --force given all the same: the start is no forced one (no warning of wrong parity).
    let left = without(&given_force, victim);
    let md = MdArray::assemble(&left, &MdOptions { force: true, ..options() }).unwrap();
    assert!(md.info().log_replayed >= 1 && !md.info().forced, "{:#?}", md.info());
    assert!(md.runtime().read_at(CHUNK, BLOCK).unwrap() == a[CHUNK as usize..][..BLOCK]);
    md.stop().unwrap();

    // Negative control: no log to replay. md's refusal is back, and --force reads garbage.
    let area = log_area(&control[0]);
    for p in &control {
        write_member(p, area.offset_bytes, &vec![0u8; area.bytes as usize]);
    }
    let left = without(&control, victim);
    let refused = MdArray::assemble(&left, &options()).err().expect("dirty degraded, no log");
    assert!(refused.to_string().contains("cannot start dirty degraded array"), "{refused}");
    let md = MdArray::assemble(&left, &MdOptions { force: true, ..options() }).unwrap();
    assert_eq!(md.info().log_replayed, 0);
    assert!(md.info().forced, "forced, and told so");
    let got = md.runtime().read_at(CHUNK, BLOCK).unwrap();
    assert!(got != a[CHUNK as usize..][..BLOCK], "without the replay the block is rebuilt wrong");
    md.stop().unwrap();
}

/// The same after the log's ring has wrapped: B's entry lies wherever the ring put it, and
/// the replay finds it (it reads every sector of the rings).
#[test]
fn raid6_write_hole_closed_after_the_ring_wraps() {
    write_hole_closed("hole-r6-wrap", uraid_format::Level::Raid6, 5, true);
}

#[test]
fn raid5_write_hole_closed_by_the_log() {
    write_hole_closed("hole-r5", uraid_format::Level::Raid5, 4, false);
}

#[test]
fn raid6_write_hole_closed_by_the_log() {
    write_hole_closed("hole-r6", uraid_format::Level::Raid6, 5, false);
}

#[test]
fn a_clean_stop_leaves_nothing_to_replay() {
    let dir = tempdir("hole-clean");
    let paths = make(dir.path(), uraid_format::Level::Raid5, 4);
    let md = MdArray::assemble(&paths, &options()).unwrap();
    md.runtime().write_at(0, &fill(3, 3 * CHUNK as usize)).unwrap();
    md.runtime().write_at(8192, &fill(4, BLOCK)).unwrap();
    md.stop().unwrap();
    let sb: Superblock1 = superblock(&paths[0]);
    assert!(sb.is_clean());
    let area = log_area(&paths[0]);
    let setup = ppl::log_setup(area, sb.set_uuid.0, sb.events);
    let members: Vec<Option<PathBuf>> = paths.iter().cloned().map(Some).collect();
    let found = ppl::read_log(&setup, &members, sb.events).unwrap();
    assert_eq!(found.epoch, None, "a clean stop clears the log");
    // Dirty by hand (as a crash of a run without the log would leave it) and degraded: md's
    // refusal stands, there is nothing to replay.
    for p in &paths {
        let mut sb = superblock(p);
        sb.resync_offset_sectors = 0;
        write_member(p, 4096, &sb.encode());
    }
    let err = MdArray::assemble(&paths[1..], &options()).err().expect("refused");
    assert!(err.to_string().contains("cannot start dirty degraded array"), "{err}");
    let md = MdArray::assemble(&paths, &options()).unwrap();
    assert_eq!(md.info().log_replayed, 0);
    md.stop().unwrap();
}

/// `--consistency-policy resync`: a log the crashed run left is still replayed (it protects
/// what that run wrote), and from then on nothing is logged: after partial-stripe writes in
/// the new run, every ring is still empty, and status says the hole is open by choice.
#[test]
fn the_resync_policy_replays_an_old_log_then_logs_nothing() {
    let dir = tempdir("hole-policy");
    let (crash, a, _, victim) = crash_image(dir.path(), uraid_format::Level::Raid5, 4, false);
    let left = without(&crash, victim);
    let resync = MdOptions { consistency_policy: ConsistencyPolicy::Resync, ..options() };
    let md = MdArray::assemble(&left, &resync).expect("dirty and degraded, with the old log");
    assert!(md.info().log_replayed >= 1, "the old run's partial parity was replayed");
    assert!(md.info().log.is_none() && md.info().log_off, "no log in this run");
    let rt = md.runtime().clone();
    assert!(rt.read_at(CHUNK, BLOCK).unwrap() == a[CHUNK as usize..][..BLOCK]);
    let area = log_area(&left[0]);
    let rings = || -> Vec<Vec<u8>> {
        left.iter().map(|p| read_member(p, area.offset_bytes, area.bytes as usize)).collect()
    };
    let before = rings();
    for k in 0..8u64 {
        rt.write_at(k * 3 * CHUNK + 4096, &fill(10 + k, BLOCK)).unwrap();
    }
    let stats = rt.stats().array;
    assert!(stats.stripe_writes_rmw + stats.stripe_writes_rcw + stats.stripe_writes_degraded > 0);
    assert_eq!(stats.writes_acked_when_logged, 0);
    // The rings as the members hold them while the array runs: untouched since the replay
    // cleared them, and nothing on them to replay.
    assert!(rings() == before, "nothing logged");
    let sb = superblock(&left[0]);
    let setup = ppl::log_setup(area, sb.set_uuid.0, sb.events);
    let members: Vec<Option<PathBuf>> =
        crash.iter().enumerate().map(|(i, p)| (i != victim).then(|| p.clone())).collect();
    assert_eq!(ppl::read_log(&setup, &members, sb.events).unwrap().epoch, None);
    drop(rt);
    let status = md.status();
    assert!(status.log_off && status.log_bytes == 0);
    md.stop().unwrap();
}

/// Where row `r`'s chunks start on its members (byte offset).
fn chunk_at(r: u64) -> u64 {
    DATA_OFFSET + r * CHUNK
}

/// Assembles `paths` (forced or not), reads rows `[0, rows)`, stops.
fn read_rows(paths: &[PathBuf], force: bool, rows: u64) -> Vec<u8> {
    let opts = MdOptions { force, workers: Some(1), ..MdOptions::default() };
    let md = MdArray::assemble(paths, &opts).unwrap();
    let got = md.runtime().read_at(0, (rows * 3 * CHUNK) as usize).unwrap();
    md.stop().unwrap();
    got
}

/// A sequential stream of full-stripe writes logs ranges ahead of itself, not an entry per
/// stripe head. Crash image: rows 0..4 rewritten (C over A, unflushed), row 1 torn (its data
/// chunk 0 lost the write, P and Q have C), the member of its data chunk 1 lost. The replay
/// resyncs the range's heads trusting P: rows 2..4 read C, rows 4..8 (inside the range,
/// untouched) read A, and Q agrees with P about row 1: losing P's member as well later reads
/// row 1 the same. Negative control, the log zeroed: Q does not agree.
#[test]
fn a_torn_stream_under_a_range_is_resynced() {
    let dir = tempdir("hole-range");
    let live = make(&dir.path().join("live"), uraid_format::Level::Raid6, 5);
    let g =
        Geometry::new(Level::Raid6, Layout::from_md(Level::Raid6, 2).unwrap(), 5, CHUNK).unwrap();
    let opts = MdOptions { workers: Some(1), ..MdOptions::default() };
    let md = MdArray::assemble(&live, &opts).unwrap();
    let rt = md.runtime().clone();
    let row = 3 * CHUNK as usize;
    let a = fill(21, 8 * row);
    rt.write_at(0, &a).unwrap();
    rt.flush().unwrap();
    let c = fill(22, 4 * row);
    rt.write_at(0, &c).unwrap();
    assert!(rt.stats().array.writes_under_log_range > 0, "the stream went out under ranges");
    let map = |r: u64| g.stripe_map(StripeNumber(r)).clone();
    // C and its P on the members (the engine acknowledges before every write lands).
    let landed = || {
        (0..4u64).all(|r| {
            let m = map(r);
            let mut p = vec![0u8; CHUNK as usize];
            let data = (0..3).all(|slot| {
                let want = &c[r as usize * row + slot * CHUNK as usize..][..CHUNK as usize];
                p.iter_mut().zip(want).for_each(|(p, b)| *p ^= b);
                read_member(&live[m.data_disk[slot].get()], chunk_at(r), CHUNK as usize) == want
            });
            data && read_member(&live[m.p_disk.unwrap().get()], chunk_at(r), CHUNK as usize) == p
        })
    };
    assert!(common::wait_for(landed), "C and its parity reached the members");
    let crash = copy_all(&live, &dir.path().join("crash"));
    drop(rt);
    md.stop().unwrap();
    let m1 = map(1);
    let d0 = m1.data_disk[0].get();
    write_member(&crash[d0], chunk_at(1), &a[row..][..CHUNK as usize]); // the lost write
    let victim = m1.data_disk[1].get();
    let p_member = m1.p_disk.unwrap().get();
    let control = copy_all(&crash, &dir.path().join("control"));

    let left = without(&crash, victim);
    let got = read_rows(&left, false, 8);
    assert!(got[2 * row..4 * row] == c[2 * row..], "rows 2..4 as the stream wrote them");
    assert!(got[4 * row..] == a[4 * row..], "rows 4..8, inside the range, untouched");
    let row1 = got[row..2 * row].to_vec();
    let fewer: Vec<PathBuf> = left.iter().filter(|p| **p != crash[p_member]).cloned().collect();
    assert!(read_rows(&fewer, true, 2)[row..] == row1[..], "Q agrees with P about row 1");

    let area = log_area(&control[0]);
    for p in &control {
        write_member(p, area.offset_bytes, &vec![0u8; area.bytes as usize]);
    }
    let left = without(&control, victim);
    let row1 = read_rows(&left, true, 2)[row..].to_vec();
    let fewer: Vec<PathBuf> = left.iter().filter(|p| **p != control[p_member]).cloned().collect();
    assert!(read_rows(&fewer, true, 2)[row..] != row1[..], "without the log Q disagrees");
}

/// A block md's bad block log names holds no data (md reads around it: its contents live only
/// in parity). A range resync after a crash must not recompute parity over it: the replay
/// reads it as lost. Crash image: the stream of the test above, and on the member of row 5's
/// data chunk 0 (inside the range, untouched by the stream) garbage there, listed in that
/// member's bad block log. All members present, the row reads back as A; with the block read
/// as data (the log's feature bit cleared for the replay, then set again) it does not.
#[test]
fn a_range_resync_does_not_trust_a_block_md_lists_as_bad() {
    let dir = tempdir("hole-range-bad-block");
    let live = make(&dir.path().join("live"), uraid_format::Level::Raid6, 5);
    let g =
        Geometry::new(Level::Raid6, Layout::from_md(Level::Raid6, 2).unwrap(), 5, CHUNK).unwrap();
    let md =
        MdArray::assemble(&live, &MdOptions { workers: Some(1), ..MdOptions::default() }).unwrap();
    let rt = md.runtime().clone();
    let row = 3 * CHUNK as usize;
    let a = fill(31, 8 * row);
    rt.write_at(0, &a).unwrap();
    rt.flush().unwrap();
    rt.write_at(0, &fill(32, 4 * row)).unwrap();
    assert!(rt.stats().array.writes_under_log_range > 0, "the stream went out under ranges");
    let crash = copy_all(&live, &dir.path().join("crash"));
    drop(rt);
    md.stop().unwrap();
    let d = g.stripe_map(StripeNumber(5)).data_disk[0].get();
    write_member(&crash[d], chunk_at(5), &vec![0xa5; CHUNK as usize]);
    let list_bad = |paths: &[PathBuf], listed: bool| {
        let mut sb = superblock(&paths[d]);
        if listed {
            sb.feature_map |= uraid_format::feature::BAD_BLOCKS;
        } else {
            sb.feature_map &= !uraid_format::feature::BAD_BLOCKS;
        }
        sb.seal();
        write_member(&paths[d], 4096, &sb.encode());
        let (start, len) = (chunk_at(5) / 512, CHUNK / 512);
        let log = sb.super_offset_sectors.checked_add_signed(i64::from(sb.bblog_offset_sectors));
        let entries = [((start << 10) | len).to_le_bytes(), u64::MAX.to_le_bytes()].concat();
        write_member(&paths[d], log.unwrap() * 512, &entries);
    };
    let control = copy_all(&crash, &dir.path().join("control"));
    list_bad(&crash, true);
    let got = read_rows(&crash, false, 8);
    assert!(got[5 * row..6 * row] == a[5 * row..6 * row], "row 5 reads as A, around the block");

    // Negative control: the replay takes the garbage for data; listed again afterwards, the
    // block is rebuilt from the parity computed over it.
    list_bad(&control, false);
    let opts = MdOptions { workers: Some(1), ..MdOptions::default() };
    MdArray::assemble(&control, &opts).unwrap().stop().unwrap();
    list_bad(&control, true);
    let got = read_rows(&control, false, 8);
    assert!(got[5 * row..6 * row] != a[5 * row..6 * row], "parity over the garbage loses it");
}

/// The kernel ran the array after uraid crashed, wrote to it, and crashed in turn: uraid's
/// log on the members is from before the kernel's run. Replaying it would rewrite parity from
/// partial parity the kernel's writes have made stale. md writes `utime` in seconds, so the
/// mark uraid puts in its microseconds is gone, and uraid ignores (and clears) its log.
/// Emulated here on the RAID5 crash image: the kernel's start resyncs row 0 (P from the data
/// as the crash left it), then it writes C over data chunk 1's first block with its parity
/// and crashes; that member is then lost. Read from what is left, the block is C; the stale
/// replay would have made it A.
#[test]
fn a_log_older_than_a_kernel_run_is_not_replayed() {
    let dir = tempdir("hole-kernel-ran");
    let (crash, _a, _b, victim) = crash_image(dir.path(), uraid_format::Level::Raid5, 4, false);
    let g =
        Geometry::new(Level::Raid5, Layout::from_md(Level::Raid5, 2).unwrap(), 4, CHUNK).unwrap();
    let map = g.stripe_map(StripeNumber(0)).clone();
    let block = |slot: usize| read_member(&crash[map.data_disk[slot].get()], DATA_OFFSET, BLOCK);
    let c = fill(41, BLOCK);
    let mut p = c.clone();
    for other in [block(0), block(2)] {
        p.iter_mut().zip(&other).for_each(|(x, y)| *x ^= y);
    }
    write_member(&crash[victim], DATA_OFFSET, &c);
    write_member(&crash[map.p_disk.unwrap().get()], DATA_OFFSET, &p);
    for path in &crash {
        let mut sb = superblock(path);
        assert!(uraid_md::meta::uraid_wrote_last(&sb), "uraid's superblocks carry its mark");
        sb.utime &= (1 << 40) - 1; // md's md_update_sb: seconds from its clock
        sb.events += 3;
        sb.resync_offset_sectors = 0;
        sb.seal();
        write_member(path, 4096, &sb.encode());
    }
    let left = without(&crash, victim);
    let refused = MdArray::assemble(&left, &options()).err().expect("no log of this crash");
    assert!(refused.to_string().contains("cannot start dirty degraded array"), "{refused}");
    let md = MdArray::assemble(&left, &MdOptions { force: true, ..options() }).unwrap();
    assert_eq!(md.info().log_replayed, 0, "the stale log is not replayed");
    assert!(md.runtime().read_at(CHUNK, BLOCK).unwrap() == c, "the kernel's write reads back");
    md.stop().unwrap();
    let area = log_area(&left[0]);
    let rings = read_member(&left[0], area.offset_bytes, area.bytes as usize);
    assert!(uraid_core::ppl::magic_sectors(&rings).is_empty(), "and it is cleared");
}

/// A stripe_size too large for the log's rings (md's 1 MiB data offset leaves 1008 KiB, cut
/// into 8 rings): the array runs without the log, and both the start and detail say why and
/// which stripe_size keeps it, not that there is no room before the data.
#[test]
fn a_stripe_size_the_rings_cannot_hold_says_which_one_keeps_the_log() {
    let dir = tempdir("hole-stripe-size");
    let paths = make(dir.path(), uraid_format::Level::Raid5, 4);
    let big = MdOptions { stripe_size_bytes: 32 << 10, ..options() };
    let md = MdArray::assemble(&paths, &big).unwrap();
    assert!(md.info().log.is_none() && !md.info().log_off);
    let status = md.status();
    assert_eq!(status.log_bytes, 0);
    assert!(
        status.log_missing.contains("rings (124 KiB each) cannot hold stripe heads of 32 KiB")
            && status.log_missing.ends_with("use --stripe-size 16K or less"),
        "{}",
        status.log_missing
    );
    md.stop().unwrap();
    let fits = MdOptions { stripe_size_bytes: 16 << 10, ..options() };
    let md = MdArray::assemble(&paths, &fits).unwrap();
    assert!(md.info().log.is_some() && md.status().log_missing.is_empty());
    md.stop().unwrap();
}
