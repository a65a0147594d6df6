//! `uraid serve` driven as an operator drives it: the server in its own process, an NBD client
//! writing and verifying data, and the verbs (status, detail, fail, remove, add, check, stop)
//! run as separate `uraid` commands against its control socket.
//!
//! Goal: a RAID6 served over NBD loses a member to `uraid fail` while a client writes; `uraid
//! add` puts a spare in and the rebuild runs while the client keeps writing; every byte reads
//! back; `uraid check --wait` finds 0 mismatches; `uraid stop` drains, marks the superblocks
//! clean and the server exits 0; served again, the data is still there, and SIGTERM stops it
//! cleanly too. Bad starts (a member of another array, a port in use, members already being
//! served) fail with a clear message and leave the members as they were.

mod serve_common;

use serve_common::*;
use std::collections::HashMap;
use std::net::TcpListener;
use std::process::Command;
use std::time::{Duration, Instant};

const BLOCK: u64 = 4096;

/// The generation each written 4 KiB block must hold.
type Model = HashMap<u64, u64>;

/// Writes `count` random 8 KiB runs of generation `g` in the first `span` blocks.
fn write_random(c: &mut uraid_nbd::client::Client, model: &mut Model, g: u64, count: u64) {
    let span = c.size_bytes() / BLOCK - 1;
    let mut rng = Rng(g.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    for _ in 0..count {
        let block = rng.next() % span;
        c.write(block * BLOCK, &content(block, g, 2 * BLOCK as usize), false).unwrap();
        model.insert(block, g);
        model.insert(block + 1, g);
    }
    c.flush().unwrap();
}

fn verify(c: &mut uraid_nbd::client::Client, model: &Model) {
    for (&block, &g) in model {
        let data = c.read(block * BLOCK, BLOCK as u32).unwrap();
        assert_eq!(generation_of(block, &data), Some(g), "block {block} should hold gen {g}");
    }
}

/// Polls `uraid detail` until `done` says so.
fn wait_for(
    dir: &std::path::Path,
    name: &str,
    what: &str,
    done: impl Fn(&serde_json::Value) -> bool,
) {
    let start = Instant::now();
    loop {
        let d = detail(dir, name);
        if done(&d) {
            return;
        }
        assert!(start.elapsed() < Duration::from_secs(120), "waiting for {what}: {d:#}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn examine_field(member: &std::path::Path, key: &str) -> String {
    let out = Command::new(BIN).args(["examine", "--json"]).arg(member).output().unwrap();
    assert!(out.status.success(), "examine: {}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v[0]["fields"][key].as_str().unwrap().to_owned()
}

/// The running array's counters, asked by name, with slot 2's device failed.
fn stats_with_slot_2_failed(dir: &std::path::Path) {
    let stats: uraid_io::StatsReport =
        serde_json::from_str(&uraid_ok(dir, &["stats", "--json", "verbs"])).unwrap();
    assert_eq!(stats.members.len(), 6, "{stats:?}");
    assert!(stats.members[2].failed && !stats.members[1].failed, "{stats:?}");
    assert!(stats.members.iter().all(|m| m.io.write_bytes > 0), "{stats:?}");
    assert!(stats.engine.stripe_writes_full + stats.engine.stripe_writes_rmw > 0, "{stats:?}");
    assert!(stats.cache.stripe_cache_size > 0, "{stats:?}");
    // The NBD server's counters: the one client, connected, and what it wrote.
    let nbd = stats.nbd.expect("the NBD server's counters");
    assert_eq!((nbd.connections_active, nbd.connections_max), (1, Some(64)), "{nbd:?}");
    assert!(nbd.writes >= 400 && nbd.written_bytes >= 400 * 4096, "{nbd:?}");
    let table = uraid_ok(dir, &["stats", "verbs"]);
    // Its device failed and left the slot (md lists it faulty, outside the slots).
    assert!(table.contains("   2  missing (failed)"), "{table}");
    assert!(
        table.contains("nbd connections: open 1 (limit 64)  accepted 1  turned away"),
        "{table}"
    );
}

/// `status --watch` follows a running action through the array's control socket, by the
/// name it is served as (it took md's name, "host:verbs", and found no socket).
fn watch_a_check(dir: &std::path::Path) {
    uraid_ok(dir, &["sync-speed", "verbs", "--max", "4M"]);
    uraid_ok(dir, &["check", "verbs"]);
    wait_for(dir, "verbs", "the check to run", |d| !d["sync"].is_null());
    let watched = uraid_ok(dir, &["status", "--watch"]);
    assert!(watched.contains("verbs: check done"), "{watched}");
    uraid_ok(dir, &["sync-speed", "verbs", "--max", "200M"]);
}

#[test]
fn verbs_drive_a_served_array_through_failure_rebuild_check_and_stop() {
    let dir = tempdir("verbs");
    let mut members = member_files(&dir, 7, 24);
    let spare = members.pop().unwrap();
    // md's names are "host:name"; the verbs take the name it is served as.
    create_raid6("host:verbs", &members);
    let server = Served::start(&dir, "verbs", &members);
    let mut c = server.client();
    let mut model = Model::new();
    write_random(&mut c, &mut model, 1, 400);
    assert!(uraid_ok(&dir, &["status"]).contains("verbs : active raid6"));
    assert!(uraid_ok(&dir, &["detail", "verbs"]).contains("              Name : host:verbs\n"));

    let failed = members[2].to_str().unwrap();
    uraid_ok(&dir, &["fail", "verbs", failed]);
    assert_eq!(detail(&dir, "verbs")["degraded"], true);
    stats_with_slot_2_failed(&dir);
    write_random(&mut c, &mut model, 2, 200);
    verify(&mut c, &model);
    uraid_ok(&dir, &["remove", "verbs", failed]);
    uraid_ok(&dir, &["add", "verbs", spare.to_str().unwrap()]);
    // The client keeps writing while the spare is rebuilt.
    let mut g = 3;
    while detail(&dir, "verbs")["degraded"] == true {
        write_random(&mut c, &mut model, g, 20);
        g += 1;
        assert!(g < 5000, "the rebuild does not finish: {:#}", detail(&dir, "verbs"));
    }
    wait_for(&dir, "verbs", "the rebuild", |d| d["sync"].is_null() && d["degraded"] == false);
    verify(&mut c, &model);

    let check: serde_json::Value =
        serde_json::from_str(&uraid_ok(&dir, &["check", "--wait", "--json", "verbs"])).unwrap();
    assert_eq!(check["outcome"], "done", "{check:#}");
    assert_eq!(check["mismatch_sectors"], 0, "{check:#}");
    watch_a_check(&dir);
    c.disconnect().unwrap();

    let stopped = uraid_ok(&dir, &["stop", "verbs"]);
    assert!(stopped.contains("stopped clean"), "{stopped}");
    assert!(server.wait(Duration::from_secs(30)).success());
    let mut now = members.clone();
    now[2] = spare.clone();
    for m in &now {
        assert_eq!(examine_field(m, "State"), "clean", "{}", m.display());
    }
    assert_eq!(examine_field(&spare, "Device Role"), "Active device 2");

    // Served again, the failed member given too: the data survived the stop, the stale
    // member is left out and said to be; SIGTERM stops it cleanly as well.
    let mut given = now.clone();
    given.push(members[2].clone());
    let server = Served::start(&dir, "verbs", &given);
    let mut c = server.client();
    verify(&mut c, &model);
    c.disconnect().unwrap();
    server.signal("TERM");
    let log = server.log.clone();
    assert!(server.wait(Duration::from_secs(30)).success());
    let log = std::fs::read_to_string(log).unwrap();
    assert!(log.contains("SIGTERM: stopping cleanly") && log.contains("stopped clean"), "{log}");
    assert!(log.contains(&format!("left out {failed} (stale: events")), "{log}");
    assert!(!log.contains("state "), "a whole array starts quietly: {log}");
    assert_eq!(examine_field(&now[0], "State"), "clean");

    // Started degraded, it says so at once.
    let server = Served::start(&dir, "verbs", &now[1..]);
    let mut c = server.client();
    verify(&mut c, &model);
    c.disconnect().unwrap();
    uraid_ok(&dir, &["stop", "verbs"]);
    let log = server.log.clone();
    assert!(server.wait(Duration::from_secs(30)).success());
    let log = std::fs::read_to_string(log).unwrap();
    assert!(log.contains("state active, degraded"), "{log}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The first 8 KiB of each member (superblock and bitmap), to see that nothing was written.
fn metadata_of(members: &[std::path::PathBuf]) -> Vec<Vec<u8>> {
    members.iter().map(|m| std::fs::read(m).unwrap()[..8192].to_vec()).collect()
}

/// Nothing to serve on, or a Unix socket path that cannot be bound (too long, in no
/// directory): refused before the array starts (each came up, bumped its events and stopped
/// again). The path refused leaves no socket file.
#[test]
fn unservable_listeners_are_refused_before_the_array_starts() {
    let dir = tempdir("unservable");
    let a = member_files(&dir.join("a").tap_mkdir(), 4, 8);
    create_raid6("a", &a);
    let before = metadata_of(&a);
    let long = dir.join("s".repeat(120));
    for (extra, says) in [
        (vec!["--no-tcp"], "nothing to serve on"),
        (vec!["--no-tcp", "--unix", long.to_str().unwrap()], "at most 107 bytes"),
        (
            vec!["--no-tcp", "--unix", "/nonexistent/x.sock"],
            "cannot serve NBD on /nonexistent/x.sock",
        ),
    ] {
        let mut args = vec!["serve"];
        args.extend(extra);
        args.extend(a.iter().map(|p| p.to_str().unwrap()));
        let err = text(&uraid(&dir, &args).stderr);
        assert!(err.contains(says), "{err}");
        assert!(metadata_of(&a) == before, "a refused serve wrote to a member: {err}");
    }
    assert!(!long.exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_starts_fail_clearly_and_leave_the_members_as_they_were() {
    let dir = tempdir("bad");
    let a = member_files(&dir.join("a").tap_mkdir(), 4, 8);
    let b = member_files(&dir.join("b").tap_mkdir(), 4, 8);
    create_raid6("a", &a);
    create_raid6("b", &b);

    // A member of another array.
    let mixed = [a[0].clone(), a[1].clone(), a[2].clone(), b[3].clone()];
    let before = metadata_of(&mixed);
    let socket = dir.join("x.sock");
    let mut args = vec!["serve", "--no-tcp", "--unix", socket.to_str().unwrap()];
    args.extend(mixed.iter().map(|p| p.to_str().unwrap()));
    let out = uraid(&dir, &args);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(err.contains(b[3].to_str().unwrap()), "the refusal names the member: {err}");
    assert_eq!(metadata_of(&mixed), before, "a refused serve wrote to a member");
    assert!(!socket.exists(), "the socket bound before the refusal is left behind");

    // A consistency policy uraid does not run (journal: md's, with a journal device).
    let before = metadata_of(&a);
    let mut args = vec!["serve", "--consistency-policy", "journal"];
    args.extend(a.iter().map(|p| p.to_str().unwrap()));
    let out = uraid(&dir, &args);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(err.contains("invalid value 'journal'") && err.contains("ppl, resync"), "{err}");
    assert_eq!(metadata_of(&a), before, "a refused serve wrote to a member");

    // A TCP port already taken (a second array on the default port): refused before the
    // array starts (it used to come up, bump its events and stop again).
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let mut args = vec!["serve", "--listen", &addr];
    args.extend(a.iter().map(|p| p.to_str().unwrap()));
    let out = uraid(&dir, &args);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(err.contains("cannot serve NBD on") && err.contains(&addr), "{err}");
    assert!(err.contains("another server there?"), "{err}");
    assert!(metadata_of(&a) == before, "a refused serve wrote to a member");
    assert_eq!(examine_field(&a[0], "State"), "clean", "{err}");
    // A malformed address is said to be one (it was asked whether another server was there).
    let mut args = vec!["serve", "--listen", "nonsense"];
    args.extend(a.iter().map(|p| p.to_str().unwrap()));
    let err = text(&uraid(&dir, &args).stderr);
    assert!(err.contains("--listen takes ADDRESS:PORT") && !err.contains("another"), "{err}");
    assert!(metadata_of(&a) == before, "a refused serve wrote to a member");

    // The same members served twice: the second is refused before touching them.
    let first = Served::start(&dir, "a", &a);
    let before = metadata_of(&a);
    let mut args = vec!["serve", "--no-tcp", "--unix"];
    let other = dir.join("other.sock");
    args.push(other.to_str().unwrap());
    args.extend(a.iter().map(|p| p.to_str().unwrap()));
    let out = uraid(&dir, &args);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("in use"), "{}", text(&out.stderr));
    assert_eq!(metadata_of(&a), before, "the second serve wrote to a member");
    // Nor may create, even with --force, write new superblocks under the running array.
    let mut args = vec!["create", "--force", "-l", "6", "-n", "4", "-c", "64K"];
    args.extend(a.iter().map(|p| p.to_str().unwrap()));
    let out = uraid(&dir, &args);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(err.contains("is in use: a running uraid serve holds it"), "{err}");
    assert_eq!(metadata_of(&a), before, "create wrote to a served member");
    first.signal("INT");
    assert!(first.wait(Duration::from_secs(30)).success());
    assert_eq!(examine_field(&a[0], "State"), "clean");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn refused_options_and_a_member_given_twice_write_nothing() {
    let dir = tempdir("refused");
    let a = member_files(&dir.join("a").tap_mkdir(), 4, 8);
    create_raid6("a", &a);
    let before = metadata_of(&a);

    // Engine options it refuses: refused before the superblocks say "active" (a failed start
    // once left a clean array needing a resync, and a degraded one needing --force).
    let bad_options = [
        ["--stripe-size", "3K"],
        ["--stripe-size", "128K"],
        // Bytes to md's sysfs, KiB to mdadm: ambiguous, so refused (was 4 MiB).
        ["--stripe-size", "4096"],
        ["--stripe-cache-size", "0"],
        // Past md's largest: it was allocated until the machine ran out of memory.
        ["--stripe-cache-size", "100000000"],
        // Silently one worker, before.
        ["--workers", "0"],
    ];
    for bad in bad_options {
        // A path that binds: the refusal must come from the members.
        let never = dir.join("never-x.sock");
        let mut args = vec!["serve", "--no-tcp", "--unix", never.to_str().unwrap()];
        args.extend(bad);
        args.extend(a.iter().map(|p| p.to_str().unwrap()));
        let out = uraid(&dir, &args);
        assert!(!out.status.success());
        let err = text(&out.stderr);
        assert!(err.contains(&bad[0][2..].replace('-', "_")) || err.contains(bad[0]), "{err}");
        assert!(metadata_of(&a) == before, "a refused serve wrote to a member: {bad:?}");
    }

    // One member given twice, by a second path to it (a symlink).
    let link = dir.join("link-to-a1");
    let _ = std::fs::remove_file(&link); // left by an earlier run
    std::os::unix::fs::symlink(&a[1], &link).unwrap();
    let twice = [a[0].clone(), a[1].clone(), a[2].clone(), link.clone()];
    // A path that binds: the refusal must come from the members.
    let never = dir.join("never-x.sock");
    let mut args = vec!["serve", "--no-tcp", "--unix", never.to_str().unwrap()];
    args.extend(twice.iter().map(|p| p.to_str().unwrap()));
    let out = uraid(&dir, &args);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(err.contains("are the same file") && err.contains(link.to_str().unwrap()), "{err}");
    assert_eq!(metadata_of(&a), before, "a refused serve wrote to a member");

    // A second array with the same name (both created with the default one) while the first
    // is served: refused before its superblocks say "active", naming --name.
    let b = member_files(&dir.join("b").tap_mkdir(), 4, 8);
    create_raid6("a", &b);
    let b_before = metadata_of(&b);
    let served = Served::start_with(&dir, "a", &a, &dir.join("a.sock"), &["--workers", "2"]);
    // The bitmap's array runs one worker, and says so.
    let said = "engine workers: 1, not 2: the write-intent bitmap's updates take one";
    assert!(served.log_text().contains(said), "{}", served.log_text());
    // A path that binds: the refusal must come from the members.
    let never = dir.join("never-y.sock");
    let mut args = vec!["serve", "--no-tcp", "--unix", never.to_str().unwrap()];
    args.extend(b.iter().map(|p| p.to_str().unwrap()));
    let out = uraid(&dir, &args);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(err.contains("an array named a is already served") && err.contains("--name"), "{err}");
    assert!(metadata_of(&b) == b_before, "the refused serve wrote to a member");
    // Reading the served array's contents from its members would read them torn: refused
    // (the plan alone, which reads only superblocks, is still shown).
    let out_path = dir.join("contents.img");
    let mut args = vec!["assemble", "-o", out_path.to_str().unwrap()];
    args.extend(a.iter().map(|p| p.to_str().unwrap()));
    let out = uraid(&dir, &args);
    let err = text(&out.stderr);
    assert!(!out.status.success() && err.contains("is in use: a running uraid serve"), "{err}");
    assert!(!out_path.exists(), "no contents written");
    let mut args = vec!["build", "-l", "6", "-n", "4", "-c", "64K", "--data-offset", "1M", "-o"];
    args.push(out_path.to_str().unwrap());
    args.extend(a.iter().map(|p| p.to_str().unwrap()));
    let out = uraid(&dir, &args);
    let err = text(&out.stderr);
    assert!(!out.status.success() && err.contains("is in use: a running uraid serve"), "{err}");
    assert!(!out_path.exists(), "no contents written");
    let mut args = vec!["assemble"];
    args.extend(a.iter().map(|p| p.to_str().unwrap()));
    assert!(uraid(&dir, &args).status.success(), "the plan of a served array");
    drop(served);

    let _ = std::fs::remove_dir_all(&dir);
}

trait TapMkdir {
    fn tap_mkdir(self) -> Self;
}

impl TapMkdir for std::path::PathBuf {
    fn tap_mkdir(self) -> Self {
        std::fs::create_dir_all(&self).unwrap();
        self
    }
}

/// SIGTERM with writes in flight: every write the server acknowledges before it closes the
/// connection is on the array when it is served again (drained, then flushed by the stop).
#[test]
fn sigterm_drains_pipelined_writes_and_keeps_every_acknowledged_one() {
    const WRITE: u64 = 64 << 10;
    let dir = tempdir("drain");
    let members = member_files(&dir, 5, 24);
    create_raid6("drain", &members);
    let server = Served::start(&dir, "drain", &members);
    let mut c = server.client();
    let count = (c.size_bytes() / WRITE).min(512);
    let mut handles = HashMap::new();
    for i in 0..count {
        let block = i * WRITE / BLOCK;
        let h = c.send(
            uraid_nbd::wire::CMD_WRITE,
            0,
            i * WRITE,
            WRITE as u32,
            &content(block, 7, WRITE as usize),
        );
        let Ok(h) = h else { break };
        handles.insert(h, i);
        if i == count / 4 {
            server.signal("TERM");
        }
    }
    let mut acknowledged = Vec::new();
    while let Ok(reply) = c.receive() {
        assert_eq!(reply.error, 0, "a drained write failed");
        acknowledged.push(handles[&reply.handle]);
    }
    assert!(server.wait(Duration::from_secs(60)).success());
    assert!(!acknowledged.is_empty(), "some writes were answered before the close");
    println!("{} of {count} pipelined writes acknowledged before the close", acknowledged.len());

    let server = Served::start(&dir, "drain", &members);
    let mut c = server.client();
    for i in acknowledged {
        let data = c.read(i * WRITE, WRITE as u32).unwrap();
        assert!(
            data == content(i * WRITE / BLOCK, 7, WRITE as usize),
            "acknowledged write {i} lost"
        );
    }
    c.disconnect().unwrap();
    server.signal("INT");
    assert!(server.wait(Duration::from_secs(30)).success());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Its output gone (both pipes' readers closed, as when a log pipe's reader dies or the
/// output went to `| head`), serve goes on serving and still stops cleanly on a signal. Before,
/// eprintln! panicked on EPIPE in the signal thread at its first message: SIGTERM went
/// unheard and the process ran on until killed. The signal here is SIGHUP, which a serve
/// gets with its output gone when its terminal or ssh session closes: it killed the process
/// before (the array left dirty), and stops it cleanly now.
#[test]
fn with_its_output_pipes_closed_serve_still_stops_cleanly_on_sighup() {
    let dir = tempdir("closed-pipes");
    let members = member_files(&dir, 4, 24);
    create_raid6("pipes", &members);
    let socket = dir.join("nbd.sock");
    let mut child = Command::new(BIN)
        .args(["serve", "--no-tcp", "--name", "pipes", "--unix"])
        .arg(&socket)
        .args(&members)
        .env("URAID_RUN_DIR", dir.join("run"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    drop(child.stderr.take());
    let start = Instant::now();
    let mut c = loop {
        if let Ok(c) = uraid_nbd::client::Client::connect_unix(&socket, "uraid") {
            break c;
        }
        assert!(child.try_wait().unwrap().is_none(), "serve exited with its pipes closed");
        assert!(start.elapsed() < Duration::from_secs(60), "serve did not come up");
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut model = Model::new();
    write_random(&mut c, &mut model, 3, 50);
    verify(&mut c, &model);
    c.disconnect().unwrap();
    let pid = child.id().to_string();
    assert!(Command::new("kill").args(["-s", "HUP", &pid]).status().unwrap().success());
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            panic!("serve ignored SIGHUP with its output pipes closed");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status:?}");
    assert_eq!(examine_field(&members[0], "State"), "clean");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Makes files immutable (`chattr +i`: even root cannot open them for writing) until dropped.
struct Immutable(Vec<std::path::PathBuf>);

impl Drop for Immutable {
    fn drop(&mut self) {
        let _ = Command::new("chattr").arg("-i").args(&self.0).status();
    }
}

/// `serve --read-only` (md's --readonly) of a crashed array on members that cannot be written:
/// it comes up, reads what was written, says a resync is pending without running one,
/// refuses the client's writes and the verbs that write, stops, and every member file is as
/// it was found. Before the fifth session of 2026-12-06 `--read-only` only refused the
/// client's writes: the array resynced, and members that could not be written were refused.
#[test]
fn read_only_serves_a_crashed_array_and_writes_nothing() {
    let dir = tempdir("read-only");
    let members = member_files(&dir, 4, 24);
    create_raid6("ro", &members);
    let server = Served::start(&dir, "ro", &members);
    let mut c = server.client();
    let mut model = Model::new();
    write_random(&mut c, &mut model, 1, 300);
    c.flush().unwrap();
    server.signal("KILL");
    assert!(!server.wait(Duration::from_secs(30)).success());
    assert_eq!(examine_field(&members[0], "State"), "active", "a crash image");
    let found: Vec<Vec<u8>> = members.iter().map(|m| std::fs::read(m).unwrap()).collect();
    let guard = Immutable(members.clone());
    if Command::new("chattr").arg("+i").args(&members).status().is_ok_and(|s| s.success()) {
        // Served writable, such members are refused, with the way to read them.
        // A path that binds: the refusal must come from the members.
        let never = dir.join("never-x.sock");
        let mut args = vec!["serve", "--no-tcp", "--unix", never.to_str().unwrap()];
        args.extend(members.iter().map(|p| p.to_str().unwrap()));
        let out = uraid(&dir, &args);
        assert!(!out.status.success());
        assert!(text(&out.stderr).contains("serve it with --read-only"), "{out:?}");
    } else {
        eprintln!("chattr +i is not available here: the members stay writable");
    }

    let socket = dir.join("ro.sock");
    let server = Served::start_with(&dir, "ro", &members, &socket, &["--read-only"]);
    let mut c = server.client();
    verify(&mut c, &model);
    assert!(c.write(0, &[7u8; 4096], false).is_err(), "a client's write is refused");
    assert!(uraid_ok(&dir, &["status"]).contains("ro : active (read-only) raid6"));
    assert_eq!(detail(&dir, "ro")["state"], "active, resync pending, read-only");
    let out = uraid(&dir, &["check", "ro"]);
    assert!(!out.status.success() && text(&out.stderr).contains("runs read-only"));
    drop(c);
    assert!(uraid_ok(&dir, &["stop", "ro"]).contains("nothing was written"));
    assert!(server.wait(Duration::from_secs(30)).success());
    drop(guard);
    let now: Vec<Vec<u8>> = members.iter().map(|m| std::fs::read(m).unwrap()).collect();
    assert!(now == found, "a member changed");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--max-connections`: a client past the limit is refused with the reason, the serve log says
/// so, and the place is given again once a client has gone.
#[test]
fn a_client_over_the_connection_limit_is_refused_and_logged() {
    let dir = tempdir("max-connections");
    let members = member_files(&dir, 4, 24);
    create_raid6("limited", &members);
    let socket = dir.join("nbd.sock");
    let server =
        Served::start_with(&dir, "limited", &members, &socket, &["--max-connections", "1"]);
    let first = server.client();
    let refused = uraid_nbd::client::Client::connect_unix(&socket, "uraid");
    let Err(uraid_nbd::client::ClientError::OptionRefused { message, .. }) = refused else {
        panic!("a second client was not refused by policy: {}", server.log_text());
    };
    assert!(message.contains("too many connections"), "{message}");
    first.disconnect().unwrap();
    // The first client's place is freed when its thread has ended.
    let start = Instant::now();
    let mut again = loop {
        match uraid_nbd::client::Client::connect_unix(&socket, "uraid") {
            Ok(c) => break c,
            Err(e) => assert!(start.elapsed() < Duration::from_secs(10), "not served: {e}"),
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut model = Model::new();
    write_random(&mut again, &mut model, 5, 20);
    verify(&mut again, &model);
    again.disconnect().unwrap();
    let log = server.log_text();
    assert!(
        log.contains("limited: turned away 1 NBD client: 1 connection open, the limit"),
        "{log}"
    );
    server.signal("TERM");
    assert!(server.wait(Duration::from_secs(30)).success());
    let _ = std::fs::remove_dir_all(&dir);
}
