//! md's `handle_stripe_dirtying`: how to bring a stripe's parity up to date for the blocks being
//! written, with the fewest member reads.
//!
//! * Full-stripe write: every data block is wholly overwritten; parity comes from the new data
//!   alone and nothing is read.
//! * Read-modify-write (rmw): read the old contents of the blocks being written and the parity,
//!   and update the parity by the difference. RAID6 updates P and Q this way too (the partial
//!   syndrome update), so a one-block write reads that block, P and Q at any width.
//! * Reconstruct-write (rcw): read the data blocks not being wholly overwritten, and compute the
//!   parity from all the data.
//!
//! Costs are counted per plan and the cheaper one wins. On a tie we take rmw (md takes rcw):
//! the same I/O, and only the changed blocks enter the parity computation.

use super::{Cover, PlanError, StripeView, to_read};
use crate::units::DiskIndex;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteMethod {
    /// All data blocks wholly overwritten: no reads.
    FullStripe,
    #[doc(alias = "rmw")]
    ReadModifyWrite,
    #[doc(alias = "rcw")]
    ReconstructWrite,
    /// A data block that reconstruct-write needs is on a failed member and rmw is impossible:
    /// rebuild it from the survivors first (md's compute-before-write), then reconstruct-write.
    DegradedReconstructWrite,
    /// No parity member survives: write the data and compute nothing; read only the rest of
    /// blocks written in part.
    DataOnly,
}

/// What a write to the stripe needs: member blocks to read first, blocks to write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WritePlan {
    pub method: WriteMethod,
    pub reads: Vec<DiskIndex>,
    /// The written data blocks and the parity, on surviving members.
    pub writes: Vec<DiskIndex>,
}

/// Plans bringing the stripe's blocks and parity up to date for its pending writes.
pub fn plan_write(view: &StripeView<'_>) -> Result<WritePlan, PlanError> {
    plan_write_with(view, true)
}

/// As `plan_write`, but never read-modify-write: for a stripe whose parity could not be read
/// (a read error), so that parity is computed from the data and rewritten whole (md's
/// read-error correction) instead of being left stale.
pub fn plan_write_without_rmw(view: &StripeView<'_>) -> Result<WritePlan, PlanError> {
    plan_write_with(view, false)
}

fn plan_write_with(view: &StripeView<'_>, allow_rmw: bool) -> Result<WritePlan, PlanError> {
    view.check()?;
    let written: Vec<(DiskIndex, Cover, bool)> = view
        .data()
        .filter(|(_, b)| b.towrite != Cover::None)
        .map(|(d, b)| (d, b.towrite, b.failed))
        .collect();
    let live_parity: Vec<DiskIndex> =
        view.parity().filter(|(_, b)| !b.failed).map(|(d, _)| d).collect();
    let mut writes: Vec<DiskIndex> = written
        .iter()
        .filter(|(_, _, failed)| !failed)
        .map(|(d, _, _)| *d)
        .chain(live_parity.iter().copied())
        .collect();
    writes.sort_unstable();
    let plan = |method, reads| Ok(WritePlan { method, reads, writes: writes.clone() });

    if written.is_empty() {
        return Ok(WritePlan {
            method: WriteMethod::FullStripe,
            reads: Vec::new(),
            writes: Vec::new(),
        });
    }
    if live_parity.is_empty() {
        // A block written in part is written whole: the rest of it must be read first.
        let reads = view
            .data()
            .filter(|(_, b)| b.towrite == Cover::Partial && !b.failed && !b.uptodate)
            .map(|(d, _)| d)
            .collect();
        return plan(WriteMethod::DataOnly, reads);
    }
    if view.data().all(|(_, b)| b.towrite == Cover::Full) {
        return plan(WriteMethod::FullStripe, Vec::new());
    }
    let rmw = if allow_rmw { rmw_reads(view, &written, &live_parity) } else { None };
    match (rmw, rcw_reads(view)) {
        (Some(rmw), Some(rcw)) if rmw.len() <= rcw.len() => plan(WriteMethod::ReadModifyWrite, rmw),
        (_, Some(rcw)) => plan(WriteMethod::ReconstructWrite, rcw),
        (Some(rmw), None) => plan(WriteMethod::ReadModifyWrite, rmw),
        (None, None) => plan(WriteMethod::DegradedReconstructWrite, degraded_rcw_reads(view)),
    }
}

/// Old contents of every written block and of the surviving parity; impossible when a written
/// block's member has failed (its old contents are gone).
fn rmw_reads(
    view: &StripeView<'_>,
    written: &[(DiskIndex, Cover, bool)],
    live_parity: &[DiskIndex],
) -> Option<Vec<DiskIndex>> {
    if written.iter().any(|(_, _, failed)| *failed) {
        return None;
    }
    Some(to_read(view, written.iter().map(|(d, _, _)| *d).chain(live_parity.iter().copied())))
}

/// Every data block not wholly overwritten; impossible when one of them is on a failed member.
fn rcw_reads(view: &StripeView<'_>) -> Option<Vec<DiskIndex>> {
    let needed: Vec<_> =
        view.data().filter(|(_, b)| b.towrite != Cover::Full && !b.uptodate).collect();
    if needed.iter().any(|(_, b)| b.failed) {
        return None;
    }
    Some(to_read(view, needed.into_iter().map(|(d, _)| d)))
}

/// Every surviving data block (old contents, to rebuild the failed ones that are not wholly
/// overwritten) and the parity that the rebuild needs.
fn degraded_rcw_reads(view: &StripeView<'_>) -> Vec<DiskIndex> {
    let missing = view.data().filter(|(_, b)| b.failed).count();
    let data = view.data().filter(|(_, b)| !b.failed).map(|(d, _)| d);
    to_read(view, data.chain(view.parity_to_rebuild(missing)))
}
