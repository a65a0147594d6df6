//! Goal: the runtime on file members, each worker with its own descriptors and io_uring rings
//! on the same files. Method: RAID5 of 4 sparse files in a temp directory, 2 workers, writes
//! that span rows and workers, a FLUSH, then a new runtime on the same files reads everything
//! back (what one set of rings wrote, another set reads).

mod common;

use common::{KIB, assert_same, config, pattern, with_workers};
use std::path::PathBuf;
use uraid_core::Level;
use uraid_io::{FileMember, FileOptions};
use uraid_runtime::{FileSource, Runtime};

const MEMBER_BYTES: u64 = 2 << 20;
const CHUNK_BYTES: usize = 64 * KIB;

#[test]
fn file_members_round_trip_across_runtimes() {
    let dir =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("rt-files-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let paths: Vec<PathBuf> = (0..4).map(|i| dir.join(format!("m{i}"))).collect();
    for p in &paths {
        drop(FileMember::create(p, MEMBER_BYTES, FileOptions::default()).unwrap());
    }
    let cfg = with_workers(config(Level::Raid5, 4, CHUNK_BYTES, MEMBER_BYTES as usize), 2);
    let row = 3 * CHUNK_BYTES;
    let writes: Vec<(u64, Vec<u8>)> = (0..12u64)
        .map(|i| (i * 5 * row as u64 / 2 + 4096, pattern(i, 5 * row / 2 - 8192)))
        .collect();
    let source = FileSource::new(paths.clone(), FileOptions::default());
    let rt = Runtime::start(&cfg, &source).unwrap();
    for (at, data) in &writes {
        rt.write_at(*at, data).unwrap();
    }
    rt.flush().unwrap();
    let stats = rt.stats();
    assert!(stats.members.iter().all(|c| c.flushes == 2), "a FLUSH per worker per member");
    rt.shutdown().unwrap();

    let rt = Runtime::start(&cfg, &source).unwrap();
    for (at, data) in &writes {
        assert_same(&rt.read_at(*at, data.len()).unwrap(), data, &format!("at {at}"));
    }
    rt.shutdown().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}
