//! `uraid monitor`: mdadm --monitor for arrays uraid runs. It looks at every running array
//! (or the ones named) through its control socket, finds events by comparing each look with
//! the one before (`uraid_md::monitor`), prints each one and runs the alert program with
//! mdadm's arguments, so that scripts written for mdadm's PROGRAM work unchanged.
//!
//! md wakes mdadm when /proc/mdstat changes; uraid's arrays have no such wake-up, so the
//! monitor polls (every 2 s by default, against mdadm's 60 s between its wake-ups). A look is
//! one small request per array. Mail (mdadm's MAILADDR) goes through sendmail
//! (`monitor_mail.rs`). With `--config`, an mdadm.conf's spare groups move hot spares between
//! arrays (`monitor_spares.rs`) and its `spares=` say SparesMissing.

use crate::cmd::control_client::status_of;
use crate::cmd::mdadm_config;
use crate::cmd::monitor_mail::{Mail, host_name, message, send};
use crate::cmd::monitor_spares::SpareMover;
use anyhow::{bail, ensure};
use clap::Args;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime};
use uraid_md::control::running_arrays;
use uraid_md::mdadm_conf::MdadmConf;
use uraid_md::monitor::{DEFAULT_INCREMENT, Event, Monitor};
use uraid_md::status::ArrayStatus;

#[derive(Args)]
#[command(
    about = "Report events of running arrays and run an alert program (mdadm --monitor)",
    long_about = "Watch running arrays (every one under $URAID_RUN_DIR, default /run/uraid, \
including arrays started later; or only the NAMEs given) and report mdadm's events: Fail, \
FailSpare, SpareActive, DegradedArray, NewArray, DeviceDisappeared, RebuildStarted, RebuildNN, \
RebuildFinished, TestMessage, MoveSpare, SparesMissing. Each is printed as a line (time, \
event, array, member) and, with --program, given to PROGRAM as mdadm gives it: PROGRAM EVENT \
ARRAY [MEMBER], one run at a time, in order; with --mail, the ones mdadm mails (Fail, \
FailSpare, DegradedArray, TestMessage, SparesMissing) are mailed through sendmail with the \
array's status. DegradedArray is said of an array degraded when first seen; a failure seen \
happening is Fail. With --config, \
an mdadm.conf's ARRAY lines (matched by UUID=, else by device name: /dev/md/NAME) give spare \
groups: an array that is degraded and has no spare takes one from a whole array of its \
spare-group= (MoveSpare), as mdadm's monitor moves them; spares=N says SparesMissing of an \
array first seen with fewer; MAILADDR, MAILFROM, PROGRAM and MONITORDELAY serve where the \
options are not given; --scan reads mdadm's own file so. Runs until killed, or with --oneshot \
looks once and exits (for cron).",
    after_help = "Example:\n  uraid monitor --program /usr/local/sbin/raid-alert\n  \
uraid monitor --oneshot --test --mail ops@example.com\n  uraid monitor --json --delay 10\n  \
uraid monitor --config /etc/mdadm/mdadm.conf"
)]
// Command-line flags, each its own choice.
#[allow(clippy::struct_excessive_bools)]
pub struct MonitorArgs {
    /// Seconds between looks (mdadm's --delay; fractions allowed) [default: MONITORDELAY, else
    /// 2].
    #[arg(long, short = 'd', value_parser = parse_delay)]
    delay: Option<Duration>,
    /// An mdadm.conf: spare groups, expected spares, MAILADDR, MAILFROM, PROGRAM, MONITORDELAY
    /// (mdadm's --config).
    #[arg(long, short = 'c', value_name = "FILE")]
    config: Option<PathBuf>,
    /// Read mdadm's own configuration file as --config (/etc/mdadm/mdadm.conf, else
    /// /etc/mdadm.conf; none: as without), as mdadm --monitor --scan does.
    #[arg(long, short = 's', conflicts_with = "config")]
    scan: bool,
    /// Look once, report degraded arrays (and test messages), and exit.
    #[arg(long, short = '1')]
    oneshot: bool,
    /// A TestMessage for every array found at the first look, to try the alert path.
    #[arg(long, short = 't')]
    test: bool,
    /// Run PROGRAM EVENT ARRAY [MEMBER] for each event (mdadm's --program; --alert too).
    #[arg(long, short = 'p', alias = "alert", value_name = "PROGRAM")]
    program: Option<PathBuf>,
    /// Mail the events mdadm mails (Fail, FailSpare, DegradedArray, SparesMissing, TestMessage)
    /// to this address through `sendmail -t` (mdadm's --mail) [default: MAILADDR].
    #[arg(long, short = 'm', value_name = "ADDRESS")]
    mail: Option<String>,
    /// The mail's From (mdadm's MAILFROM) [default: MAILFROM, else uraid monitor <root>].
    #[arg(long, value_name = "ADDRESS")]
    mail_from: Option<String>,
    /// The mail transfer agent's sendmail.
    #[arg(long, value_name = "PATH", default_value = "/usr/sbin/sendmail")]
    sendmail: PathBuf,
    /// RebuildNN events every this many percent of a running action (mdadm's --increment).
    #[arg(long, short = 'r', default_value_t = DEFAULT_INCREMENT,
          value_parser = clap::value_parser!(u32).range(1..=99))]
    increment: u32,
    /// One JSON object per event: time, event, array, member.
    #[arg(long)]
    json: bool,
    /// Only these arrays (default: every running array, and any that starts later).
    names: Vec<String>,
}

fn parse_delay(text: &str) -> Result<Duration, String> {
    let seconds: f64 = text.parse().map_err(|_| format!("not a number of seconds: {text}"))?;
    if !(0.01..=86_400.0).contains(&seconds) {
        return Err(format!("{text} s: the delay is from 0.01 to 86400 seconds"));
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// What the monitor does with events: the options, else the configuration's.
struct Alerts {
    program: Option<PathBuf>,
    mail: Option<Mail>,
    json: bool,
}

impl Alerts {
    fn of(args: &MonitorArgs, conf: &MdadmConf) -> anyhow::Result<Alerts> {
        let program = args.program.clone().or_else(|| conf.program.as_ref().map(PathBuf::from));
        if let Some(program) = &program {
            ensure!(
                runnable(program),
                "no program {} to run (not an executable file, nor one on PATH)",
                program.display()
            );
        }
        let from = args.mail_from.clone().or_else(|| conf.mail_from.clone());
        let mut mail = args.mail.clone().or_else(|| conf.mail_addr.clone()).map(|to| Mail {
            to,
            from: from.unwrap_or_else(|| "uraid monitor <root>".to_owned()),
            sendmail: args.sendmail.clone(),
        });
        if let Some(m) = mail.as_ref().filter(|m| !runnable(&m.sendmail)) {
            let sendmail = m.sendmail.display();
            ensure!(
                args.mail.is_none(),
                "--mail needs a mail transfer agent: no {sendmail} (--sendmail names another)"
            );
            // Debian's own file says MAILADDR root whether or not a mailer is installed.
            say!("uraid monitor: MAILADDR {}: no {sendmail} to mail with; not mailing", m.to);
            mail = None;
        }
        Ok(Alerts { program, mail, json: args.json })
    }
}

pub fn run(args: &MonitorArgs) -> anyhow::Result<()> {
    let file = args.config.clone().or_else(|| args.scan.then(mdadm_config::default_file).flatten());
    let load = |path: PathBuf| mdadm_config::load(&path, "uraid monitor");
    let conf = file.map(load).transpose()?.unwrap_or_default();
    let alerts = Alerts::of(args, &conf)?;
    let from_conf = conf.monitor_delay.map(|s| Duration::from_secs(s.into()));
    let delay = args.delay.or(from_conf).unwrap_or(Duration::from_secs(2));
    let mut spares = SpareMover::for_config(&conf)?;
    let mut monitor = Monitor::new(args.increment).with_config(conf);
    let mut last = BTreeMap::new();
    let first = look(&args.names, &mut last);
    let missing: Vec<&str> = args
        .names
        .iter()
        .filter(|n| !first.iter().any(|s| &s.name == *n))
        .map(String::as_str)
        .collect();
    if args.oneshot && !missing.is_empty() {
        bail!("not running: {}", missing.join(", "));
    }
    for name in missing {
        say!("uraid monitor: {name} is not running; watching for it to start");
    }
    let mut statuses = first;
    let mut test = args.test;
    loop {
        let mut events = monitor.look(statuses.clone(), std::mem::take(&mut test));
        // After the events, as mdadm: a Fail is told before the spare that answers it moves.
        events.extend(spares.move_spares(&statuses, monitor.config()));
        report(&alerts, events, &statuses);
        if args.oneshot {
            return Ok(());
        }
        std::thread::sleep(delay);
        statuses = look(&args.names, &mut last);
    }
}

/// The statuses of the arrays watched that run now. An array nothing listens for, or that
/// refused the question (it is stopping), is not there. One that did not answer (busy past
/// the control socket's wait, or its answer cut off) is still running: it keeps its last
/// status, said, rather than being reported gone and then new again. `last`: the look
/// before's, updated.
fn look(names: &[String], last: &mut BTreeMap<String, ArrayStatus>) -> Vec<ArrayStatus> {
    let names = if names.is_empty() { running_arrays() } else { names.to_vec() };
    let mut now = Vec::new();
    for name in &names {
        match status_of(name) {
            Ok(status) => now.push(status),
            Err(e) => {
                let io = e.downcast_ref::<std::io::Error>();
                let gone = io.is_none_or(|io| io.kind() == std::io::ErrorKind::NotFound);
                if let Some(status) = last.get(name).filter(|_| !gone) {
                    say!("uraid monitor: {name}: {e:#}; keeping its last status");
                    now.push(status.clone());
                }
            }
        }
    }
    *last = now.iter().map(|s| (s.name.clone(), s.clone())).collect();
    now
}

fn report(alerts: &Alerts, events: Vec<Event>, now: &[ArrayStatus]) {
    for event in events {
        let time = humantime::format_rfc3339_seconds(SystemTime::now());
        if alerts.json {
            let mut line = serde_json::to_value(&event).expect("an event serializes");
            line["time"] = time.to_string().into();
            out!("{line}");
        } else {
            let member = event.member.as_deref().map(|m| format!(" {m}")).unwrap_or_default();
            out!("{time}: {} on {}{member}", event.event.name(), event.array);
        }
        if let Some(program) = &alerts.program {
            run_program(program, &event);
        }
        if let Some(mail) = alerts.mail.as_ref().filter(|_| event.event.mailed()) {
            let status = now.iter().find(|s| s.name == event.array);
            let text = message(mail, &event, status, &host_name());
            if let Err(e) = send(mail, &text) {
                say!("uraid monitor: mailing {} {}: {e:#}", event.event.name(), event.array);
            }
        }
    }
}

/// mdadm's PROGRAM call, waited for so that events reach it in order. Its failure is said and
/// the monitor goes on: the next event may reach it.
fn run_program(program: &Path, event: &Event) {
    let mut command = Command::new(program);
    command.arg(event.event.name()).arg(&event.array).args(event.member.as_deref());
    let what = format!("{} {} {}", program.display(), event.event.name(), event.array);
    match command.stdin(Stdio::null()).status() {
        Ok(status) if status.success() => {}
        Ok(status) => say!("uraid monitor: {what}: {status}"),
        Err(e) => say!("uraid monitor: cannot run {what}: {e}"),
    }
}

/// An executable file at `program`, or on PATH for a bare name, as the OS would find it.
fn runnable(program: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    let executable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.components().count() > 1 {
        return executable(program);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).any(|dir| executable(&dir.join(program)))
}
