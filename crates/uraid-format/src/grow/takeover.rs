//! md's takeovers among RAID4, 5 and 6: level changes that move no data, only the superblocks
//! (raid5.c `raid6_takeover`, `raid5_takeover`, `raid4_takeover`; mdadm --grow --level).
//!
//! * RAID4 or RAID5 to RAID6 by one more member (mdadm's `--layout=preserve`): RAID6's `-6`
//!   layouts are RAID5's on the first members with Q on the last (`ALGORITHM_LEFT_SYMMETRIC_6`
//!   and its kin; RAID4 and parity-last RAID5 become `ALGORITHM_PARITY_N`, P and Q the last
//!   two), so the new member is rebuilt as Q, as md recovers a spare. mdadm without
//!   `--layout=preserve` would go on to restripe to the rotating layout; here that is
//!   `uraid grow --layout` once Q is built.
//! * RAID6 in a `-6` layout or parity-last to RAID5 by one member fewer: the member in the
//!   last slot held only Q and leaves as a spare (md's `raid5_takeover_raid6`).
//! * RAID4 to RAID5 parity-last, and back: one layout on disk under two names.
//!
//! mdadm restripes first where the layout has no such kin (RAID6 rotating to its `-6` layout,
//! RAID5 to parity-last for RAID4): [`restripe_before`] names that layout, and the caller
//! reshapes to it before taking over.

use super::GrowError;
use crate::assemble::{AssemblyPlan, PlannedMember};
use crate::dev_roles::DevRole;
use crate::feature;
use crate::level::Level;
use crate::superblock::Superblock1;

/// md's layout numbers the takeovers go through (`raid5.h`'s `ALGORITHM_*`).
const PARITY_0: u32 = 4;
const PARITY_N: u32 = 5;
const PARITY_0_6: u32 = 20;
/// `ALGORITHM_LEFT_ASYMMETRIC_6` .. `ALGORITHM_RIGHT_SYMMETRIC_6`: RAID5's rotating 0..=3 plus
/// this.
const TO_6: u32 = 16;

/// What a takeover does to the members' slots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SlotChange {
    /// To RAID6: this spare takes the new last slot and is rebuilt as Q.
    AddsQ(PlannedMember),
    /// From RAID6: the member of the last slot (Q) leaves the array as a spare.
    DropsQ(PlannedMember),
    /// RAID4 and parity-last RAID5: the same members in the same slots.
    Keeps,
}

/// A takeover decided: the new level, layout and member count, and what moves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Takeover {
    pub level: Level,
    pub layout: u32,
    pub raid_disks: u32,
    pub slots: SlotChange,
}

/// A RAID5 layout's RAID6 kin with Q on the last member (md's `-6` layouts; parity-last is
/// its own kin, P and Q the last two).
#[must_use]
pub fn q_last_kin(raid5_layout: u32) -> Option<u32> {
    match raid5_layout {
        rotating @ 0..=3 => Some(TO_6 + rotating),
        PARITY_0 => Some(PARITY_0_6),
        PARITY_N => Some(PARITY_N),
        _ => None,
    }
}

/// The layout mdadm restripes `plan` to before taking it over to `level`, where its own has
/// no kin there: for RAID5, the `-6` kin of `raid5_layout` (mdadm's `--layout`) or, without
/// one, of the RAID6's own rotating or parity-first layout; parity-last for a RAID5 going to
/// RAID4. `None` where the takeover needs no restripe (or has none to offer: [`plan_takeover`]
/// says why).
#[must_use]
pub fn restripe_before(
    plan: &AssemblyPlan,
    level: Level,
    raid5_layout: Option<u32>,
) -> Option<u32> {
    let to = match (plan.level, level) {
        (Level::Raid6, Level::Raid5) => match raid5_layout {
            Some(layout) => q_last_kin(layout)?,
            None => q_last_kin(plan.layout).unwrap_or(plan.layout),
        },
        (Level::Raid5, Level::Raid4) => PARITY_N,
        _ => return None,
    };
    (to != plan.layout).then_some(to)
}

/// The layout a takeover is restriped to after, where mdadm's `--layout` asks for another
/// than the takeover gives: a RAID4 taken over to RAID5 (parity-last), or a RAID4 or RAID5
/// taken over to RAID6 (its `-6` kin) in one pass with the new Q member's building
/// ([`q_built_by_restripe`]), as mdadm's `--grow --level=6` without `--layout=preserve`.
#[must_use]
pub fn restripe_after(plan: &AssemblyPlan, level: Level, layout: Option<u32>) -> Option<u32> {
    let taken_over = taken_over_shape(plan, level).map(|(layout, _)| layout);
    match (plan.level, level, layout) {
        (Level::Raid4, Level::Raid5, Some(layout)) if layout != PARITY_N => Some(layout),
        (Level::Raid4 | Level::Raid5, Level::Raid6, Some(layout)) => {
            (Some(layout) != taken_over).then_some(layout)
        }
        _ => None,
    }
}

/// The member a reshape of `plan` builds as it goes, when it is a restripe (`keeps_members`:
/// the same members before and after): a RAID6 with Q on its last member (a `-6` layout or
/// parity-last: the takeover's) whose Q member is still being built (md's recovery offset),
/// everything else whole and in sync. That member holds only Q, so the copy never reads it,
/// and it writes every new chunk of every member: when it ends, Q is built too (mdadm's
/// one-pass RAID5 -> RAID6). `None` otherwise.
#[must_use]
pub fn q_built_by_restripe(plan: &AssemblyPlan, keeps_members: bool) -> Option<&PlannedMember> {
    if !keeps_members {
        return None;
    }
    let q_last = matches!(plan.layout, TO_6..=PARITY_0_6 | PARITY_N);
    let (q, others) = plan.slots.split_last()?;
    let q = q.as_ref().filter(|q| q.recovery_offset_sectors.is_some())?;
    let whole =
        others.iter().all(|m| m.as_ref().is_some_and(|m| m.recovery_offset_sectors.is_none()));
    (plan.level == Level::Raid6 && q_last && whole && plan.replacements.is_empty()).then_some(q)
}

/// `plan` as the refusals of a reshape see it: the Q member a restripe builds
/// ([`q_built_by_restripe`]) counts as in sync.
#[must_use]
pub fn with_q_built(
    plan: &AssemblyPlan,
    keeps_members: bool,
) -> std::borrow::Cow<'_, AssemblyPlan> {
    let Some(q) = q_built_by_restripe(plan, keeps_members) else {
        return std::borrow::Cow::Borrowed(plan);
    };
    let candidate = q.candidate;
    let mut built = plan.clone();
    for m in built.slots.iter_mut().flatten().filter(|m| m.candidate == candidate) {
        m.recovery_offset_sectors = None;
    }
    std::borrow::Cow::Owned(built)
}

/// The layout and member count md's takeover of `plan` to `level` gives, if it has one.
fn taken_over_shape(plan: &AssemblyPlan, level: Level) -> Option<(u32, u32)> {
    let n = plan.raid_disks;
    Some(match (plan.level, plan.layout, level) {
        (Level::Raid4, _, Level::Raid6) | (Level::Raid5, PARITY_N, Level::Raid6) => {
            (PARITY_N, n + 1)
        }
        (Level::Raid5, PARITY_0, Level::Raid6) => (PARITY_0_6, n + 1),
        (Level::Raid5, rotating @ 0..=3, Level::Raid6) => (TO_6 + rotating, n + 1),
        (Level::Raid6, PARITY_N, Level::Raid5) => (PARITY_N, n - 1),
        (Level::Raid6, PARITY_0_6, Level::Raid5) => (PARITY_0, n - 1),
        (Level::Raid6, q_last @ TO_6..=19, Level::Raid5) => (q_last - TO_6, n - 1),
        (Level::Raid4, _, Level::Raid5) => (PARITY_N, n),
        (Level::Raid5, PARITY_N, Level::Raid4) => (0, n),
        _ => return None,
    })
}

/// Decides md's takeover of `plan` to `level`, with `asked_raid_disks` if given (it must be
/// what the takeover gives). To RAID6 the first spare given takes the new slot;
/// `avail_sectors` says what it holds past its data offset.
pub fn plan_takeover(
    plan: &AssemblyPlan,
    level: Level,
    asked_raid_disks: Option<u32>,
    avail_sectors: &dyn Fn(&PlannedMember) -> u64,
) -> Result<Takeover, GrowError> {
    super::refuse_unless_reshapable(plan)?;
    let (from, to) = (plan.level.to_md(), level.to_md());
    let Some((layout, raid_disks)) = taken_over_shape(plan, level) else {
        return Err(GrowError::NoTakeover { level: from, layout: plan.layout, to });
    };
    if let Some(asked) = asked_raid_disks.filter(|&asked| asked != raid_disks) {
        return Err(GrowError::TakeoverMembers { from, to, raid_disks, asked });
    }
    let slots = match level {
        Level::Raid6 => SlotChange::AddsQ(q_spare(plan, avail_sectors)?.clone()),
        _ if raid_disks < plan.raid_disks => {
            let last = plan.slots.last().and_then(Option::as_ref);
            SlotChange::DropsQ(last.expect("a whole array holds its last slot").clone())
        }
        _ => SlotChange::Keeps,
    };
    Ok(Takeover { level, layout, raid_disks, slots })
}

/// The spare that becomes Q: the first given, holding the array's data where its members do.
fn q_spare<'p>(
    plan: &'p AssemblyPlan,
    avail_sectors: &dyn Fn(&PlannedMember) -> u64,
) -> Result<&'p PlannedMember, GrowError> {
    let q_member = plan.spares.first().ok_or(GrowError::TooFewSpares { needed: 1, spares: 0 })?;
    // uraid serves members whose data starts at one offset (md would not mind).
    let offset = plan.slots.iter().flatten().map(|m| m.data_offset_sectors).next();
    if let Some(array_sectors) = offset.filter(|&o| o != q_member.data_offset_sectors) {
        let (member, spare_sectors) = (q_member.name.clone(), q_member.data_offset_sectors);
        return Err(GrowError::SpareOffset { member, spare_sectors, array_sectors });
    }
    let avail = avail_sectors(q_member);
    if avail < plan.size_sectors {
        let (member, new_sectors) = (q_member.name.clone(), plan.size_sectors);
        return Err(GrowError::SpareTooSmall { member, avail_sectors: avail, new_sectors });
    }
    Ok(q_member)
}

/// A member's superblock after the takeover: the new level, layout and member count; a new
/// Q member in the last slot, rebuilt from its start (its own says so: md's recovery
/// offset), or the old Q member a spare.
#[must_use]
pub fn taken_over_superblock(
    own: &Superblock1,
    t: &Takeover,
    events: u64,
    utime_seconds: u64,
) -> Superblock1 {
    let mut sb = own.clone();
    sb.level = t.level;
    sb.layout = t.layout;
    (sb.new_level, sb.new_layout) = (t.level.to_md(), t.layout);
    sb.raid_disks = t.raid_disks;
    match &t.slots {
        SlotChange::AddsQ(q) => {
            let q_slot = u16::try_from(t.raid_disks - 1).expect("at most 256 members");
            if let Some(role) = sb.dev_roles.get_mut(q.dev_number as usize) {
                *role = DevRole::Active(q_slot);
            }
            if own.dev_number == q.dev_number {
                sb.feature_map |= feature::RECOVERY_OFFSET;
                sb.recovery_offset_sectors = 0;
            }
        }
        SlotChange::DropsQ(q) => {
            if let Some(role) = sb.dev_roles.get_mut(q.dev_number as usize) {
                *role = DevRole::Spare;
            }
        }
        SlotChange::Keeps => {}
    }
    super::stamp(&mut sb, events, utime_seconds);
    sb
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DevRole;
    use crate::grow::tests::{member, plan, spare, superblock};

    fn roomy(_: &PlannedMember) -> u64 {
        1 << 20
    }

    #[test]
    fn raid5_layouts_become_their_q_last_kin_and_the_spare_q() {
        let mut p = plan();
        p.spares = vec![spare(3, "s3"), spare(4, "s4")];
        for (raid5, raid6) in [(0, 16), (2, 18), (3, 19), (4, 20), (5, 5)] {
            p.layout = raid5;
            let t = plan_takeover(&p, Level::Raid6, None, &roomy).unwrap();
            assert_eq!((t.layout, t.raid_disks), (raid6, 4));
            assert_eq!(restripe_before(&p, Level::Raid6, None), None);
        }
        p.level = Level::Raid4;
        let t = plan_takeover(&p, Level::Raid6, Some(4), &roomy).unwrap();
        assert_eq!(t.layout, 5, "P and Q last");
        (p.level, p.layout) = (Level::Raid5, 2);
        let t = plan_takeover(&p, Level::Raid6, None, &roomy).unwrap();
        assert!(matches!(&t.slots, SlotChange::AddsQ(q) if q.name == "s3"), "{t:?}");
        let own = superblock(16384, 2048);
        let after = taken_over_superblock(&own, &t, 10, 7);
        assert_eq!((after.level, after.layout, after.raid_disks), (Level::Raid6, 18, 4));
        assert_eq!(after.dev_roles[3], DevRole::Active(3));
        assert_eq!(after.feature_map & feature::RECOVERY_OFFSET, 0, "not the new member");
        let mut q = own.clone();
        q.dev_number = 3;
        let q = taken_over_superblock(&q, &t, 10, 7);
        assert_eq!((q.feature_map & feature::RECOVERY_OFFSET, q.recovery_offset_sectors), (2, 0));
        assert_eq!(q.checksum(), q.sb_csum);
    }

    /// A RAID6 of 4 in the plan's slots, in md's layout `layout`.
    fn raid6(layout: u32) -> AssemblyPlan {
        let mut p = plan();
        (p.level, p.layout, p.raid_disks) = (Level::Raid6, layout, 4);
        p.slots.push(Some(member(3, "m3")));
        p
    }

    #[test]
    fn raid6_with_q_last_becomes_raid5_and_q_a_spare() {
        for (q_last, raid5) in [(16, 0), (17, 1), (18, 2), (19, 3), (20, 4), (5, 5)] {
            let p = raid6(q_last);
            assert_eq!(restripe_before(&p, Level::Raid5, None), None, "{q_last}");
            let t = plan_takeover(&p, Level::Raid5, None, &roomy).unwrap();
            assert_eq!((t.level, t.layout, t.raid_disks), (Level::Raid5, raid5, 3));
            assert!(matches!(&t.slots, SlotChange::DropsQ(q) if q.name == "m3"), "{t:?}");
        }
        let t = plan_takeover(&raid6(18), Level::Raid5, Some(3), &roomy).unwrap();
        let mut own = superblock(16384, 2048);
        own.dev_roles = (0..4).map(DevRole::Active).collect();
        own.dev_number = 3;
        let after = taken_over_superblock(&own, &t, 10, 7);
        assert_eq!((after.level, after.layout, after.raid_disks), (Level::Raid5, 2, 3));
        assert_eq!(
            after.dev_roles,
            [0, 1, 2].map(DevRole::Active).into_iter().chain([DevRole::Spare]).collect::<Vec<_>>()
        );
        assert_eq!(after.feature_map & feature::RECOVERY_OFFSET, 0);
        assert_eq!(after.checksum(), after.sb_csum);
        // mdadm's restripe first: the rotating layouts and parity-first to their `-6` kin.
        for (rotating, q_last) in [(0, 16), (1, 17), (2, 18), (3, 19), (4, 20)] {
            assert_eq!(restripe_before(&raid6(rotating), Level::Raid5, None), Some(q_last));
            let err = plan_takeover(&raid6(rotating), Level::Raid5, None, &roomy).unwrap_err();
            assert!(matches!(err, GrowError::NoTakeover { to: 5, .. }), "{err}");
        }
        // DDF layouts have none.
        assert_eq!(restripe_before(&raid6(8), Level::Raid5, None), None);
        // mdadm's --layout: the RAID5 layout asked's kin, unless the RAID6 is in it already.
        assert_eq!(restripe_before(&raid6(2), Level::Raid5, Some(0)), Some(16));
        assert_eq!(restripe_before(&raid6(18), Level::Raid5, Some(1)), Some(17));
        assert_eq!(restripe_before(&raid6(18), Level::Raid5, Some(2)), None);
        assert_eq!(restripe_before(&raid6(2), Level::Raid5, Some(5)), Some(5), "parity-last");
        assert!(plan_takeover(&raid6(8), Level::Raid5, None, &roomy).is_err());
    }

    #[test]
    fn raid4_and_parity_last_raid5_change_names_only() {
        let mut p = plan();
        p.level = Level::Raid4;
        let t = plan_takeover(&p, Level::Raid5, None, &roomy).unwrap();
        assert_eq!(
            t,
            Takeover { level: Level::Raid5, layout: 5, raid_disks: 3, slots: SlotChange::Keeps }
        );
        (p.level, p.layout) = (Level::Raid5, 5);
        let t = plan_takeover(&p, Level::Raid4, Some(3), &roomy).unwrap();
        assert_eq!((t.level, t.layout, &t.slots), (Level::Raid4, 0, &SlotChange::Keeps));
        let after = taken_over_superblock(&superblock(16384, 2048), &t, 10, 7);
        assert_eq!((after.level, after.layout, after.raid_disks), (Level::Raid4, 0, 3));
        // Other RAID5 layouts restripe to parity-last first, as mdadm does.
        p.layout = 2;
        assert_eq!(restripe_before(&p, Level::Raid4, None), Some(5));
        assert!(plan_takeover(&p, Level::Raid4, None, &roomy).is_err());
        p.layout = 5;
        assert_eq!(restripe_before(&p, Level::Raid4, None), None);
        // RAID4 to RAID5 in another layout: parity-last first, then the restripe.
        p.level = Level::Raid4;
        assert_eq!(restripe_after(&p, Level::Raid5, Some(0)), Some(0));
        assert_eq!(restripe_after(&p, Level::Raid5, Some(5)), None);
        assert_eq!(restripe_after(&p, Level::Raid5, None), None);
        p.level = Level::Raid5;
        // Not RAID6 to RAID4 (mdadm neither), nor a level to itself.
        assert!(plan_takeover(&raid6(5), Level::Raid4, None, &roomy).is_err());
        assert!(plan_takeover(&p, Level::Raid5, None, &roomy).is_err());
    }

    #[test]
    fn what_md_does_not_take_over_says_why() {
        let mut p = plan();
        let to6 = |p: &AssemblyPlan, n, avail: &dyn Fn(&PlannedMember) -> u64| {
            plan_takeover(p, Level::Raid6, n, avail)
        };
        assert!(matches!(to6(&p, None, &roomy), Err(GrowError::TooFewSpares { .. })));
        p.spares = vec![spare(3, "s3")];
        let err = to6(&p, Some(5), &roomy).unwrap_err();
        assert_eq!(err, GrowError::TakeoverMembers { from: 5, to: 6, raid_disks: 4, asked: 5 });
        let small = |_: &PlannedMember| 100;
        assert!(matches!(to6(&p, None, &small), Err(GrowError::SpareTooSmall { .. })));
        p.spares[0].data_offset_sectors = 4096;
        let err = to6(&p, None, &roomy).unwrap_err();
        assert!(matches!(err, GrowError::SpareOffset { spare_sectors: 4096, .. }), "{err}");
        p.spares[0].data_offset_sectors = 2048;
        let err = to6(&raid6(18), None, &roomy).unwrap_err();
        assert!(matches!(err, GrowError::NoTakeover { level: 6, to: 6, .. }), "{err}");
        let err = plan_takeover(&raid6(18), Level::Raid5, Some(4), &roomy).unwrap_err();
        assert!(err.to_string().contains("3 members"), "{err}");
        p.feature_map |= feature::PPL;
        assert_eq!(to6(&p, None, &roomy), Err(GrowError::MdPplReshape));
    }
}
