//! Goal: every check of the decoders fires on its own and names its field.
//!
//! Method: start from a real superblock (r5-bitmap member 3: dev_number 4, roles
//! [0, 1, 2, spare, 3], an internal bitmap at +8 sectors, the bad block log at +16), corrupt one
//! field, recompute the checksum so that only the field check can fire (except where the
//! checksum itself is under test), and assert the exact error.

mod common;

use uraid_format::{
    BitmapError, BitmapSuper, DevRole, MetadataArea, Superblock1, SuperblockError, feature, sb_csum,
};

const SB_CSUM_OFFSET: usize = 216;

fn fixture_area() -> Vec<u8> {
    let fixture = common::fixture("r5-bitmap");
    fixture.superblock_area(&fixture.members()[3])
}

fn fixture_superblock() -> Superblock1 {
    Superblock1::decode(&fixture_area()).unwrap()
}

/// Rewrites the stored checksum of raw superblock bytes (max_dev 128: 512 bytes summed).
fn reseal(bytes: &mut [u8]) {
    let csum = sb_csum(&bytes[..512]);
    bytes[SB_CSUM_OFFSET..SB_CSUM_OFFSET + 4].copy_from_slice(&csum.to_le_bytes());
}

/// Patches a little-endian u32 at `offset`, reseals, decodes.
fn decode_with_u32(offset: usize, value: u32) -> Result<Superblock1, SuperblockError> {
    let mut bytes = fixture_area();
    bytes[offset..offset + 4].copy_from_slice(&value.to_le_bytes());
    reseal(&mut bytes);
    Superblock1::decode(&bytes)
}

/// Changes decoded fields, reseals, and decodes the encoding again.
fn decode_after(change: impl FnOnce(&mut Superblock1)) -> Result<Superblock1, SuperblockError> {
    let mut superblock = fixture_superblock();
    change(&mut superblock);
    superblock.seal();
    Superblock1::decode(&superblock.encode())
}

#[test]
fn envelope_errors() {
    let mut bytes = fixture_area();
    bytes[0] ^= 0x01;
    assert_eq!(Superblock1::decode(&bytes), Err(SuperblockError::BadMagic { found: 0xa92b_4efd }));
    let err = decode_with_u32(4, 2);
    assert_eq!(err, Err(SuperblockError::UnsupportedMajorVersion { found: 2 }));
    let err = decode_with_u32(220, 1921);
    assert_eq!(err, Err(SuperblockError::MaxDevTooLarge { max_dev: 1921 }));
    let err = Superblock1::decode(&fixture_area()[..300]);
    assert_eq!(err, Err(SuperblockError::TooShort { needed_bytes: 512, got_bytes: 300 }));
    let err = Superblock1::decode(&fixture_area()[..100]);
    assert_eq!(err, Err(SuperblockError::TooShort { needed_bytes: 256, got_bytes: 100 }));
}

#[test]
fn checksum_errors_report_stored_and_computed() {
    let good = fixture_superblock().sb_csum;
    let mut bytes = fixture_area();
    bytes[SB_CSUM_OFFSET] ^= 0xff;
    let stored = good ^ 0xff;
    assert_eq!(
        Superblock1::decode(&bytes),
        Err(SuperblockError::BadChecksum { stored, computed: good })
    );
    // A flipped bit anywhere in the summed range, here in the last role entry, is caught.
    let mut bytes = fixture_area();
    bytes[511] ^= 0x80;
    assert!(matches!(Superblock1::decode(&bytes), Err(SuperblockError::BadChecksum { .. })));
}

#[test]
fn level_layout_chunk_and_feature_errors() {
    assert_eq!(decode_with_u32(72, 3), Err(SuperblockError::UnknownLevel { level: 3 }));
    assert_eq!(decode_with_u32(72, u32::MAX - 3), Err(SuperblockError::UnknownLevel { level: -4 }));
    let err = decode_after(|sb| sb.layout = 7);
    assert_eq!(err, Err(SuperblockError::UnknownLayout { level: 5, layout: 7 }));
    let err = decode_after(|sb| sb.chunk_sectors = 100);
    assert_eq!(err, Err(SuperblockError::BadChunkSize { level: 5, chunk_sectors: 100 }));
    let err = decode_after(|sb| sb.chunk_sectors = 0);
    assert_eq!(err, Err(SuperblockError::BadChunkSize { level: 5, chunk_sectors: 0 }));
    let err = decode_after(|sb| sb.feature_map |= 0x8000);
    assert_eq!(err, Err(SuperblockError::UnknownFeatures { unknown_bits: 0x8000 }));
}

/// Fuzzing found it: slot_count() adds a shrinking reshape's |delta_disks| to raid_disks, and
/// array_state() allocated one entry per slot, 2^31 of them for delta_disks = i32::MIN.
#[test]
fn reshape_slots_beyond_max_dev_are_refused() {
    let reshaping = |delta_disks| {
        decode_after(|sb| {
            sb.feature_map |= feature::RESHAPE_ACTIVE;
            sb.delta_disks = delta_disks;
        })
    };
    let err = reshaping(i32::MIN);
    let slot_count = 4 + (1 << 31);
    assert_eq!(err, Err(SuperblockError::SlotsOutOfRange { slot_count, max_dev: 128 }));
    let err = reshaping(-125);
    assert_eq!(err, Err(SuperblockError::SlotsOutOfRange { slot_count: 129, max_dev: 128 }));
    assert_eq!(reshaping(-124).unwrap().slot_count(), 128);
}

#[test]
fn disk_count_and_role_errors() {
    let err = decode_after(|sb| sb.raid_disks = 0);
    assert_eq!(err, Err(SuperblockError::RaidDisksOutOfRange { raid_disks: 0, max_dev: 128 }));
    let err = decode_after(|sb| sb.raid_disks = 129);
    assert_eq!(err, Err(SuperblockError::RaidDisksOutOfRange { raid_disks: 129, max_dev: 128 }));
    let err = decode_after(|sb| sb.dev_number = 128);
    assert_eq!(err, Err(SuperblockError::DevNumberOutOfRange { dev_number: 128, max_dev: 128 }));
    let err = decode_after(|sb| sb.dev_roles[5] = DevRole::Active(4));
    assert_eq!(err, Err(SuperblockError::RoleOutOfRange { index: 5, role: 4, slot_limit: 4 }));
    let err = decode_after(|sb| sb.dev_roles[7] = DevRole::from_raw(0xff00));
    assert_eq!(err, Err(SuperblockError::RoleOutOfRange { index: 7, role: 0xff00, slot_limit: 4 }));
    // Positive space: a shrinking reshape still lists the slot being removed.
    let shrinking = decode_after(|sb| {
        sb.dev_roles[5] = DevRole::Active(4);
        sb.feature_map |= feature::RESHAPE_ACTIVE;
        sb.delta_disks = -1;
    });
    assert_eq!(shrinking.unwrap().array_state().to_string(), "AAAAA");
}

#[test]
fn size_and_area_errors() {
    let err = decode_after(|sb| sb.size_sectors = 2049);
    let size_error =
        SuperblockError::SizeExceedsDataSize { size_sectors: 2049, data_size_sectors: 2048 };
    assert_eq!(err, Err(size_error));
    let overlap = |area, start_sector, end_sector, data_start_sector| {
        Err(SuperblockError::MetadataOverlapsData {
            area,
            start_sector,
            end_sector,
            data_start_sector,
            data_end_sector: data_start_sector + 2048,
        })
    };
    let err = decode_after(|sb| sb.data_offset_sectors = 8);
    assert_eq!(err, overlap(MetadataArea::Superblock, 8, 9, 8));
    let err = decode_after(|sb| sb.data_offset_sectors = 16);
    assert_eq!(err, overlap(MetadataArea::Bitmap, 16, 17, 16));
    let err = decode_after(|sb| sb.data_offset_sectors = 20);
    assert_eq!(err, overlap(MetadataArea::BadBlockLog, 24, 32, 20));
    let err = decode_after(|sb| sb.bitmap_offset_sectors = -100);
    let before =
        SuperblockError::MetadataBeforeDevice { area: MetadataArea::Bitmap, offset_sectors: -100 };
    assert_eq!(err, Err(before));
    // The same fields are fine when the data lies clear of the metadata.
    assert!(decode_after(|sb| sb.data_offset_sectors = 32).is_ok());
}

fn bitmap_region() -> Vec<u8> {
    let fixture = common::fixture("r5-bitmap");
    let head = fixture.member_head(&fixture.members()[0]);
    head[8192..8192 + 256].to_vec()
}

fn decode_bitmap_with_u32(offset: usize, value: u32) -> Result<BitmapSuper, BitmapError> {
    let mut bytes = bitmap_region();
    bytes[offset..offset + 4].copy_from_slice(&value.to_le_bytes());
    BitmapSuper::decode(&bytes)
}

#[test]
fn bitmap_superblock_errors() {
    assert!(BitmapSuper::decode(&bitmap_region()).is_ok());
    let err = decode_bitmap_with_u32(0, 0x6d74_6963);
    assert_eq!(err, Err(BitmapError::BadMagic { found: 0x6d74_6963 }));
    for version in [3, 5, 6] {
        let err = decode_bitmap_with_u32(4, version);
        assert_eq!(err, Err(BitmapError::UnsupportedVersion { found: version }));
    }
    for chunk_bytes in [256, 1000, 0] {
        let err = decode_bitmap_with_u32(52, chunk_bytes);
        assert_eq!(err, Err(BitmapError::BadChunkSize { chunk_bytes }));
    }
    assert_eq!(decode_bitmap_with_u32(56, 0), Err(BitmapError::BadDaemonSleep));
    let err = decode_bitmap_with_u32(60, 16384);
    assert_eq!(err, Err(BitmapError::BadWriteBehind { write_behind: 16384 }));
    assert!(decode_bitmap_with_u32(60, 16383).is_ok());
    let err = BitmapSuper::decode(&bitmap_region()[..255]);
    assert_eq!(err, Err(BitmapError::TooShort { needed_bytes: 256, got_bytes: 255 }));
}
