//! Goal: the worker times the engine's write-back (`Array::set_write_back`): a stream's
//! partial stripes, acknowledged and held, reach the members once no request comes for a
//! while, with no flush; and a clean shutdown writes what is still held. Method: RAID5 of 4
//! files (data offset 0, 64 KiB chunks, one worker), a stream of 4 KiB writes that stops
//! inside stripe 0, then the member files read directly. And with two workers, which take rows
//! in turn, a stream across rows is still one stream to each worker's engine
//! (`Array::set_stream_stride`): its partial stripes are held, not read.

mod common;

use common::{KIB, config, pattern, with_workers};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use uraid_core::Level;
use uraid_io::{FileMember, FileOptions};
use uraid_runtime::{FileSource, Runtime};

const MEMBER_BYTES: u64 = 2 << 20;
const CHUNK_BYTES: usize = 64 * KIB;
const BLOCK: usize = 4096;

fn members(name: &str) -> (PathBuf, Vec<PathBuf>) {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("rt-write-back-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let paths: Vec<PathBuf> = (0..4).map(|i| dir.join(format!("m{i}"))).collect();
    for p in &paths {
        drop(FileMember::create(p, MEMBER_BYTES, FileOptions::default()).unwrap());
    }
    (dir, paths)
}

/// Block `i` of the stream as member 0 holds it (stripe 0's first chunk is data disk 0 on
/// member 0 in md's default layout; the stream stays within it).
fn on_member_0(path: &Path, i: usize) -> Vec<u8> {
    std::fs::read(path).unwrap()[i * BLOCK..(i + 1) * BLOCK].to_vec()
}

/// Writes a stream of `n` 4 KiB blocks from offset 0, one at a time.
fn stream(rt: &Runtime, n: usize) {
    for i in 0..n {
        rt.write_at((i * BLOCK) as u64, &pattern(i as u64, BLOCK)).unwrap();
    }
}

#[test]
fn held_writes_reach_the_members_when_no_request_comes() {
    let (dir, paths) = members("timer");
    let cfg = with_workers(config(Level::Raid5, 4, CHUNK_BYTES, MEMBER_BYTES as usize), 1);
    let rt = Runtime::start(&cfg, &FileSource::new(paths.clone(), FileOptions::default())).unwrap();
    stream(&rt, 10);
    assert!(rt.stats().array.writes_held_back >= 7, "{:?}", rt.stats().array);
    // The worker's timer (2 ms with no request) ends the hold; no flush is sent.
    let start = Instant::now();
    while on_member_0(&paths[0], 9) != pattern(9, BLOCK) {
        assert!(start.elapsed() < Duration::from_secs(10), "the held writes never went out");
        std::thread::sleep(Duration::from_millis(5));
    }
    for i in 0..10 {
        assert_eq!(on_member_0(&paths[0], i), pattern(i as u64, BLOCK), "block {i}");
    }
    assert_eq!(rt.stats().members.iter().map(|m| m.flushes).sum::<u64>(), 0, "no flush");
    rt.shutdown().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_clean_shutdown_writes_what_is_held() {
    let (dir, paths) = members("shutdown");
    let cfg = with_workers(config(Level::Raid5, 4, CHUNK_BYTES, MEMBER_BYTES as usize), 1);
    let source = FileSource::new(paths.clone(), FileOptions::default());
    let rt = Runtime::start(&cfg, &source).unwrap();
    stream(&rt, 10);
    rt.shutdown().unwrap();
    for i in 0..10 {
        assert_eq!(on_member_0(&paths[0], i), pattern(i as u64, BLOCK), "block {i}");
    }
    // And parity agrees: a runtime with member 0 missing rebuilds the stream from it.
    let rt = Runtime::start(&cfg, &source).unwrap();
    rt.fail_member(0);
    for i in 0..10 {
        assert_eq!(rt.read_at((i * BLOCK) as u64, BLOCK).unwrap(), pattern(i as u64, BLOCK));
    }
    rt.shutdown().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_stream_across_the_workers_rows_reads_nothing_after_its_start() {
    let (dir, paths) = members("stride");
    let cfg = with_workers(config(Level::Raid5, 4, CHUNK_BYTES, MEMBER_BYTES as usize), 2);
    let source = FileSource::new(paths.clone(), FileOptions::default());
    let rt = Runtime::start(&cfg, &source).unwrap();
    // Ten rows of 192 KiB, each worker's five in turn, one 4 KiB write at a time.
    let rows = 10;
    stream(&rt, rows * 3 * CHUNK_BYTES / BLOCK);
    let reads: u64 = rt.stats().members.iter().map(|m| m.read_ios).sum();
    // Each worker's first two writes (a stream is sure only at the third) are
    // read-modify-writes, 2 reads each: 8. Seen as a new stream at each of its rows (each
    // worker's engine told nothing of the other's), every later row began so too: 42-43
    // reads. The worker's 2 ms timer may end a hold on a loaded machine (10 seen).
    assert!(reads <= 20, "{reads} member reads: {:?}", rt.stats().array);
    rt.shutdown().unwrap();
    let rt = Runtime::start(&cfg, &source).unwrap();
    rt.fail_member(1);
    for i in (0..rows * 3 * CHUNK_BYTES / BLOCK).step_by(7) {
        assert_eq!(rt.read_at((i * BLOCK) as u64, BLOCK).unwrap(), pattern(i as u64, BLOCK));
    }
    rt.shutdown().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn with_the_write_back_off_every_write_is_on_the_members_when_acknowledged() {
    let (dir, paths) = members("off");
    let mut cfg = with_workers(config(Level::Raid5, 4, CHUNK_BYTES, MEMBER_BYTES as usize), 1);
    cfg.write_back = false;
    let rt = Runtime::start(&cfg, &FileSource::new(paths.clone(), FileOptions::default())).unwrap();
    for i in 0..10 {
        rt.write_at((i * BLOCK) as u64, &pattern(i as u64, BLOCK)).unwrap();
        assert_eq!(on_member_0(&paths[0], i), pattern(i as u64, BLOCK), "block {i}");
    }
    assert_eq!(rt.stats().array.writes_held_back, 0);
    rt.shutdown().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}
