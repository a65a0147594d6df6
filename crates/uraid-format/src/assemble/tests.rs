//! Goal: every rule of `plan` fires on its own and names the member it is about.
//!
//! Method: build the superblocks of a fresh array with `create::build_superblock` (8 MiB
//! members, data offset 2048, 64 KiB chunks), change one thing (events, a role, a field, the
//! bytes, the device size), reseal where only the field should be under test, and check the
//! exact plan or error.

use super::*;
use crate::create::{NewArray, NewMember, build_superblock};
use crate::error::SuperblockError;

const DEVICE_BYTES: u64 = 8 << 20;
const DATA_OFFSET_SECTORS: u64 = 2048;
const CHUNK_SECTORS: u32 = 128;

fn new_array(level: Level, raid_disks: u32, clean: bool) -> NewArray<'static> {
    let device_sectors = DEVICE_BYTES / 512;
    NewArray {
        set_uuid: Uuid([0xa5; 16]),
        name: "test",
        level,
        layout: if level == Level::Raid4 { 0 } else { 2 },
        chunk_sectors: CHUNK_SECTORS,
        raid_disks,
        size_sectors: device_sectors - DATA_OFFSET_SECTORS,
        data_offset_sectors: DATA_OFFSET_SECTORS,
        ctime_seconds: 1_700_000_000,
        utime_seconds: 1_700_000_000,
        events: 10,
        clean,
        internal_bitmap: false,
    }
}

/// The superblocks of `roles.len()` members: member i has dev_number i and role roles[i].
fn superblocks(array: &NewArray<'_>, roles: &[DevRole]) -> Vec<Superblock1> {
    (0..roles.len() as u32)
        .map(|dev_number| {
            let member = NewMember {
                dev_number,
                device_uuid: Uuid([dev_number as u8; 16]),
                device_sectors: DEVICE_BYTES / 512,
                dev_roles: roles,
            };
            build_superblock(array, &member).unwrap()
        })
        .collect()
}

fn healthy(level: Level, raid_disks: u16) -> Vec<Superblock1> {
    let roles: Vec<DevRole> = (0..raid_disks).map(DevRole::Active).collect();
    superblocks(&new_array(level, raid_disks.into(), true), &roles)
}

fn candidates(superblocks: &[Superblock1]) -> Vec<Candidate> {
    superblocks
        .iter()
        .enumerate()
        .map(|(index, superblock)| {
            let mut area = vec![0u8; 4096];
            superblock.encode_into(&mut area);
            Candidate {
                name: format!("m{index}"),
                size_bytes: DEVICE_BYTES,
                superblock_area: Ok(area),
                other_metadata: None,
            }
        })
        .collect()
}

fn plan_of(superblocks: &[Superblock1]) -> Result<AssemblyPlan, AssembleError> {
    plan(&candidates(superblocks), &AssembleOptions::default())
}

fn slot_names(plan: &AssemblyPlan) -> Vec<Option<&str>> {
    plan.slots.iter().map(|slot| slot.as_ref().map(|m| m.name.as_str())).collect()
}

#[test]
fn healthy_members_are_placed_by_role_not_by_order() {
    let mut sbs = healthy(Level::Raid5, 4);
    sbs.swap(0, 3);
    let plan = plan_of(&sbs).unwrap();
    assert_eq!(slot_names(&plan), [Some("m3"), Some("m1"), Some("m2"), Some("m0")]);
    assert!(plan.missing_slots().is_empty());
    assert!(plan.is_clean());
    assert!(!plan.forced);
    assert_eq!(plan.array_sectors(), 3 * (DEVICE_BYTES / 512 - DATA_OFFSET_SECTORS));
    assert_eq!(plan.slots[0].as_ref().unwrap().data_offset_sectors, DATA_OFFSET_SECTORS);
}

#[test]
fn stale_member_is_left_out_and_its_slot_missing() {
    let mut sbs = healthy(Level::Raid5, 4);
    sbs[2].events = 9;
    sbs[2].seal();
    let plan = plan_of(&sbs).unwrap();
    assert_eq!(slot_names(&plan), [Some("m0"), Some("m1"), None, Some("m3")]);
    assert_eq!(plan.stale.len(), 1);
    assert_eq!((plan.stale[0].name.as_str(), plan.stale[0].events), ("m2", 9));
    assert_eq!(plan.missing_slots(), [2]);
    assert_eq!(plan.events, 10);
}

#[test]
fn spare_and_faulty_members_are_listed_apart() {
    let roles = [0, 1, 2, 3, 0xffff, 0xfffe].map(DevRole::from_raw);
    let sbs = superblocks(&new_array(Level::Raid6, 4, true), &roles);
    let plan = plan_of(&sbs).unwrap();
    assert_eq!(slot_names(&plan), [Some("m0"), Some("m1"), Some("m2"), Some("m3")]);
    assert_eq!(plan.spares.iter().map(|m| m.name.as_str()).collect::<Vec<_>>(), ["m4"]);
    assert_eq!(plan.faulty.iter().map(|m| m.name.as_str()).collect::<Vec<_>>(), ["m5"]);
}

#[test]
fn raid6_runs_two_short_and_refuses_three() {
    let sbs = healthy(Level::Raid6, 6);
    let plan = plan_of(&sbs[2..]).unwrap();
    assert_eq!(plan.missing_slots(), [0, 1]);
    let mut sbs = healthy(Level::Raid6, 6);
    for sb in &mut sbs[..3] {
        sb.events = 7;
        sb.seal();
    }
    let err = plan_of(&sbs).unwrap_err();
    assert!(matches!(&err, AssembleError::TooManyMissing { missing_slots, .. }
        if missing_slots == &[0, 1, 2]));
    let text = err.to_string();
    assert!(text.contains("m0 (stale: events 7)") && text.contains("m2"), "{text}");
}

#[test]
fn too_many_missing_is_refused() {
    let sbs = healthy(Level::Raid5, 4);
    let err = plan_of(&sbs[..2]).unwrap_err();
    assert!(matches!(&err, AssembleError::TooManyMissing { missing_slots, max_degraded: 1, .. }
        if missing_slots == &[2, 3]));
}

#[test]
fn member_of_another_array_is_refused() {
    let mut sbs = healthy(Level::Raid5, 4);
    sbs[1].set_uuid = Uuid([0x5a; 16]);
    sbs[1].seal();
    let err = plan_of(&sbs).unwrap_err();
    assert!(matches!(&err, AssembleError::ForeignMember { member, .. } if member == "m1"));
    // A given UUID that the first member does not have names the first member.
    let options = AssembleOptions { uuid: Some(Uuid([0x5a; 16])), ..AssembleOptions::default() };
    let err = plan(&candidates(&healthy(Level::Raid5, 4)), &options).unwrap_err();
    assert!(matches!(&err, AssembleError::ForeignMember { member, .. } if member == "m0"));
}

#[test]
fn member_too_small_is_refused() {
    let mut cands = candidates(&healthy(Level::Raid5, 4));
    cands[3].size_bytes = DEVICE_BYTES - 4096;
    let err = plan(&cands, &AssembleOptions::default()).unwrap_err();
    let expected = AssembleError::TooSmall {
        member: "m3".into(),
        size_bytes: DEVICE_BYTES - 4096,
        needed_bytes: DEVICE_BYTES,
    };
    assert_eq!(err, expected);
}

#[test]
fn corrupt_and_unreadable_superblocks_are_refused() {
    let mut cands = candidates(&healthy(Level::Raid5, 4));
    cands[1].superblock_area.as_mut().unwrap()[100] ^= 1;
    let err = plan(&cands, &AssembleOptions::default()).unwrap_err();
    assert!(
        matches!(&err, AssembleError::Corrupt { member, source: SuperblockError::BadChecksum { .. } }
        if member == "m1")
    );
    // Impossible field with a correct checksum: a chunk that is not a power of two.
    let mut sbs = healthy(Level::Raid5, 4);
    sbs[2].chunk_sectors = 96;
    sbs[2].seal();
    let err = plan_of(&sbs).unwrap_err();
    assert!(
        matches!(&err, AssembleError::Corrupt { member, source: SuperblockError::BadChunkSize { .. } }
        if member == "m2")
    );
    let mut cands = candidates(&healthy(Level::Raid5, 4));
    cands[0].superblock_area = Err("Input/output error".into());
    let err = plan(&cands, &AssembleOptions::default()).unwrap_err();
    assert!(matches!(&err, AssembleError::Unreadable { member, .. } if member == "m0"));
}

#[test]
fn superblock_not_at_v1_2_place_is_refused() {
    let mut sbs = healthy(Level::Raid5, 4);
    sbs[3].super_offset_sectors = 0;
    sbs[3].seal();
    let err = plan_of(&sbs).unwrap_err();
    assert!(matches!(&err, AssembleError::WrongSuperOffset { member, super_offset_sectors: 0 }
        if member == "m3"));
}

/// Two spares of one device number (a copied superblock): a takeover or reshape would give
/// both the one role; refused by name.
#[test]
fn two_devices_of_one_number_are_refused() {
    let roles = [0, 1, 2].map(DevRole::Active).into_iter().chain([DevRole::Spare]);
    let mut sbs = superblocks(&new_array(Level::Raid5, 3, true), &roles.collect::<Vec<_>>());
    let mut copy = sbs[3].clone();
    copy.device_uuid.0[0] ^= 1;
    copy.seal();
    sbs.push(copy);
    let err = plan_of(&sbs).unwrap_err();
    let expected =
        AssembleError::SharedDevNumber { dev_number: 3, first: "m3".into(), second: "m4".into() };
    assert_eq!(err, expected);
    sbs.pop();
    assert_eq!(plan_of(&sbs).unwrap().spares.len(), 1, "one is a spare");
}

#[test]
fn two_members_claiming_one_slot_are_refused() {
    let mut sbs = healthy(Level::Raid5, 4);
    sbs[3].dev_number = 1;
    sbs[3].seal();
    let err = plan_of(&sbs).unwrap_err();
    let expected =
        AssembleError::DuplicateRole { slot: 1, first: "m1".into(), second: "m3".into() };
    assert_eq!(err, expected);
}

#[test]
fn fresh_members_disagreeing_on_geometry_are_refused() {
    let mut sbs = healthy(Level::Raid5, 4);
    sbs[2].layout = 0;
    sbs[2].seal();
    let err = plan_of(&sbs).unwrap_err();
    assert!(matches!(&err, AssembleError::Inconsistent { member, field: "layout", .. }
        if member == "m2"));
}

#[test]
fn dirty_degraded_needs_force_and_dirty_whole_does_not() {
    let roles: Vec<DevRole> = (0..4).map(DevRole::Active).collect();
    let sbs = superblocks(&new_array(Level::Raid5, 4, false), &roles);
    let whole = plan_of(&sbs).unwrap();
    assert!(!whole.is_clean());
    assert!(!whole.forced);
    let err = plan_of(&sbs[1..]).unwrap_err();
    assert!(
        matches!(&err, AssembleError::DirtyDegraded { missing_slots, resync_offset_sectors: 0, .. }
        if missing_slots == &[0])
    );
    assert!(err.to_string().contains("cannot start dirty degraded array"));
    let options = AssembleOptions { force: true, ..AssembleOptions::default() };
    let forced = plan(&candidates(&sbs[1..]), &options).unwrap();
    assert!(forced.forced);
    assert_eq!(forced.missing_slots(), [0]);
}

#[test]
fn recovering_member_holds_its_slot_but_counts_as_missing() {
    let mut sbs = healthy(Level::Raid5, 4);
    sbs[1].feature_map |= feature::RECOVERY_OFFSET;
    sbs[1].recovery_offset_sectors = 4096;
    sbs[1].seal();
    let plan = plan_of(&sbs).unwrap();
    assert_eq!(plan.slots[1].as_ref().unwrap().recovery_offset_sectors, Some(4096));
    assert_eq!(plan.missing_slots(), [1]);
    let err = plan_of(&[sbs[0].clone(), sbs[1].clone(), sbs[2].clone()]).unwrap_err();
    assert!(matches!(err, AssembleError::TooManyMissing { .. }));
}

#[test]
fn unsupported_levels_and_features_are_refused() {
    let mut sbs = healthy(Level::Raid5, 4);
    sbs[0].feature_map |= feature::JOURNAL;
    sbs[0].seal();
    let err = plan_of(&sbs).unwrap_err();
    assert!(matches!(&err, AssembleError::Unsupported { member, .. } if member == "m0"));
    let roles: Vec<DevRole> = (0..2).map(DevRole::Active).collect();
    let mut raid1 = new_array(Level::Raid1, 2, true);
    raid1.chunk_sectors = 0;
    let err = plan_of(&superblocks(&raid1, &roles)).unwrap_err();
    assert!(err.to_string().contains("level raid1"), "{err}");
    assert_eq!(plan_of(&[]).unwrap_err(), AssembleError::NoMembers);
}

/// The members of a RAID5 of 4 failed one after another (a full file system, say): m1 at
/// events 6, m2 at 8, m3 at 9; m0 recorded the last failure at 10.
fn failed_one_by_one() -> Vec<Superblock1> {
    let mut sbs = healthy(Level::Raid5, 4);
    for (sb, events) in sbs[1..].iter_mut().zip([6, 8, 9]) {
        sb.events = events;
        sb.seal();
    }
    sbs
}

fn forcing() -> AssembleOptions {
    AssembleOptions { force: true, force_stale: true, ..AssembleOptions::default() }
}

#[test]
fn force_brings_back_the_freshest_stale_members_until_the_array_runs() {
    let sbs = failed_one_by_one();
    let err = plan_of(&sbs).unwrap_err().to_string();
    assert!(err.contains("--force starts it from the freshest stale members"), "{err}");
    let plan = plan(&candidates(&sbs), &forcing()).unwrap();
    assert_eq!(slot_names(&plan), [Some("m0"), None, Some("m2"), Some("m3")]);
    let forced: Vec<_> =
        plan.forced_members().map(|m| (m.name.as_str(), m.forced_from_events)).collect();
    assert_eq!(forced, [("m2", Some(8)), ("m3", Some(9))]);
    assert!(plan.slots.iter().flatten().all(|m| m.events == 10));
    assert_eq!(plan.fresh_members().map(|m| m.name.as_str()).collect::<Vec<_>>(), ["m0"]);
    assert_eq!((plan.stale.len(), plan.stale[0].name.as_str()), (1, "m1"));
    assert_eq!(plan.missing_slots(), [1]);
}

#[test]
fn force_takes_every_member_of_the_same_vintage_and_never_more_than_needed() {
    // m2 and m3 dropped out together (events 8): both come back, as mdadm's add_another.
    let mut sbs = failed_one_by_one();
    sbs[3].events = 8;
    sbs[3].seal();
    let p = super::plan(&candidates(&sbs), &forcing()).unwrap();
    assert_eq!(slot_names(&p), [Some("m0"), None, Some("m2"), Some("m3")]);
    // Enough without any: nothing is forced, the stale member stays a rebuild target.
    let mut sbs = healthy(Level::Raid5, 4);
    sbs[2].events = 9;
    sbs[2].seal();
    let p = super::plan(&candidates(&sbs), &forcing()).unwrap();
    assert_eq!(p.forced_members().count(), 0);
    assert_eq!(p.stale.len(), 1);
}

#[test]
fn force_skips_a_member_that_was_being_rebuilt_and_a_slot_held_by_a_fresh_one() {
    let mut sbs = failed_one_by_one();
    sbs[3].feature_map |= feature::RECOVERY_OFFSET;
    sbs[3].recovery_offset_sectors = 4096;
    sbs[3].seal();
    // m3 was only partly rebuilt; m2 comes back, m1 then, and the array runs without m3.
    let p = super::plan(&candidates(&sbs), &forcing()).unwrap();
    assert_eq!(slot_names(&p), [Some("m0"), Some("m1"), Some("m2"), None]);
    // Without --force's second half (the dirty-degraded start alone), nothing comes back.
    let only_dirty = AssembleOptions { force_stale: false, ..forcing() };
    let sbs = failed_one_by_one();
    assert!(matches!(
        plan(&candidates(&sbs), &only_dirty),
        Err(AssembleError::TooManyMissing { .. })
    ));
}

#[test]
fn force_needs_a_fresh_member_in_a_slot() {
    // Only the spare recorded the last failures: no slot member's superblock is the array's.
    let roles = [0, 1, 2, 0xffff].map(DevRole::from_raw);
    let mut sbs = superblocks(&new_array(Level::Raid5, 3, true), &roles);
    for (sb, events) in sbs[..3].iter_mut().zip([7, 8, 9]) {
        sb.events = events;
        sb.seal();
    }
    let err = plan(&candidates(&sbs), &forcing()).unwrap_err().to_string();
    assert!(!err.contains("--force starts it"), "{err}");
}

/// A reshape to fewer members (4 -> 3) planned to go on with it: the removed member keeps
/// slot 3 past the new count, for the copy to read. A fresh member whose own shrinking
/// reshape gives it a slot past the reference's is refused, not indexed.
#[test]
fn a_reshape_to_fewer_members_keeps_the_removed_slot() {
    let roles: Vec<DevRole> = (0..4).map(DevRole::Active).collect();
    let mut sbs = superblocks(&new_array(Level::Raid5, 4, true), &roles);
    for sb in &mut sbs {
        sb.raid_disks = 3;
        sb.feature_map |=
            feature::RESHAPE_ACTIVE | feature::NEW_OFFSET | feature::RESHAPE_BACKWARDS;
        (sb.delta_disks, sb.new_offset_sectors, sb.reshape_position_sectors) = (-1, 256, 0);
        sb.seal();
    }
    let going_on = AssembleOptions { take_reshape: true, ..AssembleOptions::default() };
    let p = plan(&candidates(&sbs), &going_on).unwrap();
    assert_eq!((p.raid_disks, p.slots.len()), (3, 4));
    assert_eq!(slot_names(&p), [Some("m0"), Some("m1"), Some("m2"), Some("m3")]);
    // The reference (m0) says no reshape: m3's slot is past its three.
    sbs[0].feature_map &= !(feature::RESHAPE_ACTIVE | feature::RESHAPE_BACKWARDS);
    sbs[0].delta_disks = 0;
    sbs[0].dev_roles[3] = DevRole::Spare;
    sbs[0].seal();
    let err = plan(&candidates(&sbs), &going_on).unwrap_err().to_string();
    assert!(err.contains("m3: its role is slot 3, past the array's 3 slots"), "{err}");
}
