//! A crash of the real server: `uraid serve` is killed with SIGKILL while an NBD client is in
//! the middle of writing; `uraid serve` on the same members then resyncs, from the
//! write-intent bitmap, only the regions that were being written, and says how much.
//!
//! Goal: nothing the client saw acknowledged by a flush is lost (every block holds the last
//! flushed generation that wrote it, or a later one that was in flight); the resync covers a
//! small fraction of the array and is reported by `uraid detail`; `uraid check` then finds
//! parity consistent everywhere.
//!
//! Method: RAID6 x6 on 24 MiB files with a 1 MiB-chunk bitmap. The client writes generations of
//! 64 random 4 KiB blocks in the first 8 MiB of the array (the first 2 MiB of each member,
//! about a tenth of it), flushing after each; after 20 flushed generations a writer thread
//! keeps writing unflushed generations and the server is killed under it.

mod serve_common;

use serve_common::*;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

const BLOCK: u64 = 4096;
const WRITES_PER_GENERATION: u64 = 64;
const SPAN_BLOCKS: u64 = (8 << 20) / BLOCK;

fn blocks_of(g: u64) -> Vec<u64> {
    let mut rng = Rng(g.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    (0..WRITES_PER_GENERATION).map(|_| rng.next() % SPAN_BLOCKS).collect()
}

#[test]
fn sigkill_mid_write_then_serve_again_resyncs_only_the_bitmap() {
    let dir = tempdir("crash");
    let members = member_files(&dir, 6, 24);
    create_raid6("crash", &members);
    let server = Served::start_on(&dir, "crash", &members, &dir.join("nbd.sock"));
    let mut c = server.client();
    for g in 1..=20 {
        for b in blocks_of(g) {
            c.write(b * BLOCK, &content(b, g, BLOCK as usize), false).unwrap();
        }
        c.flush().unwrap();
    }
    let flushed = 20;
    // Unflushed generations in flight when the server dies; the writer stops at the first
    // error (the connection is gone).
    let started = Arc::new(AtomicU64::new(flushed));
    let writer = {
        let started = Arc::clone(&started);
        std::thread::spawn(move || {
            for g in flushed + 1.. {
                started.store(g, Ordering::SeqCst);
                for b in blocks_of(g) {
                    if c.write(b * BLOCK, &content(b, g, BLOCK as usize), false).is_err() {
                        return;
                    }
                }
            }
        })
    };
    while started.load(Ordering::SeqCst) < flushed + 3 {
        std::thread::sleep(Duration::from_millis(1));
    }
    server.signal("KILL");
    let killed = server.wait(Duration::from_secs(10));
    assert!(!killed.success(), "SIGKILL ends the server");
    writer.join().unwrap();
    let last_started = started.load(Ordering::SeqCst);
    assert_eq!(examine_state(&members[0]), "active", "a killed server leaves the array dirty");
    let records = examine_field(&members[0], "Log Records");
    assert!(records.contains("generation headers"), "the killed run's log is there: {records}");

    // The killed server's socket file is still there: replaced (refused before: in use).
    assert!(dir.join("nbd.sock").exists(), "the killed server's socket file");
    let server = Served::start_on(&dir, "crash", &members, &dir.join("nbd.sock"));
    let resync = wait_last_sync(&dir, "crash");
    assert_eq!(resync["action"], "resync", "{resync:#}");
    assert_eq!(resync["outcome"], "done", "{resync:#}");
    let member_sectors = detail(&dir, "crash")["component_size_bytes"].as_u64().unwrap() / 512;
    let sectors = resync["sectors"].as_u64().unwrap();
    println!(
        "bitmap resync after SIGKILL: {sectors} of {member_sectors} member sectors ({:.1}%), \
         {} bytes of array data, {:.2} s",
        100.0 * sectors as f64 / member_sectors as f64,
        resync["array_bytes"],
        resync["seconds"].as_f64().unwrap()
    );
    assert!(sectors > 0, "the regions being written are resynced");
    assert!(sectors * 5 < member_sectors, "the bitmap limits the resync: {resync:#}");

    let mut c = server.client();
    for b in 0..SPAN_BLOCKS {
        let data = c.read(b * BLOCK, BLOCK as u32).unwrap();
        let got = generation_of(b, &data).unwrap_or_else(|| panic!("block {b} holds garbage"));
        let want = (1..=flushed).rev().find(|&g| blocks_of(g).contains(&b)).unwrap_or(0);
        let in_flight = (flushed + 1..=last_started).any(|g| g == got && blocks_of(g).contains(&b));
        assert!(got == want || in_flight, "block {b}: gen {got}, flushed gen {want} lost");
    }
    c.disconnect().unwrap();
    let check: serde_json::Value =
        serde_json::from_str(&uraid_ok(&dir, &["check", "--wait", "--json", "crash"])).unwrap();
    assert_eq!(check["mismatch_sectors"], 0, "{check:#}");
    uraid_ok(&dir, &["stop", "crash"]);
    assert!(server.wait(Duration::from_secs(30)).success());
    assert_eq!(examine_state(&members[0]), "clean");
    assert_eq!(examine_field(&members[0], "Log Records"), "none", "a clean stop clears it");
    let _ = std::fs::remove_dir_all(&dir);
}

fn examine_state(member: &std::path::Path) -> String {
    examine_field(member, "State")
}

fn examine_field(member: &std::path::Path, key: &str) -> String {
    let out = std::process::Command::new(BIN).args(["examine", "--json"]).arg(member).output();
    let out = out.unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v[0]["fields"][key].as_str().unwrap_or_else(|| panic!("no {key}: {v:#}")).to_owned()
}

/// Waits for the resync the assembly queued to finish; its result.
fn wait_last_sync(dir: &std::path::Path, name: &str) -> serde_json::Value {
    let start = std::time::Instant::now();
    loop {
        let d = detail(dir, name);
        if d["sync"].is_null() && !d["last_sync"].is_null() {
            return d["last_sync"].clone();
        }
        assert!(start.elapsed() < Duration::from_secs(60), "no resync result: {d:#}");
        std::thread::sleep(Duration::from_millis(50));
    }
}
