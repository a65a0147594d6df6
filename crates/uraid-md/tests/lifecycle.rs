//! The lifecycle on file members, end to end: a 6-member RAID6 loses a member while a
//! verifying load runs, a spare is added and rebuilt while the load goes on, every byte reads
//! back right, check finds 0 mismatches, and the array stops clean and comes back. Method:
//! members are sparse files given md v1.2 superblocks by `uraid_format::create` (as `uraid
//! create --assume-clean` does on zeroed members), the load is random writes and reads checked
//! against a model, the member is lost the way the engine loses one (the runtime's failed
//! set), which the array's monitor must notice.

use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use uraid_format::{DevRole, Level};
use uraid_md::{MdArray, MdOptions, SyncSpeed};

mod common;
use common::{
    DATA_OFFSET_SECTORS, MEMBER_BYTES, Rng, assert_same, examine_with_mdadm, fill, make_array,
    make_array_at, reads_with_two_failed, superblock, tempdir, wait_for, write_member,
};

/// Random 4 KiB..64 KiB writes and reads, every read checked against the model, until `stop`;
/// `ops` counts the requests done.
fn load(
    rt: &uraid_runtime::Runtime,
    model: &Mutex<Vec<u8>>,
    stop: &AtomicBool,
    ops: &AtomicU64,
    seed: u64,
) {
    let mut rng = Rng(seed);
    let size = rt.size_bytes();
    while !stop.load(Ordering::Acquire) {
        let len = ((rng.next() % 16 + 1) * 4096) as usize;
        let at = (rng.next() % ((size - len as u64) / 4096)) * 4096;
        if rng.next().is_multiple_of(2) {
            let data = fill(rng.next(), len);
            // The model changes only under its lock, with the write done: reads never race it.
            let mut m = model.lock().unwrap();
            rt.write_at(at, &data).unwrap();
            m[at as usize..at as usize + len].copy_from_slice(&data);
        } else {
            let m = model.lock().unwrap();
            let got = rt.read_at(at, len).unwrap();
            assert!(got == m[at as usize..at as usize + len], "read {len} at {at} differs");
        }
        ops.fetch_add(1, Ordering::AcqRel);
    }
}

#[test]
fn raid6_loses_a_member_under_load_and_rebuilds_onto_a_spare() {
    let dir = tempdir("rebuild");
    let paths = make_array(dir.path(), 6, None);
    let options = MdOptions { workers: Some(2), ..MdOptions::default() };
    let md = MdArray::assemble(&paths, &options).unwrap();
    let rt = md.runtime().clone();
    let size = rt.size_bytes() as usize;
    let model = Arc::new(Mutex::new(vec![0u8; size]));
    let first = fill(99, size);
    rt.write_at(0, &first).unwrap();
    model.lock().unwrap().copy_from_slice(&first);
    let stop = Arc::new(AtomicBool::new(false));
    let ops = Arc::new(AtomicU64::new(0));
    let loader = {
        let (rt, model, stop, ops) = (rt.clone(), model.clone(), stop.clone(), ops.clone());
        std::thread::spawn(move || load(&rt, &model, &stop, &ops, 5))
    };
    std::thread::sleep(Duration::from_millis(300));
    // The member fails under the running array the way the engine fails one after an I/O
    // error (the runtime's failed set; the runtime's own tests drive real I/O errors): the
    // monitor must notice and mark it faulty. (Truncating the file is no disk loss: writes
    // would extend it again and reads of the holes return zeros.)
    rt.fail_member(2);
    let lost = wait_for(|| md.status().members.iter().any(|m| m.state == "faulty"));
    assert!(lost, "the engine failed the lost member: {:?}", md.status());
    assert!(md.status().degraded);
    md.remove(&paths[2].display().to_string()).unwrap();
    let spare = dir.path().join("spare.img");
    std::fs::File::create(&spare).unwrap().set_len(MEMBER_BYTES).unwrap();
    let before = ops.load(Ordering::Acquire);
    md.add(&spare.display().to_string()).unwrap();
    let result = md.wait_sync_idle(Duration::from_secs(120)).expect("a recovery ran");
    let during = ops.load(Ordering::Acquire) - before;
    assert_eq!(result.action, "recover");
    assert_eq!(result.outcome, "done", "{result:?}");
    stop.store(true, Ordering::Release);
    loader.join().unwrap();
    // Counted, not timed: how many requests a rebuild overlaps depends on the machine's load
    // (a bound of 50 over the whole run failed with both cores busy). Two prove the array
    // served requests while it rebuilt, not only one that was in flight when it began.
    assert!(during >= 2, "the load kept running through the rebuild ({during} requests)");
    let st = md.status();
    assert!(!st.degraded, "{st:?}");
    assert_eq!(st.members[2].path, spare.display().to_string());

    let whole = rt.read_at(0, size).unwrap();
    assert_same(&whole, &model.lock().unwrap(), "every byte after the rebuild");
    md.scrub(false).unwrap();
    let check = md.wait_sync_idle(Duration::from_secs(120)).unwrap();
    assert_eq!((check.action.as_str(), check.outcome.as_str()), ("check", "done"));
    assert_eq!(check.mismatch_sectors, 0, "{check:?}");
    drop(rt);
    md.stop().unwrap();

    // Stopped clean; the spare is slot 2 in every superblock; it assembles again.
    let members: Vec<PathBuf> = paths
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 2)
        .map(|(_, p)| p.clone())
        .chain([spare.clone()])
        .collect();
    for p in &members {
        let sb = superblock(p);
        assert!(sb.is_clean(), "{} clean", p.display());
        assert_eq!(sb.array_state().active_count(), 6);
    }
    assert_eq!(superblock(&spare).role(), DevRole::Active(2));
    examine_with_mdadm(&spare);
    let md = MdArray::assemble(&members, &MdOptions::default()).unwrap();
    assert!(md.wait_sync_idle(Duration::from_secs(10)).is_none(), "no sync needed");
    let whole = md.runtime().read_at(0, size).unwrap();
    assert!(whole == *model.lock().unwrap(), "contents survive the restart");
    md.stop().unwrap();
}

/// md's verbs refuse what would lose data or make no sense, naming why, and write nothing:
/// failing beyond redundancy, removing an active member, adding a member twice or a device
/// too small, naming a device that is not a member.
#[test]
fn verbs_refuse_bad_requests_and_write_nothing() {
    let dir = tempdir("refusals");
    let paths = make_array(dir.path(), 6, None);
    let md = MdArray::assemble(&paths, &MdOptions::default()).unwrap();
    let data = fill(3, 1 << 20);
    md.runtime().write_at(0, &data).unwrap();
    md.fail(&paths[0].display().to_string()).unwrap();
    md.fail("1").unwrap(); // by slot number: RAID6 survives two
    let events = md.status().events;
    let refusals = [
        (md.fail(&paths[2].display().to_string()), "beyond the array's redundancy"),
        (md.remove(&paths[3].display().to_string()), "fail it first"),
        (md.fail("/nonexistent"), "not a member"),
        (md.add(&paths[4].display().to_string()), "already a member"),
        (md.add("/nonexistent/spare.img"), "cannot open"),
    ];
    for (result, why) in refusals {
        let message = result.expect_err(why).to_string();
        assert!(message.contains(why), "{message:?} should say {why:?}");
    }
    let small = dir.path().join("small.img");
    std::fs::File::create(&small).unwrap().set_len(1 << 20).unwrap();
    let message = md.add(&small.display().to_string()).unwrap_err().to_string();
    assert!(message.contains("too small"), "{message}");
    assert_eq!(md.status().events, events, "no refusal wrote a superblock");
    assert!(std::fs::read(&small).unwrap().iter().all(|&b| b == 0), "the small device untouched");
    assert_eq!(md.status().members.iter().filter(|m| m.state == "faulty").count(), 2);
    assert!(md.runtime().read_at(0, 1 << 20).unwrap() == data, "data intact, two members down");
    md.stop().unwrap();
}

/// md's usual replacement: a spare waits, a member fails, the spare is rebuilt into its slot,
/// and then the failed member is removed. Removing it must leave the spare's member in the
/// slot (it once emptied the slot, failing the rebuilt spare: the array degraded again).
#[test]
fn removing_a_failed_member_after_a_spare_took_its_slot_keeps_the_spare() {
    let dir = tempdir("remove-after-rebuild");
    let paths = make_array(dir.path(), 6, None);
    let md = MdArray::assemble(&paths, &MdOptions::default()).unwrap();
    let data = fill(11, 1 << 20);
    md.runtime().write_at(0, &data).unwrap();
    let spare = dir.path().join("spare.img");
    std::fs::File::create(&spare).unwrap().set_len(MEMBER_BYTES).unwrap();
    md.add(&spare.display().to_string()).unwrap();
    md.fail(&paths[3].display().to_string()).unwrap();
    let result = md.wait_sync_idle(Duration::from_secs(120)).expect("a recovery ran");
    assert_eq!((result.action.as_str(), result.outcome.as_str()), ("recover", "done"));
    md.remove(&paths[3].display().to_string()).unwrap();
    // Reads and writes over every member: a member emptied under the slot would fail now.
    let more = fill(12, 1 << 20);
    md.runtime().write_at(1 << 20, &more).unwrap();
    assert!(md.runtime().read_at(0, 1 << 20).unwrap() == data);
    assert!(md.runtime().read_at(1 << 20, 1 << 20).unwrap() == more);
    assert!(md.runtime().failed_members().is_empty(), "{:?}", md.runtime().failed_members());
    std::thread::sleep(Duration::from_millis(200)); // the monitor's turn (every 50 ms)
    let st = md.status();
    assert!(!st.degraded, "{st:?}");
    assert!(st.members.iter().all(|m| m.state != "faulty"), "{st:?}");
    assert_eq!(st.members[3].path, spare.display().to_string());
    md.stop().unwrap();
    assert_eq!(superblock(&spare).role(), DevRole::Active(3));
}

/// A device is the same device by any path: adding an active member again through `..`, a
/// symlink or a hard link is refused (as a spare it would get a spare's superblock and be
/// rebuilt over), and the verbs find a member by any such path.
#[test]
fn a_member_reached_by_another_path_is_the_same_member() {
    let dir = tempdir("aliases");
    let paths = make_array(dir.path(), 6, None);
    let md = MdArray::assemble(&paths, &MdOptions::default()).unwrap();
    let events = md.status().events;
    // (`dir/./m1.img` is equal to `dir/m1.img` as a Path; `..` is not.)
    let dotted = dir.path().join("..").join(dir.path().file_name().unwrap()).join("m1.img");
    let link = dir.path().join("link-to-m2");
    std::os::unix::fs::symlink(&paths[2], &link).unwrap();
    let hard = dir.path().join("hard-m4");
    std::fs::hard_link(&paths[4], &hard).unwrap();
    for alias in [&dotted, &link, &hard] {
        let message = md.add(&alias.display().to_string()).unwrap_err().to_string();
        assert!(message.contains("already a member of this array as"), "{message}");
    }
    assert_eq!(md.status().events, events, "no refusal wrote a superblock");
    assert_eq!(superblock(&paths[1]).role(), DevRole::Active(1));
    md.fail(&link.display().to_string()).unwrap();
    let st = md.status();
    let m2 = paths[2].display().to_string();
    assert!(st.members.iter().any(|m| m.path == m2 && m.state == "faulty"), "{st:?}");
    md.stop().unwrap();

    // Assembly refuses a member given twice, by name or by another path.
    let mut twice = paths.clone();
    twice[5] = dotted.clone();
    let message = MdArray::assemble(&twice, &MdOptions::default()).err().expect("refused");
    assert!(message.to_string().contains("are the same file"), "{message}");
}

/// A running array holds its devices (an exclusive lock while each belongs to it): another
/// array cannot take one as a spare, and a member removed from the array is free again and
/// may be added back (md's re-add after a remove).
#[test]
fn a_running_array_holds_its_devices_until_they_are_removed() {
    let a_dir = tempdir("holds-a");
    let a = make_array(a_dir.path(), 6, None);
    let b_dir = tempdir("holds-b");
    let b = make_array(b_dir.path(), 6, None);
    let md_a = MdArray::assemble(&a, &MdOptions::default()).unwrap();
    let data = fill(21, 1 << 20);
    md_a.runtime().write_at(0, &data).unwrap();
    let message = MdArray::assemble(&a, &MdOptions::default()).err().expect("refused");
    assert!(message.to_string().contains("in use"), "{message}");
    let md_b = MdArray::assemble(&b, &MdOptions::default()).unwrap();
    let events_b = md_b.status().events;
    md_b.fail(&b[5].display().to_string()).unwrap();
    let taken = md_a.add(&b[0].display().to_string()).unwrap_err().to_string();
    assert!(taken.contains("in use"), "{taken}");
    assert_eq!(superblock(&b[0]).role(), DevRole::Active(0), "b's member untouched");
    // b's failed member still belongs to b until b removes it; then a may take it.
    let still = md_a.add(&b[5].display().to_string()).unwrap_err().to_string();
    assert!(still.contains("in use"), "{still}");
    md_b.remove(&b[5].display().to_string()).unwrap();
    md_a.add(&b[5].display().to_string()).unwrap();
    assert_eq!(superblock(&b[5]).role(), DevRole::Spare);
    assert!(md_b.status().events > events_b);
    md_b.stop().unwrap();

    // a's member fails, b's old member (a's spare now) is rebuilt into its slot, and the
    // failed member, removed, is free to be added back (as a spare: no slot is empty).
    md_a.fail(&a[2].display().to_string()).unwrap();
    let result = md_a.wait_sync_idle(Duration::from_secs(120)).expect("the spare rebuilt");
    assert_eq!((result.action.as_str(), result.outcome.as_str()), ("recover", "done"));
    md_a.remove(&a[2].display().to_string()).unwrap();
    md_a.add(&a[2].display().to_string()).unwrap();
    assert_eq!(superblock(&a[2]).role(), DevRole::Spare);
    assert!(!md_a.status().degraded, "{:?}", md_a.status());
    assert!(md_a.runtime().read_at(0, 1 << 20).unwrap() == data);
    md_a.stop().unwrap();
}

/// A check asked for while a recovery runs is refused, saying what runs in md's words (the
/// message once printed the queue entry's Debug form, with a resync's every range).
#[test]
fn a_scrub_during_a_recovery_is_refused_naming_it() {
    let dir = tempdir("busy");
    let paths = make_array(dir.path(), 6, None);
    let speed = SyncSpeed { min_kib: 1, max_kib: 64 }; // 24 MiB: minutes, far longer than the test
    let md = MdArray::assemble(&paths, &MdOptions { speed, ..MdOptions::default() }).unwrap();
    let spare = dir.path().join("spare.img");
    std::fs::File::create(&spare).unwrap().set_len(MEMBER_BYTES).unwrap();
    md.add(&spare.display().to_string()).unwrap();
    md.fail(&paths[1].display().to_string()).unwrap();
    let message = md.scrub(false).unwrap_err().to_string();
    assert_eq!(message, "the array is busy with the recovery of slot 1");
    md.set_sync_speed(SyncSpeed { min_kib: 1000, max_kib: 1_000_000 });
    let result = md.wait_sync_idle(Duration::from_secs(120)).expect("the recovery ran");
    assert_eq!((result.action.as_str(), result.outcome.as_str()), ("recover", "done"));
    md.stop().unwrap();
}

/// A spare's recovery stopped midway goes on at the next start from its checkpoint, the member
/// opened (it used to be opened as an empty slot, which failed it at its first write).
#[test]
fn a_recovery_stopped_midway_goes_on_at_the_next_start() {
    let dir = tempdir("recovery-resume");
    let paths = make_array(dir.path(), 6, None);
    let md = MdArray::assemble(&paths, &MdOptions::default()).unwrap();
    let size = md.runtime().size_bytes() as usize;
    let model = fill(41, size);
    md.runtime().write_at(0, &model).unwrap();
    md.runtime().fail_member(3);
    assert!(wait_for(|| md.status().members.iter().any(|m| m.state == "faulty")));
    md.remove(&paths[3].display().to_string()).unwrap();
    md.set_sync_speed(SyncSpeed { min_kib: 1, max_kib: 1 });
    let spare = dir.path().join("spare.img");
    std::fs::File::create(&spare).unwrap().set_len(MEMBER_BYTES).unwrap();
    md.add(&spare.display().to_string()).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    md.stop().unwrap();
    let at = superblock(&spare).recovery_offset_sectors;
    let member_sectors = MEMBER_BYTES / 512 - 2048;
    assert!(at > 0 && at < member_sectors, "stopped midway: {at}");

    let members: Vec<PathBuf> = paths
        .iter()
        .enumerate()
        .map(|(i, p)| if i == 3 { spare.clone() } else { p.clone() })
        .collect();
    let md = MdArray::assemble(&members, &MdOptions::default()).unwrap();
    let result = md.wait_sync_idle(Duration::from_secs(60)).expect("the recovery goes on");
    assert_eq!((result.action.as_str(), result.outcome.as_str()), ("recover", "done"));
    assert_eq!(result.sectors, member_sectors - at, "from the checkpoint: {result:?}");
    reads_with_two_failed(&md, 0, 5, &model, "with the rebuilt member");
    md.stop().unwrap();
}

/// Check, repair and check again each report where they found mismatches, and only that:
/// until the session of 2026-12-06 (the second) the list was every mismatch since the start,
/// so the repair after a check listed each place twice. RAID6 names the member; the repair
/// rewrites the named data block, which then reads back as written.
#[test]
fn check_then_repair_each_list_only_what_they_found() {
    let dir = tempdir("scrub");
    let paths = make_array(dir.path(), 6, None);
    let options = MdOptions { workers: Some(2), ..MdOptions::default() };
    let md = MdArray::assemble(&paths, &options).unwrap();
    let size = md.runtime().size_bytes() as usize;
    let model = fill(3, size);
    md.runtime().write_at(0, &model).unwrap();
    md.stop().unwrap();
    // Three 4 KiB blocks of member 2 (stripe 0's second data block in md's left-symmetric
    // RAID6 of 6) go bad behind the array's back.
    let bad_at = DATA_OFFSET_SECTORS * 512 + 8192;
    write_member(&paths[2], bad_at, &fill(4, 3 * 4096));
    let md = MdArray::assemble(&paths, &options).unwrap();
    for (repair, found) in [(false, 3), (true, 3), (false, 0)] {
        md.scrub(repair).unwrap();
        let r = md.wait_sync_idle(Duration::from_secs(60)).expect("the action ran");
        assert_eq!(r.outcome, "done", "{r:?}");
        assert_eq!(r.mismatch_sectors, found * 8, "{r:?}");
        let at: Vec<(u64, u64, Option<u32>)> =
            r.mismatches.iter().map(|m| (m.member_sector, m.sectors, m.slot)).collect();
        let want: Vec<(u64, u64, Option<u32>)> =
            (0..found).map(|i| (16 + 8 * i, 8, Some(2))).collect();
        assert_eq!(at, want, "{} (repair: {repair})", r.action);
    }
    assert_same(&md.runtime().read_at(0, size).unwrap(), &model, "after the repair");
    md.stop().unwrap();
}

/// A check or repair with no parity left to compare (RAID5 missing one, RAID6 missing two)
/// is refused, saying why: md runs it, skips every stripe and reports 0 mismatches. RAID6
/// missing one checks the parity it has left.
#[test]
fn check_with_no_redundancy_left_is_refused() {
    let dir = tempdir("scrub-degraded");
    for (level, n) in [(Level::Raid5, 4), (Level::Raid6, 5)] {
        let paths = make_array_at(&dir.path().join(format!("{level:?}")), level, n, None);
        let md = MdArray::assemble(&paths, &MdOptions::default()).unwrap();
        md.fail(&paths[1].display().to_string()).unwrap();
        if level == Level::Raid6 {
            assert!(md.scrub(false).unwrap().contains("check started"));
            let r = md.wait_sync_idle(Duration::from_secs(60)).expect("the check ran");
            assert_eq!((r.outcome.as_str(), r.mismatch_sectors), ("done", 0), "{r:?}");
            md.fail(&paths[2].display().to_string()).unwrap();
        }
        for repair in [false, true] {
            let err = md.scrub(repair).unwrap_err().to_string();
            assert!(err.contains("no parity is left to compare"), "{level:?}: {err}");
        }
        md.stop().unwrap();
    }
}

/// A device that holds a member of another md array is not taken as a spare (or a
/// replacement) without `add_forced` (mdadm takes it, and that array loses it without a
/// word); forced, it is.
#[test]
fn add_refuses_a_member_of_another_array_unless_forced() {
    let dir = tempdir("add-foreign");
    let paths = make_array(dir.path(), 4, Some(64 << 10));
    let other = make_array(&dir.path().join("other"), 4, None);
    let mut sb = common::superblock(&other[0]);
    sb.set_uuid = uraid_format::Uuid([9; 16]);
    sb.seal();
    common::write_member(&other[0], 4096, &sb.encode());
    let md = MdArray::assemble(&paths, &MdOptions::default()).unwrap();
    let foreign = other[0].display().to_string();
    let err = md.add(&foreign).unwrap_err().to_string();
    assert!(
        err.contains("holds a member of another md array") && err.contains("09090909"),
        "{err}"
    );
    assert_eq!(common::superblock(&other[0]).set_uuid, uraid_format::Uuid([9; 16]), "untouched");
    // replace --with is refused the same way.
    let err = md.replace(&paths[1].display().to_string(), &foreign).unwrap_err().to_string();
    assert!(err.contains("holds a member of another md array"), "{err}");
    assert!(md.add_forced(&foreign).unwrap().starts_with("added"));
    assert!(md.status().members.iter().any(|m| m.path == foreign && m.state == "spare"));
    md.stop().unwrap();
    assert_eq!(common::superblock(&other[0]).set_uuid, uraid_format::Uuid([7; 16]));
}

/// A device holding another format's metadata (md 1.1 at its start, md 1.0 at its end) is
/// refused the same way, naming the format, and forced it joins with that magic zeroed, so
/// that no tool finds a second array on it.
#[test]
fn add_refuses_other_metadata_unless_forced_and_then_erases_it() {
    let dir = tempdir("add-other-metadata");
    let paths = make_array(dir.path(), 4, None);
    let md = MdArray::assemble(&paths, &MdOptions::default()).unwrap();
    let size = std::fs::metadata(&paths[0]).unwrap().len();
    // md's magic, then major_version 1: what the kernel checks first.
    let magic = [0xfc, 0x4e, 0x2b, 0xa9, 1, 0, 0, 0];
    for (name, at, words) in [
        ("v1.1", 0, "md metadata 1.1"),
        ("v1.0", (size / 512 - 16) / 8 * 8 * 512, "md metadata 1.0"),
    ] {
        let device = dir.path().join(format!("{name}.img"));
        std::fs::File::create(&device).unwrap().set_len(size).unwrap();
        common::write_member(&device, at, &magic);
        let device_name = device.display().to_string();
        let err = md.add(&device_name).unwrap_err().to_string();
        assert!(err.contains(words) && err.contains("--force"), "{name}: {err}");
        let err = md.replace(&paths[1].display().to_string(), &device_name).unwrap_err();
        assert!(err.to_string().contains(words), "{name}: {err}");
        let mut kept = [0u8; 8];
        std::fs::File::open(&device).unwrap().read_exact_at(&mut kept, at).unwrap();
        assert_eq!(kept, magic, "{name}: changed by a refusal");
        assert!(md.add_forced(&device_name).unwrap().starts_with("added"), "{name}");
        std::fs::File::open(&device).unwrap().read_exact_at(&mut kept, at).unwrap();
        assert_eq!(kept, [0; 8], "{name}: the old magic stays");
        assert_eq!(common::superblock(&device).set_uuid, uraid_format::Uuid([7; 16]), "{name}");
    }
    md.stop().unwrap();
}

/// A pipe given to `add` or `replace` is refused by what it is, at once: the open it took
/// before waited for a writer, and the array's control thread with it.
#[test]
fn add_refuses_a_pipe_without_waiting_for_it() {
    let dir = tempdir("add-pipe");
    let paths = make_array(dir.path(), 4, None);
    let fifo = dir.path().join("fifo");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let md = MdArray::assemble(&paths, &MdOptions::default()).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let fifo_name = fifo.display().to_string();
    let member = paths[1].display().to_string();
    let answered = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            let add = md.add(&fifo_name).unwrap_err().to_string();
            let replace = md.replace(&member, &fifo_name).unwrap_err().to_string();
            answered.store(true, std::sync::atomic::Ordering::Relaxed);
            tx.send((add, replace)).unwrap();
        });
        let answer = rx.recv_timeout(std::time::Duration::from_secs(20));
        // Without the fix the opens wait for a writer: be one (O_NONBLOCK, so that this never
        // waits for a reader) until they are done, so that the scope ends and the test fails.
        while !answered.load(std::sync::atomic::Ordering::Relaxed) {
            use std::os::unix::fs::OpenOptionsExt;
            const O_NONBLOCK: i32 = 0o4000;
            let _ = std::fs::OpenOptions::new().write(true).custom_flags(O_NONBLOCK).open(&fifo);
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let (add, replace) = answer.expect("add of a pipe answered");
        assert!(add.contains("a pipe: a member is a block device or a regular file"), "{add}");
        assert!(replace.contains("a pipe"), "{replace}");
    });
    md.stop().unwrap();
}
