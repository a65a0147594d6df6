//! `resized_bitmap` on random bitmaps: every sector that was dirty and is still in the array
//! stays covered by a dirty bit, every sector of new space is dirty, the chunk only doubles (and
//! only as far as md's room rule needs; a smaller size keeps it), and the bits never take more
//! sectors than they had.

use proptest::prelude::*;
use uraid_format::{BITMAP_SUPER_BYTES, BitmapSuper, Uuid, WriteIntentBitmap, resized_bitmap};

fn sectors_of(bytes: usize) -> usize {
    bytes.div_ceil(512)
}

proptest! {
    #[test]
    fn a_resized_bitmap_loses_no_dirty_sector(
        chunk_shift in 12u32..27,
        old_sectors in 1u64..1 << 24,
        growth in prop_oneof![Just(0u64), 0u64..1 << 26],
        shrink in prop_oneof![Just(0u64), any::<u64>()],
        dirty in proptest::collection::vec(any::<u64>(), 0..40),
    ) {
        let old = BitmapSuper::new_internal(Uuid([9; 16]), old_sectors, 1 << chunk_shift);
        let mut bits = WriteIntentBitmap::new_clean(&old);
        for d in &dirty {
            bits.set(d % bits.chunks());
        }
        // Growth, or (when `shrink` is drawn) a smaller size of at least a sector.
        let new_sectors =
            if shrink > 0 { 1 + shrink % old_sectors } else { old_sectors + growth };
        let (grown, grown_bits) = resized_bitmap(&old, &bits, new_sectors).unwrap();
        prop_assert_eq!(grown.sync_size_sectors, new_sectors);
        prop_assert!(grown.chunk_bytes >= old.chunk_bytes);
        if new_sectors <= old_sectors {
            prop_assert_eq!(grown.chunk_bytes, old.chunk_bytes, "a smaller size keeps the chunk");
        }
        prop_assert!(grown.chunk_bytes.is_power_of_two());
        let room = sectors_of(BITMAP_SUPER_BYTES + old.bits_bytes());
        prop_assert!(sectors_of(BITMAP_SUPER_BYTES + grown.bits_bytes()) <= room);
        if grown.chunk_bytes > old.chunk_bytes {
            // Half the chunk would not have fitted.
            let half = BitmapSuper { chunk_bytes: grown.chunk_bytes / 2, ..grown.clone() };
            prop_assert!(sectors_of(BITMAP_SUPER_BYTES + half.bits_bytes()) > room);
        }
        let covers = |sector: u64| grown_bits.is_dirty(sector / grown_bits.chunk_sectors());
        for chunk in (0..bits.chunks()).filter(|&c| bits.is_dirty(c)) {
            let first = chunk * bits.chunk_sectors();
            let last = ((chunk + 1) * bits.chunk_sectors()).min(old_sectors).min(new_sectors);
            if first < last {
                prop_assert!(covers(first) && covers(last - 1), "old chunk {} lost", chunk);
            }
        }
        let grows = new_sectors > old_sectors;
        if grows {
            prop_assert!(covers(old_sectors) && covers(new_sectors - 1), "new space clean");
        }
        // Nothing else: a chunk wholly in the old space with no old dirty sector stays clean.
        let expected = (0..grown_bits.chunks()).filter(|&c| {
            let size = grown_bits.chunk_sectors();
            let (start, end) = (c * size, (c + 1) * size);
            let old_chunks = start / bits.chunk_sectors()..end.div_ceil(bits.chunk_sectors());
            (grows && end > old_sectors)
                || old_chunks.filter(|o| o * bits.chunk_sectors() < new_sectors)
                    .any(|o| o < bits.chunks() && bits.is_dirty(o))
        });
        prop_assert_eq!(grown_bits.dirty_count(), expected.count() as u64);
    }
}
