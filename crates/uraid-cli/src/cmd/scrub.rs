//! `uraid check` and `uraid repair`: md's scrub of a running array (sync_action "check" and
//! "repair"), started in the background and, with --wait, followed to its result; `uraid
//! idle` stops one (sync_action "idle").

use crate::args::parse_size;
use crate::cmd::control_client::{run_simple, send_ok, status_of};
use crate::cmd::watch::{Follow, bar_for, result_text};
use anyhow::bail;
use clap::Args;
use std::io::IsTerminal;
use uraid_md::control::{ControlRequest, ScrubSpan};

/// Flags shared by check and repair.
#[derive(Args)]
pub struct ScrubArgs {
    /// Follow the action to its end and print what it found.
    #[arg(long)]
    wait: bool,
    /// Print the array's answer (with --wait: the result) as JSON.
    #[arg(long)]
    json: bool,
    /// Begin this far into each member's data (md's sync_min; rounded down to a chunk): to
    /// scrub a large array a part at a time, or go on where an interrupted one stopped.
    #[arg(long, value_name = "SIZE")]
    from: Option<String>,
    /// End this far into each member's data (md's sync_max; rounded up to a chunk).
    #[arg(long, value_name = "SIZE")]
    to: Option<String>,
    /// The running array's name.
    name: String,
}

impl ScrubArgs {
    /// The part of each member asked for, in sectors (None: all of it).
    fn span(&self) -> anyhow::Result<Option<ScrubSpan>> {
        if self.from.is_none() && self.to.is_none() {
            return Ok(None);
        }
        let bytes = |size: &Option<String>| size.as_deref().map(parse_size).transpose();
        let from_sectors = bytes(&self.from)?.map_or(0, |b| b / 512);
        let to_sectors = bytes(&self.to)?.map_or(u64::MAX, |b| b.div_ceil(512));
        Ok(Some(ScrubSpan { from_sectors, to_sectors }))
    }
}

#[derive(Args)]
#[command(
    about = "Check a running array's parity in the background (md's sync_action check)",
    long_about = "Read every stripe of a running array and compare its parity with its data, \
as md's check does: mismatches are counted (md's mismatch_cnt) and recorded, nothing is \
written. On RAID6 the syndrome names the member holding the bad block when one block is \
wrong. The check runs in the background within the sync speed limits; --wait follows it \
(a progress bar on a terminal) and prints the result: mismatched sectors, where, which slot. \
--from and --to check part of each member (md's sync_min and sync_max): a large array a part \
a night, or the rest of one `uraid idle` stopped (its result says where it began and how \
far it got).",
    after_help = "Example:\n  uraid check --wait md0\n  \
uraid check md0 && uraid status --watch md0\n  \
uraid check --wait --from 0 --to 1T md0; uraid check --wait --from 1T --to 2T md0"
)]
pub struct CheckArgs {
    #[command(flatten)]
    scrub: ScrubArgs,
}

#[derive(Args)]
#[command(
    about = "Check a running array's parity and rewrite what does not match (md's repair)",
    long_about = "Like check, but each stripe whose parity does not match its data has its \
parity rewritten from the data, as md's repair does. On RAID6, when the syndrome names one \
member as holding the bad block, that block is rebuilt instead. Runs in the background; \
--wait follows it and prints the result.",
    after_help = "Example:\n  uraid repair --wait md0"
)]
pub struct RepairArgs {
    #[command(flatten)]
    scrub: ScrubArgs,
}

pub fn run_check(args: &CheckArgs) -> anyhow::Result<()> {
    let span = args.scrub.span()?;
    run(&args.scrub, &ControlRequest::Check { span }, "check")
}

pub fn run_repair(args: &RepairArgs) -> anyhow::Result<()> {
    let span = args.scrub.span()?;
    run(&args.scrub, &ControlRequest::Repair { span }, "repair")
}

fn run(args: &ScrubArgs, req: &ControlRequest, action: &str) -> anyhow::Result<()> {
    let name = &args.name;
    if !args.wait {
        let response = send_ok(name, req, args.json)?;
        if !args.json {
            let message = response.message.unwrap_or_else(|| format!("{action} started"));
            out!("{name}: {message}");
        }
        return Ok(());
    }
    let before = status_of(name)?.last_sync;
    // With --wait, JSON is the result at the end, not this answer.
    send_ok(name, req, false)?;
    let follow = Follow { name: name.clone(), action: action.to_owned(), before };
    let result = follow.run(&bar_for(name, action, std::io::stdout().is_terminal()))?;
    if args.json {
        out!("{}", serde_json::to_string(&result)?);
    } else {
        out_part!("{}", result_text(name, &result));
    }
    if result.outcome != "done" {
        bail!("{name}: the {action} did not complete: {}", result.outcome);
    }
    Ok(())
}

#[derive(Args)]
#[command(
    about = "Stop a running check or repair, or thaw a frozen array (md's sync_action idle)",
    long_about = "Stop the check or repair a running array is doing (or has queued), where it \
is, as writing idle to md's sync_action does, and print what it covered and found. A resync, \
recovery or replacement is refused: md would start it again at once. Stopping when nothing \
runs is not an error. On an array `uraid freeze` froze, idle thaws it instead (as md's idle \
does), and the resync, recovery or replacement that waits goes on from where it stopped.",
    after_help = "Example:\n  uraid check md0 && uraid idle md0"
)]
pub struct IdleArgs {
    /// Print the array's answer as JSON.
    #[arg(long)]
    json: bool,
    /// The running array's name.
    name: String,
}

pub fn run_idle(args: &IdleArgs) -> anyhow::Result<()> {
    let name = &args.name;
    let before = status_of(name)?;
    let response = send_ok(name, &ControlRequest::Idle, args.json)?;
    let message = response.message.unwrap_or_default();
    if !args.json {
        out!("{name}: {message}");
    }
    let scrub = |action: &str| action == "check" || action == "repair";
    let Some(sync) = before.sync.filter(|s| message.starts_with("stopping") && scrub(&s.action))
    else {
        return Ok(());
    };
    // What it covered and found before it stopped.
    let follow = Follow { name: name.clone(), action: sync.action, before: before.last_sync };
    let result = follow.run(&indicatif::ProgressBar::hidden())?;
    if !args.json {
        out_part!("{}", result_text(name, &result));
    }
    Ok(())
}

#[derive(Args)]
#[command(
    about = "Pause a running array's resync, recovery, check or repair (md's sync_action frozen)",
    long_about = "Stop whatever sync action a running array is doing, where it is, and start \
none until `uraid idle` thaws it, as writing frozen to md's sync_action does: to keep a rebuild \
off the disks during the day's load, or to add several spares before any is rebuilt. A resync, \
recovery or replacement goes on from where it stopped when thawed (its progress recorded as a \
stop records it); a check or repair is dropped, as md drops it. What a failure or an added \
spare queues meanwhile waits too. Asking for a check or repair thaws the array as well, as in \
md. Not kept across a restart. `uraid detail` says \"frozen\" in its state.",
    after_help = "Example:\n  uraid freeze md0; uraid add md0 /dev/sdg /dev/sdh; uraid idle md0"
)]
pub struct FreezeArgs {
    /// Print the array's answer as JSON.
    #[arg(long)]
    json: bool,
    /// The running array's name.
    name: String,
}

pub fn run_freeze(args: &FreezeArgs) -> anyhow::Result<()> {
    run_simple(&args.name, &ControlRequest::Freeze, args.json)
}

#[derive(Args)]
#[command(
    about = "Wait for running arrays' resync, recovery, check or repair to finish (mdadm --wait)",
    long_about = "For each array named, wait until no resync, recovery, replacement, check or \
repair runs or is queued, then print what the last one did. As mdadm --wait, the exit status \
is 0 only if there was something to wait for on every array named (1 otherwise, or if one is \
not running).",
    after_help = "Example:\n  uraid add md0 /dev/sdg && uraid wait md0"
)]
pub struct WaitArgs {
    /// The running arrays' names.
    #[arg(required = true)]
    names: Vec<String>,
}

pub fn run_wait(args: &WaitArgs) -> anyhow::Result<()> {
    // What the array reports while an action runs or waits in its queue.
    let busy = |s: &uraid_md::status::ArrayStatus| s.sync.is_some() || s.sync_pending();
    let mut idle = Vec::new();
    for name in &args.names {
        let mut status = status_of(name)?;
        if !busy(&status) {
            out!("{name}: nothing to wait for (no resync, recovery, check or repair)");
            idle.push(name.as_str());
            continue;
        }
        let before = status.last_sync.clone();
        while busy(&status) {
            std::thread::sleep(std::time::Duration::from_millis(250));
            status = status_of(name)?;
        }
        let result = status.last_sync.filter(|last| Some(last) != before.as_ref());
        if let Some(result) = result {
            out_part!("{}", result_text(name, &result));
        } else {
            out!("{name}: done");
        }
    }
    if !idle.is_empty() {
        bail!("nothing to wait for on {} (mdadm --wait's failure)", idle.join(", "));
    }
    Ok(())
}
