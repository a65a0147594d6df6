//! `plan_reshape`, the superblocks during and after, a reshape read back, a torn start.

use super::*;
use crate::DevRole;
use crate::grow::tests::{plan, spare, superblock};

/// mdadm's metadata end for a v1.2 member without a bitmap: 8 + 72.
fn space(m: &PlannedMember) -> MemberSpace {
    let avail_sectors = if m.name == "small" { 15000 } else { 20480 };
    MemberSpace { metadata_end_sectors: 80, avail_sectors, lists_bad_blocks: m.name == "bad" }
}

#[test]
fn the_data_moves_as_far_as_mdadm_moves_it() {
    // RAID5 3 -> 4 members (2 -> 3 data), 64 KiB chunks: lcm(256, 384) / 2; md moved a
    // 2048-sector offset to 1664 in the VM (`kernel_reshape.rs`).
    assert_eq!(offset_change((128, 128), 2, 3), 384);
    assert_eq!(offset_change((128, 128), 3, 4), 512);
    assert_eq!(offset_change((128, 128), 2, 4), 256);
    assert_eq!(offset_change((1024, 1024), 5, 7), 7 * 1024);
    // A new chunk: lcm(2 x 128, 2 x 256) / 2, as mdadm's compute_backup_blocks.
    assert_eq!(offset_change((128, 256), 2, 2), 256);
}

/// The array of `plan` with `raid_disks` members, its layout and chunk.
fn to(p: &AssemblyPlan, raid_disks: u32) -> NewShape {
    NewShape { raid_disks, layout: p.layout, chunk_sectors: p.chunk_sectors, ..NewShape::default() }
}

/// What `rp`'s superblocks say at its start.
fn progress(rp: &ReshapePlan) -> ReshapeProgress {
    ReshapeProgress {
        old_raid_disks: rp.old_raid_disks,
        new_raid_disks: rp.new_raid_disks,
        new_layout: rp.new_layout,
        new_chunk_sectors: rp.new_chunk_sectors,
        position_sectors: 0,
        backwards: false,
    }
}

/// Members with `after` sectors past the array's data (`space`'s metadata ends at 80, the
/// data starts at 2048: 1968 sectors before it).
fn with_after(after: u64) -> impl Fn(&PlannedMember) -> MemberSpace {
    move |m| MemberSpace { avail_sectors: 16384 + after, ..space(m) }
}

#[test]
fn a_new_layout_or_chunk_moves_the_data_by_half_the_room() {
    let p = plan();
    // 2048 - 80 sectors of room before the data, 1000 after: half the room before, in whole
    // chunks of the larger.
    let layout = NewShape { layout: p.layout ^ 1, ..to(&p, 3) };
    let rp = plan_reshape(&p, layout, &with_after(1000)).unwrap();
    assert_eq!((rp.old_raid_disks, rp.new_raid_disks, rp.new_layout), (3, 3, p.layout ^ 1));
    assert!(rp.members.iter().all(|m| m.new_offset_sectors == 2048 - 896));
    assert!(!rp.backwards());
    let chunk = NewShape { chunk_sectors: 256, ..to(&p, 3) };
    let rp = plan_reshape(&p, chunk, &with_after(1000)).unwrap();
    assert!(rp.members.iter().all(|m| m.new_offset_sectors == 2048 - 768));
    let own = superblock(16384, 2048);
    let during = reshaping_superblock(&own, &rp, &rp.members[0], 1024, 10, 7);
    assert_eq!((during.chunk_sectors, during.new_chunk_sectors, during.delta_disks), (128, 256, 0));
    let read = ReshapeProgress::of(&during).unwrap().unwrap();
    assert_eq!(read, ReshapeProgress { position_sectors: 1024, ..progress(&rp) });
    let after = reshaped_superblock(&during, &rp, &rp.members[0], 11, 8);
    assert_eq!((after.chunk_sectors, after.new_chunk_sectors, after.layout), (256, 256, p.layout));
    assert_eq!(ReshapeProgress::of(&after).unwrap(), None);
    // A member that missed the end gets it, the new chunk with it.
    assert_eq!(mended_superblock(&during, &after), Some(after.clone()));
    // 16384 sectors are not a whole number of 640-sector chunks, nor of 32768.
    for chunk_sectors in [640, 32768] {
        let err = plan_reshape(&p, NewShape { chunk_sectors, ..to(&p, 3) }, &space).unwrap_err();
        assert!(matches!(err, GrowError::ChunkSplitsMembers { .. }), "{err}");
    }
    // Less room either way than mdadm's least move and the copy's gap: 128 + 256.
    let tight =
        |m: &PlannedMember| MemberSpace { metadata_end_sectors: 1700, ..with_after(200)(m) };
    let err = plan_reshape(&p, chunk, &tight).unwrap_err();
    let no_room = GrowError::NoRoom {
        member: "m0".into(),
        before_sectors: 348,
        after_sectors: 200,
        needed_sectors: 384,
    };
    assert_eq!(err, no_room);
}

/// More room after the data than before: up, as mdadm goes (backwards; on a tie too), by half
/// of it; md's flag for it on the same members, the usable size shrunk by the move at the end.
#[test]
fn a_new_layout_moves_the_data_up_when_there_is_more_room_after_it() {
    let p = plan();
    let layout = NewShape { layout: p.layout ^ 1, ..to(&p, 3) };
    for (after, new_offset) in [(4096, 2048 + 2048), (1968, 2048 + 896)] {
        let rp = plan_reshape(&p, layout, &with_after(after)).unwrap();
        assert!(rp.members.iter().all(|m| m.new_offset_sectors == new_offset), "{after}");
        assert!(rp.backwards());
    }
    let rp = plan_reshape(&p, layout, &with_after(4096)).unwrap();
    let own = superblock(16384, 2048);
    let started = reshaping_superblock(&own, &rp, &rp.members[0], 32768, 10, 7);
    assert_ne!(started.feature_map & feature::RESHAPE_BACKWARDS, 0, "md's flag");
    assert_eq!((started.delta_disks, started.new_offset_sectors), (0, 2048));
    assert!(started.data_size_sectors >= 16384 + 2048, "the component reaches the new offset");
    let read = ReshapeProgress::of(&started).unwrap().unwrap();
    assert_eq!(read, ReshapeProgress { position_sectors: 32768, backwards: true, ..progress(&rp) });
    assert_eq!(read.start_sectors(&started), 32768, "from the array's end down");
    let after = reshaped_superblock(&started, &rp, &rp.members[0], 11, 8);
    assert_eq!((after.data_offset_sectors, after.layout), (4096, p.layout ^ 1));
    assert_eq!(after.data_size_sectors, started.data_size_sectors - 2048);
    assert_eq!(after.feature_map & feature::RESHAPE_BACKWARDS, 0);
    assert_eq!(mended_superblock(&started, &after), Some(after.clone()));
    // A member one write behind the start gets it, up.
    let mut missed = own.clone();
    missed.events = 9;
    assert_eq!(
        mended_superblock(&missed, &started),
        Some(reshaping_superblock(&missed, &rp, &rp.members[0], 32768, 10, 7))
    );
    // Devices far larger than the array: half the room md's 32-bit new_offset reaches.
    let vast = |m: &PlannedMember| MemberSpace { avail_sectors: u64::MAX / 2, ..space(m) };
    let rp = plan_reshape(&p, layout, &vast).unwrap();
    let moved = rp.members[0].new_offset_sectors - 2048;
    assert_eq!(moved, u64::from(i32::MAX.cast_unsigned()) / 2 / 128 * 128);
    let started = reshaping_superblock(&own, &rp, &rp.members[0], 32768, 10, 7);
    assert_eq!(i64::from(started.new_offset_sectors), i64::try_from(moved).unwrap());
    // A spare too small for the component up there bounds the room after.
    let mut spared = plan();
    spared.spares = vec![spare(3, "small")];
    let rp = plan_reshape(&spared, layout, &space).unwrap();
    assert!(!rp.backwards(), "15000 sectors hold no component: down");
    assert!(plan_reshape(&plan(), layout, &space).unwrap().backwards(), "without it, up");
}

#[test]
fn spares_take_the_new_slots_in_order_and_every_member_one_offset() {
    let mut p = plan();
    p.spares = vec![spare(3, "s3"), spare(4, "s4")];
    let rp = plan_reshape(&p, to(&p, 4), &space).unwrap();
    assert_eq!((rp.old_raid_disks, rp.new_raid_disks), (3, 4));
    let slots: Vec<_> = rp.members.iter().map(|m| (m.name.as_str(), m.slot)).collect();
    assert_eq!(
        slots,
        [("m0", Some(0)), ("m1", Some(1)), ("m2", Some(2)), ("s3", Some(3)), ("s4", None)]
    );
    assert!(
        rp.members.iter().all(|m| (m.old_offset_sectors, m.new_offset_sectors) == (2048, 1664))
    );
    let own = superblock(16384, 2048);
    let during = reshaping_superblock(&own, &rp, &rp.members[0], 4096, 10, 7);
    assert_eq!(during.feature_map & (feature::RESHAPE_ACTIVE | feature::NEW_OFFSET), 0x44);
    assert_eq!((during.raid_disks, during.delta_disks, during.new_offset_sectors), (4, 1, -384));
    assert_eq!((during.reshape_position_sectors, during.data_offset_sectors), (4096, 2048));
    assert_eq!(during.dev_roles[3], DevRole::Active(3));
    assert_eq!(
        ReshapeProgress::of(&during).unwrap(),
        Some(ReshapeProgress { new_raid_disks: 4, position_sectors: 4096, ..progress(&rp) })
    );
    let after = reshaped_superblock(&during, &rp, &rp.members[0], 10, 8);
    assert_eq!((after.feature_map & 0x44, after.data_offset_sectors), (0, 1664));
    assert_eq!(after.data_size_sectors, own.data_size_sectors + 384);
    assert_eq!(ReshapeProgress::of(&after).unwrap(), None);
    assert_eq!(after.checksum(), after.sb_csum);
    // Read back: each member in the slot its role gives it, a spare in none; one that ended
    // already has moved.
    let mut s3 = p.spares[0].clone();
    s3.role = DevRole::Active(3);
    let back = reshape_in_progress(
        &p,
        &[(&p.slots[0].clone().unwrap(), &after), (&s3, &during), (&p.spares[0], &during)],
        &ReshapeProgress { new_raid_disks: 4, position_sectors: 4096, ..progress(&rp) },
    );
    let read: Vec<_> =
        back.members.iter().map(|m| (m.slot, m.old_offset_sectors, m.new_offset_sectors)).collect();
    assert_eq!(read, [(Some(0), 1664, 1664), (Some(3), 2048, 1664), (None, 2048, 1664)]);
    assert_eq!(back.missing_slots(), [1, 2]);
}

#[test]
fn a_member_one_write_behind_gets_the_write_it_missed() {
    let mut p = plan();
    p.spares = vec![spare(3, "s3")];
    let rp = plan_reshape(&p, to(&p, 4), &space).unwrap();
    let own = superblock(16384, 2048);
    let me = &rp.members[0];
    let started = reshaping_superblock(&own, &rp, me, 0, 10, 7);
    let mut missed = own.clone();
    missed.events = 9;
    // The start: it was in the old shape.
    let mended = mended_superblock(&missed, &started).expect("one event behind");
    assert_eq!(mended, reshaping_superblock(&missed, &rp, me, 0, 10, 7));
    // A position recorded.
    let at = reshaping_superblock(&own, &rp, me, 1536, 11, 7);
    assert_eq!(mended_superblock(&started, &at), Some(at.clone()));
    // The end.
    let done = reshaped_superblock(&at, &rp, me, 12, 7);
    assert_eq!(mended_superblock(&at, &done), Some(done.clone()));
    // Not further behind, not in the old shape once data moved, not ahead.
    assert_eq!(mended_superblock(&missed, &at), None);
    missed.events = 10;
    assert_eq!(mended_superblock(&missed, &at), None, "the old shape beside a position");
    assert_eq!(mended_superblock(&at, &started), None);
    // Not one the freshest marks faulty: a run went on without it.
    let mut faulty = at.clone();
    faulty.events = 12;
    faulty.dev_roles[0] = DevRole::Faulty;
    faulty.seal();
    assert_eq!(mended_superblock(&at, &faulty), None);
}

#[test]
fn what_cannot_be_reshaped_says_why() {
    let mut p = plan();
    p.spares = vec![spare(3, "small"), spare(4, "s4")];
    assert_eq!(
        plan_reshape(&p, to(&p, 3), &space),
        Err(GrowError::NotMoreMembers { current: 3, asked: 3 })
    );
    assert_eq!(
        plan_reshape(&p, to(&p, 6), &space),
        Err(GrowError::TooFewSpares { needed: 3, spares: 2 })
    );
    assert_eq!(
        plan_reshape(&p, to(&p, 300), &space),
        Err(GrowError::TooManyMembers { asked: 300, max: 256 })
    );
    // The spare would hold 15000 + 384 sectors from the new offset, under 16384.
    assert!(matches!(plan_reshape(&p, to(&p, 4), &space), Err(GrowError::SpareTooSmall { .. })));
    // Less room than mdadm's move: whole chunks of it.
    let some = |m: &PlannedMember| MemberSpace { metadata_end_sectors: 1700, ..space(m) };
    let mut whole = plan();
    whole.spares = vec![spare(3, "s3")];
    let rp = plan_reshape(&whole, to(&whole, 4), &some).unwrap();
    assert_eq!(rp.members[3].new_offset_sectors, 2048 - 256, "348 sectors of room");
    let tight = |m: &PlannedMember| MemberSpace { metadata_end_sectors: 2000, ..space(m) };
    let err = plan_reshape(&p, to(&p, 4), &tight).unwrap_err();
    assert!(
        matches!(err, GrowError::NoHeadroom { room_sectors: 48, needed_sectors: 128, .. }),
        "{err}"
    );
    let mut listing = plan();
    listing.spares = vec![spare(3, "bad")];
    let err = plan_reshape(&listing, to(&listing, 4), &space).unwrap_err();
    assert_eq!(err, GrowError::ListsBadBlocks { member: "bad".into() });
    let mut dirty = plan();
    dirty.resync_offset_sectors = 0;
    assert!(matches!(plan_reshape(&dirty, to(&dirty, 4), &space), Err(GrowError::Dirty { .. })));
    let mut sb = superblock(16384, 2048);
    sb.feature_map |= feature::RESHAPE_ACTIVE;
    sb.delta_disks = 1;
    let refused = ReshapeProgress::of(&sb).unwrap_err();
    assert!(refused.contains("finish it with mdadm"), "no new offset: {refused}");
}

/// RAID5 3 -> 2 members (2 -> 1 data), 64 KiB chunks: mdadm's least move, lcm(256, 128) / 2
/// = 128 sectors, up into the room after the data; the array's end is given up only when
/// asked (`shrink`).
#[test]
fn fewer_members_move_up_into_the_room_after_the_data() {
    let mut p = plan();
    p.spares = vec![spare(3, "s3")];
    let err = plan_reshape(&p, to(&p, 2), &space).unwrap_err();
    let given_up = GrowError::FewerMembers { current: 3, asked: 2, old_kib: 16384, new_kib: 8192 };
    assert_eq!(err, given_up);
    let shrink = NewShape { shrink: true, ..to(&p, 2) };
    let rp = plan_reshape(&p, shrink, &space).unwrap();
    assert_eq!((rp.old_raid_disks, rp.new_raid_disks, rp.slot_count()), (3, 2, 3));
    assert!(rp.backwards());
    let slots: Vec<_> = rp.members.iter().map(|m| (m.name.as_str(), m.slot)).collect();
    assert_eq!(slots, [("m0", Some(0)), ("m1", Some(1)), ("m2", Some(2)), ("s3", None)]);
    assert!(
        rp.members.iter().all(|m| (m.old_offset_sectors, m.new_offset_sectors) == (2048, 2176))
    );
    assert!(rp.missing_slots().is_empty());
    // Room after the data: 20480 - 16384 sectors on each; 16 is too little.
    let tight = |m: &PlannedMember| MemberSpace { avail_sectors: 16400, ..space(m) };
    let err = plan_reshape(&p, shrink, &tight).unwrap_err();
    let no_room =
        GrowError::NoTailroom { member: "m0".into(), room_sectors: 16, needed_sectors: 128 };
    assert_eq!(err, no_room);
    // A chunk of none is refused as a chunk, before anything is counted in it.
    let no_chunk = NewShape { chunk_sectors: 0, ..shrink };
    let err = plan_reshape(&p, no_chunk, &space).unwrap_err();
    assert!(matches!(err, GrowError::ChunkSplitsMembers { chunk_sectors: 0, .. }), "{err}");
    let one = NewShape { shrink: true, ..to(&p, 1) };
    assert_eq!(plan_reshape(&p, one, &space), Err(GrowError::TooFewMembers { asked: 1, min: 2 }));
    let mut listed = plan();
    listed.slots[2].as_mut().unwrap().name = "bad".into();
    let err = plan_reshape(&listed, shrink, &space).unwrap_err();
    assert_eq!(err, GrowError::ListsBadBlocks { member: "bad".into() }, "a removed one is read");
}

/// The superblocks of a reshape to fewer members: backwards from the new array's end, the
/// removed member in its slot until the end and a spare after it, the usable size shrunk by
/// the move up; read back, and a member one write behind mended at the start and the end.
#[test]
fn fewer_members_superblocks_go_backwards() {
    let p = plan();
    let rp = plan_reshape(&p, NewShape { shrink: true, ..to(&p, 2) }, &space).unwrap();
    let mut own = superblock(16384, 2048);
    own.events = 9;
    own.seal();
    let during = reshaping_superblock(&own, &rp, &rp.members[0], 16384, 10, 7);
    let bits = feature::RESHAPE_ACTIVE | feature::NEW_OFFSET | feature::RESHAPE_BACKWARDS;
    // md flags backwards only for the same members (`super_1_sync`): fewer go so anyway.
    let expected_bits = feature::RESHAPE_ACTIVE | feature::NEW_OFFSET;
    assert_eq!(during.feature_map & bits, expected_bits);
    assert_eq!((during.raid_disks, during.delta_disks, during.new_offset_sectors), (2, -1, 128));
    assert_eq!(during.dev_roles[2], DevRole::Active(2), "the removed member keeps its slot");
    // Its usable size was the component alone: it now reaches the component at the new offset.
    assert_eq!((own.data_size_sectors, during.data_size_sectors), (16384, 16384 + 128));
    let decoded = Superblock1::decode(&during.encode()).expect("a shrinking superblock decodes");
    let read = ReshapeProgress::of(&decoded).unwrap().unwrap();
    let expected = ReshapeProgress {
        old_raid_disks: 3,
        new_raid_disks: 2,
        position_sectors: 16384,
        backwards: true,
        ..progress(&rp)
    };
    assert_eq!(read, expected);
    assert_eq!(read.start_sectors(&during), 16384, "one data member of 16384 sectors");
    assert_eq!(mended_superblock(&own, &during), Some(during.clone()), "a torn start");
    let after = reshaped_superblock(&during, &rp, &rp.members[0], 11, 8);
    assert_eq!((after.feature_map & bits, after.raid_disks), (0, 2));
    assert_eq!((after.data_offset_sectors, after.data_size_sectors), (2176, 16384));
    Superblock1::decode(&after.encode()).expect("the component fits its usable size");
    assert_eq!(after.dev_roles[2], DevRole::Spare, "the removed member is a spare");
    assert_eq!(ReshapeProgress::of(&after).unwrap(), None);
    assert_eq!(mended_superblock(&during, &after), Some(after.clone()), "a torn end");
    // Fewer members with the data moving down, or the same members flagged backwards with it
    // moving down: not md's.
    let mut down = during.clone();
    down.new_offset_sectors = -128;
    assert!(ReshapeProgress::of(&down).is_err());
    let mut same = down.clone();
    (same.raid_disks, same.delta_disks, same.new_layout) = (3, 0, 3);
    assert!(ReshapeProgress::of(&same).is_ok(), "a layout change forwards");
    same.feature_map |= feature::RESHAPE_BACKWARDS;
    assert!(ReshapeProgress::of(&same).is_err(), "backwards moving down");
    same.new_offset_sectors = 128;
    let up = ReshapeProgress::of(&same).unwrap().unwrap();
    assert!(up.backwards, "md's own layout change backwards, taken up");
    // Read back by role: the removed member in its slot, for the copy to read.
    let members: Vec<PlannedMember> = p.slots.iter().flatten().cloned().collect();
    let pairs: Vec<_> = members.iter().map(|m| (m, &during)).collect();
    let back = reshape_in_progress(&p, &pairs, &read);
    let slots: Vec<_> = back.members.iter().map(|m| (m.slot, m.new_offset_sectors)).collect();
    assert_eq!(slots, [(Some(0), 2176), (Some(1), 2176), (Some(2), 2176)]);
}

/// mdadm's revert-reshape: RAID5 3 -> 4 stopped at 4608 goes back, 4 -> 3 from there,
/// backwards, the data offset and usable size the new ones; reverting twice is where it was;
/// a position off the old stripes is refused; at its start it is cancelled; a member that
/// missed the revert's write gets it.
#[test]
fn a_reshape_reverted_goes_back_from_where_it_is() {
    let mut p = plan();
    p.spares = vec![spare(3, "s3")];
    let rp = plan_reshape(&p, to(&p, 4), &space).unwrap();
    let own = superblock(16384, 2048);
    let during = reshaping_superblock(&own, &rp, &rp.members[0], 4608, 10, 7);
    let back = reverted(&during).unwrap();
    assert_eq!((back.raid_disks, back.delta_disks, back.new_offset_sectors), (3, -1, 384));
    assert_eq!((back.data_offset_sectors, back.reshape_position_sectors), (1664, 4608));
    assert_eq!(back.data_size_sectors, during.data_size_sectors + 384);
    assert_eq!(back.dev_roles[3], DevRole::Active(3), "read until the end");
    let read = ReshapeProgress::of(&back).unwrap().unwrap();
    let going_back = ReshapeProgress { old_raid_disks: 4, new_raid_disks: 3, ..progress(&rp) };
    assert_eq!(read, ReshapeProgress { position_sectors: 4608, backwards: true, ..going_back });
    let mut twice = reverted(&back).unwrap();
    twice.seal();
    assert_eq!(twice, during, "reverted twice");
    // 4480 is a whole number of the new stripes (384), not of the old (256).
    let off = reshaping_superblock(&own, &rp, &rp.members[0], 4480, 10, 7);
    let err = reverted(&off).unwrap_err();
    assert_eq!(err, RevertError::Misaligned { position_sectors: 4480, stripe_sectors: 256 });
    assert_eq!(reverted(&own), Err(RevertError::NoReshape));
    // A member one write behind the revert gets it.
    let mut written = back.clone();
    super::super::stamp(&mut written, 11, 8);
    assert_eq!(mended_superblock(&during, &written), Some(written.clone()));
    // At its start: cancelled, the added member a spare again.
    let started = reshaping_superblock(&own, &rp, &rp.members[0], 0, 10, 7);
    let mut cancelled = reverted(&started).unwrap();
    assert_eq!(ReshapeProgress::of(&cancelled), Ok(None));
    assert_eq!((cancelled.raid_disks, cancelled.dev_roles[3]), (3, DevRole::Spare));
    assert_eq!((cancelled.data_offset_sectors, cancelled.layout), (2048, own.layout));
    super::super::stamp(&mut cancelled, 11, 8);
    assert_eq!(mended_superblock(&started, &cancelled), Some(cancelled.clone()));
}

/// The same members moving up, reverted: down again, forwards, md's flag off.
#[test]
fn a_reshape_up_reverted_goes_down() {
    let p = plan();
    let layout = NewShape { layout: p.layout ^ 1, ..to(&p, 3) };
    let rp = plan_reshape(&p, layout, &with_after(4096)).unwrap();
    let own = superblock(16384, 2048);
    let during = reshaping_superblock(&own, &rp, &rp.members[0], 16384, 10, 7);
    let back = reverted(&during).unwrap();
    assert_eq!(back.feature_map & feature::RESHAPE_BACKWARDS, 0);
    assert_eq!((back.data_offset_sectors, back.new_offset_sectors), (4096, -2048));
    assert_eq!((back.layout, back.new_layout), (p.layout ^ 1, p.layout));
    let progress = ReshapeProgress::of(&back).unwrap().unwrap();
    assert!(!progress.backwards);
    assert_eq!(progress.new_layout, p.layout);
}

/// mdadm's `--grow --data-offset`: the data goes where asked, down or up for the same
/// members, down for more, up for fewer, by at least the copy's gap (mdadm's least move where
/// the members stay or go), within the room, 4 KiB aligned.
#[test]
fn a_data_offset_asked_for_is_where_the_data_goes() {
    let p = plan();
    let layout = NewShape { layout: p.layout ^ 1, ..to(&p, 3) };
    let at = |sectors, shape: NewShape| NewShape { data_offset_sectors: Some(sectors), ..shape };
    let offsets = |rp: &ReshapePlan| rp.members.iter().map(|m| m.new_offset_sectors).max();
    // Down, although there is more room after the data (1968 before it, 4096 after).
    let rp = plan_reshape(&p, at(1024, layout), &space).unwrap();
    assert_eq!((offsets(&rp), rp.backwards()), (Some(1024), false));
    let rp = plan_reshape(&p, at(2048 + 4096, layout), &space).unwrap();
    assert_eq!((offsets(&rp), rp.backwards()), (Some(6144), true));
    let refused = |sectors, shape, why: &str| {
        let err = plan_reshape(&p, at(sectors, shape), &space).unwrap_err();
        let GrowError::AskedOffset { asked_sectors, .. } = &err else { panic!("{err}") };
        assert_eq!(*asked_sectors, sectors);
        assert!(err.to_string().contains(why), "{sectors}: {err}");
    };
    refused(1028, layout, "not a multiple of 4 KiB");
    refused(2048 - 64, layout, "a move down by 64 sectors, and it must be at least 128");
    refused(40, layout, "at most the 1968 sectors m0 has before the data");
    refused(2048 + 4104, layout, "at most the 4096 sectors m0 has after the data");
    refused(2048, layout, "the data moves down or up, past every member's offset");
    // More members: down only, by the copy's gap at least (less than mdadm's least, 384).
    let mut more = plan();
    more.spares = vec![spare(3, "s3")];
    let rp = plan_reshape(&more, at(2048 - 128, to(&more, 4)), &space).unwrap();
    assert_eq!(offsets(&rp), Some(1920));
    let err = plan_reshape(&more, at(3072, to(&more, 4)), &space).unwrap_err();
    assert!(err.to_string().contains("more members move the data down"), "{err}");
    // Fewer: up only.
    let fewer = NewShape { shrink: true, ..to(&p, 2) };
    refused(1024, fewer, "fewer members move the data up");
    let rp = plan_reshape(&p, at(2048 + 1024, fewer), &space).unwrap();
    assert_eq!((offsets(&rp), rp.backwards()), (Some(3072), true));
}

/// mdadm's one-pass RAID5 -> RAID6: a RAID6 just taken over (left-symmetric-6, its new Q
/// member in slot 3 still to be built) restriped to left-symmetric builds Q as it goes, and
/// the Q member is in sync at the end; a member with data still being rebuilt, a slot
/// missing beside it, or more members, is refused as before.
#[test]
fn a_restripe_builds_the_q_member_a_takeover_added() {
    let mut p = plan();
    (p.level, p.layout, p.raid_disks) = (crate::Level::Raid6, 18, 4);
    let mut q = crate::grow::tests::member(3, "q");
    q.recovery_offset_sectors = Some(0);
    p.slots.push(Some(q));
    let restripe = NewShape { layout: 2, ..to(&p, 4) };
    let rp = plan_reshape(&p, restripe, &with_after(0)).unwrap();
    assert_eq!(rp.q_built, Some(3));
    let mut own = superblock(16384, 2048);
    (own.level, own.layout, own.raid_disks) = (crate::Level::Raid6, 18, 4);
    own.dev_roles = (0..4).map(DevRole::Active).collect();
    own.dev_number = 3;
    own.feature_map |= feature::RECOVERY_OFFSET;
    own.seal();
    let q_member = rp.members.iter().find(|m| m.slot == Some(3)).unwrap();
    let during = reshaping_superblock(&own, &rp, q_member, 0, 10, 7);
    assert_ne!(during.feature_map & feature::RECOVERY_OFFSET, 0, "built as the copy goes");
    let after = reshaped_superblock(&during, &rp, q_member, 11, 8);
    assert_eq!(after.feature_map & feature::RECOVERY_OFFSET, 0, "in sync at the end");
    assert_eq!(after.layout, 2);
    // Read back in the middle: the same member.
    let pairs: Vec<_> = p.slots.iter().flatten().map(|m| (m, &during)).collect();
    let read = ReshapeProgress::of(&during).unwrap().unwrap();
    assert_eq!(reshape_in_progress(&p, &pairs, &read).q_built, Some(3));
    let recovering = |plan: &AssemblyPlan, shape| {
        let err = plan_reshape(plan, shape, &with_after(0)).unwrap_err();
        assert!(matches!(err, GrowError::Recovering { .. }), "{err}");
    };
    let mut data_too = p.clone();
    data_too.slots[1].as_mut().unwrap().recovery_offset_sectors = Some(64);
    recovering(&data_too, restripe);
    let mut missing = p.clone();
    missing.slots[0] = None;
    recovering(&missing, restripe);
    let mut more = p.clone();
    more.spares = vec![spare(4, "s4")];
    recovering(&more, to(&more, 5));
    // A layout with data on the last member (left-symmetric) builds nothing so.
    let mut rotating = p.clone();
    rotating.layout = 2;
    recovering(&rotating, NewShape { layout: 0, ..to(&p, 4) });
}
