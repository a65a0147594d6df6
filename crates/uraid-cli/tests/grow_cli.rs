//! `uraid grow --size`: a stopped array takes its members' room, keeps its data, and its new
//! space is resynced at the next start (members' bytes there are whatever the larger disks
//! held: a check after that resync finds no mismatch); with `--shrink` it gives up its end and
//! stays clean; what cannot grow is refused, naming why, with every member left as it was.

mod serve_common;
mod stopped_common;

use serve_common::{Served, tempdir, text, uraid, uraid_ok};
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};
use std::time::Duration;
use stopped_common::{
    DATA_OFFSET, MIB, assert_reads_back, examine, images, small_array, strs, superblock_of,
    write_all,
};

#[test]
fn a_grown_array_keeps_its_data_and_resyncs_the_new_space() {
    grow_and_check(true);
}

/// Without a bitmap the resync goes from the superblocks' resync_offset, the old size.
#[test]
fn a_grown_array_without_a_bitmap_resyncs_from_the_old_size() {
    grow_and_check(false);
}

fn grow_and_check(bitmap: bool) {
    let dir = tempdir(if bitmap { "grow" } else { "grow-no-bitmap" });
    let (members, data) = small_array(&dir, "gr", bitmap);
    // What the larger disks held: anything, parity included.
    for (i, m) in members.iter().enumerate() {
        let junk: Vec<u8> = (0..15 * MIB).map(|b| (b * 31 + i as u64 * 101 + 5) as u8).collect();
        let file = std::fs::OpenOptions::new().write(true).open(m).unwrap();
        file.write_all_at(&junk, DATA_OFFSET + 8 * MIB).unwrap();
    }
    let mut grow = vec!["grow", "--size", "max", "--json"];
    grow.extend(strs(&members));
    let report: serde_json::Value = serde_json::from_str(&uraid_ok(&dir, &grow)).unwrap();
    assert_eq!(report["old_component_sectors"], 16384);
    assert_eq!(report["new_component_sectors"], 47104, "23 MiB: 24 less the data offset");
    assert_eq!(report["new_array_kib"], 47104);
    if bitmap {
        assert_eq!(report["bitmap_chunk_bytes"]["new"], 16384, "md's doubling: {report}");
    } else {
        assert!(report["bitmap_chunk_bytes"].is_null(), "{report}");
    }
    // mdadm reads the result as md would.
    let examine = std::process::Command::new("mdadm").arg("--examine").arg(&members[1]).output();
    let examine = text(&examine.unwrap().stdout);
    assert!(examine.contains("Avail Dev Size : 47104 sectors"), "{examine}");
    assert!(examine.contains("Array Size : 47104 KiB"), "{examine}");
    assert!(examine.contains("State : active"), "resync pending: {examine}");

    let served = Served::start(&dir, "gr", &members);
    // Exit 1 when the resync was over before the wait asked: its result says what it did.
    let _ = uraid(&dir, &["wait", "gr"]);
    let detail = uraid_ok(&dir, &["detail", "gr"]);
    assert!(detail.contains("resync done:") && detail.contains("in 30720 sectors"), "{detail}");
    let mut client = served.client();
    assert_eq!(client.size_bytes(), 46 * MIB);
    assert_reads_back(&mut client, &data);
    client.write(40 * MIB, &vec![0xa5; 65536], true).unwrap();
    assert_eq!(client.read(40 * MIB, 65536).unwrap(), vec![0xa5; 65536]);
    client.disconnect().unwrap();
    let checked = uraid_ok(&dir, &["check", "--wait", "gr"]);
    assert!(checked.contains("0 mismatched sectors in 47104 sectors"), "{checked}");
    uraid_ok(&dir, &["stop", "gr"]);
    assert!(served.wait(Duration::from_secs(30)).success());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--size` below the current size with `--shrink`: the array keeps its first bytes, stays
/// clean (nothing resyncs) and its bitmap keeps its chunk; mdadm reads the smaller size. Grown
/// back, the space past the shrunk end resyncs as new space.
#[test]
fn a_shrunk_array_keeps_its_start_and_grows_back() {
    let dir = tempdir("grow-shrink");
    let (members, data) = small_array(&dir, "gs", true);
    let all = strs(&members);
    let shrink = [&["grow", "--size", "3M", "--shrink", "--json"][..], &all].concat();
    let report: serde_json::Value = serde_json::from_str(&uraid_ok(&dir, &shrink)).unwrap();
    assert_eq!(report["new_component_sectors"], 6144, "{report}");
    assert_eq!(report["new_array_kib"], 6144, "{report}");
    assert!(report["resync_from_sector"].is_null(), "nothing to resync: {report}");
    assert_eq!(report["bitmap_chunk_bytes"]["new"], 4096, "the chunk stays: {report}");
    let examined = examine(&members[2]);
    assert!(examined.contains("Array Size : 6144 KiB"), "{examined}");
    assert!(examined.contains("State : clean"), "{examined}");
    let bitmap = uraid_ok(&dir, &["examine", "-X", all[1]]);
    assert!(bitmap.contains("Bitmap : 768 bits (chunks), 0 dirty (0.0%)"), "{bitmap}");

    let served = Served::start(&dir, "gs", &members);
    let mut client = served.client();
    assert_eq!(client.size_bytes(), 6 * MIB);
    assert_reads_back(&mut client, &data[..6 * MIB as usize]);
    client.disconnect().unwrap();
    let detail = serve_common::detail(&dir, "gs");
    assert!(detail["sync"].is_null() && detail["last_sync"].is_null(), "a resync: {detail:#}");
    let checked = uraid_ok(&dir, &["check", "--wait", "gs"]);
    assert!(checked.contains("0 mismatched sectors in 6144 sectors"), "{checked}");
    uraid_ok(&dir, &["stop", "gs"]);
    assert!(served.wait(Duration::from_secs(30)).success());

    let grown = uraid_ok(&dir, &[&["grow", "--size", "8M"][..], &all].concat());
    assert!(grown.contains("resyncs from sector 6144"), "{grown}");
    let served = Served::start(&dir, "gs", &members);
    let _ = uraid(&dir, &["wait", "gs"]);
    let detail = uraid_ok(&dir, &["detail", "gs"]);
    assert!(detail.contains("resync done:") && detail.contains("in 10240 sectors"), "{detail}");
    let mut client = served.client();
    assert_reads_back(&mut client, &data[..6 * MIB as usize]);
    client.disconnect().unwrap();
    let checked = uraid_ok(&dir, &["check", "--wait", "gs"]);
    assert!(checked.contains("0 mismatched sectors in 16384 sectors"), "{checked}");
    uraid_ok(&dir, &["stop", "gs"]);
    assert!(served.wait(Duration::from_secs(30)).success());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `uraid grow ARGS` fails saying `why`; with `members`, none of them changed.
fn refused(dir: &Path, members: Option<&[PathBuf]>, args: &[&str], why: &str) {
    let before = members.map(images);
    let mut grow = vec!["grow"];
    grow.extend(args);
    let out = uraid(dir, &grow);
    assert!(!out.status.success(), "{args:?} grew");
    let err = text(&out.stderr);
    assert!(err.contains(why), "{args:?}: {err}");
    assert!(members.map(images) == before, "{args:?} wrote to a member");
}

#[test]
fn what_cannot_grow_is_refused_and_left_alone() {
    let dir = tempdir("grow-refused");
    let (members, _) = small_array(&dir, "gf", true);
    let all = strs(&members);
    let with = |extra: &[&'static str]| -> Vec<&str> { [extra, &all].concat() };
    let some = Some(members.as_slice());
    refused(&dir, some, &with(&["--size", "4M"]), "give --shrink to let that go");
    refused(&dir, some, &with(&["--size", "32K", "--shrink"]), "below one chunk");
    refused(&dir, some, &with(&["--size", "30M"]), "more than");
    refused(&dir, some, &["--size", "max", all[0], all[1]], "degraded (slots [2]");
    // The running array writes its superblocks: only the refusal is checked.
    let served = Served::start(&dir, "gf", &members);
    refused(&dir, None, &with(&["--size", "max"]), "held by a running uraid array");
    uraid_ok(&dir, &["stop", "gf"]);
    assert!(served.wait(Duration::from_secs(30)).success());
    // Its bitmap taken off, then one member's own bad block log moved to 4 sectors past where
    // a bitmap would go (md keeps the log per device): no bitmap goes onto the array.
    let removed = uraid_ok(&dir, &with(&["grow", "--bitmap", "none"]));
    assert!(removed.contains("bitmap removed"), "{removed}");
    let mut sb = superblock_of(&members[1]);
    sb.bblog_offset_sectors = 12;
    sb.seal();
    let file = std::fs::OpenOptions::new().write(true).open(&members[1]).unwrap();
    file.write_all_at(&sb.encode(), 4096).unwrap();
    let no_room = "m1.img: no room for a bitmap: 4 sectors";
    refused(&dir, some, &with(&["--bitmap", "internal"]), no_room);
    // Grown once, not yet resynced: a second grow waits for that resync.
    uraid_ok(&dir, &with(&["grow", "--size", "12M"]));
    refused(&dir, some, &with(&["--size", "max"]), "not clean (resync_offset 16384");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A bitmap added to a stopped array works as one made at create: after a crash the next start
/// resyncs only the bitmap chunks being written; once it is removed, a crash resyncs every
/// sector. The data reads back each time.
#[test]
fn an_added_bitmap_narrows_the_resync_after_a_crash_and_a_removed_one_does_not() {
    let dir = tempdir("grow-bitmap");
    let (members, data) = small_array(&dir, "gb", false);
    let add = [&["grow", "--bitmap", "internal", "--bitmap-chunk", "64K"][..], &strs(&members)];
    let added = uraid_ok(&dir, &add.concat());
    assert!(added.contains("128 bits of 64 KiB"), "8 MiB a member: {added}");
    let examined = uraid_ok(&dir, &["examine", "--bitmap", strs(&members)[2]]);
    assert!(examined.contains("       Chunksize : 64 KB\n"), "{examined}");
    assert!(examined.contains("          Bitmap : 128 bits (chunks), 0 dirty (0.0%)\n"));
    let resynced = crash_and_restart(&dir, &members, &data);
    assert!((128..16384).contains(&resynced), "{resynced} sectors: the written chunks only");
    uraid_ok(&dir, &[&["grow", "--bitmap", "none"][..], &strs(&members)].concat());
    assert_eq!(crash_and_restart(&dir, &members, &data), 16384, "no bitmap: every sector");
    let examined = uraid_ok(&dir, &["examine", "-X", strs(&members)[0]]);
    assert!(examined.contains("no internal bitmap"), "{examined}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Serves the array, kills the server with SIGKILL while a client rewrites one block (the
/// array is active then: safe mode marks it clean only after writes pause), serves it again
/// and returns the sectors a member its resync covered, once the data read back whole.
fn crash_and_restart(dir: &Path, members: &[PathBuf], data: &[u8]) -> u64 {
    let served = Served::start(dir, "gb", members);
    let mut client = served.client();
    let block = data[5 * MIB as usize..5 * MIB as usize + 4096].to_vec();
    let writer = std::thread::spawn(move || while client.write(5 * MIB, &block, false).is_ok() {});
    std::thread::sleep(Duration::from_millis(300));
    served.signal("KILL");
    assert!(!served.wait(Duration::from_secs(10)).success());
    writer.join().unwrap();
    let served = Served::start(dir, "gb", members);
    let start = std::time::Instant::now();
    let resync = loop {
        let d = serve_common::detail(dir, "gb");
        if d["sync"].is_null() && !d["last_sync"].is_null() {
            break d["last_sync"].clone();
        }
        assert!(start.elapsed() < Duration::from_secs(60), "no resync: {d:#}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!((&resync["action"], &resync["outcome"]), (&"resync".into(), &"done".into()));
    let mut client = served.client();
    assert_reads_back(&mut client, data);
    client.disconnect().unwrap();
    uraid_ok(dir, &["stop", "gb"]);
    assert!(served.wait(Duration::from_secs(30)).success());
    resync["sectors"].as_u64().unwrap()
}

/// The README's way to a larger array: each member replaced by a larger device while the
/// array serves (`uraid replace`, the old one removed), then the array stopped and grown.
#[test]
fn members_replaced_by_larger_ones_then_grown() {
    let dir = tempdir("grow-replaced");
    let members = serve_common::member_files(&dir, 3, 16);
    let mut create = vec!["create", "-l", "5", "-n", "3", "--chunk", "64K", "-N", "gw"];
    create.extend(["--bitmap", "internal", "--assume-clean"]);
    uraid_ok(&dir, &[create, strs(&members)].concat());
    let served = Served::start(&dir, "gw", &members);
    let mut client = served.client();
    assert_eq!(client.size_bytes(), 30 * MIB);
    let data: Vec<u8> = (0..30 * MIB).map(|i| (i * 11 + i / 4096) as u8).collect();
    write_all(&mut client, &data);
    let mut larger = Vec::new();
    for (i, old) in members.iter().enumerate() {
        let new = dir.join(format!("big{i}.img"));
        std::fs::File::create(&new).unwrap().set_len(32 * MIB).unwrap();
        let before = serve_common::detail(&dir, "gw")["last_sync"].clone();
        uraid_ok(&dir, &["replace", "gw", old.to_str().unwrap(), "--with", new.to_str().unwrap()]);
        let start = std::time::Instant::now();
        while serve_common::detail(&dir, "gw")["last_sync"] == before {
            assert!(start.elapsed() < Duration::from_secs(60), "replace {i} did not end");
            std::thread::sleep(Duration::from_millis(50));
        }
        uraid_ok(&dir, &["remove", "gw", old.to_str().unwrap()]);
        larger.push(new);
    }
    client.disconnect().unwrap();
    uraid_ok(&dir, &["stop", "gw"]);
    assert!(served.wait(Duration::from_secs(30)).success());
    // The old members are out; the array is the larger devices, still 15 MiB of each.
    let grown = uraid_ok(&dir, &[vec!["grow", "--size", "max"], strs(&larger)].concat());
    assert!(grown.contains("component size 30720 -> 63488 sectors"), "{grown}");
    let served = Served::start(&dir, "gw", &larger);
    let _ = uraid(&dir, &["wait", "gw"]);
    let mut client = served.client();
    assert_eq!(client.size_bytes(), 62 * MIB);
    assert_reads_back(&mut client, &data);
    client.disconnect().unwrap();
    let checked = uraid_ok(&dir, &["check", "--wait", "gw"]);
    assert!(checked.contains("0 mismatched sectors in 63488 sectors"), "{checked}");
    uraid_ok(&dir, &["stop", "gw"]);
    assert!(served.wait(Duration::from_secs(30)).success());
    std::fs::remove_dir_all(&dir).unwrap();
}
