//! The md v1.x superblock (`struct mdp_superblock_1`), as stored by v1.2 metadata 4 KiB
//! (8 sectors) from the start of each member.
//!
//! Invariants of a decoded [`Superblock1`] (checked by `decode`, asserted by `encode`):
//! magic and major version are md's, `dev_roles.len()` is `max_dev` (at most 1920, so the
//! superblock fits 4 KiB), the checksum matched, and the fields are mutually possible (see
//! `validate.rs`). Fields that a decode does not interpret (pads, the reshape fields when no
//! reshape is active) are kept verbatim so that `encode(decode(b)) == b` on every fixture.
//!
//! Byte layout: `codec.rs` and docs/format.md.

mod codec;
mod validate;

pub use codec::{MAX_DEV_LIMIT, SUPERBLOCK_HEADER_BYTES, V1_2_SUPER_OFFSET_SECTORS};

use crate::dev_roles::{ArrayState, DevRole};
use crate::feature;
use crate::level::Level;
use crate::uuid::Uuid;

/// md's "MaxSector": a `resync_offset` of all ones means the array is in sync (clean).
pub const MAX_SECTOR: u64 = u64::MAX;

/// Mask of the seconds in `ctime`/`utime` (low 40 bits); the high 24 bits are microseconds.
const TIME_SECONDS_MASK: u64 = (1 << 40) - 1;

/// A decoded v1.x superblock. Field names are md's with the unit appended where the field is a
/// plain number of sectors (`#[doc(alias)]` keeps md's spelling searchable).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Superblock1 {
    /// `MD_FEATURE_*` bits, see [`crate::feature`].
    pub feature_map: u32,
    /// Always written as 0 by md; kept verbatim.
    pub pad0: u32,
    /// The array UUID.
    pub set_uuid: Uuid,
    /// The array name, NUL-padded; mdadm may prefix it with "homehost:".
    pub set_name: [u8; 32],
    /// Creation time: low 40 bits seconds, high 24 bits microseconds (mdadm writes 0 there).
    pub ctime: u64,
    pub level: Level,
    /// md's layout number; its meaning depends on `level`.
    pub layout: u32,
    /// Sectors of each member used by the array (the component size).
    #[doc(alias = "size")]
    pub size_sectors: u64,
    #[doc(alias = "chunksize")]
    pub chunk_sectors: u32,
    pub raid_disks: u32,
    /// Signed sectors from the superblock to the bitmap (`feature::BITMAP_OFFSET`); shares
    /// its 4 bytes with the PPL offset/size pair (`feature::PPL`), see [`Superblock1::ppl`].
    #[doc(alias = "bitmap_offset")]
    pub bitmap_offset_sectors: i32,
    /// Reshape target level (meaningful with `feature::RESHAPE_ACTIVE`).
    pub new_level: i32,
    /// Next array sector the reshape will process.
    #[doc(alias = "reshape_position")]
    pub reshape_position_sectors: u64,
    /// Change in `raid_disks` of the reshape.
    pub delta_disks: i32,
    pub new_layout: u32,
    #[doc(alias = "new_chunk")]
    pub new_chunk_sectors: u32,
    /// Signed amount added to `data_offset` by the reshape (`feature::NEW_OFFSET`).
    #[doc(alias = "new_offset")]
    pub new_offset_sectors: i32,
    /// Where the data starts on this member.
    #[doc(alias = "data_offset")]
    pub data_offset_sectors: u64,
    /// Sectors of this member usable for data (mdadm's "Avail Dev Size").
    #[doc(alias = "data_size")]
    pub data_size_sectors: u64,
    /// Where this superblock is on the member (8 for v1.2).
    #[doc(alias = "super_offset")]
    pub super_offset_sectors: u64,
    /// Rebuilt prefix of this member (`feature::RECOVERY_OFFSET`); the journal tail on a
    /// journal member (same 8 bytes).
    #[doc(alias = "recovery_offset", alias = "journal_tail")]
    pub recovery_offset_sectors: u64,
    /// Permanent identifier of this member: the index into `dev_roles`, not the slot.
    pub dev_number: u32,
    pub cnt_corrected_read: u32,
    pub device_uuid: Uuid,
    /// Bit 0 write-mostly, bit 1 fail-fast.
    pub devflags: u8,
    pub bblog_shift: u8,
    #[doc(alias = "bblog_size")]
    pub bblog_size_sectors: u16,
    /// Signed sectors from the superblock to the bad block log.
    #[doc(alias = "bblog_offset")]
    pub bblog_offset_sectors: i32,
    /// Last update time, same encoding as `ctime`.
    pub utime: u64,
    pub events: u64,
    /// Array sectors (per member) known in sync; [`MAX_SECTOR`] when clean.
    #[doc(alias = "resync_offset")]
    pub resync_offset_sectors: u64,
    /// The stored checksum. `encode` writes it as is; [`Superblock1::seal`] recomputes it.
    pub sb_csum: u32,
    /// Always written as 0 by md; kept verbatim.
    pub pad3: [u8; 32],
    /// Role of every `dev_number`; its length is `max_dev`.
    pub dev_roles: Vec<DevRole>,
}

impl Superblock1 {
    /// `max_dev`: how many `dev_roles` entries are stored.
    #[must_use]
    pub fn max_dev(&self) -> u32 {
        self.dev_roles.len() as u32
    }

    /// The role of the member this superblock was read from (`dev_roles[dev_number]`).
    #[must_use]
    pub fn role(&self) -> DevRole {
        self.dev_roles[self.dev_number as usize]
    }

    /// Slots mdadm shows in "Array State": `raid_disks`, plus the slots a shrinking reshape
    /// is still removing.
    #[must_use]
    pub fn slot_count(&self) -> u32 {
        let reshaping = self.feature_map & feature::RESHAPE_ACTIVE != 0;
        let removing =
            if reshaping && self.delta_disks < 0 { self.delta_disks.unsigned_abs() } else { 0 };
        self.raid_disks + removing
    }

    /// Which slots are held, as mdadm --examine prints it ("AAAA", "AA.AAA").
    #[must_use]
    pub fn array_state(&self) -> ArrayState {
        ArrayState::from_roles(&self.dev_roles, self.slot_count(), self.level.to_md())
    }

    /// Whether the array was in sync when this superblock was written.
    #[must_use]
    pub fn is_clean(&self) -> bool {
        self.resync_offset_sectors == MAX_SECTOR
    }

    /// The name up to its first NUL (lossy if it is not UTF-8).
    #[must_use]
    pub fn name(&self) -> String {
        let end = self.set_name.iter().position(|byte| *byte == 0).unwrap_or(32);
        String::from_utf8_lossy(&self.set_name[..end]).into_owned()
    }

    /// Whether the internal bitmap fields are meaningful.
    #[must_use]
    pub fn has_bitmap(&self) -> bool {
        self.feature_map & feature::BITMAP_OFFSET != 0
    }

    /// The member byte where the internal bitmap starts: `bitmap_offset` (signed) sectors from
    /// the superblock. None when that lies before the device's start.
    #[must_use]
    pub fn bitmap_at_bytes(&self) -> Option<u64> {
        let superblock = self.super_offset_sectors.checked_mul(512)?;
        superblock.checked_add_signed(i64::from(self.bitmap_offset_sectors) * 512)
    }

    /// md's PPL area as (signed offset from the superblock, size), both in sectors, when
    /// `feature::PPL` or `feature::MULTIPLE_PPLS` is set: md stores them as two little-endian
    /// 16-bit halves in the 4 bytes of `bitmap_offset`. The kernel sets MULTIPLE_PPLS in place
    /// of PPL once it runs an array whose area holds more than one log (mdadm's 1 MiB area
    /// does), so an array mdadm created with PPL has one bit or the other.
    #[must_use]
    pub fn ppl(&self) -> Option<(i16, u16)> {
        if self.feature_map & (feature::PPL | feature::MULTIPLE_PPLS) == 0 {
            return None;
        }
        let raw = self.bitmap_offset_sectors.to_le_bytes();
        Some((i16::from_le_bytes([raw[0], raw[1]]), u16::from_le_bytes([raw[2], raw[3]])))
    }

    /// Creation time, seconds since the epoch.
    #[must_use]
    pub fn ctime_seconds(&self) -> u64 {
        self.ctime & TIME_SECONDS_MASK
    }

    /// Last update time, seconds since the epoch.
    #[must_use]
    pub fn utime_seconds(&self) -> u64 {
        self.utime & TIME_SECONDS_MASK
    }

    /// md's checksum of this superblock as it would be encoded (stored `sb_csum` ignored).
    #[must_use]
    pub fn checksum(&self) -> u32 {
        crate::checksum::sb_csum(&self.encode())
    }

    /// Stores the checksum of the current fields, as md does before every write.
    pub fn seal(&mut self) {
        self.sb_csum = self.checksum();
        debug_assert_eq!(self.sb_csum, self.checksum());
    }
}
