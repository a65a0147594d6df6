//! md's `handle_stripe_fill` for reads: which blocks to read so that the wanted data blocks
//! can be returned. A wanted block on a healthy member is read directly; one on a failed member
//! is rebuilt from the surviving data and as little parity as possible (P alone for one missing
//! block, so a degraded RAID6 read never touches Q unless P is gone too).

use super::{PlanError, StripeView, to_read};
use crate::units::DiskIndex;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadPlan {
    /// Member blocks to read.
    pub reads: Vec<DiskIndex>,
    /// Wanted data blocks on failed members, rebuilt from the reads.
    pub rebuild: Vec<DiskIndex>,
}

/// Plans reading the data blocks on the members in `wanted`.
pub fn plan_read(view: &StripeView<'_>, wanted: &[DiskIndex]) -> Result<ReadPlan, PlanError> {
    view.check()?;
    let rebuild: Vec<DiskIndex> = wanted
        .iter()
        .copied()
        .filter(|d| view.blocks[d.get()].failed && !view.blocks[d.get()].uptodate)
        .collect();
    if rebuild.is_empty() {
        return Ok(ReadPlan { reads: to_read(view, wanted.iter().copied()), rebuild });
    }
    // Rebuilding any one block needs every surviving data block; every failed data block is
    // then rebuilt too (the parity covers them all), so read the stripe once.
    let missing = view.data().filter(|(_, b)| b.failed).count();
    let data = view.data().filter(|(_, b)| !b.failed).map(|(d, _)| d);
    let reads = to_read(view, data.chain(view.parity_to_rebuild(missing)));
    Ok(ReadPlan { reads, rebuild })
}
