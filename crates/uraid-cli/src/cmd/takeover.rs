//! `uraid grow --level`: md's takeovers among RAID4, 5 and 6 on a stopped array
//! (`uraid_format::grow::takeover`). Nothing moves: RAID4 or RAID5 to RAID6 takes one more
//! member, the next `uraid serve` (or the kernel) building Q on it as it rebuilds a spare;
//! RAID6 to RAID5 frees Q's member as a spare; RAID4 and parity-last RAID5 are one layout.
//! Where mdadm restripes first (a rotating RAID6 to its `-6` layout, a RAID5 to parity-last
//! for RAID4), so does this, by the reshape of `uraid grow --layout`, then takes over.

use crate::cmd::grow::{Stopped, now_seconds, write_synced};
use crate::cmd::md_meta::SUPERBLOCK_OFFSET_BYTES;
use crate::cmd::reshape::{BitmapStamp, Reshaped};
use crate::cmd::scan::Selection;
use anyhow::{Context as _, bail};
use uraid_core::{Geometry, Layout, SECTOR_BYTES};
use uraid_format::Level;
use uraid_format::assemble::{AssemblyPlan, PlannedMember};
use uraid_format::grow::reshape::NewShape;
use uraid_format::grow::takeover::{
    SlotChange, Takeover, plan_takeover, restripe_after, restripe_before, taken_over_superblock,
};

/// What `--level` asks: the level and, if given, `--raid-devices`.
pub(crate) struct LevelChange<'a> {
    pub(crate) level: &'a str,
    /// mdadm's `--layout` with `--level 5`: the RAID5 layout to end in.
    pub(crate) layout: Option<&'a str>,
    pub(crate) raid_devices: Option<u32>,
    pub(crate) select: &'a Selection,
    pub(crate) members: &'a [String],
    pub(crate) json: bool,
}

/// Takes the array over to the level asked, restriping first (or after) where mdadm would.
pub(crate) fn run(change: &LevelChange<'_>, stopped: Stopped) -> anyhow::Result<()> {
    let level = match change.level.trim_start_matches("raid") {
        "4" => Level::Raid4,
        "5" => Level::Raid5,
        "6" => Level::Raid6,
        other => bail!("--level {other}: uraid grow takes RAID4, 5 and 6 among each other"),
    };
    // RAID5's layout to end in, or RAID6's: restriped to it after the takeover, Q built as
    // it goes (mdadm's one pass).
    let asked_layout = match change.layout {
        Some(name) if level != Level::Raid4 => {
            let layout = Layout::parse(name)?;
            layout.check_level(uraid_md::members::core_level(level).expect("RAID5 or 6"))?;
            Some(layout.md_number())
        }
        Some(_) => bail!("--layout with --level goes to RAID5 or RAID6 (RAID4 has one layout)"),
        None => None,
    };
    let raid5_layout = asked_layout.filter(|_| level == Level::Raid5);
    if let Some(layout) = restripe_before(&stopped.plan, level, raid5_layout) {
        return restripe_then_take_over(change, stopped, level, layout);
    }
    let before = stopped.plan.clone();
    let t =
        take_over(&stopped, level, change.raid_devices).with_context(|| cannot(&before, level))?;
    let Some(layout) = restripe_after(&before, level, asked_layout) else {
        tell(change.json, &before, None, &t);
        return Ok(());
    };
    drop(stopped);
    let stopped = Stopped::open(change.select, change.members, "grow", false)?;
    let new = NewShape { layout, ..same_shape(&stopped.plan) };
    let r = crate::cmd::reshape::start(&stopped, new).map_err(|e| {
        // The takeover stands: say so, and why the restripe did not follow.
        tell(change.json, &before, None, &t);
        let name = uraid_md::members::layout_name(level, layout);
        e.context(format!("{}: taken over, but not restriped to {name}", before.name))
    })?;
    tell(change.json, &before, Some(Restriped::After(&r)), &t);
    Ok(())
}

fn cannot(plan: &AssemblyPlan, level: Level) -> String {
    format!("cannot take {} over to RAID{}", plan.name, level.to_md())
}

/// The plan's own shape, for a restripe that changes the layout alone.
fn same_shape(plan: &AssemblyPlan) -> NewShape {
    let (raid_disks, layout, chunk_sectors) = (plan.raid_disks, plan.layout, plan.chunk_sectors);
    NewShape { raid_disks, layout, chunk_sectors, ..NewShape::default() }
}

/// mdadm's restripe to `layout` before the takeover, which is decided first on the plan as
/// the restripe would leave it, so that a refusal moves nothing.
fn restripe_then_take_over(
    change: &LevelChange<'_>,
    stopped: Stopped,
    level: Level,
    layout: u32,
) -> anyhow::Result<()> {
    let plan = &stopped.plan;
    let refused = || cannot(plan, level);
    let restriped_plan = AssemblyPlan { layout, ..plan.clone() };
    let grown = stopped.members()?;
    let avail = |m: &PlannedMember| avail_sectors(&grown, m);
    plan_takeover(&restriped_plan, level, change.raid_devices, &avail).with_context(refused)?;
    drop(grown);
    let new = NewShape { layout, ..same_shape(plan) };
    let r = crate::cmd::reshape::start(&stopped, new).with_context(refused)?;
    if r.stopped_early {
        crate::cmd::reshape::tell(plan, &r, change.json);
        if !change.json {
            out!("{}: then `uraid grow --level {}` takes it over", plan.name, level.to_md());
        }
        return Ok(());
    }
    let before = stopped.plan.clone();
    drop(stopped);
    let stopped = Stopped::open(change.select, change.members, "grow", false)?;
    let t =
        take_over(&stopped, level, change.raid_devices).with_context(|| cannot(&before, level))?;
    tell(change.json, &before, Some(Restriped::Before(&r)), &t);
    Ok(())
}

/// A restripe that went with the takeover: before it (mdadm's way to a layout with a kin) or
/// after it (a RAID4 taken to RAID5 in another layout than parity-last).
#[derive(Clone, Copy)]
enum Restriped<'a> {
    Before(&'a Reshaped),
    After(&'a Reshaped),
}

fn avail_sectors(grown: &[crate::cmd::grow::Grown<'_>], m: &PlannedMember) -> u64 {
    let g = grown.iter().find(|g| g.member.candidate == m.candidate).expect("planned");
    g.avail_sectors
}

/// Writes the takeover of `stopped` to `level` into every member's and spare's superblock.
fn take_over(stopped: &Stopped, level: Level, asked: Option<u32>) -> anyhow::Result<Takeover> {
    let plan = &stopped.plan;
    let grown = stopped.members()?;
    let t = plan_takeover(plan, level, asked, &|m| avail_sectors(&grown, m))?;
    // Before anything is written: a shape the geometry refuses (a RAID6 of fewer than 4 or
    // more than 256 members) is never recorded.
    let core_level = uraid_md::members::core_level(t.level).expect("RAID4, 5 or 6");
    let layout = Layout::from_md(core_level, t.layout)?;
    let chunk_bytes = u64::from(plan.chunk_sectors) * SECTOR_BYTES;
    Geometry::new(core_level, layout, t.raid_disks as usize, chunk_bytes)?;
    // Every member and spare: the roles table and the event count are the array's.
    let events = plan.events + 1;
    BitmapStamp::new(plan, &grown)?.write(&grown, events)?;
    let now = now_seconds();
    for g in &grown {
        let sb = taken_over_superblock(&g.own, &t, events, now);
        write_synced(g, &sb.encode(), SUPERBLOCK_OFFSET_BYTES).context("writing the superblock")?;
    }
    Ok(t)
}

/// Prints what changed: `plan` as it was, the takeover and any restripe with it.
fn tell(json: bool, plan: &AssemblyPlan, restriped: Option<Restriped<'_>>, t: &Takeover) {
    let reshaped = restriped.map(|(Restriped::Before(r) | Restriped::After(r))| r);
    let layout = uraid_md::members::layout_name(t.level, t.layout);
    let (q_member, spare) = match &t.slots {
        SlotChange::AddsQ(q) => (Some(&q.name), None),
        SlotChange::DropsQ(q) => (None, Some(&q.name)),
        SlotChange::Keeps => (None, None),
    };
    if json {
        let json = serde_json::json!({
            "array": plan.name,
            "uuid": plan.uuid.to_string(),
            "old_level": plan.level.to_md(),
            "level": t.level.to_md(),
            "layout": layout,
            "raid_disks": t.raid_disks,
            "q_member": q_member,
            "spare": spare,
            "restriped": reshaped.map(|r| crate::cmd::reshape::json(plan, r)),
        });
        out!("{json}");
        return;
    }
    let restriped_line = |r: &Reshaped| {
        let (from, to) = r.layouts;
        if r.stopped_early {
            out!(
                "{}: the restripe from {from} to {to} stopped after {} windows as asked: `uraid \
                 grow --continue` goes on",
                plan.name,
                r.windows
            );
        } else {
            out!("{}: restriped from {from} to {to} in {} windows", plan.name, r.windows);
        }
    };
    if let Some(Restriped::Before(r)) = restriped {
        restriped_line(r);
    }
    let what = match &t.slots {
        SlotChange::AddsQ(q) if reshaped.is_some_and(|r| !r.stopped_early) => {
            format!(": {} becomes Q, built by the restripe", q.name)
        }
        SlotChange::AddsQ(q) if reshaped.is_some() => format!(
            ": {} becomes Q, built by the restripe as it goes (or, served first, as a rebuild)",
            q.name
        ),
        SlotChange::AddsQ(q) => format!(
            ": {} becomes Q, built when the array is next served (as a rebuild) or by a \
             restripe (`uraid grow --layout`)",
            q.name
        ),
        SlotChange::DropsQ(q) => format!(": {} held Q and is now a spare", q.name),
        SlotChange::Keeps => ", nothing moved (one layout on disk)".to_owned(),
    };
    let layout = if t.level == Level::Raid4 { String::new() } else { format!(" {layout}") };
    out!(
        "{}: RAID{} taken over to RAID{}{layout} with {} members{what}",
        plan.name,
        plan.level.to_md(),
        t.level.to_md(),
        t.raid_disks
    );
    if let Some(Restriped::After(r)) = restriped {
        restriped_line(r);
    }
}
