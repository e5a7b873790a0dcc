//! Stream tickets: opaque, single use, short-lived. Only a ticket's SHA-256 is stored, so reading the
//! database does not let anyone open a stream.

use std::time::Duration;

use sha2::{Digest, Sha256};
use uuid::Uuid;

pub const TICKET_LIFETIME: Duration = Duration::from_secs(60);

/// A fresh ticket: 244 random bits from two v4 UUIDs, as 64 hex characters.
pub fn new_ticket() -> String {
    format!("{}{}", Uuid::new_v4().simple(), Uuid::new_v4().simple())
}

/// What the database stores and looks tickets up by.
pub fn ticket_hash(ticket: &str) -> String {
    crate::text::hex(&Sha256::digest(ticket.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tickets_are_unique_and_hash_stably() {
        let (a, b) = (new_ticket(), new_ticket());
        assert_ne!(a, b);
        assert_eq!(a.len(), 64);
        assert_eq!(ticket_hash(&a), ticket_hash(&a));
        assert_ne!(ticket_hash(&a), ticket_hash(&b));
        assert_eq!(ticket_hash("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }
}
