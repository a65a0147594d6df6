//! An intrusive doubly-linked list over pool slots: O(1) push, pop and removal of any slot, no
//! allocation after the pool grows (md keeps inactive stripes on a `list_head` the same way).

const NIL: usize = usize::MAX;

#[derive(Default)]
pub(super) struct Lru {
    prev: Vec<usize>,
    next: Vec<usize>,
    linked: Vec<bool>,
    front: usize,
    back: usize,
    len: usize,
}

impl Lru {
    pub(super) fn new() -> Lru {
        Lru { front: NIL, back: NIL, ..Lru::default() }
    }

    /// Makes room for slots `0..slots`.
    pub(super) fn grow(&mut self, slots: usize) {
        if slots > self.prev.len() {
            self.prev.resize(slots, NIL);
            self.next.resize(slots, NIL);
            self.linked.resize(slots, false);
        }
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }

    pub(super) fn contains(&self, slot: usize) -> bool {
        self.linked.get(slot).copied().unwrap_or(false)
    }

    /// Appends `slot` as the most recently used.
    pub(super) fn push_back(&mut self, slot: usize) {
        assert!(!self.linked[slot], "slot {slot} is already on the LRU");
        self.prev[slot] = self.back;
        self.next[slot] = NIL;
        if self.back == NIL {
            self.front = slot;
        } else {
            self.next[self.back] = slot;
        }
        self.back = slot;
        self.linked[slot] = true;
        self.len += 1;
    }

    /// Removes and returns the least recently used slot.
    pub(super) fn pop_front(&mut self) -> Option<usize> {
        let slot = self.front;
        (slot != NIL).then(|| {
            self.remove(slot);
            slot
        })
    }

    pub(super) fn remove(&mut self, slot: usize) {
        assert!(self.linked[slot], "slot {slot} is not on the LRU");
        let (p, n) = (self.prev[slot], self.next[slot]);
        if p == NIL {
            self.front = n;
        } else {
            self.next[p] = n;
        }
        if n == NIL {
            self.back = p;
        } else {
            self.prev[n] = p;
        }
        self.linked[slot] = false;
        self.len -= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::Lru;

    #[test]
    fn order_and_removal() {
        let mut lru = Lru::new();
        lru.grow(5);
        for s in [3, 0, 4, 1] {
            lru.push_back(s);
        }
        lru.remove(4);
        lru.remove(3);
        lru.push_back(3);
        assert_eq!(lru.len(), 3);
        let order: Vec<usize> = std::iter::from_fn(|| lru.pop_front()).collect();
        assert_eq!(order, [0, 1, 3]);
        assert!(!lru.contains(0) && lru.len() == 0);
    }
}
