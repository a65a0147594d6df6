//! `uraid examine --badblocks`: a member's md bad block log as `mdadm --examine-badblocks`
//! prints it, line for line, and beneath each entry what it holds: the array bytes whose data
//! is lost there (they read as errors until rewritten, where parity cannot rebuild them) or
//! the stripe whose parity it is. mdadm stops at member sectors; a file system's tools want
//! array offsets, to find the files a failed rebuild left unreadable.

use serde_json::{Value, json};
use std::fmt::Write as _;
use std::path::Path;
use uraid_core::{DiskIndex, Geometry, Layout, Sector};
use uraid_format::{DevRole, Superblock1};

/// What one listed piece of a member holds (split at chunk boundaries: each chunk is one
/// stripe's block).
#[derive(Debug, PartialEq, Eq)]
enum Piece {
    /// Array bytes `[start, end)`.
    Data { start: u64, end: u64 },
    /// Stripe `stripe`'s P or Q.
    Parity { which: &'static str, stripe: u64 },
    /// Before the data area (metadata), or the device holds no slot (a spare).
    Outside,
}

/// mdadm's lines for `path` and ours beneath, and the JSON object; Err names what could
/// not be read.
pub fn examine(path: &str, sb: &Superblock1) -> Result<(String, Value), String> {
    if sb.bblog_size_sectors == 0 || sb.bblog_size_sectors > 100 || sb.bblog_offset_sectors == 0 {
        let text = format!("No bad-blocks list configured on {path}\n");
        return Ok((text, json!({ "member": path, "configured": false, "bad_blocks": [] })));
    }
    if sb.bad_block_log().is_none() {
        let text = format!("Bad-blocks list is empty in {path}\n");
        return Ok((text, json!({ "member": path, "configured": true, "bad_blocks": [] })));
    }
    let ranges = uraid_md::members::bad_block_entries(Path::new(path), sb)
        .map_err(|e| format!("reading its bad block log: {e}"))?;
    let geometry = geometry(sb);
    let mut text = format!("Bad-blocks on {path}:\n");
    let mut entries = Vec::new();
    for r in &ranges {
        let _ = writeln!(text, "{:>20} for {} sectors", r.start_sector, r.sectors);
        let pieces = pieces(sb, geometry.as_ref(), r.start_sector, r.sectors);
        let mut described = Vec::new();
        for p in &pieces {
            let (line, value) = match p {
                Piece::Data { start, end } => (
                    format!("data: array bytes {start}-{end}"),
                    json!({ "role": "data", "array_bytes": [start, end] }),
                ),
                Piece::Parity { which, stripe } => (
                    format!("{which} of stripe {stripe}"),
                    json!({ "role": which, "stripe": stripe }),
                ),
                Piece::Outside => ("outside the array's data".to_owned(), json!({ "role": null })),
            };
            let _ = writeln!(text, "{:>24}{line}", "");
            described.push(value);
        }
        entries.push(json!({ "sector": r.start_sector, "sectors": r.sectors, "holds": described }));
    }
    Ok((text, json!({ "member": path, "configured": true, "bad_blocks": entries })))
}

/// The array's geometry, where uraid knows the level.
fn geometry(sb: &Superblock1) -> Option<Geometry> {
    let level = uraid_md::members::core_level(sb.level)?;
    let layout = Layout::from_md(level, sb.layout).ok()?;
    let chunk = u64::from(sb.chunk_sectors) * 512;
    Geometry::new(level, layout, sb.raid_disks as usize, chunk).ok()
}

/// What device sectors `[start, start + sectors)` hold, one piece per chunk they touch.
fn pieces(sb: &Superblock1, geometry: Option<&Geometry>, start: u64, sectors: u64) -> Vec<Piece> {
    let (Some(g), DevRole::Active(slot)) = (geometry, sb.role()) else {
        return vec![Piece::Outside];
    };
    let disk = DiskIndex(slot);
    let chunk = u64::from(sb.chunk_sectors);
    let data_start = sb.data_offset_sectors;
    let mut out = Vec::new();
    if start < data_start {
        out.push(Piece::Outside);
    }
    let mut at = start.max(data_start) - data_start;
    let end = (start + sectors).saturating_sub(data_start);
    while at < end {
        let next = ((at / chunk + 1) * chunk).min(end);
        let stripe = at / chunk;
        let parity = || {
            let map = g.stripe_map(uraid_core::StripeNumber(stripe));
            let which = if map.p_disk == Some(disk) { "P" } else { "Q" };
            Piece::Parity { which, stripe }
        };
        out.push(g.compute_blocknr(disk, Sector(at)).map_or_else(parity, |a| Piece::Data {
            start: a.0 * 512,
            end: (a.0 + next - at) * 512,
        }));
        at = next;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use uraid_format::create::{NewArray, NewMember, build_superblock};
    use uraid_format::{Level, Uuid};

    /// Member `slot` of a RAID5 of 4 (left-symmetric, 64 KiB chunks, data at 2048).
    fn member(slot: u16) -> Superblock1 {
        let array = NewArray {
            set_uuid: Uuid([7; 16]),
            name: "t",
            level: Level::Raid5,
            layout: 2,
            chunk_sectors: 128,
            raid_disks: 4,
            size_sectors: 128 * 64,
            data_offset_sectors: 2048,
            ctime_seconds: 1,
            utime_seconds: 1,
            events: 1,
            clean: true,
            internal_bitmap: false,
        };
        let roles: Vec<DevRole> = (0..4).map(DevRole::Active).collect();
        let m = NewMember {
            dev_number: u32::from(slot),
            device_uuid: Uuid([1; 16]),
            device_sectors: 2048 + 128 * 64,
            dev_roles: &roles,
        };
        build_superblock(&array, &m).unwrap()
    }

    #[test]
    fn a_listed_range_names_the_array_bytes_it_held() {
        let sb = member(1);
        let g = geometry(&sb).unwrap();
        // Left-symmetric RAID5 of 4: stripe 0 has P on member 3 and member 1 holds data
        // chunk 1 (array sectors 128..256); stripe 2 has P on member 1.
        let got = pieces(&sb, Some(&g), 2048 + 120, 16);
        let want = vec![
            Piece::Data { start: (128 + 120) * 512, end: 256 * 512 },
            // Stripe 1: P on member 2, data from member 3 on: member 1 holds its third
            // chunk (array chunk 5).
            Piece::Data { start: 5 * 128 * 512, end: (5 * 128 + 8) * 512 },
        ];
        assert_eq!(got, want);
        assert_eq!(
            pieces(&sb, Some(&g), 2048 + 256, 8),
            vec![Piece::Parity { which: "P", stripe: 2 }]
        );
        assert_eq!(pieces(&sb, Some(&g), 100, 8), vec![Piece::Outside]);
        // Cross-checked with the forward map: each data piece maps back to member 1.
        for p in pieces(&sb, Some(&g), 2048, 128 * 64) {
            if let Piece::Data { start, end } = p {
                for s in (start / 512..end / 512).step_by(8) {
                    assert_eq!(g.map_sector(Sector(s)).disk, DiskIndex(1), "array sector {s}");
                }
            }
        }
    }
}
