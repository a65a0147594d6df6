//! Every assembly refusal, from the command line.
//!
//! Goal: each refusal of issue 4 section 2 exits non-zero with a message naming the member
//! and the reason, and leaves every member byte for byte as it was. Method: copy the members
//! of a real md array (r5-left-symmetric, 5 members) into a scratch directory, make one
//! member wrong per case (another array's member, a truncated copy, a flipped byte, a
//! superblock with an impossible field or fewer events, resealed with uraid-format), run
//! `uraid assemble -o`, and compare the sha256 of every member before and after.

mod md_common;

use md_common::{file_sha256, scratch, text, unpack, uraid};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use uraid_format::Superblock1;

fn r5_members(case: &str) -> Vec<PathBuf> {
    let (name, manifest) = fixture("r5-left-symmetric");
    let dir = scratch(&format!("refusal-{case}"));
    unpack(&name, &manifest)
        .into_iter()
        .enumerate()
        .map(|(i, (_, path))| {
            let copy = dir.join(format!("m{i}.img"));
            std::fs::copy(&path, &copy).unwrap();
            copy
        })
        .collect()
}

fn fixture(name: &str) -> (String, serde_json::Value) {
    md_common::fixtures().into_iter().find(|(n, _)| n == name).unwrap()
}

/// Changes the superblock of `path` and reseals it (only the field is then wrong).
fn rewrite_superblock(path: &Path, change: impl FnOnce(&mut Superblock1)) {
    let file = std::fs::OpenOptions::new().read(true).write(true).open(path).unwrap();
    let mut area = vec![0u8; 4096];
    file.read_exact_at(&mut area, 4096).unwrap();
    let mut superblock = Superblock1::decode(&area).unwrap();
    change(&mut superblock);
    superblock.seal();
    superblock.encode_into(&mut area);
    file.write_all_at(&area, 4096).unwrap();
}

/// Runs assemble; asserts it fails, names `member` and says `reason`, and wrote nothing.
fn refused(members: &[PathBuf], member: &Path, reason: &str) {
    let before: Vec<String> = members.iter().map(|m| file_sha256(m)).collect();
    let out = members[0].with_file_name("refused.out");
    let mut args = vec![PathBuf::from("assemble"), PathBuf::from("-o"), out.clone()];
    args.extend(members.iter().cloned());
    let output = uraid(&args);
    let stderr = text(&output.stderr);
    assert!(!output.status.success(), "assembly should be refused: {reason}");
    assert!(stderr.contains(&member.display().to_string()), "names {}: {stderr}", member.display());
    assert!(stderr.contains(reason), "says {reason:?}: {stderr}");
    let after: Vec<String> = members.iter().map(|m| file_sha256(m)).collect();
    assert_eq!(before, after, "a refused assembly changed a member");
    assert!(!out.exists(), "nothing is written out when refused");
}

#[test]
fn members_of_different_arrays() {
    let mut members = r5_members("foreign");
    let (name, manifest) = fixture("r4");
    let stranger = unpack(&name, &manifest)[0].1.clone();
    members[2] = stranger.clone();
    refused(&members, &stranger, "belongs to array");
}

#[test]
fn too_many_missing_members() {
    let members = r5_members("missing");
    refused(&members[..3], &PathBuf::from("slots [3, 4]"), "have no usable member");
}

#[test]
fn stale_member_is_left_out_and_can_tip_into_too_many_missing() {
    let members = r5_members("stale");
    rewrite_superblock(&members[1], |sb| sb.events -= 1);
    refused(&members[1..], &members[1], "stale: events");
    // With every other member present the stale one is just left out.
    let output = uraid([PathBuf::from("assemble"), PathBuf::from("--json")].iter().chain(&members));
    assert!(output.status.success(), "{}", text(&output.stderr));
    let plan: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(plan["missing_slots"], serde_json::json!([1]));
    assert_eq!(plan["stale"][0]["member"], members[1].display().to_string());
}

#[test]
fn member_too_small() {
    let members = r5_members("small");
    let file = std::fs::OpenOptions::new().write(true).open(&members[3]).unwrap();
    file.set_len(3 << 19).unwrap();
    refused(&members, &members[3], "too small");
    // Cut inside the superblock itself: said so, not "failed to fill whole buffer".
    let members = r5_members("tiny");
    let file = std::fs::OpenOptions::new().write(true).open(&members[2]).unwrap();
    file.set_len(6000).unwrap();
    refused(&members, &members[2], "6000 bytes: too small to hold an md v1.2 superblock");
}

#[test]
fn corrupt_superblocks() {
    let members = r5_members("corrupt");
    let file = std::fs::OpenOptions::new().write(true).open(&members[1]).unwrap();
    file.write_all_at(&[0x55], 4096 + 100).unwrap();
    refused(&members, &members[1], "sb_csum");
    let members = r5_members("impossible");
    rewrite_superblock(&members[4], |sb| sb.chunk_sectors = 96);
    refused(&members, &members[4], "chunksize: 96 sectors is not valid");
}

#[test]
fn two_members_claiming_one_role() {
    let mut members = r5_members("duplicate");
    let copy = members[0].with_file_name("m0-copy.img");
    std::fs::copy(&members[0], &copy).unwrap();
    members.push(copy.clone());
    refused(&members, &copy, "both claim slot 0");
}

#[test]
fn one_member_given_twice_by_another_path() {
    let mut members = r5_members("twice");
    let link = members[0].with_file_name("link-to-m3");
    let _ = std::fs::remove_file(&link); // left by an earlier run
    std::os::unix::fs::symlink(&members[3], &link).unwrap();
    members.push(link.clone());
    refused(&members, &link, "are the same file or device");
}

#[test]
fn dirty_degraded_unless_forced() {
    let members = r5_members("dirty");
    for member in &members {
        rewrite_superblock(member, |sb| sb.resync_offset_sectors = 512);
    }
    refused(&members[1..], &members[1], "cannot start dirty degraded array");
    let out = members[0].with_file_name("forced.out");
    let mut args = vec![PathBuf::from("assemble"), "--force".into(), "-o".into(), out.clone()];
    args.extend(members[1..].iter().cloned());
    let output = uraid(&args);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(text(&output.stdout).contains("started dirty and degraded by --force"));
}

/// `-o` (or standard output) naming one of the members being read: the member would be
/// truncated or overwritten while it is read (`assemble -o` emptied it before). Refused
/// before anything is opened for writing, by `assemble` and by `build`, whatever path names
/// the member.
#[test]
fn an_output_over_a_member_is_refused() {
    let members = r5_members("output-over-member");
    let before: Vec<String> = members.iter().map(|m| file_sha256(m)).collect();
    let link = members[0].with_file_name("link-to-m2");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(&members[2], &link).unwrap();
    let build = |output: &Path| {
        let mut args: Vec<PathBuf> = ["build", "--level", "5", "--raid-devices", "5"]
            .into_iter()
            .chain(["--chunk", "64K", "--data-offset", "2048s", "-o"])
            .map(PathBuf::from)
            .collect();
        args.push(output.to_path_buf());
        args.extend(members.iter().cloned());
        uraid(&args)
    };
    let assemble = |output: &Path| {
        let mut args = vec![PathBuf::from("assemble"), PathBuf::from("-o"), output.to_path_buf()];
        args.extend(members.iter().cloned());
        uraid(&args)
    };
    for (verb, output) in [
        ("assemble", assemble(&members[3])),
        ("assemble", assemble(&link)),
        ("build", build(&link)),
    ] {
        let stderr = text(&output.stderr);
        assert!(!output.status.success(), "{verb}: writing over a member was not refused");
        assert!(stderr.contains("a member being read"), "{verb}: says why: {stderr}");
    }
    // Standard output opened on a member for appending (not truncated, as a device is not).
    let appending = std::fs::OpenOptions::new().append(true).open(&members[1]).unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_uraid"))
        .args(["assemble", "-o", "-"])
        .args(&members)
        .stdout(appending)
        .output()
        .unwrap();
    let stderr = text(&output.stderr);
    assert!(!output.status.success(), "standard output on a member was not refused");
    assert!(stderr.contains("standard output is"), "names standard output: {stderr}");
    let after: Vec<String> = members.iter().map(|m| file_sha256(m)).collect();
    assert_eq!(before, after, "a member was changed");
}
