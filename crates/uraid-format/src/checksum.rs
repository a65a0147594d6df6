//! md's v1.x superblock checksum (`sb_csum`).
//!
//! The rule (facts from md's `calc_sb_1_csum`, confirmed on every member of every fixture in
//! `shared/fixtures/md`): sum the superblock as little-endian u32 words over its first
//! `256 + 2 * max_dev` bytes, with the `sb_csum` word itself counted as zero, into a 64-bit
//! accumulator; if the length is not a multiple of 4 (odd `max_dev`) the last 2 bytes count as
//! one little-endian u16. Then fold once: `(sum & 0xffff_ffff) + (sum >> 32)`, truncated to 32
//! bits.
//!
//! Worked example: words 0xffff_ffff and 0x0000_0002 sum to 0x1_0000_0001; the fold gives
//! 0x0000_0001 + 0x1 = 0x0000_0002. The fold is done once, not repeated until it fits, so a
//! fold that itself carries loses the carry, exactly as md does.

/// Byte offset of `sb_csum` in the superblock.
pub(crate) const SB_CSUM_OFFSET: usize = 216;

/// Computes `sb_csum` over `bytes`, which must be exactly the checksummed prefix of a
/// superblock (`256 + 2 * max_dev` bytes); the stored checksum word inside is ignored.
#[must_use]
pub fn sb_csum(bytes: &[u8]) -> u32 {
    assert!(bytes.len() >= SB_CSUM_OFFSET + 4, "checksum over a truncated superblock");
    assert!(bytes.len().is_multiple_of(2), "a superblock is 256 bytes plus 2 per role");
    let mut sum: u64 = 0;
    let mut words = bytes.chunks_exact(4);
    for (index, word) in words.by_ref().enumerate() {
        if index * 4 == SB_CSUM_OFFSET {
            continue;
        }
        sum += u64::from(u32::from_le_bytes([word[0], word[1], word[2], word[3]]));
    }
    let tail = words.remainder();
    if tail.len() == 2 {
        sum += u64::from(u16::from_le_bytes([tail[0], tail[1]]));
    }
    // Truncation is md's rule: one fold, the carry of the fold itself is dropped.
    ((sum & 0xffff_ffff) + (sum >> 32)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fold_is_done_once() {
        // Goal: pin the worked example of the module comment.
        let mut bytes = vec![0u8; 256];
        bytes[0..4].copy_from_slice(&0xffff_ffffu32.to_le_bytes());
        bytes[4..8].copy_from_slice(&2u32.to_le_bytes());
        assert_eq!(sb_csum(&bytes), 2);
    }

    #[test]
    fn stored_checksum_is_ignored_and_odd_tail_counts() {
        let mut bytes = vec![0u8; 258];
        bytes[SB_CSUM_OFFSET] = 0x55;
        assert_eq!(sb_csum(&bytes), 0);
        bytes[256] = 0x34;
        bytes[257] = 0x12;
        assert_eq!(sb_csum(&bytes), 0x1234);
    }
}
