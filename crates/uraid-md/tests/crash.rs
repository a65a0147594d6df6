//! A crash and the bitmap: the process serving the array is killed with SIGKILL in the middle
//! of writing; the array is assembled again, and the resync covers only the regions the
//! write-intent bitmap marks, a small fraction of the array; nothing acknowledged as flushed
//! is lost, and a check afterwards finds parity consistent everywhere.
//!
//! Method: this test binary runs itself again (the ignored `serving_process` test) as the
//! serving process: it assembles a 6-member RAID6 with a 1 MiB-chunk bitmap, then writes
//! generations of 4 KiB blocks inside the first 2 MiB of each member's data region (about a
//! tenth of the array), flushing after each generation and printing its number only once
//! the flush has completed. The parent reads those lines and kills the child after a few
//! generations, mid-write. Every block must then hold its content from the last
//! acknowledged generation that wrote it, or from a later one that was in flight.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;
use uraid_md::{MdArray, MdOptions};

mod common;
use common::{Rng, make_array, tempdir};

const BITMAP_CHUNK: u32 = 1 << 20;
const BLOCK: u64 = 4096;
const WRITES_PER_GENERATION: u64 = 64;

/// The blocks generation `g` writes (array block numbers), all inside the first 2 MiB of the
/// member data region: array bytes below 2 MiB x 4 data disks.
fn blocks_of(g: u64) -> Vec<u64> {
    let mut rng = Rng(g.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let span = (2 << 20) * 4 / BLOCK;
    (0..WRITES_PER_GENERATION).map(|_| rng.next() % span).collect()
}

/// What generation `g` writes to `block`.
fn content(block: u64, g: u64) -> Vec<u8> {
    let mut v = vec![0u8; BLOCK as usize];
    for (i, chunk) in v.chunks_mut(16).enumerate() {
        chunk[..8].copy_from_slice(&block.to_le_bytes());
        chunk[8..16].copy_from_slice(&(g ^ (i as u64) << 40).to_le_bytes());
    }
    v
}

#[test]
#[ignore = "the serving process of `sigkill_mid_write_then_bitmap_resync`, run by it"]
fn serving_process() {
    let Ok(dir) = std::env::var("URAID_CRASH_DIR") else { return };
    let paths: Vec<PathBuf> =
        (0..6).map(|i| PathBuf::from(&dir).join(format!("m{i}.img"))).collect();
    let md = MdArray::assemble(&paths, &MdOptions::default()).unwrap();
    let rt = md.runtime();
    for g in 1.. {
        for b in blocks_of(g) {
            rt.write_at(b * BLOCK, &content(b, g)).unwrap();
        }
        rt.flush().unwrap();
        println!("flushed {g}");
    }
}

#[test]
fn sigkill_mid_write_then_bitmap_resync() {
    let dir = tempdir("crash");
    let paths = make_array(dir.path(), 6, Some(BITMAP_CHUNK));
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "serving_process", "--nocapture", "--test-threads=1"])
        .env("URAID_CRASH_DIR", dir.path())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut acked = 0;
    while acked < 20 {
        let line = lines.next().expect("the serving process ended early").unwrap();
        if let Some(g) = line.strip_prefix("flushed ") {
            acked = g.trim().parse().unwrap();
        }
    }
    // Mid-write: it is writing generation acked + 1 now.
    std::thread::sleep(Duration::from_millis(3));
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    // Lines printed before the kill are acknowledged too.
    for line in lines.map_while(Result::ok) {
        if let Some(g) = line.strip_prefix("flushed ") {
            acked = acked.max(g.trim().parse().unwrap());
        }
    }
    let sb = common::superblock(&paths[0]);
    assert!(!sb.is_clean(), "killed while active: the superblock says dirty");

    let md = MdArray::assemble(&paths, &MdOptions::default()).unwrap();
    let resync = md.wait_sync_idle(Duration::from_secs(60)).expect("a resync ran");
    assert_eq!((resync.action.as_str(), resync.outcome.as_str()), ("resync", "done"));
    let member_sectors = md.info().member_sectors;
    eprintln!(
        "resync after SIGKILL: {} member sectors of {member_sectors} ({:.1}%), {} array bytes, \
         {:.3} s; {acked} generations acknowledged",
        resync.sectors,
        resync.sectors as f64 * 100.0 / member_sectors as f64,
        resync.array_bytes,
        resync.seconds
    );
    assert!(resync.sectors > 0, "the regions being written are resynced");
    assert!(resync.sectors <= 2 * 2048, "only the dirty bitmap chunks (2 of 1 MiB)");
    assert!(resync.sectors * 5 < member_sectors, "a small fraction of the array");

    // Every block: its last acknowledged content, or a later in-flight one.
    let rt = md.runtime();
    let mut last: std::collections::HashMap<u64, u64> = std::collections::HashMap::new();
    for g in 1..=acked + 1 {
        for b in blocks_of(g) {
            if g <= acked {
                last.insert(b, g);
            }
        }
    }
    let later: Vec<Vec<u64>> = (acked + 1..=acked + 2).map(blocks_of).collect();
    for (&b, &g) in &last {
        let got = rt.read_at(b * BLOCK, BLOCK as usize).unwrap();
        let ok = got == content(b, g)
            || (acked + 1..=acked + 2)
                .zip(&later)
                .any(|(lg, blocks)| blocks.contains(&b) && got == content(b, lg));
        assert!(ok, "block {b}: acknowledged generation {g} lost");
    }
    md.scrub(false).unwrap();
    let check = md.wait_sync_idle(Duration::from_secs(60)).unwrap();
    assert_eq!(check.action, "check");
    assert_eq!(check.mismatch_sectors, 0, "parity consistent after the bitmap resync");
    md.stop().unwrap();
    assert!(common::superblock(&paths[0]).is_clean());
}
