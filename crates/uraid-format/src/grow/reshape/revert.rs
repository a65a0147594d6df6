//! Reverting a reshape in progress: mdadm's `--assemble --update=revert-reshape`, for the
//! reshape that was started by mistake. md's way (mdadm's super1.c `update_super1`), so that
//! the kernel takes a reverted reshape up as uraid does: the superblocks swap the old and new
//! shape (`raid_disks` back to the old count, `delta_disks` negated, layout and chunk
//! exchanged with `new_layout` and `new_chunk`), the data offset becomes the new one and
//! `new_offset` the way back, the usable size changes with the offset, and the direction
//! turns (`RESHAPE_BACKWARDS` for the same members; fewer members go backwards, more
//! forwards). The position stays: what lay past it in the old shape lies there still, what
//! was copied lies before it in the new, which is now the shape to copy from. Members added
//! keep their slots until the reverted reshape ends (they are read like removed ones), and
//! are spares after.
//!
//! The position must be a whole number of the reverted reshape's new stripes in the larger
//! chunk (the kernel's `raid5_run` refuses a reshape position off them; mdadm checks the new
//! chunk only and says to assemble and stop again): `revert_stripe_sectors`. A reshape that
//! has not moved anything (at its start position) is cancelled instead: no reshape, the old
//! shape, members added spares again (mdadm's `revert-reshape-nobackup` for a reshape not
//! started).

use super::{ReshapeProgress, mark_reshaped, mark_reshaping};
use crate::dev_roles::DevRole;
use crate::superblock::Superblock1;

/// Why a reshape cannot be reverted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RevertError {
    #[error("no reshape is in progress to revert")]
    NoReshape,
    #[error("{0}")]
    NotUraids(String),
    #[error(
        "the reshape is at array sector {position_sectors}, not a whole number of the \
         {stripe_sectors}-sector stripes it would go back to (in the larger chunk): copy on to \
         one first"
    )]
    Misaligned { position_sectors: u64, stripe_sectors: u64 },
}

/// What the position of the reshape `sb` records must be a whole number of to be reverted:
/// the old shape's data members times the larger chunk.
#[must_use]
pub fn revert_stripe_sectors(sb: &Superblock1, progress: &ReshapeProgress) -> u64 {
    let parity = sb.level.max_degraded();
    let chunk = sb.chunk_sectors.max(sb.new_chunk_sectors).max(1);
    u64::from(chunk) * u64::from(progress.old_raid_disks.saturating_sub(parity).max(1))
}

/// The reshape `own` records, reverted (or cancelled where nothing moved), with no event or
/// time stamped and not sealed: the caller stamps it.
///
/// # Errors
/// No reshape, one uraid does not take up, a position off the stripes it would go back to.
pub fn reverted(own: &Superblock1) -> Result<Superblock1, RevertError> {
    let progress =
        ReshapeProgress::of(own).map_err(RevertError::NotUraids)?.ok_or(RevertError::NoReshape)?;
    let mut sb = own.clone();
    let at = progress.position_sectors;
    sb.raid_disks = progress.old_raid_disks;
    if at == progress.start_sectors(own) {
        // Nothing moved: the old shape as it was, added members spares again.
        for role in &mut sb.dev_roles {
            if matches!(role, DevRole::Active(s) if u32::from(*s) >= progress.old_raid_disks) {
                *role = DevRole::Spare;
            }
        }
        // A reshape ended where it began: the old offset, layout and chunk.
        mark_reshaped(&mut sb, own.data_offset_sectors, (own.layout, own.chunk_sectors));
        return Ok(sb);
    }
    let stripe_sectors = revert_stripe_sectors(own, &progress);
    if !at.is_multiple_of(stripe_sectors) {
        return Err(RevertError::Misaligned { position_sectors: at, stripe_sectors });
    }
    let moved = own.new_offset_sectors;
    let (Some(back), Some(delta)) = (moved.checked_neg(), own.delta_disks.checked_neg()) else {
        return Err(RevertError::NotUraids(format!("a new offset of {moved} sectors")));
    };
    sb.data_offset_sectors = own.data_offset_sectors.saturating_add_signed(moved.into());
    sb.data_size_sectors = own.data_size_sectors.saturating_add_signed(-i64::from(moved));
    (sb.layout, sb.chunk_sectors) = (own.new_layout, own.new_chunk_sectors);
    let old_shape = (own.level.to_md(), own.layout, own.chunk_sectors);
    mark_reshaping(&mut sb, old_shape, delta, at, back);
    Ok(sb)
}
