//! md's write-intent bitmap: the bitmap superblock and the bits behind it, on arbitrary bytes.
//!
//! The first byte chooses whether md's magic and version 4 are forced in (random bytes never
//! carry them). Invariants: no panic; a decoded bitmap superblock re-encodes to the same 256
//! bytes and decodes to the same value; the bits re-encode to the bytes they came from, and
//! setting and clearing chunks inside the bitmap behaves as the bits say. Read as an array's
//! bitmap (`decode_for`, the component size and data offset taken from the bytes after the
//! bitmap superblock), its bits are counted over the component size and never run past the
//! data.
#![no_main]

use libfuzzer_sys::fuzz_target;
use uraid_format::WriteIntentBitmap;
use uraid_format::create::{NewArray, NewMember, build_superblock};
use uraid_format::{BITMAP_MAGIC, BITMAP_SUPER_BYTES, BITMAP_VERSION, BitmapSuper};
use uraid_format::{DevRole, Level, Uuid};

/// `bytes` (a bitmap superblock that decodes) read as the bitmap of a v1.2 array whose
/// component size and data offset come from the 12 bytes after it.
fn array_bitmap(bytes: &[u8], fix: u8) {
    let Some(sizes) = bytes.get(BITMAP_SUPER_BYTES..BITMAP_SUPER_BYTES + 12) else { return };
    let size_sectors = u64::from_le_bytes(sizes[..8].try_into().expect("8 bytes"));
    let data_offset_sectors = u64::from(u32::from_le_bytes(sizes[8..].try_into().expect("4")));
    let array = NewArray {
        set_uuid: Uuid([fix; 16]),
        name: "f",
        level: Level::Raid5,
        layout: 2,
        chunk_sectors: 128,
        raid_disks: 3,
        size_sectors,
        data_offset_sectors,
        ctime_seconds: 1,
        utime_seconds: 1,
        events: 1,
        clean: true,
        internal_bitmap: false,
    };
    let roles = [DevRole::Active(0), DevRole::Active(1), DevRole::Active(2)];
    let member = NewMember {
        dev_number: 0,
        device_uuid: Uuid([1; 16]),
        device_sectors: size_sectors.saturating_add(data_offset_sectors),
        dev_roles: &roles,
    };
    // The bitmap's place as md puts it, whatever create would choose for these sizes.
    let Ok(mut md) = build_superblock(&array, &member) else { return };
    md.feature_map |= uraid_format::feature::BITMAP_OFFSET;
    md.bitmap_offset_sectors = 8;
    let Ok(bitmap) = BitmapSuper::decode_for(bytes, &md) else { return };
    assert_eq!(bitmap.sync_size_sectors, size_sectors, "counted over the component size");
    let end = md.super_offset_sectors * 512
        + md.bitmap_offset_sectors as u64 * 512
        + (BITMAP_SUPER_BYTES + bitmap.bits_bytes()) as u64;
    // Metadata before the data (v1.2's shape; v1.0 keeps its bitmap after the data).
    if md.super_offset_sectors < data_offset_sectors {
        assert!(end <= data_offset_sectors * 512, "bits past the data: {end}");
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&fix, rest)) = data.split_first() else { return };
    let mut bytes = rest.to_vec();
    if fix & 1 != 0 && bytes.len() >= 8 {
        bytes[0..4].copy_from_slice(&BITMAP_MAGIC.to_le_bytes());
        bytes[4..8].copy_from_slice(&BITMAP_VERSION.to_le_bytes());
    }
    let Ok(sb) = BitmapSuper::decode(&bytes) else { return };
    array_bitmap(&bytes, fix);
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
