//! Goal: `uraid idle` stops a running check where it is (md's sync_action idle), says what it
//! covered, and leaves the array free for the next action; it refuses to stop a recovery and
//! is no error when nothing runs. `uraid freeze` (md's "frozen") pauses the recovery, and idle
//! thaws it.
//!
//! Method: the built `uraid` binary serving a RAID6 of four 64 MiB files, its sync speed held
//! at 2 MiB/s a member so that a check or recovery is still running when idle comes.

mod serve_common;

use serve_common::{
    Served, corrupt, create_raid6, detail, member_files, tempdir, text, uraid, uraid_ok,
};

#[test]
fn idle_stops_a_check_but_not_a_recovery() {
    let dir = tempdir("idle");
    let files = member_files(&dir, 5, 64);
    let (members, spare) = (&files[..4], files[4].to_str().unwrap());
    create_raid6("idl", members);
    let served = Served::start(&dir, "idl", members);
    let out = uraid_ok(&dir, &["idle", "idl"]);
    assert_eq!(out, "idl: idle already: no check or repair is running\n");

    uraid_ok(&dir, &["sync-speed", "idl", "--min", "1000", "--max", "2000"]);
    uraid_ok(&dir, &["check", "idl"]);
    running(&dir, "check");
    let out = uraid_ok(&dir, &["idle", "idl"]);
    assert!(out.starts_with("idl: stopping a check\nidl: check interrupted: "), "{out}");
    let status = detail(&dir, "idl");
    assert!(status["sync"].is_null(), "still running: {status}");
    assert_eq!(status["last_sync"]["outcome"], "interrupted");
    let covered = status["last_sync"]["sectors"].as_u64().unwrap();
    assert!(covered < 131_072 - 2048, "a 64 MiB member checked whole at 2 MiB/s: {covered}");
    // Free again: a check starts (and is stopped at once, queued or running, for the
    // recovery below).
    uraid_ok(&dir, &["check", "idl"]);
    let out = uraid_ok(&dir, &["idle", "idl"]);
    let stopped = ["idl: stopping a check\n", "idl: dropped the queued check or repair\n"];
    assert!(stopped.iter().any(|s| out.starts_with(s)), "{out}");
    let start = std::time::Instant::now();
    while detail(&dir, "idl")["sync"].is_object() {
        assert!(start.elapsed().as_secs() < 30, "the check did not stop");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }

    uraid_ok(&dir, &["fail", "idl", "1"]);
    uraid_ok(&dir, &["add", "idl", spare]);
    // Queued or running, the recovery is refused (asked at once, it may not have started).
    let out = uraid(&dir, &["idle", "idl"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("the recovery of slot 1 is "), "{stderr}");
    assert!(stderr.contains(": idle stops only a check or a repair"), "{stderr}");
    running(&dir, "recover");
    let out = uraid(&dir, &["idle", "idl"]);
    let stderr = text(&out.stderr);
    assert!(stderr.contains("the recovery of slot 1 is running: idle stops only"), "{stderr}");
    assert_eq!(detail(&dir, "idl")["sync"]["action"], "recover");
    // md's "frozen" pauses it; idle thaws, and it goes on.
    let out = uraid_ok(&dir, &["freeze", "idl"]);
    assert_eq!(out, "idl: frozen: stopping the recovery of slot 1 (it goes on when thawed)\n");
    let start = std::time::Instant::now();
    while detail(&dir, "idl")["sync"].is_object() {
        assert!(start.elapsed().as_secs() < 30, "the recovery did not stop");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let status = detail(&dir, "idl");
    assert_eq!(status["frozen"], true, "{status}");
    assert!(status["state"].as_str().unwrap().ends_with("degraded, frozen"), "{status}");
    let out = uraid(&dir, &["wait", "idl"]);
    assert_eq!(out.status.code(), Some(1), "nothing runs: {}", text(&out.stdout));
    let out = uraid_ok(&dir, &["idle", "idl"]);
    assert_eq!(out, "idl: thawed: the recovery of slot 1 starts\n");
    running(&dir, "recover");
    uraid_ok(&dir, &["stop", "idl"]);
    served.wait(std::time::Duration::from_secs(60));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Waits until the array runs `action` (a queued one starts a moment later).
fn running(dir: &std::path::Path, action: &str) {
    let start = std::time::Instant::now();
    while detail(dir, "idl")["sync"]["action"] != action {
        assert!(start.elapsed().as_secs() < 30, "no {action} running");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn wait_follows_a_recovery_queued_by_add_to_its_end() {
    let dir = tempdir("wait");
    let files = member_files(&dir, 5, 64);
    let (members, spare) = (&files[..4], files[4].to_str().unwrap());
    create_raid6("wt", members);
    let served = Served::start(&dir, "wt", members);
    // Nothing to wait for: mdadm --wait's failure.
    let out = uraid(&dir, &["wait", "wt"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stdout),
        "wt: nothing to wait for (no resync, recovery, check or repair)\n"
    );
    // About 3 s of recovery at 20 MB/s a member; waited for from the moment add returns.
    uraid_ok(&dir, &["sync-speed", "wt", "--min", "1000", "--max", "20000"]);
    uraid_ok(&dir, &["fail", "wt", "2"]);
    uraid_ok(&dir, &["add", "wt", spare]);
    let out = uraid_ok(&dir, &["wait", "wt"]);
    assert!(out.starts_with("wt: recover done: "), "{out}");
    let status = detail(&dir, "wt");
    assert!(status["sync"].is_null() && status["degraded"] == false, "{status}");
    assert_eq!(uraid(&dir, &["wait", "wt", "nosuch"]).status.code(), Some(1));
    uraid_ok(&dir, &["stop", "wt"]);
    served.wait(std::time::Duration::from_secs(60));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_check_of_part_of_each_member_finds_that_parts_mismatches_only() {
    let dir = tempdir("scrub-span");
    let members = member_files(&dir, 4, 64);
    create_raid6("sp", &members);
    corrupt(&members[1], 1 << 20);
    corrupt(&members[2], 40 << 20);
    let served = Served::start(&dir, "sp", &members);
    let check = |args: &[&str]| -> serde_json::Value {
        let out = uraid_ok(&dir, &[&["check", "--wait", "--json"][..], args, &["sp"]].concat());
        serde_json::from_str(&out).unwrap()
    };
    // The first 32 MiB of each member (md's sync_max), then the rest (its sync_min).
    let first = check(&["--to", "32M"]);
    assert_eq!((first["sectors"].as_u64(), first["from_sector"].as_u64()), (Some(65536), Some(0)));
    assert_eq!(first["mismatch_sectors"], 8, "{first}");
    assert_eq!(first["mismatches"][0]["member_sector"], 2048, "{first}");
    let rest = check(&["--from", "65536s"]);
    assert_eq!(rest["from_sector"], 65536, "{rest}");
    assert_eq!(rest["sectors"], 129_024 - 65536, "to the members' end: {rest}");
    assert_eq!(rest["mismatches"][0]["member_sector"], 81920, "{rest}");
    // Rounded out to whole chunks (128 sectors); nothing left is refused, saying why.
    let chunk = uraid_ok(&dir, &["check", "--wait", "--from", "100s", "--to", "129s", "sp"]);
    assert!(chunk.starts_with("sp: check done: 0 mismatched sectors in 256 sectors, "), "{chunk}");
    let out = uraid(&dir, &["check", "--from", "63M", "sp"]);
    let err = text(&out.stderr);
    assert!(err.contains("nothing of the 129024 sectors a member holds"), "{err}");
    let part = uraid_ok(&dir, &["check", "--wait", "--from", "40M", "--to", "41M", "sp"]);
    assert!(part.contains("in 2048 sectors from member sector 81920"), "{part}");
    uraid_ok(&dir, &["stop", "sp"]);
    served.wait(std::time::Duration::from_secs(60));
    let _ = std::fs::remove_dir_all(&dir);
}
