//! `uraid assemble --update`: mdadm's `--assemble --update` on a stopped array's superblocks
//! (a new name, homehost or UUID, a full resync at the next start, md's bad block log added
//! or removed, a reshape in progress reverted), decided by
//! `uraid_format::grow::check_update` and written to every member in a slot and every spare,
//! each superblock and bitmap superblock with the next event count. The data is not touched.
//!
//! mdadm's words, with the new value after `=` where mdadm takes it from another option
//! (`--name`, `--homehost`, `--uuid`, which uraid's assemble uses to choose the array):
//! `name=NEW`, `homehost[=HOST]` (default: this machine's name, as mdadm), `uuid[=UUID]`
//! (default: a random one, as mdadm), `resync`, `bbl`, `no-bbl`, `revert-reshape` (the
//! reshape in progress goes back from where it is: `uraid grow --continue` or the kernel
//! runs it; `uraid_format::grow::reshape::reverted`). A clone of an array's
//! disks (dd) has the same UUID as the original: `uuid` tells the two apart.

use crate::cmd::grow::{Stopped, bitmap_at, now_seconds, write_synced};
use crate::cmd::md_meta::SUPERBLOCK_OFFSET_BYTES;
use crate::cmd::monitor_mail::host_name;
use crate::cmd::scan::Selection;
use anyhow::{Context as _, bail};
use std::path::Path;
use uraid_format::assemble::AssemblyPlan;
use uraid_format::grow::reshape::{ReshapeProgress, RevertError, reverted};
use uraid_format::grow::{
    Update, check_member_update, check_update, updated_bitmap, updated_superblock,
};
use uraid_format::{Superblock1, Uuid};
use uraid_md::members::layout_name;

/// mdadm's update words uraid takes.
pub const WORDS: &str =
    "name=NEW, homehost[=HOST], uuid[=UUID], resync, bbl, no-bbl, revert-reshape";

/// Makes the update `word` to the stopped array the devices form, and says what it did.
pub fn run(select: &Selection, given: &[String], word: &str, json: bool) -> anyhow::Result<()> {
    let mut update = parse(word)?;
    let revert = update == Update::RevertReshape;
    if revert {
        copy_to_revertible(select, given, json)?;
    }
    let stopped = Stopped::open(select, given, "assemble --update", revert)?;
    let plan = &stopped.plan;
    let grown = stopped.members()?;
    let first = &grown[0];
    let bitmap = if first.own.has_bitmap() {
        let name = &first.member.name;
        let (header, _) = uraid_md::members::read_bitmap(Path::new(name), &first.own)
            .map_err(|e| anyhow::anyhow!("{name}: its bitmap: {e}"))?;
        Some(header)
    } else {
        None
    };
    if let (Update::Bbl { bitmap_sectors }, Some(header)) = (&mut update, &bitmap) {
        *bitmap_sectors = header.reserved_bytes() as u64 / 512;
    }
    let cannot = || format!("cannot update {}", plan.name);
    check_update(plan, &first.own, &update).with_context(cannot)?;
    for g in &grown {
        check_member_update(&g.own, &update)
            .with_context(|| g.member.name.clone())
            .with_context(cannot)?;
    }
    let events = plan.events + 1;
    let now = now_seconds();
    if let Some(header) = &bitmap {
        let bitmap = updated_bitmap(header, first.own.events, &update, events);
        for g in &grown {
            write_synced(g, &bitmap.encode(), bitmap_at(&g.own)?).context("writing the bitmap")?;
        }
    }
    let mut updated = None;
    let had_bbl = grown.iter().filter(|g| g.own.bblog_size_sectors > 0).count();
    for g in &grown {
        let sb = updated_superblock(&g.own, &update, events, now)?;
        write_synced(g, &sb.encode(), SUPERBLOCK_OFFSET_BYTES).context("writing the superblock")?;
        updated = Some(sb);
    }
    let sb = updated.expect("an array has a member");
    let done = Done { word, update: &update, sb: &sb, written: grown.len(), had_bbl };
    tell(plan, &done, json);
    Ok(())
}

/// A revert goes back from a whole number of the stripes it goes back to (`RevertError::
/// Misaligned`): the reshape first copies on to the next one, a stripe at a time (mdadm
/// refuses, saying to assemble the array and stop it again).
fn copy_to_revertible(select: &Selection, given: &[String], json: bool) -> anyhow::Result<()> {
    let stopped = Stopped::open(select, given, "assemble --update", true)?;
    let first = &stopped.members()?[0];
    let cannot = || format!("cannot update {}", stopped.plan.name);
    check_update(&stopped.plan, &first.own, &Update::RevertReshape).with_context(cannot)?;
    let Err(RevertError::Misaligned { position_sectors, stripe_sectors }) = reverted(&first.own)
    else {
        return Ok(());
    };
    let name = &stopped.plan.name;
    let copied = crate::cmd::reshape::resume(&stopped, Some(stripe_sectors))?;
    if !copied.stopped_early {
        bail!(
            "{name}: the reshape finished on its way from array sector {position_sectors} to a \
             whole number of the {stripe_sectors}-sector stripes it would go back to: nothing \
             is left to revert (reshape it back with uraid grow)"
        );
    }
    if !json {
        out!(
            "{name}: the reshape copied on from array sector {position_sectors} to a whole \
             number of the {stripe_sectors}-sector stripes it goes back to ({} {})",
            copied.windows,
            if copied.windows == 1 { "window" } else { "windows" }
        );
    }
    Ok(())
}

/// What an update wrote, for `tell`: the last member's new superblock stands for all.
struct Done<'a> {
    word: &'a str,
    update: &'a Update,
    sb: &'a Superblock1,
    written: usize,
    /// Members that had a bad block log before.
    had_bbl: usize,
}

fn tell(plan: &AssemblyPlan, done: &Done<'_>, json: bool) {
    let Done { word, update, sb, written, had_bbl } = *done;
    let events = sb.events;
    let bbl_offset = (sb.bblog_size_sectors > 0).then_some(sb.bblog_offset_sectors);
    if json {
        let json = serde_json::json!({
            "array": plan.name,
            "update": word,
            "name": sb.name(),
            "uuid": sb.set_uuid.to_string(),
            "events": events,
            "resync_offset_sectors": sb.resync_offset_sectors,
            "bad_block_log_offset_sectors": bbl_offset,
            "members_written": written,
            "reshape_position_sectors": ReshapeProgress::of(sb)
                .ok()
                .flatten()
                .map(|p| p.position_sectors),
        });
        out!("{json}");
        return;
    }
    let what = match update {
        Update::Name(_) | Update::Homehost(_) => format!("name {:?} -> {:?}", plan.name, sb.name()),
        Update::Uuid(_) => format!("UUID {} -> {}", plan.uuid, sb.set_uuid),
        Update::Resync if sb.has_bitmap() => "marked for a resync at its next start: of what \
            its bitmap marks, as md resyncs it (grow --bitmap none first for all of it)"
            .to_owned(),
        Update::Resync => "marked for a full resync at its next start".to_owned(),
        Update::Bbl { .. } => format!(
            "a bad block log of 512 entries {} sectors past the superblock on {} members \
             ({had_bbl} had one and keep it)",
            bbl_offset.unwrap_or_default(),
            written - had_bbl
        ),
        Update::NoBbl => format!("no bad block log ({had_bbl} members had one)"),
        Update::RevertReshape => reverted_text(sb),
    };
    out!("{}: {what} ({written} members written, events {events})", plan.name);
}

/// What a revert left: the reshape going back, or none.
fn reverted_text(sb: &Superblock1) -> String {
    let Ok(Some(p)) = ReshapeProgress::of(sb) else {
        return format!("the reshape is cancelled (nothing had moved): {} members", sb.raid_disks);
    };
    let level = sb.level;
    format!(
        "the reshape goes back from array sector {}: from {} to {} members, {} to {}, {}K to \
         {}K chunks, data offset {} -> {} sectors; `uraid grow --continue` runs it (or md, \
         assembling the array)",
        p.position_sectors,
        p.old_raid_disks,
        p.new_raid_disks,
        layout_name(level, sb.layout),
        layout_name(level, p.new_layout),
        sb.chunk_sectors / 2,
        p.new_chunk_sectors / 2,
        sb.data_offset_sectors,
        sb.data_offset_sectors.saturating_add_signed(sb.new_offset_sectors.into()),
    )
}

/// An update word: mdadm's, with its value after `=`.
fn parse(word: &str) -> anyhow::Result<Update> {
    let (key, value) = match word.split_once('=') {
        Some((key, value)) => (key, Some(value.to_owned())),
        None => (word, None),
    };
    Ok(match (key, value) {
        ("name", Some(name)) => Update::Name(name),
        ("name", None) => bail!("--update name needs the new name: name=NEW"),
        // This machine's name by default, as mdadm's (gethostname).
        ("homehost", host) => Update::Homehost(host.unwrap_or_else(host_name)),
        ("uuid", Some(uuid)) => Update::Uuid(uuid.parse::<Uuid>()?),
        ("uuid", None) => Update::Uuid(crate::cmd::create::random_uuid()?),
        ("resync", None) => Update::Resync,
        ("bbl", None) => Update::Bbl { bitmap_sectors: 0 },
        ("no-bbl", None) => Update::NoBbl,
        ("revert-reshape", None) => Update::RevertReshape,
        ("force-no-bbl", None) => bail!(
            "--update force-no-bbl is not offered: a listed range holds what a failed write \
             left, which only the log keeps from being read as data (replace the member and its \
             log empties, then no-bbl)"
        ),
        _ => bail!("--update {word}: uraid takes {WORDS} (mdadm's others are not offered)"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_mdadms_with_their_values() {
        assert_eq!(parse("name=data").unwrap(), Update::Name("data".into()));
        assert_eq!(parse("homehost=box").unwrap(), Update::Homehost("box".into()));
        assert_eq!(parse("resync").unwrap(), Update::Resync);
        assert_eq!(parse("no-bbl").unwrap(), Update::NoBbl);
        assert!(matches!(parse("bbl").unwrap(), Update::Bbl { .. }));
        let uuid = "eb42de13:44e23c33:a6be9334:ca81223a";
        assert_eq!(parse(&format!("uuid={uuid}")).unwrap(), Update::Uuid(uuid.parse().unwrap()));
        assert!(matches!(parse("uuid").unwrap(), Update::Uuid(_)));
        assert!(matches!(parse("homehost").unwrap(), Update::Homehost(h) if !h.is_empty()));
        assert_eq!(parse("revert-reshape").unwrap(), Update::RevertReshape);
        for bad in ["name", "resync=1", "bbl=8", "force-no-bbl", "uuid=xyz", "summaries"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
