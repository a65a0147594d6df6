//! Stripe heads: one `stripe_size` unit at the same offset of every member of one stripe, md's
//! unit of caching, parity computation and member I/O.
//!
//! This module holds the pure decisions md makes in `handle_stripe`: from what the stripe head
//! knows about each member's block (failed member, contents up to date, what is being written),
//! which blocks to read, compute and write. md's rule is "decide first, act at the end": these
//! functions only decide, and their plans are what the cache executes and the tests count.

mod cache;
mod dirtying;
mod fill;
mod head;
mod lru;

pub use cache::{
    CacheStats, HeadId, STRIPE_CACHE_SIZE_DEFAULT, STRIPE_CACHE_SIZE_MAX, StripeCache,
};
pub use dirtying::{WriteMethod, WritePlan, plan_write, plan_write_without_rmw};
pub use fill::{ReadPlan, plan_read};
pub use head::{DevIo, DevState, StripeHead, StripeKey};

use crate::geometry::{DiskRole, StripeMap};
use crate::layout::Level;
use crate::units::DiskIndex;
use thiserror::Error;

/// How much of a member's block a pending write covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Cover {
    #[default]
    None,
    /// Some sectors: the rest of the block must be known before parity can be computed.
    Partial,
    /// The whole block: its old contents are not needed for reconstruct-write.
    Full,
}

/// What a stripe head knows about one member's block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct BlockView {
    /// The member has failed (or is missing): its block can be neither read nor written.
    pub failed: bool,
    /// The cache holds the block's current on-disk contents (md's `R5_UPTODATE`).
    pub uptodate: bool,
    /// What pending writes cover (data blocks only).
    pub towrite: Cover,
}

#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PlanError {
    #[error("{failed} members of the stripe have failed but RAID{level} survives at most {max}")]
    BeyondRedundancy { level: u8, failed: usize, max: usize },
}

/// The stripe as the planners see it: the layout of its members and their blocks' states.
pub struct StripeView<'a> {
    pub level: Level,
    pub map: &'a StripeMap,
    /// Indexed by member.
    pub blocks: &'a [BlockView],
}

impl StripeView<'_> {
    fn check(&self) -> Result<(), PlanError> {
        assert_eq!(self.blocks.len(), self.map.roles.len(), "one block view per member");
        let failed = self.blocks.iter().filter(|b| b.failed).count();
        let max = usize::from(self.level.max_degraded());
        if failed > max {
            return Err(PlanError::BeyondRedundancy { level: self.level.number(), failed, max });
        }
        Ok(())
    }

    fn members(&self) -> impl Iterator<Item = (DiskIndex, DiskRole, BlockView)> + '_ {
        self.map
            .roles
            .iter()
            .zip(self.blocks)
            .enumerate()
            .map(|(i, (r, b))| (DiskIndex(u16::try_from(i).expect("members fit in u16")), *r, *b))
    }

    fn data(&self) -> impl Iterator<Item = (DiskIndex, BlockView)> + '_ {
        self.members()
            .filter(|(_, r, _)| matches!(r, DiskRole::Data { .. }))
            .map(|(d, _, b)| (d, b))
    }

    /// P and Q members (those the level has).
    fn parity(&self) -> impl Iterator<Item = (DiskIndex, BlockView)> + '_ {
        self.members()
            .filter(|(_, r, _)| matches!(r, DiskRole::P | DiskRole::Q))
            .map(|(d, _, b)| (d, b))
    }

    fn p(&self) -> Option<(DiskIndex, BlockView)> {
        self.members().find(|(_, r, _)| *r == DiskRole::P).map(|(d, _, b)| (d, b))
    }

    fn q(&self) -> Option<(DiskIndex, BlockView)> {
        self.members().find(|(_, r, _)| *r == DiskRole::Q).map(|(d, _, b)| (d, b))
    }

    /// The parity blocks needed, besides all surviving data, to rebuild `missing` data blocks:
    /// P for one (Q if P is gone too), P and Q for two.
    fn parity_to_rebuild(&self, missing: usize) -> Vec<DiskIndex> {
        let alive =
            |m: Option<(DiskIndex, BlockView)>| m.filter(|(_, b)| !b.failed).map(|(d, _)| d);
        match missing {
            0 => Vec::new(),
            1 => alive(self.p()).or_else(|| alive(self.q())).into_iter().collect(),
            _ => alive(self.p()).into_iter().chain(alive(self.q())).collect(),
        }
    }
}

/// Members in `set` whose blocks must come from disk (not already up to date in the cache).
fn to_read(view: &StripeView<'_>, set: impl IntoIterator<Item = DiskIndex>) -> Vec<DiskIndex> {
    let mut reads: Vec<DiskIndex> =
        set.into_iter().filter(|d| !view.blocks[d.get()].uptodate).collect();
    reads.sort_unstable();
    reads.dedup();
    reads
}
