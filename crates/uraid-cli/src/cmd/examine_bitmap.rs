//! `uraid examine --bitmap`: a member's internal write-intent bitmap as `mdadm --examine-bitmap`
//! (`-X`) prints it, line for line (checked against mdadm in the VM: `kernel_grow.rs`). mdadm
//! reads a regular file as an external bitmap file, so it cannot show the bitmap of a member
//! that is an image file; this can. One line of uraid's beneath when the bitmap is older than
//! the array (md then distrusts its bits and resyncs everything).

use serde_json::{Value, json};
use std::fmt::Write as _;
use std::path::Path;
use uraid_format::{BITMAP_SUPER_BYTES, BitmapSuper, Superblock1, WriteIntentBitmap, bitmap_state};

/// mdadm's lines for `path` and the JSON object; Err says what could not be read.
pub fn examine(path: &str, sb: &Superblock1) -> Result<(String, Value), String> {
    if !sb.has_bitmap() {
        let text = format!("{path}: no internal bitmap (md v1.2 superblock without one)\n");
        return Ok((text, json!({ "member": path, "bitmap": null })));
    }
    let (stored_sync_sectors, bitmap, bits) = read(path, sb)?;
    let dirty = bits.dirty_count();
    let chunks = bitmap.chunk_count();
    let mut text = String::new();
    let mut line = |name: &str, value: String| {
        let _ = writeln!(text, "{name:>16} : {value}");
    };
    line("Filename", path.to_owned());
    line("Magic", format!("{:08x}", uraid_format::BITMAP_MAGIC));
    line("Version", uraid_format::BITMAP_VERSION.to_string());
    line("UUID", bitmap.uuid.to_string());
    line("Events", bitmap.events.to_string());
    line("Events Cleared", bitmap.events_cleared.to_string());
    let stale = bitmap.state & bitmap_state::STALE != 0;
    line("State", if stale { "Out of date" } else { "OK" }.to_owned());
    line("Chunksize", chunk_text(bitmap.chunk_bytes));
    line("Daemon", format!("{}s flush period", bitmap.daemon_sleep_seconds));
    let write_mode = match bitmap.write_behind {
        0 => "Normal".to_owned(),
        max => format!("Allow write behind, max {max}"),
    };
    line("Write Mode", write_mode);
    let sync_kib = stored_sync_sectors / 2;
    line("Sync Size", format!("{sync_kib}{}", size_text(sync_kib.saturating_mul(1024))));
    let percent = if chunks == 0 { 0.0 } else { dirty as f64 * 100.0 / chunks as f64 };
    line("Bitmap", format!("{chunks} bits (chunks), {dirty} dirty ({percent:.1}%)"));
    if stored_sync_sectors != sb.size_sectors {
        let _ = writeln!(
            text,
            "{:>19}sync size is not the component size ({} sectors): md and uraid count the \
             bits by the component size",
            "", sb.size_sectors
        );
    }
    if bitmap.events < sb.events {
        let _ = writeln!(
            text,
            "{:>19}older than the array (events {}): md and uraid resync every sector",
            "", sb.events
        );
    }
    let value = json!({
        "member": path,
        "bitmap": {
            "uuid": bitmap.uuid.to_string(),
            "events": bitmap.events,
            "events_cleared": bitmap.events_cleared,
            "stale": bitmap.is_stale(sb.events),
            "chunk_bytes": bitmap.chunk_bytes,
            "daemon_sleep_seconds": bitmap.daemon_sleep_seconds,
            "write_behind": bitmap.write_behind,
            "sync_size_sectors": stored_sync_sectors,
            "chunks": chunks,
            "dirty_chunks": dirty,
        },
    });
    Ok((text, value))
}

/// The bitmap's stored sync size, and the bitmap and its bits as md loads them (counted over
/// the component size: `BitmapSuper::decode_for`).
fn read(path: &str, sb: &Superblock1) -> Result<(u64, BitmapSuper, WriteIntentBitmap), String> {
    let (bitmap, image) = uraid_md::members::read_bitmap(Path::new(path), sb)
        .map_err(|e| format!("its bitmap: {e}"))?;
    let stored = BitmapSuper::decode(&image).map_err(|e| format!("its bitmap: {e}"))?;
    let bits = WriteIntentBitmap::decode(&bitmap, &image[BITMAP_SUPER_BYTES..])
        .map_err(|e| format!("its bitmap: {e}"))?;
    Ok((stored.sync_size_sectors, bitmap, bits))
}

/// mdadm's chunk size: the largest whole unit ("64 MB", "16 KB", "512 B").
fn chunk_text(bytes: u32) -> String {
    let units = ["B", "KB", "MB", "GB"];
    let mut value = bytes;
    let mut unit = 0;
    while value >= 1024 && value.is_multiple_of(1024) && unit < units.len() - 1 {
        value /= 1024;
        unit += 1;
    }
    format!("{value} {}", units[unit])
}

/// mdadm's size in brackets: nothing below 5000 KiB, then MiB and MB (below 2 GiB), GiB and GB
/// (below 2 TiB), TiB and TB, each to two places.
fn size_text(bytes: u64) -> String {
    let b = bytes as f64;
    let (binary, decimal, unit) = if bytes < 5000 * 1024 {
        return String::new();
    } else if bytes < 2 << 30 {
        (b / f64::from(1 << 20), b / 1e6, "M")
    } else if bytes < 2 << 40 {
        (b / f64::from(1 << 30), b / 1e9, "G")
    } else {
        (b / (1u64 << 40) as f64, b / 1e12, "T")
    };
    format!(" ({binary:.2} {unit}iB {decimal:.2} {unit}B)")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// mdadm -X's words for the kernel's grown bitmap (the VM, kernel_grow.rs's array).
    #[test]
    fn sizes_read_as_mdadm_prints_them() {
        assert_eq!(chunk_text(16384), "16 KB");
        assert_eq!(chunk_text(64 << 20), "64 MB");
        assert_eq!(size_text(23552 * 1024), " (23.00 MiB 24.12 MB)");
        assert_eq!(size_text(613_376 * 1024), " (599.00 MiB 628.10 MB)");
        assert_eq!(size_text(4 << 20), "");
    }
}
