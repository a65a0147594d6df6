//! `uraid assemble` and `uraid examine` against arrays written by Linux md.
//!
//! Goal: uraid finds every fixture array from its superblocks alone and reads exactly md's
//! contents, whole and degraded, and examine reports what mdadm reported. Method: for every
//! fixture, assemble its members (given in reverse order, so the roles must come from the
//! superblocks) with `-o` and compare the sha256 with the manifest; again leaving out each
//! member (RAID6: each pair) so the engine rebuilds from P and Q; and compare examine's JSON
//! with the manifest and, field by field, with the `mdadm --examine` logs shipped beside it.

mod md_common;

use md_common::{fixtures, fixtures_dir, scratch, text, unpack, uraid};
use serde_json::Value;
use std::path::PathBuf;

/// Assembles `members`; returns the plan (JSON) and the sha256 of the contents.
fn assemble(name: &str, members: &[PathBuf]) -> (Value, String) {
    let out = scratch("md-meta-out").join(format!("{name}.img"));
    let mut args = vec!["assemble".into(), "--json".into(), "-o".into(), out.clone()];
    args.extend(members.iter().cloned());
    let output = uraid(&args);
    assert!(output.status.success(), "{name} {members:?}: {}", text(&output.stderr));
    let plan: Value = serde_json::from_slice(&output.stdout).unwrap();
    let sha = md_common::file_sha256(&out);
    std::fs::remove_file(&out).unwrap();
    (plan, sha)
}

/// Every way to leave out `count` of `members`.
fn subsets(len: usize, count: usize) -> Vec<Vec<usize>> {
    match count {
        1 => (0..len).map(|i| vec![i]).collect(),
        2 => (0..len).flat_map(|i| (i + 1..len).map(move |j| vec![i, j])).collect(),
        _ => Vec::new(),
    }
}

#[test]
fn every_fixture_assembles_whole_and_degraded_with_md_contents() {
    let mut degraded_runs = 0;
    for (name, manifest) in fixtures() {
        let want = manifest["content"]["sha256"].as_str().unwrap();
        let mut members: Vec<PathBuf> = unpack(&name, &manifest).into_iter().map(|m| m.1).collect();
        members.reverse();
        let (plan, sha) = assemble(&name, &members);
        assert_eq!(sha, want, "{name} as shipped");
        assert_eq!(plan["array_size_bytes"], manifest["array_size_bytes"], "{name}");
        assert_eq!(plan["missing_slots"], manifest["missing_slots"], "{name}");
        assert_eq!(plan["stale"].as_array().unwrap().len(), 0, "{name}");
        assert_eq!(plan["array_uuid"], manifest["array_uuid"], "{name}");
        assert_eq!(plan["layout"], manifest["layout"], "{name}");
        let max_degraded = if manifest["level"] == 6 { 2 } else { 1 };
        let already = manifest["missing_slots"].as_array().unwrap().len();
        for leave_out in subsets(members.len(), max_degraded - already) {
            let kept: Vec<PathBuf> = (0..members.len())
                .filter(|i| !leave_out.contains(i))
                .map(|i| members[i].clone())
                .collect();
            let (plan, sha) = assemble(&name, &kept);
            assert_eq!(sha, want, "{name} without {leave_out:?}");
            assert_eq!(plan["missing_slots"].as_array().unwrap().len(), max_degraded);
            degraded_runs += 1;
        }
    }
    // 7 RAID4/5 fixtures lose each of 4-5 members, 3 RAID6 each of 15 pairs, r6-degraded 5.
    assert!(degraded_runs >= 7 * 4 + 3 * 15 + 5, "only {degraded_runs} degraded runs");
}

/// The value after "<key> : " on the line of mdadm's log that has it.
fn mdadm_field(log: &str, key: &str) -> Option<String> {
    log.lines().find_map(|line| {
        let (k, v) = line.split_once(" : ")?;
        (k.trim() == key).then(|| v.trim().to_owned())
    })
}

#[test]
fn examine_matches_manifests_and_mdadm_logs() {
    let mut compared = 0;
    for (name, manifest) in fixtures() {
        let members = unpack(&name, &manifest);
        let mut args = vec![PathBuf::from("examine"), PathBuf::from("--json")];
        args.extend(members.iter().map(|m| m.1.clone()));
        let output = uraid(&args);
        assert!(output.status.success(), "{name}: {}", text(&output.stderr));
        let reports: Vec<Value> = serde_json::from_slice(&output.stdout).unwrap();
        for ((member, _), report) in members.iter().zip(&reports) {
            let fields = &report["fields"];
            let field = |key: &str| fields[key].as_str().unwrap_or("").to_owned();
            assert_eq!(field("Array UUID"), manifest["array_uuid"].as_str().unwrap());
            assert_eq!(field("Name"), manifest["array_name"].as_str().unwrap());
            assert_eq!(field("Raid Level"), manifest["mdadm_raid_level"].as_str().unwrap());
            assert_eq!(field("Raid Devices"), manifest["raid_devices"].to_string());
            assert_eq!(field("Array Size"), manifest["array_size_examine"].as_str().unwrap());
            assert_eq!(field("Data Offset"), manifest["data_offset_examine"].as_str().unwrap());
            assert_eq!(field("Device Role"), member["device_role"].as_str().unwrap());
            assert_eq!(field("Events"), member["events"].to_string());
            assert_eq!(field("State"), member["examine_state"].as_str().unwrap());
            assert_eq!(field("Array State"), member["examine_array_state"].as_str().unwrap());
            assert_eq!(field("Device UUID"), member["device_uuid"].as_str().unwrap());
            if let Some(layout) = manifest["layout_as_mdadm_examine_prints_it"].as_str() {
                assert_eq!(field("Layout"), layout, "{name}");
            }
            assert_eq!(report["checksum_ok"], true);
            // Every field both print must agree with mdadm's own examine of this member.
            let file = member["file"].as_str().unwrap().trim_end_matches(".img.zst");
            let log_path = fixtures_dir().join(&name).join(format!("logs/examine-{file}.txt"));
            let log = std::fs::read_to_string(&log_path).unwrap();
            for (key, value) in fields.as_object().unwrap() {
                if let Some(theirs) = mdadm_field(&log, key) {
                    assert_eq!(value.as_str().unwrap(), theirs, "{name} {file} {key}");
                    compared += 1;
                }
            }
        }
    }
    assert!(compared > 58 * 15, "only {compared} fields compared with mdadm's logs");
}

/// Makes files immutable (`chattr +i`: even root cannot open them for writing) until dropped.
struct Immutable(Vec<PathBuf>);

impl Drop for Immutable {
    fn drop(&mut self) {
        for p in &self.0 {
            let _ = std::process::Command::new("chattr").arg("-i").arg(p).status();
        }
    }
}

/// `assemble -o` writes nothing, so it reads members that cannot be written (read-only
/// media, a read-only mount, an immutable file): until the fourth session of 2026-12-06 it
/// opened them for writing and was refused.
#[test]
fn assemble_reads_members_that_cannot_be_written() {
    let (name, manifest) = fixtures().into_iter().next().unwrap();
    let dir = scratch("md-meta-immutable");
    let members: Vec<PathBuf> = unpack(&name, &manifest)
        .into_iter()
        .map(|(_, from)| {
            let to = dir.join(from.file_name().unwrap());
            let _ = std::process::Command::new("chattr").arg("-i").arg(&to).status();
            std::fs::copy(&from, &to).unwrap();
            to
        })
        .collect();
    let guard = Immutable(members.clone());
    let chattr = std::process::Command::new("chattr").arg("+i").args(&members).status();
    if !chattr.is_ok_and(|s| s.success()) {
        eprintln!("skipped: chattr +i is not available on {}", dir.display());
        return;
    }
    assert!(std::fs::OpenOptions::new().write(true).open(&members[0]).is_err(), "immutable");
    // Its own output name: the test beside it reads the same fixture into `{name}.img`.
    let (_, sha) = assemble(&format!("immutable-{name}"), &members);
    assert_eq!(sha, manifest["content"]["sha256"].as_str().unwrap(), "{name}");
    drop(guard);
}
