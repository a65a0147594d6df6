//! A member the engine fails is marked faulty in the superblocks before any write that
//! follows is acknowledged (md's MD_SB_CHANGE_PENDING). Else a crash right after the
//! acknowledgement brings the member back in sync at the next assemble, its blocks stale: its
//! chunks read old data, and a resync computes parity from them, losing the write.
//!
//! Method: the engine fails a member of a running RAID6 (the runtime's failed set, as after
//! an I/O error; `uraid-runtime/tests/failure.rs` drives real ones and shows the write held
//! until the record), and the chunk the member holds in the first row is rewritten: a
//! degraded write. The members' metadata (the first MiB, before the data offset) is read the
//! moment the write is acknowledged, the rest after (the array has neither bitmap nor log, so
//! nothing but metadata is written after the acknowledgement): the disks a crash of the
//! process would leave. The copies must say the member is faulty and, assembled, read the
//! write. (Whether the write would be acknowledged first without the hold depends on the
//! filesystem: here, its write waits for the monitor's superblock syncs anyway.)

mod common;

use common::{assert_same, fill, make_array, superblock, tempdir};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use uraid_format::DevRole;
use uraid_md::{ConsistencyPolicy, MdArray, MdOptions};
use uraid_runtime::Runtime;

/// The members' metadata area: everything before md's data offset (2048 sectors).
const METADATA: usize = 1 << 20;
const CHUNK: usize = common::CHUNK_SECTORS as usize * 512;

fn options() -> MdOptions {
    MdOptions { consistency_policy: ConsistencyPolicy::Resync, ..MdOptions::default() }
}

/// `op` on another thread; a request held forever fails the test instead of hanging it.
fn within_seconds<T: Send + 'static>(
    rt: &Arc<Runtime>,
    op: impl FnOnce(&Runtime) -> T + Send + 'static,
) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    let rt = rt.clone();
    std::thread::spawn(move || tx.send(op(&rt)).unwrap());
    rx.recv_timeout(Duration::from_secs(20)).expect("answered: the failure was recorded")
}

fn copy_at_crash(paths: &[PathBuf], to: &Path) -> Vec<PathBuf> {
    let metadata: Vec<Vec<u8>> = paths
        .iter()
        .map(|p| {
            let mut area = vec![0u8; METADATA];
            std::fs::File::open(p).unwrap().read_exact_at(&mut area, 0).unwrap();
            area
        })
        .collect();
    std::fs::create_dir_all(to).unwrap();
    paths
        .iter()
        .zip(&metadata)
        .map(|(p, meta)| {
            let copy = to.join(p.file_name().unwrap());
            std::fs::copy(p, &copy).unwrap();
            let f = std::fs::OpenOptions::new().write(true).open(&copy).unwrap();
            f.write_all_at(meta, 0).unwrap();
            copy
        })
        .collect()
}

#[test]
fn a_crash_right_after_a_degraded_write_keeps_the_failed_member_out() {
    let dir = tempdir("failure-record");
    let paths = make_array(&dir.path().join("live"), 5, None);
    let md = MdArray::assemble(&paths, &options()).unwrap();
    let rt = md.runtime().clone();
    let size = rt.size_bytes() as usize;
    rt.write_at(0, &fill(1, size)).unwrap();
    rt.flush().unwrap();
    let failed_dev = superblock(&paths[2]).dev_number as usize;
    rt.fail_member(2);
    // md's left-symmetric RAID6 of 5 puts row 0's chunk 1 on member 2.
    let mut second = fill(1, size);
    second[CHUNK..2 * CHUNK].copy_from_slice(&fill(2, CHUNK));
    let chunk = second[CHUNK..2 * CHUNK].to_vec();
    within_seconds(&rt, move |rt| rt.write_at(CHUNK as u64, &chunk)).unwrap();
    let copies = copy_at_crash(&paths, &dir.path().join("crashed"));
    drop(rt);
    md.stop().unwrap();
    for c in copies.iter().filter(|c| **c != copies[2]) {
        let sb = superblock(c);
        assert_eq!(sb.dev_roles[failed_dev], DevRole::Faulty, "{}", c.display());
    }
    // Dirty and degraded: md's refusal needs --force (no write-hole log here).
    let md = MdArray::assemble(&copies, &MdOptions { force: true, ..options() }).unwrap();
    assert!(md.status().degraded, "the failed member stays out");
    let rt = md.runtime().clone();
    assert_same(&rt.read_at(0, size).unwrap(), &second, "the write acknowledged before the crash");
    drop(rt);
    md.stop().unwrap();
}

/// A failure while the array stops: the stop's flush waits for the record, which the monitor
/// still makes, and the stopped array's superblocks say faulty.
#[test]
fn a_failure_during_a_stop_is_recorded_and_the_stop_completes() {
    let dir = tempdir("failure-record-stop");
    let paths = make_array(dir.path(), 5, Some(1 << 20));
    let md = MdArray::assemble(&paths, &MdOptions::default()).unwrap();
    let rt = md.runtime().clone();
    rt.write_at(0, &fill(3, 4 * CHUNK)).unwrap();
    let failed_dev = superblock(&paths[1]).dev_number as usize;
    rt.fail_member(1);
    drop(rt);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(md.stop()).unwrap());
    rx.recv_timeout(Duration::from_secs(20)).expect("the stop completes").unwrap();
    let sb = superblock(&paths[0]);
    assert_eq!(sb.dev_roles[failed_dev], DevRole::Faulty);
}
