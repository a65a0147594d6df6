//! The stripe cache's size when the operator does not give one (`--stripe-cache-size`).
//!
//! The cache is allocated whole at start: `heads x members x stripe_size` bytes. 1024 heads
//! is 20 MiB on 5 members, but 400 MiB on 100 and 1 GiB on 256 (a RAID6 of 256 members held
//! 1.09 GB resident before its first request). So the default is 1024 heads within a budget
//! of 64 MiB, never below two chunk rows: a sequential stream fills a row's heads (one per
//! stripe unit of the chunk) only once it has written the whole row, and with fewer heads
//! its stripes would go out partial, read for parity, instead of full.

/// md's largest default here: what arrays up to 16 members of 4 KiB stripe units get.
pub const DEFAULT_STRIPE_CACHE_SIZE: usize = 1024;
/// The memory the default aims to stay within.
pub const DEFAULT_STRIPE_CACHE_BYTES: u64 = 64 << 20;

/// Heads for an array of `raid_disks` members, `chunk_bytes` chunks and `stripe_size_bytes`
/// stripe units when none is asked for.
#[must_use]
pub fn default_stripe_cache_size(
    raid_disks: u64,
    chunk_bytes: u64,
    stripe_size_bytes: u64,
) -> usize {
    let head_bytes = (raid_disks * stripe_size_bytes).max(1);
    let within_budget = DEFAULT_STRIPE_CACHE_BYTES / head_bytes;
    let two_rows = 2 * chunk_bytes / stripe_size_bytes.max(1);
    let heads = within_budget.max(two_rows).max(1);
    usize::try_from(heads).map_or(DEFAULT_STRIPE_CACHE_SIZE, |h| h.min(DEFAULT_STRIPE_CACHE_SIZE))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_keeps_1024_heads_on_common_arrays_and_shrinks_on_wide_ones() {
        const K: u64 = 1024;
        // Up to 16 members of 4 KiB units: md-sized, 1024 heads (64 MiB at 16).
        assert_eq!(default_stripe_cache_size(5, 512 * K, 4 * K), 1024);
        assert_eq!(default_stripe_cache_size(16, 512 * K, 4 * K), 1024);
        // 32 members: 64 MiB is 512 heads, above two rows of 512 KiB chunks (256).
        assert_eq!(default_stripe_cache_size(32, 512 * K, 4 * K), 512);
        // 256 members with 4 KiB chunks: 64 heads, 64 MiB (1 GiB before).
        assert_eq!(default_stripe_cache_size(256, 4 * K, 4 * K), 64);
        // 256 members with 512 KiB chunks: two rows (256 heads, 256 MiB) for full stripes.
        assert_eq!(default_stripe_cache_size(256, 512 * K, 4 * K), 256);
        // 64 KiB stripe units on 5 members: 204 heads (64 MiB; 1024 were 320 MiB), above
        // two rows of 512 KiB chunks (16).
        assert_eq!(default_stripe_cache_size(5, 512 * K, 64 * K), 204);
    }
}
