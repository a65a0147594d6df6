//! md's re-add: a member that failed and was removed comes back with `add` into its old slot
//! and is rebuilt only where the write-intent bitmap says it missed writes; what it holds
//! elsewhere is trusted, which a read with two other members failed then proves right. A
//! device that left before the array was made whole again (bits cleared since) is a spare,
//! rebuilt whole.

use std::path::PathBuf;
use std::time::Duration;
use uraid_format::{DevRole, Level, feature};
use uraid_md::{MdArray, MdOptions, SyncSpeed};

mod common;
use common::{
    MEMBER_BYTES, TempDir, assert_same, examine_with_mdadm, fill, make_array, make_array_at,
    reads_with_two_failed, superblock, tempdir, wait_for,
};

const BITMAP_CHUNK: u32 = 64 << 10;

/// A RAID6 of 6 with a bitmap, written whole with `seed`'s pattern and stopped clean (every bit
/// clear), running again with member 2 failed and removed: the array and its contents.
fn running_without_member_2(dir: &TempDir, seed: u64) -> (Vec<PathBuf>, MdArray, Vec<u8>) {
    let paths = make_array(dir.path(), 6, Some(BITMAP_CHUNK));
    let md = MdArray::assemble(&paths, &MdOptions::default()).unwrap();
    let model = fill(seed, md.runtime().size_bytes() as usize);
    md.runtime().write_at(0, &model).unwrap();
    md.stop().unwrap();
    let md = MdArray::assemble(&paths, &MdOptions::default()).unwrap();
    md.runtime().fail_member(2);
    assert!(wait_for(|| md.status().members.iter().any(|m| m.state == "faulty")));
    md.remove(&paths[2].display().to_string()).unwrap();
    (paths, md, model)
}

#[test]
fn a_removed_member_comes_back_rebuilt_only_where_it_missed_writes() {
    let dir = tempdir("readd");
    let (paths, md, mut model) = running_without_member_2(&dir, 1);
    let rt = md.runtime().clone();
    let size = model.len();
    // Three writes while it is out: 64 KiB, 4 KiB and 256 KiB.
    for (i, (at, len)) in
        [(0usize, 64 << 10), (5 << 20, 4 << 10), (40 << 20, 256 << 10)].into_iter().enumerate()
    {
        let data = fill(10 + i as u64, len);
        rt.write_at(at as u64, &data).unwrap();
        model[at..at + len].copy_from_slice(&data);
    }

    let said = md.add(&paths[2].display().to_string()).unwrap();
    assert!(said.starts_with(&format!("re-added {}", paths[2].display())), "{said}");
    let result = md.wait_sync_idle(Duration::from_secs(60)).expect("a recovery ran");
    assert_eq!((result.action.as_str(), result.outcome.as_str()), ("recover", "done"));
    // Each write dirtied one or two 64 KiB bitmap chunks of member sectors: a few hundred
    // KiB, not the member's 23 MiB.
    let member_sectors = (MEMBER_BYTES / 512) - 2048;
    assert!(result.sectors > 0 && result.sectors * 20 < member_sectors, "{result:?}");
    let st = md.status();
    assert!(!st.degraded, "{st:?}");
    assert_same(&rt.read_at(0, size).unwrap(), &model, "after the re-add");
    // Its blocks are right everywhere: read with two other members failed.
    reads_with_two_failed(&md, 0, 4, &model, "from the re-added member and parity");
    drop(rt);
    md.stop().unwrap();
    assert_eq!(superblock(&paths[2]).role(), DevRole::Active(2));
}

#[test]
fn a_device_that_left_before_the_array_was_whole_again_is_a_spare() {
    let dir = tempdir("readd-old");
    let paths = make_array(dir.path(), 6, Some(BITMAP_CHUNK));
    let md = MdArray::assemble(&paths, &MdOptions::default()).unwrap();
    let rt = md.runtime().clone();
    rt.write_at(0, &fill(3, 1 << 20)).unwrap();
    rt.fail_member(2);
    assert!(wait_for(|| md.status().members.iter().any(|m| m.state == "faulty")));
    md.remove(&paths[2].display().to_string()).unwrap();
    // A spare takes slot 2 and the array is whole again; then the spare fails too.
    let spare = dir.path().join("spare.img");
    std::fs::File::create(&spare).unwrap().set_len(MEMBER_BYTES).unwrap();
    md.add(&spare.display().to_string()).unwrap();
    assert_eq!(md.wait_sync_idle(Duration::from_secs(60)).unwrap().outcome, "done");
    rt.fail_member(2);
    assert!(wait_for(|| md.status().members.iter().any(|m| m.state == "faulty")));
    md.remove(&spare.display().to_string()).unwrap();
    let said = md.add(&paths[2].display().to_string()).unwrap();
    assert!(said.starts_with("added"), "{said}");
    let result = md.wait_sync_idle(Duration::from_secs(60)).expect("a recovery ran");
    let member_sectors = (MEMBER_BYTES / 512) - 2048;
    assert!(result.sectors * 2 > member_sectors, "rebuilt whole: {result:?}");
    drop(rt);
    md.stop().unwrap();
}

/// A removed member whose superblock no longer checks (a flipped byte) is not re-added on it:
/// it becomes a spare, is rebuilt whole, and the array reads what was written.
#[test]
fn a_member_with_a_corrupt_superblock_is_a_spare_not_a_re_add() {
    let dir = tempdir("readd-corrupt");
    let (paths, md, mut model) = running_without_member_2(&dir, 5);
    let data = fill(6, 64 << 10);
    md.runtime().write_at(1 << 20, &data).unwrap();
    model[1 << 20..(1 << 20) + data.len()].copy_from_slice(&data);
    let f = std::fs::OpenOptions::new().write(true).open(&paths[2]).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&f, &[0x5a], 4096 + 40).unwrap();
    let said = md.add(&paths[2].display().to_string()).unwrap();
    assert!(said.starts_with("added"), "{said}");
    let result = md.wait_sync_idle(Duration::from_secs(60)).expect("a recovery ran");
    let member_sectors = (MEMBER_BYTES / 512) - 2048;
    assert!(result.sectors * 2 > member_sectors, "rebuilt whole: {result:?}");
    reads_with_two_failed(&md, 0, 4, &model, "with the rebuilt member");
    md.stop().unwrap();
}

/// Stopped during its recovery, a re-added member's superblock says so as md says it
/// (RECOVERY_BITMAP beside the recovery offset), and the next start goes on rebuilding it only
/// where bits are set.
#[test]
fn a_readd_stopped_midway_resumes_by_the_bitmap() {
    let dir = tempdir("readd-resume");
    let (paths, md, mut model) = running_without_member_2(&dir, 21);
    let rt = md.runtime().clone();
    let size = model.len();
    // 4 KiB at every MiB: one dirty bitmap chunk, so one recovery window, each; more than
    // the sync process keeps in flight, so that the speed limit below holds most back.
    for i in 0..size / (1 << 20) {
        let (at, data) = (i << 20, fill(30 + i as u64, 4096));
        rt.write_at(at as u64, &data).unwrap();
        model[at..at + data.len()].copy_from_slice(&data);
    }
    md.set_sync_speed(SyncSpeed { min_kib: 1, max_kib: 1 });
    let said = md.add(&paths[2].display().to_string()).unwrap();
    assert!(said.starts_with("re-added"), "{said}");
    std::thread::sleep(Duration::from_millis(300));
    drop(rt);
    md.stop().unwrap();
    let sb = superblock(&paths[2]);
    let bits = feature::RECOVERY_OFFSET | feature::RECOVERY_BITMAP;
    assert_eq!(sb.feature_map & bits, bits, "recovering by the bitmap, as md writes it");
    assert_eq!(sb.role(), DevRole::Active(2));
    examine_with_mdadm(&paths[2]);

    let md = MdArray::assemble(&paths, &MdOptions::default()).unwrap();
    let result = md.wait_sync_idle(Duration::from_secs(60)).expect("the recovery goes on");
    assert_eq!((result.action.as_str(), result.outcome.as_str()), ("recover", "done"));
    // At most one 64 KiB chunk (128 member sectors) per MiB of the array (256 KiB a member).
    let member_sectors = (MEMBER_BYTES / 512) - 2048;
    assert!(result.sectors * 4 <= member_sectors, "only where bits are set: {result:?}");
    let rt = md.runtime().clone();
    assert_same(&rt.read_at(0, size).unwrap(), &model, "after the resumed re-add");
    reads_with_two_failed(&md, 0, 4, &model, "from the re-added member and parity");
    drop(rt);
    md.stop().unwrap();
}

/// The (epoch, generation) of each log header on `path`'s rings.
fn log_headers(path: &std::path::Path) -> Vec<(u64, u64)> {
    use std::os::unix::fs::FileExt;
    let sb = superblock(path);
    let log = uraid_md::ppl::examine_member(path, &sb).unwrap().expect("a log area");
    let setup = uraid_md::ppl::log_setup(log.area, sb.set_uuid.0, sb.events);
    let file = std::fs::File::open(path).unwrap();
    let mut bytes = vec![0u8; setup.ring_bytes() as usize];
    let mut headers = Vec::new();
    for ring in 0..setup.rings {
        file.read_exact_at(&mut bytes, setup.ring_offset_bytes(ring)).unwrap();
        let scan = uraid_core::ppl::scan_ring(&bytes, setup.uuid, uraid_core::DiskIndex(0));
        headers.extend(scan.headers.iter().map(|h| (h.0, h.1)));
    }
    headers
}

/// Whether the rings of `members` (per slot; None: not in the array) hold anything a replay
/// at assemble would take, read as the assemble reads them.
fn log_has_live_records(members: &[Option<PathBuf>]) -> bool {
    let path = members.iter().flatten().next().expect("a member");
    let sb = superblock(path);
    let log = uraid_md::ppl::examine_member(path, &sb).unwrap().expect("a log area");
    let setup = uraid_md::ppl::log_setup(log.area, sb.set_uuid.0, sb.events);
    uraid_md::ppl::read_log(&setup, members, sb.events).unwrap().holds_live_records()
}

/// A re-added member's log rings hold the run's generations from before it failed, but not
/// those whose copy failed with it: a replay after a crash before the reset that follows its
/// join took those generations for torn and dropped them (the simulator's seed 47281415).
/// Its rings are cleared before it joins; only headers written since are there.
#[test]
fn a_re_added_member_comes_back_with_its_log_rings_cleared() {
    let dir = tempdir("readd-log");
    let paths = make_array(dir.path(), 6, Some(BITMAP_CHUNK));
    let md = MdArray::assemble(&paths, &MdOptions::default()).unwrap();
    let rt = md.runtime().clone();
    // Partial-stripe writes: logged, on the rings of every member in turn.
    for i in 0..64u64 {
        rt.write_at(i * (192 << 10), &fill(i, 4096)).unwrap();
    }
    rt.fail_member(2);
    assert!(wait_for(|| md.status().members.iter().any(|m| m.state == "faulty")));
    md.remove(&paths[2].display().to_string()).unwrap();
    let before = log_headers(&paths[2]);
    assert!(before.len() > 1, "headers from before it failed: {before:?}");

    let said = md.add(&paths[2].display().to_string()).unwrap();
    assert!(said.starts_with("re-added"), "{said}");
    let after = log_headers(&paths[2]);
    let kept: Vec<_> = after.iter().filter(|h| before.contains(h)).collect();
    assert!(kept.is_empty(), "headers from before it failed: {kept:?} of {before:?}");
    md.wait_sync_idle(Duration::from_secs(60)).expect("a recovery ran");
    drop(rt);
    md.stop().unwrap();
}

/// Member `path`'s bitmap bits (the bytes after its bitmap superblock).
fn bitmap_bits_at(path: &std::path::Path) -> (u64, usize) {
    let sb = superblock(path);
    let at = 4096u64.checked_add_signed(i64::from(sb.bitmap_offset_sectors) * 512).unwrap();
    let head = common::read_member(path, at, uraid_format::BITMAP_SUPER_BYTES);
    let bitmap = uraid_format::BitmapSuper::decode(&head).unwrap();
    (at + uraid_format::BITMAP_SUPER_BYTES as u64, bitmap.bits_bytes())
}

/// A crash while a re-added member is being rebuilt, before the bitmap was rewritten to it:
/// its own image lacks the bits set while it was out. md reads the bitmap from a member in
/// sync; uraid read the first member's, so a re-added member in slot 0 resumed by its own
/// stale image and served blocks it had missed (the simulator's seed 47319918).
#[test]
fn a_re_added_member_s_stale_bitmap_is_not_the_one_read_at_assemble() {
    let dir = tempdir("readd-stale-bitmap");
    let paths = make_array_at(&dir.path().join("live"), Level::Raid5, 4, Some(BITMAP_CHUNK));
    let md = MdArray::assemble(&paths, &MdOptions::default()).unwrap();
    let size = md.runtime().size_bytes() as usize;
    md.runtime().write_at(0, &fill(1, size)).unwrap();
    md.stop().unwrap();
    let md = MdArray::assemble(&paths, &MdOptions::default()).unwrap();
    let rt = md.runtime().clone();
    rt.fail_member(0);
    assert!(wait_for(|| md.status().members.iter().any(|m| m.state == "faulty")));
    md.remove(&paths[0].display().to_string()).unwrap();
    let (bits_at, bits_len) = bitmap_bits_at(&paths[0]);
    let stale = common::read_member(&paths[0], bits_at, bits_len);
    // While it is out, everything: more regions to rebuild than the sync's first windows
    // (WINDOWS_IN_FLIGHT of 8192 member sectors) cover.
    let model = fill(2, size);
    rt.write_at(0, &model).unwrap();
    rt.flush().unwrap();
    // The log's tail that retires the flushed writes' entries may come after the flush; a
    // crash image taken before it is replayed, which sends the member to a whole rebuild and
    // leaves the choice of bitmap untested. Nothing is written after it: once it is there,
    // the log stays empty. (Waited for here, not while copying the crash image: that copy
    // must come before the recovery, throttled to a window every 2 s, ends.)
    let others: Vec<Option<PathBuf>> =
        paths.iter().enumerate().map(|(i, p)| (i != 0).then(|| p.clone())).collect();
    assert!(wait_for(|| !log_has_live_records(&others)), "the log retires the writes");
    // Re-added, its recovery held after its first window.
    md.set_sync_speed(SyncSpeed { min_kib: 1, max_kib: 1 });
    let said = md.add(&paths[0].display().to_string()).unwrap();
    assert!(said.starts_with("re-added"), "{said}");
    assert!(wait_for(|| md.status().sync.is_some_and(|s| s.done_sectors > 0)));
    // A copy between two superblock writes is no crash image md would see: copied again.
    let mut crash = Vec::new();
    let settled = wait_for(|| {
        crash = common::copy_all(&paths, &dir.path().join("crash"));
        crash.iter().all(|p| superblock(p).events == superblock(&crash[0]).events)
    });
    assert!(settled, "the superblocks agree");
    drop(rt);
    md.stop().unwrap();
    common::write_member(&crash[0], bits_at, &stale);
    let sb = superblock(&crash[0]);
    assert_ne!(sb.feature_map & feature::RECOVERY_BITMAP, 0, "a re-add's recovery");

    let md = MdArray::assemble(&crash, &MdOptions::default()).unwrap();
    assert_eq!(md.info().log_replayed, 0, "nothing replayed: the re-add resumes by the bitmap");
    md.wait_sync_idle(Duration::from_secs(60)).expect("the syncs end");
    let rt = md.runtime().clone();
    assert_same(&rt.read_at(0, size).unwrap(), &model, "after the restart");
    drop(rt);
    md.stop().unwrap();
}
