//! The HTTPS decoy's TLS: a self-signed certificate made at start for the site's name, the way a
//! freshly installed Apache's snakeoil certificate looks (CN and SAN = the host name, ten years),
//! served by rustls on the ring provider so that the sniffer sees real handshakes.

use std::sync::Arc;

use anyhow::Context;
use chrono::{Datelike, Days, NaiveDate, Utc};
use rcgen::{CertificateParams, DistinguishedName, DnType, KeyPair, date_time_ymd};
use rustls::ServerConfig;
use rustls::pki_types::PrivatePkcs8KeyDer;
use tokio_rustls::TlsAcceptor;

/// How long before today the certificate says it was made: a decoy installed a while ago.
const ISSUED_DAYS_AGO: u64 = 30;
/// `make-ssl-cert`'s validity.
const VALID_DAYS: u64 = 3650;

/// The acceptor every HTTPS connection of this process goes through, with a new key and
/// certificate for `name`.
pub fn acceptor(name: &str) -> anyhow::Result<TlsAcceptor> {
    let key = KeyPair::generate().context("generating the TLS key")?;
    let mut params = CertificateParams::new(vec![name.to_string()])
        .with_context(|| format!("`{name}` cannot name a certificate"))?;
    let mut subject = DistinguishedName::new();
    subject.push(DnType::CommonName, name);
    params.distinguished_name = subject;
    let today = Utc::now().date_naive();
    let day = |date: Option<NaiveDate>| {
        let date = date.unwrap_or(today);
        // chrono's months and days are 1..=12 and 1..=31.
        date_time_ymd(date.year(), date.month() as u8, date.day() as u8)
    };
    params.not_before = day(today.checked_sub_days(Days::new(ISSUED_DAYS_AGO)));
    params.not_after = day(today.checked_add_days(Days::new(VALID_DAYS - ISSUED_DAYS_AGO)));
    let cert = params.self_signed(&key).context("signing the TLS certificate")?;

    // The provider is named here rather than taken from the process default, which another part
    // of the process (or none) may have installed.
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("TLS protocol versions")?
        .with_no_client_auth()
        .with_single_cert(vec![cert.der().clone()], PrivatePkcs8KeyDer::from(key.serialize_der()).into())
        .context("TLS server configuration")?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}
