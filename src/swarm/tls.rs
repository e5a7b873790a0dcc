//! The swarm's TLS, both directions: a server that requires a client certificate signed by the
//! swarm CA (the agent's API, the master's heartbeat listener) and a client that presents an
//! identity, verifies the CA and **pins** the peer's leaf by its SHA-256 fingerprint, failing
//! closed when no fingerprint is known. TLS 1.2 is the minimum (rustls speaks nothing older);
//! hostname verification toward agents follows `SVC_VERIFY_HOSTNAME`.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::{ParsedCertificate, WebPkiClientVerifier};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, ServerConfig, SignatureScheme};

use super::pki::fingerprint;

/// A certificate chain and its key, as read from PEM; `Debug` shows neither.
#[derive(Clone)]
pub struct Identity {
    chain: Vec<CertificateDer<'static>>,
    key: Arc<PrivateKeyDer<'static>>,
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Identity").finish_non_exhaustive()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum TlsSetupError {
    #[error("no certificate in the PEM")]
    NoCertificate,
    #[error("PEM: {0}")]
    Pem(#[from] rustls::pki_types::pem::Error),
    #[error("TLS: {0}")]
    Tls(#[from] rustls::Error),
    #[error("client verifier: {0}")]
    Verifier(#[from] rustls::server::VerifierBuilderError),
}

impl Identity {
    pub fn from_pem(cert_pem: &str, key_pem: &str) -> Result<Identity, TlsSetupError> {
        let chain = certificates(cert_pem)?;
        let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes())?;
        Ok(Identity { chain, key: Arc::new(key) })
    }

    /// The SHA-256 fingerprint of this identity's leaf.
    pub fn fingerprint(&self) -> String {
        fingerprint(&self.chain[0])
    }
}

fn certificates(pem: &str) -> Result<Vec<CertificateDer<'static>>, TlsSetupError> {
    let chain = CertificateDer::pem_slice_iter(pem.as_bytes()).collect::<Result<Vec<_>, _>>()?;
    if chain.is_empty() {
        return Err(TlsSetupError::NoCertificate);
    }
    Ok(chain)
}

/// The trust anchors of the swarm: its CA alone.
fn roots(ca_pem: &str) -> Result<Arc<RootCertStore>, TlsSetupError> {
    let mut roots = RootCertStore::empty();
    for cert in certificates(ca_pem)? {
        roots.add(cert)?;
    }
    Ok(Arc::new(roots))
}

/// The provider is named rather than taken from the process default, which another part of the
/// process (or none) may have installed.
fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A server presenting `identity` that completes a handshake only with a client certificate the
/// swarm CA signed, TLS 1.2 or 1.3.
pub fn server_config(identity: &Identity, ca_pem: &str) -> Result<Arc<ServerConfig>, TlsSetupError> {
    let provider = provider();
    let verifier = WebPkiClientVerifier::builder_with_provider(roots(ca_pem)?, provider.clone()).build()?;
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?
        .with_client_cert_verifier(verifier)
        .with_single_cert(identity.chain.clone(), identity.key.clone_key())?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// What the client accepts as the server's leaf, beyond the CA's signature.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PeerPin {
    /// The leaf's fingerprint must be this one; `None` (nothing stored for the peer) refuses every
    /// server: a pin that is missing fails closed.
    Fingerprint(Option<String>),
    /// Any leaf the CA signed: an agent's heartbeats to the master, which it knows by its CA only.
    CaSigned,
}

/// A client presenting `identity`, trusting the swarm CA alone, checking `pin`, and the server's name
/// against its certificate when `verify_hostname`.
pub fn client_config(
    identity: &Identity,
    ca_pem: &str,
    pin: PeerPin,
    verify_hostname: bool,
) -> Result<Arc<ClientConfig>, TlsSetupError> {
    let provider = provider();
    let verifier = Arc::new(PinnedVerifier { roots: roots(ca_pem)?, pin, verify_hostname, provider: provider.clone() });
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_client_auth_cert(identity.chain.clone(), identity.key.clone_key())?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The CA's signature, then the name (when asked), then the pin: all three or no handshake.
#[derive(Debug)]
struct PinnedVerifier {
    roots: Arc<RootCertStore>,
    pin: PeerPin,
    verify_hostname: bool,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for PinnedVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let cert = ParsedCertificate::try_from(end_entity)?;
        rustls::client::verify_server_cert_signed_by_trust_anchor(
            &cert,
            &self.roots,
            intermediates,
            now,
            self.provider.signature_verification_algorithms.all,
        )?;
        if self.verify_hostname {
            rustls::client::verify_server_name(&cert, server_name)?;
        }
        match &self.pin {
            PeerPin::CaSigned => {}
            PeerPin::Fingerprint(Some(expected)) if fingerprint(end_entity) == expected.to_ascii_lowercase() => {}
            PeerPin::Fingerprint(Some(_)) => {
                return Err(rustls::Error::General("peer certificate fingerprint mismatch".into()));
            }
            PeerPin::Fingerprint(None) => {
                return Err(rustls::Error::General("no fingerprint stored for this peer".into()));
            }
        }
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}

/// The CN (first common-name attribute of the subject) of a peer's leaf; `None` when absent or
/// unparseable, which callers treat as an unknown peer.
pub fn peer_common_name(der: &[u8]) -> Option<String> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let cn = cert.subject().iter_common_name().next()?.as_str().ok()?.to_string();
    (!cn.is_empty()).then_some(cn)
}

#[cfg(test)]
mod tests;
