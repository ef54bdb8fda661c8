//! A content hash that is the same in every build, process and machine: FNV-1a with 128 bits.
//!
//! Cache keys must survive a rebuild of the program, which `std`'s `DefaultHasher` does not
//! promise. FNV-1a is not cryptographic; it names cache entries and detects accidental
//! corruption, it does not defend against someone who can write to the cache directory.

const OFFSET_BASIS: u128 = 0x6c62272e07bb014262b821756295c58d;
const PRIME: u128 = 0x0000000001000000000000000000013b;

/// An incremental FNV-1a 128-bit hasher.
#[derive(Clone, Copy, Debug)]
pub struct StableHasher {
    state: u128,
}

impl Default for StableHasher {
    fn default() -> Self {
        StableHasher {
            state: OFFSET_BASIS,
        }
    }
}

impl StableHasher {
    /// A hasher over no bytes yet.
    pub fn new() -> StableHasher {
        StableHasher::default()
    }

    /// Feeds raw bytes.
    pub fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.state ^= u128::from(byte);
            self.state = self.state.wrapping_mul(PRIME);
        }
    }

    /// Feeds one field of a record: its length first, so that ("ab", "c") and ("a", "bc")
    /// hash differently.
    pub fn write_field(&mut self, bytes: &[u8]) {
        self.write(&(bytes.len() as u64).to_le_bytes());
        self.write(bytes);
    }

    /// The hash of everything fed so far.
    pub fn finish(&self) -> u128 {
        self.state
    }
}

/// The FNV-1a 128 hash of `bytes`.
pub fn stable_hash(bytes: &[u8]) -> u128 {
    let mut hasher = StableHasher::new();
    hasher.write(bytes);
    hasher.finish()
}

/// A hash as 32 lowercase hex digits, for file names.
pub fn to_hex(hash: u128) -> String {
    format!("{hash:032x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_published_fnv1a_128_vectors() {
        assert_eq!(stable_hash(b""), 0x6c62272e07bb014262b821756295c58d);
        assert_eq!(stable_hash(b"a"), 0xd228cb696f1a8caf78912b704e4a8964);
        assert_eq!(stable_hash(b"foobar"), 0x343e1662793c64bf6f0d3597ba446f18);
    }

    #[test]
    fn fields_are_length_framed() {
        let hash = |fields: &[&[u8]]| {
            let mut h = StableHasher::new();
            fields.iter().for_each(|f| h.write_field(f));
            h.finish()
        };
        assert_ne!(hash(&[b"ab", b"c"]), hash(&[b"a", b"bc"]));
    }

    #[test]
    fn hex_is_fixed_width() {
        assert_eq!(to_hex(1).len(), 32);
        assert_eq!(to_hex(0xab), "000000000000000000000000000000ab");
    }
}
