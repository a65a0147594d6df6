//! `uraid build` against arrays written by the Linux md driver (`../shared/fixtures/md/`).
//!
//! Goal: prove the geometry and parity are md's, byte for byte. Method: for every fixture,
//! reassemble the contents from the member images with the manifest's level, layout, chunk and
//! data offset, and compare the sha256 with the manifest's (which md itself read back); then
//! again with members replaced by `missing` (every single member for RAID4/5, every pair for
//! RAID6), so that P and Q reconstruction, and Q's data order, are checked against md too.

use serde_json::Value;
use sha2::{Digest, Sha256};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

fn fixtures_dir() -> PathBuf {
    if let Ok(dir) = std::env::var("URAID_FIXTURES_DIR") {
        return PathBuf::from(dir);
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures/md");
    assert!(
        dir.join("index.json").exists(),
        "md fixtures not found at {} (they sit beside the repository in ../shared; \
         set URAID_FIXTURES_DIR to point elsewhere)",
        dir.display()
    );
    dir
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Decompresses a fixture's members into a scratch directory; returns one path per role
/// (`None` for a slot md's manifest lists as missing).
fn unpack_members(name: &str, manifest: &Value) -> Vec<Option<PathBuf>> {
    let raid_devices = manifest["raid_devices"].as_u64().unwrap() as usize;
    let scratch = Path::new(env!("CARGO_TARGET_TMPDIR")).join("md-fixtures").join(name);
    std::fs::create_dir_all(&scratch).unwrap();
    let mut by_role = vec![None; raid_devices];
    for member in manifest["members"].as_array().unwrap() {
        let role_text = member["device_role"].as_str().unwrap();
        let role: usize = role_text.trim_start_matches("Active device ").parse().unwrap();
        let file = member["file"].as_str().unwrap();
        let out = scratch.join(file.trim_end_matches(".zst"));
        if !out.exists() {
            let input = std::fs::File::open(fixtures_dir().join(name).join(file)).unwrap();
            let mut decoder = ruzstd::decoding::StreamingDecoder::new(input).unwrap();
            let mut bytes = Vec::new();
            std::io::Read::read_to_end(&mut decoder, &mut bytes).unwrap();
            let sha = hex(&Sha256::digest(&bytes));
            assert_eq!(sha, member["image_sha256"].as_str().unwrap(), "{name}/{file} unpacked");
            std::fs::write(&out, bytes).unwrap();
        }
        by_role[role] = Some(out);
    }
    by_role
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut s, b| {
        write!(s, "{b:02x}").unwrap();
        s
    })
}

/// Runs `uraid build` with the manifest's geometry; returns the sha256 of what it wrote.
fn build_sha256(name: &str, manifest: &Value, members: &[Option<PathBuf>]) -> String {
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-build.img"));
    let member_args: Vec<String> = members
        .iter()
        .map(|m| m.as_ref().map_or("missing".to_string(), |p| p.display().to_string()))
        .collect();
    let status = Command::new(env!("CARGO_BIN_EXE_uraid"))
        .args(["build", "--level", &manifest["level"].to_string()])
        .args(["--layout", manifest["layout"].as_str().unwrap()])
        .args(["--chunk", &format!("{}b", manifest["chunk_bytes"])])
        .args(["--data-offset", &format!("{}s", manifest["data_offset_sectors"])])
        .arg("-o")
        .arg(&out)
        .args(&member_args)
        .status()
        .unwrap();
    assert!(status.success(), "uraid build failed for {name} with members {member_args:?}");
    let bytes = std::fs::read(&out).unwrap();
    assert_eq!(bytes.len() as u64, manifest["array_size_bytes"].as_u64().unwrap(), "{name} size");
    hex(&Sha256::digest(&bytes))
}

/// `-o -` is standard output, as `assemble -o -` takes it: the contents there, no file named
/// `-` (which `build` made before).
#[test]
fn build_writes_to_standard_output_for_a_dash() {
    let index = read_json(&fixtures_dir().join("index.json"));
    let name = index["fixtures"][0]["name"].as_str().unwrap();
    let manifest = read_json(&fixtures_dir().join(name).join("manifest.json"));
    let members = unpack_members(name, &manifest);
    let cwd = Path::new(env!("CARGO_TARGET_TMPDIR")).join("build-dash");
    let _ = std::fs::remove_dir_all(&cwd);
    std::fs::create_dir_all(&cwd).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_uraid"))
        .current_dir(&cwd)
        .args(["build", "--level", &manifest["level"].to_string()])
        .args(["--layout", manifest["layout"].as_str().unwrap()])
        .args(["--chunk", &format!("{}b", manifest["chunk_bytes"])])
        .args(["--data-offset", &format!("{}s", manifest["data_offset_sectors"])])
        .args(["-o", "-", "--json"])
        .args(members.iter().map(|m| m.as_ref().expect("the fixture whole")))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!cwd.join("-").exists(), "a file named - was written");
    let want = manifest["content"]["sha256"].as_str().unwrap();
    assert_eq!(hex(&Sha256::digest(&out.stdout)), want, "{name} on standard output");
    assert!(String::from_utf8_lossy(&out.stderr).contains("\"bytes\""), "the report on stderr");
    std::fs::remove_dir_all(&cwd).unwrap();
}

/// Every way to take members away until the array is exactly at its redundancy limit.
fn degraded_variants(members: &[Option<PathBuf>], max_degraded: usize) -> Vec<Vec<usize>> {
    let already = members.iter().filter(|m| m.is_none()).count();
    let present: Vec<usize> = (0..members.len()).filter(|&i| members[i].is_some()).collect();
    match max_degraded - already {
        0 => Vec::new(),
        1 => present.iter().map(|&i| vec![i]).collect(),
        2 => present
            .iter()
            .flat_map(|&i| present.iter().filter(move |&&j| j > i).map(move |&j| vec![i, j]))
            .collect(),
        n => panic!("unexpected redundancy {n}"),
    }
}

#[test]
fn every_md_fixture_reassembles_whole_and_degraded() {
    let index = read_json(&fixtures_dir().join("index.json"));
    let fixtures = index["fixtures"].as_array().unwrap();
    assert!(fixtures.len() >= 12, "expected the 12 public fixtures, found {}", fixtures.len());
    let mut checked = 0;
    for fixture in fixtures {
        let name = fixture["name"].as_str().unwrap();
        let manifest = read_json(&fixtures_dir().join(name).join("manifest.json"));
        let want = manifest["content"]["sha256"].as_str().unwrap();
        let members = unpack_members(name, &manifest);
        assert_eq!(build_sha256(name, &manifest, &members), want, "{name} as shipped");
        let max_degraded = if manifest["level"] == 6 { 2 } else { 1 };
        for lose in degraded_variants(&members, max_degraded) {
            let mut degraded = members.clone();
            for &i in &lose {
                degraded[i] = None;
            }
            let got = build_sha256(name, &manifest, &degraded);
            assert_eq!(got, want, "{name} with members {lose:?} also missing");
            checked += 1;
        }
    }
    // 7 RAID4/5 fixtures lose each of 4-5 members; 3 RAID6 fixtures lose each of 15 pairs; the
    // degraded RAID6 loses each of its 5 survivors.
    assert!(checked >= 7 * 4 + 3 * 15 + 5, "only {checked} degraded variants checked");
}

#[test]
fn build_refuses_bad_input_with_clear_errors() {
    let manifest = read_json(&fixtures_dir().join("r5-left-symmetric/manifest.json"));
    let members = unpack_members("r5-left-symmetric", &manifest);
    let paths: Vec<String> =
        members.iter().map(|m| m.as_ref().unwrap().display().to_string()).collect();
    let run = |extra: &[&str], members: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_uraid"))
            .args(["build", "-o", "/dev/null"])
            .args(extra)
            .args(members)
            .output()
            .unwrap();
        assert!(!out.status.success(), "uraid build {extra:?} should fail");
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    let p: Vec<&str> = paths.iter().map(String::as_str).collect();
    let two_missing = [p[0], "missing", "missing", p[3], p[4]];
    let err = run(&["-l", "5", "-c", "64K"], &two_missing);
    assert!(err.contains("2 members missing but RAID5 survives at most 1"), "{err}");
    let err = run(&["-l", "5", "-c", "96K"], &p);
    assert!(err.contains("power of two"), "{err}");
    let err = run(&["-l", "6", "-c", "64K"], &p[..3]);
    assert!(err.contains("at least 4 members"), "{err}");
    let err = run(&["-l", "5", "-p", "ddf-N-restart"], &p);
    assert!(err.contains("not valid for RAID5"), "{err}");
    let err = run(&["-l", "5"], &[p[0], "/nonexistent/member", p[2], p[3], p[4]]);
    assert!(err.contains("cannot open member 1 (/nonexistent/member)"), "{err}");
    let err = run(&["-l", "5", "--data-offset", "4M"], &p);
    assert!(err.contains("not more than the data offset"), "{err}");
    let err = run(&["-l", "5", "-z", "8M", "--data-offset", "1M"], &p);
    assert!(err.contains("less than --size"), "{err}");
    let err = run(&["-l", "5", "-n", "4"], &p);
    assert!(err.contains("--raid-devices 4 but 5 members given"), "{err}");
    let err = run(&["-l", "5", "-c", "64Q"], &p);
    assert!(err.contains("unknown unit"), "{err}");
    let err = run(&["-l", "5", "-c", "64K"], &[p[0], p[1], "missing", p[1], p[4]]);
    assert!(err.contains(&format!("{} is given twice", p[1])), "{err}");
}
