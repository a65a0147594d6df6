//! A turn's engine I/Os in the order that makes every mergeable run adjacent: by member, then
//! epoch (a Flush and the I/Os before it on its member stay before the I/Os after it), then
//! kind (`Part::rank`) and offset, and for equal keys the engine's order.
//!
//! Every turn sorts, so the sort is on one packed `u128` per part rather than on the parts:
//! a stable sort of the 64-byte parts by a tuple key, with a `match` for the kind in every
//! comparison, was 4% of the CPU of 4 KiB random writes on memory members (perf, `uraid bench
//! io --only cpu`'s log_cpu rows), most of it moving parts and ranking them again.

use super::Part;
use crate::member::IoOp;

/// The packed key's fields, from the top: member, epoch, rank, offset, then the part's index
/// in the engine's order (which makes equal keys keep that order, and unstable sorting
/// stable). A turn outside these widths is sorted the slow way.
const INDEX_BITS: u32 = 24;
const OFFSET_BITS: u32 = 64;
const RANK_BITS: u32 = 8;
const EPOCH_BITS: u32 = 16;
const MEMBER_BITS: u32 = 16;
const _: () = assert!(INDEX_BITS + OFFSET_BITS + RANK_BITS + EPOCH_BITS + MEMBER_BITS == 128);

/// What `order_for_merging` keeps between turns so that a turn allocates nothing.
pub(super) struct Scratch {
    /// Per member: flushes seen so far in this turn.
    epochs: Vec<u32>,
    keys: Vec<u128>,
    sorted: Vec<Part>,
}

impl Scratch {
    pub(super) fn new(members: usize) -> Scratch {
        Scratch { epochs: vec![0; members], keys: Vec::new(), sorted: Vec::new() }
    }

    /// Sets each part's epoch and sorts `ready` (given in the engine's order).
    pub(super) fn order_for_merging(&mut self, ready: &mut [Part]) {
        let packable = self.set_epochs(ready) && ready.len() < 1 << INDEX_BITS;
        if !packable {
            return by_tuple(ready);
        }
        self.keys.clear();
        self.keys.extend(ready.iter().enumerate().map(|(i, p)| key(p, i)));
        self.keys.sort_unstable();
        self.sorted.clear();
        let index = |k: &u128| (k & ((1 << INDEX_BITS) - 1)) as usize;
        self.sorted.extend(self.keys.iter().map(|k| ready[index(k)]));
        ready.copy_from_slice(&self.sorted);
    }

    /// Sets each part's epoch: the flushes before it on its member in this turn. Whether
    /// every part's member and epoch fit the packed key.
    fn set_epochs(&mut self, ready: &mut [Part]) -> bool {
        self.epochs.fill(0);
        let mut fits = true;
        for part in ready.iter_mut() {
            part.epoch = self.epochs[part.member];
            if part.op == IoOp::Flush {
                self.epochs[part.member] += 1;
            }
            fits &= part.member < 1 << MEMBER_BITS && part.epoch < 1 << EPOCH_BITS;
        }
        fits
    }
}

fn key(p: &Part, index: usize) -> u128 {
    let mut k = p.member as u128;
    k = (k << EPOCH_BITS) | u128::from(p.epoch);
    k = (k << RANK_BITS) | u128::from(p.rank());
    k = (k << OFFSET_BITS) | u128::from(p.offset_bytes);
    (k << INDEX_BITS) | index as u128
}

/// The same order for any turn: a stable sort by the key's fields.
fn by_tuple(ready: &mut [Part]) {
    ready.sort_by_key(|p| (p.member, p.epoch, p.rank(), p.offset_bytes));
}

#[cfg(test)]
mod tests {
    //! Goal: the packed sort gives exactly the stable tuple sort's order. Method: random turns
    //! with few members, offsets and kinds (so keys tie often), flushes among them, sorted
    //! both ways and compared by tag; and a turn too wide to pack, which takes the tuple sort.

    use super::{Part, Scratch, by_tuple};
    use crate::member::IoOp;

    fn part(tag: u64, member: usize, op: IoOp, offset_bytes: u64, bitmap: bool) -> Part {
        Part { bitmap, ..Part::for_test(tag, member, op, offset_bytes, 4096) }
    }

    /// xorshift64*: deterministic, no dependency.
    fn next(state: &mut u64) -> u64 {
        *state ^= *state >> 12;
        *state ^= *state << 25;
        *state ^= *state >> 27;
        state.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn tags(parts: &[Part]) -> Vec<u64> {
        parts.iter().map(|p| p.tag.0).collect()
    }

    #[test]
    fn the_packed_sort_keeps_the_tuple_sorts_order() {
        let ops = [
            IoOp::Read,
            IoOp::Write { fua: false },
            IoOp::Write { fua: true },
            IoOp::Discard,
            IoOp::Flush,
        ];
        let mut state = 0x9e37_79b9_7f4a_7c15;
        let mut scratch = Scratch::new(4);
        for turn in 0..2000 {
            let len = (next(&mut state) % 40) as usize + turn % 2;
            let mut ready: Vec<Part> = (0..len)
                .map(|i| {
                    let r = next(&mut state);
                    let op = ops[(r % 5) as usize];
                    // A few offsets (ties), one of them past 32 bits.
                    let offset = [0, 4096, 8192, 1 << 40][(r >> 8) as usize % 4];
                    part(i as u64, (r >> 16) as usize % 4, op, offset, r.is_multiple_of(7))
                })
                .collect();
            let mut expected = ready.clone();
            Scratch::new(4).set_epochs(&mut expected);
            by_tuple(&mut expected);
            scratch.order_for_merging(&mut ready);
            assert_eq!(tags(&ready), tags(&expected), "turn {turn}");
            let epochs: Vec<u32> = ready.iter().map(|p| p.epoch).collect();
            assert_eq!(epochs, expected.iter().map(|p| p.epoch).collect::<Vec<_>>());
        }
    }

    #[test]
    fn a_turn_too_wide_to_pack_is_sorted_the_same_way() {
        // More flushes to one member than the key's epoch field holds.
        let flushes = (1 << super::EPOCH_BITS) + 2;
        let mut ready: Vec<Part> = (0..flushes)
            .map(|i| part(i as u64, 0, IoOp::Flush, 0, false))
            .chain([part(flushes as u64, 0, IoOp::Read, 0, false)])
            .collect();
        ready.swap(0, flushes);
        Scratch::new(1).order_for_merging(&mut ready);
        // The read was first in the engine's order, before every flush: it stays first.
        assert_eq!(ready[0].tag.0, flushes as u64);
        assert_eq!(ready[0].op, IoOp::Read);
        assert!(ready[1..].windows(2).all(|w| w[0].epoch < w[1].epoch));
        assert_eq!(ready.last().map(|p| p.tag.0), Some(0));
    }
}
