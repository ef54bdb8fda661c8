//! A fast hasher for keys that are already spread out: node addresses (`UOp`'s `Hash`) and
//! precomputed 64-bit hashes (the intern table's keys).
//!
//! std's default SipHash resists keys chosen by an attacker, which these are not, and costs
//! tens of nanoseconds per key: walking and building graphs hash every node they meet, so it
//! was the largest single cost of dispatching a cached plan. This is a multiply-rotate hash in
//! the manner of the Fx hash: one multiplication per word.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

/// The fast hasher (see the module docs).
#[derive(Clone, Copy, Debug, Default)]
pub struct FastHasher(u64);

/// An odd constant with well-mixed bits (from the golden ratio).
const SEED: u64 = 0x9e37_79b9_7f4a_7c15;

impl Hasher for FastHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(SEED);
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }

    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }

    fn write_u8(&mut self, n: u8) {
        self.write_u64(u64::from(n));
    }

    fn finish(&self) -> u64 {
        // The product's high bits are the mixed ones; hash tables index by the low bits.
        self.0.rotate_left(26)
    }
}

/// Builds [`FastHasher`]s.
pub type FastBuild = BuildHasherDefault<FastHasher>;

/// A `HashMap` hashed with [`FastHasher`] (keys: nodes or precomputed hashes).
pub type FastMap<K, V> = HashMap<K, V, FastBuild>;

/// A `HashSet` hashed with [`FastHasher`].
pub type FastSet<K> = HashSet<K, FastBuild>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    #[test]
    fn aligned_addresses_spread_over_the_low_bits() {
        let build = FastBuild::default();
        let buckets: HashSet<u64> = (0..256u64)
            .map(|i| build.hash_one(0x7f00_0000_1000 + 64 * i) & 255)
            .collect();
        assert!(buckets.len() > 128, "{} of 256 buckets used", buckets.len());
    }

    #[test]
    fn equal_keys_hash_equal_and_bytes_match_words() {
        let build = FastBuild::default();
        assert_eq!(build.hash_one(42usize), build.hash_one(42usize));
        assert_ne!(build.hash_one(1u64), build.hash_one(2u64));
        let mut by_bytes = FastHasher::default();
        by_bytes.write(&7u64.to_le_bytes());
        let mut by_word = FastHasher::default();
        by_word.write_u64(7);
        assert_eq!(by_bytes.finish(), by_word.finish());
    }
}
