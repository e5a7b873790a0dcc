//! Real handshakes over loopback between the swarm's server and client configurations: what passes
//! (the CA, the pin, the name) and what each check refuses.

use std::sync::Arc;

use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::{TlsAcceptor, TlsConnector};

use super::*;
use crate::swarm::pki::{Ca, Leaf, MASTER_CN};

struct Pki {
    _dir: tempfile::TempDir,
    ca: Ca,
    stranger: Ca,
}

fn pki() -> Pki {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::load_or_create(&dir.path().join("ca")).unwrap();
    let stranger = Ca::load_or_create(&dir.path().join("stranger")).unwrap();
    Pki { _dir: dir, ca, stranger }
}

fn identity(leaf: &Leaf) -> Identity {
    Identity::from_pem(&leaf.cert_pem, &leaf.key_pem).unwrap()
}

/// One handshake: the server's outcome (the client's CN when it passed) and whether the client's
/// side completed.
async fn handshake(server: Arc<ServerConfig>, client: Arc<ClientConfig>, name: &str) -> (Option<String>, bool) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accept = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let tls = TlsAcceptor::from(server).accept(tcp).await.ok()?;
        let der = tls.get_ref().1.peer_certificates()?.first()?.to_vec();
        peer_common_name(&der)
    });
    let tcp = TcpStream::connect(addr).await.unwrap();
    let name = ServerName::try_from(name.to_string()).unwrap();
    let client_ok = TlsConnector::from(client).connect(name, tcp).await.is_ok();
    (accept.await.unwrap(), client_ok)
}

#[tokio::test]
async fn a_pinned_master_and_an_agent_of_one_ca_shake_hands() {
    let pki = pki();
    let agent = pki.ca.issue("worker-1", &["127.0.0.1".to_string()]).unwrap();
    let master = pki.ca.issue(MASTER_CN, &[]).unwrap();
    let server = server_config(&identity(&agent), pki.ca.cert_pem()).unwrap();
    let pin = PeerPin::Fingerprint(Some(agent.fingerprint.clone()));
    let client = client_config(&identity(&master), pki.ca.cert_pem(), pin, true).unwrap();
    let (cn, client_ok) = handshake(server, client, "127.0.0.1").await;
    assert!(client_ok);
    assert_eq!(cn.as_deref(), Some(MASTER_CN));
}

#[tokio::test]
async fn a_wrong_or_missing_pin_refuses_a_valid_server() {
    let pki = pki();
    let agent = pki.ca.issue("worker-1", &["127.0.0.1".to_string()]).unwrap();
    let impostor = pki.ca.issue("worker-2", &["127.0.0.1".to_string()]).unwrap();
    let master = pki.ca.issue(MASTER_CN, &[]).unwrap();
    let server = server_config(&identity(&agent), pki.ca.cert_pem()).unwrap();
    for pin in [PeerPin::Fingerprint(Some(impostor.fingerprint.clone())), PeerPin::Fingerprint(None)] {
        let client = client_config(&identity(&master), pki.ca.cert_pem(), pin.clone(), true).unwrap();
        let (_, client_ok) = handshake(server.clone(), client, "127.0.0.1").await;
        assert!(!client_ok, "{pin:?} let the handshake through");
    }
    let client = client_config(&identity(&master), pki.ca.cert_pem(), PeerPin::CaSigned, true).unwrap();
    assert!(handshake(server, client, "127.0.0.1").await.1, "CA-only trust takes any leaf of the CA");
}

#[tokio::test]
async fn a_certificate_of_another_ca_is_refused_on_either_side() {
    let pki = pki();
    let agent = pki.ca.issue("worker-1", &["127.0.0.1".to_string()]).unwrap();
    let forged_master = pki.stranger.issue(MASTER_CN, &[]).unwrap();
    let server = server_config(&identity(&agent), pki.ca.cert_pem()).unwrap();
    // The forger trusts its own CA too; the server does not.
    let client = client_config(&identity(&forged_master), pki.ca.cert_pem(), PeerPin::CaSigned, true).unwrap();
    let (cn, _) = handshake(server, client, "127.0.0.1").await;
    assert_eq!(cn, None, "the server accepted a client of another CA");

    let forged_agent = pki.stranger.issue("worker-1", &["127.0.0.1".to_string()]).unwrap();
    let master = pki.ca.issue(MASTER_CN, &[]).unwrap();
    let server = server_config(&identity(&forged_agent), pki.stranger.cert_pem()).unwrap();
    let pin = PeerPin::Fingerprint(Some(forged_agent.fingerprint.clone()));
    let client = client_config(&identity(&master), pki.ca.cert_pem(), pin, false).unwrap();
    assert!(!handshake(server, client, "127.0.0.1").await.1, "a pinned leaf of another CA still needs our CA");
}

#[tokio::test]
async fn hostname_verification_checks_the_address_dialled_when_on() {
    let pki = pki();
    let agent = pki.ca.issue("worker-1", &["10.231.9.2".to_string()]).unwrap();
    let master = pki.ca.issue(MASTER_CN, &[]).unwrap();
    let server = server_config(&identity(&agent), pki.ca.cert_pem()).unwrap();
    let pin = PeerPin::Fingerprint(Some(agent.fingerprint.clone()));
    let strict = client_config(&identity(&master), pki.ca.cert_pem(), pin.clone(), true).unwrap();
    assert!(!handshake(server.clone(), strict, "127.0.0.1").await.1, "127.0.0.1 is not in the certificate");
    let lax = client_config(&identity(&master), pki.ca.cert_pem(), pin, false).unwrap();
    assert!(handshake(server, lax, "127.0.0.1").await.1);
}

#[tokio::test]
async fn a_client_without_a_certificate_is_refused() {
    let pki = pki();
    let agent = pki.ca.issue("worker-1", &["127.0.0.1".to_string()]).unwrap();
    let server = server_config(&identity(&agent), pki.ca.cert_pem()).unwrap();
    let mut roots = RootCertStore::empty();
    roots.add(CertificateDer::from_pem_slice(pki.ca.cert_pem().as_bytes()).unwrap()).unwrap();
    let anonymous = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let (cn, _) = handshake(server, Arc::new(anonymous), "127.0.0.1").await;
    assert_eq!(cn, None);
}
