//! The verbs that change a running array's members or its run: `fail`, `remove`, `add`,
//! `replace`, `stop` and `sync-speed`. Each is one request over the array's control socket
//! (`fail`, `remove` and `add` one per member given, in order, as mdadm takes several);
//! the array does the work and says what it did.

use crate::args::parse_size;
use crate::cmd::control_client::{run_simple, send_ok, status_of};
use anyhow::ensure;
use clap::Args;
use uraid_md::control::ControlRequest;

#[derive(Args)]
#[command(
    about = "Mark a member of a running array faulty (mdadm --fail)",
    long_about = "Mark a member of a running array faulty, as mdadm --fail does: the array \
stops using it and runs degraded; a hot spare, if any, is rebuilt in its place in the \
background. Refused when the array would lose more members than its redundancy allows. \
MEMBER is the path given at assemble or a slot number. Several are failed in the order \
given, stopping at the first the array refuses (as mdadm does).",
    after_help = "Example:\n  uraid fail md0 /dev/sdc\n  uraid fail md0 2\n  uraid fail md0 \
/dev/sdc /dev/sdd"
)]
pub struct FailArgs {
    /// Print the array's answer as JSON (one object per member).
    #[arg(long)]
    json: bool,
    /// The running array's name.
    name: String,
    /// The members: each its path as given at assemble, or its slot number.
    #[arg(required = true, value_name = "MEMBER")]
    members: Vec<String>,
}

pub fn run_fail(args: &FailArgs) -> anyhow::Result<()> {
    for member in &args.members {
        run_simple(&args.name, &ControlRequest::Fail { member: member.clone() }, args.json)?;
    }
    Ok(())
}

#[derive(Args)]
#[command(
    about = "Remove a failed member or a spare from a running array (mdadm --remove)",
    long_about = "Remove a member from a running array, as mdadm --remove does: only a member \
marked faulty or a hot spare can be removed; an active member must be failed first. Its \
superblock is left as it was, so it can be examined or added back. Several are removed in \
the order given, stopping at the first the array refuses; `failed` stands for every member \
marked faulty (mdadm's --remove failed).",
    after_help = "Example:\n  uraid remove md0 /dev/sdc\n  uraid remove md0 failed"
)]
pub struct RemoveArgs {
    /// Print the array's answer as JSON (one object per member).
    #[arg(long)]
    json: bool,
    /// The running array's name.
    name: String,
    /// The members: each its path as given at assemble, its slot number, or `failed`.
    #[arg(required = true, value_name = "MEMBER")]
    members: Vec<String>,
}

pub fn run_remove(args: &RemoveArgs) -> anyhow::Result<()> {
    let mut members = Vec::new();
    for member in &args.members {
        if member == FAILED {
            let faulty = status_of(&args.name)?.members.into_iter().filter(|m| m.state == "faulty");
            let found: Vec<String> = faulty.map(|m| m.path).collect();
            if found.is_empty() && !args.json {
                out!("{}: no faulty member to remove", args.name);
            }
            members.extend(found);
        } else {
            members.push(member.clone());
        }
    }
    for member in members {
        run_simple(&args.name, &ControlRequest::Remove { member }, args.json)?;
    }
    Ok(())
}

/// `remove`'s word for every faulty member, as mdadm's.
const FAILED: &str = "failed";

#[derive(Args)]
#[command(
    about = "Add a device to a running array: re-added, or a hot spare (mdadm --add)",
    long_about = "Add a device or image file to a running array, as mdadm --add does. A device \
that was a member of this array (failed, then removed) goes back into its old slot when the \
array has a write-intent bitmap that still holds every write it missed (md's re-add: its slot \
is empty, and the bitmap was not cleared since it left): it is rebuilt only where bits are \
set. Any other device becomes a hot spare, and when a slot is empty the array rebuilds onto \
it whole. Rebuilds run at once, in the background, within the sync speed limits (`uraid \
status --watch` follows them).",
    after_help = "Example:\n  uraid remove md0 /dev/sdc   # after it failed\n  uraid add md0 /dev/sdc      \
# re-added: rebuilt where it missed writes\n  uraid add md0 /dev/sdg      # a hot spare\n  uraid \
add md0 /dev/sdg /dev/sdh   # two, in this order\n  uraid status --watch md0"
)]
pub struct AddArgs {
    /// Print the array's answer as JSON (one object per device).
    #[arg(long)]
    json: bool,
    /// The running array's name.
    name: String,
    /// The devices or image files to add, in order (stopping at the first refused).
    #[arg(required = true, value_name = "PATH")]
    paths: Vec<String>,
    /// Add it even if it holds a member of another md array (that array loses it).
    #[arg(short, long)]
    force: bool,
}

pub fn run_add(args: &AddArgs) -> anyhow::Result<()> {
    for path in &args.paths {
        let request = ControlRequest::Add { path: path.clone(), force: args.force };
        run_simple(&args.name, &request, args.json)?;
    }
    Ok(())
}

#[derive(Args)]
#[command(
    about = "Copy a member to a new device, then retire it (mdadm --replace)",
    long_about = "Replace a member of a running array, as mdadm --replace --with does: the \
member is copied to the new device while it stays in service (every write goes to both), so \
redundancy never drops; a block the member cannot read is rebuilt from parity. When the copy \
is done the new device takes the slot and the old member is marked faulty, to be removed. If \
the new device fails, the member stays; if the member fails, the new device takes its slot \
and is rebuilt where the copy had not reached (and, by the bitmap, where writes missed it; \
without a bitmap, whole). A restart resumes the copy. Refused on a degraded array: \
add a spare to rebuild the empty slot first. Without --with a hot spare the array already has \
is used.",
    after_help = "Examples:\n  uraid replace md0 /dev/sdc --with /dev/sdg\n  \
uraid add md0 /dev/sdg && uraid replace md0 /dev/sdc"
)]
pub struct ReplaceArgs {
    /// Print the array's answer as JSON.
    #[arg(long)]
    json: bool,
    /// The running array's name.
    name: String,
    /// The member to replace: its path as given at assemble, or its slot number.
    member: String,
    /// The device or image file to copy onto; without it, one of the array's hot spares.
    #[arg(long, value_name = "PATH")]
    with: Option<String>,
    /// Copy onto it even if it holds a member of another md array (that array loses it).
    #[arg(short, long)]
    force: bool,
}

pub fn run_replace(args: &ReplaceArgs) -> anyhow::Result<()> {
    let req = ControlRequest::Replace {
        member: args.member.clone(),
        with: args.with.clone(),
        force: args.force,
    };
    run_simple(&args.name, &req, args.json)
}

#[derive(Args)]
#[command(
    about = "Stop a running array cleanly (mdadm --stop)",
    long_about = "Stop a running array: requests in flight finish, a running sync action \
records where it stopped (it resumes there at the next assemble), the bitmap is flushed and \
every member's superblock is marked clean.",
    after_help = "Example:\n  uraid stop md0"
)]
pub struct StopArgs {
    /// Print the array's answer as JSON.
    #[arg(long)]
    json: bool,
    /// The running array's name.
    name: String,
}

pub fn run_stop(args: &StopArgs) -> anyhow::Result<()> {
    run_simple(&args.name, &ControlRequest::Stop, args.json)
}

#[derive(Args)]
#[command(
    about = "Show or set a running array's sync speed limits (md's sync_speed_min/max)",
    long_about = "Show or set the speed limits of a running array's background sync \
(resync, recovery, check, repair), per member, as md's sync_speed_min and sync_speed_max: \
the sync runs at least at the minimum even under user I/O, and never above the maximum. \
Sizes are per second, with mdadm's units (a bare number is KiB); as in md's sysfs files, \
`system` or 0 puts back md's default (1000 KiB/s and 200000 KiB/s). Without --min or --max, \
prints the limits in force.",
    after_help = "Example:\n  uraid sync-speed md0 --min 50M --max 1G\n  uraid sync-speed md0"
)]
pub struct SyncSpeedArgs {
    /// Print the array's answer as JSON.
    #[arg(long)]
    json: bool,
    /// The sync's floor per member per second (50M, 100000 = KiB; system or 0: 1000 KiB/s).
    #[arg(long, value_name = "SIZE")]
    min: Option<String>,
    /// The sync's ceiling per member per second (1G, 200000 = KiB; system or 0: 200000 KiB/s).
    #[arg(long, value_name = "SIZE")]
    max: Option<String>,
    /// The running array's name.
    name: String,
}

pub fn run_sync_speed(args: &SyncSpeedArgs) -> anyhow::Result<()> {
    // md reads 0 in sync_speed_min/max as "the system's limit", and takes the word `system`
    // to put it back: a ceiling of 0 stalled a rebuild here before (about 1 MiB/s).
    let kib = |size: &Option<String>, system: u64| -> anyhow::Result<Option<u64>> {
        let kib = |s: &str| match s {
            "system" => Ok(system),
            s => parse_size(s).map(|bytes| match bytes / 1024 {
                0 => system,
                kib => kib,
            }),
        };
        size.as_deref().map(kib).transpose()
    };
    let (min_kib, max_kib) = (
        kib(&args.min, uraid_md::sync::DEFAULT_SPEED_MIN_KIB)?,
        kib(&args.max, uraid_md::sync::DEFAULT_SPEED_MAX_KIB)?,
    );
    if let (Some(min), Some(max)) = (min_kib, max_kib) {
        ensure!(min <= max, "--min ({min} KiB/s) is above --max ({max} KiB/s)");
    }
    let response = send_ok(&args.name, &ControlRequest::SyncSpeed { min_kib, max_kib }, args.json)?;
    if args.json {
        return Ok(());
    }
    match (response.status, response.message) {
        (Some(s), _) => out!(
            "{}: sync speed min {}K/sec, max {}K/sec",
            args.name,
            s.sync_speed_min_kib,
            s.sync_speed_max_kib
        ),
        (None, Some(message)) => out!("{}: {message}", args.name),
        (None, None) => out!("{}: sync-speed done", args.name),
    }
    Ok(())
}
