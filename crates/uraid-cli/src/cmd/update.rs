//! `uraid assemble --update`: mdadm's `--assemble --update` on a stopped array's superblocks
//! (a new name, homehost or UUID, or a full resync at the next start), decided by
//! `uraid_format::grow::check_update` and written to every member in a slot and every spare,
//! each superblock and bitmap superblock with the next event count. The data is not touched.
//!
//! mdadm's words, with the new value after `=` where mdadm takes it from another option
//! (`--name`, `--homehost`, `--uuid`, which uraid's assemble uses to choose the array):
//! `name=NEW`, `homehost[=HOST]` (default: this machine's name, as mdadm), `uuid[=UUID]`
//! (default: a random one, as mdadm), `resync`. A clone of an array's disks (dd) has the
//! same UUID as the original: `uuid` tells the two apart.

use crate::cmd::grow::{Stopped, bitmap_at, now_seconds, write_synced};
use crate::cmd::md_meta::SUPERBLOCK_OFFSET_BYTES;
use crate::cmd::monitor_mail::host_name;
use crate::cmd::scan::Selection;
use anyhow::{Context as _, bail};
use std::path::Path;
use uraid_format::Uuid;
use uraid_format::grow::{Update, check_update, updated_bitmap, updated_superblock};

/// mdadm's update words uraid takes.
pub const WORDS: &str = "name=NEW, homehost[=HOST], uuid[=UUID], resync";

/// Makes the update `word` to the stopped array the devices form, and says what it did.
pub fn run(select: &Selection, given: &[String], word: &str, json: bool) -> anyhow::Result<()> {
    let update = parse(word)?;
    let stopped = Stopped::open(select, given, "assemble --update", false)?;
    let plan = &stopped.plan;
    let grown = stopped.members()?;
    let first = &grown[0];
    check_update(plan, &first.own, &update)
        .with_context(|| format!("cannot update {}", plan.name))?;
    let events = plan.events + 1;
    let now = now_seconds();
    if first.own.has_bitmap() {
        let name = &first.member.name;
        let (header, _) = uraid_md::members::read_bitmap(Path::new(name), &first.own)
            .map_err(|e| anyhow::anyhow!("{name}: its bitmap: {e}"))?;
        let bitmap = updated_bitmap(&header, first.own.events, &update, events);
        for g in &grown {
            write_synced(g, &bitmap.encode(), bitmap_at(&g.own)?).context("writing the bitmap")?;
        }
    }
    let mut updated = None;
    for g in &grown {
        let sb = updated_superblock(&g.own, &update, events, now)?;
        write_synced(g, &sb.encode(), SUPERBLOCK_OFFSET_BYTES).context("writing the superblock")?;
        updated = Some(sb);
    }
    let sb = updated.expect("an array has a member");
    if json {
        let json = serde_json::json!({
            "array": plan.name,
            "update": word,
            "name": sb.name(),
            "uuid": sb.set_uuid.to_string(),
            "events": events,
            "resync_offset_sectors": sb.resync_offset_sectors,
            "members_written": grown.len(),
        });
        out!("{json}");
        return Ok(());
    }
    let what = match &update {
        Update::Name(_) | Update::Homehost(_) => format!("name {:?} -> {:?}", plan.name, sb.name()),
        Update::Uuid(_) => format!("UUID {} -> {}", plan.uuid, sb.set_uuid),
        Update::Resync if sb.has_bitmap() => "marked for a resync at its next start: of what \
            its bitmap marks, as md resyncs it (grow --bitmap none first for all of it)"
            .to_owned(),
        Update::Resync => "marked for a full resync at its next start".to_owned(),
    };
    out!("{}: {what} ({} members written, events {events})", plan.name, grown.len());
    Ok(())
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
        let uuid = "eb42de13:44e23c33:a6be9334:ca81223a";
        assert_eq!(parse(&format!("uuid={uuid}")).unwrap(), Update::Uuid(uuid.parse().unwrap()));
        assert!(matches!(parse("uuid").unwrap(), Update::Uuid(_)));
        assert!(matches!(parse("homehost").unwrap(), Update::Homehost(h) if !h.is_empty()));
        for bad in ["name", "resync=1", "bbl", "uuid=xyz", "summaries"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
