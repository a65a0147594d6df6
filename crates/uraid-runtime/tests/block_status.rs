//! Goal: block status (NBD's base:allocation) never calls a range zeros that does not read
//! back as zeros, and finds the holes of sparse file members. Method: RAID5 and RAID6 on
//! sparse files, 2 workers; writes of data and of zeros at random places, some left in the
//! write-back; every extent said to be zeros is read back, before and after a flush, healthy
//! and with members failed; a discard gives the holes back.

mod common;

use common::{KIB, Rng, config, pattern, with_workers};
use std::path::PathBuf;
use uraid_core::Level;
use uraid_io::{FileMember, FileOptions};
use uraid_runtime::{Extent, FileSource, Runtime};

const MEMBER_BYTES: u64 = 4 << 20;
const CHUNK_BYTES: usize = 64 * KIB;

struct Files {
    dir: PathBuf,
    source: FileSource,
}

fn files(name: &str, disks: usize) -> Files {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("rt-status-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let paths: Vec<PathBuf> = (0..disks).map(|i| dir.join(format!("m{i}"))).collect();
    for p in &paths {
        drop(FileMember::create(p, MEMBER_BYTES, FileOptions::default()).unwrap());
    }
    Files { dir, source: FileSource::new(paths, FileOptions::default()) }
}

/// The extents, as (byte offset, bytes, zero, hole), covering `[0, size)` whole.
fn status(rt: &Runtime) -> Vec<(u64, u64, bool, bool)> {
    let size = rt.size_bytes();
    let mut out = Vec::new();
    let mut at = 0;
    while at < size {
        let extents: Vec<Extent> = rt.status_at(at, size - at).unwrap();
        assert!(!extents.is_empty(), "an answer covers something");
        for e in extents {
            assert!(e.sectors > 0 && (e.zero || !e.hole), "a hole reads as zeros: {e:?}");
            out.push((at, e.sectors * 512, e.zero, e.hole));
            at += e.sectors * 512;
        }
    }
    assert_eq!(at, size, "the extents end at the end");
    out
}

/// Every extent said to be zeros reads back as zeros; returns the bytes said to be zeros.
fn zeros_read_back(rt: &Runtime, what: &str) -> u64 {
    let mut zero_bytes = 0;
    for (at, len, zero, _) in status(rt) {
        if zero {
            let got = rt.read_at(at, len as usize).unwrap();
            let bad = got.iter().position(|b| *b != 0);
            assert!(
                bad.is_none(),
                "{what}: {len} bytes at {at} said to be zeros, byte {bad:?} is not"
            );
            zero_bytes += len;
        }
    }
    zero_bytes
}

fn exercise(level: Level, disks: usize, name: &str) {
    let f = files(name, disks);
    let cfg = with_workers(config(level, disks, CHUNK_BYTES, MEMBER_BYTES as usize), 2);
    let rt = Runtime::start(&cfg, &f.source).unwrap();
    let size = rt.size_bytes();
    let all = status(&rt);
    assert_eq!(all, vec![(0, size, true, true)], "fresh sparse members: one hole of zeros");

    let mut rng = Rng::new(disks as u64);
    let mut written = 0;
    for i in 0..40 {
        let len = 4096 * (1 + rng.below(24));
        let at = rng.below((size - len) / 4096) * 4096;
        // Some writes are of zeros: allocated, yet zeros.
        let data = if i % 5 == 0 { vec![0; len as usize] } else { pattern(i, len as usize) };
        rt.write_at(at, &data).unwrap();
        written += len;
        if i % 8 == 7 {
            // Checked while writes may still sit in the write-back, then after a flush.
            zeros_read_back(&rt, &format!("{name} after write {i}"));
        }
    }
    rt.flush().unwrap();
    let zeros = zeros_read_back(&rt, &format!("{name} flushed"));
    assert!(zeros >= size - 2 * written, "most of the array is still holes: {zeros} of {size}");
    let holes: u64 = status(&rt).iter().filter(|e| e.3).map(|e| e.1).sum();
    assert!(holes > 0 && holes <= zeros, "holes {holes}, zeros {zeros}");

    // Degraded: a failed member's parts are rebuilt from the others, zeros only where they
    // all have holes.
    rt.fail_member_now(1);
    zeros_read_back(&rt, &format!("{name} with member 1 failed"));
    // Writes the failed member misses: their blocks there stay holes on its file.
    for i in 0..16 {
        let at = rng.below(size / 4096 - 4) * 4096;
        rt.write_at(at, &pattern(100 + i, 16384)).unwrap();
    }
    rt.flush().unwrap();
    zeros_read_back(&rt, &format!("{name} written with member 1 failed"));
    if level == Level::Raid6 {
        rt.fail_member_now(3);
        zeros_read_back(&rt, &format!("{name} with members 1 and 3 failed"));
    }

    // A discard of the whole array gives every hole back (whole stripes are punched).
    rt.discard(0, size).unwrap();
    rt.flush().unwrap();
    let after = status(&rt);
    assert_eq!(after, vec![(0, size, true, true)], "{name}: after the discard {after:?}");
    rt.shutdown().unwrap();
    std::fs::remove_dir_all(&f.dir).unwrap();
}

#[test]
fn raid5_status_never_calls_data_zeros() {
    exercise(Level::Raid5, 4, "r5");
}

#[test]
fn raid6_status_never_calls_data_zeros() {
    exercise(Level::Raid6, 6, "r6");
}

/// A write still held by the write-back (not yet on any member) is data at once.
#[test]
fn a_write_held_in_the_stripe_cache_is_data() {
    let f = files("held", 4);
    let cfg = with_workers(config(Level::Raid5, 4, CHUNK_BYTES, MEMBER_BYTES as usize), 1);
    let rt = Runtime::start(&cfg, &f.source).unwrap();
    // A sequential stream: its partial stripes are held for the rest of it.
    for i in 0..8 {
        rt.write_at(i * 8192, &pattern(i, 8192)).unwrap();
        let got = rt.status_at(i * 8192, 8192).unwrap();
        assert!(!got[0].zero, "write {i}: the written blocks read back as data: {got:?}");
    }
    rt.shutdown().unwrap();
    std::fs::remove_dir_all(&f.dir).unwrap();
}
