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
}
