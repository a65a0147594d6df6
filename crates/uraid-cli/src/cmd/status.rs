//! `uraid detail` and `uraid status`: what running arrays report, in mdadm --detail's and
//! /proc/mdstat's shapes or as JSON; `status --watch` follows running sync actions.

use crate::cmd::control_client::status_of;
use crate::cmd::watch::{Follow, bar_for, result_text};
use clap::Args;
use indicatif::MultiProgress;
use serde_json::json;
use std::io::IsTerminal;
use uraid_md::control::running_arrays;
use uraid_md::status::{ArrayStatus, SyncResult, render_array_line, render_detail, render_mdstat};

#[derive(Args)]
#[command(
    about = "Describe a running array (mdadm --detail)",
    long_about = "Describe a running array as mdadm --detail does: level, sizes, state, \
member counts, layout and chunk, the progress of a running rebuild, resync or check, the \
result of the last one, and each member's number, slot and state. --scan prints instead an \
ARRAY line for each running array, as mdadm --detail --scan does, for an mdadm.conf (which \
uraid monitor --config and serve --config read).",
    after_help = "Example:\n  uraid detail md0\n  uraid detail --json md0\n  \
uraid detail --test md0 >/dev/null || echo \"md0 needs attention\"\n  \
uraid detail --scan >> /etc/mdadm/mdadm.conf"
)]
// Command-line flags, each its own choice.
#[allow(clippy::struct_excessive_bools)]
pub struct DetailArgs {
    /// Print the status as JSON.
    #[arg(long)]
    json: bool,
    /// Exit status as mdadm --detail --test: 0 working normally, 1 degraded (a member failed
    /// or missing), 2 failed past its redundancy, 4 no answer from the array.
    #[arg(long, short = 't')]
    test: bool,
    /// One ARRAY line for each running array (or each NAME given), as mdadm --detail --scan
    /// prints them for an mdadm.conf.
    #[arg(long, short = 's', conflicts_with_all = ["json", "test"])]
    scan: bool,
    /// With --scan: level and device count too, and a line of each array's devices.
    #[arg(long, short = 'v', requires = "scan")]
    verbose: bool,
    /// The running array's name (with --scan: any number, none for every running array).
    #[arg(required_unless_present = "scan")]
    names: Vec<String>,
}

pub fn run_detail(args: &DetailArgs) -> anyhow::Result<()> {
    if args.scan {
        return detail_scan(args);
    }
    anyhow::ensure!(args.names.len() == 1, "one array at a time (--scan takes several)");
    let status = match status_of(&args.names[0]) {
        Ok(status) => status,
        Err(e) if args.test => {
            say!("uraid: error: {e:#}");
            std::process::exit(4);
        }
        Err(e) => return Err(e),
    };
    if args.json {
        out!("{}", serde_json::to_string(&status)?);
    } else {
        out_part!("{}", render_detail(&status));
    }
    if args.test {
        // mdadm's codes; a missing slot counts as a failed device, as md's degraded count.
        let code = if status.failed() { 2 } else { i32::from(status.degraded) };
        let _ = std::io::Write::flush(&mut std::io::stdout());
        std::process::exit(code);
    }
    Ok(())
}

/// The statuses of the arrays named (each must answer), or of every running one: an array that
/// stops between the listing and the question is left out then.
fn statuses_of(names: &[String]) -> anyhow::Result<Vec<ArrayStatus>> {
    if names.is_empty() {
        return Ok(running_arrays().iter().filter_map(|name| status_of(name).ok()).collect());
    }
    names.iter().map(|name| status_of(name)).collect()
}

/// mdadm --detail --scan: the ARRAY lines of the arrays named, or of every running one.
fn detail_scan(args: &DetailArgs) -> anyhow::Result<()> {
    for status in &statuses_of(&args.names)? {
        out_part!("{}", render_array_line(status, args.verbose));
    }
    Ok(())
}

#[derive(Args)]
#[command(
    about = "Show running arrays like /proc/mdstat",
    long_about = "Show every running array (the control sockets under $URAID_RUN_DIR, \
default /run/uraid), or only NAME, in /proc/mdstat's shape: members with their flags, size, \
level, chunk, layout number, which slots are in sync, a running sync's progress, and the \
write-intent bitmap. --watch follows the running sync actions to their end (progress bars on \
a terminal) and prints what each found.",
    after_help = "Example:\n  uraid status\n  uraid status --watch md0\n  uraid status --json"
)]
pub struct StatusArgs {
    /// Print the statuses as a JSON array (with --watch: the results).
    #[arg(long)]
    json: bool,
    /// Follow running sync actions until they end, then print their results.
    #[arg(long)]
    watch: bool,
    /// Only this array (default: every running array).
    name: Option<String>,
}

pub fn run_status(args: &StatusArgs) -> anyhow::Result<()> {
    let statuses = statuses_of(args.name.as_slice())?;
    if args.watch {
        return watch(&statuses, args.json);
    }
    if args.json {
        out!("{}", serde_json::to_string(&statuses)?);
    } else {
        out_part!("{}", render_mdstat(&statuses));
    }
    Ok(())
}

/// `status` once the action it has queued is running (the state says "sync pending" until
/// then: a check asked for just before the watch, a recovery behind a failure), so that the
/// watch follows it instead of saying nothing runs. As it is after 10 s.
fn once_started(mut status: ArrayStatus) -> ArrayStatus {
    let start = std::time::Instant::now();
    while status.sync_pending() && start.elapsed() < std::time::Duration::from_secs(10) {
        std::thread::sleep(std::time::Duration::from_millis(50));
        match status_of(&status.name) {
            Ok(now) => status = now,
            Err(_) => break,
        }
    }
    status
}

/// Follows every running action at once, one bar each, then prints the results in order.
fn watch(statuses: &[ArrayStatus], json: bool) -> anyhow::Result<()> {
    let statuses: Vec<ArrayStatus> = statuses.iter().cloned().map(once_started).collect();
    let statuses = statuses.as_slice();
    let draw = std::io::stdout().is_terminal();
    let bars = MultiProgress::new();
    let follows: Vec<Follow> = statuses
        .iter()
        .filter_map(|s| {
            let action = s.sync.as_ref()?.action.clone();
            Some(Follow { name: s.name.clone(), action, before: s.last_sync.clone() })
        })
        .collect();
    let results: Vec<anyhow::Result<SyncResult>> = std::thread::scope(|scope| {
        let handles: Vec<_> = follows
            .iter()
            .map(|f| {
                let bar = bars.add(bar_for(&f.name, &f.action, draw));
                scope.spawn(move || f.run(&bar))
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("a watch thread does not panic")).collect()
    });
    let mut reports = Vec::new();
    for s in statuses.iter().filter(|s| s.sync.is_none()) {
        reports.push((s.name.clone(), None));
    }
    for (follow, result) in follows.iter().zip(results) {
        reports.push((follow.name.clone(), Some(result?)));
    }
    reports.sort_by(|a, b| a.0.cmp(&b.0));
    if json {
        let list: Vec<_> = reports.iter().map(|(n, r)| json!({"name": n, "result": r})).collect();
        out!("{}", serde_json::to_string(&list)?);
        return Ok(());
    }
    if reports.is_empty() {
        out!("no running arrays");
    }
    for (name, result) in &reports {
        if let Some(result) = result {
            out_part!("{}", result_text(name, result));
        } else {
            out!("{name}: no sync action running");
        }
    }
    Ok(())
}
