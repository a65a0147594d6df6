//! Goal: `uraid monitor` tells an alert program (with mdadm's arguments) and its own output
//! every event of a served array's life: a member failing, a spare rebuilt into its slot, a
//! check that finds mismatches, the array stopping; `--oneshot` reports a degraded array for
//! cron and refuses what it cannot watch.
//!
//! Method: the built `uraid` binary serving a RAID6 of four files plus a spare, driven by the
//! verbs; `uraid monitor --program` runs beside it with a shell script that appends its
//! arguments to a file, which the test waits on line by line.

mod serve_common;

use serve_common::{
    BIN, Served, corrupt, create_raid6, detail, member_files, tempdir, text, uraid, uraid_ok,
};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// A monitor process, killed when dropped.
struct Monitoring {
    child: Child,
    alerts: PathBuf,
}

impl Monitoring {
    fn start(dir: &Path, options: &[&str]) -> Monitoring {
        let alerts = dir.join("alerts.log");
        let script = dir.join("alert.sh");
        std::fs::write(&script, format!("#!/bin/sh\necho \"$@\" >> {}\n", alerts.display()))
            .unwrap();
        Command::new("chmod").arg("+x").arg(&script).status().unwrap();
        let child = Command::new(BIN)
            .args(["monitor", "--delay", "0.1", "--json", "--program"])
            .arg(&script)
            .args(options)
            .env("URAID_RUN_DIR", dir.join("run"))
            .stdout(std::fs::File::create(dir.join("monitor.out")).unwrap())
            .stderr(std::fs::File::create(dir.join("monitor.err")).unwrap())
            .spawn()
            .unwrap();
        Monitoring { child, alerts }
    }

    fn lines(&self) -> Vec<String> {
        let text = std::fs::read_to_string(&self.alerts).unwrap_or_default();
        text.lines().map(str::to_owned).collect()
    }

    /// Waits until the program has been run with `line` (after the `from`th run).
    fn wait_for(&self, from: usize, line: &str) -> usize {
        let start = Instant::now();
        loop {
            let lines = self.lines();
            if let Some(i) = lines.iter().skip(from).position(|l| l == line) {
                return from + i + 1;
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "no alert {line:?}; the program was run with {lines:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Monitoring {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn the_program_hears_a_failure_a_rebuild_a_check_and_a_stop_with_mdadms_arguments() {
    let dir = tempdir("monitor-life");
    let files = member_files(&dir, 5, 32);
    let (members, spare) = (&files[..4], &files[4]);
    create_raid6("life", members);
    let served = Served::start(&dir, "life", members);
    let monitor = Monitoring::start(&dir, &["--test"]);
    let mut at = monitor.wait_for(0, "TestMessage life");

    let failed = members[2].to_str().unwrap();
    uraid_ok(&dir, &["fail", "life", failed]);
    at = monitor.wait_for(at, &format!("Fail life {failed}"));
    uraid_ok(&dir, &["add", "life", spare.to_str().unwrap()]);
    // In either order: the spare may show in sync a look before or after the result.
    let active = monitor.wait_for(at, &format!("SpareActive life {}", spare.display()));
    at = active.max(monitor.wait_for(at, "RebuildFinished life"));

    corrupt(&members[1], 1 << 20);
    uraid_ok(&dir, &["check", "life", "--wait"]);
    at = monitor.wait_for(at, "RebuildFinished life mismatches found: 8 (on raid level 6)");
    uraid_ok(&dir, &["stop", "life"]);
    served.wait(Duration::from_secs(30));
    monitor.wait_for(at, "DeviceDisappeared life");

    // Every run, in order: each action started before it finished, nothing unexpected.
    let lines = monitor.lines();
    let names: Vec<&str> = lines.iter().map(|l| l.split(' ').next().unwrap()).collect();
    let allowed = ["TestMessage", "Fail", "RebuildStarted", "SpareActive", "RebuildFinished"];
    for name in &names {
        let progress = name.strip_prefix("Rebuild").is_some_and(|n| n.parse::<u32>().is_ok());
        assert!(allowed.contains(name) || progress || *name == "DeviceDisappeared", "{lines:?}");
    }
    let started = names.iter().filter(|n| **n == "RebuildStarted").count();
    let finished = names.iter().filter(|n| **n == "RebuildFinished").count();
    assert_eq!((started, finished), (2, 2), "a recovery and a check: {lines:?}");
    // The same events on standard output, as JSON lines with a time.
    let out = std::fs::read_to_string(dir.join("monitor.out")).unwrap();
    let printed: Vec<serde_json::Value> =
        out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(printed.len(), lines.len(), "{out}");
    assert_eq!(printed[1]["event"], "Fail");
    assert_eq!(printed[1]["member"], failed);
    assert!(printed[1]["time"].as_str().unwrap().ends_with('Z'), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn oneshot_reports_a_degraded_array_and_refuses_what_it_cannot_watch() {
    let dir = tempdir("monitor-oneshot");
    let members = member_files(&dir, 4, 32);
    create_raid6("once", &members);
    // Started without one member: degraded from the first look.
    let served = Served::start(&dir, "once", &members[..3]);
    let out = uraid(&dir, &["monitor", "--oneshot"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.ends_with(": DegradedArray on once\n") && stdout.lines().count() == 1,
        "{stdout}"
    );
    // mdadm's own file read as mdadm --monitor --scan reads it (Debian's says MAILADDR root:
    // with no mailer, the monitor says so and goes on).
    let out = uraid(&dir, &["monitor", "--oneshot", "--scan", "--sendmail", "/nonexistent/mta"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).ends_with(": DegradedArray on once\n"), "{}", text(&out.stdout));
    let out = uraid_ok(&dir, &["monitor", "-1", "--test", "once"]);
    let events: Vec<&str> = out.lines().map(|l| l.split(": ").nth(1).unwrap()).collect();
    assert_eq!(events, ["DegradedArray on once", "TestMessage on once"]);

    // Mailed as mdadm mails them: through sendmail -t, the array's status in the body.
    let (sendmail, mailbox) = (dir.join("sendmail"), dir.join("mailbox"));
    let script = format!("#!/bin/sh\necho \"$@\" >> {0}\ncat >> {0}\n", mailbox.display());
    std::fs::write(&sendmail, script).unwrap();
    std::process::Command::new("chmod").arg("+x").arg(&sendmail).status().unwrap();
    let sendmail = sendmail.to_str().unwrap();
    let mail = ["monitor", "-1", "-t", "--mail", "ops@example.com", "--sendmail", sendmail];
    uraid_ok(&dir, &mail);
    let mails = std::fs::read_to_string(&mailbox).unwrap();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    for event in ["DegradedArray", "TestMessage"] {
        let head = "-t\nFrom: uraid monitor <root>\nTo: ops@example.com\nSubject: ";
        let subject = format!("{head}{event} event on once:{}\n", host.trim());
        assert!(mails.contains(&subject), "{mails}");
        assert!(mails.contains(&format!("A {event} event had been detected on array once.")));
    }
    assert_eq!(mails.matches("once : active raid6 ").count(), 2, "{mails}");
    assert!(mails.contains("[4/3] [UUU_]"), "{mails}");
    let mut no_mta = mail.to_vec();
    no_mta[6] = "/nonexistent/sendmail";
    let out = uraid(&dir, &no_mta);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("--mail needs a mail transfer agent"),
        "{}",
        text(&out.stderr)
    );

    // mdadm --detail --test's exit status, for scripts that do not parse: 1 degraded, 4 no
    // such array (0 and 2 in manage_cli.rs).
    let out = uraid(&dir, &["detail", "--test", "once"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("State : "), "{}", text(&out.stdout));
    assert_eq!(uraid(&dir, &["detail", "--test", "md9"]).status.code(), Some(4));

    let out = uraid(&dir, &["monitor", "--oneshot", "once", "md9"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("not running: md9"), "{}", text(&out.stderr));
    let out = uraid(&dir, &["monitor", "--program", "/nonexistent/alert"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("no program /nonexistent/alert"), "{}", text(&out.stderr));
    for delay in ["0", "soon"] {
        let out = uraid(&dir, &["monitor", "--delay", delay]);
        assert_eq!(out.status.code(), Some(2), "--delay {delay}");
    }
    drop(served);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Waits until `file` holds `text`; what it holds.
fn wait_text(file: &Path, text: &str) -> String {
    let start = Instant::now();
    loop {
        let held = std::fs::read_to_string(file).unwrap_or_default();
        if held.contains(text) || start.elapsed() > Duration::from_secs(30) {
            return held;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_program_that_fails_is_said_and_the_monitor_goes_on() {
    let dir = tempdir("monitor-failing-program");
    let members = member_files(&dir, 4, 32);
    create_raid6("prog", &members);
    let served = Served::start(&dir, "prog", &members);
    let (out, err) = (dir.join("monitor.out"), dir.join("monitor.err"));
    let mut child = Command::new(BIN)
        .args(["monitor", "--delay", "0.1", "--program", "false", "prog"])
        .env("URAID_RUN_DIR", dir.join("run"))
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    uraid_ok(&dir, &["fail", "prog", "0"]);
    let failed = "uraid monitor: false Fail prog: exit status: 1";
    assert!(wait_text(&err, failed).contains(failed), "{}", wait_text(&out, ""));
    uraid_ok(&dir, &["stop", "prog"]);
    served.wait(Duration::from_secs(30));
    let gone = "uraid monitor: false DeviceDisappeared prog: exit status: 1";
    assert!(wait_text(&err, gone).contains(gone), "{}", wait_text(&out, ""));
    let _ = child.kill();
    let _ = child.wait();
    let stdout = wait_text(&out, "");
    let lines: Vec<&str> = stdout.lines().map(|l| l.split(": ").nth(1).unwrap()).collect();
    let member = members[0].display();
    assert_eq!(lines, [format!("Fail on prog {member}"), "DeviceDisappeared on prog".into()]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A control socket that answers `answers` status questions, then closes every connection
/// without answering (an array busy past the wait, or its answers cut off), until dropped.
fn flaky_array(dir: &Path, name: &str, answers: usize) -> std::thread::JoinHandle<()> {
    use std::io::{BufRead as _, BufReader, Write as _};
    let socket = dir.join("run").join(format!("{name}.sock"));
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let status = uraid_md::status::ArrayStatus {
        name: name.into(),
        level: 5,
        raid_disks: 3,
        state: "clean".into(),
        ..Default::default()
    };
    let answer = uraid_md::control::ControlResponse::with_status(status);
    let mut line = serde_json::to_vec(&answer).unwrap();
    line.push(b'\n');
    std::thread::spawn(move || {
        let mut answered = 0;
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut question = String::new();
            let _ = BufReader::new(&stream).read_line(&mut question);
            if question.to_ascii_lowercase().contains("stop") {
                return;
            }
            // An empty question is a liveness probe (`running_arrays`).
            if !question.is_empty() && answered < answers {
                answered += 1;
                let _ = stream.write_all(&line);
            }
        }
    })
}

#[test]
fn an_array_that_does_not_answer_is_not_reported_gone() {
    let dir = tempdir("monitor-flaky");
    let thread = flaky_array(&dir, "flaky", 2);
    let (out, err) = (dir.join("monitor.out"), dir.join("monitor.err"));
    let mut child = Command::new(BIN)
        .args(["monitor", "--delay", "0.1", "--test"])
        .env("URAID_RUN_DIR", dir.join("run"))
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let said = wait_text(&err, "keeping its last status");
    std::thread::sleep(Duration::from_millis(500));
    let printed = std::fs::read_to_string(&out).unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert!(said.contains("flaky: array flaky closed the control connection without answering"));
    assert!(printed.ends_with(": TestMessage on flaky\n"), "reported gone: {printed}");
    assert_eq!(printed.lines().count(), 1, "{printed}");
    // The fake ends on a stop request (not joined: a test must not hang on it).
    let _ = uraid(&dir, &["stop", "flaky"]);
    drop(thread);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Two RAID6 arrays of four files, alpha's of `alpha_mib` MiB, beta's of 32 MiB with a fifth
/// added as its hot spare, each in its own directory; both served. (alpha, beta, spare).
fn two_arrays(dir: &Path, alpha_mib: u64) -> (Vec<PathBuf>, Vec<PathBuf>, PathBuf, [Served; 2]) {
    let (a, b) = (dir.join("a"), dir.join("b"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    let alpha = member_files(&a, 4, alpha_mib);
    let mut beta = member_files(&b, 5, 32);
    let spare = beta.pop().unwrap();
    create_raid6("alpha", &alpha);
    create_raid6("beta", &beta);
    let served = [Served::start(dir, "alpha", &alpha), Served::start(dir, "beta", &beta)];
    uraid_ok(dir, &["add", "beta", spare.to_str().unwrap()]);
    (alpha, beta, spare, served)
}

/// Stops `two_arrays`' arrays and removes the test's directory.
fn stop_both(dir: &Path, served: [Served; 2]) {
    for name in ["alpha", "beta"] {
        uraid_ok(dir, &["stop", name]);
    }
    for served in served {
        served.wait(Duration::from_secs(30));
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// The members of a running array in `state`, by path.
fn members_in(dir: &Path, name: &str, state: &str) -> Vec<String> {
    let status = detail(dir, name);
    let members = status["members"].as_array().unwrap().iter();
    let picked = members.filter(|m| m["state"] == state);
    picked.map(|m| m["path"].as_str().unwrap().to_owned()).collect()
}

#[test]
fn a_spare_group_lends_a_spare_to_the_array_that_lost_a_member() {
    let dir = tempdir("monitor-spare-group");
    let (alpha, _beta, spare, served) = two_arrays(&dir, 32);
    let uuid = detail(&dir, "beta")["uuid"].as_str().unwrap().to_owned();
    // alpha by its name, beta by its UUID (under another name), as mdadm --detail --scan
    // writes ARRAY lines; the options given win over PROGRAM and MONITORDELAY.
    let conf = dir.join("mdadm.conf");
    let lines = format!(
        "PROGRAM /bin/false\nMONITORDELAY 3600\nARRAY /dev/md/alpha spare-group=shelf\n\
         ARRAY /dev/md/elsewhere metadata=1.2\n  UUID={uuid} spare-group=shelf spares=1\n"
    );
    std::fs::write(&conf, lines).unwrap();
    let monitor = Monitoring::start(&dir, &["--test", "--config", conf.to_str().unwrap()]);
    // Its first look done: what follows is seen happening.
    let at = monitor.wait_for(0, "TestMessage beta");
    // One monitor moves spares, as in mdadm: a second with spare groups is refused.
    let out = uraid(&dir, &["monitor", "--oneshot", "--config", conf.to_str().unwrap()]);
    let e = text(&out.stderr);
    assert!(!out.status.success() && e.contains("another uraid monitor moves spares"), "{e}");

    let failed = alpha[1].to_str().unwrap();
    uraid_ok(&dir, &["fail", "alpha", failed]);
    let at = monitor.wait_for(at, &format!("Fail alpha {failed}"));
    let at = monitor.wait_for(at, "MoveSpare alpha beta");
    let spare_path = spare.to_str().unwrap();
    // In either order: the spare may show in sync a look before or after the result.
    monitor.wait_for(at, &format!("SpareActive alpha {spare_path}"));
    monitor.wait_for(at, "RebuildFinished alpha");
    let lines = monitor.lines();
    assert_eq!(lines.iter().filter(|l| l.starts_with("MoveSpare")).count(), 1, "{lines:?}");
    assert!(!lines.iter().any(|l| l.contains("SparesMissing")), "{lines:?}");
    assert_eq!(members_in(&dir, "alpha", "active sync").len(), 4);
    assert!(members_in(&dir, "alpha", "active sync").contains(&spare_path.to_owned()));
    assert_eq!(members_in(&dir, "beta", "spare"), Vec::<String>::new());
    let examined = uraid_ok(&dir, &["examine", spare_path]);
    let alpha_uuid = detail(&dir, "alpha")["uuid"].as_str().unwrap().to_owned();
    assert!(examined.contains(&alpha_uuid), "{examined}");

    // A monitor that sees beta first now, with fewer spares than the line's spares=1, says
    // SparesMissing, to the configuration's PROGRAM when no --program is given.
    let (script, heard) = (dir.join("alert2.sh"), dir.join("alerts2.log"));
    std::fs::write(&script, format!("#!/bin/sh\necho \"$@\" >> {}\n", heard.display())).unwrap();
    Command::new("chmod").arg("+x").arg(&script).status().unwrap();
    let lines = format!("PROGRAM {}\nARRAY UUID={uuid} spares=1\n", script.display());
    std::fs::write(&conf, lines).unwrap();
    let out = uraid_ok(&dir, &["monitor", "--oneshot", "--config", conf.to_str().unwrap()]);
    assert!(out.ends_with(": SparesMissing on beta\n") && out.lines().count() == 1, "{out}");
    assert_eq!(std::fs::read_to_string(&heard).unwrap(), "SparesMissing beta\n");
    drop(monitor);
    stop_both(&dir, served);
}

#[test]
fn a_spare_the_degraded_array_refuses_goes_back_and_is_not_offered_again() {
    let dir = tempdir("monitor-spare-refused");
    // alpha's members are larger: beta's spare is too small to rebuild one of them.
    let (alpha, _beta, spare, served) = two_arrays(&dir, 48);
    let conf = dir.join("mdadm.conf");
    let groups = "ARRAY /dev/md/alpha spare-group=shelf\nARRAY /dev/md/beta spare-group=shelf\n";
    std::fs::write(&conf, groups).unwrap();
    let monitor = Monitoring::start(&dir, &["--test", "--config", conf.to_str().unwrap()]);
    let at = monitor.wait_for(0, "TestMessage beta");
    let failed = alpha[0].to_str().unwrap();
    uraid_ok(&dir, &["fail", "alpha", failed]);
    monitor.wait_for(at, &format!("Fail alpha {failed}"));
    let err = dir.join("monitor.err");
    let said = wait_text(&err, "giving it back");
    // Ten looks more: it stays with beta, and is not taken from it again.
    std::thread::sleep(Duration::from_secs(1));
    let said_later = std::fs::read_to_string(&err).unwrap();
    assert!(said.contains("refused add: ") && said.contains(": too small: "), "{said}");
    assert_eq!(said_later.matches("giving it back").count(), 1, "{said_later}");
    assert_eq!(members_in(&dir, "beta", "spare"), [spare.to_str().unwrap()]);
    assert_eq!(members_in(&dir, "alpha", "active sync").len(), 3);
    assert!(!monitor.lines().iter().any(|l| l.starts_with("MoveSpare")), "{:?}", monitor.lines());

    // A configuration the monitor would misread is refused with its line, before any look.
    std::fs::write(&conf, "ARRAY /dev/md/alpha\n spares=two\n").unwrap();
    let out = uraid(&dir, &["monitor", "--oneshot", "--config", conf.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let e = text(&out.stderr);
    assert!(e.contains("mdadm.conf: line 1: bad spares=two"), "{e}");
    let out = uraid(&dir, &["monitor", "--oneshot", "--config", "/nonexistent/mdadm.conf"]);
    assert!(text(&out.stderr).contains("cannot read the configuration /nonexistent/mdadm.conf"));
    drop(monitor);
    stop_both(&dir, served);
}
