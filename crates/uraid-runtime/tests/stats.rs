//! Goal: `Runtime::stats` sums every worker's engine counters and every worker's instance of
//! each member, and sharding changes no member I/O. Method: RAID5 of 4 shared memory members,
//! the whole array written as full rows (one request per row) then read back in chunks, on 1, 2
//! and 3 workers: the member counters must equal what the plan implies (each member is written
//! once over: rows x chunk bytes; nothing read while writing; reads = user bytes, all bypassing
//! the cache) and be the same at every worker count, as must the engine's counters. A FLUSH
//! reaches every member once per worker.

mod common;

use common::{KIB, assert_same, config, pattern, with_workers};
use uraid_core::Level;
use uraid_runtime::{Runtime, RuntimeStats, SharedMemorySource};

const MEMBER_BYTES: usize = 1 << 20;
const CHUNK_BYTES: usize = 64 * KIB;

fn run(workers: usize) -> (RuntimeStats, RuntimeStats) {
    let cfg = with_workers(config(Level::Raid5, 4, CHUNK_BYTES, MEMBER_BYTES), workers);
    let source = SharedMemorySource::new(4, MEMBER_BYTES);
    let rt = Runtime::start(&cfg, &source).unwrap();
    let row = 3 * CHUNK_BYTES;
    let rows = rt.size_bytes() as usize / row;
    assert_eq!(rows, MEMBER_BYTES / CHUNK_BYTES);
    for r in 0..rows {
        rt.write_at((r * row) as u64, &pattern(r as u64, row)).unwrap();
    }
    let written = rt.stats();
    for r in 0..rows {
        for c in 0..3 {
            let at = r * row + c * CHUNK_BYTES;
            let got = rt.read_at(at as u64, CHUNK_BYTES).unwrap();
            let want = &pattern(r as u64, row)[c * CHUNK_BYTES..(c + 1) * CHUNK_BYTES];
            assert_same(&got, want, &format!("row {r} chunk {c}"));
        }
    }
    rt.flush().unwrap();
    rt.flush().unwrap();
    let read = rt.stats();
    rt.shutdown().unwrap();
    (written, read)
}

#[test]
fn stats_sum_over_workers_and_match_the_plan() {
    let (base_written, base_read) = run(1);
    for workers in 1..=3 {
        let (written, read) = run(workers);
        assert_eq!(written.workers, workers);
        for (m, c) in written.members.iter().enumerate() {
            assert_eq!(c.write_bytes, MEMBER_BYTES as u64, "member {m} written once over");
            assert_eq!(c.read_bytes, 0, "member {m}: full-stripe writes read nothing");
        }
        let user_read: u64 = read.members.iter().map(|c| c.read_bytes).sum();
        assert_eq!(user_read, 3 * MEMBER_BYTES as u64, "healthy reads: member bytes = user bytes");
        assert!(read.members.iter().all(|c| c.flushes == 2 * workers as u64), "{read:?}");
        assert_eq!(written.array, base_written.array, "{workers} workers: same engine work");
        assert_eq!(read.array, base_read.array, "{workers} workers: same engine work");
        assert_eq!(read.array.bytes_copied, 0, "full stripes and chunk reads copy nothing");
        assert_eq!(read.split_bytes_copied, 0, "no request crossed a row");
        let strip = |s: &RuntimeStats| {
            s.members.iter().map(|c| (c.read_ios, c.write_ios, c.read_bytes)).collect::<Vec<_>>()
        };
        assert_eq!(strip(&read), strip(&base_read), "{workers} workers: same member I/O");
    }
}
