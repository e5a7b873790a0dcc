//! Password policy and argon2id hashing. Hashing is deliberately slow; callers on an async runtime
//! must run it on a blocking thread.

use argon2::password_hash::{Output, ParamsString, PasswordHash, SaltString, rand_core::OsRng};
use argon2::{Algorithm, Argon2, Block, Params, Version};

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
const ALGORITHM: Algorithm = Algorithm::Argon2id;
const VERSION: Version = Version::V0x13;

/// argon2's working memory (19 MiB at our cost), kept and reused by whoever hashes. Allocated
/// afresh for every hash, it stays resident in the allocator's arena of each blocking thread that
/// ever hashed: RSS went from 94 MB to about 495 MB after some 30 logins, and stayed.
#[derive(Default)]
pub struct Workspace(Vec<Block>);

impl std::fmt::Debug for Workspace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Workspace").field(&self.0.len()).finish()
    }
}

impl Workspace {
    /// The blocks `params` needs; grows (once) for a stored hash of a higher cost.
    fn blocks(&mut self, params: &Params) -> &mut [Block] {
        let needed = params.block_count();
        if self.0.len() < needed {
            self.0.resize(needed, Block::default());
        }
        &mut self.0[..needed]
    }
}

/// A PHC string (`$argon2id$v=19$…`) with a fresh random salt, hashed in a memory of its own.
pub fn hash(password: &str) -> anyhow::Result<String> {
    hash_in(password, &mut Workspace::default())
}

/// [`hash`] in `workspace`'s memory.
pub fn hash_in(password: &str, workspace: &mut Workspace) -> anyhow::Result<String> {
    let argon2 = |e: argon2::password_hash::Error| anyhow::anyhow!("argon2: {e}");
    let salt = SaltString::generate(&mut OsRng);
    let params = Params::default();
    let mut salt_bytes = [0u8; 64];
    let salt_bytes = salt.as_salt().decode_b64(&mut salt_bytes).map_err(argon2)?;
    let hasher = Argon2::new(ALGORITHM, VERSION, params.clone());
    let output = Output::init_with(Params::DEFAULT_OUTPUT_LEN, |out| {
        Ok(hasher.hash_password_into_with_memory(password.as_bytes(), salt_bytes, out, workspace.blocks(&params))?)
    })
    .map_err(argon2)?;
    let phc = PasswordHash {
        algorithm: ALGORITHM.ident(),
        version: Some(VERSION.into()),
        params: ParamsString::try_from(&params).map_err(argon2)?,
        salt: Some(salt.as_salt()),
        hash: Some(output),
    };
    Ok(phc.to_string())
}

/// False for a wrong password and for a hash that is not a valid PHC string.
pub fn verify(password: &str, phc: &str) -> bool {
    verify_in(password, phc, &mut Workspace::default())
}

/// [`verify`] in `workspace`'s memory.
pub fn verify_in(password: &str, phc: &str, workspace: &mut Workspace) -> bool {
    let mut computed = || -> Option<bool> {
        let parsed = PasswordHash::new(phc).ok()?;
        let algorithm = Algorithm::try_from(parsed.algorithm).ok()?;
        let version = parsed.version.map(Version::try_from).transpose().ok()?.unwrap_or_default();
        let params = Params::try_from(&parsed).ok()?;
        let (salt, expected) = (parsed.salt?, parsed.hash?);
        let mut salt_bytes = [0u8; 64];
        let salt_bytes = salt.decode_b64(&mut salt_bytes).ok()?;
        let hasher = Argon2::new(algorithm, version, params.clone());
        let output = Output::init_with(expected.len(), |out| {
            Ok(hasher.hash_password_into_with_memory(
                password.as_bytes(),
                salt_bytes,
                out,
                workspace.blocks(&params),
            )?)
        })
        .ok()?;
        // `Output` compares in constant time.
        Some(output == expected)
    };
    computed().unwrap_or(false)
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

    #[test]
    fn a_reused_workspace_hashes_and_verifies_like_a_fresh_one() {
        let mut workspace = Workspace::default();
        let phc = hash_in("correct horse battery", &mut workspace).unwrap();
        assert!(verify_in("correct horse battery", &phc, &mut workspace));
        assert!(!verify_in("correct horse batterx", &phc, &mut workspace));
        assert!(verify("correct horse battery", &phc), "a fresh memory agrees");
        // A hash of another cost (as an older release might have stored) verifies too.
        let cheap = Argon2::new(ALGORITHM, VERSION, Params::new(64, 1, 1, None).unwrap());
        let salt = SaltString::generate(&mut OsRng);
        use argon2::password_hash::PasswordHasher;
        let other = cheap.hash_password(b"correct horse battery", &salt).unwrap().to_string();
        assert!(verify_in("correct horse battery", &other, &mut workspace));
    }
}
