//! md's safe mode: once no write has come for the delay, an array's superblocks say clean, so
//! that a crash then needs no resync; the first write after has them say active before it is
//! acknowledged, and a crash then resyncs. Method: a RAID6 of 6 file members without a bitmap
//! (a dirty start resyncs it whole); copies of the member files taken while the array runs
//! stand for a crash at that moment (as in write_hole.rs); the copies are assembled and their
//! sync actions and contents looked at. The delay is long (3 s) so that no check below can
//! race the next clean mark on a loaded machine.

use std::time::Duration;
use uraid_format::MAX_SECTOR;
use uraid_md::{MdArray, MdOptions};

mod common;
use common::{assert_same, copy_all, fill, make_array, superblock, tempdir, wait_for};

#[test]
fn an_idle_array_is_clean_and_a_write_marks_it_active_before_it_is_acknowledged() {
    let dir = tempdir("safe-mode");
    let paths = make_array(dir.path(), 6, None);
    let options =
        MdOptions { safe_mode_delay: Some(Duration::from_secs(3)), ..MdOptions::default() };
    let md = MdArray::assemble(&paths, &options).unwrap();
    let rt = md.runtime().clone();
    let active = |what: &str| {
        for p in &paths {
            assert_eq!(superblock(p).resync_offset_sectors, 0, "{what}: {}", p.display());
        }
    };
    active("started");
    let data = fill(5, 256 << 10);
    rt.write_at(0, &data).unwrap();
    // The user never flushes: the clean mark makes the writes durable first.
    let clean = || paths.iter().all(|p| superblock(p).resync_offset_sectors == MAX_SECTOR);
    assert!(wait_for(clean), "clean once idle for the delay");
    assert!(md.status().state.starts_with("clean"), "{}", md.status().state);
    let idle_crash = copy_all(&paths, &dir.path().join("idle"));
    let more = fill(6, 8192);
    rt.write_at(1 << 20, &more).unwrap();
    active("after a write");
    assert!(md.status().state.starts_with("active"), "{}", md.status().state);
    let busy_crash = copy_all(&paths, &dir.path().join("busy"));
    drop(rt);
    md.stop().unwrap();
    assert!(clean(), "a stop leaves it clean");

    let md = MdArray::assemble(&idle_crash, &options).unwrap();
    assert!(md.wait_sync_idle(Duration::from_secs(10)).is_none(), "no resync after an idle crash");
    assert_same(&md.runtime().read_at(0, data.len()).unwrap(), &data, "the idle crash's data");
    md.stop().unwrap();

    let md = MdArray::assemble(&busy_crash, &options).unwrap();
    let r = md.wait_sync_idle(Duration::from_secs(60)).expect("a resync after a busy crash");
    assert_eq!((r.action.as_str(), r.outcome.as_str()), ("resync", "done"), "{r:?}");
    assert_same(&md.runtime().read_at(1 << 20, more.len()).unwrap(), &more, "the busy crash's");
    md.stop().unwrap();
}

/// Read-only use never marks it active: served for reads, then a crash, and no resync.
#[test]
fn reads_alone_leave_it_clean() {
    let dir = tempdir("safe-mode-reads");
    let paths = make_array(dir.path(), 6, None);
    let options =
        MdOptions { safe_mode_delay: Some(Duration::from_millis(200)), ..MdOptions::default() };
    let md = MdArray::assemble(&paths, &options).unwrap();
    let clean = || paths.iter().all(|p| superblock(p).resync_offset_sectors == MAX_SECTOR);
    assert!(wait_for(clean), "clean once idle");
    for i in 0..50 {
        md.runtime().read_at(i * 65536, 65536).unwrap();
    }
    assert!(clean(), "reads do not mark it active");
    let crash = copy_all(&paths, &dir.path().join("crash"));
    md.stop().unwrap();
    let md = MdArray::assemble(&crash, &options).unwrap();
    assert!(md.wait_sync_idle(Duration::from_secs(10)).is_none(), "no resync");
    md.stop().unwrap();
}
