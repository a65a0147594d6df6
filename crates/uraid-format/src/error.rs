//! Error enums, one per operation: decoding a superblock, decoding a bitmap, building a fresh
//! superblock, parsing a UUID.
//!
//! Every variant names the on-disk field that failed and carries the values seen, so a refusal
//! of a real member can be diagnosed from the message alone (the member is usually not at hand
//! when someone reads the log).

use thiserror::Error;

/// A metadata area of a v1.x member, named in overlap errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetadataArea {
    /// The superblock itself: `256 + 2 * max_dev` bytes at `super_offset`.
    Superblock,
    /// The internal write-intent bitmap at `super_offset + bitmap_offset` (at least its
    /// 256-byte superblock; the size of the bit area is only known from the bitmap superblock).
    Bitmap,
    /// The partial parity log at `super_offset + ppl.offset`, `ppl.size` sectors.
    Ppl,
    /// The bad block log at `super_offset + bblog_offset`, `bblog_size` sectors.
    BadBlockLog,
}

/// Why a v1.x superblock was refused by [`crate::Superblock1::decode`].
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum SuperblockError {
    #[error("superblock buffer too short: need {needed_bytes} bytes, got {got_bytes}")]
    TooShort { needed_bytes: usize, got_bytes: usize },
    #[error("magic: found {found:#010x}, expected 0xa92b4efc")]
    BadMagic { found: u32 },
    #[error("major_version: found {found}, only 1 is supported")]
    UnsupportedMajorVersion { found: u32 },
    #[error("max_dev: {max_dev} roles do not fit a 4 KiB superblock (at most 1920)")]
    MaxDevTooLarge { max_dev: u32 },
    #[error("sb_csum: stored {stored:#010x}, computed {computed:#010x}")]
    BadChecksum { stored: u32, computed: u32 },
    #[error("feature_map: unknown bits {unknown_bits:#x}")]
    UnknownFeatures { unknown_bits: u32 },
    #[error("level: {level} is not an md level this crate knows")]
    UnknownLevel { level: i32 },
    #[error("layout: {layout} is not a known layout for level {level}")]
    UnknownLayout { level: i32, layout: u32 },
    #[error("chunksize: {chunk_sectors} sectors is not valid for level {level}")]
    BadChunkSize { level: i32, chunk_sectors: u32 },
    #[error("raid_disks: {raid_disks} is outside 1..={max_dev} (max_dev)")]
    RaidDisksOutOfRange { raid_disks: u32, max_dev: u32 },
    #[error(
        "delta_disks: a reshape removing slots up to {slot_count} has more than {max_dev} roles"
    )]
    SlotsOutOfRange { slot_count: u32, max_dev: u32 },
    #[error("dev_number: {dev_number} is not below max_dev {max_dev}")]
    DevNumberOutOfRange { dev_number: u32, max_dev: u32 },
    #[error(
        "dev_roles[{index}]: role {role:#06x} is neither a slot below {slot_limit} nor special"
    )]
    RoleOutOfRange { index: usize, role: u16, slot_limit: u32 },
    #[error("size: component size {size_sectors} exceeds data_size {data_size_sectors} sectors")]
    SizeExceedsDataSize { size_sectors: u64, data_size_sectors: u64 },
    #[error(
        "{area:?} at sectors {start_sector}..{end_sector} overlaps the data area \
         {data_start_sector}..{data_end_sector}"
    )]
    MetadataOverlapsData {
        area: MetadataArea,
        start_sector: u64,
        end_sector: u64,
        data_start_sector: u64,
        data_end_sector: u64,
    },
    #[error("{area:?}: signed offset {offset_sectors} from super_offset lies before the device")]
    MetadataBeforeDevice { area: MetadataArea, offset_sectors: i64 },
}

/// Why a write-intent bitmap superblock or bit area was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum BitmapError {
    #[error("bitmap buffer too short: need {needed_bytes} bytes, got {got_bytes}")]
    TooShort { needed_bytes: usize, got_bytes: usize },
    #[error("bitmap magic: found {found:#010x}, expected 0x6d746962 (\"bitm\")")]
    BadMagic { found: u32 },
    #[error("bitmap version: {found} is not supported (only 4 is)")]
    UnsupportedVersion { found: u32 },
    #[error("bitmap chunksize: {chunk_bytes} bytes is not a power of two of at least 512")]
    BadChunkSize { chunk_bytes: u32 },
    #[error("bitmap daemon_sleep: 0 seconds is out of range")]
    BadDaemonSleep,
    #[error("bitmap write_behind: {write_behind} exceeds 16383")]
    BadWriteBehind { write_behind: u32 },
    #[error(
        "bitmap chunksize {chunk_bytes}: the bits for {size_sectors} sectors a member take \
         {needed_bytes} bytes with its superblock, past the data offset ({room_bytes} bytes \
         of room before it)"
    )]
    PastData { chunk_bytes: u32, size_sectors: u64, needed_bytes: u64, room_bytes: u64 },
}

/// Why [`crate::create::build_superblock`] could not build a superblock.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum CreateError {
    #[error("name: {len_bytes} bytes do not fit set_name (at most 31, NUL-terminated)")]
    NameTooLong { len_bytes: usize },
    #[error("dev_roles: {roles_count} roles do not fit a 4 KiB superblock (at most 1920)")]
    TooManyRoles { roles_count: usize },
    #[error(
        "device: {device_sectors} sectors leave no data area after data_offset {data_offset_sectors}"
    )]
    DeviceTooSmall { device_sectors: u64, data_offset_sectors: u64 },
    #[error("the built superblock does not validate: {0}")]
    Invalid(#[from] SuperblockError),
}

/// Why a UUID string in mdadm's form could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum UuidParseError {
    #[error("uuid {text:?}: expected 32 hex digits in 4 groups of 8 separated by ':'")]
    Malformed { text: String },
}
