//! Plausible values drawn from a bait's seed: each value is SHA-256 of the kind, the seed and a label
//! naming what it is for, so the same seed always gives the same file and one value never repeats
//! another's bytes. Not secrets: the seed is stored beside the token.

use ring::digest::{SHA256, digest};

use super::CanaryKind;

pub(crate) struct Draw<'a> {
    kind: CanaryKind,
    seed: &'a [u8],
}

impl<'a> Draw<'a> {
    pub(crate) fn new(kind: CanaryKind, seed: &'a [u8]) -> Self {
        Draw { kind, seed }
    }

    /// 32 bytes for `label`.
    pub(crate) fn bytes(&self, label: &str) -> [u8; 32] {
        let mut input = Vec::with_capacity(self.seed.len() + label.len() + 24);
        for part in [self.kind.as_str().as_bytes(), self.seed, label.as_bytes()] {
            // Length-prefixed, so ("ab", "c") and ("a", "bc") draw different values.
            input.extend_from_slice(&(part.len() as u64).to_be_bytes());
            input.extend_from_slice(part);
        }
        digest(&SHA256, &input).as_ref().try_into().expect("SHA-256 is 32 bytes")
    }

    /// A number in `low..=high`.
    pub(crate) fn number(&self, label: &str, low: u64, high: u64) -> u64 {
        let bytes = self.bytes(label);
        let value = u64::from_be_bytes(bytes[..8].try_into().unwrap());
        low + value % (high - low + 1)
    }

    pub(crate) fn pick<T: Copy>(&self, label: &str, from: &[T]) -> T {
        from[self.number(label, 0, from.len() as u64 - 1) as usize]
    }

    /// `length` characters of `alphabet`, as many as one label gives (beyond 32 it draws again).
    pub(crate) fn text(&self, label: &str, alphabet: &[u8], length: usize) -> String {
        let mut out = String::with_capacity(length);
        let mut round = 0;
        while out.len() < length {
            for byte in self.bytes(&format!("{label}#{round}")) {
                if out.len() == length {
                    break;
                }
                out.push(alphabet[byte as usize % alphabet.len()] as char);
            }
            round += 1;
        }
        out
    }

    pub(crate) fn hex(&self, label: &str, length: usize) -> String {
        self.text(label, b"0123456789abcdef", length)
    }

    /// A day of `year` (never the 29th–31st, so every month has it) as `(year, month, day)`.
    pub(crate) fn date(&self, label: &str, year: u32) -> (u32, u32, u32) {
        (year, self.number(&format!("{label}/m"), 1, 12) as u32, self.number(&format!("{label}/d"), 1, 28) as u32)
    }
}

pub(crate) const BASE64ISH: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
pub(crate) const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_depend_on_seed_label_and_kind() {
        let draw = Draw::new(CanaryKind::EnvFile, b"seed");
        assert_eq!(draw.bytes("a"), Draw::new(CanaryKind::EnvFile, b"seed").bytes("a"));
        assert_ne!(draw.bytes("a"), draw.bytes("b"));
        assert_ne!(draw.bytes("a"), Draw::new(CanaryKind::GitConfig, b"seed").bytes("a"));
        assert_ne!(draw.bytes("a"), Draw::new(CanaryKind::EnvFile, b"seee").bytes("a"));
        assert_eq!(draw.text("t", ALNUM, 70).len(), 70);
        assert!((3..=5).contains(&draw.number("n", 3, 5)));
    }
}
