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
use std::time::Duration;
use uraid_format::{Level, feature};
use uraid_io::{Faulty, Member};
use uraid_md::members::{MemberFaults, known_bad_bytes};
use uraid_md::status::SyncResult;
use uraid_md::{MdArray, MdOptions};
use uraid_runtime::Runtime;

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

/// A bad block log inside the bitmap (uraid's create put it there before 7269acd when the
/// bitmap chunk made the bitmap larger than mdadm's default one) is neither read nor written:
/// what it "lists" is bitmap bytes, and an entry written there would land on the bitmap. A
/// failed write fails the member instead, as on a member without a log.
#[test]
fn a_log_inside_the_bitmap_is_not_used() {
    let dir = tempdir("bad-blocks-in-bitmap");
    let paths: Vec<PathBuf> = make_array_at(dir.path(), Level::Raid5, 4, Some(64 << 10));
    for p in &paths {
        // The log's place moved onto the bitmap's superblock, and (member 2) the superblock
        // saying it lists entries: the bitmap's bytes, which md would refuse as a log.
        let mut sb = superblock(p);
        sb.bblog_offset_sectors = sb.bitmap_offset_sectors;
        if p.ends_with("m2.img") {
            sb.feature_map |= feature::BAD_BLOCKS;
        }
        sb.seal();
        let f = std::fs::OpenOptions::new().write(true).open(p).unwrap();
        std::os::unix::fs::FileExt::write_all_at(&f, &sb.encode(), 4096).unwrap();
        assert!(known_bad_bytes(p).unwrap().is_empty(), "{}: not read", p.display());
    }
    let bad = DATA + (1 << 20)..DATA + (1 << 20) + (64 << 10);
    let md = MdArray::assemble(&paths, &failing_writes(bad)).unwrap();
    let rt = md.runtime().clone();
    let size = rt.size_bytes() as usize;
    let data = fill(8, size);
    rt.write_at(0, &data).unwrap();
    let st = md.status();
    let m1 = st.members.iter().find(|m| m.path.ends_with("m1.img")).unwrap();
    assert_eq!(m1.state, "faulty", "no log to list the failed write in: {st:?}");
    assert!(!listed(&paths[1]), "nothing listed");
    assert_same(&rt.read_at(0, size).unwrap(), &data, "read degraded");
    drop(rt);
    md.stop().unwrap();
    for p in &paths {
        let bytes = std::fs::read(p).unwrap();
        let at = 4096 + u64::try_from(superblock(p).bitmap_offset_sectors).unwrap() * 512;
        let head = &bytes[at as usize..at as usize + uraid_format::BITMAP_SUPER_BYTES];
        assert!(uraid_format::BitmapSuper::decode(head).is_ok(), "{}: bitmap whole", p.display());
    }
}

/// Member 2's reads overlapping any of `unreadable` (device bytes) fail.
fn failing_reads(unreadable: Vec<Range<u64>>) -> MdOptions {
    let faults = MemberFaults(Arc::new(move |slot, file| {
        let mut f = Faulty::new(file, 1);
        if slot == 2 {
            for r in &unreadable {
                f.fail_reads(r.clone());
            }
        }
        Box::new(f) as Box<dyn Member>
    }));
    MdOptions { member_faults: Some(faults), workers: Some(2), ..MdOptions::default() }
}

/// Member 1 fails and is removed, a blank spare is added: the rebuild's result, and the spare.
fn rebuild_member_1(md: &MdArray, paths: &[PathBuf], dir: &Path) -> (SyncResult, PathBuf) {
    md.fail(&paths[1].display().to_string()).unwrap();
    md.remove(&paths[1].display().to_string()).unwrap();
    let spare = dir.join("spare.img");
    std::fs::File::create(&spare).unwrap().set_len(common::MEMBER_BYTES).unwrap();
    md.add(&spare.display().to_string()).unwrap();
    (md.wait_sync_idle(Duration::from_secs(120)).expect("a rebuild"), spare)
}

/// Reads the array 4 KiB at a time: exactly the blocks `lost` names fail, the rest are
/// `data`. Returns how many failed.
fn reads_but_lost(rt: &Runtime, data: &[u8], lost: impl Fn(usize) -> bool, what: &str) -> usize {
    let mut errors = 0;
    for at in (0..data.len()).step_by(4096) {
        match rt.read_at(at as u64, 4096) {
            Ok(block) => {
                assert!(!lost(at), "{what}: lost block at {at} read");
                assert_same(&block, &data[at..at + 4096], what);
            }
            Err(e) => {
                assert!(lost(at), "{what}: block at {at}: {e}");
                errors += 1;
            }
        }
    }
    errors
}

/// The classic RAID5 rebuild failure: a sector of a survivor cannot be read while a member
/// is rebuilt. md lists the block it cannot rebuild in the new member's log, and the
/// unreadable one in the survivor's, and goes on; so does uraid (`uraid_core`'s
/// `list_bad.rs`). The array is whole again, exactly those blocks read as errors (here and
/// after a restart, from the logs on the disks), the rest reads back, and a write there makes
/// them good again.
#[test]
fn a_rebuild_lists_what_it_cannot_rebuild_and_goes_on() {
    let dir = tempdir("bad-blocks-rebuild");
    let paths: Vec<PathBuf> = make_array_at(dir.path(), Level::Raid5, 4, None);
    // Member 2 cannot read 256 KiB of its data area: 64 stripe heads, more read errors than
    // a member may have corrected (20); they are not counted while nothing can correct them.
    let unreadable = DATA + (3 << 20)..DATA + (3 << 20) + (256 << 10);
    let md = MdArray::assemble(&paths, &failing_reads(vec![unreadable.clone()])).unwrap();
    let rt = md.runtime().clone();
    let size = rt.size_bytes() as usize;
    let mut data = fill(7, size);
    rt.write_at(0, &data).unwrap();
    let (result, spare) = rebuild_member_1(&md, &paths, dir.path());
    assert_eq!(result.outcome, "done", "{result:?}");
    let sectors = (unreadable.end - unreadable.start) / 512;
    assert_eq!(result.listed_bad_sectors, sectors, "{result:?}");
    let summary = uraid_md::status::sync_result_summary(&result);
    assert!(summary.contains(&format!("{sectors} sectors could not be rebuilt")), "{summary}");
    let st = md.status();
    assert!(!st.degraded, "{st:#?}");
    assert!(st.members.iter().all(|m| m.state == "active sync"), "{st:#?}");
    let listed_now = |p: &Path| known_bad_bytes(p).unwrap();
    assert_eq!(listed_now(&spare), vec![unreadable.clone()], "the rebuilt member's log");
    assert_eq!(listed_now(&paths[2]), vec![unreadable.clone()], "the survivor's log");

    // Which array bytes are lost: member 1's (rebuilt) and member 2's blocks there, where
    // they hold data (not P).
    let raid5 = uraid_core::Level::Raid5;
    let geometry = uraid_core::Geometry::new(raid5, raid5.default_layout(), 4, 64 << 10).unwrap();
    let member_range = (unreadable.start - DATA) / 512..(unreadable.end - DATA) / 512;
    let lost = |at: usize| {
        let a = geometry.map_sector(uraid_core::Sector(at as u64 / 512));
        [1, 2].contains(&a.disk.0) && member_range.contains(&a.member_sector.0)
    };
    let lost_blocks = (0..size).step_by(4096).filter(|&at| lost(at)).count();
    assert!((64..128).contains(&lost_blocks), "{lost_blocks}");
    assert_eq!(reads_but_lost(&rt, &data, lost, "after the rebuild"), lost_blocks);
    assert!(md.status().members.iter().all(|m| m.state == "active sync"), "reads fail none");
    drop(rt);
    md.stop().unwrap();
    if let Some(entries) = mdadm_bad_blocks(&spare) {
        assert_eq!(entries, vec![(unreadable.start / 512, sectors)], "mdadm reads our log");
    }

    // Started again on healthy disks: the logs still say what is lost.
    let mut members = paths.clone();
    members[1] = spare.clone();
    let md = MdArray::assemble(&members, &MdOptions::default()).unwrap();
    let rt = md.runtime().clone();
    assert!(!md.status().degraded);
    assert_eq!(reads_but_lost(&rt, &data, lost, "after a restart"), lost_blocks);
    // A file system's repair writes what it cannot read: good again, on both members.
    let rows = (3 << 20) * 3..((3 << 20) + (256 << 10)) * 3;
    let new = fill(8, rows.len());
    rt.write_at(rows.start as u64, &new).unwrap();
    data[rows.clone()].copy_from_slice(&new);
    assert_same(&rt.read_at(0, size).unwrap(), &data, "rewritten");
    md.scrub(false).unwrap();
    let check = md.wait_sync_idle(Duration::from_secs(120)).expect("a check");
    assert_eq!(check.mismatch_sectors, 0, "{check:?}");
    drop(rt);
    md.stop().unwrap();
    assert!(listed_now(&spare).is_empty() && listed_now(&paths[2]).is_empty());
}

/// Where the rebuilt member's log cannot take more (md's holds 512 ranges), the rebuild stops
/// at a block it can neither rebuild nor list, says where, and leaves the array degraded (md
/// stops its recovery there too).
#[test]
fn a_rebuild_whose_log_fills_stops_and_says_where() {
    let dir = tempdir("bad-blocks-rebuild-full");
    let paths: Vec<PathBuf> = make_array_at(dir.path(), Level::Raid5, 4, None);
    // Member 2 cannot read every other 4 KiB of 5 MiB: 640 ranges, none touching.
    let first = DATA + (1 << 20);
    let unreadable: Vec<Range<u64>> =
        (0..640).map(|i| first + i * 8192..first + i * 8192 + 4096).collect();
    let md = MdArray::assemble(&paths, &failing_reads(unreadable.clone())).unwrap();
    let rt = md.runtime().clone();
    rt.write_at(0, &fill(9, rt.size_bytes() as usize)).unwrap();
    let (result, spare) = rebuild_member_1(&md, &paths, dir.path());
    let why = "failed: a block cannot be rebuilt (unreadable on another member too) nor listed";
    assert!(result.outcome.starts_with(why), "{result:?}");
    let listed = known_bad_bytes(&spare).unwrap();
    assert_eq!(listed.len(), 512, "the spare's log is full");
    assert_eq!(result.listed_bad_sectors, 512 * 8, "{result:?}");
    // One row of chunks (128 member sectors), holding a block it could not list.
    let place = result.outcome.split("member sectors ").nth(1).expect("where it stopped");
    let (from, to) = place.split_once(',').unwrap().0.split_once('-').unwrap();
    let (from, to): (u64, u64) = (from.parse().unwrap(), to.parse().unwrap());
    assert_eq!(to - from, 128, "{result:?}");
    let row = DATA + from * 512..DATA + to * 512;
    let unlisted = |r: &Range<u64>| !listed.iter().any(|l| l.start <= r.start && r.end <= l.end);
    let in_row = |r: &&Range<u64>| row.start <= r.start && r.end <= row.end;
    assert!(unreadable.iter().filter(in_row).any(unlisted), "{result:?} {listed:?}");
    let st = md.status();
    assert!(st.degraded, "{st:#?}");
    drop(rt);
    md.stop().unwrap();
}

/// md's replace of a member that cannot read some blocks (why it is replaced) while another
/// member cannot read its blocks of some of the same stripes: those blocks can be neither
/// copied nor rebuilt. md lists them on the replacement and goes on (`handle_failed_sync`);
/// uraid stopped the copy there ("beyond redundancy"), so the member could not be replaced at
/// all. Now the copy ends, the new device takes the slot with those blocks in its bad block
/// log (mdadm reads them), the other member lists its own, and exactly the lost blocks read as
/// errors; the rest reads back.
#[test]
fn a_replace_lists_what_it_can_neither_copy_nor_rebuild_and_goes_on() {
    let dir = tempdir("bad-blocks-replace");
    let paths: Vec<PathBuf> = make_array_at(dir.path(), Level::Raid5, 4, None);
    // m1.img (being replaced) cannot read 64 KiB, m2.img 32 KiB in the middle of that:
    // fewer read errors than fail a member (20 a member; md's max_corrected_read_errors).
    let m1_bad = DATA + (2 << 20)..DATA + (2 << 20) + (64 << 10);
    let both = DATA + (2 << 20) + (16 << 10)..DATA + (2 << 20) + (48 << 10);
    let (b1, b2) = (m1_bad.clone(), both.clone());
    let faults = MemberFaults(Arc::new(move |_slot, file| {
        let name = file.info().name.clone();
        let mut f = Faulty::new(file, 1);
        if name.ends_with("m1.img") {
            f.fail_reads(b1.clone());
        } else if name.ends_with("m2.img") {
            f.fail_reads(b2.clone());
        }
        Box::new(f) as Box<dyn Member>
    }));
    let options =
        MdOptions { member_faults: Some(faults), workers: Some(2), ..MdOptions::default() };
    let md = MdArray::assemble(&paths, &options).unwrap();
    let rt = md.runtime().clone();
    let size = rt.size_bytes() as usize;
    let data = fill(9, size);
    rt.write_at(0, &data).unwrap();
    let with = dir.path().join("new.img");
    std::fs::File::create(&with).unwrap().set_len(common::MEMBER_BYTES).unwrap();
    md.replace(&paths[1].display().to_string(), &with.display().to_string()).unwrap();
    let result = md.wait_sync_idle(Duration::from_secs(120)).expect("a replace");
    assert_eq!((result.action.as_str(), result.outcome.as_str()), ("replace", "done"));
    let sectors = (both.end - both.start) / 512;
    assert_eq!(result.listed_bad_sectors, sectors, "{result:?}");
    let summary = uraid_md::status::sync_result_summary(&result);
    assert!(summary.contains(&format!("{sectors} sectors could not be copied nor rebuilt")));
    assert!(summary.contains("the new device's bad block log"), "{summary}");
    let st = md.status();
    let new = st.members.iter().find(|m| m.path.ends_with("new.img")).expect("the new device");
    assert_eq!(new.state, "active sync", "{st:#?}");
    assert_eq!(known_bad_bytes(&with).unwrap(), vec![both.clone()], "the new device's log");
    assert_eq!(known_bad_bytes(&paths[2]).unwrap(), vec![both.clone()], "m2.img's log");

    // Lost: the data of slots 1 and 2 in those rows (not P).
    let raid5 = uraid_core::Level::Raid5;
    let geometry = uraid_core::Geometry::new(raid5, raid5.default_layout(), 4, 64 << 10).unwrap();
    let member_range = (both.start - DATA) / 512..(both.end - DATA) / 512;
    let lost = |at: usize| {
        let a = geometry.map_sector(uraid_core::Sector(at as u64 / 512));
        [1, 2].contains(&a.disk.0) && member_range.contains(&a.member_sector.0)
    };
    let lost_blocks = (0..size).step_by(4096).filter(|&at| lost(at)).count();
    assert!((8..=16).contains(&lost_blocks), "{lost_blocks}");
    assert_eq!(reads_but_lost(&rt, &data, lost, "after the replace"), lost_blocks);
    drop(rt);
    md.stop().unwrap();
    if let Some(entries) = mdadm_bad_blocks(&with) {
        assert_eq!(entries, vec![(both.start / 512, sectors)], "mdadm reads the new log");
    }
}
