//! The master's mutual-TLS identity: the swarm CA (whose key issues every leaf) and the master's
//! own certificate (CN `svc-master`), kept under `SVC_SWARM_DIR` (`ca/`, `master/`) and made there
//! on first use. A process loads it once and holds it ([`SwarmMaster`]): every server the master
//! runs for its hosts (the heartbeat listener, the log listener), every pinned call to an agent or
//! an updater ([`AgentCaller`]) and every leaf an enrollment issues come from that one load. How
//! the master presents itself to its hosts is decided here and nowhere else.

use std::sync::Arc;

use tokio::sync::OnceCell;

use super::caller::{AgentCaller, CertificatesUnavailable};
use super::config::SwarmConfig;
use super::pki::{Ca, Leaf, PkiError};
use super::tls::{Identity, PeerPin, TlsSetupError, client_config, server_config};

/// Why the master's identity could not be had; the path or TLS detail is for the operator's log.
#[derive(Debug, thiserror::Error)]
pub enum MasterIdentityError {
    #[error(transparent)]
    Pki(#[from] PkiError),
    #[error("the master's certificate is unusable: {0}")]
    Tls(#[from] TlsSetupError),
    #[error("loading the master's identity stopped: {0}")]
    Interrupted(String),
}

/// The CA and the master's certificate, loaded.
pub struct MasterIdentity {
    ca: Ca,
    tls: Identity,
}

impl std::fmt::Debug for MasterIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MasterIdentity").field("fingerprint", &self.tls.fingerprint()).finish_non_exhaustive()
    }
}

impl MasterIdentity {
    /// The identity kept under `config.dir`, made there on first use. Reads (and may write) files
    /// and make keys: call it off the request loop.
    pub fn load(config: &SwarmConfig) -> Result<MasterIdentity, MasterIdentityError> {
        let ca = Ca::load_or_create(&config.ca_dir())?;
        let leaf = ca.master_leaf(&config.master_dir())?;
        let tls = Identity::from_pem(&leaf.cert_pem, &leaf.key_pem)?;
        Ok(MasterIdentity { ca, tls })
    }

    /// [`MasterIdentity::load`] on a blocking thread.
    pub async fn load_blocking(config: &SwarmConfig) -> Result<MasterIdentity, MasterIdentityError> {
        let config = config.clone();
        tokio::task::spawn_blocking(move || MasterIdentity::load(&config))
            .await
            .map_err(|err| MasterIdentityError::Interrupted(err.to_string()))?
    }

    /// The CA's certificate, PEM: every host's trust anchor.
    pub fn ca_cert_pem(&self) -> &str {
        self.ca.cert_pem()
    }

    /// A fresh leaf for `cn` signed by the CA (see [`Ca::issue`]): an agent's or an updater's.
    pub fn issue(&self, cn: &str, sans: &[String]) -> Result<Leaf, PkiError> {
        self.ca.issue(cn, sans)
    }

    /// A server that requires a client certificate the CA signed, presenting the master's.
    pub fn server_config(&self) -> Result<Arc<rustls::ServerConfig>, TlsSetupError> {
        server_config(&self.tls, self.ca.cert_pem())
    }

    /// A client presenting the master's certificate, pinning the peer by `pin`.
    pub fn client_config(
        &self,
        pin: PeerPin,
        verify_hostname: bool,
    ) -> Result<Arc<rustls::ClientConfig>, TlsSetupError> {
        client_config(&self.tls, self.ca.cert_pem(), pin, verify_hostname)
    }
}

/// The master's side of the swarm as a process holds it: its settings, and its identity loaded
/// once. The API loads it at startup when the swarm is on; otherwise on the first enrollment or
/// call to a host (a single host that never enrolls one makes no CA). A load that fails is tried
/// again by the next use. Cheap to clone.
#[derive(Clone, Debug)]
pub struct SwarmMaster {
    config: Arc<SwarmConfig>,
    identity: Arc<OnceCell<Arc<MasterIdentity>>>,
}

impl SwarmMaster {
    pub fn new(config: &SwarmConfig) -> SwarmMaster {
        SwarmMaster { config: Arc::new(config.clone()), identity: Arc::default() }
    }

    pub fn config(&self) -> &SwarmConfig {
        &self.config
    }

    /// The identity, loaded on the first call that succeeds and held from then on.
    pub async fn identity(&self) -> Result<Arc<MasterIdentity>, MasterIdentityError> {
        let identity = self
            .identity
            .get_or_try_init(|| async { MasterIdentity::load_blocking(&self.config).await.map(Arc::new) })
            .await?;
        Ok(identity.clone())
    }

    /// The caller of every host's agent and updater, with this identity; the cause of a failure
    /// is logged, the error's text is generic.
    pub async fn caller(&self) -> Result<AgentCaller, CertificatesUnavailable> {
        match self.identity().await {
            Ok(identity) => Ok(AgentCaller::new(identity, self.config.clone())),
            Err(err) => {
                tracing::error!(error = %err, "The swarm CA or the master's certificate is unavailable");
                Err(CertificatesUnavailable)
            }
        }
    }
}
