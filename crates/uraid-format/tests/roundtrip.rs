//! Goal: decode is the exact inverse of encode for every valid superblock and bitmap, not
//! only for the ones md happened to write in the fixtures.
//!
//! Method: proptest generates superblocks that satisfy every field check (random levels,
//! layouts, chunks, role tables up to 1920 entries, optional bitmap, random times, events,
//! pads and idle reshape fields), seals them, and requires `decode(encode(sb)) == sb` and a
//! byte-identical second encoding. Bitmaps get the same treatment with random bits.

use proptest::prelude::*;
use uraid_format::{
    BITMAP_VERSION, BitmapSuper, DevRole, Level, MAX_DEV_LIMIT, MAX_SECTOR, Superblock1, Uuid,
    WriteIntentBitmap, feature,
};

/// Level and a layout md accepts for it.
fn level_and_layout() -> impl Strategy<Value = (Level, u32)> {
    prop_oneof![
        (Just(Level::Raid4), Just(0u32)),
        (Just(Level::Raid5), 0u32..=5),
        (Just(Level::Raid6), prop_oneof![0u32..=5, 8u32..=10, 16u32..=20]),
    ]
}

/// raid_disks, a role table of max_dev entries with slots below raid_disks, and a dev_number.
fn roles() -> impl Strategy<Value = (u32, Vec<DevRole>, u32)> {
    (1u32..=32, 32usize..=MAX_DEV_LIMIT as usize).prop_flat_map(|(raid_disks, max_dev)| {
        let role = prop_oneof![
            (0..raid_disks as u16).prop_map(DevRole::Active),
            Just(DevRole::Spare),
            Just(DevRole::Faulty),
            Just(DevRole::Journal),
        ];
        (Just(raid_disks), prop::collection::vec(role, max_dev), 0..max_dev as u32)
    })
}

/// Feature bits whose meaning the field checks do not depend on, plus the bitmap bit.
fn feature_map() -> impl Strategy<Value = u32> {
    let free = feature::RECOVERY_OFFSET
        | feature::BAD_BLOCKS
        | feature::REPLACEMENT
        | feature::RECOVERY_BITMAP
        | feature::JOURNAL
        | feature::RAID0_LAYOUT;
    (any::<u32>(), any::<bool>()).prop_map(move |(bits, bitmap)| {
        (bits & free) | (u32::from(bitmap) * feature::BITMAP_OFFSET)
    })
}

prop_compose! {
    fn superblock()(
        (level, layout) in level_and_layout(),
        (raid_disks, dev_roles, dev_number) in roles(),
        feature_map in feature_map(),
        chunk_shift in 3u32..=14,
        (data_size_sectors, size_less) in (1u64..1 << 40, 0u64..1 << 20),
        data_offset_sectors in 2048u64..1 << 20,
        uuids in any::<([u8; 16], [u8; 16])>(),
        name in any::<[u8; 32]>(),
        times in any::<(u64, u64, u64)>(),
        resync_offset_sectors in prop_oneof![Just(MAX_SECTOR), any::<u64>()],
        reshape in any::<(i32, u64, i32, u32, u32, i32)>(),
        device in any::<(u64, u32, u8, u8)>(),
        pads in any::<(u32, [u8; 32])>(),
    ) -> Superblock1 {
        let (new_level, reshape_position_sectors, delta_disks, new_layout, new_chunk_sectors,
             new_offset_sectors) = reshape;
        let (recovery_offset_sectors, cnt_corrected_read, devflags, bblog_shift) = device;
        let mut superblock = Superblock1 {
            feature_map, pad0: pads.0, set_uuid: Uuid(uuids.0), set_name: name, ctime: times.0,
            level, layout, size_sectors: data_size_sectors.saturating_sub(size_less),
            chunk_sectors: 1 << chunk_shift, raid_disks, bitmap_offset_sectors: 8,
            new_level, reshape_position_sectors, delta_disks, new_layout, new_chunk_sectors,
            new_offset_sectors, data_offset_sectors, data_size_sectors, super_offset_sectors: 8,
            recovery_offset_sectors, dev_number, cnt_corrected_read, device_uuid: Uuid(uuids.1),
            devflags, bblog_shift, bblog_size_sectors: 8, bblog_offset_sectors: 16 + 8,
            utime: times.1, events: times.2, resync_offset_sectors, sb_csum: 0, pad3: pads.1,
            dev_roles,
        };
        superblock.seal();
        superblock
    }
}

prop_compose! {
    fn bitmap()(
        uuid in any::<[u8; 16]>(),
        events in any::<(u64, u64)>(),
        sync_size_sectors in 0u64..1 << 24,
        chunk_shift in 9u32..=31,
        state in any::<u32>(),
        daemon_sleep_seconds in 1u32..=3600,
        write_behind in 0u32..=16383,
        reserved in any::<(u32, u32)>(),
        cluster_name in any::<[u8; 64]>(),
        pad in prop::collection::vec(any::<u8>(), 120),
    ) -> BitmapSuper {
        BitmapSuper {
            uuid: Uuid(uuid), events: events.0, events_cleared: events.1, sync_size_sectors,
            state, chunk_bytes: 1 << chunk_shift, daemon_sleep_seconds, write_behind,
            sectors_reserved: reserved.0, nodes: reserved.1, cluster_name,
            pad: pad.try_into().unwrap(),
        }
    }
}

proptest! {
    #[test]
    fn superblock_encode_decode_roundtrip(superblock in superblock()) {
        let bytes = superblock.encode();
        prop_assert_eq!(bytes.len(), 256 + 2 * superblock.dev_roles.len());
        let decoded = Superblock1::decode(&bytes).unwrap();
        prop_assert_eq!(&decoded, &superblock);
        prop_assert_eq!(decoded.encode(), bytes);
    }

    #[test]
    fn bitmap_encode_decode_roundtrip(
        superblock in bitmap(),
        seed in prop::collection::vec(any::<u8>(), 0..64),
    ) {
        let bytes = superblock.encode();
        prop_assert_eq!(u32::from_le_bytes(bytes[4..8].try_into().unwrap()), BITMAP_VERSION);
        let decoded = BitmapSuper::decode(&bytes).unwrap();
        prop_assert_eq!(&decoded, &superblock);
        // Random bits (cycled from a seed) survive decode/encode, padding bits included.
        let area: Vec<u8> =
            seed.iter().copied().chain([0x5a]).cycle().take(superblock.bits_bytes()).collect();
        let bits = WriteIntentBitmap::decode(&superblock, &area).unwrap();
        prop_assert_eq!(bits.encode(), &area[..]);
        let dirty = (0..bits.chunks()).filter(|chunk| bits.is_dirty(*chunk)).count() as u64;
        prop_assert_eq!(bits.dirty_count(), dirty);
    }
}
