//! `uraid grow --raid-devices`, `--layout`, `--chunk`: a stopped array grown by members or
//! given a new layout or chunk keeps its data, reads zeros in the room it gained, has right
//! parity everywhere (a check finds nothing), and mdadm reads its superblocks; a reshape cut
//! short (as a crash would, after some windows) is refused by assemble and serve, shows in
//! mdadm --examine, and `--continue` finishes it; what cannot grow is refused with every
//! member left as it was.

mod serve_common;
mod stopped_common;

use serve_common::{Served, tempdir, text, uraid, uraid_ok};
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};
use std::time::Duration;
use stopped_common::{
    DATA_OFFSET, MIB, add_spares, assert_reads_back, examine, grow, refused_grow, small_array,
    small_array_in, strs, superblock_of,
};

/// Serves the grown array: the old data, zeros after it up to `size`, a new write at its end
/// (which stays), and a check with no mismatch.
fn serve_and_check(dir: &Path, name: &str, members: &[PathBuf], data: &[u8], size: u64) {
    stopped_common::serve_and_check(dir, name, members, (data, size), |client| {
        client.write(size - 65536, &vec![0x5a; 65536], true).unwrap();
        assert_eq!(client.read(size - 65536, 65536).unwrap(), vec![0x5a; 65536]);
    });
}

#[test]
fn a_reshape_cut_short_is_refused_until_continued_and_keeps_the_data() {
    let dir = tempdir("reshape");
    let (mut members, data) = small_array(&dir, "rs", true);
    members.extend(add_spares(&dir, "rs", &members, 3));
    let all = strs(&members);
    // Three members to five: two of the three spares taken, in the order given.
    let five = [&["-n", "5"][..], &all].concat();
    let said = grow(&dir, &five, Some(2));
    assert!(said.contains("stopped after 2 windows"), "{said}");
    let examined = examine(&members[3]);
    for line in ["Raid Devices : 5", "Delta Devices : 2 (3->5)", "Reshape pos'n : 1536\n"] {
        assert!(examined.contains(line), "{line}: {examined}");
    }
    assert!(examined.contains("New Offset : 1792 sectors"), "{examined}");
    // uraid's examine says the same.
    let ours = uraid_ok(&dir, &["examine", all[3]]);
    for line in ["New Offset : 1792 sectors", "Reshape pos'n : 1536\n", "Delta Devices : 2 (3->5)"]
    {
        assert!(ours.contains(line), "{line}: {ours}");
    }
    assert!(ours.contains("Write Hole Log : none during a reshape"), "{ours}");
    let refusal = text(&uraid(&dir, &[&["assemble", "-o", "/dev/null"][..], &all].concat()).stderr);
    assert!(refusal.contains("a reshape is in progress (`uraid grow --continue`"), "{refusal}");
    let served = uraid(&dir, &[&["serve", "--name", "rs"][..], &all].concat());
    assert!(!served.status.success(), "served mid-reshape");
    assert!(text(&served.stderr).contains("uraid grow --continue"), "{}", text(&served.stderr));

    let cont = [&["grow", "--continue", "--json"][..], &all].concat();
    let report: serde_json::Value = serde_json::from_str(&uraid_ok(&dir, &cont)).unwrap();
    assert_eq!(
        (report["old_raid_disks"].as_u64(), report["new_raid_disks"].as_u64()),
        (Some(3), Some(5))
    );
    assert_eq!(report["new_array_kib"], 32768, "four data members of 8 MiB: {report}");
    assert!(report["from_sector"].as_u64().unwrap() > 0, "{report}");
    assert_eq!(report["new_data_offset_sectors"], 1792, "mdadm's move: {report}");
    let examined = examine(&members[4]);
    for line in [
        "Raid Devices : 5",
        "Data Offset : 1792 sectors",
        "Avail Dev Size : 47360 sectors",
        "Array Size : 32768 KiB",
        "Device Role : Active device 4",
        "State : clean",
    ] {
        assert!(examined.contains(line), "{line}: {examined}");
    }
    assert!(!examined.contains("Reshape"), "{examined}");
    assert!(examine(&members[5]).contains("Device Role : spare"));
    let sb = superblock_of(&members[0]);
    assert_eq!((sb.feature_map & 0x44, sb.data_size_sectors), (0, 47360));
    serve_and_check(&dir, "rs", &members, &data, 32 * MIB);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A crash in the middle of the first superblock writes (two of four members kept their
/// old superblock, one event behind, in the old shape): `--continue` gives them the start's
/// and finishes.
#[test]
fn a_reshape_whose_first_superblock_writes_were_cut_off_goes_on() {
    let dir = tempdir("reshape-torn");
    let (mut members, data) = small_array(&dir, "rt", true);
    members.extend(add_spares(&dir, "rt", &members, 1));
    let all = strs(&members);
    let kept: Vec<_> = [&members[1], &members[3]].into_iter().map(|m| superblock_of(m)).collect();
    let said = grow(&dir, &[&["-n", "4"][..], &all].concat(), Some(0));
    assert!(said.contains("stopped after 0 windows"), "{said}");
    for (m, sb) in [&members[1], &members[3]].into_iter().zip(&kept) {
        let file = std::fs::OpenOptions::new().write(true).open(m).unwrap();
        file.write_all_at(&sb.encode(), 4096).unwrap();
    }
    let refusal = text(&uraid(&dir, &[&["assemble", "-o", "/dev/null"][..], &all].concat()).stderr);
    assert!(refusal.contains("a reshape is in progress"), "{refusal}");
    let said = uraid_ok(&dir, &[&["grow", "--continue"][..], &all].concat());
    assert_eq!(said.matches("last superblock write had not reached it").count(), 2, "{said}");
    let from = "from 3 to 4 members, left-symmetric to left-symmetric, 64K to 64K chunks, from \
                array sector 0";
    assert!(said.contains(from), "{said}");
    serve_and_check(&dir, "rt", &members, &data, 24 * MIB);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A member cut short in the middle of a reshape (a device replaced by a smaller one, a file
/// truncated): `--continue` refuses it by name before copying anything, every member left as
/// it was; with its bytes back it finishes with every byte of the data.
#[test]
fn a_reshape_with_a_member_cut_short_is_refused_until_it_is_whole() {
    let dir = tempdir("reshape-cut-member");
    let (mut members, data) = small_array(&dir, "rc", true);
    members.extend(add_spares(&dir, "rc", &members, 1));
    let all = strs(&members);
    let said = grow(&dir, &[&["-n", "4"][..], &all].concat(), Some(2));
    assert!(said.contains("stopped after 2 windows"), "{said}");
    let whole = std::fs::read(&members[2]).unwrap();
    let cut = DATA_OFFSET + 6 * MIB;
    std::fs::OpenOptions::new().write(true).open(&members[2]).unwrap().set_len(cut).unwrap();
    let args = [&["grow", "--continue"][..], &all].concat();
    stopped_common::refused(&dir, &members, &args, "m2.img: 7340032 bytes is too small");
    let file = std::fs::OpenOptions::new().write(true).open(&members[2]).unwrap();
    file.write_all_at(&whole[cut as usize..], cut).unwrap();
    let said = uraid_ok(&dir, &args);
    assert!(said.contains("reshaped from 3 to 4 members"), "{said}");
    serve_and_check(&dir, "rc", &members, &data, 24 * MIB);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A member lost in the middle of a reshape: `--continue` goes on without it, as md goes on
/// degraded (its old chunks rebuilt from their rows); the array serves degraded with its
/// data, rebuilds onto the spare, and a check finds nothing. Given back, the lost member is
/// behind and marked faulty: left out, never read as holding the data.
#[test]
fn a_reshape_that_loses_a_member_goes_on_degraded() {
    let dir = tempdir("reshape-degraded");
    let (mut members, data) = small_array(&dir, "rd", true);
    members.extend(add_spares(&dir, "rd", &members, 2));
    let all = strs(&members);
    let said = grow(&dir, &[&["-n", "4"][..], &all].concat(), Some(2));
    assert!(said.contains("stopped after 2 windows"), "{said}");
    let without: Vec<&str> = all.iter().copied().filter(|m| !m.ends_with("/m1.img")).collect();
    let said = uraid_ok(&dir, &[&["grow", "--continue"][..], &without].concat());
    assert!(said.contains("reshaped from 3 to 4 members"), "{said}");
    assert!(said.contains("degraded, slots [1] missing"), "{said}");
    let plan = uraid_ok(&dir, &[&["assemble", "--json"][..], &all].concat());
    let plan: serde_json::Value = serde_json::from_str(&plan).unwrap();
    assert!(plan["stale"].to_string().contains("m1.img"), "m1 left out: {plan}");
    // Served without it: the spare rebuilds slot 1.
    let served_members: Vec<PathBuf> =
        members.iter().filter(|m| !m.ends_with("m1.img")).cloned().collect();
    let served = Served::start(&dir, "rd", &served_members);
    let mut client = served.client();
    assert_eq!(client.size_bytes(), 24 * MIB);
    assert_reads_back(&mut client, &data);
    client.disconnect().unwrap();
    let _ = uraid(&dir, &["wait", "rd"]);
    let checked = uraid_ok(&dir, &["check", "--wait", "rd"]);
    assert!(checked.contains("0 mismatched sectors in 16384 sectors"), "{checked}");
    let detail = uraid_ok(&dir, &["detail", "rd"]);
    assert!(detail.contains("Active Devices : 4"), "rebuilt: {detail}");
    assert!(detail.contains("1   active sync       ") && detail.contains("s1.img"), "{detail}");
    uraid_ok(&dir, &["stop", "rd"]);
    assert!(served.wait(Duration::from_secs(30)).success());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// RAID6 in one go, without a bitmap; then grown again, from the offset the first left.
#[test]
fn a_raid6_grows_twice_and_keeps_its_data() {
    let dir = tempdir("reshape6");
    let members = serve_common::member_files(&dir, 4, 24);
    let create = ["create", "-l", "6", "-n", "4", "--chunk", "64K", "--size", "8M", "-N", "r6"];
    uraid_ok(&dir, &[&create[..], &["--assume-clean"], &strs(&members)].concat());
    let served = Served::start(&dir, "r6", &members);
    let mut client = served.client();
    let data: Vec<u8> = (0..16 * MIB).map(|i| (i * 13 + i / 65536) as u8).collect();
    stopped_common::write_all(&mut client, &data);
    client.disconnect().unwrap();
    uraid_ok(&dir, &["stop", "r6"]);
    assert!(served.wait(Duration::from_secs(30)).success());
    let mut all = members.clone();
    all.extend(add_spares(&dir, "r6", &members, 2));
    let grown = uraid_ok(&dir, &[&["grow", "-n", "5"][..], &strs(&all)].concat());
    assert!(grown.contains("from 4 to 5 members") && grown.contains("2048 -> 1664"), "{grown}");
    let grown = uraid_ok(&dir, &[&["grow", "-n", "6"][..], &strs(&all)].concat());
    assert!(grown.contains("from 5 to 6 members") && grown.contains("1664 -> 1152"), "{grown}");
    serve_and_check(&dir, "r6", &all, &data, 32 * MIB);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A new layout and chunk on the same members, cut short and continued, then members added
/// with a smaller chunk at once: the data stays, the superblocks say the new shape (mdadm's
/// examine too), a check finds every parity right.
#[test]
fn a_new_layout_and_chunk_keep_the_data() {
    let dir = tempdir("reshape-shape");
    // No room after the data: the new shape goes down, cut short within a few windows.
    let (mut members, mut data) = small_array_in(&dir, "sh", true, 9);
    let all = strs(&members);
    let shape = [&["-p", "left-asymmetric", "--chunk", "128K"][..], &all].concat();
    let said = grow(&dir, &shape, Some(2));
    assert!(said.contains("stopped after 2 windows"), "{said}");
    let examined = examine(&members[0]);
    for line in ["New Layout : left-asymmetric", "New Chunksize : 128K", "Raid Devices : 3"] {
        assert!(examined.contains(line), "{line}: {examined}");
    }
    assert!(!examined.contains("Delta Devices"), "{examined}");
    let ours = uraid_ok(&dir, &[&["examine"][..], &all[..1]].concat());
    assert!(ours.contains("New Chunksize : 128K"), "{ours}");
    let done = uraid_ok(&dir, &[&["grow", "--continue"][..], &all].concat());
    let moved = "left-symmetric to left-asymmetric, 64K to 128K chunks";
    assert!(done.contains(moved) && done.contains("2048 -> 1280"), "{done}");
    let examined = examine(&members[2]);
    for line in ["Layout : left-asymmetric", "Chunk Size : 128K", "Data Offset : 1280 sectors"] {
        assert!(examined.contains(line), "{line}: {examined}");
    }
    assert!(!examined.contains("Reshape") && !examined.contains("New "), "{examined}");
    serve_and_check(&dir, "sh", &members, &data, 16 * MIB);
    // serve_and_check wrote its last 64 KiB.
    let end = data.len() - 65536;
    data[end..].fill(0x5a);
    members.extend(add_spares(&dir, "sh", &members, 1));
    let four = [&["-n", "4", "-c", "32K"][..], &strs(&members)].concat();
    let grown = uraid_ok(&dir, &[&["grow"][..], &four].concat());
    assert!(grown.contains("from 3 to 4 members, left-asymmetric to left-asymmetric, 128K to 32K"));
    serve_and_check(&dir, "sh", &members, &data, 24 * MIB);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// More room after the data (4 MiB) than before it (under 1 MiB): a new layout and chunk move
/// the data up by half that room, as mdadm does (md's reshape backwards, from the array's end
/// down), cut short and continued; the superblocks say backwards, the data stays, each
/// member's usable size shrinks by the move.
#[test]
fn a_new_layout_moves_the_data_up_into_the_room_after_it() {
    let dir = tempdir("reshape-up");
    let (members, data) = small_array_in(&dir, "up", true, 13);
    let all = strs(&members);
    let shape = [&["-p", "right-symmetric", "--chunk", "32K"][..], &all].concat();
    let said = grow(&dir, &shape, Some(2));
    assert!(said.contains("stopped after 2 windows"), "{said}");
    let sb = superblock_of(&members[1]);
    let backwards = uraid_format::feature::RESHAPE_BACKWARDS;
    assert_ne!(sb.feature_map & backwards, 0, "md's flag for the same members up");
    assert_eq!((sb.delta_disks, sb.new_offset_sectors, sb.data_offset_sectors), (0, 4096, 2048));
    let position = sb.reshape_position_sectors;
    assert!(position > 0 && position < 32768, "came down from the end to {position}");
    let examined = examine(&members[1]);
    for line in ["New Layout : right-symmetric", "New Offset : 6144 sectors", "New Chunksize : 32K"]
    {
        assert!(examined.contains(line), "{line}: {examined}");
    }
    let done = uraid_ok(&dir, &[&["grow", "--continue"][..], &all].concat());
    assert!(done.contains("2048 -> 6144"), "{done}");
    let examined = examine(&members[0]);
    for line in ["Layout : right-symmetric", "Data Offset : 6144 sectors", "Avail Dev Size : 20480"]
    {
        assert!(examined.contains(line), "{line}: {examined}");
    }
    assert!(!examined.contains("Reshape") && !examined.contains("New "), "{examined}");
    assert_eq!(superblock_of(&members[2]).feature_map & backwards, 0);
    serve_and_check(&dir, "up", &members, &data, 16 * MIB);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--data-offset` (mdadm's): the data goes where asked, down here although there is more
/// room after it; an offset the rules refuse leaves every member as it was.
#[test]
fn a_data_offset_asked_for_is_where_the_data_goes() {
    let dir = tempdir("reshape-offset");
    let (members, data) = small_array_in(&dir, "do", false, 13);
    let all = strs(&members);
    let with = |extra: &[&'static str]| -> Vec<&str> { [extra, &all].concat() };
    refused_grow(&dir, &members, &with(&["--data-offset", "512K"]), "--raid-devices");
    let asked = with(&["-p", "left-asymmetric", "--data-offset", "1020K"]);
    refused_grow(&dir, &members, &asked, "a move down by 8 sectors, and it must be at least 128");
    let said = grow(&dir, &with(&["-p", "left-asymmetric", "--data-offset", "512K"]), None);
    assert!(said.contains("data offset 2048 -> 1024 sectors"), "{said}");
    assert_eq!(superblock_of(&members[0]).data_offset_sectors, 1024);
    serve_and_check(&dir, "do", &members, &data, 16 * MIB);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn what_cannot_be_reshaped_is_refused_and_left_alone() {
    let dir = tempdir("reshape-refused");
    let (mut members, _) = small_array(&dir, "rf", false);
    members.extend(add_spares(&dir, "rf", &members, 1));
    let all = strs(&members);
    let with = |extra: &[&'static str]| -> Vec<&str> { [extra, &all].concat() };
    refused_grow(&dir, &members, &with(&["-n", "5"]), "2 new members need as many spares");
    refused_grow(
        &dir,
        &members,
        &with(&["-n", "3"]),
        "with the same layout and chunk changes nothing",
    );
    refused_grow(&dir, &members, &with(&["-c", "48K"]), "it must be a power of two");
    refused_grow(&dir, &members, &with(&["-c", "16M"]), "that divides each member's 16384 sectors");
    refused_grow(&dir, &members, &with(&["-p", "left-symmetric-6"]), "not valid for RAID5");
    refused_grow(&dir, &members, &with(&["--continue"]), "no reshape is in progress");
    refused_grow(&dir, &members, &["-n", "4", all[0], all[1], all[3]], "degraded (slots [2]");
    // m1's own bad block log moved to just before its data (as older mdadm put it): no
    // room to move the data down there.
    let mut sb = superblock_of(&members[1]);
    sb.bblog_offset_sectors = 2048 - 8 - 8;
    sb.seal();
    let file = std::fs::OpenOptions::new().write(true).open(&members[1]).unwrap();
    file.write_all_at(&sb.encode(), 4096).unwrap();
    refused_grow(&dir, &members, &with(&["-n", "4"]), "m1.img has 0 sectors between md's metadata");
    std::fs::remove_dir_all(&dir).unwrap();
}
