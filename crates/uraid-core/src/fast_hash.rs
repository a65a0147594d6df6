//! The engine's hash maps, keyed by its own small integers (I/O tags, head ids, stripe keys),
//! hashed with one multiply per word instead of std's SipHash. SipHash resists keys chosen by
//! an attacker, which these are not (the engine makes them), and it was about 5% of a worker's
//! CPU on 1 MiB writes served over NBD (`uraid bench serve`: `hash_one` and
//! `DefaultHasher::write` under every head and I/O lookup). The hasher has no random state, so
//! iteration order is the same in every run (deterministic, as the simulator wants).

use std::hash::{BuildHasherDefault, Hasher};

/// `std::collections::HashMap` with `WordHasher`; make one with `HashMap::default()`.
pub type HashMap<K, V> = std::collections::HashMap<K, V, BuildHasherDefault<WordHasher>>;
/// `std::collections::HashSet` with `WordHasher`.
pub type HashSet<K> = std::collections::HashSet<K, BuildHasherDefault<WordHasher>>;

/// The rustc/Firefox "Fx" mix: rotate, xor in the word, multiply by an odd constant (the
/// multiply spreads every key bit into the high bits the table's control bytes use, and maps
/// distinct low bits of sequential keys to distinct low bits, the bucket index).
#[derive(Clone, Copy, Default)]
pub struct WordHasher(u64);

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl WordHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for WordHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
    }

    fn write_u8(&mut self, n: u8) {
        self.add(u64::from(n));
    }

    fn write_u16(&mut self, n: u16) {
        self.add(u64::from(n));
    }

    fn write_u32(&mut self, n: u32) {
        self.add(u64::from(n));
    }

    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }

    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    #[test]
    fn sequential_keys_hash_apart_and_maps_work() {
        let build = BuildHasherDefault::<WordHasher>::default();
        let hashes: std::collections::BTreeSet<u64> =
            (0..10_000u64).map(|k| build.hash_one(k)).collect();
        assert_eq!(hashes.len(), 10_000, "no two of the first 10,000 tags collide");
        let low: std::collections::BTreeSet<u64> =
            (0..1024u64).map(|k| build.hash_one(k) & 1023).collect();
        assert_eq!(low.len(), 1024, "1024 sequential tags fill 1024 buckets");
        assert_eq!(build.hash_one((7u64, 3u32)), build.hash_one((7u64, 3u32)), "no random state");
        assert_ne!(build.hash_one((7u64, 3u32)), build.hash_one((3u64, 7u32)));
        let mut m: HashMap<u64, u64> = HashMap::default();
        for k in 0..1000 {
            m.insert(k, k * 2);
        }
        assert!((0..1000).all(|k| m[&k] == k * 2));
        let s: HashSet<u32> = (0..100).collect();
        assert!(s.contains(&99) && !s.contains(&100));
    }
}
