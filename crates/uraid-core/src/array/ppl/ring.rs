//! Where log writes go on the members' rings. A ring is circular: a generation goes after the
//! last one, or back at the ring's start when it does not fit before the end, over retired
//! generations only (below the tail of the last completed advance or reset, which every
//! member's ring holds). So the rings need not be reset when they fill: an advance started
//! when a ring is half full (`ADVANCE_WHEN_FREE_BELOW`) retires the older half while writes
//! go on, where a reset stops the log (see `advance`). The replay finds generations wherever
//! they are (`crate::ppl::scan_ring` looks for a header at every sector).

use std::collections::VecDeque;

/// A proactive advance starts when a live member's ring has less than this share free.
const ADVANCE_WHEN_FREE_BELOW: (u64, u64) = (1, 2);

/// Every member's ring of one engine.
pub(super) struct Rings {
    ring_sectors: u64,
    /// Per member: where its last log write ended.
    write_at: Vec<u64>,
    /// Per member: the generations that may be live, in the order written (first sector,
    /// end sector, generation).
    gens: Vec<VecDeque<(u64, u64, u64)>>,
}

impl Rings {
    pub(super) fn new(members: usize, ring_sectors: u64) -> Rings {
        Rings { ring_sectors, write_at: vec![0; members], gens: vec![VecDeque::new(); members] }
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
        self.write_at[m] = at + sectors;
        self.gens[m].push_back((at, at + sectors, generation));
        (at, wrapped)
    }

    /// Generations below `tail` are retired on every ring (the tail is durable on each).
    pub(super) fn retire(&mut self, tail: u64) {
        for gens in &mut self.gens {
            while gens.front().is_some_and(|g| g.2 < tail) {
                gens.pop_front();
            }
        }
    }

    /// A reset: everything retired, the next writes at the rings' start.
    pub(super) fn clear(&mut self) {
        self.write_at.fill(0);
        self.gens.iter_mut().for_each(VecDeque::clear);
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
    /// what it can before the log runs into its older generations.
    pub(super) fn want_advance(&self, live: &[usize]) -> bool {
        let (num, den) = ADVANCE_WHEN_FREE_BELOW;
        live.iter().any(|&m| self.free(m) * den < self.ring_sectors * num)
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
        r.clear();
        assert_eq!(r.take_place(0, 8, 6), (0, false));
    }
}
