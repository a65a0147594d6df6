//! Adding or removing the internal write-intent bitmap of a stopped array (mdadm --grow
//! --bitmap=internal / none). md puts an added bitmap where mdadm's create puts it, 8 sectors
//! past the superblock, with mdadm's chunk for its room (64 MiB at least), and a removed one's
//! feature bit and offset go, its bytes left as they were (both checked against the kernel in
//! `kernel_grow.rs`). The room is what lies before the next thing (the bad block log, which
//! mdadm puts after the bitmap's room, or the data), at most the room mdadm's create keeps for
//! an array of this size: what follows is uraid's log's.

use super::{GrowError, stamp};
use crate::bitmap::{BITMAP_SUPER_BYTES, BitmapSuper, WriteIntentBitmap, default_chunk_bytes};
use crate::create::{BITMAP_OFFSET_SECTORS, choose_bitmap_space_sectors};
use crate::feature;
use crate::superblock::Superblock1;

/// md's bitmaps take whole 4 KiB pages (mdadm reserves and fills them so).
const BITMAP_PAGE_SECTORS: u64 = 8;

/// Sectors a bitmap added to this array may take, from 8 past the superblock.
pub fn bitmap_room_sectors(sb: &Superblock1) -> Result<u64, GrowError> {
    let start = BITMAP_OFFSET_SECTORS as u64;
    let mut end = sb.data_offset_sectors.saturating_sub(sb.super_offset_sectors);
    let mut next = "data";
    // A log before the superblock (negative offset: v1.0's place) is not in the way.
    let bblog = u64::try_from(sb.bblog_offset_sectors).unwrap_or(0);
    if sb.bblog_size_sectors > 0 && bblog > 0 && bblog < end {
        (end, next) = (bblog, "bad block log");
    }
    let room_sectors = end.saturating_sub(start);
    if room_sectors < BITMAP_PAGE_SECTORS {
        return Err(GrowError::NoRoomForBitmap { room_sectors, next });
    }
    Ok(room_sectors.min(choose_bitmap_space_sectors(sb.size_sectors).max(BITMAP_PAGE_SECTORS)))
}

/// The bitmap added to the (clean) array `sb` describes: every bit clear, its events the
/// superblocks' new count, and bits cleared as of then (a device that left before cannot come
/// back on bits this bitmap never kept). `chunk_bytes`: mdadm's --bitmap-chunk, a power of two
/// from 4 KiB (checked by the caller), or mdadm's choice.
pub fn add_bitmap(
    sb: &Superblock1,
    chunk_bytes: Option<u32>,
    events: u64,
) -> Result<(BitmapSuper, WriteIntentBitmap), GrowError> {
    if sb.has_bitmap() {
        return Err(GrowError::HasBitmap);
    }
    if sb.ppl().is_some() {
        return Err(GrowError::MdPpl);
    }
    let room_sectors = bitmap_room_sectors(sb)?;
    let chunk_bytes = if let Some(chunk_bytes) = chunk_bytes {
        chunk_bytes
    } else {
        let chosen = default_chunk_bytes(sb.size_sectors, room_sectors);
        let too_small = GrowError::BitmapTooSmall { new_sectors: sb.size_sectors };
        u32::try_from(chosen).map_err(|_| too_small)?
    };
    let mut bitmap = BitmapSuper::new_internal(sb.set_uuid, sb.size_sectors, chunk_bytes);
    let needed_bytes = (BITMAP_SUPER_BYTES + bitmap.bits_bytes()) as u64;
    let room_bytes = room_sectors * 512;
    if bitmap.reserved_bytes() as u64 > room_bytes {
        let chunk_bytes = u64::from(chunk_bytes);
        return Err(GrowError::BitmapChunkTooSmall { chunk_bytes, needed_bytes, room_bytes });
    }
    bitmap.events = events;
    bitmap.events_cleared = events;
    let bits = WriteIntentBitmap::new_clean(&bitmap);
    Ok((bitmap, bits))
}

/// A member's superblock with the bitmap's feature bit and offset set (`present`) or cleared,
/// the event count given, stamped and sealed.
#[must_use]
pub fn with_bitmap_field(
    own: &Superblock1,
    present: bool,
    events: u64,
    utime_seconds: u64,
) -> Superblock1 {
    let mut sb = own.clone();
    if present {
        sb.feature_map |= feature::BITMAP_OFFSET;
        sb.bitmap_offset_sectors = BITMAP_OFFSET_SECTORS;
    } else {
        sb.feature_map &= !feature::BITMAP_OFFSET;
        sb.bitmap_offset_sectors = 0;
    }
    stamp(&mut sb, events, utime_seconds);
    sb
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grow::tests::superblock;

    /// The kernel's figures for such an array of 24 MiB members (mdadm --grow
    /// --bitmap=internal): 8 sectors from the superblock, a 64 MiB chunk, one bit; the bad
    /// block log stays at 16.
    #[test]
    fn an_added_bitmap_is_where_and_as_md_adds_it() {
        let sb = superblock(47104, 2048);
        assert_eq!(sb.bblog_offset_sectors, 16);
        assert_eq!(bitmap_room_sectors(&sb).unwrap(), 8);
        let (bitmap, bits) = add_bitmap(&sb, None, 2).unwrap();
        assert_eq!((bitmap.chunk_bytes, bitmap.chunk_count()), (64 << 20, 1));
        assert_eq!((bitmap.events, bitmap.events_cleared), (2, 2));
        assert_eq!(bits.dirty_count(), 0);
        let with = with_bitmap_field(&sb, true, 2, 9);
        assert!(with.has_bitmap() && with.bitmap_offset_sectors == 8);
        assert!(!with.bad_block_log_in_bitmap(&bitmap));
        Superblock1::decode(&with.encode()).expect("md's rules hold");
        let without = with_bitmap_field(&with, false, 3, 9);
        assert!(!without.has_bitmap() && without.bitmap_offset_sectors == 0);
        assert_eq!(without.events, 3);
    }

    #[test]
    fn a_chunk_too_small_for_the_room_is_refused() {
        let sb = superblock(47104, 2048);
        // 23 MiB of 4 KiB chunks: 5888 bits, 992 bytes with the superblock: one page.
        assert!(add_bitmap(&sb, Some(4096), 2).is_ok());
        let large = superblock(8 << 21, 2048);
        let err = add_bitmap(&large, Some(4096), 2).unwrap_err();
        assert!(matches!(err, GrowError::BitmapChunkTooSmall { room_bytes: 4096, .. }), "{err}");
    }

    #[test]
    fn no_room_before_the_data_is_refused() {
        let mut sb = superblock(47104, 2048);
        sb.bblog_offset_sectors = 12;
        assert!(matches!(
            bitmap_room_sectors(&sb),
            Err(GrowError::NoRoomForBitmap { room_sectors: 4, next: "bad block log" })
        ));
        let mut sb = superblock(47104, 20);
        sb.bblog_size_sectors = 0;
        sb.bblog_offset_sectors = 0;
        assert!(matches!(
            bitmap_room_sectors(&sb),
            Err(GrowError::NoRoomForBitmap { room_sectors: 4, next: "data" })
        ));
    }
}
