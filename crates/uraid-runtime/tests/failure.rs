//! Goal: a member that fails under one worker is failed in every worker, reads stay correct
//! within redundancy, and beyond it every worker refuses I/O with the engine's error, never
//! wrong data. Method: RAID6 of 6 shared memory members on 3 workers; worker 1's instance of
//! member 2 is wrapped in `Faulty` and fails every I/O after its 40th while 4 clients run
//! random I/O checked against a model; then a second member is failed through the API
//! (still correct), then a third (refused).

mod common;

use common::{FaultySource, KIB, Model, assert_same, client, config, with_workers};
use std::sync::atomic::AtomicUsize;
use uraid_core::Level;
use uraid_core::array::ArrayError;
use uraid_runtime::{MemberSet, Runtime, RuntimeError, SharedMemorySource};

const MEMBER_BYTES: usize = 1 << 20;
const CHUNK_BYTES: usize = 16 * KIB;

fn read_whole(rt: &Runtime, model: &Model, what: &str) {
    let whole = rt.read_at(0, rt.size_bytes() as usize).unwrap();
    assert_same(&whole, &model.read(0, rt.size_bytes() as usize), what);
}

#[test]
fn a_member_failed_by_one_worker_is_failed_by_all_and_reads_stay_correct() {
    let cfg = with_workers(config(Level::Raid6, 6, CHUNK_BYTES, MEMBER_BYTES), 3);
    let inner = SharedMemorySource::new(6, MEMBER_BYTES);
    let source =
        FaultySource { inner, worker: 1, member: 2, after: 40, opened: AtomicUsize::new(0) };
    let rt = Runtime::start(&cfg, &source).unwrap();
    let model = Model::new(rt.size_bytes());
    let row_bytes = 4 * CHUNK_BYTES as u64;
    let region = rt.size_bytes() / 4 / 512 * 512;
    std::thread::scope(|s| {
        for c in 0..4 {
            let (rt, model) = (&rt, &model);
            s.spawn(move || client(rt, model, c + 10, (c * region, region), row_bytes, true));
        }
    });
    // A FLUSH passes through every worker: each has taken a turn since the failure.
    rt.flush().unwrap();
    assert_eq!(rt.failed_members(), vec![2]);
    assert_eq!(rt.worker_failed_members(), vec![vec![2]; 3], "every engine failed member 2");
    assert!(rt.stats().members[2].errors > 0, "the fault was hit");
    read_whole(&rt, &model, "one member failed");

    rt.fail_member(4);
    rt.flush().unwrap();
    assert_eq!(rt.worker_failed_members(), vec![vec![2, 4]; 3]);
    read_whole(&rt, &model, "two members failed");
    let data = common::pattern(99, 3 * row_bytes as usize);
    rt.write_at(row_bytes / 2, &data).unwrap();
    model.write(row_bytes / 2, &data);
    read_whole(&rt, &model, "written with two members failed");

    rt.fail_member(0);
    rt.flush().unwrap();
    for w in 0..3 {
        let at = w * row_bytes;
        let refused = |r: Result<_, RuntimeError>| {
            matches!(r, Err(RuntimeError::Array(ArrayError::BeyondRedundancy)))
        };
        assert!(refused(rt.read_at(at, row_bytes as usize).map(drop)), "worker {w} read");
        assert!(refused(rt.write_at(at, &data[..row_bytes as usize])), "worker {w} write");
    }
    rt.shutdown().unwrap();
}

/// Arrays past 64 members (md and uraid take up to 256): the workers share failures in a set
/// of a bit per member, which was one 64-bit word, and such an array panicked at start.
/// RAID6 of 130 on 2 workers: member 129 fails under worker 1 by its I/O errors, member 70
/// through the API; every worker fails both, the data reads back, writes degraded read back,
/// and a third failure is refused. Recorded failures of high members release held writes.
#[test]
fn members_past_64_fail_in_every_worker() {
    const DISKS: usize = 130;
    const MEMBER: usize = 512 * KIB;
    let cfg = with_workers(config(Level::Raid6, DISKS, 4 * KIB, MEMBER), 2);
    let inner = SharedMemorySource::new(DISKS, MEMBER);
    let source =
        FaultySource { inner, worker: 1, member: 129, after: 2, opened: AtomicUsize::new(0) };
    let rt = Runtime::start(&cfg, &source).unwrap();
    let model = Model::new(rt.size_bytes());
    let whole = common::pattern(7, rt.size_bytes() as usize);
    rt.write_at(0, &whole).unwrap();
    model.write(0, &whole);
    rt.flush().unwrap();
    assert_eq!(rt.failed_members(), vec![129]);
    assert_eq!(rt.worker_failed_members(), vec![vec![129]; 2]);
    read_whole(&rt, &model, "member 129 failed");

    rt.fail_member(70);
    rt.flush().unwrap();
    assert_eq!(rt.worker_failed_members(), vec![vec![70, 129]; 2]);
    read_whole(&rt, &model, "members 70 and 129 failed");
    let row_bytes = (DISKS as u64 - 2) * 4 * KIB as u64;
    let data = common::pattern(8, 3 * row_bytes as usize);
    rt.write_at(row_bytes / 2, &data).unwrap();
    model.write(row_bytes / 2, &data);
    read_whole(&rt, &model, "written with members 70 and 129 failed");

    rt.fail_member(100);
    rt.flush().unwrap();
    // A row no recent request left in the stripe cache.
    // A row no recent request left in the stripe cache (it holds 64 of the 128).
    let r = rt.read_at(8 * row_bytes, row_bytes as usize).map(drop);
    assert!(matches!(r, Err(RuntimeError::Array(ArrayError::BeyondRedundancy))), "{r:?}");
    rt.shutdown().unwrap();

    // Held writes go once the failure of a member past 64 is recorded.
    let mut cfg = cfg;
    cfg.record_failures = true;
    let source = SharedMemorySource::new(DISKS, MEMBER);
    let rt = std::sync::Arc::new(Runtime::start(&cfg, &source).unwrap());
    rt.fail_member(129);
    let (tx, rx) = std::sync::mpsc::channel();
    let shared = rt.clone();
    let writer = std::thread::spawn(move || tx.send(shared.write_at(0, &data)).unwrap());
    let wait = std::time::Duration::from_millis(300);
    let held = rx.recv_timeout(wait);
    rt.failures_recorded(MemberSet::of([129]));
    let done = rx.recv_timeout(std::time::Duration::from_secs(10));
    writer.join().unwrap();
    assert!(held.is_err(), "acknowledged before the failure was recorded: {held:?}");
    assert!(matches!(done, Ok(Ok(()))), "{done:?}");
    std::sync::Arc::into_inner(rt).unwrap().shutdown().unwrap();
}

/// Regression test for an engine (uraid-core) bug, fixed, on one worker so that the runtime's
/// sharding plays no part: RAID6 of 6, member 2 failed, a full-row write, a whole-row discard,
/// then the row read back returns the written data of the chunk on the failed member instead
/// of zeros (stale stripe head data, or the discard does not reach its head).
#[test]
fn degraded_whole_stripe_discard_reads_back_zeros() {
    let cfg = with_workers(config(Level::Raid6, 6, CHUNK_BYTES, MEMBER_BYTES), 1);
    let source = SharedMemorySource::new(6, MEMBER_BYTES);
    let rt = Runtime::start(&cfg, &source).unwrap();
    rt.fail_member(2);
    let row = 4 * CHUNK_BYTES;
    rt.write_at(0, &common::pattern(1, row)).unwrap();
    rt.discard(0, row as u64).unwrap();
    assert_same(&rt.read_at(0, row).unwrap(), &vec![0; row], "a discarded row");
}

/// With `record_failures`, a member failed by an I/O error in one worker holds back the
/// writes and flushes of every worker until the caller says its metadata records the failure
/// (md's MD_SB_CHANGE_PENDING).
#[test]
fn writes_after_a_failure_wait_until_it_is_recorded() {
    let mut cfg = with_workers(config(Level::Raid5, 4, CHUNK_BYTES, MEMBER_BYTES), 2);
    cfg.record_failures = true;
    let inner = SharedMemorySource::new(4, MEMBER_BYTES);
    let source =
        FaultySource { inner, worker: 0, member: 2, after: 0, opened: AtomicUsize::new(0) };
    let rt = std::sync::Arc::new(Runtime::start(&cfg, &source).unwrap());
    let data = common::pattern(5, rt.size_bytes() as usize);
    let (tx, rx) = std::sync::mpsc::channel();
    for op in 0..2 {
        let (shared, data, tx) = (rt.clone(), data.clone(), tx.clone());
        std::thread::spawn(move || {
            // The whole array: rows of both workers, member 2 of worker 0 among them.
            let r = if op == 0 { shared.write_at(0, &data) } else { shared.flush() };
            tx.send((op, r)).unwrap();
        });
        // The flush after the write has failed the member.
        while op == 0 && rt.failed_members().is_empty() {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
    let wait = std::time::Duration::from_millis(300);
    assert!(rx.recv_timeout(wait).is_err(), "acknowledged before the failure was recorded");
    assert_eq!(rt.failed_members(), vec![2]);
    rt.failures_recorded(MemberSet::of([2]));
    let mut got: Vec<(i32, Result<(), RuntimeError>)> =
        (0..2).map(|_| rx.recv_timeout(std::time::Duration::from_secs(10)).unwrap()).collect();
    got.sort_by_key(|(op, _)| *op);
    assert!(got.iter().all(|(_, r)| r.is_ok()), "{got:?}");
    assert_same(&rt.read_at(0, data.len()).unwrap(), &data, "written degraded");
    // Recorded: later writes are not held.
    rt.write_at(0, &data[..3 * CHUNK_BYTES]).unwrap();
    std::sync::Arc::try_unwrap(rt).ok().unwrap().shutdown().unwrap();
}
