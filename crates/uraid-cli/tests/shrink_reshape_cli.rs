//! `uraid grow --raid-devices N --shrink` with fewer members: md's reshape backwards. The
//! array keeps the data that fits the fewer members, the data moves up into the room after
//! it, the removed members are spares after it, mdadm reads every superblock on the way, a
//! reshape cut short is taken up by `--continue` (also with a removed member lost), and the
//! result serves with every parity right; what cannot go is refused with every member left
//! as it was.

mod serve_common;
mod stopped_common;

use serve_common::{tempdir, text, uraid, uraid_ok};
use std::path::{Path, PathBuf};
use stopped_common::{MIB, examine, grow, refused_grow, small_array_of, strs};

/// Serves the array with all of `members` (the removed ones as spares): `data`, its
/// first `size` bytes, reads back, and a check finds no mismatch.
fn serve_and_check(dir: &Path, name: &str, members: &[PathBuf], data: &[u8], size: u64) {
    let kept = &data[..size as usize];
    stopped_common::serve_and_check(dir, name, members, (kept, size), |_| {});
}

#[test]
fn a_raid5_reshaped_to_fewer_members_cut_short_and_continued() {
    let dir = tempdir("shrink-reshape");
    let bitmap = ["--chunk", "64K", "--bitmap", "internal", "--bitmap-chunk", "4K"];
    let (members, data) = small_array_of(&dir, "fw", ("5", 4), &bitmap);
    assert_eq!(data.len() as u64, 24 * MIB);
    let all = strs(&members);
    let with = |extra: &[&'static str]| -> Vec<&str> { [extra, &all].concat() };
    refused_grow(&dir, &members, &with(&["-n", "3"]), "give --shrink to let that go");
    refused_grow(&dir, &members, &with(&["-n", "1", "--shrink"]), "takes no fewer than 2");
    let said = grow(&dir, &with(&["-n", "3", "--shrink"]), Some(2));
    assert!(said.contains("stopped after 2 windows"), "{said}");
    // mdadm reads the reshape under way: backwards, the data moving up by mdadm's least move
    // (lcm(384, 256) / 3 = 256 sectors).
    let examined = examine(&members[3]);
    for line in ["Raid Devices : 3", "Delta Devices : -1 (4->3)", "New Offset : 2304 sectors"] {
        assert!(examined.contains(line), "{line}: {examined}");
    }
    assert!(examined.contains("Device Role : Active device 3"), "until the end: {examined}");
    // uraid's examine leaves out mdadm's sizes in brackets.
    let pos = examined.lines().find(|l| l.contains("Reshape pos'n")).expect("a position");
    let pos = pos.split(" (").next().unwrap();
    let ours = uraid_ok(&dir, &["examine", all[3]]);
    for line in ["Delta Devices : -1 (4->3)", "New Offset : 2304 sectors", pos.trim()] {
        assert!(ours.contains(line), "uraid's examine says {line}: {ours}");
    }
    let refusal = text(&uraid(&dir, &[&["assemble", "-o", "/dev/null"][..], &all].concat()).stderr);
    assert!(refusal.contains("a reshape is in progress (`uraid grow --continue`"), "{refusal}");

    let cont = [&["grow", "--continue", "--json"][..], &all].concat();
    let report: serde_json::Value = serde_json::from_str(&uraid_ok(&dir, &cont)).unwrap();
    assert_eq!(
        (report["old_raid_disks"].as_u64(), report["new_raid_disks"].as_u64()),
        (Some(4), Some(3))
    );
    assert_eq!(report["backwards"], true, "{report}");
    assert_eq!(report["new_array_kib"], 16384, "two data members of 8 MiB: {report}");
    let from = report["from_sector"].as_u64().unwrap();
    assert!(from > 0 && from < 32768, "taken up where it stopped: {report}");
    assert_eq!(report["new_data_offset_sectors"], 2304, "{report}");
    for m in &members[..3] {
        let examined = examine(m);
        for line in [
            "Raid Devices : 3",
            "Data Offset : 2304 sectors",
            "Avail Dev Size : 46848 sectors",
            "Array Size : 16384 KiB",
            "State : clean",
        ] {
            assert!(examined.contains(line), "{line}: {examined}");
        }
        assert!(!examined.contains("Reshape") && !examined.contains("Delta"), "{examined}");
    }
    assert!(examine(&members[3]).contains("Device Role : spare"), "the removed member");
    serve_and_check(&dir, "fw", &members, &data, 16 * MIB);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// RAID6 of five to four in one run after the removed member (slot 4) was lost in the middle:
/// its old chunks are rebuilt from their rows, and the array it leaves is whole.
#[test]
fn a_raid6_reshaped_to_fewer_members_without_the_removed_one() {
    let dir = tempdir("shrink-reshape6");
    let (members, data) = small_array_of(&dir, "f6", ("6", 5), &["--chunk", "64K"]);
    assert_eq!(data.len() as u64, 24 * MIB);
    let all = strs(&members);
    let said = grow(&dir, &[&["-n", "4", "--shrink"][..], &all].concat(), Some(1));
    assert!(said.contains("stopped after 1 windows"), "{said}");
    let said = uraid_ok(&dir, &[&["grow", "--continue"][..], &all[..4]].concat());
    assert!(said.contains("reshaped from 5 to 4 members"), "{said}");
    assert!(!said.contains("degraded"), "the array of four is whole: {said}");
    assert!(said.contains("data past 16384 KiB is gone"), "{said}");
    serve_and_check(&dir, "f6", &members[..4], &data, 16 * MIB);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// No room after the data (members exactly as large as the array uses): refused, naming the
/// way to make some.
#[test]
fn fewer_members_need_room_after_the_data() {
    let dir = tempdir("shrink-reshape-room");
    let members = serve_common::member_files(&dir, 4, 9);
    let create = ["create", "-l", "5", "-n", "4", "--chunk", "64K", "--assume-clean", "-N", "fr"];
    uraid_ok(&dir, &[&create[..], &strs(&members)].concat());
    let all = strs(&members);
    let args = [&["-n", "3", "--shrink"][..], &all].concat();
    refused_grow(&dir, &members, &args, "has 0 sectors after the array's data");
    refused_grow(&dir, &members, &args, "uraid grow --size SIZE --shrink");
    // Made room by giving up a chunk a member first, it goes.
    uraid_ok(&dir, &[&["grow", "--size", "7936K", "--shrink"][..], &all].concat());
    let said = uraid_ok(&dir, &[&["grow"][..], &args].concat());
    assert!(said.contains("reshaped from 4 to 3 members"), "{said}");
    std::fs::remove_dir_all(&dir).unwrap();
}
