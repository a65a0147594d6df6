//! `uraid examine`: what `mdadm --examine` prints about each member's md v1.2 superblock, in
//! mdadm's words and format (so the two can be compared line by line), or as JSON.
//!
//! Members are opened read-only. A member without a valid superblock is reported with the
//! reason and makes the exit status non-zero; the other members are still examined.

use crate::cmd::md_meta::{chunk_text, layout_name, read_candidate};
use anyhow::bail;
use clap::Args;
use serde_json::{Value, json};
use std::fmt::Write as _;
use uraid_format::{DevRole, Level, MAX_SECTOR, Superblock1};

#[derive(Args)]
#[command(
    about = "Print the md superblock of each member (like mdadm --examine)",
    long_about = "Print the md v1.2 superblock of each member, with the fields and wording of \
mdadm --examine: array UUID, name, level, layout, chunk, devices, array size, data offset, \
device role, events, array state and whether the checksum is correct. Members are only read.",
    after_help = "Example:\n  uraid examine /dev/sdb /dev/sdc\n  uraid examine --json m0.img\n  \
uraid examine --bitmap m0.img\n  uraid examine --scan /dev/sd*"
)]
// mdadm's switches, each a flag; the reports that exclude each other are declared so.
#[allow(clippy::struct_excessive_bools)]
pub struct ExamineArgs {
    /// Print one JSON array with an object per member.
    #[arg(long)]
    json: bool,
    /// Print each member's bad block log instead, as `mdadm --examine-badblocks` does, and
    /// beneath each entry what it holds: the array bytes whose data it lists, or the stripe
    /// whose parity.
    #[arg(long, alias = "examine-badblocks")]
    badblocks: bool,
    /// Print each member's internal write-intent bitmap instead, as `mdadm --examine-bitmap`
    /// (-X) prints a member device's (mdadm cannot show a member file's).
    #[arg(short = 'X', long, alias = "examine-bitmap", conflicts_with = "badblocks")]
    bitmap: bool,
    /// List the arrays the devices hold instead, as `mdadm --examine --brief --verbose` does:
    /// an ARRAY line for a configuration, and the devices of each. Devices that hold no md
    /// v1.2 superblock are passed over (give every disk: `uraid examine --scan /dev/sd*`).
    #[arg(long, alias = "brief", conflicts_with_all = ["badblocks", "bitmap"])]
    scan: bool,
    /// Print each member's superblock as `mdadm --examine --export` does: KEY=value lines for
    /// udev rules and scripts (MD_LEVEL, MD_DEVICES, MD_NAME, MD_ARRAY_SIZE, MD_UUID,
    /// MD_UPDATE_TIME, MD_DEV_UUID, MD_EVENTS).
    #[arg(long, conflicts_with_all = ["badblocks", "bitmap", "scan", "json"])]
    export: bool,
    /// Member devices or image files.
    #[arg(required = true)]
    members: Vec<String>,
}

pub fn run(args: &ExamineArgs) -> anyhow::Result<()> {
    if args.scan {
        return run_scan(args);
    }
    let mut reports = Vec::new();
    let mut failed = Vec::new();
    for path in &args.members {
        let examined = decode(&read_candidate(path)).and_then(|superblock| {
            if args.bitmap {
                crate::cmd::examine_bitmap::examine(path, &superblock)
            } else if args.badblocks {
                crate::cmd::examine_badblocks::examine(path, &superblock)
            } else if args.export {
                Ok((export_lines(&superblock), Value::Null))
            } else {
                Ok(examine_superblock(path, &superblock))
            }
        });
        match examined {
            Ok((text, value)) => {
                if !args.json {
                    out_part!("{text}");
                }
                reports.push(value);
            }
            Err(reason) => {
                say!("uraid examine: {path}: {reason}");
                reports.push(json!({ "member": path, "error": reason }));
                failed.push(path.clone());
            }
        }
    }
    if args.json {
        out!("{}", serde_json::to_string_pretty(&reports)?);
    }
    if !failed.is_empty() {
        let what = if args.bitmap {
            "no bitmap read"
        } else if args.badblocks {
            "no bad block log read"
        } else {
            "no valid md v1.2 superblock"
        };
        bail!("{what} on {}", failed.join(", "));
    }
    Ok(())
}

/// mdadm --examine's lines for one member, uraid's rows after them, and the JSON object.
fn examine_superblock(path: &str, superblock: &Superblock1) -> (String, Value) {
    let mut fields = fields(superblock);
    if uraid_md::members::bad_block_log_in_bitmap(std::path::Path::new(path), superblock)
        .unwrap_or(false)
        && let Some((_, log)) = fields.iter_mut().find(|f| f.0 == "Bad Block Log")
    {
        log.push_str(" (inside the bitmap: not used)");
    }
    // The array as it is, for its areas: md's PPL bit back where uraid took it off.
    let mut as_array = superblock.clone();
    if uraid_md::meta::restore_md_ppl(&mut as_array) {
        fields.push((
            "PPL",
            "md's bit taken off while uraid runs the array active (md does not read uraid's \
             log, so a crash must not start it dirty and degraded); uraid reads it back when it \
             starts the array and writes it again at its stop"
                .to_owned(),
        ));
    }
    fields.extend(md_ppl_fields(path, &as_array));
    fields.extend(log_fields(path, &as_array));
    let text = text_of(path, &fields);
    (text, report(path, superblock, fields))
}

/// mdadm's `--examine --export` lines for one member (super1.c's export_examine_super1).
fn export_lines(sb: &Superblock1) -> String {
    let mut out = format!("MD_LEVEL={}\nMD_DEVICES={}\n", sb.level, sb.raid_disks);
    let name = sb.name();
    let name = name.split('\n').next().unwrap_or_default();
    if !name.is_empty() {
        let _ = writeln!(out, "MD_NAME={name}");
    }
    // Data members over mirrors, as mdadm counts them for the array's size.
    let disks = u64::from(sb.raid_disks);
    let (data, per) = match sb.level {
        Level::Raid1 => (1, 1),
        Level::Raid4 | Level::Raid5 => (disks.saturating_sub(1), 1),
        Level::Raid6 => (disks.saturating_sub(2), 1),
        Level::Raid10 => (disks, u64::from(sb.layout & 255) * u64::from((sb.layout >> 8) & 255)),
        _ => (0, 1),
    };
    if data > 0 && per > 0 {
        let bytes = (sb.size_sectors << 9) * data / per;
        let _ = writeln!(out, "MD_ARRAY_SIZE={}", jedec_brief(bytes));
    }
    let _ = writeln!(out, "MD_UUID={}", sb.set_uuid);
    let _ = writeln!(out, "MD_UPDATE_TIME={}", sb.utime_seconds());
    let _ = writeln!(out, "MD_DEV_UUID={}", sb.device_uuid);
    let _ = writeln!(out, "MD_EVENTS={}", sb.events);
    out
}

/// mdadm's human_size_brief in decimal units: nothing below 5000 KiB, else hundredths of MB
/// (below 2 GiB), GB (below 2 TiB) or TB, rounded as mdadm rounds them (integers).
fn jedec_brief(bytes: u64) -> String {
    let (per_centi, unit) = match bytes {
        b if b < 5000 * 1024 => return String::new(),
        b if b < 2 << 30 => (1_000_000 / 200, "MB"),
        b if b < 2 << 40 => (1_000_000_000 / 200, "GB"),
        _ => (1_000_000_000_000 / 200, "TB"),
    };
    let centi = (bytes / per_centi).div_ceil(2);
    format!("{}.{:02}{unit}", centi / 100, centi % 100)
}

fn run_scan(args: &ExamineArgs) -> anyhow::Result<()> {
    let arrays = crate::cmd::scan::scan(&args.members)?;
    if args.json {
        let list: Vec<Value> = arrays
            .iter()
            .map(|a| {
                json!({
                    "uuid": a.superblock.set_uuid.to_string(),
                    "name": a.superblock.name(),
                    "level": a.superblock.level.to_string(),
                    "raid_disks": a.superblock.raid_disks,
                    "events": a.superblock.events,
                    "devices": a.devices,
                })
            })
            .collect();
        out!("{}", serde_json::to_string_pretty(&list)?);
    } else {
        for array in &arrays {
            out!("{}", crate::cmd::scan::array_lines(array));
        }
    }
    if arrays.is_empty() {
        bail!("no md v1.2 superblock on any device given");
    }
    Ok(())
}

/// mdadm's array size: whole chunks of the component size on every data member.
fn array_size_kib(superblock: &Superblock1) -> u64 {
    let parity = match superblock.level {
        Level::Raid4 | Level::Raid5 => 1,
        Level::Raid6 => 2,
        _ => 0,
    };
    let chunk = u64::from(superblock.chunk_sectors.max(1));
    let data_disks = u64::from(superblock.raid_disks.saturating_sub(parity));
    superblock.size_sectors / chunk * chunk * data_disks / 2
}

fn role_text(role: DevRole) -> String {
    match role {
        DevRole::Active(slot) => format!("Active device {slot}"),
        DevRole::Spare => "spare".to_owned(),
        DevRole::Faulty => "faulty".to_owned(),
        DevRole::Journal => "Journal".to_owned(),
    }
}

/// One member's fields, keyed by mdadm's labels, in mdadm's order.
/// The member's v1.2 superblock, or why not: another format's metadata named when found.
fn decode(candidate: &uraid_format::assemble::Candidate) -> Result<Superblock1, String> {
    match &candidate.superblock_area {
        Ok(area) => Superblock1::decode(area).map_err(|e| match candidate.other_metadata {
            Some(found) => format!(
                "no md v1.2 superblock, but {}: uraid reads v1.2 only (mdadm --examine \
                 reads this one)",
                found.describe()
            ),
            None => format!("no md superblock: {e}"),
        }),
        Err(reason) => Err(format!("cannot read: {reason}")),
    }
}

fn fields(sb: &Superblock1) -> Vec<(&'static str, String)> {
    let state = if sb.resync_offset_sectors == MAX_SECTOR { "clean" } else { "active" };
    let mut fields = vec![
        ("Magic", "a92b4efc".to_owned()),
        ("Version", "1.2".to_owned()),
        ("Feature Map", format!("{:#x}", sb.feature_map)),
        ("Array UUID", sb.set_uuid.to_string()),
        ("Name", sb.name()),
        ("Raid Level", sb.level.to_string()),
        ("Raid Devices", sb.raid_disks.to_string()),
        ("Avail Dev Size", format!("{} sectors", sb.data_size_sectors)),
        ("Array Size", format!("{} KiB", array_size_kib(sb))),
        ("Used Dev Size", format!("{} sectors", sb.size_sectors)),
        ("Data Offset", format!("{} sectors", sb.data_offset_sectors)),
    ];
    if sb.feature_map & uraid_format::feature::NEW_OFFSET != 0 {
        let new = sb.data_offset_sectors.saturating_add_signed(sb.new_offset_sectors.into());
        fields.push(("New Offset", format!("{new} sectors")));
    }
    fields.push(("Super Offset", format!("{} sectors", sb.super_offset_sectors)));
    // A member being rebuilt: in sync below this (mdadm prints it here).
    if sb.feature_map & uraid_format::feature::RECOVERY_OFFSET != 0 {
        fields.push(("Recovery Offset", format!("{} sectors", sb.recovery_offset_sectors)));
    }
    fields.push(("State", state.to_owned()));
    fields.push(("Device UUID", sb.device_uuid.to_string()));
    if sb.resync_offset_sectors != MAX_SECTOR {
        fields.push(("Resync Offset", format!("{} sectors", sb.resync_offset_sectors)));
    }
    if sb.has_bitmap() {
        let offset = sb.bitmap_offset_sectors;
        fields.push(("Internal Bitmap", format!("{offset} sectors from superblock")));
    }
    if sb.bblog_size_sectors != 0 && sb.bblog_offset_sectors != 0 {
        let entries = u64::from(sb.bblog_size_sectors) * 512 / 8;
        let present = if sb.feature_map & uraid_format::feature::BAD_BLOCKS != 0 {
            " - bad blocks present."
        } else {
            ""
        };
        let at = sb.bblog_offset_sectors;
        fields.push((
            "Bad Block Log",
            format!("{entries} entries available at offset {at} sectors{present}"),
        ));
    }
    if let Some((offset, size)) = sb.ppl() {
        fields.push(("PPL", format!("{size} sectors at offset {offset} sectors from superblock")));
    }
    fields.extend(reshape_fields(sb));
    // decode verified the checksum: a superblock that is reported at all has a correct one.
    fields.push(("Checksum", format!("{:x} - correct", sb.sb_csum)));
    fields.push(("Events", sb.events.to_string()));
    if matches!(sb.level, Level::Raid5 | Level::Raid6) {
        fields.push(("Layout", layout_name(sb.level, sb.layout)));
    }
    if sb.level.is_striped() {
        fields.push(("Chunk Size", chunk_text(sb.chunk_sectors)));
    }
    fields.push(("Device Role", role_text(sb.role())));
    let legend = "('A' == active, '.' == missing, 'R' == replacing)";
    fields.push(("Array State", format!("{} {legend}", sb.array_state())));
    fields
}

/// A reshape in progress, as mdadm shows it (the position in KiB).
fn reshape_fields(sb: &Superblock1) -> Vec<(&'static str, String)> {
    if sb.feature_map & uraid_format::feature::RESHAPE_ACTIVE == 0 {
        return Vec::new();
    }
    let mut fields = vec![("Reshape pos'n", (sb.reshape_position_sectors / 2).to_string())];
    if sb.delta_disks != 0 {
        let old = i64::from(sb.raid_disks) - i64::from(sb.delta_disks);
        let delta = format!("{} ({old}->{})", sb.delta_disks, sb.raid_disks);
        fields.push(("Delta Devices", delta));
    }
    if sb.new_level != sb.level.to_md() {
        let level = Level::from_md(sb.new_level).map_or("-unknown-".into(), |l| l.to_string());
        fields.push(("New Level", level));
    }
    if sb.new_layout != sb.layout && matches!(sb.level, Level::Raid5 | Level::Raid6) {
        fields.push(("New Layout", layout_name(sb.level, sb.new_layout)));
    }
    if sb.new_chunk_sectors != sb.chunk_sectors {
        fields.push(("New Chunksize", chunk_text(sb.new_chunk_sectors)));
    }
    fields
}

/// uraid's row on md's own PPL: what this member's newest log write holds (replayed at the
/// next start if the array is dirty).
fn md_ppl_fields(path: &str, sb: &Superblock1) -> Vec<(&'static str, String)> {
    let Some((at, bytes)) = uraid_md::md_ppl::area(sb) else { return Vec::new() };
    let len = usize::try_from(bytes).unwrap_or(0);
    let text = match uraid_md::members::read_at(std::path::Path::new(path), at, len) {
        Err(e) => format!("cannot read: {e}"),
        Ok(area) => {
            let signature = uraid_format::md_ppl::signature(&sb.set_uuid.0);
            match uraid_format::md_ppl::newest_in_chain(&area, signature) {
                None => "no valid header".to_owned(),
                Some((_, h)) if h.entries.is_empty() => "empty".to_owned(),
                Some((off, h)) => format!(
                    "{} entries in the newest log write (generation {}, at {} sectors)",
                    h.entries.len(),
                    h.generation,
                    off / 512
                ),
            }
        }
    };
    vec![("PPL Records", text)]
}

/// uraid's own rows: where the partial parity log lives on this member and what its rings
/// hold (records of a run that has not stopped cleanly: a crash leaves them for the replay).
fn log_fields(path: &str, sb: &Superblock1) -> Vec<(&'static str, String)> {
    if !matches!(sb.level, Level::Raid4 | Level::Raid5 | Level::Raid6) {
        return Vec::new();
    }
    if sb.feature_map & uraid_format::feature::RESHAPE_ACTIVE != 0 {
        let none = "none during a reshape (the data moves into the room before it)";
        return vec![("Write Hole Log", none.to_owned())];
    }
    match uraid_md::ppl::examine_member(std::path::Path::new(path), sb) {
        Ok(None) => vec![("Write Hole Log", "none (no room before the data)".to_owned())],
        Ok(Some(log)) => {
            let place = format!(
                "{}K at {} sectors ({} rings)",
                log.area.bytes / 1024,
                log.area.offset_bytes / 512,
                uraid_md::ppl::LOG_RINGS
            );
            let records = match log.newest_epoch {
                None => "none".to_owned(),
                Some(epoch) => format!(
                    "{} entries in {} generation headers ({} entries in {} headers at or \
                     above their ring's tail: live, unless another member's rings hold a \
                     newer tail), newest run {epoch}",
                    log.entries, log.headers, log.live_entries, log.live_headers
                ),
            };
            vec![("Write Hole Log", place), ("Log Records", records)]
        }
        Err(e) => vec![("Write Hole Log", format!("cannot read: {e}"))],
    }
}

/// The JSON object of one member: mdadm's fields by label, plus typed essentials.
fn report(path: &str, sb: &Superblock1, fields: Vec<(&'static str, String)>) -> Value {
    let map: serde_json::Map<String, Value> =
        fields.into_iter().map(|(key, value)| (key.to_owned(), Value::String(value))).collect();
    json!({
        "member": path,
        "fields": map,
        "array_uuid": sb.set_uuid.to_string(),
        "level": sb.level.to_md(),
        "layout": sb.layout,
        "chunk_sectors": sb.chunk_sectors,
        "raid_disks": sb.raid_disks,
        "dev_number": sb.dev_number,
        "events": sb.events,
        "data_offset_sectors": sb.data_offset_sectors,
        "checksum_ok": true,
    })
}

/// mdadm's layout: the device, then each field right-aligned to 15 columns, then a blank line.
fn text_of(path: &str, fields: &[(&'static str, String)]) -> String {
    let mut text = format!("{path}:\n");
    for (key, value) in fields {
        let _ = writeln!(text, "{key:>15} : {value}");
    }
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jedec_sizes_round_as_mdadms() {
        assert_eq!(jedec_brief(5000 * 1024 - 1), "");
        assert_eq!(jedec_brief(16 << 20), "16.78MB");
        assert_eq!(jedec_brief(46 << 20), "48.23MB");
        assert_eq!(jedec_brief(1 << 40), "1099.51GB");
        assert_eq!(jedec_brief(3 << 40), "3.30TB");
    }
}
