//! The stripe cache: a bounded pool of stripe heads (md's `stripe_cache_size`), found by key,
//! with the inactive ones on an LRU so that recently used stripes stay cached (a degraded
//! sequential read then reads each surviving block once). Memory is bounded by the pool size:
//! heads are allocated when the pool grows and freed when it shrinks, never per request.
//!
//! When every head is held, `get` returns `None` and the caller waits (md's wait_for_stripe).
//! A head is released (`put`) only when it is idle: no member I/O in flight and nothing dirty;
//! until then its handler holds it, so every head on the LRU can be evicted.

use super::head::{StripeHead, StripeKey};
use super::lru::Lru;
use crate::fast_hash::HashMap;

/// md's default `stripe_cache_size`.
pub const STRIPE_CACHE_SIZE_DEFAULT: usize = 256;
/// md's largest `stripe_cache_size` (raid5_set_cache_size refuses more). The pool is
/// allocated whole, so a size far past it (a typo's extra digits) would not fail: it would
/// allocate until the machine runs out of memory.
pub const STRIPE_CACHE_SIZE_MAX: usize = 32768;

/// Index of a head in the pool; stable while the head is held.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HeadId(usize);

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// `get` found the stripe's head in the pool (its cached blocks are reusable).
    pub hits: u64,
    /// `get` had to take a free or evicted head.
    pub misses: u64,
    /// `get` found no head to take.
    pub exhausted: u64,
}

pub struct StripeCache {
    slots: Vec<Option<StripeHead>>,
    by_key: HashMap<StripeKey, HeadId>,
    /// Inactive heads holding a key, least recently used first.
    lru: Lru,
    /// Allocated heads holding no key.
    free: Vec<HeadId>,
    allocated: usize,
    active: usize,
    capacity: usize,
    members: usize,
    unit_bytes: usize,
    pub stats: CacheStats,
}

impl StripeCache {
    /// A pool of `capacity` heads of `members` blocks of `unit_bytes` (the array's stripe_size).
    #[must_use]
    pub fn new(capacity: usize, members: usize, unit_bytes: usize) -> StripeCache {
        let mut cache = StripeCache {
            slots: Vec::new(),
            by_key: HashMap::default(),
            lru: Lru::new(),
            free: Vec::new(),
            allocated: 0,
            active: 0,
            capacity: 0,
            members,
            unit_bytes,
            stats: CacheStats::default(),
        };
        cache.resize(capacity);
        cache
    }

    #[must_use]
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Heads allocated: `capacity`, or more while a shrink waits for held heads.
    #[must_use]
    pub fn allocated(&self) -> usize {
        self.allocated
    }

    /// Heads held by someone.
    #[must_use]
    pub fn active(&self) -> usize {
        self.active
    }

    /// Inactive heads still caching a stripe.
    #[must_use]
    pub fn inactive(&self) -> usize {
        self.lru.len()
    }

    /// Buffer bytes the pool holds.
    #[must_use]
    pub fn buffer_bytes(&self) -> usize {
        self.allocated * self.members * self.unit_bytes
    }

    /// The head for `key`, held until `put`: the cached one if present, else a free head or the
    /// least recently used inactive one, reset. `None` when every head is held.
    pub fn get(&mut self, key: StripeKey) -> Option<HeadId> {
        if let Some(&id) = self.by_key.get(&key) {
            self.stats.hits += 1;
            self.hold(id);
            return Some(id);
        }
        let Some(id) = self.free.pop().or_else(|| self.evict_lru()) else {
            self.stats.exhausted += 1;
            return None;
        };
        self.stats.misses += 1;
        self.head_mut(id).reassign(key);
        self.by_key.insert(key, id);
        self.hold(id);
        Some(id)
    }

    /// The head caching `key`, if any, without holding it or counting a hit.
    #[must_use]
    pub fn lookup(&self, key: StripeKey) -> Option<HeadId> {
        self.by_key.get(&key).copied()
    }

    /// Drops an inactive head's cached stripe (its blocks would go stale: the stripe is being
    /// written around the cache). False, and nothing changes, if the head is held.
    pub fn forget(&mut self, key: StripeKey) -> bool {
        let Some(&id) = self.by_key.get(&key) else { return true };
        if self.head(id).users > 0 {
            return false;
        }
        self.lru.remove(id.0);
        self.by_key.remove(&key);
        if self.allocated > self.capacity {
            self.free_slot(id); // the pool is shrinking
        } else {
            self.free.push(id);
        }
        true
    }

    /// Releases one hold. The last one puts the head on the LRU, or frees it while the pool is
    /// shrinking.
    pub fn put(&mut self, id: HeadId) {
        let head = self.head_mut(id);
        assert!(head.users > 0, "put of a head nobody holds");
        head.users -= 1;
        if head.users > 0 {
            return;
        }
        assert!(head.idle(), "a head is released only when idle: {:?}", head.key);
        self.active -= 1;
        if self.allocated > self.capacity {
            let key = self.head(id).key;
            self.by_key.remove(&key);
            self.free_slot(id);
        } else {
            self.lru.push_back(id.0);
        }
    }

    #[must_use]
    pub fn head(&self, id: HeadId) -> &StripeHead {
        self.slots[id.0].as_ref().expect("a held head is allocated")
    }

    pub fn head_mut(&mut self, id: HeadId) -> &mut StripeHead {
        self.slots[id.0].as_mut().expect("a held head is allocated")
    }

    /// Changes the pool size while running. Growing allocates heads now; shrinking frees free
    /// and inactive heads now, and held ones as they are released.
    pub fn resize(&mut self, capacity: usize) {
        assert!(capacity > 0, "a stripe cache needs at least one head");
        self.capacity = capacity;
        while self.allocated < capacity {
            let slot = self.slots.iter().position(Option::is_none).unwrap_or(self.slots.len());
            if slot == self.slots.len() {
                self.slots.push(None);
                self.lru.grow(self.slots.len());
            }
            self.slots[slot] = Some(StripeHead::new(self.members, self.unit_bytes));
            self.allocated += 1;
            self.free.push(HeadId(slot));
        }
        while self.allocated > capacity {
            let Some(id) = self.free.pop().or_else(|| self.evict_lru()) else { break };
            self.free_slot(id);
        }
    }

    fn hold(&mut self, id: HeadId) {
        if self.head(id).users == 0 {
            if self.lru.contains(id.0) {
                self.lru.remove(id.0);
            }
            self.active += 1;
        }
        self.head_mut(id).users += 1;
    }

    /// Takes the least recently used inactive head, forgetting its stripe.
    fn evict_lru(&mut self) -> Option<HeadId> {
        let id = HeadId(self.lru.pop_front()?);
        let key = self.head(id).key;
        self.by_key.remove(&key);
        Some(id)
    }

    fn free_slot(&mut self, id: HeadId) {
        self.slots[id.0] = None;
        self.allocated -= 1;
    }
}
