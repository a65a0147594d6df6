//! Fewer members: md's reshape backwards (`reshape_backwards`). The same component size on
//! fewer data members holds less, so the array's end is given up, which mdadm has done first
//! by `--array-size` and uraid by `--shrink` on the same command. The data moves up, as
//! mdadm's `set_new_data_offset` moves it for a negative `delta_disks`: by the least move
//! (`offset_change`, at least the copy's gap), into the room after the data on every member
//! and spare (the kernel's `new_offset_store` refuses a move that pushes the component past a
//! device's end). The copy runs from the new array's end down (`uraid_core::reshape`); the
//! removed members are read until the end, keeping their slots (`plan_reshape`), and are
//! spares after it.

use super::{MemberSpace, NEW_OFFSET_MAX, NewShape, copy_gap, offset_change};
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
    let parity = plan.raid_disks - plan.data_disks();
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
    let current = plan.raid_disks;
    let (old_chunk, new_chunk) = (u64::from(plan.chunk_sectors), u64::from(new.chunk_sectors));
    let parity = current - plan.data_disks();
    let least = offset_change((old_chunk, new_chunk), plan.data_disks(), new.raid_disks - parity);
    let moved = least.max(copy_gap(old_chunk, new_chunk));
    let highest = members[..current as usize].iter().map(|m| m.data_offset_sectors).max();
    let new_offset = highest.expect("a whole array has members") + moved;
    for (m, s) in members.iter().zip(spaces) {
        // Its device ends at its offset and room; the component must fit past the new offset.
        let device_end = m.data_offset_sectors.saturating_add(s.avail_sectors);
        let data_end = m.data_offset_sectors.saturating_add(plan.size_sectors);
        let needed_sectors = new_offset - m.data_offset_sectors.min(new_offset);
        if device_end < new_offset.saturating_add(plan.size_sectors)
            || needed_sectors > NEW_OFFSET_MAX
        {
            let room_sectors = device_end.saturating_sub(data_end);
            let member = m.name.clone();
            return Err(GrowError::NoTailroom { member, room_sectors, needed_sectors });
        }
    }
    Ok(new_offset)
}
