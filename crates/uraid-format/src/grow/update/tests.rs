use super::*;
use crate::grow::tests::{plan, superblock};

#[test]
fn name_and_homehost_are_mdadms() {
    let sb = superblock(16384, 2048);
    assert_eq!(sb.name(), "g");
    let named = updated_superblock(&sb, &Update::Name("data".into()), 2, 9).unwrap();
    assert_eq!((named.name(), named.events), ("data".to_owned(), 2));
    // The homehost goes before the name, in place of any there was.
    let homed = updated_superblock(&named, &Update::Homehost("box".into()), 3, 9).unwrap();
    assert_eq!(homed.name(), "box:data");
    let moved = updated_superblock(&homed, &Update::Homehost("other".into()), 4, 9).unwrap();
    assert_eq!(moved.name(), "other:data");
    assert_eq!(Superblock1::decode(&moved.encode()).unwrap(), moved, "sealed");
    // Everything else as it was.
    let mut same = moved.clone();
    same.set_name = sb.set_name;
    (same.events, same.utime, same.sb_csum) = (sb.events, sb.utime, sb.sb_csum);
    assert_eq!(same, sb);
    let long = Update::Name("a-name-longer-than-md-keeps-it-x".into());
    assert!(matches!(
        check_update(&plan(), &sb, &long),
        Err(UpdateError::NameTooLong { len: 32, .. })
    ));
    let long_host = Update::Homehost("h".repeat(30));
    assert!(matches!(check_update(&plan(), &sb, &long_host), Err(UpdateError::NameTooLong { .. })));
    let colon = Update::Homehost("a:b".into());
    assert_eq!(check_update(&plan(), &sb, &colon), Err(UpdateError::HomehostColon("a:b".into())));
    assert_eq!(
        check_update(&plan(), &sb, &Update::Name(String::new())),
        Err(UpdateError::EmptyName)
    );
}

#[test]
fn a_new_uuid_reaches_the_bitmap_and_needs_a_whole_clean_array() {
    let sb = superblock(16384, 2048);
    let uuid = Update::Uuid(Uuid([7; 16]));
    assert_eq!(check_update(&plan(), &sb, &uuid), Ok(()));
    let updated = updated_superblock(&sb, &uuid, 2, 9).unwrap();
    assert_eq!(updated.set_uuid, Uuid([7; 16]));
    let bitmap = BitmapSuper::new_internal(sb.set_uuid, 16384, 1 << 20);
    let as_new = BitmapSuper { events: 1, ..bitmap.clone() };
    let moved = updated_bitmap(&as_new, 1, &uuid, 2);
    assert_eq!((moved.uuid, moved.events), (Uuid([7; 16]), 2));
    // A stale bitmap stays stale (md resyncs what it covers), with the new UUID all the same.
    let stale = BitmapSuper { events: 0, ..bitmap };
    let kept = updated_bitmap(&stale, 1, &uuid, 2);
    assert_eq!((kept.uuid, kept.events), (Uuid([7; 16]), 0));

    let mut degraded = plan();
    degraded.slots[1] = None;
    let refused = check_update(&degraded, &sb, &uuid);
    assert!(matches!(
        refused,
        Err(UpdateError::NotWholeAndClean { why: GrowError::Degraded { .. }, .. })
    ));
    let mut dirty = plan();
    dirty.resync_offset_sectors = 100;
    let refused = check_update(&dirty, &sb, &uuid);
    assert!(matches!(
        refused,
        Err(UpdateError::NotWholeAndClean { why: GrowError::Dirty { .. }, .. })
    ));
    let ppl = Superblock1 { feature_map: sb.feature_map | crate::feature::PPL, ..sb.clone() };
    assert!(ppl.ppl().is_some());
    assert_eq!(check_update(&plan(), &ppl, &uuid), Err(UpdateError::UuidWithMdPpl));
}

#[test]
fn a_resync_starts_from_sector_zero_on_a_whole_array() {
    let sb = superblock(16384, 2048);
    assert_eq!(check_update(&plan(), &sb, &Update::Resync), Ok(()));
    let dirty = updated_superblock(&sb, &Update::Resync, 2, 9).unwrap();
    assert_eq!(dirty.resync_offset_sectors, 0);
    let mut degraded = plan();
    degraded.slots[2] = None;
    let refused = check_update(&degraded, &sb, &Update::Resync);
    assert_eq!(refused, Err(UpdateError::ResyncDegraded { missing_slots: vec![2] }));
    // A name does not care: members out of the array keep the old one, which names nothing.
    assert_eq!(check_update(&degraded, &sb, &Update::Name("x".into())), Ok(()));
}

#[test]
fn a_bad_block_log_goes_where_mdadm_puts_it() {
    // uraid's create gives one; take it away, then add it back.
    let sb = superblock(16384, 2048);
    assert!(sb.bblog_size_sectors > 0);
    assert_eq!(check_update(&plan(), &sb, &Update::NoBbl), Ok(()));
    let none = updated_superblock(&sb, &Update::NoBbl, 2, 9).unwrap();
    assert_eq!((none.bblog_offset_sectors, none.bblog_size_sectors), (0, 0));
    assert_eq!(Superblock1::decode(&none.encode()).unwrap(), none, "sealed");
    // No bitmap: 8 past the superblock's offset, moved on to 64 past it (mdadm's 32 KiB).
    let bbl = Update::Bbl { bitmap_sectors: 0 };
    let added = updated_superblock(&none, &bbl, 3, 9).unwrap();
    assert_eq!((added.bblog_offset_sectors, added.bblog_size_sectors), (80, 8));
    // A member that has one keeps it where it is.
    let kept = updated_superblock(&sb, &bbl, 3, 9).unwrap();
    assert_eq!(kept.bblog_offset_sectors, sb.bblog_offset_sectors);
    // Past a bitmap of 40 sectors at 8: 48 is under 80, so moved on to 80; one of 100: 108.
    let with_bitmap = Superblock1 {
        feature_map: none.feature_map | crate::feature::BITMAP_OFFSET,
        bitmap_offset_sectors: 8,
        ..none.clone()
    };
    assert_eq!(bad_block_log_place(&with_bitmap, 40), Some(80));
    assert_eq!(bad_block_log_place(&with_bitmap, 100), Some(108));
    // Room for the log only: it ends at the data.
    let tight = Superblock1 { data_offset_sectors: 8 + 108 + 8, ..with_bitmap.clone() };
    assert_eq!(bad_block_log_place(&tight, 100), Some(108));
    let full = Superblock1 { data_offset_sectors: 8 + 108 + 7, ..with_bitmap };
    assert_eq!(bad_block_log_place(&full, 100), None);
    assert_eq!(
        check_member_update(&full, &Update::Bbl { bitmap_sectors: 100 }),
        Err(UpdateError::BblNoRoom { data_offset_sectors: 123 })
    );
    // Near the superblock, moved on only while the data leaves room.
    let small = Superblock1 { data_offset_sectors: 40, ..none.clone() };
    assert_eq!(bad_block_log_place(&small, 0), Some(24));
    // v1.0: the superblock after the data.
    let v1_0 = Superblock1 { super_offset_sectors: 20000, ..none };
    assert_eq!(bad_block_log_place(&v1_0, 0), None);
}

#[test]
fn a_bad_block_log_that_lists_ranges_stays_and_changes_need_a_clean_array() {
    let sb = superblock(16384, 2048);
    let listing =
        Superblock1 { feature_map: sb.feature_map | crate::feature::BAD_BLOCKS, ..sb.clone() };
    let refused = check_member_update(&listing, &Update::NoBbl);
    assert_eq!(refused, Err(UpdateError::BblListed { dev_number: 0 }));
    assert!(updated_superblock(&listing, &Update::NoBbl, 2, 9).is_err());
    let mut dirty = plan();
    dirty.resync_offset_sectors = 0;
    for update in [Update::NoBbl, Update::Bbl { bitmap_sectors: 0 }] {
        let refused = check_update(&dirty, &sb, &update);
        assert!(matches!(refused, Err(UpdateError::NotWholeAndClean { .. })), "{update:?}");
    }
}

#[test]
fn a_bitmap_before_the_superblock_does_not_move_the_log_onto_it() {
    let sb = updated_superblock(&superblock(16384, 2048), &Update::NoBbl, 2, 9).unwrap();
    let before = Superblock1 {
        feature_map: sb.feature_map | crate::feature::BITMAP_OFFSET,
        bitmap_offset_sectors: -200,
        ..sb
    };
    assert_eq!(bad_block_log_place(&before, 8), Some(80));
    let tight = Superblock1 { data_offset_sectors: 8 + 16 + 8, ..before };
    assert_eq!(bad_block_log_place(&tight, 8), Some(16), "mdadm's first place");
}
