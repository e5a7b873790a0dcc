//! The deterministic draws synthetic files are made from: a SplitMix64 sequence seeded from a hash
//! of what the draw is about (a decky and a persona), so the same fleet and personas give the same
//! files on every request and every replica, with nothing stored.

use sha2::{Digest, Sha256};

/// A seeded sequence of draws.
#[derive(Debug, Clone)]
pub struct Draw(u64);

impl Draw {
    /// The sequence named by `parts` (joined unambiguously).
    pub fn of(parts: &[&str]) -> Draw {
        Draw(u64::from_be_bytes(digest(parts)[..8].try_into().expect("8 bytes")))
    }

    pub fn seeded(seed: u64) -> Draw {
        Draw(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `low..=high`.
    pub fn within(&mut self, low: u64, high: u64) -> u64 {
        low + self.next_u64() % (high - low + 1)
    }

    /// A number in `0..below` (`below` > 0), over a wide range.
    pub fn below(&mut self, below: u128) -> u128 {
        ((u128::from(self.next_u64()) << 64) | u128::from(self.next_u64())) % below
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        ((self.next_u64() >> 11) as f64) / ((1u64 << 53) as f64) < p
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.next_u64() as usize % items.len()]
    }

    /// `k` distinct items of `items`, in the order drawn.
    pub fn sample<'a, T>(&mut self, items: &'a [T], k: usize) -> Vec<&'a T> {
        let mut left: Vec<&T> = items.iter().collect();
        let mut out = Vec::with_capacity(k.min(left.len()));
        while out.len() < k && !left.is_empty() {
            let at = self.next_u64() as usize % left.len();
            out.push(left.swap_remove(at));
        }
        out
    }
}

/// The SHA-256 of `parts`, each prefixed by its length.
pub fn digest(parts: &[&str]) -> [u8; 32] {
    let mut hash = Sha256::new();
    for part in parts {
        hash.update((part.len() as u64).to_be_bytes());
        hash.update(part.as_bytes());
    }
    hash.finalize().into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_name_draws_the_same_sequence() {
        let (mut a, mut b) = (Draw::of(&["decky-01", "Ana"]), Draw::of(&["decky-01", "Ana"]));
        let first: Vec<u64> = (0..5).map(|_| a.next_u64()).collect();
        assert_eq!(first, (0..5).map(|_| b.next_u64()).collect::<Vec<_>>());
        assert_ne!(Draw::of(&["decky-01", "Bob"]).next_u64(), first[0]);
        assert_ne!(Draw::of(&["decky-0", "1Ana"]).next_u64(), first[0], "parts are joined unambiguously");
        let mut d = Draw::seeded(7);
        assert!((0..1000).all(|_| (3..=6).contains(&d.within(3, 6))));
        assert_eq!(d.sample(&[1, 2, 3], 5).len(), 3);
    }
}
