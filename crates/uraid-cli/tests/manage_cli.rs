//! Goal: each verb that drives a running array sends the request it should, prints what it
//! should (text and --json), and fails with exit code 1 and a clear message when the array is
//! not running or refuses.
//!
//! Method: the built `uraid` binary against a fake array served in this process by the real
//! `ControlServer`, in a fresh run directory (`URAID_RUN_DIR`) per test. The fake records the
//! requests and answers with canned statuses; a check or repair it is asked for runs for three
//! status polls, then finishes with one mismatch the syndrome pins on slot 2.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use uraid_md::control::{ArrayControl, ControlRequest, ControlResponse, ControlServer, ScrubSpan};
use uraid_md::status::{ArrayStatus, MemberStatus, MismatchAt, SyncResult, SyncStatus};

const POLLS_TO_FINISH: u32 = 3;

#[derive(Default)]
struct FakeState {
    seen: Vec<ControlRequest>,
    /// While an action runs: (action, status polls left before it ends).
    running: Option<(String, u32)>,
    last_sync: Option<SyncResult>,
    speed_kib: (u64, u64),
}

struct FakeArray {
    name: String,
    state: Mutex<FakeState>,
}

impl FakeArray {
    fn status(&self, state: &mut FakeState) -> ArrayStatus {
        let mut sync = None;
        if let Some((action, left)) = state.running.take() {
            if left == 0 {
                state.last_sync = Some(finished(&action));
            } else {
                let done_sectors = u64::from(POLLS_TO_FINISH - left + 1) * 1000;
                sync = Some(SyncStatus {
                    action: action.clone(),
                    done_sectors,
                    total_sectors: 4000,
                    speed_kib: 20_000,
                    eta_seconds: Some(3),
                    throttled: false,
                });
                state.running = Some((action, left - 1));
            }
        }
        let member = |slot: u32, state: &str| MemberStatus {
            slot: Some(slot),
            dev_number: Some(slot),
            path: format!("/img/m{slot}.img"),
            state: state.into(),
            recovery_offset_sectors: None,
            bad_sectors: 0,
        };
        ArrayStatus {
            name: self.name.clone(),
            level: 6,
            layout: "left-symmetric".into(),
            chunk_bytes: 64 << 10,
            raid_disks: 4,
            array_size_bytes: 4000 * 512 * 2,
            component_size_bytes: 4000 * 512,
            state: if sync.is_some() { "active, checking" } else { "clean" }.into(),
            members: (0..4)
                .map(|slot| {
                    member(slot, if faulty(state, slot) { "faulty" } else { "active sync" })
                })
                .collect(),
            sync,
            last_sync: state.last_sync.clone(),
            sync_speed_min_kib: state.speed_kib.0,
            sync_speed_max_kib: state.speed_kib.1,
            ..ArrayStatus::default()
        }
    }
}

/// Failed by a request (by slot or path) and not removed since.
fn faulty(state: &FakeState, slot: u32) -> bool {
    let path = format!("/img/m{slot}.img");
    let mut faulty = false;
    for r in &state.seen {
        match r {
            ControlRequest::Fail { member } if *member == slot.to_string() || *member == path => {
                faulty = true;
            }
            ControlRequest::Remove { member } if *member == path => faulty = false,
            _ => {}
        }
    }
    faulty
}

fn finished(action: &str) -> SyncResult {
    SyncResult {
        action: action.into(),
        outcome: "done".into(),
        sectors: 4000,
        array_bytes: 4000 * 512 * 2,
        seconds: 0.75,
        mismatch_sectors: 8,
        mismatches: vec![MismatchAt { member_sector: 2048, sectors: 8, slot: Some(2) }],
        listed_bad_sectors: 0,
        from_sector: 0,
    }
}

impl ArrayControl for FakeArray {
    fn handle(&self, request: ControlRequest) -> ControlResponse {
        let mut state = self.state.lock().unwrap();
        state.seen.push(request.clone());
        match request {
            ControlRequest::Status => ControlResponse::with_status(self.status(&mut state)),
            ControlRequest::Check { .. } | ControlRequest::Repair { .. } => {
                let check = matches!(request, ControlRequest::Check { .. });
                let action = if check { "check" } else { "repair" };
                state.running = Some((action.into(), POLLS_TO_FINISH));
                ControlResponse::ok(format!("{action} started"))
            }
            ControlRequest::Fail { member } if member == "9" => {
                ControlResponse::err("no member in slot 9")
            }
            ControlRequest::SyncSpeed { min_kib, max_kib } => {
                state.speed_kib.0 = min_kib.unwrap_or(state.speed_kib.0);
                state.speed_kib.1 = max_kib.unwrap_or(state.speed_kib.1);
                ControlResponse::with_status(self.status(&mut state))
            }
            other => ControlResponse::ok(format!("did {other:?}")),
        }
    }
}

/// A run directory with fake arrays serving in it, removed at the end.
struct Fixture {
    dir: PathBuf,
    arrays: Vec<Arc<FakeArray>>,
    servers: Vec<ControlServer>,
}

impl Fixture {
    fn new(names: &[&str]) -> Fixture {
        static N: AtomicU64 = AtomicU64::new(0);
        let n = N.fetch_add(1, Ordering::SeqCst);
        let dir = std::env::temp_dir().join(format!("uraid-manage-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut fixture = Fixture { dir, arrays: Vec::new(), servers: Vec::new() };
        for name in names {
            let state = FakeState { speed_kib: (1000, 200_000), ..FakeState::default() };
            let array = Arc::new(FakeArray { name: (*name).into(), state: Mutex::new(state) });
            let path = fixture.dir.join(format!("{name}.sock"));
            fixture.servers.push(ControlServer::start(&path, array.clone()).unwrap());
            fixture.arrays.push(array);
        }
        fixture
    }

    fn uraid(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_uraid"))
            .args(args)
            .env("URAID_RUN_DIR", &self.dir)
            .output()
            .unwrap()
    }

    /// Runs a verb that must succeed; returns its stdout.
    fn ok(&self, args: &[&str]) -> String {
        let out = self.uraid(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "uraid {args:?} failed: {stderr}");
        String::from_utf8(out.stdout).unwrap()
    }

    fn seen(&self) -> Vec<ControlRequest> {
        self.arrays[0].state.lock().unwrap().seen.clone()
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        self.servers.clear();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn every_verb_sends_its_request() {
    let f = Fixture::new(&["md0"]);
    let cases: Vec<(Vec<&str>, ControlRequest)> = vec![
        (vec!["detail", "md0"], ControlRequest::Status),
        (vec!["status", "md0"], ControlRequest::Status),
        (vec!["fail", "md0", "/img/m1.img"], ControlRequest::Fail { member: "/img/m1.img".into() }),
        (vec!["remove", "md0", "1"], ControlRequest::Remove { member: "1".into() }),
        (
            vec!["add", "md0", "/img/m4.img"],
            ControlRequest::Add { path: "/img/m4.img".into(), force: false },
        ),
        (
            vec!["add", "--force", "md0", "/img/m4.img"],
            ControlRequest::Add { path: "/img/m4.img".into(), force: true },
        ),
        (
            vec!["replace", "md0", "2", "--with", "/img/m5.img"],
            ControlRequest::Replace {
                member: "2".into(),
                with: Some("/img/m5.img".into()),
                force: false,
            },
        ),
        (
            vec!["replace", "--force", "md0", "2", "--with", "/img/m5.img"],
            ControlRequest::Replace {
                member: "2".into(),
                with: Some("/img/m5.img".into()),
                force: true,
            },
        ),
        (
            vec!["replace", "md0", "3"],
            ControlRequest::Replace { member: "3".into(), with: None, force: false },
        ),
        (vec!["check", "md0"], ControlRequest::Check { span: None }),
        (vec!["repair", "md0"], ControlRequest::Repair { span: None }),
        (
            vec!["check", "md0", "--from", "1G", "--to", "4097s"],
            ControlRequest::Check {
                span: Some(ScrubSpan { from_sectors: 1 << 21, to_sectors: 4097 }),
            },
        ),
        (vec!["stop", "md0"], ControlRequest::Stop),
        (
            vec!["sync-speed", "md0", "--min", "50M", "--max", "1G"],
            ControlRequest::SyncSpeed { min_kib: Some(51_200), max_kib: Some(1 << 20) },
        ),
        (vec!["sync-speed", "md0"], ControlRequest::SyncSpeed { min_kib: None, max_kib: None }),
        // md's sysfs: 0 or the word `system` is the system's limit, not a limit of 0.
        (
            vec!["sync-speed", "md0", "--min", "0", "--max", "system"],
            ControlRequest::SyncSpeed { min_kib: Some(1000), max_kib: Some(200_000) },
        ),
        (
            vec!["sync-speed", "md0", "--max", "0"],
            ControlRequest::SyncSpeed { min_kib: None, max_kib: Some(200_000) },
        ),
    ];
    for (args, expected) in &cases {
        let before = f.seen().len();
        f.ok(args);
        assert_eq!(f.seen()[before..], *std::slice::from_ref(expected), "uraid {args:?}");
    }
    // idle asks the status first, to follow a check it stops to its result.
    let before = f.seen().len();
    f.ok(&["idle", "md0"]);
    assert_eq!(f.seen()[before..], [ControlRequest::Status, ControlRequest::Idle]);
}

#[test]
fn text_output_names_the_array() {
    let f = Fixture::new(&["md0", "md1"]);
    assert_eq!(f.ok(&["fail", "md0", "3"]), "md0: did Fail { member: \"3\" }\n");
    assert_eq!(f.ok(&["check", "md0"]), "md0: check started\n");
    assert_eq!(
        f.ok(&["sync-speed", "md0", "--max", "100000"]),
        "md0: sync speed min 1000K/sec, max 100000K/sec\n"
    );
    let mdstat = f.ok(&["status"]);
    assert!(mdstat.starts_with("Personalities : "), "{mdstat}");
    // md0's member 3 is faulty now (the fake keeps the failure).
    assert!(mdstat.contains("md0 : active raid6 m3.img[3](F) m2.img[2] m1.img[1] m0.img[0]\n"));
    assert!(mdstat.contains("md1 : active raid6 m3.img[3] m2.img[2] m1.img[1] m0.img[0]\n"));
    assert!(mdstat.contains("algorithm 2 [4/4] [UUUU]"), "{mdstat}");
    let detail = f.ok(&["detail", "md1"]);
    assert!(detail.contains("        Raid Level : raid6\n"), "{detail}");
}

#[test]
fn json_output_parses() {
    let f = Fixture::new(&["md0", "md1"]);
    let status: ArrayStatus = serde_json::from_str(&f.ok(&["detail", "--json", "md0"])).unwrap();
    assert_eq!((status.name.as_str(), status.raid_disks), ("md0", 4));
    let all: Vec<ArrayStatus> = serde_json::from_str(&f.ok(&["status", "--json"])).unwrap();
    let names: Vec<&str> = all.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["md0", "md1"]);
    for args in [
        &["fail", "--json", "md0", "1"][..],
        &["remove", "--json", "md0", "1"],
        &["add", "--json", "md0", "x.img"],
        &["replace", "--json", "md0", "1", "--with", "y.img"],
        &["check", "--json", "md0"],
        &["idle", "--json", "md0"],
        &["stop", "--json", "md0"],
        &["sync-speed", "--json", "md0", "--min", "1M"],
    ] {
        let response: ControlResponse = serde_json::from_str(&f.ok(args)).unwrap();
        assert!(response.ok, "uraid {args:?}: {response:?}");
    }
}

#[test]
fn detail_test_exits_as_mdadm_does() {
    let f = Fixture::new(&["md0"]);
    assert_eq!(f.uraid(&["detail", "--test", "md0"]).status.code(), Some(0));
    // Three of the RAID6's four members faulty: past its redundancy.
    for slot in ["0", "1", "2"] {
        f.ok(&["fail", "md0", slot]);
    }
    let out = f.uraid(&["detail", "--test", "--json", "md0"]);
    assert_eq!(out.status.code(), Some(2));
    let status: ArrayStatus = serde_json::from_slice(&out.stdout).unwrap();
    assert!(status.failed());
}

#[test]
fn not_running_is_exit_1_with_the_reason() {
    let f = Fixture::new(&["md0"]);
    let verbs = [&["detail", "md9"][..], &["fail", "md9", "1"], &["check", "--wait", "md9"]];
    for args in verbs.into_iter().chain([&["idle", "md9"][..]]) {
        let out = f.uraid(args);
        assert_eq!(out.status.code(), Some(1), "uraid {args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let socket = f.dir.join("md9.sock");
        let expected =
            format!("no running array named md9: nothing listens on {}", socket.display());
        assert!(stderr.contains(&expected), "uraid {args:?}: {stderr}");
        assert!(out.stdout.is_empty());
    }
}

/// mdadm takes several members: each in order, stopping at the first refused; `remove
/// failed` removes every faulty member.
#[test]
fn several_members_go_in_order_and_stop_at_the_first_refused() {
    let f = Fixture::new(&["md0"]);
    let fail = |m: &str| ControlRequest::Fail { member: m.into() };
    let remove = |m: &str| ControlRequest::Remove { member: m.into() };
    let add = |p: &str| ControlRequest::Add { path: p.into(), force: false };
    let out = f.ok(&["fail", "md0", "2", "/img/m1.img"]);
    assert_eq!(out, "md0: did Fail { member: \"2\" }\nmd0: did Fail { member: \"/img/m1.img\" }\n");
    assert_eq!(f.seen(), [fail("2"), fail("/img/m1.img")]);
    f.ok(&["remove", "md0", "failed"]);
    assert_eq!(
        f.seen()[2..],
        [ControlRequest::Status, remove("/img/m1.img"), remove("/img/m2.img")]
    );
    assert_eq!(f.ok(&["remove", "md0", "failed"]), "md0: no faulty member to remove\n");
    f.ok(&["add", "md0", "a.img", "b.img"]);
    assert_eq!(f.seen()[6..], [add("a.img"), add("b.img")]);

    let out = f.uraid(&["fail", "md0", "3", "9", "0"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no member in slot 9"));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "md0: did Fail { member: \"3\" }\n");
    assert_eq!(f.seen()[8..], [fail("3"), fail("9")], "nothing after the refusal");
}

#[test]
fn refusals_are_exit_1() {
    let f = Fixture::new(&["md0"]);
    let out = f.uraid(&["fail", "md0", "9"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("array md0 refused fail: no member in slot 9"), "{stderr}");
    // --min above --max is caught before anything is sent.
    let out = f.uraid(&["sync-speed", "md0", "--min", "2G", "--max", "1G"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is above --max"));
    assert!(f.seen().iter().all(|r| !matches!(r, ControlRequest::SyncSpeed { .. })));
}

#[test]
fn check_wait_in_a_pipe_prints_only_the_result() {
    let f = Fixture::new(&["md0"]);
    let out = f.ok(&["check", "--wait", "md0"]);
    assert_eq!(
        out,
        "md0: check done: 8 mismatched sectors in 4000 sectors, 0.8 s\n  \
         mismatch at member sector 2048, 8 sectors, slot 2 (named by the syndrome)\n"
    );
    let seen = f.seen();
    assert_eq!(seen[..2], [ControlRequest::Status, ControlRequest::Check { span: None }]);
    // One status per poll while it ran, and one that saw it end.
    let polls = seen[2..].iter().filter(|r| **r == ControlRequest::Status).count();
    assert_eq!(polls, POLLS_TO_FINISH as usize + 1);
    let result: SyncResult =
        serde_json::from_str(&f.ok(&["repair", "--wait", "--json", "md0"])).unwrap();
    assert_eq!((result.action.as_str(), result.mismatches[0].slot), ("repair", Some(2)));
}

#[test]
fn status_watch_follows_running_actions() {
    let f = Fixture::new(&["md0", "md1"]);
    f.ok(&["check", "md0"]);
    let out = f.ok(&["status", "--watch"]);
    assert!(out.starts_with("md0: check done: 8 mismatched sectors"), "{out}");
    assert!(out.ends_with("md1: no sync action running\n"), "{out}");
    assert_eq!(f.ok(&["status", "--watch", "md0"]), "md0: no sync action running\n");
}
