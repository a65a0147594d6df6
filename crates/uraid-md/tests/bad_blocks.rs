//! A data write a member refuses is listed in that member's bad block log, and the member
//! stays in the array (md's rule with its log, on by default for v1.2): the range is durable
//! in the log before the write is acknowledged, read around (rebuilt from parity) from then
//! on, kept across a stop and a start, and dropped once rewritten. A member whose log cannot
//! take more fails, as md fails it.
//!
//! Method: `MdOptions::member_faults` puts `uraid_io::Faulty` under member 1 (the kernel's
//! dm-flakey, in effect): its writes to a range fail.

mod common;

use common::{DATA_OFFSET_SECTORS, assert_same, fill, make_array_at, superblock, tempdir};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use uraid_format::{Level, feature};
use uraid_io::{Faulty, Member};
use uraid_md::members::{MemberFaults, known_bad_bytes};
use uraid_md::{MdArray, MdOptions};

const DATA: u64 = DATA_OFFSET_SECTORS * 512;

/// Member 1's writes overlapping `bad` (device bytes) fail.
fn failing_writes(bad: Range<u64>) -> MdOptions {
    let faults = MemberFaults(Arc::new(move |slot, file| {
        let mut f = Faulty::new(file, 1);
        if slot == 1 {
            f.fail_writes(bad.clone());
        }
        Box::new(f) as Box<dyn Member>
    }));
    MdOptions { member_faults: Some(faults), workers: Some(2), ..MdOptions::default() }
}

fn listed(path: &Path) -> bool {
    superblock(path).feature_map & feature::BAD_BLOCKS != 0
}

/// `mdadm --examine-badblocks`' list (start sector, sectors), when mdadm is installed.
fn mdadm_bad_blocks(path: &Path) -> Option<Vec<(u64, u64)>> {
    let out = std::process::Command::new("mdadm").arg("--examine-badblocks").arg(path).output();
    let out = out.ok()?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let entries = text.lines().filter_map(|l| {
        let (start, rest) = l.trim().split_once(" for ")?;
        Some((start.trim().parse().ok()?, rest.trim().strip_suffix(" sectors")?.parse().ok()?))
    });
    Some(entries.collect())
}

#[test]
fn a_failed_data_write_is_listed_and_the_member_stays() {
    let dir = tempdir("bad-blocks-listed");
    let paths: Vec<PathBuf> = make_array_at(dir.path(), Level::Raid5, 4, None);
    let bad = DATA + (1 << 20)..DATA + (1 << 20) + (64 << 10);
    let md = MdArray::assemble(&paths, &failing_writes(bad.clone())).unwrap();
    let rt = md.runtime().clone();
    let size = rt.size_bytes() as usize;
    let data = fill(5, size);
    assert!(paths.iter().all(|p| !listed(p)), "no member lists anything yet");
    rt.write_at(0, &data).unwrap();
    // Acknowledged: the range is in the log on the disk already, and the superblock says so
    // (md reads the log only then); the others' say nothing.
    assert_eq!(known_bad_bytes(&paths[1]).unwrap(), vec![bad.clone()]);
    for (i, p) in paths.iter().enumerate() {
        assert_eq!(listed(p), i == 1, "member {i} while running");
    }
    let events = superblock(&paths[1]).events;
    assert_eq!(events, superblock(&paths[0]).events, "the bit set on the last superblock");
    let st = md.status();
    assert!(!st.degraded, "{st:?}");
    assert_eq!(st.members[1].state, "active sync");
    assert_eq!(st.members[1].bad_sectors, 128);
    let detail = uraid_md::status::render_detail(&st);
    assert!(detail.contains("(128 bad sectors listed)"), "{detail}");
    assert_same(&rt.read_at(0, size).unwrap(), &data, "read around the listed range");
    drop(rt);
    md.stop().unwrap();
    for (i, p) in paths.iter().enumerate() {
        assert_eq!(listed(p), i == 1, "member {i}: a list only where a write failed");
    }
    if let Some(entries) = mdadm_bad_blocks(&paths[1]) {
        assert_eq!(entries, vec![(bad.start / 512, 128)], "mdadm reads our log");
    }

    // Started again on a healthy disk: the range is still read around until rewritten.
    let md = MdArray::assemble(&paths, &MdOptions::default()).unwrap();
    let rt = md.runtime().clone();
    assert_same(&rt.read_at(0, size).unwrap(), &data, "after a restart");
    assert!(rt.stats().members[1].errors > 0, "the stale range was not read");
    let again = fill(6, size);
    rt.write_at(0, &again).unwrap();
    assert_eq!(md.status().members[1].bad_sectors, 0, "rewritten: good again");
    drop(rt);
    md.stop().unwrap();
    assert!(!listed(&paths[1]) && known_bad_bytes(&paths[1]).unwrap().is_empty());
    let md = MdArray::assemble(&paths, &MdOptions::default()).unwrap();
    assert_same(&md.runtime().read_at(0, size).unwrap(), &again, "from the member itself");
    assert_eq!(md.runtime().stats().members[1].errors, 0);
    md.stop().unwrap();
}

#[test]
fn a_member_whose_log_is_full_fails() {
    let dir = tempdir("bad-blocks-full");
    let paths: Vec<PathBuf> = make_array_at(dir.path(), Level::Raid5, 4, None);
    // Every data write of member 1 fails.
    let md = MdArray::assemble(&paths, &failing_writes(DATA..u64::MAX)).unwrap();
    let rt = md.runtime().clone();
    let size = rt.size_bytes() as usize;
    let mut model = vec![0u8; size];
    // 4 KiB at every other 4 KiB: member 1's failed ranges never touch, an entry each, and
    // its 8-sector log holds 512.
    let failed = |md: &MdArray| md.status().members.iter().any(|m| m.state == "faulty");
    let mut at = 0;
    while at < size && !failed(&md) {
        let block = fill(at as u64, 4096);
        rt.write_at(at as u64, &block).unwrap();
        model[at..at + 4096].copy_from_slice(&block);
        at += 8192;
    }
    let st = md.status();
    let m1 = st.members.iter().find(|m| m.path.ends_with("m1.img")).unwrap();
    assert_eq!(m1.state, "faulty", "the log filled: {st:?}");
    assert_eq!(m1.bad_sectors, 512 * 8, "512 entries of 8 sectors");
    assert!(st.degraded);
    assert_same(&rt.read_at(0, size).unwrap(), &model, "rebuilt from parity");
    drop(rt);
    md.stop().unwrap();
    let entries = mdadm_bad_blocks(&paths[1]).map(|e| e.len());
    assert!(entries.is_none_or(|n| n == 512), "a full log: {entries:?}");
}
