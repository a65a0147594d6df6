//! The member I/Os in flight, by tag: a slab instead of a hash map. Every member I/O is
//! inserted once and removed once, so the map was on every I/O's path twice; with 4 KiB stripe
//! heads a 1 MiB RAID5 write is 320 of them, and the hash map's insert and remove were about a
//! tenth of the engine's time on full-stripe writes (perf over `uraid bench io --only cpu`).
//!
//! A tag is `(sequence << SLOT_BITS) | slot`: unique for the engine's life (the sequence only
//! grows) and increasing in issue order as before, and its low bits find the slot without
//! hashing. The slot remembers its tag, so a stale or foreign tag is caught, not aliased.
//!
//! It also counts each member's I/Os queued or in flight (`load`), which the log's placement
//! of entries reads (`ppl::placement`).

use super::Pending;
use super::io::IoTag;
use crate::units::DiskIndex;

/// Slots addressable by a tag: far more than a stripe cache's heads times members.
const SLOT_BITS: u32 = 24;

/// What an inserted I/O is for, and its member.
type Inserted = (Pending, DiskIndex);

#[derive(Default)]
pub(super) struct InFlight {
    /// Per slot: the tag it was reserved for, and what the I/O is for (and its member) once
    /// inserted.
    slots: Vec<Option<(IoTag, Option<Inserted>)>>,
    /// Per member: I/Os inserted and not yet removed.
    load: Vec<usize>,
    free: Vec<u32>,
    /// Inserted (not just reserved) I/Os.
    len: usize,
    sequence: u64,
}

impl InFlight {
    /// A new tag, its slot reserved until `insert`.
    pub fn new_tag(&mut self) -> IoTag {
        self.sequence += 1;
        let slot = self.free.pop().unwrap_or_else(|| {
            self.slots.push(None);
            u32::try_from(self.slots.len() - 1).expect("slots fit u32")
        });
        assert!(slot < 1 << SLOT_BITS, "more than 2^{SLOT_BITS} member I/Os in flight");
        let tag = IoTag(self.sequence << SLOT_BITS | u64::from(slot));
        self.slots[slot as usize] = Some((tag, None));
        tag
    }

    /// Records what the I/O of `tag` (from `new_tag`), to `member`, is for.
    pub fn insert(&mut self, tag: IoTag, member: DiskIndex, pending: Pending) {
        let entry = self.slot_mut(tag).expect("a tag from new_tag");
        assert!(entry.is_none(), "tag {} inserted twice", tag.0);
        *entry = Some((pending, member));
        self.len += 1;
        let m = member.get();
        if self.load.len() <= m {
            self.load.resize(m + 1, 0);
        }
        self.load[m] += 1;
    }

    /// `member`'s I/Os queued or in flight.
    pub fn load(&self, member: DiskIndex) -> usize {
        self.load.get(member.get()).copied().unwrap_or(0)
    }

    /// What the I/O of `tag` was for, if it is in flight; its slot is free again.
    pub fn remove(&mut self, tag: IoTag) -> Option<Pending> {
        let (pending, member) = self.slot_mut(tag)?.take()?;
        self.load[member.get()] -= 1;
        let slot = Self::slot(tag);
        self.slots[slot] = None;
        self.free.push(slot as u32);
        self.len -= 1;
        Some(pending)
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn slot(tag: IoTag) -> usize {
        (tag.0 & ((1 << SLOT_BITS) - 1)) as usize
    }

    fn slot_mut(&mut self, tag: IoTag) -> Option<&mut Option<Inserted>> {
        match self.slots.get_mut(Self::slot(tag)) {
            Some(Some((t, pending))) if *t == tag => Some(pending),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_are_unique_increasing_and_found_only_while_in_flight() {
        let mut f = InFlight::default();
        let pending = |m: u16| Pending::Log { member: DiskIndex(m), flight: 0 };
        let a = f.new_tag();
        f.insert(a, DiskIndex(1), pending(1));
        let b = f.new_tag();
        f.insert(b, DiskIndex(2), pending(2));
        assert!(b.0 > a.0);
        assert_eq!(f.len(), 2);
        assert_eq!((f.load(DiskIndex(1)), f.load(DiskIndex(2)), f.load(DiskIndex(7))), (1, 1, 0));
        assert!(matches!(f.remove(a), Some(Pending::Log { member, .. }) if member.get() == 1));
        assert!(f.remove(a).is_none(), "removed once");
        let c = f.new_tag();
        assert!(c.0 > b.0, "a reused slot gets a new, larger tag");
        assert_eq!(c.0 & 0xff_ffff, a.0 & 0xff_ffff, "a's slot again");
        assert!(f.remove(c).is_none(), "reserved, not yet in flight");
        f.insert(c, DiskIndex(3), pending(3));
        assert_eq!((f.load(DiskIndex(1)), f.load(DiskIndex(3))), (0, 1), "a's load went with it");
        assert!(f.remove(a).is_none(), "a stale tag does not find its slot's new I/O");
        assert!(matches!(f.remove(c), Some(Pending::Log { member, .. }) if member.get() == 3));
        assert!(matches!(f.remove(b), Some(Pending::Log { member, .. }) if member.get() == 2));
        assert!(f.is_empty());
    }
}
