//! Rebuilding the lost blocks of one stripe from its survivors: XOR for RAID4/5, the P+Q
//! recovery for RAID6. Pure computation over caller-owned buffers; which blocks are lost is the
//! caller's knowledge (failed members, read errors).
//!
//! The buffers are a "stripe unit": the same byte range of every member's chunk in one stripe.
//! Parity is per byte position, so any sub-range of the chunk reconstructs on its own.

use crate::geometry::{DiskRole, StripeMap};
use crate::layout::Level;
use thiserror::Error;
use uraid_parity::Block;

#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReconstructError {
    #[error("{lost} members lost but RAID{level} survives at most {max}")]
    BeyondRedundancy { level: u8, lost: usize, max: usize },
}

/// Overwrites `blocks[d]` for every lost member `d` (`lost[d] == true`) with its contents
/// rebuilt from the other members' blocks. `blocks` is indexed by member and every block has the
/// same length.
pub fn reconstruct(
    level: Level,
    map: &StripeMap,
    blocks: &mut [&mut [u8]],
    lost: &[bool],
) -> Result<(), ReconstructError> {
    assert_eq!(blocks.len(), lost.len(), "one lost flag per member");
    assert_eq!(blocks.len(), map.roles.len(), "one block per member");
    let lost_count = lost.iter().filter(|l| **l).count();
    let max = usize::from(level.max_degraded());
    if lost_count > max {
        return Err(ReconstructError::BeyondRedundancy {
            level: level.number(),
            lost: lost_count,
            max,
        });
    }
    if lost_count == 0 {
        return Ok(());
    }
    match level {
        Level::Raid0 => unreachable!("RAID0 survives no loss; refused above"),
        Level::Raid4 | Level::Raid5 => reconstruct_xor(blocks, lost),
        Level::Raid6 => reconstruct_pq(map, blocks, lost),
    }
    Ok(())
}

/// RAID4/5: the one lost block is the XOR of all the others (P included).
fn reconstruct_xor(blocks: &mut [&mut [u8]], lost: &[bool]) {
    let target = lost.iter().position(|l| *l).expect("one lost member");
    let (before, rest) = blocks.split_at_mut(target);
    let (dst, after) = rest.split_first_mut().expect("target is in range");
    let srcs: Vec<&[u8]> = before.iter().chain(after.iter()).map(|b| &**b).collect();
    uraid_parity::xor_gen(dst, &srcs);
}

fn reconstruct_pq(map: &StripeMap, blocks: &mut [&mut [u8]], lost: &[bool]) {
    let mut by_member: Vec<Option<Block<'_>>> = blocks
        .iter_mut()
        .zip(lost)
        .map(|(b, &l)| Some(if l { Block::Lost(b) } else { Block::Present(b) }))
        .collect();
    let mut take = |role: DiskRole| {
        let disk = map.roles.iter().position(|r| *r == role).expect("RAID6 has P and Q");
        by_member[disk].take().expect("each member taken once")
    };
    let mut p = take(DiskRole::P);
    let mut q = take(DiskRole::Q);
    let mut data: Vec<Block<'_>> = map
        .syndrome
        .iter()
        .map(|disk| match disk {
            Some(d) => by_member[d.get()].take().expect("each member taken once"),
            None => Block::Zero,
        })
        .collect();
    uraid_parity::raid6_recover(&mut data, &mut p, &mut q);
}
