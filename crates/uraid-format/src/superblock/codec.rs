//! Byte layout of `mdp_superblock_1` and the decode/encode pair.
//!
//! All integers are little-endian. Offsets are chained from the previous field so that a size
//! error shows up as a failed const assertion, not as a silently shifted field. The table with
//! meanings is in docs/format.md; the fixtures confirm every offset (re-encoding is byte-
//! identical on all 58 fixture members).

use super::Superblock1;
use crate::checksum::{SB_CSUM_OFFSET, sb_csum};
use crate::dev_roles::DevRole;
use crate::error::SuperblockError;
use crate::level::Level;
use crate::uuid::Uuid;

/// md's superblock magic (`MD_SB_MAGIC`), stored little-endian: fc 4e 2b a9.
pub const MAGIC: u32 = 0xa92b_4efc;
/// The only `major_version` of v1.x superblocks.
pub const MAJOR_VERSION: u32 = 1;
/// Bytes before `dev_roles[]`.
pub const SUPERBLOCK_HEADER_BYTES: usize = 256;
/// Largest `max_dev` whose roles still fit a 4 KiB superblock: (4096 - 256) / 2.
pub const MAX_DEV_LIMIT: u32 = 1920;
/// Where v1.2 metadata puts the superblock: 4 KiB from the member's start.
pub const V1_2_SUPER_OFFSET_SECTORS: u64 = 8;

// Array information (128 bytes).
const MAGIC_OFFSET: usize = 0;
const MAJOR_VERSION_OFFSET: usize = MAGIC_OFFSET + 4;
const FEATURE_MAP_OFFSET: usize = MAJOR_VERSION_OFFSET + 4;
const PAD0_OFFSET: usize = FEATURE_MAP_OFFSET + 4;
const SET_UUID_OFFSET: usize = PAD0_OFFSET + 4;
const SET_NAME_OFFSET: usize = SET_UUID_OFFSET + 16;
const CTIME_OFFSET: usize = SET_NAME_OFFSET + 32;
const LEVEL_OFFSET: usize = CTIME_OFFSET + 8;
const LAYOUT_OFFSET: usize = LEVEL_OFFSET + 4;
const SIZE_OFFSET: usize = LAYOUT_OFFSET + 4;
const CHUNKSIZE_OFFSET: usize = SIZE_OFFSET + 8;
const RAID_DISKS_OFFSET: usize = CHUNKSIZE_OFFSET + 4;
const BITMAP_OFFSET_OFFSET: usize = RAID_DISKS_OFFSET + 4;
const NEW_LEVEL_OFFSET: usize = BITMAP_OFFSET_OFFSET + 4;
const RESHAPE_POSITION_OFFSET: usize = NEW_LEVEL_OFFSET + 4;
const DELTA_DISKS_OFFSET: usize = RESHAPE_POSITION_OFFSET + 8;
const NEW_LAYOUT_OFFSET: usize = DELTA_DISKS_OFFSET + 4;
const NEW_CHUNK_OFFSET: usize = NEW_LAYOUT_OFFSET + 4;
const NEW_OFFSET_OFFSET: usize = NEW_CHUNK_OFFSET + 4;
// This-device information (64 bytes).
const DATA_OFFSET_OFFSET: usize = NEW_OFFSET_OFFSET + 4;
const DATA_SIZE_OFFSET: usize = DATA_OFFSET_OFFSET + 8;
const SUPER_OFFSET_OFFSET: usize = DATA_SIZE_OFFSET + 8;
const RECOVERY_OFFSET_OFFSET: usize = SUPER_OFFSET_OFFSET + 8;
const DEV_NUMBER_OFFSET: usize = RECOVERY_OFFSET_OFFSET + 8;
const CNT_CORRECTED_READ_OFFSET: usize = DEV_NUMBER_OFFSET + 4;
const DEVICE_UUID_OFFSET: usize = CNT_CORRECTED_READ_OFFSET + 4;
const DEVFLAGS_OFFSET: usize = DEVICE_UUID_OFFSET + 16;
const BBLOG_SHIFT_OFFSET: usize = DEVFLAGS_OFFSET + 1;
const BBLOG_SIZE_OFFSET: usize = BBLOG_SHIFT_OFFSET + 1;
const BBLOG_OFFSET_OFFSET: usize = BBLOG_SIZE_OFFSET + 2;
// Array state information (64 bytes).
const UTIME_OFFSET: usize = BBLOG_OFFSET_OFFSET + 4;
const EVENTS_OFFSET: usize = UTIME_OFFSET + 8;
const RESYNC_OFFSET_OFFSET: usize = EVENTS_OFFSET + 8;
const SB_CSUM_FIELD_OFFSET: usize = RESYNC_OFFSET_OFFSET + 8;
const MAX_DEV_OFFSET: usize = SB_CSUM_FIELD_OFFSET + 4;
const PAD3_OFFSET: usize = MAX_DEV_OFFSET + 4;
const DEV_ROLES_OFFSET: usize = PAD3_OFFSET + 32;

// md's struct is three blocks of 128, 64 and 64 bytes; these pin the chain to md's offsets.
const _: () = assert!(DATA_OFFSET_OFFSET == 128);
const _: () = assert!(UTIME_OFFSET == 192);
const _: () = assert!(SB_CSUM_FIELD_OFFSET == SB_CSUM_OFFSET);
const _: () = assert!(DEV_ROLES_OFFSET == SUPERBLOCK_HEADER_BYTES);
const _: () = assert!(SUPERBLOCK_HEADER_BYTES + 2 * MAX_DEV_LIMIT as usize == 4096);

fn u16_at(bytes: &[u8], offset: usize) -> u16 {
    u16::from_le_bytes([bytes[offset], bytes[offset + 1]])
}

fn u32_at(bytes: &[u8], offset: usize) -> u32 {
    u32::from_le_bytes(bytes[offset..offset + 4].try_into().expect("4-byte slice"))
}

/// md's signed fields (level, offsets relative to the superblock, delta_disks).
fn i32_at(bytes: &[u8], offset: usize) -> i32 {
    i32::from_le_bytes(bytes[offset..offset + 4].try_into().expect("4-byte slice"))
}

fn u64_at(bytes: &[u8], offset: usize) -> u64 {
    u64::from_le_bytes(bytes[offset..offset + 8].try_into().expect("8-byte slice"))
}

fn array_at<const N: usize>(bytes: &[u8], offset: usize) -> [u8; N] {
    bytes[offset..offset + N].try_into().expect("N-byte slice")
}

/// Bytes covered by the checksum and by `encode`: the header plus 2 per role.
#[must_use]
pub fn encoded_len(max_dev: u32) -> usize {
    SUPERBLOCK_HEADER_BYTES + 2 * max_dev as usize
}

impl Superblock1 {
    /// Decodes and validates a superblock from `bytes` (the 4 KiB read at `super_offset`;
    /// only the first `256 + 2 * max_dev` bytes are looked at). Checks run in the order md
    /// runs them: magic, version, max_dev, checksum, then the fields.
    pub fn decode(bytes: &[u8]) -> Result<Superblock1, SuperblockError> {
        let max_dev = check_envelope(bytes)?;
        let len = encoded_len(max_dev);
        let computed = sb_csum(&bytes[..len]);
        let stored = u32_at(bytes, SB_CSUM_FIELD_OFFSET);
        if stored != computed {
            return Err(SuperblockError::BadChecksum { stored, computed });
        }
        let raw_level = i32_at(bytes, LEVEL_OFFSET);
        let level =
            Level::from_md(raw_level).ok_or(SuperblockError::UnknownLevel { level: raw_level })?;
        let superblock = decode_fields(bytes, level, max_dev);
        superblock.validate()?;
        Ok(superblock)
    }

    /// Encodes into a new buffer of exactly `256 + 2 * max_dev` bytes. The stored `sb_csum`
    /// is written as is: call [`Superblock1::seal`] first after changing fields. md pads the
    /// rest of the 4 KiB superblock area with zeros (true on every fixture).
    #[must_use]
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![0u8; encoded_len(self.max_dev())];
        self.encode_into(&mut out);
        out
    }

    /// Encodes into the front of `out`, which must hold `256 + 2 * max_dev` bytes; the rest
    /// of `out` is left untouched.
    pub fn encode_into(&self, out: &mut [u8]) {
        assert!(self.max_dev() <= MAX_DEV_LIMIT, "max_dev {} exceeds 4 KiB", self.max_dev());
        assert!(out.len() >= encoded_len(self.max_dev()), "superblock buffer too short");
        encode_array_info(self, out);
        encode_device_info(self, out);
        encode_state_info(self, out);
        for (index, role) in self.dev_roles.iter().enumerate() {
            let at = DEV_ROLES_OFFSET + 2 * index;
            out[at..at + 2].copy_from_slice(&role.to_raw().to_le_bytes());
        }
    }
}

/// Checks what must hold before the checksum can even be computed; returns `max_dev`.
fn check_envelope(bytes: &[u8]) -> Result<u32, SuperblockError> {
    if bytes.len() < SUPERBLOCK_HEADER_BYTES {
        let needed_bytes = SUPERBLOCK_HEADER_BYTES;
        return Err(SuperblockError::TooShort { needed_bytes, got_bytes: bytes.len() });
    }
    let magic = u32_at(bytes, MAGIC_OFFSET);
    if magic != MAGIC {
        return Err(SuperblockError::BadMagic { found: magic });
    }
    let major_version = u32_at(bytes, MAJOR_VERSION_OFFSET);
    if major_version != MAJOR_VERSION {
        return Err(SuperblockError::UnsupportedMajorVersion { found: major_version });
    }
    let max_dev = u32_at(bytes, MAX_DEV_OFFSET);
    if max_dev > MAX_DEV_LIMIT {
        return Err(SuperblockError::MaxDevTooLarge { max_dev });
    }
    let needed_bytes = encoded_len(max_dev);
    if bytes.len() < needed_bytes {
        return Err(SuperblockError::TooShort { needed_bytes, got_bytes: bytes.len() });
    }
    Ok(max_dev)
}

fn decode_fields(bytes: &[u8], level: Level, max_dev: u32) -> Superblock1 {
    let dev_roles = (0..max_dev as usize)
        .map(|index| DevRole::from_raw(u16_at(bytes, DEV_ROLES_OFFSET + 2 * index)))
        .collect();
    Superblock1 {
        feature_map: u32_at(bytes, FEATURE_MAP_OFFSET),
        pad0: u32_at(bytes, PAD0_OFFSET),
        set_uuid: Uuid(array_at(bytes, SET_UUID_OFFSET)),
        set_name: array_at(bytes, SET_NAME_OFFSET),
        ctime: u64_at(bytes, CTIME_OFFSET),
        level,
        layout: u32_at(bytes, LAYOUT_OFFSET),
        size_sectors: u64_at(bytes, SIZE_OFFSET),
        chunk_sectors: u32_at(bytes, CHUNKSIZE_OFFSET),
        raid_disks: u32_at(bytes, RAID_DISKS_OFFSET),
        bitmap_offset_sectors: i32_at(bytes, BITMAP_OFFSET_OFFSET),
        new_level: i32_at(bytes, NEW_LEVEL_OFFSET),
        reshape_position_sectors: u64_at(bytes, RESHAPE_POSITION_OFFSET),
        delta_disks: i32_at(bytes, DELTA_DISKS_OFFSET),
        new_layout: u32_at(bytes, NEW_LAYOUT_OFFSET),
        new_chunk_sectors: u32_at(bytes, NEW_CHUNK_OFFSET),
        new_offset_sectors: i32_at(bytes, NEW_OFFSET_OFFSET),
        data_offset_sectors: u64_at(bytes, DATA_OFFSET_OFFSET),
        data_size_sectors: u64_at(bytes, DATA_SIZE_OFFSET),
        super_offset_sectors: u64_at(bytes, SUPER_OFFSET_OFFSET),
        recovery_offset_sectors: u64_at(bytes, RECOVERY_OFFSET_OFFSET),
        dev_number: u32_at(bytes, DEV_NUMBER_OFFSET),
        cnt_corrected_read: u32_at(bytes, CNT_CORRECTED_READ_OFFSET),
        device_uuid: Uuid(array_at(bytes, DEVICE_UUID_OFFSET)),
        devflags: bytes[DEVFLAGS_OFFSET],
        bblog_shift: bytes[BBLOG_SHIFT_OFFSET],
        bblog_size_sectors: u16_at(bytes, BBLOG_SIZE_OFFSET),
        bblog_offset_sectors: i32_at(bytes, BBLOG_OFFSET_OFFSET),
        utime: u64_at(bytes, UTIME_OFFSET),
        events: u64_at(bytes, EVENTS_OFFSET),
        resync_offset_sectors: u64_at(bytes, RESYNC_OFFSET_OFFSET),
        sb_csum: u32_at(bytes, SB_CSUM_FIELD_OFFSET),
        pad3: array_at(bytes, PAD3_OFFSET),
        dev_roles,
    }
}

fn put(out: &mut [u8], offset: usize, bytes: &[u8]) {
    out[offset..offset + bytes.len()].copy_from_slice(bytes);
}

fn encode_array_info(sb: &Superblock1, out: &mut [u8]) {
    put(out, MAGIC_OFFSET, &MAGIC.to_le_bytes());
    put(out, MAJOR_VERSION_OFFSET, &MAJOR_VERSION.to_le_bytes());
    put(out, FEATURE_MAP_OFFSET, &sb.feature_map.to_le_bytes());
    put(out, PAD0_OFFSET, &sb.pad0.to_le_bytes());
    put(out, SET_UUID_OFFSET, &sb.set_uuid.0);
    put(out, SET_NAME_OFFSET, &sb.set_name);
    put(out, CTIME_OFFSET, &sb.ctime.to_le_bytes());
    put(out, LEVEL_OFFSET, &sb.level.to_md().to_le_bytes());
    put(out, LAYOUT_OFFSET, &sb.layout.to_le_bytes());
    put(out, SIZE_OFFSET, &sb.size_sectors.to_le_bytes());
    put(out, CHUNKSIZE_OFFSET, &sb.chunk_sectors.to_le_bytes());
    put(out, RAID_DISKS_OFFSET, &sb.raid_disks.to_le_bytes());
    put(out, BITMAP_OFFSET_OFFSET, &sb.bitmap_offset_sectors.to_le_bytes());
    put(out, NEW_LEVEL_OFFSET, &sb.new_level.to_le_bytes());
    put(out, RESHAPE_POSITION_OFFSET, &sb.reshape_position_sectors.to_le_bytes());
    put(out, DELTA_DISKS_OFFSET, &sb.delta_disks.to_le_bytes());
    put(out, NEW_LAYOUT_OFFSET, &sb.new_layout.to_le_bytes());
    put(out, NEW_CHUNK_OFFSET, &sb.new_chunk_sectors.to_le_bytes());
    put(out, NEW_OFFSET_OFFSET, &sb.new_offset_sectors.to_le_bytes());
}

fn encode_device_info(sb: &Superblock1, out: &mut [u8]) {
    put(out, DATA_OFFSET_OFFSET, &sb.data_offset_sectors.to_le_bytes());
    put(out, DATA_SIZE_OFFSET, &sb.data_size_sectors.to_le_bytes());
    put(out, SUPER_OFFSET_OFFSET, &sb.super_offset_sectors.to_le_bytes());
    put(out, RECOVERY_OFFSET_OFFSET, &sb.recovery_offset_sectors.to_le_bytes());
    put(out, DEV_NUMBER_OFFSET, &sb.dev_number.to_le_bytes());
    put(out, CNT_CORRECTED_READ_OFFSET, &sb.cnt_corrected_read.to_le_bytes());
    put(out, DEVICE_UUID_OFFSET, &sb.device_uuid.0);
    out[DEVFLAGS_OFFSET] = sb.devflags;
    out[BBLOG_SHIFT_OFFSET] = sb.bblog_shift;
    put(out, BBLOG_SIZE_OFFSET, &sb.bblog_size_sectors.to_le_bytes());
    put(out, BBLOG_OFFSET_OFFSET, &sb.bblog_offset_sectors.to_le_bytes());
}

fn encode_state_info(sb: &Superblock1, out: &mut [u8]) {
    put(out, UTIME_OFFSET, &sb.utime.to_le_bytes());
    put(out, EVENTS_OFFSET, &sb.events.to_le_bytes());
    put(out, RESYNC_OFFSET_OFFSET, &sb.resync_offset_sectors.to_le_bytes());
    put(out, SB_CSUM_FIELD_OFFSET, &sb.sb_csum.to_le_bytes());
    put(out, MAX_DEV_OFFSET, &sb.max_dev().to_le_bytes());
    put(out, PAD3_OFFSET, &sb.pad3);
}
