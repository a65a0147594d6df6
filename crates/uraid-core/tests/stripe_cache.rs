//! The stripe cache pool: hits keep cached blocks, the least recently used inactive head is
//! the one evicted, a full pool says so instead of growing, resizing works while heads are
//! held, and memory stays bounded by the pool size. A property test runs random get/put/resize
//! sequences against a plain model of an LRU cache.

use proptest::prelude::*;
use uraid_core::StripeNumber;
use uraid_core::stripe::{HeadId, StripeCache, StripeKey};

fn key(n: u64) -> StripeKey {
    StripeKey { stripe: StripeNumber(n), unit: 0 }
}

#[test]
fn a_hit_keeps_the_cached_blocks() {
    let mut cache = StripeCache::new(4, 6, 4096);
    let id = cache.get(key(7)).unwrap();
    cache.head_mut(id).buffers[2][0] = 0xab;
    cache.head_mut(id).devs[2].uptodate = true;
    cache.put(id);
    let again = cache.get(key(7)).unwrap();
    assert_eq!(again, id);
    assert_eq!((cache.head(id).buffers[2][0], cache.head(id).devs[2].uptodate), (0xab, true));
    assert_eq!((cache.stats.hits, cache.stats.misses), (1, 1));
}

#[test]
fn the_least_recently_used_inactive_head_is_evicted() {
    let mut cache = StripeCache::new(3, 4, 4096);
    for n in [1, 2, 3] {
        let id = cache.get(key(n)).unwrap();
        cache.head_mut(id).devs[0].uptodate = true;
        cache.put(id);
    }
    let a = cache.get(key(1)).unwrap(); // 1 becomes the most recently used
    cache.put(a);
    let d = cache.get(key(4)).unwrap(); // evicts 2
    assert!(!cache.head(d).devs[0].uptodate, "a reassigned head starts empty");
    cache.put(d);
    let misses = cache.stats.misses;
    let id = cache.get(key(3)).unwrap();
    cache.put(id);
    assert_eq!(cache.stats.misses, misses, "3 is still cached");
    let id = cache.get(key(2)).unwrap();
    cache.put(id);
    assert_eq!(cache.stats.misses, misses + 1, "2 was evicted");
}

#[test]
fn a_full_pool_refuses_until_a_head_is_released() {
    let mut cache = StripeCache::new(2, 4, 4096);
    let a = cache.get(key(1)).unwrap();
    let b = cache.get(key(2)).unwrap();
    assert_eq!(cache.get(key(3)), None);
    assert_eq!((cache.stats.exhausted, cache.active()), (1, 2));
    // A second holder of a held stripe still gets it.
    assert_eq!(cache.get(key(2)), Some(b));
    cache.put(b);
    cache.put(b);
    assert!(cache.get(key(3)).is_some());
    cache.put(a);
}

#[test]
#[should_panic(expected = "released only when idle")]
fn a_dirty_head_cannot_be_released() {
    let mut cache = StripeCache::new(2, 4, 4096);
    let a = cache.get(key(1)).unwrap();
    cache.head_mut(a).devs[1].dirty = true;
    cache.put(a);
}

#[test]
fn resizing_while_heads_are_held() {
    let mut cache = StripeCache::new(4, 5, 8192);
    assert_eq!(cache.buffer_bytes(), 4 * 5 * 8192);
    let held: Vec<HeadId> = (0..3).map(|n| cache.get(key(n)).unwrap()).collect();
    cache.resize(8);
    assert_eq!(cache.allocated(), 8);
    cache.resize(1);
    assert_eq!(cache.allocated(), 3, "held heads survive the shrink");
    for id in held {
        cache.put(id);
    }
    assert_eq!((cache.allocated(), cache.buffer_bytes()), (1, 5 * 8192));
    assert_eq!(cache.get(key(0)).map(|_| cache.stats.misses), Some(4), "freed heads forgot");
}

#[derive(Clone, Debug)]
enum Op {
    Get(u64),
    PutOldest,
    Resize(usize),
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        6 => (0u64..12).prop_map(Op::Get),
        5 => Just(Op::PutOldest),
        1 => (1usize..8).prop_map(Op::Resize),
    ];
    prop::collection::vec(op, 1..200)
}

/// A plain model of the pool: held keys (with repeats for repeated holds), inactive keys oldest
/// first, and the heads allocated.
struct Model {
    held: Vec<(u64, HeadId)>,
    inactive: Vec<u64>,
    allocated: usize,
    capacity: usize,
}

impl Model {
    fn distinct_held(&self) -> usize {
        let mut k: Vec<u64> = self.held.iter().map(|(k, _)| *k).collect();
        k.sort_unstable();
        k.dedup();
        k.len()
    }
    fn free(&self) -> usize {
        self.allocated - self.distinct_held() - self.inactive.len()
    }
    /// `Some(hit)` if `get(n)` succeeds.
    fn get(&mut self, n: u64) -> Option<bool> {
        if self.held.iter().any(|(k, _)| *k == n) {
            return Some(true);
        }
        if let Some(pos) = self.inactive.iter().position(|k| *k == n) {
            self.inactive.remove(pos);
            return Some(true);
        }
        if self.free() == 0 {
            if self.inactive.is_empty() {
                return None;
            }
            self.inactive.remove(0);
        }
        Some(false)
    }
    fn put(&mut self, n: u64) {
        if self.held.iter().any(|(k, _)| *k == n) {
            return;
        }
        if self.allocated > self.capacity {
            self.allocated -= 1;
        } else {
            self.inactive.push(n);
        }
    }
    fn resize(&mut self, c: usize) {
        self.capacity = c;
        let target = c.max(self.distinct_held());
        if c > self.allocated {
            self.allocated = c;
            return;
        }
        let mut excess = self.allocated - target;
        let from_free = excess.min(self.free());
        excess -= from_free;
        let from_inactive = excess.min(self.inactive.len());
        self.inactive.drain(..from_inactive);
        self.allocated -= from_free + from_inactive;
    }
}

proptest! {
    #[test]
    fn matches_a_plain_lru_model(ops in ops()) {
        let mut cache = StripeCache::new(4, 3, 512);
        let mut model = Model { held: Vec::new(), inactive: Vec::new(), allocated: 4, capacity: 4 };
        for op in ops {
            match op {
                Op::Get(n) => {
                    let before = cache.stats;
                    let got = cache.get(key(n));
                    if let Some(hit) = model.get(n) {
                        prop_assert!(got.is_some());
                        prop_assert_eq!(cache.stats.hits, before.hits + u64::from(hit));
                        prop_assert_eq!(cache.stats.misses, before.misses + u64::from(!hit));
                        model.held.push((n, got.unwrap()));
                    } else {
                        prop_assert!(got.is_none());
                        prop_assert_eq!(cache.stats.exhausted, before.exhausted + 1);
                    }
                }
                Op::PutOldest => {
                    if model.held.is_empty() { continue; }
                    let (n, id) = model.held.remove(0);
                    cache.put(id);
                    model.put(n);
                }
                Op::Resize(c) => {
                    cache.resize(c);
                    model.resize(c);
                }
            }
            prop_assert_eq!(cache.active(), model.distinct_held());
            prop_assert_eq!(cache.inactive(), model.inactive.len());
            prop_assert_eq!(cache.allocated(), model.allocated);
            prop_assert_eq!(cache.buffer_bytes(), model.allocated * 3 * 512);
        }
    }
}
