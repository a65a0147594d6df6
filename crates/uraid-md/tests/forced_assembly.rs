//! Goal: an array that failed beyond its redundancy, member after member, comes back with
//! mdadm's --force and holds every write it acknowledged. md's users meet this after a
//! controller or cable glitch, uraid's also when sparse member files fill their file
//! system: each member fails at its first write that finds no space.
//!
//! Method: a RAID5 of 4 files with a write-intent bitmap. Written whole, then member 3 is
//! failed and a region rewritten (acknowledged, degraded), then member 1's device fails
//! every I/O (`Pullable`) and a write to the array fails: it is FAILED. Stopped, it is
//! refused without --force (the error says what --force does) and starts with it, member 1
//! brought back (the freshest stale one), member 3 left out. Every byte but those of the
//! failed write reads back as acknowledged, and those read old, new or fail. Member 3 added
//! then cannot be rebuilt there and the recovery says where (array bytes around the failed
//! write); those blocks rewritten and member 3 added again, it is rebuilt and a check then
//! finds no mismatch.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use uraid_format::Level;
use uraid_io::{Member, Pullable};
use uraid_md::members::MemberFaults;
use uraid_md::{MdArray, MdOptions};

mod common;
use common::{assert_same, fill, make_array_at, tempdir, wait_for};

const WAIT: Duration = Duration::from_secs(60);

/// Member 1's first instance fails every I/O once `pulled` is set; later ones never do.
fn pull_member_1_once(pulled: &Arc<AtomicBool>) -> MemberFaults {
    let pulled = pulled.clone();
    let first_open = Mutex::new(true);
    MemberFaults(Arc::new(move |slot, file| {
        let mut first = first_open.lock().unwrap();
        if slot == 1 && *first {
            *first = false;
            return Box::new(Pullable::new(Box::new(file), pulled.clone())) as Box<dyn Member>;
        }
        Box::new(file)
    }))
}

#[test]
fn an_array_failed_member_after_member_comes_back_with_force() {
    let dir = tempdir("forced-assembly");
    let paths = make_array_at(dir.path(), Level::Raid5, 4, Some(64 << 10));
    let pulled = Arc::new(AtomicBool::new(false));
    let faults = pull_member_1_once(&pulled);
    let options = MdOptions { member_faults: Some(faults), ..MdOptions::default() };
    let md = MdArray::assemble(&paths, &options).unwrap();
    let rt = md.runtime().clone();
    let size = rt.size_bytes() as usize;
    let mut model = fill(1, size);
    rt.write_at(0, &model).unwrap();

    md.fail(&paths[3].display().to_string()).unwrap();
    let rewritten = 1 << 20..5 << 20;
    model[rewritten.clone()].copy_from_slice(&fill(2, rewritten.len()));
    rt.write_at(rewritten.start as u64, &model[rewritten.clone()]).unwrap();
    rt.flush().unwrap();

    pulled.store(true, Ordering::Release);
    let failed_write = 9 << 20..(9 << 20) + (256 << 10);
    let err = rt.write_at(failed_write.start as u64, &fill(3, failed_write.len()));
    assert!(err.is_err(), "a write with two members of a RAID5 gone must fail");
    drop(rt);
    stop_failed(md, &paths);

    let plain = MdOptions::default();
    let refused = MdArray::assemble(&paths, &plain).err().expect("too many stale members");
    let text = refused.to_string();
    assert!(text.contains("--force starts it from the freshest stale members"), "{text}");

    let forced = MdOptions { force: true, ..MdOptions::default() };
    let md = MdArray::assemble(&paths, &forced).unwrap();
    let info = md.info().clone();
    assert_eq!(info.forced_in.len(), 1, "{info:#?}");
    assert!(info.forced_in[0].starts_with(&paths[1].display().to_string()), "{info:#?}");
    assert!(info.left_out.iter().any(|l| l.starts_with(&paths[3].display().to_string())));
    let status = md.status();
    assert!(status.degraded && !status.failed(), "{status:#?}");
    let rt = md.runtime().clone();
    let (before, after) = (0..failed_write.start, failed_write.end..size);
    let read = |r: &std::ops::Range<usize>| rt.read_at(r.start as u64, r.len()).unwrap();
    assert_same(&read(&before), &model[before.clone()], "before the failed write");
    assert_same(&read(&after), &model[after.clone()], "after the failed write");
    old_or_new_or_error(&rt, &model, &fill(3, failed_write.len()), failed_write.clone());

    // Member 3 added now: where member 1's blocks are listed, it cannot rebuild its own, so
    // it lists them in its log (as md does) and goes on; the array is whole again, and reads
    // of those blocks fail as before.
    let m3 = paths[3].display().to_string();
    md.add(&m3).unwrap();
    let rebuilt = md.wait_sync_idle(WAIT).expect("a recovery ran");
    assert_eq!(rebuilt.outcome, "done", "{rebuilt:?}");
    assert!(rebuilt.listed_bad_sectors > 0, "{rebuilt:?}");
    assert!(!md.status().degraded, "{:#?}", md.status());
    assert_same(&read(&before), &model[before.clone()], "rebuilt, before the failed write");
    assert_same(&read(&after), &model[after.clone()], "rebuilt, after the failed write");
    old_or_new_or_error(&rt, &model, &fill(3, failed_write.len()), failed_write.clone());
    // What a file system's repair does with blocks it cannot read: it writes them. That
    // makes the listed blocks good again, on members 1 and 3 alike.
    model[failed_write.clone()].copy_from_slice(&fill(4, failed_write.len()));
    rt.write_at(failed_write.start as u64, &model[failed_write.clone()]).unwrap();
    let status = md.status();
    assert!(status.members.iter().all(|m| m.bad_sectors == 0), "{status:#?}");
    assert_same(&rt.read_at(0, size).unwrap(), &model, "rewritten after the rebuild");
    md.scrub(false).unwrap();
    let check = md.wait_sync_idle(WAIT).expect("a check");
    assert_eq!(check.mismatch_sectors, 0, "{check:?}");
    drop(rt);
    md.stop().unwrap();
}

/// The failed write's blocks: member 1 listed the writes it failed in its bad block log
/// (md's rule), and with member 3 gone (or rebuilt, listing them) they cannot be rebuilt:
/// they fail, never lie.
fn old_or_new_or_error(
    rt: &uraid_runtime::Runtime,
    old: &[u8],
    new: &[u8],
    range: std::ops::Range<usize>,
) {
    for at in range.clone().step_by(4096) {
        let within = at - range.start..at - range.start + 4096;
        match rt.read_at(at as u64, 4096) {
            Ok(block) => assert!(
                block == old[at..at + 4096] || block == new[within],
                "the failed write's block at {at} is neither old nor new"
            ),
            Err(e) => assert!(format!("{e:?}").contains("BeyondRedundancy"), "{e:?}"),
        }
    }
}

/// The array has FAILED: it says so, refuses an add (mdadm's refusal: it cannot rebuild a
/// failed array, and the device may be a member --force needs back), stays active past safe
/// mode's delay, and its stop leaves the superblocks dirty: a write failed part-way may have
/// left its stripes' parity disagreeing with their data (the start after --force replays
/// the log and resyncs what it can).
fn stop_failed(md: MdArray, paths: &[std::path::PathBuf]) {
    assert!(wait_for(|| md.status().failed()), "{:#?}", md.status());
    let status = md.status();
    assert!(status.state.contains("FAILED"), "{}", status.state);
    let err = md.add(&paths[3].display().to_string()).unwrap_err().to_string();
    assert!(err.contains("the array has FAILED"), "{err}");
    std::thread::sleep(Duration::from_millis(500));
    assert!(md.status().state.starts_with("active"), "{}", md.status().state);
    let _ = md.stop();
    for p in [&paths[0], &paths[2]] {
        let sb = common::superblock(p);
        assert_ne!(sb.resync_offset_sectors, u64::MAX, "{} says clean", p.display());
    }
}
