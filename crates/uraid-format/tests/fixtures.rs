//! Goal: the codecs agree with arrays written by the Linux md driver (kernel 6.12, mdadm 4.2).
//!
//! Method: for every member of every fixture under `shared/fixtures/md` (or
//! `URAID_FIXTURES_DIR`), decode the v1.2 superblock, check each field the manifest records
//! (the manifest was produced from `mdadm --examine` and the fixture generator), then
//! re-encode and require the exact on-disk bytes, including the zero padding of the 4 KiB
//! superblock area.

mod common;

use common::{Fixture, fixtures, num, text};
use serde_json::Value;
use uraid_format::create::{
    NewArray, NewMember, build_bitmap, build_superblock, default_data_offset_sectors,
};
use uraid_format::{
    BITMAP_SUPER_BYTES, BitmapSuper, DevRole, Superblock1, WriteIntentBitmap, bitmap_state,
    default_chunk_bytes, feature,
};

/// The superblock of `member`, decoded, plus the raw 4 KiB area it came from.
fn decode_member(fixture: &Fixture, member: &Value) -> (Superblock1, Vec<u8>) {
    let area = fixture.superblock_area(member);
    let superblock = Superblock1::decode(&area)
        .unwrap_or_else(|error| panic!("{} {}: {error}", fixture.name, member["file"]));
    (superblock, area)
}

/// Fields that are the same in every member's superblock.
fn check_array_fields(fixture: &Fixture, sb: &Superblock1) {
    let m = &fixture.manifest;
    assert_eq!(i64::from(sb.level.to_md()), m["level"].as_i64().unwrap());
    assert_eq!(sb.level.to_string(), text(m, "mdadm_raid_level"));
    assert_eq!(u64::from(sb.layout), num(m, "layout_number_in_superblock"));
    assert_eq!(u64::from(sb.chunk_sectors) * 512, num(m, "chunk_bytes"));
    assert_eq!(u64::from(sb.raid_disks), num(m, "raid_devices"));
    let feature_map = u32::from_str_radix(text(m, "feature_map").trim_start_matches("0x"), 16);
    assert_eq!(sb.feature_map, feature_map.unwrap());
    assert_eq!(sb.set_uuid.to_string(), text(m, "array_uuid"));
    assert_eq!(sb.name(), text(m, "array_name"));
    assert_eq!(sb.size_sectors, num(m, "component_size_sectors"));
    assert_eq!(sb.data_size_sectors, num(m, "avail_dev_size_sectors"));
    assert_eq!(sb.data_offset_sectors, num(m, "data_offset_sectors"));
    assert_eq!(sb.super_offset_sectors, num(m, "super_offset_sectors"));
    // Every fixture was created with 4-6 devices and no spares: mdadm rounds the role table
    // up to fill a 512-byte superblock, 128 roles (the manifest's dev_roles_note).
    assert_eq!(sb.max_dev(), 128);
    if text(m, "bitmap") == "internal" {
        assert!(sb.has_bitmap());
        let offset = num(m, "bitmap_offset_sectors_from_superblock");
        assert_eq!(i64::from(sb.bitmap_offset_sectors), i64::try_from(offset).unwrap());
    } else {
        assert_eq!(sb.feature_map & feature::BITMAP_OFFSET, 0);
    }
}

/// Fields of this member, and the role table of fresh members.
fn check_member_fields(fixture: &Fixture, member: &Value, sb: &Superblock1) {
    assert_eq!(u64::from(sb.dev_number), num(member, "dev_number"));
    assert_eq!(sb.device_uuid.to_string(), text(member, "device_uuid"));
    assert_eq!(sb.events, num(member, "events"));
    assert_eq!(sb.data_offset_sectors, num(member, "data_offset_sectors"));
    assert_eq!(sb.super_offset_sectors, num(member, "super_offset_sectors"));
    let own_role: u16 = text(member, "role_in_own_superblock").parse().unwrap();
    assert_eq!(sb.role(), DevRole::Active(own_role));
    assert_eq!(text(member, "device_role"), format!("Active device {own_role}"));
    assert_eq!(sb.is_clean(), text(member, "examine_state") == "clean");
    assert!(member["sb_csum_ok"].as_bool().unwrap());
    assert_eq!(sb.sb_csum, sb.checksum());
    let examine_state = text(member, "examine_array_state");
    assert_eq!(examine_state.split(' ').next().unwrap(), sb.array_state().to_string());
    if num(member, "events") == num(&fixture.manifest, "fresh_events") {
        check_fresh_roles(fixture, sb);
    }
}

/// `dev_roles_in_fresh_superblock` lists the first entries as "0", "1", ..., or "spare".
fn check_fresh_roles(fixture: &Fixture, sb: &Superblock1) {
    let listed = fixture.manifest["dev_roles_in_fresh_superblock"].as_array().unwrap();
    for (index, entry) in listed.iter().enumerate() {
        let expected = match entry.as_str().unwrap() {
            "spare" => DevRole::Spare,
            slot => DevRole::Active(slot.parse().unwrap()),
        };
        assert_eq!(sb.dev_roles[index], expected, "{} dev_roles[{index}]", fixture.name);
    }
    assert!(sb.dev_roles[listed.len()..].iter().all(|role| *role == DevRole::Spare));
}

#[test]
fn superblocks_decode_check_and_reencode_byte_identical() {
    let mut members_checked = 0;
    for fixture in fixtures() {
        for member in fixture.members() {
            let (sb, area) = decode_member(&fixture, member);
            check_array_fields(&fixture, &sb);
            check_member_fields(&fixture, member, &sb);
            let encoded = sb.encode();
            assert_eq!(encoded.len(), 256 + 2 * 128);
            assert_eq!(encoded, area[..encoded.len()], "{} {}", fixture.name, member["file"]);
            assert!(area[encoded.len()..].iter().all(|byte| *byte == 0), "padding is zero");
            members_checked += 1;
        }
    }
    // The public set: 12 fixtures, 58 member images (r6-degraded ships 5 of its 6).
    assert!(members_checked >= 50, "only {members_checked} members checked");
}

#[test]
fn degraded_fixture_reports_its_missing_slot() {
    // Goal: the array state of a member written after slot 2 was failed and removed.
    let fixture = common::fixture("r6-degraded");
    let member = &fixture.members()[0];
    let (sb, _) = decode_member(&fixture, member);
    assert_eq!(sb.array_state().to_string(), "AA.AAA");
    assert_eq!(sb.array_state().active_count(), 5);
    assert!(!sb.array_state().is_present(2));
    assert_eq!(sb.dev_roles[2], DevRole::Spare, "a removed member's entry reads as spare");
}

/// Decodes r5-bitmap's bitmap superblock and bits for one member; returns them with the raw
/// bitmap region (superblock + reserved bit area) they came from.
fn bitmap_of(fixture: &Fixture, member: &Value) -> (Superblock1, BitmapSuper, Vec<u8>) {
    let head = fixture.member_head(member);
    let sb_start = common::SUPERBLOCK_OFFSET_BYTES;
    let sb = Superblock1::decode(&head[sb_start..sb_start + 4096]).unwrap();
    let bitmap_start = sb_start + usize::try_from(sb.bitmap_offset_sectors).unwrap() * 512;
    let region = head[bitmap_start..bitmap_start + 4096].to_vec();
    let bitmap = BitmapSuper::decode(&region).unwrap();
    (sb, bitmap, region)
}

#[test]
fn bitmap_superblock_and_bits_reencode_byte_identical() {
    // Goal: r5-bitmap's internal bitmap (feature_map 0x1, 8 sectors after the superblock)
    // decodes to what mdadm and md wrote, and re-encodes to the same bytes.
    let fixture = common::fixture("r5-bitmap");
    for member in fixture.members() {
        let (sb, bitmap, region) = bitmap_of(&fixture, member);
        assert_eq!(bitmap.uuid, sb.set_uuid);
        assert_eq!(bitmap.events, sb.events, "bitmap written with the last superblock");
        assert!(bitmap.events_cleared <= bitmap.events);
        assert!(!bitmap.is_stale(sb.events));
        assert_eq!(bitmap.sync_size_sectors, sb.size_sectors);
        assert_eq!(bitmap.state & bitmap_state::STALE, 0);
        assert_eq!(bitmap.chunk_bytes, 64 << 20, "mdadm's default internal chunk");
        assert_eq!(u64::from(bitmap.chunk_bytes), default_chunk_bytes(sb.size_sectors, 8));
        assert_eq!(bitmap.daemon_sleep_seconds, 5);
        assert_eq!((bitmap.write_behind, bitmap.nodes), (0, 0));
        assert_eq!(bitmap.encode(), region[..BITMAP_SUPER_BYTES]);

        let bits = WriteIntentBitmap::decode(&bitmap, &region[BITMAP_SUPER_BYTES..]).unwrap();
        assert_eq!(bits.chunks(), 1);
        assert!(!bits.is_dirty(0), "the array was stopped clean");
        assert_eq!(bits.encode(), [0xfe], "chunk 0 is bit 0 (LSB first); bits 1..7 padding");
        // mdadm fills the whole reserved 4 KiB with 0xff; md only rewrites real bits.
        assert_eq!(bitmap.reserved_bytes(), 4096);
        assert!(region[BITMAP_SUPER_BYTES + 1..].iter().all(|byte| *byte == 0xff));
        // The bad block log mdadm placed right after the reserved bitmap area.
        let bitmap_end_sectors = 8 + i32::try_from(bitmap.reserved_bytes() / 512).unwrap();
        assert_eq!(sb.bblog_offset_sectors, bitmap_end_sectors);
    }
}

/// The builder's inputs for a member, taken from its decoded superblock and the manifest.
fn new_array_from<'a>(fixture: &Fixture, sb: &'a Superblock1, name: &'a str) -> NewArray<'a> {
    let device_sectors = num(&fixture.manifest, "member_image_bytes") / 512;
    let data_offset_sectors = default_data_offset_sectors(device_sectors, sb.chunk_sectors);
    NewArray {
        set_uuid: sb.set_uuid,
        name,
        level: sb.level,
        layout: sb.layout,
        chunk_sectors: sb.chunk_sectors,
        raid_disks: sb.raid_disks,
        // mdadm: what is left after the data offset, rounded down to whole chunks.
        size_sectors: (device_sectors - data_offset_sectors) / u64::from(sb.chunk_sectors)
            * u64::from(sb.chunk_sectors),
        data_offset_sectors,
        ctime_seconds: sb.ctime_seconds(),
        utime_seconds: sb.utime_seconds(),
        events: sb.events,
        clean: sb.is_clean(),
        internal_bitmap: sb.has_bitmap(),
    }
}

#[test]
fn builder_reproduces_every_fixture_superblock() {
    // Goal: a superblock built the way mdadm builds one is byte-identical to what mdadm and
    // md left on disk, given the values that are not derivable (UUIDs, times, events, roles).
    // Method: derive data_offset, size, bad block log, max_dev and bitmap fields with the
    // builder's mdadm rules; only the inputs come from the decoded superblock.
    for fixture in fixtures() {
        let device_sectors = num(&fixture.manifest, "member_image_bytes") / 512;
        for member in fixture.members() {
            let (sb, area) = decode_member(&fixture, member);
            let name = sb.name();
            let array = new_array_from(&fixture, &sb, &name);
            let new_member = NewMember {
                dev_number: sb.dev_number,
                device_uuid: sb.device_uuid,
                device_sectors,
                dev_roles: &sb.dev_roles,
            };
            let built = build_superblock(&array, &new_member).unwrap();
            assert_eq!(built, sb, "{} {}", fixture.name, member["file"]);
            assert_eq!(built.encode(), area[..built.encode().len()]);
        }
    }
}

#[test]
fn builder_bitmap_matches_r5_bitmap_geometry() {
    // Goal: the bitmap superblock mdadm writes at creation has r5-bitmap's geometry; events
    // differ because md updated them since (mdadm writes 0).
    let fixture = common::fixture("r5-bitmap");
    let (sb, on_disk, _) = bitmap_of(&fixture, &fixture.members()[0]);
    let name = sb.name();
    let built = build_bitmap(&new_array_from(&fixture, &sb, &name));
    assert_eq!((built.events, built.events_cleared), (0, 0));
    let without_events = BitmapSuper { events: 0, events_cleared: 0, ..on_disk };
    assert_eq!(built, without_events);
    let fresh_bits = WriteIntentBitmap::new_all_dirty(&built);
    assert_eq!(fresh_bits.encode(), [0xff], "mdadm: first assembly resyncs everything");
}
