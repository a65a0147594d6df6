//! What the tests of changes to a stopped array share (`grow`, `assemble --update`): a small
//! array written whole through the server and stopped, its data read back, its members'
//! superblocks and bytes.

#![allow(dead_code)]

use crate::serve_common::{self, BIN, Served, text, uraid, uraid_ok};
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

pub const MIB: u64 = 1 << 20;
/// mdadm's data offset for these members: 1 MiB.
pub const DATA_OFFSET: u64 = MIB;

/// Three 24 MiB members of a RAID5 using 8 MiB of each (with `bitmap`, one of 4 KiB chunks:
/// growing doubles its chunk twice), written whole with a pattern through the server, stopped.
pub fn small_array(dir: &Path, name: &str, bitmap: bool) -> (Vec<PathBuf>, Vec<u8>) {
    small_array_in(dir, name, bitmap, 24)
}

/// `small_array` on members of `mib` MiB. A new layout or chunk moves the data up when there
/// is more room after it than before (under 1 MiB), as mdadm does: 9 (no room after the 8
/// MiB from `DATA_OFFSET`) keeps such a reshape going down.
pub fn small_array_in(dir: &Path, name: &str, bitmap: bool, mib: u64) -> (Vec<PathBuf>, Vec<u8>) {
    let bitmap: &[&str] =
        if bitmap { &["--bitmap", "internal", "--bitmap-chunk", "4K"] } else { &[] };
    small_array_sized(dir, name, ("5", 3), mib, &[&["--chunk", "64K"], bitmap].concat())
}

/// `small_array` with this chunk and more `uraid create` options.
pub fn small_array_with(
    dir: &Path,
    name: &str,
    chunk: &str,
    options: &[&str],
) -> (Vec<PathBuf>, Vec<u8>) {
    small_array_of(dir, name, ("5", 3), &[&["--chunk", chunk], options].concat())
}

/// A small array of `level` on `count` 24 MiB members using 8 MiB of each, with these `uraid
/// create` options, written whole (8 MiB a data member: 16 MiB on two) and stopped.
pub fn small_array_of(
    dir: &Path,
    name: &str,
    level_count: (&str, usize),
    options: &[&str],
) -> (Vec<PathBuf>, Vec<u8>) {
    small_array_sized(dir, name, level_count, 24, options)
}

/// `small_array_of` on members of `mib` MiB.
pub fn small_array_sized(
    dir: &Path,
    name: &str,
    (level, count): (&str, usize),
    mib: u64,
    options: &[&str],
) -> (Vec<PathBuf>, Vec<u8>) {
    let members = serve_common::member_files(dir, count, mib);
    let count = count.to_string();
    let mut create = vec!["create", "-l", level, "-n", &count, "--size", "8M"];
    create.extend(options);
    create.extend(["--assume-clean", "-N", name]);
    create.extend(strs(&members));
    uraid_ok(dir, &create);
    let served = Served::start(dir, name, &members);
    let mut client = served.client();
    let size = client.size_bytes();
    assert_eq!(size % (8 * MIB), 0, "whole data members of 8 MiB");
    let data: Vec<u8> = (0..size).map(|i| (i * 7 + i / 4096) as u8).collect();
    write_all(&mut client, &data);
    client.disconnect().unwrap();
    uraid_ok(dir, &["stop", name]);
    assert!(served.wait(Duration::from_secs(30)).success());
    (members, data)
}

/// Writes `data` from the array's start, a MiB at a time, and flushes.
pub fn write_all(client: &mut uraid_nbd::client::Client, data: &[u8]) {
    for (i, piece) in data.chunks(MIB as usize).enumerate() {
        client.write(i as u64 * MIB, piece, false).unwrap();
    }
    client.flush().unwrap();
}

/// `uraid grow ARGS` in `dir`, which must succeed; stopped by the test hook after
/// `stop_after` recorded windows of a reshape, as a crash would. What it printed.
pub fn grow(dir: &Path, args: &[&str], stop_after: Option<u32>) -> String {
    let mut cmd = Command::new(BIN);
    cmd.arg("grow").args(args).env("URAID_RUN_DIR", dir.join("run"));
    if let Some(windows) = stop_after {
        cmd.env("URAID_TEST_RESHAPE_STOP_AFTER", windows.to_string());
    }
    let out = cmd.output().expect("running uraid grow");
    assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
    text(&out.stdout)
}

/// Serves the array `name` on `members` once any rebuild is done: `size` bytes, `data` from
/// the start and zeros after it; `then` has the client next; a check finds no mismatch in the
/// members' 8 MiB; it stops clean.
pub fn serve_and_check(
    dir: &Path,
    name: &str,
    members: &[PathBuf],
    (data, size): (&[u8], u64),
    then: impl FnOnce(&mut uraid_nbd::client::Client),
) {
    let served = Served::start(dir, name, members);
    let _ = uraid(dir, &["wait", name]);
    let mut client = served.client();
    assert_eq!(client.size_bytes(), size);
    assert_reads_back(&mut client, data);
    for at in (data.len() as u64..size).step_by(MIB as usize) {
        assert!(client.read(at, MIB as u32).unwrap() == vec![0; MIB as usize], "at {at}");
    }
    then(&mut client);
    client.disconnect().unwrap();
    let checked = uraid_ok(dir, &["check", "--wait", name]);
    assert!(checked.contains("0 mismatched sectors in 16384 sectors"), "{checked}");
    uraid_ok(dir, &["stop", name]);
    assert!(served.wait(Duration::from_secs(30)).success());
}

/// The array's first `data.len()` bytes are `data`.
pub fn assert_reads_back(client: &mut uraid_nbd::client::Client, data: &[u8]) {
    for (i, piece) in data.chunks(MIB as usize).enumerate() {
        assert!(client.read(i as u64 * MIB, MIB as u32).unwrap() == piece, "MiB {i} changed");
    }
}

pub fn superblock_of(member: &Path) -> uraid_format::Superblock1 {
    let mut area = vec![0u8; 4096];
    std::fs::File::open(member).unwrap().read_exact_at(&mut area, 4096).unwrap();
    uraid_format::Superblock1::decode(&area).unwrap()
}

pub fn strs(members: &[PathBuf]) -> Vec<&str> {
    members.iter().map(|p| p.to_str().unwrap()).collect()
}

/// Every byte of every member, to show that a refusal wrote nothing.
pub fn images(members: &[PathBuf]) -> Vec<Vec<u8>> {
    members.iter().map(|m| std::fs::read(m).unwrap()).collect()
}

/// Adds `count` spares of 24 MiB (s0.img...) to the stopped array `name` of `members`.
pub fn add_spares(dir: &Path, name: &str, members: &[PathBuf], count: usize) -> Vec<PathBuf> {
    let spares: Vec<PathBuf> = (0..count)
        .map(|i| {
            let path = dir.join(format!("s{i}.img"));
            std::fs::File::create(&path).unwrap().set_len(24 * MIB).unwrap();
            path
        })
        .collect();
    let served = Served::start(dir, name, members);
    for spare in &spares {
        uraid_ok(dir, &["add", name, spare.to_str().unwrap()]);
    }
    uraid_ok(dir, &["stop", name]);
    assert!(served.wait(Duration::from_secs(30)).success());
    spares
}

/// One copy of a small array for a kernel test: its directory, members and data.
pub struct ArrayCopy {
    pub dir: PathBuf,
    pub members: Vec<PathBuf>,
    pub data: Vec<u8>,
}

impl ArrayCopy {
    /// `uraid grow ARGS` on the copy's members (`grow`).
    pub fn grow(&self, args: &[&str], stop_after: Option<u32>) -> String {
        grow(&self.dir, &[args, &strs(&self.members)].concat(), stop_after)
    }
}

/// `uraid grow ARGS` fails saying `why`, and no member changed.
pub fn refused_grow(dir: &Path, members: &[PathBuf], args: &[&str], why: &str) {
    refused(dir, members, &[&["grow"][..], args].concat(), why);
}

/// `uraid ARGS` fails saying `why`, and no member changed.
pub fn refused(dir: &Path, members: &[PathBuf], args: &[&str], why: &str) {
    let before = images(members);
    let out = uraid(dir, args);
    assert!(!out.status.success(), "{args:?} went through");
    let err = text(&out.stderr);
    assert!(err.contains(why), "{args:?}: {err}");
    assert!(images(members) == before, "{args:?} wrote to a member");
}

/// `mdadm --examine` of a member, which must succeed: what it printed.
pub fn examine(member: &Path) -> String {
    let out = Command::new("mdadm").arg("--examine").arg(member).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout)
}

pub fn sha256(data: &[u8]) -> String {
    use sha2::Digest as _;
    format!("{:x}", sha2::Sha256::digest(data))
}
