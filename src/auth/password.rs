//! Password policy and argon2id hashing. Hashing is deliberately slow; callers on an async runtime
//! must run it on a blocking thread.

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString, rand_core::OsRng};
use argon2::{Algorithm, Argon2, Params, Version};

/// Shortest password accepted, in characters.
pub const MIN_CHARS: usize = 12;
/// Longest password accepted, in UTF-8 bytes; longer ones are rejected, never truncated.
pub const MAX_BYTES: usize = 72;

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    #[error("password must be at least {MIN_CHARS} characters")]
    TooShort,
    #[error("password must be at most {MAX_BYTES} bytes")]
    TooLong,
}

pub fn check_policy(password: &str) -> Result<(), PolicyError> {
    if password.len() > MAX_BYTES {
        return Err(PolicyError::TooLong);
    }
    if password.chars().count() < MIN_CHARS {
        return Err(PolicyError::TooShort);
    }
    Ok(())
}

/// argon2id with the OWASP-recommended cost (19 MiB, 2 passes, 1 lane).
fn hasher() -> Argon2<'static> {
    Argon2::new(Algorithm::Argon2id, Version::V0x13, Params::default())
}

/// A PHC string (`$argon2id$v=19$…`) with a fresh random salt.
pub fn hash(password: &str) -> anyhow::Result<String> {
    let salt = SaltString::generate(&mut OsRng);
    let phc = hasher().hash_password(password.as_bytes(), &salt).map_err(|e| anyhow::anyhow!("argon2: {e}"))?;
    Ok(phc.to_string())
}

/// False for a wrong password and for a hash that is not a valid PHC string.
pub fn verify(password: &str, phc: &str) -> bool {
    PasswordHash::new(phc).is_ok_and(|parsed| hasher().verify_password(password.as_bytes(), &parsed).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_bounds() {
        assert_eq!(check_policy("elevenchars"), Err(PolicyError::TooShort));
        assert_eq!(check_policy("twelve chars"), Ok(()));
        assert_eq!(check_policy(&"x".repeat(72)), Ok(()));
        assert_eq!(check_policy(&"x".repeat(73)), Err(PolicyError::TooLong));
        // 24 three-byte characters are 72 bytes; one more is over the byte limit though only 25 chars.
        assert_eq!(check_policy(&"€".repeat(24)), Ok(()));
        assert_eq!(check_policy(&"€".repeat(25)), Err(PolicyError::TooLong));
    }

    #[test]
    fn hash_is_argon2id_and_verifies() {
        let phc = hash("correct horse battery").unwrap();
        assert!(phc.starts_with("$argon2id$"));
        assert!(verify("correct horse battery", &phc));
        assert!(!verify("correct horse batterx", &phc));
        assert!(!verify("correct horse battery", "not-a-hash"));
        assert_ne!(phc, hash("correct horse battery").unwrap(), "salt must be random");
    }
}
