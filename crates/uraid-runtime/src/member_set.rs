//! Sets of members, a bit each, wide enough for the largest array md and uraid accept
//! (`RAID_DISKS_MAX`, 256 members). The workers share failures through the atomic form: it was
//! one `AtomicU64`, and an array of 65 members or more panicked at start.

use std::sync::atomic::{AtomicU64, Ordering};

use uraid_core::constants::RAID_DISKS_MAX;

const WORDS: usize = (RAID_DISKS_MAX as usize).div_ceil(64);

/// Members by index, `0..RAID_DISKS_MAX`.
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
pub struct MemberSet([u64; WORDS]);

impl MemberSet {
    #[must_use]
    pub fn of(members: impl IntoIterator<Item = usize>) -> MemberSet {
        let mut set = MemberSet::default();
        members.into_iter().for_each(|m| set.insert(m));
        set
    }

    /// # Panics
    /// If `member` is past `RAID_DISKS_MAX` (geometry refuses such arrays).
    pub fn insert(&mut self, member: usize) {
        self.0[member / 64] |= 1 << (member % 64);
    }

    pub fn remove(&mut self, member: usize) {
        if let Some(w) = self.0.get_mut(member / 64) {
            *w &= !(1 << (member % 64));
        }
    }

    #[must_use]
    pub fn contains(&self, member: usize) -> bool {
        self.0.get(member / 64).is_some_and(|w| w & (1 << (member % 64)) != 0)
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.0.iter().all(|&w| w == 0)
    }

    #[must_use]
    pub fn union(self, other: MemberSet) -> MemberSet {
        MemberSet(std::array::from_fn(|i| self.0[i] | other.0[i]))
    }

    /// The members of `self` not in `other`.
    #[must_use]
    pub fn minus(self, other: MemberSet) -> MemberSet {
        MemberSet(std::array::from_fn(|i| self.0[i] & !other.0[i]))
    }

    /// The members, lowest first.
    pub fn members(self) -> impl Iterator<Item = usize> {
        (0..WORDS * 64).filter(move |&m| self.contains(m))
    }
}

/// A `MemberSet` that threads share. Each word is atomic, the set as a whole is not: the
/// workers only add failures with `fetch_or` and read the set before every piece, so a reader
/// that sees one word of two updated takes the other at its next read.
#[derive(Default)]
pub(crate) struct AtomicMemberSet([AtomicU64; WORDS]);

impl AtomicMemberSet {
    pub fn load(&self, order: Ordering) -> MemberSet {
        MemberSet(std::array::from_fn(|i| self.0[i].load(order)))
    }

    pub fn store(&self, set: MemberSet, order: Ordering) {
        for (word, v) in self.0.iter().zip(set.0) {
            word.store(v, order);
        }
    }

    /// Adds `set`; returns the set before.
    pub fn fetch_or(&self, set: MemberSet, order: Ordering) -> MemberSet {
        MemberSet(std::array::from_fn(|i| {
            if set.0[i] == 0 {
                self.0[i].load(order_for_load(order))
            } else {
                self.0[i].fetch_or(set.0[i], order)
            }
        }))
    }

    pub fn remove(&self, member: usize, order: Ordering) {
        self.0[member / 64].fetch_and(!(1 << (member % 64)), order);
    }
}

/// A load cannot take `Release` or `AcqRel`; what they acquire, `Acquire` does.
fn order_for_load(order: Ordering) -> Ordering {
    match order {
        Ordering::Relaxed | Ordering::Release => Ordering::Relaxed,
        Ordering::SeqCst => Ordering::SeqCst,
        _ => Ordering::Acquire,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_member_up_to_the_largest_array_has_its_own_bit() {
        let all = RAID_DISKS_MAX as usize;
        let mut set = MemberSet::default();
        for m in (0..all).step_by(3) {
            set.insert(m);
        }
        assert_eq!(set.members().collect::<Vec<_>>(), (0..all).step_by(3).collect::<Vec<_>>());
        set.remove(255);
        set.remove(63);
        assert!(!set.contains(63) && set.contains(66) && set.contains(252) && !set.contains(300));
        let high = MemberSet::of([64, 200, 255]);
        assert_eq!(set.union(high).minus(set).members().collect::<Vec<_>>(), [64, 200, 255]);
        assert!(high.minus(high).is_empty() && !high.is_empty());

        let shared = AtomicMemberSet::default();
        assert!(shared.fetch_or(high, Ordering::AcqRel).is_empty());
        assert_eq!(shared.fetch_or(MemberSet::of([3]), Ordering::AcqRel), high);
        shared.remove(200, Ordering::AcqRel);
        assert_eq!(shared.load(Ordering::Acquire), MemberSet::of([3, 64, 255]));
        shared.store(MemberSet::of([130]), Ordering::Release);
        assert_eq!(shared.load(Ordering::Acquire).members().collect::<Vec<_>>(), [130]);
    }
}
