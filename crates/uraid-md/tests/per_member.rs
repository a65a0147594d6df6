//! Superblock fields md keeps per device survive a run of uraid: uraid writes every member's
//! superblock from the array's freshest one, and must not copy one member's own fields to
//! the others (it did, for the bad block log: see `uraid-cli/tests/kernel_badblocks.rs`).

use std::os::unix::fs::FileExt;
use uraid_format::{Level, feature};
use uraid_md::members::known_bad_bytes;
use uraid_md::{MdArray, MdOptions};

mod common;
use common::{make_array_at, superblock, tempdir};

/// Lists data sectors `[sector, +8)` in `path`'s own bad block log, as md would, and sets
/// its devflags.
fn list_8_sectors(path: &std::path::Path, sector: u64, devflags: u8) {
    let mut sb = superblock(path);
    sb.feature_map |= feature::BAD_BLOCKS;
    sb.devflags = devflags;
    sb.seal();
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.write_all_at(&sb.encode(), 4096).unwrap();
    let log = sb.super_offset_sectors.checked_add_signed(i64::from(sb.bblog_offset_sectors));
    let start = sb.data_offset_sectors + sector;
    let entries = [((start << 10) | 8).to_le_bytes(), u64::MAX.to_le_bytes()].concat();
    f.write_all_at(&entries, log.unwrap() * 512).unwrap();
}

#[test]
fn each_member_keeps_its_bad_block_list_and_devflags() {
    let dir = tempdir("per-member");
    let paths = make_array_at(dir.path(), Level::Raid5, 4, None);
    // Member 1: a bad block listed (in its own log) and md's WriteMostly flag; 4 MiB into the
    // data area, which the 1 MiB write below leaves alone (a write over it would make it
    // good, and the stop would drop it: `a_rewritten_bad_range_leaves_the_log`).
    list_8_sectors(&paths[1], 8192, 1);
    let md =
        MdArray::assemble(&paths, &MdOptions { workers: Some(2), ..MdOptions::default() }).unwrap();
    md.runtime().write_at(0, &vec![9u8; 1 << 20]).unwrap();
    md.stop().unwrap();
    for (i, p) in paths.iter().enumerate() {
        let sb = superblock(p);
        let listed = sb.feature_map & feature::BAD_BLOCKS != 0;
        assert_eq!(listed, i == 1, "member {i}: its own bad block list");
        assert_eq!(sb.devflags, u8::from(i == 1), "member {i}: its own devflags");
        assert!(sb.bblog_size_sectors > 0, "member {i} keeps its log's place");
    }
}

/// A listed range the array rewrites is good again, and the next flush writes the log without
/// it (md clears an entry the same way; until the third session of 2026-12-05 only the stop
/// did, and a crash kept the range read around); the superblock then says the list is empty.
#[test]
fn a_rewritten_bad_range_leaves_the_log() {
    let dir = tempdir("per-member-rewritten");
    let paths = make_array_at(dir.path(), Level::Raid5, 4, None);
    // Data sectors 64..72 of member 1: array bytes in its first chunk (row 0's chunk 1).
    list_8_sectors(&paths[1], 64, 0);
    let md = MdArray::assemble(&paths, &MdOptions::default()).unwrap();
    // While it runs, only the member with entries has md's feature bit.
    for (i, p) in paths.iter().enumerate() {
        assert_eq!(superblock(p).feature_map & feature::BAD_BLOCKS != 0, i == 1, "member {i}");
    }
    let data = vec![7u8; 1 << 20];
    md.runtime().write_at(0, &data).unwrap();
    assert_eq!(md.runtime().read_at(0, 1 << 20).unwrap(), data);
    // The engine's own member flushes (its log's advances) may have dropped it already.
    md.runtime().flush().unwrap();
    assert!(known_bad_bytes(&paths[1]).unwrap().is_empty(), "the flush made the rewrite durable");
    for p in &paths {
        assert_eq!(superblock(p).feature_map & feature::BAD_BLOCKS, 0, "{}", p.display());
    }
    md.stop().unwrap();
    for p in &paths {
        assert_eq!(superblock(p).feature_map & feature::BAD_BLOCKS, 0, "{}", p.display());
    }
    let md = MdArray::assemble(&paths, &MdOptions::default()).unwrap();
    assert_eq!(md.runtime().read_at(0, 1 << 20).unwrap(), data, "read from the member now");
    assert_eq!(md.runtime().stats().members[1].errors, 0, "nothing read around");
    md.stop().unwrap();
}

/// A bad block log md would refuse (a zero word: an entry of length 0) refuses the start,
/// naming the member, and leaves every superblock as it was (clean, no resync owed).
#[test]
fn a_bad_block_log_md_would_refuse_refuses_the_start_and_changes_nothing() {
    let dir = tempdir("per-member-bad-log");
    let paths = make_array_at(dir.path(), Level::Raid5, 4, None);
    let mut sb = superblock(&paths[2]);
    sb.feature_map |= feature::BAD_BLOCKS;
    sb.seal();
    let f = std::fs::OpenOptions::new().write(true).open(&paths[2]).unwrap();
    f.write_all_at(&sb.encode(), 4096).unwrap();
    let log = sb.super_offset_sectors.checked_add_signed(i64::from(sb.bblog_offset_sectors));
    f.write_all_at(&[0u8; 4096], log.unwrap() * 512).unwrap();
    let before: Vec<Vec<u8>> =
        paths.iter().map(|p| std::fs::read(p).unwrap()[..8192].to_vec()).collect();
    let err = MdArray::assemble(&paths, &MdOptions { workers: Some(2), ..MdOptions::default() })
        .err()
        .expect("refused");
    let text = err.to_string();
    assert!(text.contains("m2.img") && text.contains("md would refuse"), "{text}");
    for (p, was) in paths.iter().zip(&before) {
        assert!(std::fs::read(p).unwrap()[..8192] == was[..], "{} unchanged", p.display());
    }
}
