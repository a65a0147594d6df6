//! The `feature_map` bits of a v1.x superblock.
//!
//! md refuses a superblock with any bit outside [`ALL`], and so does
//! [`crate::Superblock1::decode`]: an unknown feature may change the meaning of other fields.
//! Values are md's (`MD_FEATURE_*`); the fixtures confirm [`BITMAP_OFFSET`] (r5-bitmap has
//! feature_map 0x1) and that no other bit is set on a clean, fresh array.

/// `bitmap_offset` is meaningful: there is an internal write-intent bitmap.
pub const BITMAP_OFFSET: u32 = 1;
/// `recovery_offset` is meaningful: this member is partly rebuilt.
pub const RECOVERY_OFFSET: u32 = 2;
/// A reshape is in progress; the reshape fields are meaningful.
pub const RESHAPE_ACTIVE: u32 = 4;
/// The bad block log holds entries (reserving its space does not set this bit).
pub const BAD_BLOCKS: u32 = 8;
/// This member is a replacement for the member holding the same slot.
pub const REPLACEMENT: u32 = 16;
/// The reshape runs from the end of the array towards the start.
pub const RESHAPE_BACKWARDS: u32 = 32;
/// `new_offset` is meaningful: the reshape moves data_offset.
pub const NEW_OFFSET: u32 = 64;
/// Recovery uses the bitmap to copy only dirty regions.
pub const RECOVERY_BITMAP: u32 = 128;
/// Clustered md (shared between nodes).
pub const CLUSTERED: u32 = 256;
/// The array has a write journal device.
pub const JOURNAL: u32 = 512;
/// The array closes the write hole with a partial parity log.
pub const PPL: u32 = 1024;
/// The partial parity log area holds several logs.
pub const MULTIPLE_PPLS: u32 = 2048;
/// raid0 with the layout recorded in `layout`.
pub const RAID0_LAYOUT: u32 = 4096;

/// Every bit md defines; anything else is refused.
pub const ALL: u32 = BITMAP_OFFSET
    | RECOVERY_OFFSET
    | RESHAPE_ACTIVE
    | BAD_BLOCKS
    | REPLACEMENT
    | RESHAPE_BACKWARDS
    | NEW_OFFSET
    | RECOVERY_BITMAP
    | CLUSTERED
    | JOURNAL
    | PPL
    | MULTIPLE_PPLS
    | RAID0_LAYOUT;

// The bits are distinct powers of two, so ALL is their count of ones.
const _: () = assert!(ALL.count_ones() == 13);
const _: () = assert!(ALL == 0x1fff);
