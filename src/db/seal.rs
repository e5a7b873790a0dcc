//! Secrets the service must read back in full (a webhook's signing key: the sender computes an HMAC
//! with it, so a hash would not do) are stored sealed: AES-256-GCM under a key kept outside the
//! database, in `SVC_SECRETS_KEY_FILE` (by default `secrets.key` in the data directory), 64 hex
//! characters made 0600 on first need. A copy of the database alone (a backup, a dump, a read
//! through an injection) then does not reveal them. A sealed value reads `sealed:v1:<hex of nonce,
//! ciphertext and tag>`; a value without that prefix is a plaintext one an earlier version stored,
//! read as it is and sealed when the API starts (`WebhookStore::seal_webhook_secrets`).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use ring::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::rand::{SecureRandom, SystemRandom};

use super::{DbError, DbResult};

const SEALED: &str = "sealed:v1:";
const KEY_BYTES: usize = 32;

/// The sealing key of one database, read (or made) on first use.
pub struct Seal {
    key_file: PathBuf,
    key: OnceLock<LessSafeKey>,
}

impl std::fmt::Debug for Seal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Seal").field("key_file", &self.key_file).finish_non_exhaustive()
    }
}

fn corrupt(message: String) -> DbError {
    DbError::Corrupt(anyhow::anyhow!(message))
}

impl Seal {
    pub fn new(key_file: &Path) -> Seal {
        Seal { key_file: key_file.to_path_buf(), key: OnceLock::new() }
    }

    /// Whether a stored value is already sealed.
    pub fn is_sealed(stored: &str) -> bool {
        stored.starts_with(SEALED)
    }

    /// The stored form of `secret`.
    pub fn seal(&self, secret: &str) -> DbResult<String> {
        let mut nonce = [0u8; NONCE_LEN];
        SystemRandom::new()
            .fill(&mut nonce)
            .map_err(|_| DbError::Other(anyhow::anyhow!("no randomness for a nonce")))?;
        let mut sealed = secret.as_bytes().to_vec();
        self.key()?
            .seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), Aad::empty(), &mut sealed)
            .map_err(|_| DbError::Other(anyhow::anyhow!("sealing a secret failed")))?;
        let hex: String = crate::text::hex(&[nonce.as_slice(), &sealed].concat());
        Ok(format!("{SEALED}{hex}"))
    }

    /// The secret a stored value holds; a plaintext one (an earlier version's) as it is.
    pub fn open(&self, stored: &str) -> DbResult<String> {
        let Some(hex) = stored.strip_prefix(SEALED) else { return Ok(stored.to_string()) };
        let mut bytes = decode_hex(hex).ok_or_else(|| corrupt("a sealed secret is not hex".into()))?;
        if bytes.len() < NONCE_LEN {
            return Err(corrupt("a sealed secret is too short".into()));
        }
        let mut nonce = [0u8; NONCE_LEN];
        nonce.copy_from_slice(&bytes[..NONCE_LEN]);
        let plain = self
            .key()?
            .open_in_place(Nonce::assume_unique_for_key(nonce), Aad::empty(), &mut bytes[NONCE_LEN..])
            .map_err(|_| {
                corrupt(format!("a sealed secret does not open with the key in {}", self.key_file.display()))
            })?;
        String::from_utf8(plain.to_vec()).map_err(|_| corrupt("a sealed secret is not text".into()))
    }

    fn key(&self) -> DbResult<&LessSafeKey> {
        if let Some(key) = self.key.get() {
            return Ok(key);
        }
        let bytes = load_or_make_key(&self.key_file)
            .map_err(|e| DbError::Other(anyhow::anyhow!("secrets key {}: {e}", self.key_file.display())))?;
        let key = UnboundKey::new(&AES_256_GCM, &bytes).map_err(|_| corrupt("the secrets key is malformed".into()))?;
        Ok(self.key.get_or_init(|| LessSafeKey::new(key)))
    }
}

/// The key in `path`; a missing file is made (0600) with a fresh key. Of two processes making it at
/// once, one writes and both read what it wrote.
fn load_or_make_key(path: &Path) -> std::io::Result<Vec<u8>> {
    if !path.exists() {
        let mut key = [0u8; KEY_BYTES];
        SystemRandom::new().fill(&mut key).map_err(|_| std::io::Error::other("no randomness for a key"))?;
        let hex: String = crate::text::hex(&key);
        if let Some(dir) = path.parent() {
            crate::file_modes::create_private_dirs(dir)?;
        }
        let created = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode_private()
            .open(path)
            .and_then(|mut file| file.write_all(format!("{hex}\n").as_bytes()).and_then(|()| file.sync_all()));
        match created {
            Ok(()) => {
                tracing::info!(path = %path.display(), "Made the key that seals stored secrets; back it up with the database")
            }
            Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(err) => return Err(err),
        }
    }
    crate::file_modes::tighten(path, crate::file_modes::PRIVATE_FILE)?;
    let mut text = String::new();
    std::fs::File::open(path)?.read_to_string(&mut text)?;
    decode_hex(text.trim())
        .filter(|key| key.len() == KEY_BYTES)
        .ok_or_else(|| std::io::Error::other("not 64 hex characters"))
}

/// `create_new` files made 0600.
trait PrivateMode {
    fn mode_private(&mut self) -> &mut Self;
}

impl PrivateMode for std::fs::OpenOptions {
    fn mode_private(&mut self) -> &mut Self {
        std::os::unix::fs::OpenOptionsExt::mode(self, crate::file_modes::PRIVATE_FILE)
    }
}

fn decode_hex(hex: &str) -> Option<Vec<u8>> {
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    (0..hex.len()).step_by(2).map(|at| u8::from_str_radix(hex.get(at..at + 2)?, 16).ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_secret_seals_opens_and_needs_its_key() {
        let dir = tempfile::tempdir().unwrap();
        let key_file = dir.path().join("keys/secrets.key");
        let seal = Seal::new(&key_file);
        let sealed = seal.seal("a webhook signing secret").unwrap();
        assert!(Seal::is_sealed(&sealed) && !sealed.contains("signing"), "{sealed}");
        assert_ne!(sealed, seal.seal("a webhook signing secret").unwrap(), "a fresh nonce each time");
        assert_eq!(seal.open(&sealed).unwrap(), "a webhook signing secret");
        assert_eq!(seal.open("plaintext of old").unwrap(), "plaintext of old");
        assert_eq!(std::fs::metadata(&key_file).unwrap().permissions().mode() & 0o777, 0o600);

        // The same file opens it in another process; another key does not.
        assert_eq!(Seal::new(&key_file).open(&sealed).unwrap(), "a webhook signing secret");
        let other = Seal::new(&dir.path().join("other.key"));
        assert!(matches!(other.open(&sealed), Err(DbError::Corrupt(_))));
        let mut forged = sealed.clone();
        let flipped = if forged.ends_with("00") { "01" } else { "00" };
        forged.replace_range(forged.len() - 2.., flipped);
        assert!(seal.open(&forged).is_err(), "a changed byte fails the tag");
    }
}
