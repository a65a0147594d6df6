//! What NBD block status needs from the engine: where a read of some array sectors would take
//! its data from, so that the runtime can ask those members which of their ranges are holes
//! (`uraid_io::Member::allocated`). The array reads zeros where every source of a part is a
//! hole. The answer is as fresh as a read's: a part with a stripe head holding newer data
//! than the members (a write held by the write-back, logged and not yet in place, or being
//! written), a batch writing its stripe, or work waiting for a head there, is data.

use super::Array;
use crate::request::split_by_chunk;
use crate::stripe::StripeKey;
use crate::units::{DiskIndex, Sector};
use std::ops::Range;

/// One part of a queried range: array sectors inside one chunk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadSource {
    pub sectors: u64,
    /// Where the part lies on its members (data-area sectors), the same on each of them.
    pub member_sector: Sector,
    /// The members whose ranges must all be holes for the part to read as zeros: its data
    /// member when that is in sync there, else every other member in sync (the part is rebuilt
    /// from them). Empty when nothing can be said: busy, or beyond the redundancy.
    pub sources: Vec<DiskIndex>,
    /// Every member in sync there: the part is not allocated at all where they are all holes.
    pub members: Vec<DiskIndex>,
}

/// A run of array sectors with one status (NBD's base:allocation flags).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extent {
    pub sectors: u64,
    /// Reads back as zeros (NBD_STATE_ZERO).
    pub zero: bool,
    /// Not allocated on any member in sync (NBD_STATE_HOLE).
    pub hole: bool,
}

impl Array {
    /// Where reads of array sectors `[sector, +sectors)` come from, a part per chunk piece.
    #[must_use]
    pub fn read_sources(&self, sector: Sector, sectors: u64) -> Vec<ReadSource> {
        let g = &self.geometry;
        let unit = self.unit_sectors;
        split_by_chunk(g, sector, sectors)
            .map(|p| {
                let (stripe, at) = (p.addr.stripe, p.addr.member_sector.0);
                // Whole heads, as `in_sync_range` asks.
                let (start, end) = (at / unit * unit, (at + p.sectors).div_ceil(unit) * unit);
                let members: Vec<DiskIndex> = (0..g.raid_disks())
                    .filter(|&m| self.in_sync_range(m, start, end))
                    .map(|m| DiskIndex(m as u16))
                    .collect();
                let busy = self.batches.writing(stripe)
                    || self.head_for_newer_data(stripe, at, p.sectors)
                    || (start..end).step_by(unit as usize).any(|s| {
                        let unit_in_chunk = (s % g.chunk_sectors()) / unit;
                        let key = StripeKey { stripe, unit: unit_in_chunk as u32 };
                        self.waiting_keys.contains_key(&key)
                    });
                let missing = g.raid_disks() - members.len();
                let sources = if busy || missing > g.max_degraded() {
                    Vec::new()
                } else if members.contains(&p.addr.disk) {
                    vec![p.addr.disk]
                } else {
                    members.clone()
                };
                ReadSource {
                    sectors: p.sectors,
                    member_sector: p.addr.member_sector,
                    sources,
                    members,
                }
            })
            .collect()
    }
}

/// The extents of `part`, in order, from what its members hold: `data(member)` gives the
/// member's data ranges within the part's member sectors (sorted; None: unknown, all data).
pub fn part_extents(
    part: &ReadSource,
    mut data: impl FnMut(DiskIndex) -> Option<Vec<Range<u64>>>,
) -> Vec<Extent> {
    let span = part.member_sector.0..part.member_sector.0 + part.sectors;
    let all_data = || Extent { sectors: part.sectors, zero: false, hole: false };
    if part.sources.is_empty() {
        return vec![all_data()];
    }
    let mut held: Vec<(DiskIndex, Vec<Range<u64>>)> = Vec::with_capacity(part.members.len());
    for &m in &part.members {
        match data(m) {
            Some(ranges) => held.push((m, ranges)),
            None if part.sources.contains(&m) => return vec![all_data()],
            // A member that cannot say leaves the part allocated, zeros or not.
            None => held.push((m, vec![span.clone()])),
        }
    }
    let mut cuts: Vec<u64> = vec![span.start, span.end];
    for (_, ranges) in &held {
        for r in ranges {
            cuts.push(r.start.clamp(span.start, span.end));
            cuts.push(r.end.clamp(span.start, span.end));
        }
    }
    cuts.sort_unstable();
    cuts.dedup();
    let mut out: Vec<Extent> = Vec::new();
    for w in cuts.windows(2) {
        let piece = w[0]..w[1];
        let has = |ranges: &[Range<u64>]| {
            ranges.iter().any(|r| r.start < piece.end && piece.start < r.end)
        };
        let zero = held.iter().all(|(m, r)| !part.sources.contains(m) || !has(r));
        let hole = zero && held.iter().all(|(_, r)| !has(r));
        let sectors = piece.end - piece.start;
        match out.last_mut() {
            Some(last) if last.zero == zero && last.hole == hole => last.sectors += sectors,
            _ => out.push(Extent { sectors, zero, hole }),
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::single_range_in_vec_init)] // a member's data ranges, one of them
mod tests {
    use super::*;

    fn part(sources: &[u16], members: &[u16]) -> ReadSource {
        ReadSource {
            sectors: 64,
            member_sector: Sector(128),
            sources: sources.iter().map(|&d| DiskIndex(d)).collect(),
            members: members.iter().map(|&d| DiskIndex(d)).collect(),
        }
    }

    fn ext(sectors: u64, zero: bool, hole: bool) -> Extent {
        Extent { sectors, zero, hole }
    }

    /// A healthy part reads zeros where its data member has a hole, whatever parity holds;
    /// it is a hole where no member has anything.
    #[test]
    fn a_healthy_part_follows_its_data_member() {
        let p = part(&[1], &[0, 1, 2]);
        let got = part_extents(&p, |m| match m.0 {
            1 => Some(vec![136..144]),
            2 => Some(vec![128..132]),
            _ => Some(vec![]),
        });
        assert_eq!(
            got,
            vec![
                ext(4, true, false),
                ext(4, true, true),
                ext(8, false, false),
                ext(48, true, true)
            ]
        );
    }

    /// A part rebuilt from the other members is zeros only where all of them are holes; a
    /// source that cannot say makes the part data, another member only takes the hole away.
    #[test]
    fn a_rebuilt_part_needs_every_source_empty() {
        let p = part(&[0, 2], &[0, 2]);
        let got =
            part_extents(&p, |m| Some(if m.0 == 0 { vec![128..136] } else { vec![184..192] }));
        assert_eq!(got, vec![ext(8, false, false), ext(48, true, true), ext(8, false, false)]);
        assert_eq!(part_extents(&p, |m| (m.0 == 0).then(Vec::new)), vec![ext(64, false, false)]);
        let q = part(&[1], &[0, 1]);
        let got = part_extents(&q, |m| (m.0 == 1).then(Vec::new));
        assert_eq!(got, vec![ext(64, true, false)]);
        assert_eq!(
            part_extents(&part(&[], &[0, 1]), |_| Some(vec![])),
            vec![ext(64, false, false)]
        );
    }
}
