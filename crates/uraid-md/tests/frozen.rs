//! Goal: md's sync_action "frozen" pauses a rebuild where it is and starts nothing until
//! thawed; thawed, the rebuild goes on from where it stopped (not from the start) and the
//! array reads back whole; a check asked for while frozen thaws it, as md's action_store does,
//! and freezing drops a running check as md drops it.
//!
//! Method: a RAID6 of six 24 MiB member files written whole with a pattern; a member failed
//! and a spare added with the sync speed held at 1 KiB/s, so the recovery is under way when
//! frozen; statuses, the spare's superblock and the array's reads checked at each step.

use std::path::PathBuf;
use std::time::Duration;
use uraid_md::{MdArray, MdOptions, SyncSpeed};

mod common;
use common::{
    MEMBER_BYTES, fill, make_array, reads_with_two_failed, superblock, tempdir, wait_for,
};

const SLOW: SyncSpeed = SyncSpeed { min_kib: 1, max_kib: 1 };
const FAST: SyncSpeed = SyncSpeed { min_kib: 100_000, max_kib: 1_000_000 };

fn spare(dir: &std::path::Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::File::create(&path).unwrap().set_len(MEMBER_BYTES).unwrap();
    path
}

#[test]
fn a_frozen_recovery_waits_and_goes_on_from_where_it_stopped() {
    let dir = tempdir("frozen");
    let paths = make_array(dir.path(), 6, None);
    let md = MdArray::assemble(&paths, &MdOptions::default()).unwrap();
    let model = fill(77, md.runtime().size_bytes() as usize);
    md.runtime().write_at(0, &model).unwrap();
    md.set_sync_speed(SLOW);
    md.fail(&paths[3].display().to_string()).unwrap();
    md.remove(&paths[3].display().to_string()).unwrap();
    let spare = spare(dir.path(), "spare.img");
    md.add(&spare.display().to_string()).unwrap();
    assert!(wait_for(|| md.status().sync.is_some_and(|s| s.done_sectors > 0)));

    let said = md.freeze();
    assert_eq!(said, "frozen: stopping the recovery of slot 3 (it goes on when thawed)");
    assert!(wait_for(|| md.status().sync.is_none()), "the recovery stops");
    let status = md.status();
    assert!(status.frozen && status.state.ends_with(", frozen"), "{}", status.state);
    let last = status.last_sync.expect("the recovery's result");
    assert_eq!((last.action.as_str(), last.outcome.as_str()), ("recover", "interrupted"));
    let at = superblock(&spare).recovery_offset_sectors;
    assert!(at > 0, "its progress recorded: {at}");
    // Nothing starts while frozen, however fast it may go.
    md.set_sync_speed(FAST);
    std::thread::sleep(Duration::from_millis(500));
    assert!(md.status().sync.is_none() && superblock(&spare).recovery_offset_sectors == at);
    assert_eq!(md.freeze(), "frozen already");

    assert_eq!(md.stop_scrub().unwrap(), "thawed: the recovery of slot 3 starts");
    let result = md.wait_sync_idle(Duration::from_secs(60)).expect("the recovery goes on");
    assert_eq!((result.action.as_str(), result.outcome.as_str()), ("recover", "done"));
    let member_sectors = MEMBER_BYTES / 512 - 2048;
    assert_eq!(result.sectors, member_sectors - at, "from where it stopped: {result:?}");
    let status = md.status();
    assert!(!status.frozen && !status.degraded, "{}", status.state);
    reads_with_two_failed(&md, 0, 5, &model, "with the member rebuilt across the freeze");
    md.stop().unwrap();
}

#[test]
fn freezing_drops_a_check_and_asking_for_one_thaws() {
    let dir = tempdir("frozen-check");
    let paths = make_array(dir.path(), 6, None);
    let md = MdArray::assemble(&paths, &MdOptions::default()).unwrap();
    md.set_sync_speed(SLOW);
    md.scrub(false).unwrap();
    assert!(wait_for(|| md.status().sync.is_some()));
    assert_eq!(md.freeze(), "frozen: stopping a check (dropped, as md drops it)");
    assert!(wait_for(|| md.status().sync.is_none()));
    // Dropped, as md drops it: nothing waits.
    let status = md.status();
    assert_eq!(status.last_sync.map(|r| r.outcome), Some("interrupted".to_owned()));
    assert_eq!(md.stop_scrub().unwrap(), "thawed: nothing waits");
    // A failure while frozen queues its recovery, which waits; a check asked for thaws.
    let _ = md.freeze();
    md.fail(&paths[1].display().to_string()).unwrap();
    md.remove(&paths[1].display().to_string()).unwrap();
    md.add(&spare(dir.path(), "spare.img").display().to_string()).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert!(md.status().sync.is_none() && md.status().frozen);
    md.set_sync_speed(FAST);
    let busy = md.scrub(false).unwrap_err().to_string();
    assert_eq!(busy, "the array is busy with the recovery of slot 1");
    assert!(md.status().frozen, "a refused check leaves it frozen");
    md.stop_scrub().unwrap();
    let result = md.wait_sync_idle(Duration::from_secs(60)).expect("the recovery ran");
    assert_eq!((result.action.as_str(), result.outcome.as_str()), ("recover", "done"));
    let _ = md.freeze();
    assert_eq!(md.scrub(false).unwrap(), "check started");
    assert!(!md.status().frozen, "md's check clears frozen");
    let check = md.wait_sync_idle(Duration::from_secs(60)).expect("the check ran");
    assert_eq!((check.action.as_str(), check.mismatch_sectors), ("check", 0));
    md.stop().unwrap();
}
