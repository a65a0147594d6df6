//! Goal: `uraid zero-superblock` erases a v1.2 member's superblock and nothing else, so that
//! neither uraid nor mdadm finds an array on it and it can be created over without --force;
//! it refuses a member a running array holds (by any path), and a device with nothing to
//! erase unless --force; every device given is tried.
//!
//! Method: the built `uraid` binary on member files of a RAID6 it created (and served, for the
//! refusal); every byte of each file compared before and after.

mod serve_common;

use serve_common::{Served, create_raid6, member_files, tempdir, text, uraid};
use std::path::Path;

fn bytes(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap()
}

/// Fills a file with a pattern (no zeros), so that any byte zeroed by mistake shows.
fn patterned(path: &Path, len: usize) {
    let v: Vec<u8> = (0..len).map(|i| (i % 251) as u8 + 1).collect();
    std::fs::write(path, v).unwrap();
}

#[test]
fn the_superblock_goes_the_rest_stays_and_the_device_is_blank_to_create() {
    let dir = tempdir("zero-v12");
    let members = member_files(&dir, 4, 16);
    create_raid6("z", &members);
    let before = bytes(&members[0]);
    let out = uraid(&dir, &["zero-superblock", members[0].to_str().unwrap()]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(stdout.contains("zeroed its md v1.2 superblock (array z "), "{stdout}");
    assert!(stdout.contains("device 0, slot 0)"), "{stdout}");
    let after = bytes(&members[0]);
    assert!(after[4096..8192].iter().all(|&b| b == 0));
    assert_eq!(after[..4096], before[..4096]);
    assert_eq!(after[8192..], before[8192..], "bytes past the superblock changed");

    let mdadm = std::process::Command::new("mdadm").arg("--examine").arg(&members[0]).output();
    let mdadm = mdadm.expect("mdadm (the CI installs it)");
    assert!(text(&mdadm.stderr).contains("No md superblock detected"), "{}", text(&mdadm.stderr));
    let out = uraid(&dir, &["examine", members[0].to_str().unwrap()]);
    assert!(!out.status.success());

    // The others still hold theirs: create refuses them, then takes all four once zeroed.
    let create = || {
        std::process::Command::new(serve_common::BIN)
            .args(["create", "--level", "5", "-n", "4", "--chunk", "64K"])
            .args(&members)
            .output()
            .unwrap()
    };
    let out = create();
    assert!(!out.status.success(), "created over three members of an array");
    let rest: Vec<&str> = members[1..].iter().map(|p| p.to_str().unwrap()).collect();
    let out = uraid(&dir, &[&["zero-superblock"][..], &rest].concat());
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).lines().count(), 3, "{}", text(&out.stdout));
    let out = create();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_superblock_s_magic_in_the_array_s_data_is_data() {
    // A member holding a nested md device: md 1.0's magic where 1.0 would put it, inside the
    // v1.2 array's data area. It is the array's data and stays.
    use std::os::unix::fs::FileExt as _;
    let dir = tempdir("zero-nested");
    let members = member_files(&dir, 4, 16);
    create_raid6("nest", &members);
    let at = (16 << 20) - 8192;
    let nested = [0xfc, 0x4e, 0x2b, 0xa9, 1, 0, 0, 0];
    std::fs::OpenOptions::new()
        .write(true)
        .open(&members[0])
        .unwrap()
        .write_all_at(&nested, at)
        .unwrap();
    let out = uraid(&dir, &["zero-superblock", members[0].to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).lines().count(), 1, "{}", text(&out.stdout));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("left the md metadata 1.0") && stderr.contains("array's data"),
        "{stderr}"
    );
    assert_eq!(bytes(&members[0])[at as usize..at as usize + 8], nested);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_member_a_running_array_holds_is_refused_by_any_path() {
    let dir = tempdir("zero-held");
    let members = member_files(&dir, 4, 16);
    create_raid6("held", &members);
    let served = Served::start(&dir, "held", &members);
    let link = dir.join("link-to-m1");
    std::os::unix::fs::symlink(&members[1], &link).unwrap();
    for path in [&members[1], &link] {
        let out = uraid(&dir, &["zero-superblock", path.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(1));
        let stderr = text(&out.stderr);
        assert!(stderr.contains("held by a running uraid array"), "{stderr}");
        assert!(out.stdout.is_empty());
    }
    // The array still runs on its superblocks, and stops clean with them.
    serve_common::uraid_ok(&dir, &["stop", "held"]);
    served.wait(std::time::Duration::from_secs(30));
    let out = uraid(&dir, &["examine", members[1].to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn nothing_to_erase_is_an_error_unless_forced_and_every_device_is_tried() {
    let dir = tempdir("zero-blank");
    let data = dir.join("data.img");
    patterned(&data, 64 << 10);
    let before = bytes(&data);
    let members = member_files(&dir, 4, 16);
    create_raid6("mixed", &members);

    // A file without a superblock among members: the members are zeroed, the file is not.
    let (d, m0) = (data.to_str().unwrap(), members[0].to_str().unwrap());
    let out = uraid(&dir, &["zero-superblock", d, m0, "/nonexistent/x"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("data.img: no md superblock or RAID metadata found"), "{stderr}");
    assert!(stderr.contains("/nonexistent/x: No such file"), "{stderr}");
    assert!(stderr.contains("2 of 3 devices not zeroed"), "{stderr}");
    assert!(text(&out.stdout).contains("m0.img: zeroed its md v1.2 superblock"));
    assert_eq!(bytes(&data), before, "a device with nothing to erase was written");

    let out = uraid(&dir, &["zero-superblock", "--force", d]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("no superblock recognised; --force"));
    let after = bytes(&data);
    assert!(after[4096..8192].iter().all(|&b| b == 0));
    assert_eq!((&after[..4096], &after[8192..]), (&before[..4096], &before[8192..]));

    for not_a_member in ["/dev/null", dir.to_str().unwrap()] {
        let out = uraid(&dir, &["zero-superblock", "--force", not_a_member]);
        assert_eq!(out.status.code(), Some(1), "{not_a_member}");
        assert!(text(&out.stderr).contains("a member is a block device or a regular file"));
    }
    let _ = std::fs::remove_dir_all(&dir);
}
