//! Changing an array's component size (mdadm --grow --size), decided before anything is
//! written: how far it may grow or shrink, and the superblock each member then gets.
//!
//! md's rules (md.c `update_size`, raid5.c `raid5_resize`, super_1_rdev_size_change for
//! v1.2): each member's usable size becomes its device's size past the data offset; the
//! component size grows to what every member in a slot has (`max`) or to a size asked, in
//! whole chunks; the array then resyncs from the old component size (`resync_offset`), since
//! nothing made the new space's parity. The array must be whole (a degraded array cannot
//! make parity for the new space), clean (a crashed array replays its log and resyncs at
//! its next start; that comes first) and not in the middle of a recovery or replacement.
//! Shrinking, which md does whenever asked, is taken only when asked for by name
//! (`SizeTarget::Shrink`: uraid grow's `--shrink`): data past the new end goes, and a size
//! mistyped (`64M` for `64G`) would lose nearly all of it. The bitmap keeps its chunk and
//! nothing resyncs (md's `raid5_resize` resyncs only new space).
//!
//! `bitmap.rs`: adding or removing the internal write-intent bitmap (mdadm --grow --bitmap).
//! `update.rs`: mdadm's `--assemble --update` (name, homehost, UUID, resync).

mod bitmap;
pub mod reshape;
pub mod takeover;
mod update;

pub use bitmap::{add_bitmap, bitmap_room_sectors, with_bitmap_field};
pub use update::{
    Update, UpdateError, bad_block_log_place, check_member_update, check_update, updated_bitmap,
    updated_superblock,
};

use crate::assemble::{AssemblyPlan, PlannedMember};
use crate::superblock::Superblock1;
use thiserror::Error;

/// The component size asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SizeTarget {
    /// All that every member in a slot holds (mdadm's `--size=max`).
    Max,
    /// This many sectors of each member, rounded down to whole chunks, no fewer than now.
    Sectors(u64),
    /// This many sectors, rounded down to whole chunks, fewer than now allowed: the array's
    /// data past its new end is gone (mdadm's `--size` below the current one).
    Shrink(u64),
}

/// The room a member has for data: its device's sectors past the data offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberRoom {
    pub name: String,
    pub avail_sectors: u64,
}

/// What a grow changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SizeChange {
    pub old_size_sectors: u64,
    pub new_size_sectors: u64,
    /// What `max` would have given.
    pub max_size_sectors: u64,
}

impl SizeChange {
    #[must_use]
    pub fn unchanged(&self) -> bool {
        self.new_size_sectors == self.old_size_sectors
    }

    /// The array loses its end.
    #[must_use]
    pub fn shrinks(&self) -> bool {
        self.new_size_sectors < self.old_size_sectors
    }
}

/// Why an array's size cannot grow now.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum GrowError {
    #[error("a reshape is in progress: `uraid grow --continue` finishes it first")]
    Reshaping,
    #[error(
        "the array is degraded (slots {missing_slots:?} have no member in sync): the new \
         space's parity needs every member; rebuild first"
    )]
    Degraded { missing_slots: Vec<u32> },
    #[error("{member} is left out of the array ({why}): remove it or rebuild onto it first")]
    LeftOut { member: String, why: &'static str },
    #[error("{member} is being rebuilt or replaced: let that finish first")]
    Recovering { member: String },
    #[error(
        "the array is not clean (resync_offset {resync_offset_sectors}: a crash, or a resync \
         not finished): serve it until its resync is done and stop it cleanly, then grow it"
    )]
    Dirty { resync_offset_sectors: u64 },
    #[error(
        "{asked_sectors} sectors a member is smaller than the current {current_sectors}: the \
         array's data past its new end would be lost; shrink what is on it first and give \
         --shrink to let that go"
    )]
    Shrink { asked_sectors: u64, current_sectors: u64 },
    #[error("a component size below one chunk ({chunk_sectors} sectors) leaves no array")]
    BelowOneChunk { chunk_sectors: u64 },
    #[error(
        "{asked_sectors} sectors a member is more than {member} holds past its data offset \
         ({avail_sectors} sectors, in whole chunks {max_sectors})"
    )]
    TooBig { asked_sectors: u64, member: String, avail_sectors: u64, max_sectors: u64 },
    #[error(
        "spare {member} holds {avail_sectors} sectors past its data offset, less than the new \
         component size {new_sectors}: remove it first"
    )]
    SpareTooSmall { member: String, avail_sectors: u64, new_sectors: u64 },
    #[error("the bitmap cannot cover {new_sectors} sectors a member in md's largest chunk")]
    BitmapTooSmall { new_sectors: u64 },
    #[error("the array has an internal bitmap already")]
    HasBitmap,
    #[error("the array has no internal bitmap to remove")]
    NoBitmap,
    #[error(
        "the array has md's partial parity log (consistency policy ppl), which takes the \
         bitmap's place in the superblock: md runs one or the other"
    )]
    MdPpl,
    #[error(
        "the array has md's partial parity log (consistency policy ppl), which md does not \
         reshape or take over (raid5.c refuses it): change the policy first (`mdadm --grow \
         --consistency-policy=resync` while md runs it)"
    )]
    MdPplReshape,
    #[error(
        "no room for a bitmap: {room_sectors} sectors between where md puts it (8 past the \
         superblock) and the {next}, and md's bitmap takes at least 8"
    )]
    NoRoomForBitmap { room_sectors: u64, next: &'static str },
    #[error(
        "a bitmap chunk of {chunk_bytes} bytes needs {needed_bytes} bytes of bitmap, more than \
         the {room_bytes} bytes of room: give a larger --bitmap-chunk"
    )]
    BitmapChunkTooSmall { chunk_bytes: u64, needed_bytes: u64, room_bytes: u64 },
    #[error(
        "the array has {current} members: --raid-devices {asked} with the same layout and \
         chunk changes nothing"
    )]
    NotMoreMembers { current: u32, asked: u32 },
    #[error(
        "{asked} members hold {new_kib} KiB of the array's {old_kib} (from {current}): its data \
         past {new_kib} KiB would be lost; shrink what is on it first and give --shrink to let \
         that go"
    )]
    FewerMembers { current: u32, asked: u32, old_kib: u64, new_kib: u64 },
    #[error("{asked} members: the level takes no fewer than {min}")]
    TooFewMembers { asked: u32, min: u32 },
    #[error(
        "{member} has {room_sectors} sectors after the array's data, and fewer members move \
         the data up by {needed_sectors} (mdadm's least move, at least a chunk): make room with \
         `uraid grow --size SIZE --shrink` first (its end is then given up too)"
    )]
    NoTailroom { member: String, room_sectors: u64, needed_sectors: u64 },
    #[error(
        "a chunk of {chunk_sectors} sectors: it must be a power of two that divides each \
         member's {size_sectors} sectors (the array would lose its end)"
    )]
    ChunkSplitsMembers { size_sectors: u64, chunk_sectors: u32 },
    #[error(
        "md takes RAID4 and RAID5 over to RAID6, RAID6 in a `-6` or parity-last layout to \
         RAID5, RAID4 to RAID5 and parity-last RAID5 to RAID4: not level {level} (md layout \
         {layout}) to level {to}"
    )]
    NoTakeover { level: i32, layout: u32, to: i32 },
    #[error(
        "RAID{from} taken over to RAID{to} has {raid_disks} members (to RAID6 one more, which \
         becomes Q; from RAID6 one fewer, Q's): not --raid-devices {asked}"
    )]
    TakeoverMembers { from: i32, to: i32, raid_disks: u32, asked: u32 },
    #[error(
        "spare {member}'s data starts at sector {spare_sectors}, the members' at \
         {array_sectors}: uraid serves members that agree (add it again with uraid add)"
    )]
    SpareOffset { member: String, spare_sectors: u64, array_sectors: u64 },
    #[error("{asked} members is more than md's raid456 takes ({max})")]
    TooManyMembers { asked: u32, max: u32 },
    #[error(
        "{needed} new members need as many spares, and the array has {spares}: add the new \
         devices as spares first (uraid add, while it is served) and give them with the members"
    )]
    TooFewSpares { needed: usize, spares: usize },
    #[error(
        "{member} has {room_sectors} sectors between md's metadata and its data, and more \
         members move the data down by at least {needed_sectors} sectors (a chunk, or the old \
         and the new chunk) to reshape without a backup file"
    )]
    NoHeadroom { member: String, room_sectors: u64, needed_sectors: u64 },
    #[error(
        "a new layout or chunk moves the data by at least {needed_sectors} sectors (mdadm's \
         least move, at least a chunk; down into the room before it or up into the room after \
         it, whichever is larger, as mdadm), and {member} has {before_sectors} before it and \
         {after_sectors} after: make room after with `uraid grow --size SIZE --shrink` first \
         (its end is then given up too)"
    )]
    NoRoom { member: String, before_sectors: u64, after_sectors: u64, needed_sectors: u64 },
    #[error("a data offset of {asked_sectors} sectors: {why}")]
    AskedOffset { asked_sectors: u64, why: String },
    #[error(
        "{member} lists unreadable sectors in its bad block log: replace it (uraid replace) or \
         rebuild onto another device first; the reshape reads every data sector once"
    )]
    ListsBadBlocks { member: String },
}

/// Decides the new component size of the array `plan` describes; `room` gives each planned
/// member's room.
pub fn plan_size(
    plan: &AssemblyPlan,
    room: &dyn Fn(&PlannedMember) -> MemberRoom,
    target: SizeTarget,
) -> Result<SizeChange, GrowError> {
    refuse_unless_whole_and_clean(plan)?;
    let chunk = u64::from(plan.chunk_sectors);
    let in_slots: Vec<MemberRoom> = plan.slots.iter().flatten().map(room).collect();
    let smallest = in_slots.iter().min_by_key(|r| r.avail_sectors).expect("a whole array");
    let max_size_sectors = smallest.avail_sectors / chunk * chunk;
    let old_size_sectors = plan.size_sectors;
    let new_size_sectors = match target {
        SizeTarget::Max => max_size_sectors.max(old_size_sectors),
        SizeTarget::Sectors(asked) | SizeTarget::Shrink(asked) => {
            let asked = asked / chunk * chunk;
            if asked == 0 {
                return Err(GrowError::BelowOneChunk { chunk_sectors: chunk });
            }
            if asked < old_size_sectors && !matches!(target, SizeTarget::Shrink(_)) {
                let current_sectors = old_size_sectors;
                return Err(GrowError::Shrink { asked_sectors: asked, current_sectors });
            }
            if asked > max_size_sectors {
                return Err(GrowError::TooBig {
                    asked_sectors: asked,
                    member: smallest.name.clone(),
                    avail_sectors: smallest.avail_sectors,
                    max_sectors: max_size_sectors,
                });
            }
            asked
        }
    };
    for spare in plan.spares.iter().map(room) {
        if spare.avail_sectors < new_size_sectors {
            return Err(GrowError::SpareTooSmall {
                member: spare.name,
                avail_sectors: spare.avail_sectors,
                new_sectors: new_size_sectors,
            });
        }
    }
    Ok(SizeChange { old_size_sectors, new_size_sectors, max_size_sectors })
}

/// Whole and clean, and no reshape in progress: what every grow needs but the reshape's own
/// going on (see the module comment).
pub fn refuse_unless_whole_and_clean(plan: &AssemblyPlan) -> Result<(), GrowError> {
    if plan.feature_map & crate::feature::RESHAPE_ACTIVE != 0 {
        return Err(GrowError::Reshaping);
    }
    refuse_unless_clean(plan, false)
}

/// What a reshape or a takeover needs: whole and clean, and not md's partial parity log.
pub(crate) fn refuse_unless_reshapable(plan: &AssemblyPlan) -> Result<(), GrowError> {
    refuse_unless_whole_and_clean(plan)?;
    if plan.feature_map & crate::feature::PPL != 0 {
        return Err(GrowError::MdPplReshape);
    }
    Ok(())
}

/// Clean, every member given in sync, and (unless `degraded_ok`: a reshape going on after a
/// member was lost, which the plan keeps within the redundancy) every slot held.
pub fn refuse_unless_clean(plan: &AssemblyPlan, degraded_ok: bool) -> Result<(), GrowError> {
    if let Some(m) = plan.stale.first() {
        return Err(GrowError::LeftOut { member: m.name.clone(), why: "stale" });
    }
    if let Some(m) = plan.faulty.first() {
        return Err(GrowError::LeftOut { member: m.name.clone(), why: "marked faulty" });
    }
    // Before the missing slots, which count a slot being rebuilt.
    let recovering = plan.slots.iter().flatten().find(|m| m.recovery_offset_sectors.is_some());
    if let Some(m) = recovering.or(plan.replacements.first()) {
        return Err(GrowError::Recovering { member: m.name.clone() });
    }
    let missing_slots = plan.missing_slots();
    if !missing_slots.is_empty() && !degraded_ok {
        return Err(GrowError::Degraded { missing_slots });
    }
    if !plan.is_clean() {
        return Err(GrowError::Dirty { resync_offset_sectors: plan.resync_offset_sectors });
    }
    Ok(())
}

/// A member's superblock after the size changed: the new component size, its own room as its
/// usable size, a resync from the old size when it grew, the event count given; the time
/// (`utime_seconds`) with whatever mark its microseconds carried, and every other field as
/// it was. Sealed.
#[must_use]
pub fn resized_superblock(
    own: &Superblock1,
    change: &SizeChange,
    avail_sectors: u64,
    events: u64,
    utime_seconds: u64,
) -> Superblock1 {
    let mut sb = own.clone();
    sb.size_sectors = change.new_size_sectors;
    sb.data_size_sectors = avail_sectors;
    if !change.shrinks() {
        sb.resync_offset_sectors = sb.resync_offset_sectors.min(change.old_size_sectors);
    }
    stamp(&mut sb, events, utime_seconds);
    sb
}

/// The event count and update time a grow writes, the mark in `utime`'s microseconds kept
/// (uraid's, when it wrote last: `uraid_md::meta::RUN_MARK_USEC`); sealed.
fn stamp(sb: &mut Superblock1, events: u64, utime_seconds: u64) {
    let seconds_mask = (1u64 << 40) - 1;
    sb.events = events;
    sb.utime = (sb.utime & !seconds_mask) | (utime_seconds & seconds_mask);
    sb.seal();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DevRole, Level, MAX_SECTOR, Uuid};

    pub(super) fn member(slot: u16, name: &str) -> PlannedMember {
        PlannedMember {
            candidate: usize::from(slot),
            name: name.to_owned(),
            dev_number: u32::from(slot),
            device_uuid: Uuid([slot as u8; 16]),
            role: DevRole::Active(slot),
            events: 9,
            data_offset_sectors: 2048,
            recovery_offset_sectors: None,
            forced_from_events: None,
        }
    }

    /// A spare of the array `plan` gives, as `uraid add` leaves one.
    pub(super) fn spare(dev_number: u32, name: &str) -> PlannedMember {
        let slot = u16::try_from(dev_number).expect("a small number");
        PlannedMember { role: DevRole::Spare, name: name.to_owned(), ..member(slot, name) }
    }

    /// A clean RAID5 of three with 64 KiB chunks and 16384-sector components.
    pub(super) fn plan() -> AssemblyPlan {
        AssemblyPlan {
            uuid: Uuid([1; 16]),
            name: "g".into(),
            level: Level::Raid5,
            layout: 2,
            chunk_sectors: 128,
            raid_disks: 3,
            size_sectors: 16384,
            events: 9,
            resync_offset_sectors: MAX_SECTOR,
            feature_map: 0,
            slots: (0..3).map(|s| Some(member(s, &format!("m{s}")))).collect(),
            stale: Vec::new(),
            spares: Vec::new(),
            replacements: Vec::new(),
            faulty: Vec::new(),
            forced: false,
        }
    }

    /// m1 has the least room of the members in slots, and none of it in whole chunks past
    /// 47104 + 100; a spare "small" has less.
    fn room(m: &PlannedMember) -> MemberRoom {
        let avail_sectors = match m.name.as_str() {
            "m1" => 47104 + 100,
            "small" => 30000,
            _ => 90000,
        };
        MemberRoom { name: m.name.clone(), avail_sectors }
    }

    #[test]
    fn max_is_the_smallest_member_in_whole_chunks() {
        let change = plan_size(&plan(), &room, SizeTarget::Max).unwrap();
        assert_eq!(change.new_size_sectors, 47104);
        assert_eq!(change.old_size_sectors, 16384);
        let asked = plan_size(&plan(), &room, SizeTarget::Sectors(20000)).unwrap();
        assert_eq!(asked.new_size_sectors, 19968, "rounded down to 156 chunks");
        let same = plan_size(&plan(), &room, SizeTarget::Sectors(16400)).unwrap();
        assert!(same.unchanged());
    }

    #[test]
    fn what_cannot_grow_is_refused_with_the_reason() {
        let err = plan_size(&plan(), &room, SizeTarget::Sectors(47232)).unwrap_err();
        assert!(
            matches!(&err, GrowError::TooBig { member, max_sectors: 47104, .. } if member == "m1")
        );
        let err = plan_size(&plan(), &room, SizeTarget::Sectors(8192)).unwrap_err();
        assert!(matches!(err, GrowError::Shrink { .. }));
        let mut dirty = plan();
        dirty.resync_offset_sectors = 0;
        let err = plan_size(&dirty, &room, SizeTarget::Max).unwrap_err();
        assert_eq!(err, GrowError::Dirty { resync_offset_sectors: 0 });
        let mut degraded = plan();
        degraded.slots[2] = None;
        let err = plan_size(&degraded, &room, SizeTarget::Max).unwrap_err();
        assert_eq!(err, GrowError::Degraded { missing_slots: vec![2] });
        let mut recovering = plan();
        recovering.slots[0].as_mut().unwrap().recovery_offset_sectors = Some(64);
        let err = plan_size(&recovering, &room, SizeTarget::Max).unwrap_err();
        assert!(matches!(err, GrowError::Recovering { .. }));
        let mut stale = plan();
        stale.stale.push(member(2, "old"));
        assert!(matches!(
            plan_size(&stale, &room, SizeTarget::Max),
            Err(GrowError::LeftOut { .. })
        ));
        let mut small_spare = plan();
        small_spare.spares.push(member(3, "small"));
        let err = plan_size(&small_spare, &room, SizeTarget::Max).unwrap_err();
        assert!(matches!(err, GrowError::SpareTooSmall { .. }), "{err}");
    }

    /// A smaller size only by `Shrink`, in whole chunks, at least one; `Shrink` to a larger
    /// size grows as `Sectors` does. A shrunk superblock keeps the array clean (nothing new to
    /// resync) and its room as its usable size.
    #[test]
    fn a_shrink_is_taken_only_when_asked() {
        let err = plan_size(&plan(), &room, SizeTarget::Sectors(8200)).unwrap_err();
        assert_eq!(err, GrowError::Shrink { asked_sectors: 8192, current_sectors: 16384 });
        let change = plan_size(&plan(), &room, SizeTarget::Shrink(8200)).unwrap();
        assert_eq!((change.new_size_sectors, change.shrinks()), (8192, true));
        let err = plan_size(&plan(), &room, SizeTarget::Shrink(127)).unwrap_err();
        assert_eq!(err, GrowError::BelowOneChunk { chunk_sectors: 128 });
        let grows = plan_size(&plan(), &room, SizeTarget::Shrink(20000)).unwrap();
        assert_eq!((grows.new_size_sectors, grows.shrinks()), (19968, false));
        let mut dirty = plan();
        dirty.resync_offset_sectors = 0;
        let err = plan_size(&dirty, &room, SizeTarget::Shrink(8192)).unwrap_err();
        assert_eq!(err, GrowError::Dirty { resync_offset_sectors: 0 });
        let own = superblock(16384, 2048);
        assert_eq!(own.resync_offset_sectors, MAX_SECTOR);
        let sb = resized_superblock(&own, &change, 16384, 10, 77);
        assert_eq!((sb.size_sectors, sb.data_size_sectors), (8192, 16384));
        assert_eq!((sb.resync_offset_sectors, sb.events), (MAX_SECTOR, 10));
    }

    /// A plan of an array in the middle of a reshape (assembled to go on with it) takes no
    /// other change: found by the superblock fuzz target, whose takeover went ahead.
    #[test]
    fn nothing_but_going_on_changes_an_array_mid_reshape() {
        let mut reshaping = plan();
        reshaping.feature_map |= crate::feature::RESHAPE_ACTIVE;
        reshaping.spares.push(spare(3, "s3"));
        let err = plan_size(&reshaping, &room, SizeTarget::Max).unwrap_err();
        assert_eq!(err, GrowError::Reshaping);
        let roomy = |_: &PlannedMember| 1 << 20;
        let err = takeover::plan_takeover(&reshaping, Level::Raid6, None, &roomy).unwrap_err();
        assert_eq!(err, GrowError::Reshaping);
        let shape = reshape::NewShape {
            raid_disks: 4,
            layout: 2,
            chunk_sectors: 128,
            ..Default::default()
        };
        let space = |_: &PlannedMember| reshape::MemberSpace {
            metadata_end_sectors: 80,
            avail_sectors: 1 << 20,
            lists_bad_blocks: false,
        };
        let err = reshape::plan_reshape(&reshaping, shape, &space).unwrap_err();
        assert_eq!(err, GrowError::Reshaping);
        assert_eq!(refuse_unless_clean(&reshaping, true), Ok(()), "going on with it");
    }

    /// A clean RAID5 of three members created without a bitmap (as the VM's were): member 0's
    /// superblock.
    pub(super) fn superblock(size_sectors: u64, data_offset_sectors: u64) -> Superblock1 {
        use crate::create::{NewArray, NewMember, build_superblock};
        let array = NewArray {
            set_uuid: Uuid([2; 16]),
            name: "g",
            level: Level::Raid5,
            layout: 2,
            chunk_sectors: 128,
            raid_disks: 3,
            size_sectors,
            data_offset_sectors,
            ctime_seconds: 5,
            utime_seconds: 5,
            events: 1,
            clean: true,
            internal_bitmap: false,
        };
        let roles = [DevRole::Active(0), DevRole::Active(1), DevRole::Active(2)];
        let member = NewMember {
            dev_number: 0,
            device_uuid: Uuid([3; 16]),
            device_sectors: size_sectors + data_offset_sectors,
            dev_roles: &roles,
        };
        build_superblock(&array, &member).unwrap()
    }

    #[test]
    fn a_grown_superblock_resyncs_from_the_old_size_and_keeps_the_mark() {
        let mut own = superblock(16384, 2048);
        own.utime |= 0xff_ffff << 40;
        let change = SizeChange {
            old_size_sectors: 16384,
            new_size_sectors: 47104,
            max_size_sectors: 47104,
        };
        let sb = resized_superblock(&own, &change, 47104, 5, 77);
        assert_eq!((sb.size_sectors, sb.data_size_sectors), (47104, 47104));
        assert_eq!((sb.resync_offset_sectors, sb.events), (16384, 5));
        assert_eq!((sb.utime >> 40, sb.utime_seconds()), (0xff_ffff, 77));
        assert_eq!(sb.checksum(), sb.sb_csum);
        let decoded = Superblock1::decode(&sb.encode()).unwrap();
        assert_eq!(decoded.device_uuid, own.device_uuid);
        assert_eq!(decoded.dev_roles, own.dev_roles);
    }
}
