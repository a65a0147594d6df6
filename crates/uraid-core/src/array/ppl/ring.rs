//! Where log writes go on the members' rings. A ring is circular: a generation goes after the
//! last one, or back at the ring's start when it does not fit before the end, over retired
//! generations only (below the tail of the last completed advance or reset, which every
//! member's ring holds). So the rings need not be reset when they fill: an advance started
//! before a ring fills retires its older generations while writes go on, where a reset stops
//! the log (see `advance`). The replay finds generations wherever they are
//! (`crate::ppl::scan_ring` looks for a header at every sector).
//!
//! When to start one. It should end before the ring fills, or generations wait for it; and
//! each costs a flush of every member and a header on some rings, so not much earlier. What
//! it takes is what gets written while it runs: a queue's worth at depth, a generation or two
//! at queue depth 1. So an advance starts when a ring's free space falls below three times
//! what the last advance saw written to it while it ran, and never later than a quarter free
//! nor earlier than half (`bench io --only ppl`: half for every ring loses 0.01-0.03 on the
//! 128 KiB rings' queue-depth-1 and flush rows; a third or a quarter for every ring loses
//! 0.07-0.11 on random writes at depth).

use std::collections::VecDeque;

/// An advance starts when a live member's ring has less free than this many times what the
/// last advance saw written to it while it ran, ...
const ADVANCE_FOOTPRINTS: u64 = 3;
/// ... but at the latest with a quarter free, and at the earliest with half.
const ADVANCE_FREE_MIN: (u64, u64) = (1, 4);
const ADVANCE_FREE_MAX: (u64, u64) = (1, 2);

/// Every member's ring of one engine.
pub(super) struct Rings {
    ring_sectors: u64,
    /// Per member: where its last log write ended.
    write_at: Vec<u64>,
    /// Per member: the generations that may be live, in the order written (first sector,
    /// end sector, generation).
    gens: Vec<VecDeque<(u64, u64, u64)>>,
    /// Per member: sectors written since the advance under way (or the last one) started,
    /// and what the last completed advance saw written while it ran.
    since_advance: Vec<u64>,
    footprint: Vec<u64>,
}

impl Rings {
    pub(super) fn new(members: usize, ring_sectors: u64) -> Rings {
        Rings {
            ring_sectors,
            write_at: vec![0; members],
            gens: vec![VecDeque::new(); members],
            since_advance: vec![0; members],
            // Unknown before the first: start at half free.
            footprint: vec![ring_sectors; members],
        }
    }

    pub(super) fn members(&self) -> usize {
        self.write_at.len()
    }

    /// Where a log write of `sectors` would go on member `m`'s ring: where the last one ended,
    /// or the ring's start; None if either would overwrite a live generation.
    pub(super) fn place(&self, m: usize, sectors: u64) -> Option<u64> {
        let (ring, at) = (self.ring_sectors, self.write_at[m]);
        match self.gens[m].front() {
            // Live from `first` up to `at`: free after `at` and before `first`.
            Some(&(first, _, _)) if first < at => {
                if at + sectors <= ring {
                    Some(at)
                } else {
                    (sectors <= first).then_some(0)
                }
            }
            // Wrapped: live from `first` to the end of its lap, and from 0 up to `at`.
            Some(&(first, _, _)) => (at + sectors <= first).then_some(at),
            None if at + sectors <= ring => Some(at),
            None => (sectors <= ring).then_some(0),
        }
    }

    /// Records a log write of `sectors` of `generation` on member `m`: where it goes, and
    /// whether it went back to the ring's start.
    pub(super) fn take_place(&mut self, m: usize, sectors: u64, generation: u64) -> (u64, bool) {
        let at = self.place(m, sectors).expect("room was checked");
        let wrapped = at < self.write_at[m];
        self.record(m, at, sectors, generation);
        (at, wrapped)
    }

    /// Records a reset's header (`sectors`, `generation`) on member `m`: where there is room,
    /// else over the oldest live generation. Every member is flushed by then, so a replay
    /// that loses that generation loses nothing it needs; but one that loses a head's newest
    /// entry and finds an older one would replay stale partial parity, so the header never
    /// goes over a newer generation, even torn (simulator seed 10130915: a reset's header at
    /// the ring's start, torn by a power cut, over the newest generation).
    pub(super) fn take_place_for_reset(&mut self, m: usize, sectors: u64, generation: u64) -> u64 {
        let at = self.place(m, sectors).unwrap_or_else(|| {
            let (first, end, _) = self.gens[m].pop_front().expect("a full ring holds some");
            debug_assert!(end - first >= sectors, "a generation holds at least a header");
            first
        });
        self.record(m, at, sectors, generation);
        at
    }

    /// A log write of `sectors` of `generation` at `at` on member `m`'s ring.
    fn record(&mut self, m: usize, at: u64, sectors: u64, generation: u64) {
        self.write_at[m] = at + sectors;
        self.since_advance[m] += sectors;
        self.gens[m].push_back((at, at + sectors, generation));
    }

    /// An advance starts: what is written from now on is its footprint.
    pub(super) fn advance_started(&mut self) {
        self.since_advance.fill(0);
    }

    /// An advance completed: what was written while it ran is the next one's measure.
    pub(super) fn advance_finished(&mut self) {
        self.footprint.clone_from(&self.since_advance);
    }

    /// Generations below `tail` are retired on every ring (a reset's tail is durable on each,
    /// an advance's on enough rings that any members the array survives losing leave one,
    /// and a replay takes the newest tail found).
    pub(super) fn retire(&mut self, tail: u64) {
        for gens in &mut self.gens {
            while gens.front().is_some_and(|g| g.2 < tail) {
                gens.pop_front();
            }
        }
    }

    /// Sectors of member `m`'s ring not held by live generations.
    fn free(&self, m: usize) -> u64 {
        let (ring, at) = (self.ring_sectors, self.write_at[m]);
        match self.gens[m].front() {
            Some(&(first, _, _)) if first < at => ring - at + first,
            Some(&(first, _, _)) => first - at,
            None => ring,
        }
    }

    /// Whether some member of `live` has its ring full enough that an advance should retire
    /// what it can before the log runs into its older generations (see the module docs).
    pub(super) fn want_advance(&self, live: &[usize]) -> bool {
        let share = |(num, den): (u64, u64)| self.ring_sectors * num / den;
        let (min, max) = (share(ADVANCE_FREE_MIN), share(ADVANCE_FREE_MAX));
        live.iter().any(|&m| {
            let want = (ADVANCE_FOOTPRINTS * self.footprint[m]).clamp(min, max);
            self.free(m) < want
        })
    }
}

#[cfg(test)]
mod tests {
    use super::Rings;

    #[test]
    fn writes_wrap_over_retired_generations_only() {
        let mut r = Rings::new(1, 100);
        assert_eq!(r.take_place(0, 40, 1), (0, false));
        assert_eq!(r.take_place(0, 40, 2), (40, false));
        assert_eq!(r.free(0), 20);
        assert!(r.want_advance(&[0]));
        // 30 more do not fit before the end, and generation 1 still holds the start.
        assert_eq!(r.place(0, 30), None);
        assert_eq!(r.place(0, 20), Some(80));
        r.retire(2);
        assert_eq!(r.place(0, 30), Some(0), "over generation 1, retired");
        assert_eq!(r.place(0, 41), None, "generation 2 is live from sector 40");
        assert_eq!(r.take_place(0, 30, 3), (0, true));
        // Wrapped: live from 40 to 80, then 0 to 30.
        assert_eq!(r.free(0), 10);
        assert_eq!(r.place(0, 10), Some(30));
        assert_eq!(r.place(0, 11), None);
        r.retire(3);
        assert_eq!(r.place(0, 60), Some(30), "live only from 0 to 30");
        assert_eq!(r.place(0, 71), None);
        assert_eq!(r.take_place(0, 70, 4), (30, false));
        r.retire(5);
        assert_eq!(r.free(0), 100);
        assert_eq!(r.place(0, 100), Some(0));
        // A reset's header goes where there is room, else over the oldest live generation
        // only, never over a newer one.
        assert_eq!(r.take_place(0, 60, 6), (0, true));
        assert_eq!(r.take_place(0, 36, 7), (60, false));
        assert_eq!(r.take_place_for_reset(0, 4, 8), 96);
        assert_eq!(r.place(0, 8), None);
        assert_eq!(r.take_place_for_reset(0, 8, 9), 0, "over generation 6, the oldest");
        assert_eq!(r.free(0), 52, "6's remains, up to 7");
        r.retire(9);
        assert_eq!(r.free(0), 92);
    }

    /// An advance that sees `sectors` of generation `tail` written while it runs, then retires
    /// what is below it.
    fn advance(r: &mut Rings, sectors: u64, tail: u64) {
        r.advance_started();
        r.take_place(0, sectors, tail);
        r.advance_finished();
        r.retire(tail);
    }

    #[test]
    fn an_advance_starts_by_what_the_last_one_saw_written() {
        let mut r = Rings::new(1, 100);
        // None yet: at half free.
        r.take_place(0, 45, 1);
        assert!(!r.want_advance(&[0]));
        r.take_place(0, 10, 2);
        assert!(r.want_advance(&[0]), "45 free");
        // One that saw 5 sectors written while it ran: three times that, but a quarter at
        // the latest.
        advance(&mut r, 5, 3);
        assert_eq!(r.free(0), 95);
        r.take_place(0, 30, 4);
        r.take_place(0, 10, 5);
        assert!(!r.want_advance(&[0]), "55 free");
        assert_eq!(r.take_place(0, 31, 6), (0, true));
        assert_eq!(r.free(0), 24);
        assert!(r.want_advance(&[0]), "under a quarter");
        // One that saw 20: sixty, but half at the earliest.
        advance(&mut r, 20, 7);
        assert_eq!(r.free(0), 80);
        r.take_place(0, 29, 8);
        assert!(!r.want_advance(&[0]), "51 free");
        r.take_place(0, 2, 9);
        assert!(r.want_advance(&[0]), "49 free");
        assert!(!r.want_advance(&[]), "no live member");
    }
}
