//! md's per-member bad block log: ranges of a member md knows hold no good data (a write there
//! failed, or a read could not be corrected, and md kept the member rather than failing it;
//! mdadm reserves the log, 8 sectors, on every v1.2 member). md reads around them: a stripe
//! unit that overlaps one is rebuilt from parity. Facts from md.c (`super_1_load`,
//! `super_1_sync`) and raid5.c, checked against the kernel in the VM
//! (`crates/uraid-cli/tests/kernel_badblocks.rs`).
//!
//! The log is `bblog_size` sectors at `super_offset + bblog_offset` (signed), read only when
//! `feature::BAD_BLOCKS` is set (md leaves stale entries behind when its list empties and
//! clears the bit). Each entry is a little-endian u64: bits 0..10 the length, bits 10..64 the
//! start, both in units of `2^bblog_shift` sectors, the start counted from the device's start
//! (data offset included). The first all-ones word ends the list.

use crate::BitmapSuper;
use crate::feature;
use crate::superblock::Superblock1;

/// A range of a member's sectors, from the device's start, that holds no good data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BadRange {
    pub start_sector: u64,
    pub sectors: u64,
}

/// md reads and writes at most one page of entries.
const MAX_LOG_SECTORS: u16 = 8;

impl Superblock1 {
    /// Where the member's bad block log is when it holds entries: (absolute sector, sectors).
    /// None when the list is empty (the feature bit clear) or the log has no place (then md
    /// refuses the superblock; so does `Superblock1::decode`'s caller, see `bad_blocks`).
    #[must_use]
    pub fn bad_block_log(&self) -> Option<(u64, u16)> {
        if self.feature_map & feature::BAD_BLOCKS == 0 || self.bblog_offset_sectors == 0 {
            return None;
        }
        let start =
            self.super_offset_sectors.checked_add_signed(i64::from(self.bblog_offset_sectors))?;
        Some((start, self.bblog_size_sectors.min(MAX_LOG_SECTORS)))
    }
}

impl Superblock1 {
    /// Whether the bad block log's place lies inside the internal bitmap (`bitmap`: its
    /// superblock), counted as mdadm reserves the bitmap (`BitmapSuper::reserved_bytes`).
    /// uraid's create before 7269acd put the log there when `--bitmap-chunk` made the bitmap
    /// larger than mdadm's default one: bitmap writes land on the log's entries and the log's
    /// writes on bitmap bits, so the log can be neither read nor written.
    #[must_use]
    pub fn bad_block_log_in_bitmap(&self, bitmap: &BitmapSuper) -> bool {
        if !self.has_bitmap() || self.bblog_offset_sectors == 0 || self.bblog_size_sectors == 0 {
            return false;
        }
        let log = i64::from(self.bblog_offset_sectors);
        let log_end = log + i64::from(self.bblog_size_sectors);
        let map = i64::from(self.bitmap_offset_sectors);
        let map_end =
            map.saturating_add(i64::try_from(bitmap.reserved_bytes() / 512).unwrap_or(i64::MAX));
        log < map_end && map < log_end
    }
}

/// The entries of a bad block log (`log`: its bytes), in sectors. Err, as md rejects the
/// superblock, for an entry of length 0 before the end of the list or one that overflows.
pub fn decode_bad_blocks(log: &[u8], shift: u8) -> Result<Vec<BadRange>, String> {
    let mut out = Vec::new();
    for word in log.chunks_exact(8) {
        let v = u64::from_le_bytes(word.try_into().expect("8 bytes"));
        if v == u64::MAX {
            break;
        }
        let (start, len) = (v >> 10, v & 0x3ff);
        let scale = 1u64.checked_shl(u32::from(shift)).filter(|_| shift < 54);
        let range = scale.and_then(|s| {
            Some(BadRange { start_sector: start.checked_mul(s)?, sectors: len.checked_mul(s)? })
        });
        match range {
            Some(r) if len > 0 => out.push(r),
            _ => return Err(format!("a bad block log entry {v:#018x} md would refuse")),
        }
    }
    Ok(out)
}

/// md's longest entry, in units of `2^shift` sectors (BB_MAX_LEN).
pub const BAD_BLOCK_ENTRY_MAX: u64 = 512;

/// The log's bytes (`log_bytes` long: every word after the entries all-ones, as md writes
/// them) for `ranges` (sorted, disjoint), each widened to whole units of `2^shift` sectors
/// and cut into entries of at most `BAD_BLOCK_ENTRY_MAX` units. Err when they do not fit.
pub fn encode_bad_blocks(
    ranges: &[BadRange],
    shift: u8,
    log_bytes: usize,
) -> Result<Vec<u8>, String> {
    let words = bad_block_entries(ranges, shift)?;
    if words.len() > log_bytes / 8 {
        return Err(format!("{} bad block entries: the log holds {}", words.len(), log_bytes / 8));
    }
    let mut log = vec![0xff; log_bytes];
    for (w, word) in log.chunks_exact_mut(8).zip(words) {
        w.copy_from_slice(&word.to_le_bytes());
    }
    Ok(log)
}

/// The entries (md's on-disk words) `ranges` take; see `encode_bad_blocks`.
pub fn bad_block_entries(ranges: &[BadRange], shift: u8) -> Result<Vec<u64>, String> {
    if shift >= 54 {
        return Err(format!("bad block shift {shift}"));
    }
    let mut words = Vec::new();
    for r in ranges {
        let end = r.start_sector.checked_add(r.sectors).ok_or("a bad range past u64")?;
        let (mut at, end) = (r.start_sector >> shift, end.div_ceil(1 << shift));
        if end > 1 << 54 {
            return Err(format!("a bad range at sector {} md cannot record", r.start_sector));
        }
        while at < end {
            let len = (end - at).min(BAD_BLOCK_ENTRY_MAX);
            words.push(at << 10 | len);
            at += len;
        }
    }
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_until_the_first_all_ones_word() {
        let word = |start: u64, len: u64| ((start << 10) | len).to_le_bytes();
        let mut log = [word(4104, 8), word(9000, 512)].concat();
        log.extend_from_slice(&u64::MAX.to_le_bytes());
        log.extend_from_slice(&word(1, 1)); // after the end: ignored
        let got = decode_bad_blocks(&log, 0).unwrap();
        assert_eq!(
            got,
            vec![
                BadRange { start_sector: 4104, sectors: 8 },
                BadRange { start_sector: 9000, sectors: 512 }
            ]
        );
        assert_eq!(
            decode_bad_blocks(&log, 3).unwrap()[0],
            BadRange { start_sector: 32832, sectors: 64 }
        );
        assert!(decode_bad_blocks(&[0; 8], 0).is_err(), "a zero word is a length-0 entry");
    }

    #[test]
    fn encoding_round_trips_and_cuts_long_ranges() {
        let ranges = [
            BadRange { start_sector: 4104, sectors: 8 },
            BadRange { start_sector: 9000, sectors: 1300 },
        ];
        let log = encode_bad_blocks(&ranges, 0, 4096).unwrap();
        assert_eq!(log.len(), 4096);
        let back = decode_bad_blocks(&log, 0).unwrap();
        let lens: Vec<u64> = back.iter().map(|r| r.sectors).collect();
        assert_eq!(lens, vec![8, 512, 512, 276], "md's entries hold at most 512 units");
        assert_eq!(back[1].start_sector, 9000);
        assert_eq!(back[3].start_sector + back[3].sectors, 10300);
        assert!(log[4 * 8..].iter().all(|b| *b == 0xff), "the rest is all ones");
        // With a shift, ranges widen to whole units.
        let log = encode_bad_blocks(&[BadRange { start_sector: 9, sectors: 2 }], 3, 512).unwrap();
        assert_eq!(
            decode_bad_blocks(&log, 3).unwrap(),
            vec![BadRange { start_sector: 8, sectors: 8 }]
        );
        let many: Vec<BadRange> =
            (0..65).map(|i| BadRange { start_sector: i * 10, sectors: 1 }).collect();
        assert!(encode_bad_blocks(&many, 0, 512).is_err(), "64 entries fit in a sector");
        assert!(encode_bad_blocks(&many[..64], 0, 512).is_ok());
    }
}
