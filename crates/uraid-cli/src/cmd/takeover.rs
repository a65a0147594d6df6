//! `uraid grow --level 6`: a stopped RAID4 or RAID5 taken over to RAID6 by one more member,
//! as md does with mdadm's `--layout=preserve` (`uraid_format::grow::takeover`): nothing
//! moves, the superblocks say RAID6 in the `-6` layout, and the next `uraid serve` (or the
//! kernel) builds Q on the new member as it rebuilds a spare.

use crate::cmd::grow::{Stopped, now_seconds, write_synced};
use crate::cmd::md_meta::SUPERBLOCK_OFFSET_BYTES;
use crate::cmd::reshape::BitmapStamp;
use anyhow::Context as _;
use uraid_core::{Geometry, Layout, Level, SECTOR_BYTES};
use uraid_format::assemble::PlannedMember;
use uraid_format::grow::takeover::{Takeover, plan_takeover, taken_over_superblock};

/// Takes `stopped` over to RAID6 with `raid_disks` members (one more than it has).
pub(crate) fn run(stopped: &Stopped, raid_disks: u32) -> anyhow::Result<Takeover> {
    let plan = &stopped.plan;
    let grown = stopped.members()?;
    let avail = |m: &PlannedMember| {
        let g = grown.iter().find(|g| g.member.candidate == m.candidate).expect("planned");
        g.avail_sectors
    };
    let t = plan_takeover(plan, raid_disks, &avail)?;
    // Before anything is written: a RAID6 the geometry refuses (fewer than 4 or more than 256
    // members) is never recorded.
    let layout = Layout::from_md(Level::Raid6, t.layout)?;
    let chunk_bytes = u64::from(plan.chunk_sectors) * SECTOR_BYTES;
    Geometry::new(Level::Raid6, layout, t.raid_disks as usize, chunk_bytes)?;
    // Every member and spare: the roles table and the event count are the array's.
    let events = plan.events + 1;
    BitmapStamp::new(plan, &grown)?.write(&grown, events)?;
    let now = now_seconds();
    for g in &grown {
        let sb = taken_over_superblock(&g.own, &t, events, now);
        write_synced(g, &sb.encode(), SUPERBLOCK_OFFSET_BYTES).context("writing the superblock")?;
    }
    Ok(t)
}
