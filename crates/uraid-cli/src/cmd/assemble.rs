//! `uraid assemble`: find the array the members form (md's rules, `uraid_format::assemble`),
//! print the plan, and with `-o` read the whole contents through the engine. Members are only
//! read: a refusal, like a success, leaves them byte for byte as they were.

use crate::cmd::assemble_read::read_array;
use crate::cmd::md_meta::{chunk_text, layout_name, read_candidate_to_assemble};
use crate::cmd::scan::Selected;
use anyhow::{Context, bail, ensure};
use clap::Args;
use serde_json::{Value, json};
use std::fmt::Write as _;
use std::io::{BufWriter, IsTerminal};
use std::path::{Path, PathBuf};
use uraid_format::assemble::{
    AssembleError, AssembleOptions, AssemblyPlan, Candidate, PlannedMember, plan,
};
use uraid_io::{same_file_message, same_file_twice};

#[derive(Args)]
#[command(
    about = "Assemble an md v1.2 array from its members and optionally read its contents",
    long_about = "Assemble an md v1.2 array from its members with md's rules: members are \
ordered by the role in their superblocks, members with an older event count are left out \
(they would be rebuild targets), and the array runs degraded within its redundancy. Refused, \
naming the member: members of another array, a corrupt or unreadable superblock, a member too \
small, two members in one slot or two devices of one device number, too many missing \
members (unless --force: below), and a \
dirty degraded array (unless --force). Prints the plan; with -o, reads the whole array through the engine (rebuilding \
missing members from parity) and writes it out. Members are never written, but with --update \
(mdadm's --assemble --update, on a stopped array): name=NEW, homehost[=HOST] (default: this \
machine's name), uuid[=UUID] (default: a random one; a clone of an array's disks is told \
apart so), resync (a resync at the next start: of what the bitmap marks where there is \
one, as md; of everything without), bbl and no-bbl (md's bad block log), revert-reshape (a \
reshape in progress goes back from where it is, copied on a few stripes first when its \
position is not one it can go back from; `uraid grow --continue` or the kernel then runs it; \
one that moved nothing is cancelled); each member's superblock and bitmap \
superblock are rewritten with the next event count. A new UUID needs the array whole and \
clean, a resync every member.",
    after_help = "Example:\n  uraid assemble m0.img m1.img m3.img m4.img m5.img\n  uraid \
assemble --json -o array.img /dev/sdb /dev/sdc /dev/sdd\n  \
uraid assemble --update name=backup /dev/sdb /dev/sdc /dev/sdd"
)]
pub struct AssembleArgs {
    #[command(flatten)]
    select: crate::cmd::scan::Selection,
    /// mdadm's --force: start a dirty degraded array (parity may not match: data rebuilt
    /// from it may be wrong), and when more members are stale than the array survives (they
    /// failed one after another), bring the freshest of them back until it can run (blocks
    /// written after they dropped out read back old).
    #[arg(short, long)]
    force: bool,
    /// Print the plan as JSON.
    #[arg(long)]
    json: bool,
    /// Read the array's contents and write them to FILE (`-` for standard output).
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Rewrite the stopped array's superblocks (mdadm's --update): name=NEW,
    /// homehost[=HOST], uuid[=UUID], resync, bbl, no-bbl, revert-reshape.
    #[arg(short = 'U', long, value_name = "WHAT", conflicts_with_all = ["output", "force"])]
    update: Option<String>,
    /// Member devices or image files, in any order (with --config or --scan: its DEVICE
    /// lines' when none are given).
    #[arg(required_unless_present_any = ["config", "scan"])]
    members: Vec<String>,
}

/// Whether the members' superblocks say md's own PPL (`--consistency-policy=ppl`).
fn has_md_ppl(candidates: &[Candidate]) -> bool {
    candidates.iter().any(|c| {
        c.superblock_area
            .as_ref()
            .ok()
            .and_then(|a| uraid_format::Superblock1::decode(a).ok())
            .is_some_and(|sb| sb.ppl().is_some())
    })
}

pub fn run(args: &AssembleArgs) -> anyhow::Result<()> {
    if let Some(word) = &args.update {
        return crate::cmd::update::run(&args.select, &args.members, word, args.json);
    }
    let Selected { uuid, members } = args.select.resolve(&args.members)?;
    let members = &members;
    let options =
        AssembleOptions { uuid, force: args.force, force_stale: args.force, ..Default::default() };
    if let Some((i, j)) = same_file_twice(members) {
        bail!("assembly refused: {}", same_file_message(&members[i], &members[j]));
    }
    if args.output.is_some() {
        super::output::refuse_output_over_members(args.output.as_deref(), members)?;
    }
    let candidates: Vec<_> = members.iter().map(|path| read_candidate_to_assemble(path)).collect();
    let plan = match plan(&candidates, &options) {
        Err(e @ AssembleError::DirtyDegraded { .. }) if has_md_ppl(&candidates) => {
            // --force would read the stripes md's log mends as they are: say what mends them.
            return Err(anyhow::Error::new(e).context(
                "assembly refused (the array has md's partial parity log: `uraid serve` replays \
                 it first, as md does, and then starts it degraded without --force)",
            ));
        }
        other => other.context("assembly refused")?,
    };
    let to_stdout = args.output.as_deref() == Some(std::path::Path::new("-"));
    // The plan goes to stderr when the contents go to stdout.
    let report = if args.json {
        serde_json::to_string_pretty(&plan_json(&plan))? + "\n"
    } else {
        plan_text(&plan)
    };
    if to_stdout {
        eprint!("{report}");
    } else {
        out_part!("{report}");
    }
    let Some(path) = &args.output else { return Ok(()) };
    // md's own members cannot be assembled twice; a served array's members could be read, but
    // they change under the read and the server's cache holds writes not yet on them.
    if let Some(busy) = members.iter().find(|p| uraid_io::held_by_a_server(Path::new(p))) {
        bail!(
            "{busy} is in use: a running uraid serve holds it, so its array's contents would \
             be read torn (writes land during the read, and some are still in the server's \
             cache); read the served export instead (nbdcopy), or stop the array first"
        );
    }
    let bytes = if to_stdout {
        let stdout = std::io::stdout();
        ensure!(!stdout.is_terminal(), "refusing to write array contents to a terminal");
        read_array(&plan, &mut BufWriter::with_capacity(4 << 20, stdout.lock()))?
    } else {
        let mut bytes = 0;
        super::output::write_file(path, |out| {
            bytes = read_array(&plan, out)?;
            Ok(())
        })?;
        bytes
    };
    say!("uraid assemble: wrote {bytes} bytes of array contents");
    Ok(())
}

fn member_json(member: &PlannedMember) -> Value {
    json!({
        "member": member.name,
        "dev_number": member.dev_number,
        "device_uuid": member.device_uuid.to_string(),
        "events": member.events,
        "data_offset_sectors": member.data_offset_sectors,
        "recovery_offset_sectors": member.recovery_offset_sectors,
        "forced_from_events": member.forced_from_events,
    })
}

fn plan_json(plan: &AssemblyPlan) -> Value {
    let slots: Vec<Value> = plan
        .slots
        .iter()
        .map(|slot| slot.as_ref().map_or(Value::String("missing".into()), member_json))
        .collect();
    let list = |members: &[PlannedMember]| members.iter().map(member_json).collect::<Vec<_>>();
    json!({
        "array_uuid": plan.uuid.to_string(),
        "name": plan.name,
        "level": plan.level.to_md(),
        "layout": layout_name(plan.level, plan.layout),
        "layout_number": plan.layout,
        "chunk_bytes": u64::from(plan.chunk_sectors) * 512,
        "raid_disks": plan.raid_disks,
        "component_size_sectors": plan.size_sectors,
        "array_size_bytes": plan.array_sectors() * 512,
        "events": plan.events,
        "clean": plan.is_clean(),
        "resync_offset_sectors": plan.resync_offset_sectors,
        "bitmap": plan.has_bitmap(),
        "slots": slots,
        "missing_slots": plan.missing_slots(),
        "stale": list(&plan.stale),
        "spares": list(&plan.spares),
        "faulty": list(&plan.faulty),
        "forced": plan.forced,
    })
}

fn plan_text(plan: &AssemblyPlan) -> String {
    let state = if plan.is_clean() {
        "clean".to_owned()
    } else {
        format!("active, needs resync from sector {}", plan.resync_offset_sectors)
    };
    let missing = plan.missing_slots();
    let mut text = format!(
        "Array UUID : {}\nName : {}\nRaid Level : {}\nLayout : {}\nChunk Size : {}\n\
         Raid Devices : {}\nArray Size : {} KiB\nComponent Size : {} sectors\nEvents : {}\n\
         State : {state}{}\nBitmap : {}\nDegraded : {} of {} tolerated\n",
        plan.uuid,
        plan.name,
        plan.level,
        layout_name(plan.level, plan.layout),
        chunk_text(plan.chunk_sectors),
        plan.raid_disks,
        plan.array_sectors() / 2,
        plan.size_sectors,
        plan.events,
        if plan.forced { " (started dirty and degraded by --force)" } else { "" },
        if plan.has_bitmap() { "internal" } else { "none" },
        missing.len(),
        plan.max_degraded(),
    );
    for (slot, member) in plan.slots.iter().enumerate() {
        let line = match member {
            Some(m) => match (m.recovery_offset_sectors, m.forced_from_events) {
                (_, Some(events)) => format!(
                    "{} (stale, brought back by --force from events {events}: blocks written \
                     since it dropped out read back old)",
                    m.name
                ),
                (Some(at), None) => {
                    format!("{} (recovering, in sync below sector {at})", m.name)
                }
                (None, None) => {
                    format!("{} (data offset {} sectors)", m.name, m.data_offset_sectors)
                }
            },
            None => "missing".to_owned(),
        };
        writeln!(text, "Slot {slot} : {line}").expect("writing to a String");
    }
    for m in &plan.stale {
        let why = format!("events {} < {}: left out, a rebuild target", m.events, plan.events);
        writeln!(text, "Stale : {} ({why})", m.name).expect("writing to a String");
    }
    for m in &plan.spares {
        writeln!(text, "Spare : {}", m.name).expect("writing to a String");
    }
    for m in &plan.faulty {
        writeln!(text, "Faulty : {}", m.name).expect("writing to a String");
    }
    text
}
