//! The swarm's HTTPS client: one request over a fresh mutual-TLS connection that checks the CA, the
//! pin and (when asked) the name, with a connect and a read deadline. The master calls its agents
//! with it, pinned by the fingerprint it stored; an agent posts heartbeats with it. Failures come
//! back as [`CallError`], whose text is generic: the TLS or socket detail goes to the log only.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use rustls::ClientConfig;
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tracing::Instrument as _;

/// Why a call got no answer. The texts are what a lifecycle record or a client may see.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error("host unreachable")]
    Unreachable,
    #[error("TLS handshake refused")]
    Handshake,
    #[error("no answer in time")]
    Timeout,
    #[error("transport failure")]
    Transport,
}

/// Where and how to call: host (an IP address or a DNS name: also the name the certificate is
/// checked against), port, and the TLS configuration (`tls::client_config`).
#[derive(Clone, Debug)]
pub struct Endpoint {
    pub host: String,
    pub port: u16,
    pub tls: Arc<ClientConfig>,
    pub connect_timeout: Duration,
    pub read_timeout: Duration,
}

/// An answer: status and body.
#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub body: Bytes,
}

impl Answer {
    /// The body as JSON; `Null` when it is not.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }
}

impl Endpoint {
    pub async fn get(&self, path: &str) -> Result<Answer, CallError> {
        self.call(Method::GET, path, None).await
    }

    pub async fn post(&self, path: &str, body: &serde_json::Value) -> Result<Answer, CallError> {
        self.call(Method::POST, path, Some(body)).await
    }

    /// Sends `method path` with `body` as JSON (when given) and reads the whole answer.
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&serde_json::Value>,
    ) -> Result<Answer, CallError> {
        let payload = match body {
            Some(json) => {
                Some(("application/json".to_string(), Bytes::from(serde_json::to_vec(json).map_err(transport)?)))
            }
            None => None,
        };
        self.send(method, path, payload).await
    }

    /// Sends `method path` with a body of the given content type (when given) and reads the whole
    /// answer: an updater's multipart uploads.
    pub async fn send(&self, method: Method, path: &str, body: Option<(String, Bytes)>) -> Result<Answer, CallError> {
        let host = self.host.trim_matches(['[', ']']).to_string();
        let server_name = ServerName::try_from(host.clone()).map_err(|err| {
            tracing::warn!(host = %self.host, error = %err, "Not a host name or address");
            CallError::Unreachable
        })?;
        let connect = async {
            let tcp = TcpStream::connect((host.as_str(), self.port)).await.map_err(|err| {
                tracing::warn!(host = %self.host, port = self.port, error = %err, "Swarm peer unreachable");
                CallError::Unreachable
            })?;
            let _ = tcp.set_nodelay(true);
            TlsConnector::from(self.tls.clone()).connect(server_name, tcp).await.map_err(|err| {
                tracing::warn!(host = %self.host, port = self.port, error = %err, "Swarm TLS handshake refused");
                CallError::Handshake
            })
        };
        // A client span while traces are exported, whose trace the call carries to the peer.
        let span = if crate::traces::enabled() {
            tracing::info_span!(
                "swarm.call",
                otel.name = %format_args!("{method} {path}"),
                otel.kind = "client",
                server.address = %self.host,
                server.port = self.port,
            )
        } else {
            tracing::Span::none()
        };
        let traceparent = crate::traces::traceparent(&span);
        let tls = tokio::time::timeout(self.connect_timeout, connect).await.map_err(|_| CallError::Timeout)??;
        let exchange = async {
            let (mut sender, connection) =
                hyper::client::conn::http1::handshake(TokioIo::new(tls)).await.map_err(transport)?;
            tokio::spawn(async move {
                let _ = connection.await;
            });
            let mut request = Request::builder()
                .method(method)
                .uri(path)
                .header(hyper::header::HOST, format!("{}:{}", self.host, self.port));
            if let Some(traceparent) = &traceparent {
                request = request.header("traceparent", traceparent.as_str());
            }
            let payload = match body {
                Some((content_type, bytes)) => {
                    request = request.header(hyper::header::CONTENT_TYPE, content_type);
                    bytes
                }
                None => Bytes::new(),
            };
            let response = sender.send_request(request.body(Full::new(payload)).map_err(transport)?).await;
            let response = response.map_err(transport)?;
            let status = response.status();
            let body = response.into_body().collect().await.map_err(transport)?.to_bytes();
            Ok(Answer { status, body })
        };
        tokio::time::timeout(self.read_timeout, exchange.instrument(span)).await.map_err(|_| CallError::Timeout)?
    }
}

fn transport(err: impl std::fmt::Display) -> CallError {
    tracing::warn!(error = %err, "Swarm call failed");
    CallError::Transport
}
