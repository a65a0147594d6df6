//! RAID4 or RAID5 to RAID6 by one more member (mdadm --grow --level=6 --raid-devices=N+1
//! --layout=preserve): md's takeover. The data stays where it is: RAID6's `-6` layouts are
//! RAID5's on the first members with Q on the last (`ALGORITHM_LEFT_SYMMETRIC_6` and its
//! kin; RAID4 and parity-last RAID5 become `ALGORITHM_PARITY_N`, P and Q the last two), so
//! the superblocks change and the new member is rebuilt as Q, as md recovers a spare. mdadm
//! without `--layout=preserve` would go on to restripe to the rotating layout; here that is
//! `uraid grow --layout` once Q is built.

use super::GrowError;
use crate::assemble::{AssemblyPlan, PlannedMember};
use crate::dev_roles::DevRole;
use crate::feature;
use crate::level::Level;
use crate::superblock::Superblock1;

/// md's RAID6 layout numbers for a RAID5 one taken over (`raid5.c` `raid6_takeover`).
const PARITY_0: u32 = 4;
const PARITY_N: u32 = 5;
const PARITY_0_6: u32 = 20;
const TO_6: u32 = 16;

/// A takeover decided: the new layout, and the spare that takes the new slot as Q.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Takeover {
    pub layout: u32,
    pub raid_disks: u32,
    pub q_member: PlannedMember,
}

/// Decides md's takeover of `plan` to RAID6 with `raid_disks` members: the first spare given
/// takes the new slot; `avail_sectors` says what it holds past its data offset.
pub fn plan_takeover(
    plan: &AssemblyPlan,
    raid_disks: u32,
    avail_sectors: &dyn Fn(&PlannedMember) -> u64,
) -> Result<Takeover, GrowError> {
    super::refuse_unless_whole_and_clean(plan)?;
    if plan.feature_map & feature::PPL != 0 {
        return Err(GrowError::MdPpl);
    }
    let layout = match (plan.level, plan.layout) {
        (Level::Raid4, _) | (Level::Raid5, PARITY_N) => PARITY_N,
        (Level::Raid5, PARITY_0) => PARITY_0_6,
        (Level::Raid5, rotating @ 0..=3) => TO_6 + rotating,
        (level, layout) => return Err(GrowError::NoTakeover { level: level.to_md(), layout }),
    };
    if raid_disks != plan.raid_disks + 1 {
        return Err(GrowError::TakeoverMembers { current: plan.raid_disks, asked: raid_disks });
    }
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
    Ok(Takeover { layout, raid_disks, q_member: q_member.clone() })
}

/// A member's superblock after the takeover: RAID6 in the `-6` layout, the new member in the
/// last slot, rebuilt from its start (its own says so: md's recovery offset).
#[must_use]
pub fn taken_over_superblock(
    own: &Superblock1,
    t: &Takeover,
    events: u64,
    utime_seconds: u64,
) -> Superblock1 {
    let mut sb = own.clone();
    sb.level = Level::Raid6;
    sb.layout = t.layout;
    (sb.new_level, sb.new_layout) = (Level::Raid6.to_md(), t.layout);
    sb.raid_disks = t.raid_disks;
    let q_slot = u16::try_from(t.raid_disks - 1).expect("at most 256 members");
    if let Some(role) = sb.dev_roles.get_mut(t.q_member.dev_number as usize) {
        *role = DevRole::Active(q_slot);
    }
    if own.dev_number == t.q_member.dev_number {
        sb.feature_map |= feature::RECOVERY_OFFSET;
        sb.recovery_offset_sectors = 0;
    }
    super::stamp(&mut sb, events, utime_seconds);
    sb
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DevRole;
    use crate::grow::tests::{plan, spare, superblock};

    #[test]
    fn raid5_layouts_become_their_q_last_kin_and_the_spare_q() {
        let mut p = plan();
        p.spares = vec![spare(3, "s3"), spare(4, "s4")];
        let roomy = |_: &PlannedMember| 1 << 20;
        for (raid5, raid6) in [(0, 16), (2, 18), (3, 19), (4, 20), (5, 5)] {
            p.layout = raid5;
            assert_eq!(plan_takeover(&p, 4, &roomy).unwrap().layout, raid6);
        }
        p.level = Level::Raid4;
        assert_eq!(plan_takeover(&p, 4, &roomy).unwrap().layout, 5, "P and Q last");
        (p.level, p.layout) = (Level::Raid5, 2);
        let t = plan_takeover(&p, 4, &roomy).unwrap();
        assert_eq!((t.q_member.name.as_str(), t.raid_disks), ("s3", 4));
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

    #[test]
    fn what_md_does_not_take_over_says_why() {
        let mut p = plan();
        let roomy = |_: &PlannedMember| 1 << 20;
        assert!(matches!(plan_takeover(&p, 4, &roomy), Err(GrowError::TooFewSpares { .. })));
        p.spares = vec![spare(3, "s3")];
        let err = plan_takeover(&p, 5, &roomy).unwrap_err();
        assert_eq!(err, GrowError::TakeoverMembers { current: 3, asked: 5 });
        let small = |_: &PlannedMember| 100;
        assert!(matches!(plan_takeover(&p, 4, &small), Err(GrowError::SpareTooSmall { .. })));
        p.spares[0].data_offset_sectors = 4096;
        let err = plan_takeover(&p, 4, &roomy).unwrap_err();
        assert!(matches!(err, GrowError::SpareOffset { spare_sectors: 4096, .. }), "{err}");
        p.spares[0].data_offset_sectors = 2048;
        p.level = Level::Raid6;
        assert!(matches!(plan_takeover(&p, 4, &roomy), Err(GrowError::NoTakeover { .. })));
    }
}
