//! A bitmap superblock whose sizes are corrupt. md counts the bits over the array's component
//! size, whatever the stored `sync_size` says, and rewrites it at its next write; uraid does
//! the same. Bits that would run past the data offset (a corrupt chunk size on a large array)
//! are refused with the reason. Before, uraid sized its read by the stored fields and asked
//! for 128 PiB: `examine --bitmap` and `serve` aborted on the allocation.

mod serve_common;

use serve_common::{Served, tempdir, text, uraid, uraid_ok};
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The bitmap superblock follows the md superblock's 4 KiB at byte 4096.
const BITMAP_AT: u64 = 8192;

/// A clean RAID5 of three `mib` MiB members with a bitmap of `bitmap_chunk` and the data at
/// 1 MiB.
fn create(dir: &Path, mib: u64, bitmap_chunk: &str) -> Vec<PathBuf> {
    let members = serve_common::member_files(dir, 3, mib);
    let names: Vec<&str> = members.iter().map(|m| m.to_str().unwrap()).collect();
    let mut args = vec!["create", "-l", "5", "-n", "3", "--chunk", "64K", "-N", "cb"];
    args.extend(["--bitmap", "internal", "--bitmap-chunk", bitmap_chunk, "--data-offset", "1M"]);
    args.push("--assume-clean");
    uraid_ok(dir, &[args, names].concat());
    members
}

fn poke(members: &[PathBuf], at: u64, bytes: &[u8]) {
    for m in members {
        let file = std::fs::OpenOptions::new().write(true).open(m).unwrap();
        file.write_all_at(bytes, BITMAP_AT + at).unwrap();
    }
}

fn stored_sync_size(member: &Path) -> u64 {
    let mut bytes = [0u8; 8];
    std::fs::File::open(member).unwrap().read_exact_at(&mut bytes, BITMAP_AT + 40).unwrap();
    u64::from_le_bytes(bytes)
}

#[test]
fn a_corrupt_sync_size_is_read_as_md_reads_it() {
    let dir = tempdir("bitmap-sync-size");
    let members = create(&dir, 24, "64K");
    poke(&members, 40, &(1u64 << 60).to_le_bytes());
    let examined = uraid_ok(&dir, &["examine", "--bitmap", members[0].to_str().unwrap()]);
    assert!(examined.contains("Bitmap : 368 bits (chunks)"), "{examined}");
    assert!(examined.contains("sync size is not the component size (47104 sectors)"));
    let served = Served::start(&dir, "cb", &members);
    let mut client = served.client();
    client.write(0, &[7; 4096], true).unwrap();
    client.disconnect().unwrap();
    uraid_ok(&dir, &["stop", "cb"]);
    assert!(served.wait(Duration::from_secs(30)).success());
    assert_eq!(stored_sync_size(&members[2]), 47104, "rewritten as md rewrites it");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bits_past_the_data_offset_are_refused() {
    let dir = tempdir("bitmap-past-data");
    // 8 GiB members (sparse): 512-byte chunks would take 2 MiB of bits, past the data at 1 MiB.
    let members = create(&dir, 8 << 10, "64M");
    poke(&members, 52, &512u32.to_le_bytes());
    let out = uraid(&dir, &["examine", "--bitmap", members[0].to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("past the data offset"), "{}", text(&out.stderr));
    let names: Vec<&str> = members.iter().map(|m| m.to_str().unwrap()).collect();
    let out = uraid(&dir, &[&["serve", "--no-tcp", "--unix", "x.sock"][..], &names].concat());
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(err.contains("bitmap chunksize 512") && err.contains("past the data offset"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}
