//! The write-intent bitmap of an array whose component size changes, as md resizes it
//! (`md_bitmap_resize` with no chunk size asked): the bits may take no more sectors than
//! they took (v1.2 records no bitmap room, so md assumes none beyond what is written), and
//! the bitmap chunk doubles until they fit; a smaller size keeps the chunk. Checked against
//! the kernel: a 4 KiB-chunk bitmap of 8 MiB components grown to 23 MiB became 1472 bits of
//! 16 KiB (`kernel_grow.rs`).
//!
//! One difference, on purpose: md marks the new space as needing a resync in memory only and
//! counts on `resync_offset` to resync it, so after a crash in the middle of that resync its
//! bitmap (whose bits past the checkpoint are then clear) lets the rest go. Here the new
//! space's bits are set on disk too: whichever runs the array next resyncs it by the bits.

use super::{BITMAP_SUPER_BYTES, BitmapSuper, WriteIntentBitmap};

/// The largest chunk md's bitmap superblock can state (`chunksize` is 32 bits).
const CHUNK_BYTES_MAX: u64 = 1 << 31;

/// The bitmap for components of `new_sync_sectors`: chunk doubled as md doubles it, every
/// old dirty bit below the new end carried over (merged into the larger chunks), and every
/// chunk of new space dirty. Events are left as they were (the caller sets them with the
/// superblocks'). None when no chunk of md's range makes the bits fit, which takes a growth of
/// more than a million times.
#[must_use]
pub fn resized_bitmap(
    superblock: &BitmapSuper,
    bits: &WriteIntentBitmap,
    new_sync_sectors: u64,
) -> Option<(BitmapSuper, WriteIntentBitmap)> {
    let old_sync_sectors = superblock.sync_size_sectors;
    let room_bytes = (BITMAP_SUPER_BYTES + superblock.bits_bytes()).next_multiple_of(512);
    let mut chunk_bytes = u64::from(superblock.chunk_bytes);
    let fits = |chunk_bytes: u64| {
        let chunks = new_sync_sectors.div_ceil(chunk_bytes / 512);
        BITMAP_SUPER_BYTES as u64 + chunks.div_ceil(8) <= room_bytes as u64
    };
    while !fits(chunk_bytes) {
        chunk_bytes *= 2;
        if chunk_bytes > CHUNK_BYTES_MAX {
            return None;
        }
    }
    let grown = BitmapSuper {
        sync_size_sectors: new_sync_sectors,
        chunk_bytes: u32::try_from(chunk_bytes).expect("at most CHUNK_BYTES_MAX"),
        ..superblock.clone()
    };
    let mut grown_bits = WriteIntentBitmap::new_clean(&grown);
    let old_chunk_sectors = bits.chunk_sectors();
    for chunk in (0..bits.chunks()).filter(|&c| bits.is_dirty(c)) {
        let start = chunk * old_chunk_sectors;
        let end = (start + old_chunk_sectors).min(old_sync_sectors).min(new_sync_sectors);
        grown_bits.set_range(start, end.saturating_sub(start));
    }
    let new_space = new_sync_sectors.saturating_sub(old_sync_sectors);
    grown_bits.set_range(old_sync_sectors, new_space);
    Some((grown, grown_bits))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::uuid::Uuid;

    fn bitmap(sync_sectors: u64, chunk_bytes: u32) -> (BitmapSuper, WriteIntentBitmap) {
        let superblock = BitmapSuper::new_internal(Uuid([7; 16]), sync_sectors, chunk_bytes);
        let bits = WriteIntentBitmap::new_clean(&superblock);
        (superblock, bits)
    }

    /// The kernel's figures: 2048 bits of 4 KiB (256 bytes after the 256-byte superblock: one
    /// sector) grown from 8 MiB to 23 MiB need 5888 bits, then 2944 at 8 KiB; 1472 of 16 KiB
    /// fit the sector.
    #[test]
    fn the_chunk_doubles_as_md_doubles_it() {
        let (superblock, bits) = bitmap(16384, 4096);
        let (grown, grown_bits) = resized_bitmap(&superblock, &bits, 47104).unwrap();
        assert_eq!(grown.chunk_bytes, 16384);
        assert_eq!(grown.chunk_count(), 1472);
        assert_eq!(grown.sync_size_sectors, 47104);
        assert_eq!(grown_bits.chunks(), 1472);
        // The old space is clean, the new space dirty from its first chunk (sector 16384 is
        // chunk 512 at 32 sectors a chunk) to the last.
        assert_eq!(grown_bits.dirty_count(), 1472 - 512);
        assert!(!grown_bits.is_dirty(511) && grown_bits.is_dirty(512));
    }

    /// Room is what the bits took, in whole sectors: md's 64 MiB chunk of a small array has
    /// one bit and a sector of room, so it keeps its chunk up to 2048 bits.
    #[test]
    fn a_chunk_with_room_left_stays() {
        let (superblock, bits) = bitmap(2048, 64 << 20);
        let (grown, _) = resized_bitmap(&superblock, &bits, 2048 * (128 << 10)).unwrap();
        assert_eq!(grown.chunk_bytes, 64 << 20);
        let (grown, _) = resized_bitmap(&superblock, &bits, 2048 * (128 << 10) + 1).unwrap();
        assert_eq!(grown.chunk_bytes, 128 << 20);
    }

    /// A dirty chunk stays dirty when chunks merge, and the chunk straddling the old end is
    /// dirty (part of it is new).
    #[test]
    fn dirty_bits_carry_over() {
        let (superblock, mut bits) = bitmap(16384 - 8, 4096);
        bits.set(5);
        let (grown, grown_bits) = resized_bitmap(&superblock, &bits, 47104).unwrap();
        assert_eq!(grown.chunk_bytes, 16384);
        assert!(grown_bits.is_dirty(1), "old chunk 5 is in new chunk 1");
        assert!(!grown_bits.is_dirty(0) && !grown_bits.is_dirty(2));
        assert!(grown_bits.is_dirty(511), "it holds the old end");
        assert!(!grown_bits.is_dirty(510));
    }

    /// A smaller size keeps the chunk (it fits in what the bits took) and the dirty bits
    /// below the new end; nothing past it is kept, nothing is newly dirty.
    #[test]
    fn a_shrunk_bitmap_keeps_its_chunk_and_the_bits_below_the_end() {
        let (superblock, mut bits) = bitmap(47104, 16384);
        for chunk in [3, 511, 512, 1000] {
            bits.set(chunk);
        }
        let (shrunk, shrunk_bits) = resized_bitmap(&superblock, &bits, 16384).unwrap();
        assert_eq!((shrunk.chunk_bytes, shrunk.sync_size_sectors), (16384, 16384));
        assert_eq!((shrunk.chunk_count(), shrunk_bits.chunks()), (512, 512));
        assert_eq!(shrunk_bits.dirty_count(), 2);
        assert!(shrunk_bits.is_dirty(3) && shrunk_bits.is_dirty(511));
        // A chunk cut by the new end stays dirty.
        let (_, cut) = resized_bitmap(&superblock, &bits, 16384 - 8).unwrap();
        assert!(cut.is_dirty(511) && cut.dirty_count() == 2);
    }

    #[test]
    fn a_growth_past_md_chunks_is_refused() {
        let (superblock, bits) = bitmap(2048, 1 << 31);
        assert!(resized_bitmap(&superblock, &bits, u64::MAX / 2).is_none());
    }
}
