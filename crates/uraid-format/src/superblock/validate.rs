//! Field checks run by `Superblock1::decode` after the checksum matched.
//!
//! A checksum only proves the bytes are the ones md wrote; these checks refuse superblocks
//! whose fields cannot describe a real array (written by a buggy tool, or a crafted image).
//! Each check names the field it refuses. What is deliberately not checked: `super_offset`
//! against where the bytes were read (the decoder does no I/O; the caller knows the location),
//! and the reshape fields when no reshape is active (md leaves stale values there).

use super::Superblock1;
use super::codec::encoded_len;
use crate::dev_roles::DevRole;
use crate::error::{MetadataArea, SuperblockError};
use crate::feature;
use crate::level::Level;

const SECTOR_BYTES: u64 = 512;

impl Superblock1 {
    /// Runs every field check; `decode` calls it, builders call it on what they built.
    pub fn validate(&self) -> Result<(), SuperblockError> {
        let unknown_bits = self.feature_map & !feature::ALL;
        if unknown_bits != 0 {
            return Err(SuperblockError::UnknownFeatures { unknown_bits });
        }
        self.validate_geometry()?;
        self.validate_roles()?;
        self.validate_areas()
    }

    fn validate_geometry(&self) -> Result<(), SuperblockError> {
        let level = self.level.to_md();
        if !self.level.accepts_layout(self.layout) {
            return Err(SuperblockError::UnknownLayout { level, layout: self.layout });
        }
        if !chunk_is_valid(self.level, self.chunk_sectors) {
            return Err(SuperblockError::BadChunkSize { level, chunk_sectors: self.chunk_sectors });
        }
        let max_dev = self.max_dev();
        if self.raid_disks == 0 || self.raid_disks > max_dev {
            return Err(SuperblockError::RaidDisksOutOfRange {
                raid_disks: self.raid_disks,
                max_dev,
            });
        }
        // A shrinking reshape still has the slots it removes; each needs a role entry. Without
        // this, delta_disks = i32::MIN makes every per-slot table 2^31 long (found by fuzzing).
        let slot_count = self.slot_count();
        if slot_count > max_dev {
            return Err(SuperblockError::SlotsOutOfRange { slot_count, max_dev });
        }
        if self.size_sectors > self.data_size_sectors {
            return Err(SuperblockError::SizeExceedsDataSize {
                size_sectors: self.size_sectors,
                data_size_sectors: self.data_size_sectors,
            });
        }
        Ok(())
    }

    fn validate_roles(&self) -> Result<(), SuperblockError> {
        let max_dev = self.max_dev();
        if self.dev_number >= max_dev {
            return Err(SuperblockError::DevNumberOutOfRange {
                dev_number: self.dev_number,
                max_dev,
            });
        }
        let slot_limit = self.slot_count();
        for (index, role) in self.dev_roles.iter().enumerate() {
            if let DevRole::Active(slot) = role
                && u32::from(*slot) >= slot_limit
            {
                return Err(SuperblockError::RoleOutOfRange { index, role: *slot, slot_limit });
            }
        }
        Ok(())
    }

    /// No metadata area may overlap the data area. Worked example (every fixture): data is
    /// sectors 2048..4096, the superblock 8..9 (512 bytes = 256 + 2 * 128 roles), the
    /// bitmap (r5-bitmap) starts at 8 + 8 = 16, the bad block log is 8 + 16 = 24..32.
    fn validate_areas(&self) -> Result<(), SuperblockError> {
        let superblock_sectors = (encoded_len(self.max_dev()) as u64).div_ceil(SECTOR_BYTES);
        self.check_area(MetadataArea::Superblock, 0, superblock_sectors)?;
        if self.has_bitmap() {
            // Only the bitmap superblock's sector is certain without reading the bitmap.
            self.check_area(MetadataArea::Bitmap, i64::from(self.bitmap_offset_sectors), 1)?;
        }
        if let Some((offset, size)) = self.ppl() {
            self.check_area(MetadataArea::Ppl, i64::from(offset), u64::from(size))?;
        }
        if self.bblog_size_sectors != 0 && self.bblog_offset_sectors != 0 {
            let offset = i64::from(self.bblog_offset_sectors);
            self.check_area(MetadataArea::BadBlockLog, offset, u64::from(self.bblog_size_sectors))?;
        }
        Ok(())
    }

    /// Checks the area `offset_sectors` (signed, from the superblock) long `len_sectors`.
    fn check_area(
        &self,
        area: MetadataArea,
        offset_sectors: i64,
        len_sectors: u64,
    ) -> Result<(), SuperblockError> {
        let start_sector = self
            .super_offset_sectors
            .checked_add_signed(offset_sectors)
            .ok_or(SuperblockError::MetadataBeforeDevice { area, offset_sectors })?;
        let end_sector = start_sector.saturating_add(len_sectors);
        let data_start_sector = self.data_offset_sectors;
        let data_end_sector = data_start_sector.saturating_add(self.data_size_sectors);
        let overlaps = start_sector < data_end_sector && data_start_sector < end_sector;
        if overlaps {
            return Err(SuperblockError::MetadataOverlapsData {
                area,
                start_sector,
                end_sector,
                data_start_sector,
                data_end_sector,
            });
        }
        Ok(())
    }
}

/// md needs a chunk for striped levels, and a power of two for the parity levels and raid10
/// (raid0 alone accepts any non-zero chunk). Linear and raid1 store 0 but md ignores it.
fn chunk_is_valid(level: Level, chunk_sectors: u32) -> bool {
    match level {
        Level::Linear | Level::Raid1 => true,
        Level::Raid0 => chunk_sectors != 0,
        Level::Raid4 | Level::Raid5 | Level::Raid6 | Level::Raid10 => {
            chunk_sectors.is_power_of_two()
        }
    }
}
