//! md's write-intent bitmap: the bitmap superblock and the bits behind it, on arbitrary bytes.
//!
//! The first byte chooses whether md's magic and version 4 are forced in (random bytes never
//! carry them). Invariants: no panic; a decoded bitmap superblock re-encodes to the same 256
//! bytes and decodes to the same value; the bits re-encode to the bytes they came from, and
//! setting and clearing chunks inside the bitmap behaves as the bits say.
#![no_main]

use libfuzzer_sys::fuzz_target;
use uraid_format::WriteIntentBitmap;
use uraid_format::{BITMAP_MAGIC, BITMAP_SUPER_BYTES, BITMAP_VERSION, BitmapSuper};

fuzz_target!(|data: &[u8]| {
    let Some((&fix, rest)) = data.split_first() else { return };
    let mut bytes = rest.to_vec();
    if fix & 1 != 0 && bytes.len() >= 8 {
        bytes[0..4].copy_from_slice(&BITMAP_MAGIC.to_le_bytes());
        bytes[4..8].copy_from_slice(&BITMAP_VERSION.to_le_bytes());
    }
    let Ok(sb) = BitmapSuper::decode(&bytes) else { return };
    assert_eq!(sb.encode()[..], bytes[..BITMAP_SUPER_BYTES], "encode(decode(bytes)) == bytes");
    assert_eq!(BitmapSuper::decode(&sb.encode()).expect("re-decodes"), sb);
    let _ = (sb.chunk_sectors(), sb.chunk_count(), sb.reserved_bytes(), sb.is_stale(7));
    let bits = &bytes[BITMAP_SUPER_BYTES..];
    let Ok(mut bitmap) = WriteIntentBitmap::decode(&sb, bits) else {
        assert!(bits.len() < sb.bits_bytes(), "refused only when too short");
        return;
    };
    assert_eq!(bitmap.encode(), &bits[..sb.bits_bytes()], "the bits are kept as read");
    assert_eq!(bitmap.chunks(), sb.chunk_count());
    assert_eq!(bitmap.chunk_sectors(), sb.chunk_sectors());
    let chunks = bitmap.chunks();
    let dirty = bitmap.dirty_count();
    assert!(dirty <= chunks);
    if chunks == 0 {
        return;
    }
    // Chunks picked from the fix byte and the length: flip one, check, flip it back.
    let chunk = u64::from(fix).wrapping_mul(bytes.len() as u64) % chunks;
    let was = bitmap.is_dirty(chunk);
    bitmap.set(chunk);
    assert_eq!(bitmap.dirty_count(), dirty + u64::from(!was));
    bitmap.clear(chunk);
    assert_eq!(bitmap.dirty_count(), dirty - u64::from(was));
    // A write over the last sector the bitmap covers dirties the last chunk.
    let sectors = sb.sync_size_sectors;
    bitmap.set_range(sectors - 1, 1);
    assert!(bitmap.is_dirty(chunks - 1));
    let covering = bitmap.chunks_covering(0, sectors);
    assert_eq!(covering, 0..chunks, "the whole sync_size covers every chunk");
});
