//! One delivery attempt: the destination rules checked again (the name may resolve elsewhere by
//! now), a connection to an address that was checked, TLS for `https` (Mozilla's roots, the URL's
//! host verified), one signed POST, and the answer's status. Redirects are never followed (a 3xx is
//! a refusal like any 4xx), and the whole attempt has one time limit. The outcome says whether a
//! later attempt could do better, as DECNET decides it: network failures, 429 and 5xx retry; other
//! answers are final.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use http_body_util::Full;
use hyper::Request;
use hyper::body::Bytes;
use hyper::header::{CONTENT_TYPE, HOST, HeaderValue, USER_AGENT};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use uuid::Uuid;

use super::{Destination, EVENT_ID_HEADER, EVENT_TOPIC_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER, Target, signature};
use crate::secret::Secret;

/// What one attempt came to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A 2xx answer.
    Delivered { status: u16 },
    /// Not delivered. `status` is the receiver's answer, if it gave one; `error` says what happened
    /// in words fit for the webhook's `last_error` and the test route's answer.
    Failed { status: Option<u16>, error: String, retry: bool },
}

impl Outcome {
    fn failed(status: Option<u16>, error: impl Into<String>, retry: bool) -> Outcome {
        Outcome::Failed { status, error: error.into(), retry }
    }

    pub fn status(&self) -> Option<u16> {
        match self {
            Outcome::Delivered { status } => Some(*status),
            Outcome::Failed { status, .. } => *status,
        }
    }
}

/// One event for one webhook: the body as stored, and what the headers say about it.
#[derive(Clone, Copy, Debug)]
pub struct Envelope<'a> {
    pub event_id: Uuid,
    pub topic: &'a str,
    pub body: &'a str,
}

/// Checks the webhook's URL again, then POSTs the signed body to a checked address.
pub async fn deliver(
    url: &str,
    secret: &Secret,
    envelope: Envelope<'_>,
    allow_private: bool,
    timeout: Duration,
) -> Outcome {
    let destination = match Target::parse(url) {
        Ok(target) => target.resolve(allow_private).await,
        Err(refusal) => Err(refusal),
    };
    let destination = match destination {
        Ok(destination) => destination,
        Err(refusal) => return Outcome::failed(None, refusal.to_string(), refusal.is_transient()),
    };
    match tokio::time::timeout(timeout, post(&destination, secret, envelope)).await {
        Ok(outcome) => outcome,
        Err(_) => Outcome::failed(None, format!("no answer within {} s", timeout.as_secs_f64()), true),
    }
}

async fn post(destination: &Destination, secret: &Secret, envelope: Envelope<'_>) -> Outcome {
    let stream = match connect(destination).await {
        Ok(stream) => stream,
        Err(err) => return Outcome::failed(None, format!("connection failed: {err}"), true),
    };
    let request = match request(destination, secret, envelope) {
        Ok(request) => request,
        Err(err) => return Outcome::failed(None, format!("request not built: {err}"), false),
    };
    if !destination.is_https() {
        return exchange(stream, request).await;
    }
    let host = destination.url.host_str().unwrap_or_default().trim_matches(['[', ']']).to_string();
    let name = match rustls::pki_types::ServerName::try_from(host) {
        Ok(name) => name,
        Err(err) => return Outcome::failed(None, format!("TLS name: {err}"), false),
    };
    match tls().connect(name, stream).await {
        Ok(tls) => exchange(tls, request).await,
        Err(err) => Outcome::failed(None, format!("TLS handshake failed: {err}"), true),
    }
}

/// The first checked address that accepts a connection.
async fn connect(destination: &Destination) -> std::io::Result<TcpStream> {
    let mut last = std::io::Error::other("no address");
    for addr in &destination.addrs {
        match TcpStream::connect(addr).await {
            Ok(stream) => return Ok(stream),
            Err(err) => last = err,
        }
    }
    Err(last)
}

fn request(destination: &Destination, secret: &Secret, envelope: Envelope<'_>) -> anyhow::Result<Request<Full<Bytes>>> {
    let url = &destination.url;
    let mut host = destination.host();
    if let Some(port) = url.port() {
        host = format!("{host}:{port}");
    }
    let path = match url.query() {
        Some(query) => format!("{}?{query}", url.path()),
        None => url.path().to_string(),
    };
    let body = Bytes::copy_from_slice(envelope.body.as_bytes());
    let timestamp = chrono::Utc::now().timestamp().to_string();
    Ok(Request::post(path)
        .header(HOST, host)
        .header(CONTENT_TYPE, "application/json")
        .header(USER_AGENT, super::USER_AGENT)
        .header(SIGNATURE_HEADER, signature(secret, &body))
        .header(EVENT_ID_HEADER, envelope.event_id.to_string())
        .header(EVENT_TOPIC_HEADER, HeaderValue::from_str(envelope.topic)?)
        .header(TIMESTAMP_HEADER, timestamp)
        .body(Full::new(body))?)
}

/// Sends the request over `stream` and reads the answer's status; the body is not read.
async fn exchange<S>(stream: S, request: Request<Full<Bytes>>) -> Outcome
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, connection) = match hyper::client::conn::http1::handshake(TokioIo::new(stream)).await {
        Ok(pair) => pair,
        Err(err) => return Outcome::failed(None, format!("HTTP failed: {err}"), true),
    };
    // The connection is driven only until the answer's head is in, then dropped (and closed).
    tokio::pin!(connection);
    let answer = tokio::select! {
        answer = sender.send_request(request) => answer,
        ended = &mut connection => {
            let error = ended.err().map_or("connection closed".to_string(), |e| e.to_string());
            return Outcome::failed(None, format!("HTTP failed: {error}"), true);
        }
    };
    match answer {
        Ok(response) => {
            let status = response.status().as_u16();
            match status {
                200..=299 => Outcome::Delivered { status },
                429 | 500..=599 => Outcome::failed(Some(status), format!("http {status}"), true),
                _ => Outcome::failed(Some(status), format!("non-retryable {status}"), false),
            }
        }
        Err(err) => Outcome::failed(None, format!("HTTP failed: {err}"), true),
    }
}

/// The TLS client every https delivery shares.
fn tls() -> tokio_rustls::TlsConnector {
    static CONFIG: OnceLock<Arc<rustls::ClientConfig>> = OnceLock::new();
    let config = CONFIG.get_or_init(|| {
        let roots = rustls::RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() };
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("ring supports the default TLS versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
        Arc::new(config)
    });
    tokio_rustls::TlsConnector::from(config.clone())
}
