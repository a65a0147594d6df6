//! `uraid grow --level 6`: a stopped RAID5 taken over to RAID6 by a spare, as md does with
//! mdadm's --layout=preserve. mdadm reads the superblocks (RAID6 left-symmetric-6, the spare
//! the last member, rebuilt from its start); served, the array builds Q as a rebuild, keeps its
//! data and checks clean; then `--layout left-symmetric` restripes it, and it still does. Then
//! back: `--level 5` restripes to left-symmetric-6 and frees Q's member as a spare, `--level
//! 4` restripes to parity-last and renames, `--level 5 --layout left-asymmetric` renames back
//! and restripes; the data and a clean check after each. What md does not take over is
//! refused with every member left as it was.

mod serve_common;
mod stopped_common;

use serve_common::{tempdir, text, uraid, uraid_ok};
use std::path::{Path, PathBuf};
use stopped_common::{
    MIB, add_spares, examine, images, serve_and_check, small_array, small_array_in, strs,
};

#[test]
fn a_raid5_taken_over_to_raid6_builds_q_and_keeps_its_data() {
    let dir = tempdir("takeover");
    // No room after the data: its restripes go down, cut short within a few windows (up they
    // would move the data by about 8 MiB, two windows of it).
    let (mut members, data) = small_array_in(&dir, "to", true, 9);
    members.extend(add_spares(&dir, "to", &members, 2));
    let all = strs(&members);
    let said = uraid_ok(&dir, &[&["grow", "--level", "6"][..], &all].concat());
    let q = "s0.img becomes Q";
    assert!(said.contains("RAID5 taken over to RAID6 left-symmetric-6 with 4 members"), "{said}");
    assert!(said.contains(q), "{said}");
    let examined = examine(&members[3]);
    for line in [
        "Raid Level : raid6",
        "Raid Devices : 4",
        "Layout : left-symmetric-6",
        "Recovery Offset : 0 sectors",
        "Device Role : Active device 3",
    ] {
        assert!(examined.contains(line), "{line}: {examined}");
    }
    assert!(examine(&members[4]).contains("Device Role : spare"));
    assert!(!examine(&members[0]).contains("Recovery Offset"));
    serve_and_check(&dir, "to", &members, (&data, 16 * MIB), |_| ());
    assert!(!examine(&members[3]).contains("Recovery Offset"), "Q built");
    let restriped = uraid_ok(&dir, &[&["grow", "-p", "left-symmetric"][..], &all].concat());
    assert!(restriped.contains("left-symmetric-6 to left-symmetric"), "{restriped}");
    serve_and_check(&dir, "to", &members, (&data, 16 * MIB), |_| ());
    // Once RAID6, not again.
    let out = uraid(&dir, &[&["grow", "--level", "6"][..], &all].concat());
    assert!(text(&out.stderr).contains("not level 6"), "{}", text(&out.stderr));
    back_to_raid5_and_raid4(&dir, &members, &data);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The RAID6 above (left-symmetric, s0.img in slot 3) back to RAID5 as mdadm does it:
/// restriped to left-symmetric-6 (here cut short and gone on with), then Q's member left a
/// spare; on to RAID4 (restriped to parity-last first) and back to RAID5 in left-asymmetric
/// (renamed, then restriped). Served and checked after each.
fn back_to_raid5_and_raid4(dir: &Path, members: &[PathBuf], data: &[u8]) {
    let all = strs(members);
    // The restripe cut short, as a crash would: --continue finishes it, --level then takes over.
    let to_five = [&["--level", "5"][..], &all].concat();
    let said = stopped_common::grow(dir, &to_five, Some(2));
    assert!(said.contains("stopped after 2 windows"), "{said}");
    assert!(said.contains("then `uraid grow --level 5` takes it over"), "{said}");
    assert!(examine(&members[0]).contains("Raid Level : raid6"), "not taken over yet");
    let said = uraid_ok(dir, &[&["grow", "--continue"][..], &all].concat());
    assert!(said.contains("to left-symmetric-6"), "{said}");
    let said = uraid_ok(dir, &[&["grow"][..], &to_five].concat());
    assert!(!said.contains("restriped"), "{said}");
    let freed = "RAID6 taken over to RAID5 left-symmetric with 3 members: ";
    assert!(said.contains(&format!("{freed}{} held Q", members[3].display())), "{said}");
    let examined = examine(&members[0]);
    for line in ["Raid Level : raid5", "Raid Devices : 3", "Layout : left-symmetric\n"] {
        assert!(examined.contains(line), "{line}: {examined}");
    }
    assert!(examine(&members[3]).contains("Device Role : spare"));
    serve_and_check(dir, "to", members, (data, 16 * MIB), |_| ());
    let said = uraid_ok(dir, &[&["grow", "--level", "4", "--json"][..], &all].concat());
    let json: serde_json::Value = serde_json::from_str(said.trim()).expect(&said);
    assert_eq!((json["level"].as_i64(), json["raid_disks"].as_u64()), (Some(4), Some(3)));
    assert_eq!(json["restriped"]["new_layout"], "parity-last", "{json}");
    assert!(examine(&members[1]).contains("Raid Level : raid4"));
    serve_and_check(dir, "to", members, (data, 16 * MIB), |_| ());
    // mdadm's --layout: parity-last first, then restriped to the layout asked.
    let said =
        uraid_ok(dir, &[&["grow", "--level", "5", "-p", "left-asymmetric"][..], &all].concat());
    assert!(said.contains("RAID4 taken over to RAID5 parity-last with 3 members, nothing moved"));
    assert!(said.contains("restriped from parity-last to left-asymmetric"), "{said}");
    assert!(examine(&members[2]).contains("Layout : left-asymmetric"));
    serve_and_check(dir, "to", members, (data, 16 * MIB), |_| ());
}

/// mdadm's `--grow --level=6` without `--layout=preserve`: taken over and restriped to
/// left-symmetric in one pass, the restripe building Q as it goes (cut short here, as a crash
/// would, and gone on with): the Q member in sync at the end, nothing rebuilt when served, the
/// data and a check right.
#[test]
fn a_raid5_taken_over_to_raid6_in_one_pass() {
    let dir = tempdir("takeover-one-pass");
    let (mut members, data) = small_array_in(&dir, "op", true, 9);
    members.extend(add_spares(&dir, "op", &members, 1));
    let all = strs(&members);
    let one_pass = [&["--level", "6", "-p", "left-symmetric"][..], &all].concat();
    let said = stopped_common::grow(&dir, &one_pass, Some(2));
    assert!(said.contains("s0.img becomes Q, built by the restripe as it goes"), "{said}");
    assert!(said.contains("left-symmetric-6 to left-symmetric stopped after 2 windows"), "{said}");
    assert!(examine(&members[3]).contains("Recovery Offset : 0 sectors"), "not built yet");
    // Reverted, its old layout would hold data on the member still being built.
    let revert = [&["assemble", "--update", "revert-reshape"][..], &all].concat();
    stopped_common::refused(&dir, &members, &revert, "builds the Q member a takeover added");
    let said = uraid_ok(&dir, &[&["grow", "--continue"][..], &all].concat());
    assert!(said.contains("left-symmetric-6 to left-symmetric"), "{said}");
    let examined = examine(&members[3]);
    for line in ["Raid Level : raid6", "Layout : left-symmetric\n", "Device Role : Active device 3"]
    {
        assert!(examined.contains(line), "{line}: {examined}");
    }
    assert!(!examined.contains("Recovery Offset"), "Q built by the restripe: {examined}");
    serve_and_check(&dir, "op", &members, (&data, 16 * MIB), |_| ());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn what_md_does_not_take_over_is_refused_and_left_alone() {
    let dir = tempdir("takeover-refused");
    let (mut members, _) = small_array(&dir, "tr", false);
    let refused = |members: &[PathBuf], extra: &[&str], why: &str| {
        let before = images(members);
        let out = uraid(&dir, &[&["grow"][..], extra, &strs(members)].concat());
        assert!(!out.status.success(), "{extra:?} took over");
        assert!(text(&out.stderr).contains(why), "{extra:?}: {}", text(&out.stderr));
        assert!(images(members) == before, "{extra:?} wrote to a member");
    };
    refused(&members, &["--level", "6"], "1 new members need as many spares");
    members.extend(add_spares(&dir, "tr", &members, 1));
    refused(&members, &["--level", "6", "-n", "5"], "has 4 members");
    refused(&members, &["--level", "5"], "not level 5 (md layout 2) to level 5");
    refused(&members, &["--level", "1"], "takes RAID4, 5 and 6 among each other");
    // Refused before the restripe to parity-last that RAID4 needs first.
    refused(&members, &["--level", "4", "-n", "4"], "has 3 members");
    refused(&members, &["--level", "4", "-p", "left-symmetric"], "goes to RAID5 or RAID6");
    refused(&members, &["--level", "6", "-p", "left-symmetric-9"], "left-symmetric-9");
    refused(&members, &["--level", "6", "-c", "32K"], "cannot be used with");
    // A RAID4 with no room before its data nor after it: taken over to RAID5, but not
    // restriped after, which it says, the takeover standing.
    let dir3 = tempdir("takeover-no-room");
    let four = serve_common::member_files(&dir3, 3, 9);
    for m in &four {
        let file = std::fs::OpenOptions::new().write(true).open(m).unwrap();
        file.set_len((16 << 10) + 8 * MIB).unwrap();
    }
    let create = ["create", "-l", "4", "-n", "3", "--size", "8M", "--data-offset", "16K"];
    uraid_ok(&dir3, &[&create[..], &["--assume-clean", "-N", "t4"], &strs(&four)].concat());
    let out = uraid(
        &dir3,
        &[&["grow", "--level", "5", "-p", "left-symmetric"][..], &strs(&four)].concat(),
    );
    let (said, err) = (text(&out.stdout), text(&out.stderr));
    assert!(!out.status.success() && err.contains("taken over, but not restriped"), "{err}");
    assert!(err.contains("has 0 before it and 0 after"), "{err}");
    assert!(said.contains("RAID4 taken over to RAID5 parity-last"), "{said}");
    let examined = examine(&four[0]);
    assert!(examined.contains("Raid Level : raid5") && examined.contains("parity-last"));
    std::fs::remove_dir_all(&dir3).unwrap();
    // RAID5 of 2 members would be RAID6 of 3.
    let dir2 = tempdir("takeover-two");
    let two = serve_common::member_files(&dir2, 2, 24);
    let create = ["create", "-l", "5", "-n", "2", "--size", "8M", "--assume-clean", "-N", "t2"];
    uraid_ok(&dir2, &[&create[..], &strs(&two)].concat());
    let mut two_and_spare = two.clone();
    two_and_spare.extend(add_spares(&dir2, "t2", &two, 1));
    let before = images(&two_and_spare);
    let out = uraid(&dir2, &[&["grow", "--level", "6"][..], &strs(&two_and_spare)].concat());
    assert!(text(&out.stderr).contains("RAID6"), "{}", text(&out.stderr));
    assert!(images(&two_and_spare) == before, "a 3-member RAID6 recorded");
    std::fs::remove_dir_all(&dir2).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}
