//! Fewer members: md's reshape backwards (`reshape_backwards`). The same component size on
//! fewer data members holds less, so the array's end is given up, which mdadm has done first
//! by `--array-size` and uraid by `--shrink` on the same command. The data moves up, as
//! mdadm's `set_new_data_offset` moves it for a negative `delta_disks`: by the least move
//! (`offset_change`, at least the copy's gap), into the room after the data on every member
//! and spare (the kernel's `new_offset_store` refuses a move that pushes the component past a
//! device's end). The copy runs from the new array's end down (`uraid_core::reshape`); the
//! removed members are read until the end, keeping their slots (`plan_reshape`), and are
//! spares after it.

use super::{MemberSpace, NEW_OFFSET_MAX, NewShape, Room, least_and_gap};
use crate::Level;
use crate::assemble::{AssemblyPlan, PlannedMember};
use crate::grow::GrowError;

/// Refuses fewer members than the level takes, or that would lose data not given up.
pub(super) fn refuse_fewer(plan: &AssemblyPlan, new: NewShape) -> Result<(), GrowError> {
    let (current, asked) = (plan.raid_disks, new.raid_disks);
    // md's least: RAID6 of four, RAID4 and RAID5 of two (a mirror, in effect).
    let min = if plan.level == Level::Raid6 { 4 } else { 2 };
    if asked < min {
        return Err(GrowError::TooFewMembers { asked, min });
    }
    let parity = plan.max_degraded();
    let chunk = u64::from(new.chunk_sectors);
    let new_kib = plan.size_sectors / chunk * chunk * u64::from(asked - parity) / 2;
    let old_kib = plan.array_sectors() / 2;
    if new_kib < old_kib && !new.shrink {
        return Err(GrowError::FewerMembers { current, asked, old_kib, new_kib });
    }
    Ok(())
}

/// The new data offset of a reshape to fewer members (`refuse_shape` passed): up from the
/// highest old one by the least move, every member and spare holding the component there.
pub(super) fn offset_up(
    plan: &AssemblyPlan,
    new: NewShape,
    members: &[&PlannedMember],
    spaces: &[MemberSpace],
) -> Result<u64, GrowError> {
    let (least, gap) = least_and_gap(plan, new);
    let moved = least.max(gap);
    let after = tailroom(plan, members, spaces);
    if moved > after.sectors {
        let (member, room_sectors) = (after.member.to_owned(), after.sectors);
        return Err(GrowError::NoTailroom { member, room_sectors, needed_sectors: moved });
    }
    Ok(after.from + moved)
}

/// The room after the data: from the highest data offset of the members in slots up to where
/// the component would reach the end of the smallest device, member or spare (the kernel's
/// `new_offset_store` refuses a move that pushes it past a device's end), and no farther than
/// md's 32-bit `new_offset` moves the member whose data starts lowest.
pub(super) fn tailroom<'a>(
    plan: &AssemblyPlan,
    members: &[&'a PlannedMember],
    spaces: &[MemberSpace],
) -> Room<'a> {
    let in_slots = &members[..plan.raid_disks as usize];
    let offsets = in_slots.iter().map(|m| m.data_offset_sectors);
    let (lowest, highest) = (offsets.clone().min(), offsets.max());
    let (lowest, from) = lowest.zip(highest).expect("a whole array has members");
    let (tight, device_room) = members
        .iter()
        .zip(spaces)
        .map(|(m, s)| {
            let device_end = m.data_offset_sectors.saturating_add(s.avail_sectors);
            (m, device_end.saturating_sub(plan.size_sectors).saturating_sub(from))
        })
        .min_by_key(|p| p.1)
        .expect("a whole array has members");
    let offset_room = (lowest + NEW_OFFSET_MAX).saturating_sub(from);
    Room { sectors: device_room.min(offset_room), from, member: &tight.name }
}
