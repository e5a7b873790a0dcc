//! The TLS leaf certificate a server presents: a TLS 1.2/1.3 handshake whose verifier keeps the
//! leaf and then ends the handshake (nothing is trusted or sent after it). Its fields are the
//! sniffer's `tls_certificate` fields, read by the same code, plus the DER's SHA-256.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, SignatureScheme};
use sha2::{Digest, Sha256};
use tokio::net::TcpStream;

use crate::sniffer::tls::{Certificate, certificate_from_der};

/// The leaf's fields and the hex SHA-256 of its DER.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Leaf {
    pub fields: Certificate,
    pub sha256: String,
}

/// Keeps the first leaf it is shown and refuses it, which ends the handshake there.
#[derive(Debug, Default)]
struct KeepLeaf(Mutex<Option<Vec<u8>>>);

impl ServerCertVerifier for KeepLeaf {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.0.lock().expect("leaf lock").get_or_insert_with(|| end_entity.to_vec());
        Err(rustls::Error::General("certificate kept; the prober goes no further".into()))
    }

    fn verify_tls12_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Err(rustls::Error::General("not verified".into()))
    }

    fn verify_tls13_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Err(rustls::Error::General("not verified".into()))
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        rustls::crypto::ring::default_provider().signature_verification_algorithms.supported_schemes()
    }
}

/// The leaf certificate `addr` presents, within `timeout`; `None` when it speaks no TLS rustls
/// can reach (TLS 1.2 or 1.3) or sends none.
pub async fn fetch(addr: SocketAddr, timeout: Duration) -> Option<Leaf> {
    let keeper = Arc::new(KeepLeaf::default());
    let config = ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .ok()?
        .dangerous()
        .with_custom_certificate_verifier(keeper.clone())
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let name = ServerName::IpAddress(addr.ip().into());
    let _ = tokio::time::timeout(timeout, async {
        let stream = TcpStream::connect(addr).await?;
        connector.connect(name, stream).await
    })
    .await;
    let der = keeper.0.lock().expect("leaf lock").take()?;
    let fields = certificate_from_der(&der)?;
    let sha256 = svc::text::hex(&Sha256::digest(&der));
    Some(Leaf { fields, sha256 })
}
