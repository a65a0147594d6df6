//! Reshaping an array (mdadm --grow --raid-devices, --layout, --chunk): which spares take the
//! new slots, where each member's data goes, and the superblocks md reads during and after.
//!
//! md's way, which uraid follows so that either can take up the other's reshape: forwards
//! with a new data offset (md.c `update_raid_disks` refuses a grow whose new offset is not
//! lower; mdadm's Grow.c `set_new_data_offset`). The data moves down by what mdadm moves
//! it: the least common multiple of the old and new stripes' data, over the old data
//! members (`compute_backup_blocks` / `min_offset_change`: 384 sectors for 3 -> 4 members of
//! RAID5 with 64 KiB chunks), which must fit in the room before the data on every member
//! (past the superblock, bitmap and bad block log, and never within 36 KiB of the
//! superblock: the kernel's `super_1_allow_new_offset`). Where mdadm would need a backup
//! file for want of that room, uraid moves the data by the whole chunks there are: its copy
//! needs one (the old and the new chunk when the chunk changes: `uraid_core::reshape`). A
//! new layout or chunk on the same members goes, as mdadm's `set_new_data_offset`, the way with
//! more room: down into the room before the data, or up into the room after it (backwards,
//! from the array's end down; up on a tie), by about half that room, as mdadm's
//! `choose_offset` (the least move would copy a chunk row per window; the room stays the same
//! all the way). Fewer members go backwards (`fewer.rs`), as
//! md takes them: the data moves up by mdadm's least move into the room after it, from the
//! new array's end down. While the reshape runs every superblock says so: `RESHAPE_ACTIVE`
//! and `NEW_OFFSET` (and `RESHAPE_BACKWARDS` when the same members' data goes up, the only
//! case md flags), `raid_disks` the new count, `delta_disks` the change, the
//! level, layout and chunk as they were and `new_layout` and `new_chunk` as they will be,
//! `reshape_position` the array sector copied up to (down to, backwards), `new_offset` the
//! signed move, the added members in their slots (the removed ones in theirs). When it ends
//! the data offset, layout and chunk are the new ones, each member's usable size grows by the
//! move down (shrinks by the move up), a removed member is a spare, and the reshape fields are
//! cleared.
//!
//! The event count goes up with every superblock write, as md's does: the start, each
//! position recorded, the end. A member left out of a run of the copy (lost, or not given)
//! is behind from its first record on, stale, and never taken for one that holds the data
//! (the run marks a missing slot's member faulty, too). A crash in the middle of a write
//! leaves members exactly one event behind, holding what the freshest say (the data is
//! synced before the superblocks): `mended_superblock` gives them the write they missed (md
//! takes members one event behind).

mod fewer;
mod revert;

pub use revert::{RevertError, revert_stripe_sectors, reverted};

use super::GrowError;
use super::takeover::{q_built_by_restripe, with_q_built};
use crate::assemble::{AssemblyPlan, PlannedMember};
use crate::dev_roles::DevRole;
use crate::feature;
use crate::superblock::Superblock1;
use std::cmp::Ordering;

/// Sectors past the superblock's start that md never moves data into (36 KiB).
pub const KERNEL_METADATA_SECTORS: u64 = (32 + 4) * 2;

/// A member's space around its data (which starts at its planned `data_offset_sectors`), as
/// the caller measured it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberSpace {
    /// The first sector past md's metadata (superblock, bitmap, bad block log, md's PPL).
    pub metadata_end_sectors: u64,
    /// Sectors past the data offset the device holds.
    pub avail_sectors: u64,
    /// Its bad block log lists sectors (md's `BAD_BLOCKS` feature on its own superblock).
    pub lists_bad_blocks: bool,
}

/// A member of the reshaped array, or a spare it keeps (`slot` None).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReshapeMember {
    pub candidate: usize,
    pub name: String,
    pub dev_number: u32,
    pub slot: Option<u16>,
    /// Where its data starts before and after (sectors from the device's start).
    pub old_offset_sectors: u64,
    pub new_offset_sectors: u64,
}

/// What a reshape makes of an array: its members, layout and chunk (md's numbers).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NewShape {
    pub raid_disks: u32,
    pub layout: u32,
    pub chunk_sectors: u32,
    /// Fewer members may hold less than the array does: its data past the new end is lost
    /// (uraid grow's `--shrink`; mdadm has the array's size cut first).
    pub shrink: bool,
    /// Where the data goes, in sectors from each device's start (mdadm's `--grow
    /// --data-offset`), in place of the move uraid chooses (`asked_offset`).
    pub data_offset_sectors: Option<u64>,
}

/// A reshape, decided or read back from the superblocks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReshapePlan {
    pub old_raid_disks: u32,
    pub new_raid_disks: u32,
    pub new_layout: u32,
    pub new_chunk_sectors: u32,
    /// The members in slots, in slot order, then the spares not taken. A slot whose member
    /// was lost in the middle of the reshape has none.
    pub members: Vec<ReshapeMember>,
    /// The slot whose member the reshape builds as it goes: a takeover's Q member
    /// (`q_built_by_restripe`), in sync when it ends.
    pub q_built: Option<u16>,
}

impl ReshapePlan {
    /// The members in slots, in slot order.
    pub fn in_slots(&self) -> impl Iterator<Item = &ReshapeMember> {
        self.members.iter().filter(|m| m.slot.is_some())
    }

    /// The member in `slot`, if one is there.
    #[must_use]
    pub fn in_slot(&self, slot: usize) -> Option<&ReshapeMember> {
        self.in_slots().find(|m| m.slot.map(usize::from) == Some(slot))
    }

    /// Slots with no member, of the old or the new count, the more (a removed member is read
    /// until the end).
    #[must_use]
    pub fn missing_slots(&self) -> Vec<usize> {
        let slots = 0..self.slot_count() as usize;
        slots.filter(|&s| self.in_slot(s).is_none()).collect()
    }

    /// Slots the reshape reads or writes: the old count or the new, the more.
    #[must_use]
    pub fn slot_count(&self) -> u32 {
        self.old_raid_disks.max(self.new_raid_disks)
    }

    /// md's `reshape_backwards`: the data moves up (fewer members go so).
    #[must_use]
    pub fn backwards(&self) -> bool {
        self.in_slots().next().is_some_and(|m| m.new_offset_sectors > m.old_offset_sectors)
    }
}

/// Decides a reshape of `plan` to `new`: the spares in the order given take the new slots;
/// `space` measures a member. Every member and spare gets the same new offset (uraid serves
/// an array whose members agree on it; mdadm moves each device's by the same amount, the same
/// when the offsets were the same). Whether the level takes the new layout is the geometry's
/// to say (`uraid_core::Geometry`), before anything is written.
pub fn plan_reshape(
    plan: &AssemblyPlan,
    new: NewShape,
    space: &dyn Fn(&PlannedMember) -> MemberSpace,
) -> Result<ReshapePlan, GrowError> {
    refuse_shape(plan, new)?;
    let (current, new_raid_disks) = (plan.raid_disks, new.raid_disks);
    let needed = new_raid_disks.saturating_sub(current) as usize;
    if plan.spares.len() < needed {
        return Err(GrowError::TooFewSpares { needed, spares: plan.spares.len() });
    }
    let members: Vec<&PlannedMember> = plan.slots.iter().flatten().chain(&plan.spares).collect();
    let spaces: Vec<MemberSpace> = members.iter().map(|m| space(m)).collect();
    // The slots the copy reads or writes: the new ones, or the old when fewer (a removed
    // member is read until the end). Their listed sectors are where the data moves away
    // from (the list is by member sector), and the copy reads every data chunk of a member
    // it has (it rebuilds a lost member's only).
    let slots = current.max(new_raid_disks) as usize;
    let mut listed = members.iter().zip(&spaces).take(slots);
    if let Some((m, _)) = listed.find(|(_, s)| s.lists_bad_blocks) {
        return Err(GrowError::ListsBadBlocks { member: m.name.clone() });
    }
    let new_offset = match (new.data_offset_sectors, new_raid_disks.cmp(&current)) {
        (Some(asked), _) => asked_offset(plan, new, (&members, &spaces), asked)?,
        (None, Ordering::Less) => fewer::offset_up(plan, new, &members, &spaces)?,
        (None, Ordering::Greater) => offset_down(plan, new, &members, &spaces)?,
        (None, Ordering::Equal) => same_members_offset(plan, new, &members, &spaces)?,
    };
    let members = members
        .iter()
        .enumerate()
        .map(|(slot, m)| ReshapeMember {
            candidate: m.candidate,
            name: m.name.clone(),
            dev_number: m.dev_number,
            slot: (slot < slots).then_some(slot as u16),
            old_offset_sectors: m.data_offset_sectors,
            new_offset_sectors: new_offset,
        })
        .collect();
    let (new_layout, new_chunk_sectors) = (new.layout, new.chunk_sectors);
    let q_built = q_built_slot(plan, new_raid_disks == current);
    Ok(ReshapePlan {
        old_raid_disks: current,
        new_raid_disks,
        new_layout,
        new_chunk_sectors,
        members,
        q_built,
    })
}

/// The slot of the Q member a restripe of `plan` builds as it goes (`q_built_by_restripe`).
fn q_built_slot(plan: &AssemblyPlan, keeps_members: bool) -> Option<u16> {
    q_built_by_restripe(plan, keeps_members).and_then(|q| match q.role {
        DevRole::Active(slot) => Some(slot),
        _ => None,
    })
}

/// The new data offset of more members: down from the lowest old offset by the move, no
/// lower than any metadata's end; every added member holding the component there.
fn offset_down(
    plan: &AssemblyPlan,
    new: NewShape,
    members: &[&PlannedMember],
    spaces: &[MemberSpace],
) -> Result<u64, GrowError> {
    let before = headroom(plan, members, spaces);
    let moved = data_move(plan, new, before.sectors).map_err(|needed_sectors| {
        let (member, room_sectors) = (before.member.to_owned(), before.sectors);
        GrowError::NoHeadroom { member, room_sectors, needed_sectors }
    })?;
    let new_offset = before.from - moved;
    spares_hold_component(plan, members, spaces, new_offset)?;
    Ok(new_offset)
}

/// Every spare taking a new slot holds the component from `new_offset`.
fn spares_hold_component(
    plan: &AssemblyPlan,
    members: &[&PlannedMember],
    spaces: &[MemberSpace],
    new_offset: u64,
) -> Result<(), GrowError> {
    for (m, s) in members.iter().zip(spaces).skip(plan.raid_disks as usize) {
        let avail_sectors =
            s.avail_sectors.saturating_add(m.data_offset_sectors.saturating_sub(new_offset));
        if avail_sectors < plan.size_sectors {
            let (member, new_sectors) = (m.name.clone(), plan.size_sectors);
            return Err(GrowError::SpareTooSmall { member, avail_sectors, new_sectors });
        }
    }
    Ok(())
}

/// The new data offset asked for (mdadm's `--grow --data-offset`): below every member's for
/// more members, above for fewer, either for the same members, by at least the copy's gap
/// (and, as mdadm, its least move where the members stay or go), past md's metadata, every
/// member and spare holding the component there, 4 KiB aligned.
fn asked_offset(
    plan: &AssemblyPlan,
    new: NewShape,
    (members, spaces): (&[&PlannedMember], &[MemberSpace]),
    asked: u64,
) -> Result<u64, GrowError> {
    let refuse = |why: String| GrowError::AskedOffset { asked_sectors: asked, why };
    let (before, after) = (headroom(plan, members, spaces), fewer::tailroom(plan, members, spaces));
    let (least, gap) = least_and_gap(plan, new);
    let (more, fewer) = (new.raid_disks > plan.raid_disks, new.raid_disks < plan.raid_disks);
    let needed = if more { gap } else { least.max(gap) };
    let lowest = before.from;
    if !asked.is_multiple_of(8) {
        return Err(refuse("not a multiple of 4 KiB (8 sectors)".into()));
    }
    if asked < lowest && !fewer {
        let room = before.sectors;
        let moved = lowest - asked;
        if moved < needed || moved > room || moved > NEW_OFFSET_MAX {
            return Err(refuse(format!(
                "a move down by {moved} sectors, and it must be at least {needed} (the copy's \
                 gap, or mdadm's least move) and at most the {room} sectors {} has before the \
                 data",
                before.member
            )));
        }
        spares_hold_component(plan, members, spaces, asked)?;
        return Ok(asked);
    }
    if asked > after.from && !more {
        let room = after.sectors;
        let moved = asked - after.from;
        if moved < needed || moved > room {
            return Err(refuse(format!(
                "a move up by {moved} sectors, and it must be at least {needed} (mdadm's least \
                 move, at least a chunk) and at most the {room} sectors {} has after the data",
                after.member
            )));
        }
        return Ok(asked);
    }
    let way = if more {
        "more members move the data down, below every member's offset"
    } else if fewer {
        "fewer members move the data up, above every member's offset"
    } else {
        "the data moves down or up, past every member's offset"
    };
    Err(refuse(format!("{way} (from {lowest} to {} now)", after.from)))
}

/// The new data offset of a new layout or chunk on the same members: as mdadm's
/// `set_new_data_offset`, the way with more room (down into the room before the data, up
/// into the room after it; up on a tie), by about half of it (`data_move`).
fn same_members_offset(
    plan: &AssemblyPlan,
    new: NewShape,
    members: &[&PlannedMember],
    spaces: &[MemberSpace],
) -> Result<u64, GrowError> {
    let (before, after) = (headroom(plan, members, spaces), fewer::tailroom(plan, members, spaces));
    let (way, moved) = if before.sectors > after.sectors {
        (&before, data_move(plan, new, before.sectors).map(|m| before.from - m))
    } else {
        (&after, data_move(plan, new, after.sectors).map(|m| after.from + m))
    };
    moved.map_err(|needed_sectors| GrowError::NoRoom {
        member: way.member.to_owned(),
        before_sectors: before.sectors,
        after_sectors: after.sectors,
        needed_sectors,
    })
}

/// Room every member has for the data to move into, from one offset: the lowest of the
/// members' down, or the highest up; with the member that bounds it.
#[derive(Debug)]
struct Room<'a> {
    sectors: u64,
    from: u64,
    member: &'a str,
}

/// The room before the data: from the highest metadata end of any member or spare up to the
/// lowest data offset of the members in slots.
fn headroom<'a>(
    plan: &AssemblyPlan,
    members: &[&'a PlannedMember],
    spaces: &[MemberSpace],
) -> Room<'a> {
    let (holder, high) = members[..plan.raid_disks as usize]
        .iter()
        .map(|m| (m, m.data_offset_sectors))
        .min_by_key(|p| p.1)
        .expect("a whole array has members");
    let (metadata, low) = spaces
        .iter()
        .zip(members)
        .map(|(s, m)| (m, s.metadata_end_sectors))
        .max_by_key(|p| p.1)
        .expect("a whole array has members");
    let sectors = high.saturating_sub(low);
    let tight = if sectors == 0 { metadata } else { holder };
    Room { sectors, from: high, member: &tight.name }
}

/// Refuses what no room or spare can make a reshape of `plan` to `new`.
fn refuse_shape(plan: &AssemblyPlan, new: NewShape) -> Result<(), GrowError> {
    // A restripe builds the Q member a takeover added (`q_built_by_restripe`).
    super::refuse_unless_reshapable(&with_q_built(plan, new.raid_disks == plan.raid_disks))?;
    let (current, asked) = (plan.raid_disks, new.raid_disks);
    let same_shape = new.layout == plan.layout && new.chunk_sectors == plan.chunk_sectors;
    if asked == current && same_shape {
        return Err(GrowError::NotMoreMembers { current, asked });
    }
    let new_chunk = u64::from(new.chunk_sectors);
    if !new_chunk.is_power_of_two() || !plan.size_sectors.is_multiple_of(new_chunk) {
        let (size_sectors, chunk_sectors) = (plan.size_sectors, new.chunk_sectors);
        return Err(GrowError::ChunkSplitsMembers { size_sectors, chunk_sectors });
    }
    // After the chunk's check: what fewer members hold is counted in new chunks.
    if asked < current {
        fewer::refuse_fewer(plan, new)?;
    }
    if asked > RAID_DISKS_MAX {
        return Err(GrowError::TooManyMembers { asked, max: RAID_DISKS_MAX });
    }
    Ok(())
}

/// How far the data moves for `new` with `room` sectors to move into; `Err` with the least
/// it needs.
fn data_move(plan: &AssemblyPlan, new: NewShape, room: u64) -> Result<u64, u64> {
    let (least, gap) = least_and_gap(plan, new);
    // Whole chunks of the larger keep 4K alignment.
    let larger = u64::from(plan.chunk_sectors.max(new.chunk_sectors));
    let whole = |sectors: u64| sectors / larger * larger;
    let same_members = new.raid_disks == plan.raid_disks;
    let moved = if same_members {
        // The room before the data stays all the way, and each window copies as much.
        least.max(gap).max(whole(room / 2))
    } else if room >= least.max(gap) {
        least.max(gap)
    } else {
        // Where mdadm would need a backup file, uraid's copy needs only the gap (and the
        // kernel, taking it up, only some room: raid5.c `raid5_run`).
        whole(room)
    };
    // Past what md's 32-bit `new_offset` holds is past any room mdadm leaves, too.
    if moved < gap || moved > room || moved > NEW_OFFSET_MAX {
        return Err(if same_members { least.max(gap) } else { gap });
    }
    Ok(moved)
}

/// md's limit on members of a raid456 array (and uraid's geometry's).
const RAID_DISKS_MAX: u32 = 256;

/// The farthest md's signed 32-bit `new_offset` moves the data.
const NEW_OFFSET_MAX: u64 = i32::MAX as u64;

/// mdadm's least move of `plan`'s data to `new` (`offset_change`) and the copy's gap
/// (`copy_gap`), in sectors.
fn least_and_gap(plan: &AssemblyPlan, new: NewShape) -> (u64, u64) {
    let (old_chunk, new_chunk) = (u64::from(plan.chunk_sectors), u64::from(new.chunk_sectors));
    let new_data_disks = new.raid_disks - plan.max_degraded();
    let least = offset_change((old_chunk, new_chunk), plan.data_disks(), new_data_disks);
    (least, copy_gap(old_chunk, new_chunk))
}

/// What uraid's copy needs between the old and new offsets (`Reshape::gap_sectors` in
/// uraid-core, which this crate does not depend on): a chunk, the old and the new when it
/// changes.
fn copy_gap(old_chunk: u64, new_chunk: u64) -> u64 {
    if old_chunk == new_chunk { new_chunk } else { old_chunk + new_chunk }
}

/// The least mdadm moves the data (`compute_backup_blocks` / `min_offset_change`): a whole
/// number of old and of new stripes, per old data member; chunks (old, new) in sectors.
fn offset_change(chunks: (u64, u64), old_data_disks: u32, new_data_disks: u32) -> u64 {
    let old_stripe = chunks.0 * u64::from(old_data_disks);
    let new_stripe = chunks.1 * u64::from(new_data_disks);
    let (mut a, mut b) = (old_stripe, new_stripe);
    while b != 0 {
        (a, b) = (b, a % b);
    }
    old_stripe / a.max(1) * new_stripe / u64::from(old_data_disks.max(1))
}

/// What a reshape's superblocks say: `None` when none is running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReshapeProgress {
    pub old_raid_disks: u32,
    pub new_raid_disks: u32,
    pub new_layout: u32,
    pub new_chunk_sectors: u32,
    #[doc(alias = "reshape_position")]
    pub position_sectors: u64,
    /// md's `RESHAPE_BACKWARDS`: the data moves up, the position comes down.
    pub backwards: bool,
}

impl ReshapeProgress {
    /// Read from a superblock; `Err` for a reshape uraid does not take up (another level,
    /// nothing changed, more members backwards or fewer forwards, or no new offset that way),
    /// with what it is.
    pub fn of(sb: &Superblock1) -> Result<Option<ReshapeProgress>, String> {
        if sb.feature_map & feature::RESHAPE_ACTIVE == 0 {
            return Ok(None);
        }
        // md's `super_1_validate`: fewer members always go backwards; the flag says it for
        // the same members (md's `super_1_sync` writes it only then).
        let (moved, delta) = (sb.new_offset_sectors, sb.delta_disks);
        let backwards =
            delta < 0 || (delta == 0 && sb.feature_map & feature::RESHAPE_BACKWARDS != 0);
        // The data moves down forwards, up backwards; more members forwards, fewer backwards.
        let way = if backwards { moved > 0 && delta <= 0 } else { moved < 0 && delta >= 0 };
        let moves = sb.feature_map & feature::NEW_OFFSET != 0 && way;
        let same_shape = sb.new_layout == sb.layout && sb.new_chunk_sectors == sb.chunk_sectors;
        let changes = delta != 0 || !same_shape;
        let old_raid_disks = i64::from(sb.raid_disks) - i64::from(delta);
        let level = sb.new_level == sb.level.to_md();
        if !level || !changes || old_raid_disks < 2 || !moves {
            return Err(format!(
                "a reshape uraid does not take up: level {} -> {}, layout {} -> {}, chunk {} -> \
                 {} sectors, {} members by {}, {}, new offset {} (uraid goes on with one \
                 adding members forwards to a lower data offset, removing members backwards to \
                 a higher one, or changing the layout or chunk either way; finish it with \
                 mdadm)",
                sb.level.to_md(),
                sb.new_level,
                sb.layout,
                sb.new_layout,
                sb.chunk_sectors,
                sb.new_chunk_sectors,
                sb.raid_disks,
                sb.delta_disks,
                if backwards { "backwards" } else { "forwards" },
                sb.new_offset_sectors,
            ));
        }
        Ok(Some(ReshapeProgress {
            old_raid_disks: u32::try_from(old_raid_disks).expect("checked at least 2"),
            new_raid_disks: sb.raid_disks,
            new_layout: sb.new_layout,
            new_chunk_sectors: sb.new_chunk_sectors,
            position_sectors: sb.reshape_position_sectors,
            backwards,
        }))
    }

    /// The same members before and after: a restripe (a new layout or chunk).
    #[must_use]
    pub fn keeps_members(&self) -> bool {
        self.old_raid_disks == self.new_raid_disks
    }

    /// The position the reshape starts from, in the array `sb` describes: its start forwards,
    /// the new array's end backwards (md's `raid5_size` of the fewer members).
    #[must_use]
    pub fn start_sectors(&self, sb: &Superblock1) -> u64 {
        if !self.backwards {
            return 0;
        }
        let parity = sb.level.max_degraded();
        let chunk = u64::from(self.new_chunk_sectors.max(1));
        let data_disks = u64::from(self.new_raid_disks.saturating_sub(parity));
        sb.size_sectors / chunk * chunk * data_disks
    }
}

/// The reshape the members' own superblocks describe (the freshest members': those behind
/// are stale, or mended first by `mended_superblock`), each in the slot its role gives it (a
/// spare: none; a slot may have no member); `plan` is the array's, for a Q member the reshape
/// builds (`q_built_by_restripe`).
#[must_use]
pub fn reshape_in_progress(
    plan: &AssemblyPlan,
    members: &[(&PlannedMember, &Superblock1)],
    progress: &ReshapeProgress,
) -> ReshapePlan {
    let q_built = q_built_slot(plan, progress.keeps_members());
    let members = members
        .iter()
        .map(|(m, sb)| {
            let (old, moved) = (sb.data_offset_sectors, sb.new_offset_sectors);
            let new = if sb.feature_map & feature::RESHAPE_ACTIVE != 0 {
                old.saturating_add_signed(moved.into())
            } else {
                old
            };
            ReshapeMember {
                candidate: m.candidate,
                name: m.name.clone(),
                dev_number: m.dev_number,
                // A removed member keeps its slot until the end.
                slot: match m.role {
                    DevRole::Active(slot)
                        if u32::from(slot)
                            < progress.new_raid_disks.max(progress.old_raid_disks) =>
                    {
                        Some(slot)
                    }
                    _ => None,
                },
                old_offset_sectors: old,
                new_offset_sectors: new,
            }
        })
        .collect();
    ReshapePlan {
        old_raid_disks: progress.old_raid_disks,
        new_raid_disks: progress.new_raid_disks,
        new_layout: progress.new_layout,
        new_chunk_sectors: progress.new_chunk_sectors,
        members,
        q_built,
    }
}

/// A member one superblock write behind `reference` (the freshest): a crash in the middle
/// of writing them. Every window's data is synced on every member before the superblocks
/// that record it, so the member holds what the reference says, and gets what the write
/// would have given it: the start's fields (it was in the old shape; nothing had moved), the
/// position recorded, or the end (the new data offset, its usable size grown by the move).
/// `None` for any other member: further behind (left out of a run: stale), marked faulty by
/// the reference, of another array, or not in this reshape.
#[must_use]
pub fn mended_superblock(own: &Superblock1, reference: &Superblock1) -> Option<Superblock1> {
    let same_array = own.set_uuid == reference.set_uuid
        && own.events.checked_add(1) == Some(reference.events)
        && own.dev_roles.len() == reference.dev_roles.len();
    let role = reference.dev_roles.get(own.dev_number as usize);
    if !same_array || matches!(role, None | Some(DevRole::Faulty | DevRole::Journal)) {
        return None;
    }
    let own_progress = ReshapeProgress::of(own).ok()?;
    let mut sb = own.clone();
    let shape = |sb: &Superblock1| {
        let progress = ReshapeProgress::of(sb).ok();
        (progress, sb.raid_disks, sb.layout, sb.chunk_sectors, sb.data_offset_sectors)
    };
    match (own_progress, ReshapeProgress::of(reference).ok()?) {
        // A revert (`reverted`) it missed.
        _ if reverted(own).is_ok_and(|r| shape(&r) == shape(reference)) => {
            sb = reverted(own).expect("just reverted");
        }
        (None, Some(p))
            if p.position_sectors == p.start_sectors(reference)
                && own.raid_disks == p.old_raid_disks =>
        {
            let new_offset = reference
                .data_offset_sectors
                .checked_add_signed(reference.new_offset_sectors.into())?;
            let moved =
                i64::try_from(new_offset).ok()? - i64::try_from(own.data_offset_sectors).ok()?;
            sb.raid_disks = reference.raid_disks;
            let shape = (reference.new_level, reference.new_layout, reference.new_chunk_sectors);
            let (delta, at) = (reference.delta_disks, p.position_sectors);
            mark_reshaping(&mut sb, shape, delta, at, i32::try_from(moved).ok()?);
        }
        (Some(mine), Some(p))
            if mine == ReshapeProgress { position_sectors: mine.position_sectors, ..p } =>
        {
            sb.reshape_position_sectors = p.position_sectors;
        }
        (Some(mine), None)
            if (mine.new_raid_disks, mine.new_layout, mine.new_chunk_sectors)
                == (reference.raid_disks, reference.layout, reference.chunk_sectors) =>
        {
            let new_offset =
                own.data_offset_sectors.checked_add_signed(own.new_offset_sectors.into())?;
            mark_reshaped(&mut sb, new_offset, (mine.new_layout, mine.new_chunk_sectors));
        }
        _ => return None,
    }
    sb.dev_roles.clone_from(&reference.dev_roles);
    sb.utime = reference.utime;
    sb.events = reference.events;
    sb.seal();
    Some(sb)
}

/// A member's superblock while the reshape runs, at `position`; sealed.
#[must_use]
pub fn reshaping_superblock(
    own: &Superblock1,
    plan: &ReshapePlan,
    me: &ReshapeMember,
    position_sectors: u64,
    events: u64,
    utime_seconds: u64,
) -> Superblock1 {
    let mut sb = with_roles(own, plan);
    sb.data_offset_sectors = me.old_offset_sectors;
    let moved = i64::try_from(me.new_offset_sectors).unwrap_or(i64::MAX)
        - i64::try_from(me.old_offset_sectors).unwrap_or(i64::MAX);
    // Within i32 for the members (`plan_reshape`); a spare's farther own offset is clamped.
    let new_offset = i32::try_from(moved).unwrap_or(if moved < 0 { i32::MIN } else { i32::MAX });
    let new_shape = (sb.level.to_md(), plan.new_layout, plan.new_chunk_sectors);
    let delta_disks = plan.new_raid_disks.cast_signed() - plan.old_raid_disks.cast_signed();
    mark_reshaping(&mut sb, new_shape, delta_disks, position_sectors, new_offset);
    super::stamp(&mut sb, events, utime_seconds);
    sb
}

/// The fields md writes for a reshape under way: into `new_shape` (`new_level`, `new_layout`,
/// `new_chunk_sectors`), by `delta_disks` members, at `position_sectors`, the data moving to
/// `new_offset` sectors from the data offset (md's signed `new_offset`; backwards when up,
/// which md's `super_1_sync` flags only for the same members: fewer go backwards anyway).
fn mark_reshaping(
    sb: &mut Superblock1,
    new_shape: (i32, u32, u32),
    delta_disks: i32,
    position_sectors: u64,
    new_offset: i32,
) {
    sb.feature_map |= feature::RESHAPE_ACTIVE | feature::NEW_OFFSET;
    sb.feature_map &= !feature::RESHAPE_BACKWARDS;
    if new_offset > 0 && delta_disks == 0 {
        sb.feature_map |= feature::RESHAPE_BACKWARDS;
    }
    // Moving up, the usable size must reach the component's end at the new offset (the plan
    // checked the device holds it): mdadm makes it the device's room (`size` 0) when the
    // kernel refuses the new offset for want of it. Found by the superblock fuzz target: a
    // usable size of just the component shrank below it at the end.
    if let Ok(up) = u64::try_from(new_offset) {
        sb.data_size_sectors = sb.data_size_sectors.max(sb.size_sectors.saturating_add(up));
    }
    (sb.new_level, sb.new_layout, sb.new_chunk_sectors) = new_shape;
    sb.delta_disks = delta_disks;
    sb.reshape_position_sectors = position_sectors;
    sb.new_offset_sectors = new_offset;
}

/// The fields of a reshape done: the data at `new_offset_sectors` in the new `(layout,
/// chunk_sectors)`, the member's usable size grown by the move down or shrunk by the move up
/// (md's `md_finish_reshape`; none when it is there already), no reshape fields (the new
/// shape's the current one).
fn mark_reshaped(sb: &mut Superblock1, new_offset_sectors: u64, shape: (u32, u32)) {
    let down = sb.data_offset_sectors.saturating_sub(new_offset_sectors);
    let up = new_offset_sectors.saturating_sub(sb.data_offset_sectors);
    let reshape_bits = feature::RESHAPE_ACTIVE | feature::NEW_OFFSET | feature::RESHAPE_BACKWARDS;
    sb.feature_map &= !reshape_bits;
    (sb.layout, sb.chunk_sectors) = shape;
    (sb.new_level, sb.new_layout, sb.new_chunk_sectors) = (sb.level.to_md(), shape.0, shape.1);
    sb.data_offset_sectors = new_offset_sectors;
    sb.data_size_sectors = sb.data_size_sectors.saturating_add(down).saturating_sub(up);
    sb.reshape_position_sectors = 0;
    sb.delta_disks = 0;
    sb.new_offset_sectors = 0;
}

/// A member's superblock once the reshape is done: data at the new offset, its usable size
/// changed by the move (md's `md_finish_reshape`), the reshape fields cleared, a removed
/// member a spare (md's `raid5_finish_reshape` takes it out of its slot); sealed.
#[must_use]
pub fn reshaped_superblock(
    own: &Superblock1,
    plan: &ReshapePlan,
    me: &ReshapeMember,
    events: u64,
    utime_seconds: u64,
) -> Superblock1 {
    let mut sb = with_roles(own, plan);
    for role in &mut sb.dev_roles {
        if matches!(role, DevRole::Active(slot) if u32::from(*slot) >= plan.new_raid_disks) {
            *role = DevRole::Spare;
        }
    }
    mark_reshaped(&mut sb, me.new_offset_sectors, (plan.new_layout, plan.new_chunk_sectors));
    if me.slot.is_some() && me.slot == plan.q_built {
        sb.feature_map &= !feature::RECOVERY_OFFSET;
        sb.recovery_offset_sectors = 0;
    }
    super::stamp(&mut sb, events, utime_seconds);
    sb
}

/// The new member count, and every member of the plan in its slot.
fn with_roles(own: &Superblock1, plan: &ReshapePlan) -> Superblock1 {
    let mut sb = own.clone();
    sb.raid_disks = plan.new_raid_disks;
    for m in plan.in_slots() {
        let slot = m.slot.expect("members in slots have one");
        // Every member's own number is within the table (mdadm gives all one max_dev).
        if let Some(role) = sb.dev_roles.get_mut(m.dev_number as usize) {
            *role = DevRole::Active(slot);
        }
    }
    // A slot's member lost in the middle is faulty from now on, as md marks it: given back
    // later it is behind by then, and stale.
    for slot in plan.missing_slots() {
        for role in &mut sb.dev_roles {
            if *role == DevRole::Active(slot as u16) {
                *role = DevRole::Faulty;
            }
        }
    }
    sb
}

#[cfg(test)]
mod tests;
