//! The swarm's private certificate authority: one ECDSA P-256 CA created on first use in the master's
//! data directory (key 0600 in a 0700 directory, never logged), the leaf certificates it issues to
//! the master, each agent and each updater (the role is the certificate's CN), and the fingerprint
//! (lowercase hex SHA-256 of a certificate's DER) by which the master pins every peer it talks to.

use std::io::Write;
use std::net::IpAddr;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, DnValue, ExtendedKeyUsagePurpose, IsCa, Issuer,
    KeyPair, KeyUsagePurpose, PKCS_ECDSA_P256_SHA256, SanType, SerialNumber,
};
use rustls::pki_types::pem::PemObject;
use sha2::{Digest, Sha256};

/// The CN of the master's one client (and heartbeat-listener) identity: the only CN the agents'
/// mutating routes accept.
pub const MASTER_CN: &str = "svc-master";

const CA_CN: &str = "svc swarm root CA";
const ORGANIZATION: &str = "svc";
const CA_VALID_DAYS: i64 = 3650;
const LEAF_VALID_DAYS: i64 = 825;
/// Backdating absorbs clock skew between the master and a freshly enrolled host.
const BACKDATE_MINUTES: i64 = 5;

/// The CN of an agent's certificate: its name.
pub fn agent_cn(agent_name: &str) -> String {
    agent_name.to_string()
}

/// The CN of an agent's updater certificate.
pub fn updater_cn(agent_name: &str) -> String {
    format!("updater@{agent_name}")
}

/// Lowercase hex SHA-256 of a certificate's DER bytes: what the master stores and pins.
pub fn fingerprint(der: &[u8]) -> String {
    crate::text::hex(&Sha256::digest(der))
}

#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    #[error("CA directory {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("certificate: {0}")]
    Certificate(#[from] rcgen::Error),
}

/// A certificate and its private key, PEM; `Debug` leaves the key out.
#[derive(Clone)]
pub struct Leaf {
    pub cert_pem: String,
    pub key_pem: String,
    pub fingerprint: String,
}

impl std::fmt::Debug for Leaf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Leaf").field("fingerprint", &self.fingerprint).finish_non_exhaustive()
    }
}

/// The CA: its certificate (shared with every host) and its key (never leaves `dir`).
pub struct Ca {
    cert_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl std::fmt::Debug for Ca {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ca").finish_non_exhaustive()
    }
}

impl Ca {
    /// The CA kept in `dir` (`ca.key`, `ca.crt`), created there on first use.
    pub fn load_or_create(dir: &Path) -> Result<Ca, PkiError> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| PkiError::Io { path, source }
        };
        let (key_path, cert_path) = (dir.join("ca.key"), dir.join("ca.crt"));
        if key_path.exists() && cert_path.exists() {
            let key = KeyPair::from_pem(&std::fs::read_to_string(&key_path).map_err(io(&key_path))?)?;
            let cert_pem = std::fs::read_to_string(&cert_path).map_err(io(&cert_path))?;
            return Ok(Ca { cert_pem, issuer: Issuer::new(ca_params(), key) });
        }
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(io(dir))?;
        let _lock = first_use_lock(dir).map_err(io(dir))?;
        if key_path.exists() && cert_path.exists() {
            return Ca::load_or_create(dir);
        }
        let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
        let mut params = ca_params();
        params.not_before = now() - time::Duration::minutes(BACKDATE_MINUTES);
        params.not_after = now() + time::Duration::days(CA_VALID_DAYS);
        params.serial_number = Some(random_serial());
        let cert_pem = params.self_signed(&key)?.pem();
        // The key is written before the certificate: a certificate on disk always has its key.
        write_private(&key_path, &key.serialize_pem()).map_err(io(&key_path))?;
        std::fs::write(&cert_path, &cert_pem).map_err(io(&cert_path))?;
        Ok(Ca { cert_pem, issuer: Issuer::new(ca_params(), key) })
    }

    /// The CA's certificate, PEM: every host's trust anchor.
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// A fresh key and a certificate for `cn`, valid for server and client authentication; its SANs
    /// are each of `sans` (an IP address if it parses as one, else a DNS name) and the CN.
    pub fn issue(&self, cn: &str, sans: &[String]) -> Result<Leaf, PkiError> {
        let names: Vec<&str> = sans.iter().map(|s| s.as_str()).chain(std::iter::once(cn)).collect();
        self.issue_with_common_name(DnValue::Utf8String(cn.into()), &names)
    }

    /// A leaf as [`Ca::issue`] makes, whose common name is `cn` exactly as given (any string type
    /// X.509 allows) and whose SANs are `sans` alone: how a test presents a peer of the CA whose
    /// name is empty or unparseable.
    pub fn issue_with_common_name(&self, cn: DnValue, sans: &[&str]) -> Result<Leaf, PkiError> {
        let mut names: Vec<SanType> = Vec::new();
        for &entry in sans {
            let san = match entry.parse::<IpAddr>() {
                Ok(ip) => SanType::IpAddress(ip),
                Err(_) => SanType::DnsName(entry.to_string().try_into()?),
            };
            if !names.contains(&san) {
                names.push(san);
            }
        }
        let mut params = CertificateParams::default();
        params.subject_alt_names = names;
        let mut subject = DistinguishedName::new();
        subject.push(DnType::CommonName, cn);
        subject.push(DnType::OrganizationName, ORGANIZATION);
        params.distinguished_name = subject;
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
        params.not_before = now() - time::Duration::minutes(BACKDATE_MINUTES);
        params.not_after = now() + time::Duration::days(LEAF_VALID_DAYS);
        params.serial_number = Some(random_serial());
        params.use_authority_key_identifier_extension = true;
        let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(Leaf { cert_pem: cert.pem(), key_pem: key.serialize_pem(), fingerprint: fingerprint(cert.der()) })
    }
}

impl Ca {
    /// The master's identity (CN `svc-master`), kept in `dir` (`master.crt`, `master.key` 0600)
    /// and issued there on first use.
    pub fn master_leaf(&self, dir: &Path) -> Result<Leaf, PkiError> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| PkiError::Io { path, source }
        };
        let (cert_path, key_path) = (dir.join("master.crt"), dir.join("master.key"));
        if cert_path.exists() && key_path.exists() {
            let cert_pem = std::fs::read_to_string(&cert_path).map_err(io(&cert_path))?;
            let key_pem = std::fs::read_to_string(&key_path).map_err(io(&key_path))?;
            let der = rustls::pki_types::CertificateDer::from_pem_slice(cert_pem.as_bytes())
                .map_err(|err| PkiError::Io { path: cert_path.clone(), source: std::io::Error::other(err) })?;
            return Ok(Leaf { fingerprint: fingerprint(&der), cert_pem, key_pem });
        }
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(io(dir))?;
        let _lock = first_use_lock(dir).map_err(io(dir))?;
        if cert_path.exists() && key_path.exists() {
            return self.master_leaf(dir);
        }
        let leaf = self.issue(MASTER_CN, &["127.0.0.1".to_string(), "localhost".to_string()])?;
        write_private(&key_path, &leaf.key_pem).map_err(io(&key_path))?;
        std::fs::write(&cert_path, &leaf.cert_pem).map_err(io(&cert_path))?;
        Ok(leaf)
    }
}

/// The CA's own parameters; rebuilt alike on every load, so the issuer name and key identifier of
/// what it signs match the certificate made at creation.
fn ca_params() -> CertificateParams {
    let mut params = CertificateParams::default();
    params.distinguished_name = distinguished_name(CA_CN);
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    params
}

fn distinguished_name(cn: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, cn);
    dn.push(DnType::OrganizationName, ORGANIZATION);
    dn
}

fn now() -> time::OffsetDateTime {
    time::OffsetDateTime::now_utc()
}

/// 16 random bytes, high bit clear (a positive serial, as X.509 wants).
fn random_serial() -> SerialNumber {
    let mut bytes = *uuid::Uuid::new_v4().as_bytes();
    bytes[0] &= 0x7f;
    SerialNumber::from_slice(&bytes)
}

/// An exclusive lock on `dir/.lock`, held while files are made there on first use: the API's
/// heartbeat and log listeners start together, and each would otherwise make its own CA.
fn first_use_lock(dir: &Path) -> std::io::Result<std::fs::File> {
    let file =
        std::fs::OpenOptions::new().create(true).truncate(false).write(true).mode(0o600).open(dir.join(".lock"))?;
    rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive)?;
    Ok(file)
}

/// Writes `text` to a new file readable by its owner only (created 0600, never wider for a moment).
pub fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    let mut file = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(path)?;
    file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    file.write_all(text.as_bytes())?;
    file.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::pki_types::pem::PemObject;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn the_ca_is_created_once_with_a_private_key_and_reloaded_alike() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("ca");
        let first = Ca::load_or_create(&dir).unwrap();
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&dir.join("ca.key")), 0o600);
        let again = Ca::load_or_create(&dir).unwrap();
        assert_eq!(first.cert_pem(), again.cert_pem(), "a second load keeps the first CA");
        assert!(!format!("{first:?}").contains("PRIVATE"));
    }

    #[test]
    fn leaves_carry_the_role_names_and_addresses_and_are_fingerprinted() {
        let tmp = tempfile::tempdir().unwrap();
        let ca = Ca::load_or_create(tmp.path()).unwrap();
        let leaf = ca.issue(&agent_cn("worker-1"), &["10.231.1.2".to_string(), "sensor.example".to_string()]).unwrap();
        let der = rustls::pki_types::CertificateDer::from_pem_slice(leaf.cert_pem.as_bytes()).unwrap();
        assert_eq!(leaf.fingerprint, fingerprint(&der));
        assert_eq!(leaf.fingerprint.len(), 64);
        assert!(leaf.fingerprint.chars().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
        assert!(!format!("{leaf:?}").contains("PRIVATE"));
        let parsed = rustls::server::ParsedCertificate::try_from(&der).unwrap();
        for name in ["10.231.1.2", "sensor.example", "worker-1"] {
            let server_name = rustls::pki_types::ServerName::try_from(name).unwrap();
            rustls::client::verify_server_name(&parsed, &server_name).unwrap();
        }
        let other = rustls::pki_types::ServerName::try_from("10.231.1.3").unwrap();
        assert!(rustls::client::verify_server_name(&parsed, &other).is_err());
        assert_eq!(updater_cn("worker-1"), "updater@worker-1");
    }

    #[test]
    fn a_leaf_chains_to_its_ca_after_a_reload_and_not_to_another() {
        let tmp = tempfile::tempdir().unwrap();
        let ca = Ca::load_or_create(&tmp.path().join("a")).unwrap();
        let reloaded = Ca::load_or_create(&tmp.path().join("a")).unwrap();
        let stranger = Ca::load_or_create(&tmp.path().join("b")).unwrap();
        let leaf = reloaded.issue(MASTER_CN, &["127.0.0.1".to_string()]).unwrap();
        let verify = |ca: &Ca| {
            let mut roots = rustls::RootCertStore::empty();
            roots.add(rustls::pki_types::CertificateDer::from_pem_slice(ca.cert_pem().as_bytes()).unwrap()).unwrap();
            let der = rustls::pki_types::CertificateDer::from_pem_slice(leaf.cert_pem.as_bytes()).unwrap();
            let parsed = rustls::server::ParsedCertificate::try_from(&der).unwrap();
            let algs = rustls::crypto::ring::default_provider().signature_verification_algorithms.all;
            rustls::client::verify_server_cert_signed_by_trust_anchor(
                &parsed,
                &roots,
                &[],
                rustls::pki_types::UnixTime::now(),
                algs,
            )
        };
        verify(&ca).unwrap();
        assert!(verify(&stranger).is_err());
    }
}
