//! Fresh v1.2 superblocks for a new array, with the fields set the way mdadm 4.x sets them for
//! `mdadm --create --metadata=1.2`, so that mdadm and md accept the result.
//!
//! The rules below are facts read from mdadm's `super1.c` (`init_super1`,
//! `write_init_super1`, `validate_geometry1`, `choose_bm_space`, `add_internal_bitmap1`) and
//! checked two ways: building the superblock of every fixture member from its own values
//! reproduces the on-disk bytes exactly, and `mdadm --examine` accepts what this module builds
//! (tests/mdadm_examine.rs). What mdadm does that this module leaves to the caller: choosing
//! UUIDs and the clock, the "homehost:" name prefix, writing to devices, and v1.0/v1.1
//! placement (only v1.2 is built).

use crate::bitmap::{BitmapSuper, default_chunk_bytes};
use crate::dev_roles::DevRole;
use crate::error::CreateError;
use crate::feature;
use crate::level::Level;
use crate::superblock::{
    MAX_DEV_LIMIT, MAX_SECTOR, SUPERBLOCK_HEADER_BYTES, Superblock1, V1_2_SUPER_OFFSET_SECTORS,
};
use crate::uuid::Uuid;

/// v1.2 puts the bitmap right after the 4 KiB superblock area.
pub const BITMAP_OFFSET_SECTORS: i32 = 8;
/// mdadm reserves 8 sectors (4 KiB) for the bad block log.
pub const BBLOG_SIZE_SECTORS: u16 = 8;
/// mdadm rounds the default data offset up to 1 MiB.
const DATA_OFFSET_ALIGN_SECTORS: u64 = 2048;
/// set_name is 32 bytes and mdadm keeps a terminating NUL.
const NAME_MAX_BYTES: usize = 31;

/// The array-wide values of a new array.
#[derive(Debug, Clone)]
pub struct NewArray<'a> {
    pub set_uuid: Uuid,
    /// Stored as given (mdadm may prefix "homehost:"); at most 31 bytes.
    pub name: &'a str,
    pub level: Level,
    pub layout: u32,
    pub chunk_sectors: u32,
    pub raid_disks: u32,
    /// Component size: sectors of each member used by the array.
    pub size_sectors: u64,
    pub data_offset_sectors: u64,
    pub ctime_seconds: u64,
    pub utime_seconds: u64,
    /// mdadm starts at 1; md bumps it on every superblock update.
    pub events: u64,
    /// In sync already (`--assume-clean`): resync_offset MaxSector instead of 0.
    pub clean: bool,
    pub internal_bitmap: bool,
}

/// The per-member values of a new array.
#[derive(Debug, Clone)]
pub struct NewMember<'a> {
    pub dev_number: u32,
    pub device_uuid: Uuid,
    /// Size of the whole member device.
    pub device_sectors: u64,
    /// `dev_roles` by dev_number; padded with spares up to max_dev.
    pub dev_roles: &'a [DevRole],
}

/// mdadm's bitmap room for a device or component of `sectors`: 4 KiB, 64 KiB above 8 GiB,
/// 128 KiB above 200 GiB, nothing below 64 KiB. Always a multiple of 4 KiB (4K-sector disks).
#[must_use]
pub fn choose_bitmap_space_sectors(sectors: u64) -> u64 {
    if sectors < 64 * 2 {
        0
    } else if sectors - 64 * 2 >= 200 * 1024 * 1024 * 2 {
        128 * 2
    } else if sectors - 4 * 2 > 8 * 1024 * 1024 * 2 {
        64 * 2
    } else {
        4 * 2
    }
}

/// mdadm's default v1.2 data offset: superblock and bitmap room plus reshape headroom of
/// about 0.1% of the device (at most 128 MiB, at least 4 chunks while halving), rounded up to
/// 1 MiB. Worked example (every fixture): a 4096-sector member with 128-sector chunks gets
/// headroom 256, 24 + 8 + 256 = 288, rounded up to 2048.
#[must_use]
pub fn default_data_offset_sectors(device_sectors: u64, chunk_sectors: u32) -> u64 {
    let chunk_sectors = u64::from(chunk_sectors);
    let mut headroom_sectors: u64 = 128 * 1024 * 2;
    while (headroom_sectors << 10) > device_sectors
        && (chunk_sectors == 0 || headroom_sectors / 2 >= chunk_sectors * 2)
    {
        headroom_sectors >>= 1;
    }
    let unaligned = 12 * 2 + choose_bitmap_space_sectors(device_sectors) + headroom_sectors;
    unaligned.next_multiple_of(DATA_OFFSET_ALIGN_SECTORS)
}

/// mdadm's `max_dev`: the role table rounded up to fill whole 512-byte sectors (128 roles for
/// up to 128 members).
fn max_dev_for(roles_count: usize) -> u32 {
    let bytes = (SUPERBLOCK_HEADER_BYTES + 2 * roles_count).next_multiple_of(512);
    ((bytes - SUPERBLOCK_HEADER_BYTES) / 2) as u32
}

/// The bitmap superblock mdadm writes for `--bitmap=internal` on this array (only meaningful
/// when `array.internal_bitmap`).
#[must_use]
pub fn build_bitmap(array: &NewArray<'_>) -> BitmapSuper {
    let room_sectors = choose_bitmap_space_sectors(array.size_sectors).max(1);
    let chunk_bytes = default_chunk_bytes(array.size_sectors, room_sectors);
    let chunk_bytes = u32::try_from(chunk_bytes).expect("bitmap chunk fits u32");
    BitmapSuper::new_internal(array.set_uuid, array.size_sectors, chunk_bytes)
}

/// Where mdadm puts the bad block log: after the bitmap (the one written, `bitmap`, as
/// mdadm's calc_bitmap_size measures it; without one, after the room mdadm leaves for one)
/// when it fits before the data, else in the last 8 sectors before the data, else nowhere
/// (0, 0). With an internal bitmap the second place would be inside the bitmap (mdadm puts it
/// there all the same): no log then, rather than a log and a bitmap written over each other.
fn bad_block_log(array: &NewArray<'_>, bitmap: Option<&BitmapSuper>) -> (i32, u16) {
    let bitmap_space_sectors = match (array.internal_bitmap, bitmap) {
        (true, Some(bitmap)) => (bitmap.reserved_bytes() / 512) as u64,
        (true, None) => (build_bitmap(array).reserved_bytes() / 512) as u64,
        (false, _) => choose_bitmap_space_sectors(array.size_sectors),
    };
    let super_offset = V1_2_SUPER_OFFSET_SECTORS;
    let bitmap_end = BITMAP_OFFSET_SECTORS as u64 + bitmap_space_sectors;
    let data_offset = array.data_offset_sectors;
    if data_offset >= super_offset + bitmap_end + u64::from(BBLOG_SIZE_SECTORS) {
        (bitmap_end as i32, BBLOG_SIZE_SECTORS)
    } else if !array.internal_bitmap && data_offset >= super_offset + 16 {
        ((data_offset - 8 - super_offset) as i32, BBLOG_SIZE_SECTORS)
    } else {
        (0, 0)
    }
}

/// Builds, seals and validates the superblock of one member of a new array (with mdadm's
/// default bitmap when it has one).
pub fn build_superblock(
    array: &NewArray<'_>,
    member: &NewMember<'_>,
) -> Result<Superblock1, CreateError> {
    let bitmap = array.internal_bitmap.then(|| build_bitmap(array));
    build_superblock_with(array, member, bitmap.as_ref())
}

/// `build_superblock` for the internal bitmap that will be written (`--bitmap-chunk`): its
/// size decides where the bad block log goes.
pub fn build_superblock_with(
    array: &NewArray<'_>,
    member: &NewMember<'_>,
    bitmap: Option<&BitmapSuper>,
) -> Result<Superblock1, CreateError> {
    let name = array.name.as_bytes();
    if name.len() > NAME_MAX_BYTES {
        return Err(CreateError::NameTooLong { len_bytes: name.len() });
    }
    let roles_count = member.dev_roles.len().max(array.raid_disks as usize);
    if roles_count > MAX_DEV_LIMIT as usize {
        return Err(CreateError::TooManyRoles { roles_count });
    }
    let data_offset_sectors = array.data_offset_sectors;
    if member.device_sectors <= data_offset_sectors {
        let device_sectors = member.device_sectors;
        return Err(CreateError::DeviceTooSmall { device_sectors, data_offset_sectors });
    }
    let mut superblock = fresh_fields(array, member, bitmap);
    let mut set_name = [0u8; 32];
    set_name[..name.len()].copy_from_slice(name);
    superblock.set_name = set_name;
    let mut dev_roles = member.dev_roles.to_vec();
    dev_roles.resize(max_dev_for(roles_count) as usize, DevRole::Spare);
    superblock.dev_roles = dev_roles;
    superblock.seal();
    superblock.validate()?;
    Ok(superblock)
}

/// Every field except the name and role table.
fn fresh_fields(
    array: &NewArray<'_>,
    member: &NewMember<'_>,
    bitmap: Option<&BitmapSuper>,
) -> Superblock1 {
    let (bblog_offset_sectors, bblog_size_sectors) = bad_block_log(array, bitmap);
    let (feature_map, bitmap_offset_sectors) = if array.internal_bitmap {
        (feature::BITMAP_OFFSET, BITMAP_OFFSET_SECTORS)
    } else {
        (0, 0)
    };
    let time_mask = (1u64 << 40) - 1;
    Superblock1 {
        feature_map,
        pad0: 0,
        set_uuid: array.set_uuid,
        set_name: [0; 32],
        ctime: array.ctime_seconds & time_mask,
        level: array.level,
        layout: array.layout,
        size_sectors: array.size_sectors,
        chunk_sectors: array.chunk_sectors,
        raid_disks: array.raid_disks,
        bitmap_offset_sectors,
        new_level: 0,
        reshape_position_sectors: 0,
        delta_disks: 0,
        new_layout: 0,
        new_chunk_sectors: 0,
        new_offset_sectors: 0,
        data_offset_sectors: array.data_offset_sectors,
        data_size_sectors: member.device_sectors - array.data_offset_sectors,
        super_offset_sectors: V1_2_SUPER_OFFSET_SECTORS,
        recovery_offset_sectors: 0,
        dev_number: member.dev_number,
        cnt_corrected_read: 0,
        device_uuid: member.device_uuid,
        devflags: 0,
        bblog_shift: 0,
        bblog_size_sectors,
        bblog_offset_sectors,
        utime: array.utime_seconds & time_mask,
        events: array.events,
        resync_offset_sectors: if array.clean { MAX_SECTOR } else { 0 },
        sb_csum: 0,
        pad3: [0; 32],
        dev_roles: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mdadm_space_rules() {
        assert_eq!(choose_bitmap_space_sectors(100), 0);
        assert_eq!(choose_bitmap_space_sectors(4096), 8);
        assert_eq!(choose_bitmap_space_sectors(9 * 1024 * 1024 * 2), 128);
        assert_eq!(choose_bitmap_space_sectors(300 * 1024 * 1024 * 2), 256);
        assert_eq!(default_data_offset_sectors(4096, 128), 2048);
        // 1 TiB member: the full 128 MiB headroom plus bitmap room, rounded to 1 MiB.
        assert_eq!(default_data_offset_sectors(1 << 31, 1024), 262_144 + 2048);
        assert_eq!(max_dev_for(4), 128);
        assert_eq!(max_dev_for(129), 384);
    }

    /// The bad block log goes after the bitmap that is written, however many bits it has
    /// (mdadm's calc_bitmap_size), and never inside it: a 64 GiB member with 1 MiB bitmap
    /// chunks has a 24-sector bitmap, and the log was put 16 sectors in, over its bits.
    #[test]
    fn the_bad_block_log_never_lies_in_the_bitmap() {
        let size_sectors = 64 << 21;
        let mut array = NewArray {
            set_uuid: Uuid([3; 16]),
            name: "bb",
            level: Level::Raid5,
            layout: 2,
            chunk_sectors: 1024,
            raid_disks: 3,
            size_sectors,
            data_offset_sectors: 133_120,
            ctime_seconds: 1,
            utime_seconds: 1,
            events: 1,
            clean: false,
            internal_bitmap: true,
        };
        let many = BitmapSuper::new_internal(array.set_uuid, size_sectors, 1 << 20);
        assert_eq!(many.reserved_bytes(), 24 * 512);
        assert_eq!(bad_block_log(&array, Some(&many)), (8 + 24, BBLOG_SIZE_SECTORS));
        assert_eq!(bad_block_log(&array, None), (8 + 8, BBLOG_SIZE_SECTORS), "default bitmap");
        // What assembly checks (`Superblock1::bad_block_log_in_bitmap`): clear of the bitmap
        // written, inside it where the default bitmap's place was used.
        let roles = [crate::DevRole::Active(0)];
        let member = NewMember {
            dev_number: 0,
            device_uuid: Uuid([4; 16]),
            device_sectors: size_sectors + 133_120,
            dev_roles: &roles,
        };
        let mut sb = build_superblock_with(&array, &member, Some(&many)).unwrap();
        assert!(!sb.bad_block_log_in_bitmap(&many));
        sb.bblog_offset_sectors = 8 + 8;
        assert!(sb.bad_block_log_in_bitmap(&many));
        assert!(!sb.bad_block_log_in_bitmap(&BitmapSuper::new_internal(
            array.set_uuid,
            1 << 21,
            1 << 20
        )));
        // No room after the bitmap: none (mdadm's second place is inside the bitmap).
        array.data_offset_sectors = 24;
        assert_eq!(bad_block_log(&array, None), (0, 0));
        // Without a bitmap the last 8 sectors before the data are free.
        array.internal_bitmap = false;
        assert_eq!(bad_block_log(&array, None), (8, BBLOG_SIZE_SECTORS));
    }
}
