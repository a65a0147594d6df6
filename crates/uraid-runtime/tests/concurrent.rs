//! Goal: requests from several client threads, sharded over 1, 2 and 3 workers, read back
//! exactly what was written, for RAID5 and RAID6. Method: each client owns a contiguous slice
//! of the array (so the model stays exact while clients run at once) and does random writes,
//! discards and reads of 512 B to three rows at 512-byte granularity, most of which span rows
//! and therefore workers, checking every read against its model; at the end the whole array is
//! read back in one request (every row, every worker) and compared.

mod common;

use common::{KIB, Model, assert_same, client, config, pattern, with_workers};
use std::sync::mpsc;
use uraid_core::Level;
use uraid_runtime::{Op, Runtime, SharedMemorySource};

const MEMBER_BYTES: usize = 1 << 20;
const CHUNK_BYTES: usize = 16 * KIB;
const CLIENTS: u64 = 4;

fn random_clients(level: Level, disks: usize, workers: usize) {
    let cfg = with_workers(config(level, disks, CHUNK_BYTES, MEMBER_BYTES), workers);
    let source = SharedMemorySource::new(disks, MEMBER_BYTES);
    let rt = Runtime::start(&cfg, &source).unwrap();
    assert_eq!(rt.workers(), workers);
    let row_bytes = (CHUNK_BYTES * (disks - usize::from(level.max_degraded()))) as u64;
    let model = Model::new(rt.size_bytes());
    // Regions are not row-aligned on purpose: neighbouring clients share stripes.
    let region = (rt.size_bytes() / CLIENTS) / 512 * 512;
    std::thread::scope(|s| {
        for c in 0..CLIENTS {
            let (rt, model) = (&rt, &model);
            s.spawn(move || client(rt, model, c + 1, (c * region, region), row_bytes, true));
        }
    });
    rt.flush().unwrap();
    let whole = rt.read_at(0, rt.size_bytes() as usize).unwrap();
    assert_same(&whole, &model.read(0, rt.size_bytes() as usize), "the whole array");
    rt.shutdown().unwrap();
}

#[test]
fn raid5_random_clients_with_1_2_and_3_workers() {
    for workers in 1..=3 {
        random_clients(Level::Raid5, 4, workers);
    }
}

#[test]
fn raid6_random_clients_with_1_2_and_3_workers() {
    for workers in 1..=3 {
        random_clients(Level::Raid6, 6, workers);
    }
}

/// Goal: many requests in flight at once through `submit_tagged`, each spanning rows and
/// workers, complete once each with the caller's whole buffer back. Method: 64 writes of 2.5
/// rows at row offsets that put their pieces on every worker, all submitted before any answer
/// is awaited, then the same as reads (request i at i x 2.5 rows: every other one starts
/// mid-row).
#[test]
fn requests_in_flight_spanning_rows_and_workers() {
    let cfg = with_workers(config(Level::Raid6, 5, CHUNK_BYTES, MEMBER_BYTES), 3);
    let source = SharedMemorySource::new(5, MEMBER_BYTES);
    let rt = Runtime::start(&cfg, &source).unwrap();
    let row = 3 * CHUNK_BYTES as u64;
    let len = (5 * row / 2) as usize;
    let (tx, rx) = mpsc::channel();
    let n = 16;
    for i in 0..n {
        let buf = pattern(i + 1, len);
        rt.submit_tagged(Op::Write { offset_bytes: i * len as u64, buf, fua: i % 2 == 0 }, i, &tx);
    }
    let mut seen = vec![false; n as usize];
    for _ in 0..n {
        let (tag, done) = rx.recv().unwrap();
        done.result.unwrap();
        assert_same(&done.buf, &pattern(tag + 1, len), "a write's buffer comes back whole");
        assert!(!std::mem::replace(&mut seen[tag as usize], true), "write {tag} answered twice");
    }
    for i in 0..n {
        rt.submit_tagged(Op::Read { offset_bytes: i * len as u64, buf: vec![0; len] }, i, &tx);
    }
    for _ in 0..n {
        let (tag, done) = rx.recv().unwrap();
        done.result.unwrap();
        assert_same(&done.buf, &pattern(tag + 1, len), &format!("read {tag}"));
    }
    let stats = rt.stats();
    // Beyond each request's first piece: 1.5 rows (row-aligned start) or 2 rows (mid-row start),
    // copied twice for a write and once for a read.
    let tails = (n / 2) * (3 * row / 2) + (n / 2) * 2 * row;
    assert_eq!(stats.split_bytes_copied, 3 * tails);
    rt.shutdown().unwrap();
}
