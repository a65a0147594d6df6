//! Linux md on-disk formats as pure codecs: bytes in, structs out, and back.
//!
//! - [`Superblock1`]: the v1.x superblock (v1.2 puts it 4 KiB into each member).
//! - [`BitmapSuper`] and [`WriteIntentBitmap`]: md's internal write-intent bitmap.
//! - [`assemble`]: which devices form an array and in which slots, or why not (md's rules).
//! - [`create`]: a fresh superblock for a new array, set the way mdadm 4.x sets it.
//! - [`grow`]: a larger component size (mdadm --grow --size): its limits and superblocks.
//! - [`md_ppl`]: the records of md's own partial parity log (RAID5 `--consistency-policy=ppl`).
//!
//! No I/O happens here: callers read the bytes (at the offsets this crate documents) and hand
//! them in. Every decoder validates what it decodes and every encoder is its exact inverse:
//! `encode(decode(bytes)) == bytes` on every member of the md fixtures
//! (`shared/fixtures/md`), which were written by the Linux md driver. The formats are drawn
//! byte by byte in docs/format.md. md is GPL; this crate takes its formats and numbers only.
#![forbid(unsafe_code)]

pub mod assemble;
mod badblocks;
mod bitmap;
mod checksum;
pub mod create;
mod dev_roles;
mod error;
pub mod feature;
pub mod grow;
mod level;
pub mod md_ppl;
mod other_metadata;
mod superblock;
mod uuid;

pub use badblocks::{
    BAD_BLOCK_ENTRY_MAX, BadRange, bad_block_entries, decode_bad_blocks, encode_bad_blocks,
};
pub use bitmap::{
    BITMAP_MAGIC, BITMAP_SUPER_BYTES, BITMAP_VERSION, BitmapSuper, DEFAULT_DAEMON_SLEEP_SECONDS,
    WriteIntentBitmap, bitmap_state, default_chunk_bytes, resized_bitmap,
};
pub use checksum::sb_csum;
pub use dev_roles::{ArrayState, DevRole, ROLE_FAULTY, ROLE_JOURNAL, ROLE_SPARE, SlotState};
pub use error::{BitmapError, CreateError, MetadataArea, SuperblockError, UuidParseError};
pub use level::Level;
pub use other_metadata::OtherMetadata;
pub use superblock::{
    MAX_DEV_LIMIT, MAX_SECTOR, SUPERBLOCK_HEADER_BYTES, Superblock1, V1_2_SUPER_OFFSET_SECTORS,
};
pub use uuid::Uuid;
