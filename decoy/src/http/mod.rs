//! The HTTP and HTTPS decoy: HTTP/1.1 served by hyper on the accepted connection (for HTTPS, after a
//! rustls handshake with a self-signed certificate made once per process), a small site
//! (`site`), and one `request` line per request with its `method`, `path` (with the query; the whole
//! URI for a proxy-style request), `version`, `headers` (a JSON object text the ingester reads the
//! User-Agent from), `user_agent`, `status` answered and `body` (when one was sent and read). A
//! request hyper cannot parse is a `bad_request` line, a handshake that is not TLS a `tls_error`
//! line. A login form posted to the site, and `Authorization` Basic or Bearer headers on any
//! request, become `auth_attempt` lines with the credential shape (`form`).
//!
//! Bounds: the request head is at most [`HEAD_LINES`] × `limits.max_line` bytes (hyper answers 431
//! past it) and must arrive within `limits.idle`; a body is read only up to `limits.max_line`
//! bytes and within `limits.idle` (past either, 413 or 408 and the connection closes); the logged
//! headers are capped in number and length. Connections may be kept alive; every request is logged.

mod form;
mod site;
mod tls;

use std::convert::Infallible;
use std::io::ErrorKind;
use std::sync::Arc;

use anyhow::Context;
use async_trait::async_trait;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Body, Bytes, Incoming};
use hyper::header::{AUTHORIZATION, CONNECTION, CONTENT_TYPE, HeaderMap, HeaderValue, USER_AGENT};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use svc_core::text::prefix_bytes;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;

use crate::credential;
use crate::emit::Fields;
use crate::session::{Decoy, Session};
use crate::settings::Settings;
use site::{Route, Site};

/// The request head (request line and headers together) may hold this many maximal lines.
const HEAD_LINES: usize = 4;
/// hyper's smallest read buffer, below which it refuses to run.
const MIN_HEAD: usize = 8192;
/// Headers written into a `request` line, and the bytes kept of each value.
const MAX_LOGGED_HEADERS: usize = 64;
const MAX_LOGGED_VALUE: usize = 1024;

pub fn decoy(settings: &Settings, hostname: &str, tls: bool) -> anyhow::Result<Arc<dyn Decoy>> {
    let server = settings.get("banner").unwrap_or(site::DEFAULT_SERVER);
    let tls = if tls { Some(tls::acceptor(hostname)?) } else { None };
    Ok(Arc::new(Web { site: Arc::new(Site::new(hostname, server)), tls }))
}

struct Web {
    site: Arc<Site>,
    /// For HTTPS: the acceptor holding this process's certificate.
    tls: Option<TlsAcceptor>,
}

#[async_trait]
impl Decoy for Web {
    async fn serve(&self, stream: TcpStream, session: Session) -> anyhow::Result<()> {
        let port = stream.local_addr().map(|a| a.port()).unwrap_or(0);
        let Some(acceptor) = &self.tls else {
            return serve_http(stream, self.site.clone(), session, port).await;
        };
        let stream = match tokio::time::timeout(session.limits.idle, acceptor.accept(stream)).await {
            Err(_) => anyhow::bail!("TLS handshake timed out"),
            Ok(Err(err)) => {
                // Bytes that are not TLS (plain HTTP to the HTTPS port, noise) are worth a line; a
                // port scan's connect-and-close is not.
                if err.kind() == ErrorKind::InvalidData {
                    session.event("tls_error", vec![("error", err.to_string())]);
                }
                return Err(err).context("TLS handshake");
            }
            Ok(Ok(stream)) => stream,
        };
        serve_http(stream, self.site.clone(), session, port).await
    }
}

/// Serves HTTP/1.1 on `io` until the client leaves, a limit closes it, or a request cannot be read.
async fn serve_http<I>(io: I, site: Arc<Site>, session: Session, port: u16) -> anyhow::Result<()>
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let head = session.limits.max_line.saturating_mul(HEAD_LINES).max(MIN_HEAD);
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(session.limits.idle)
        .max_buf_size(head)
        .max_header_size(head)
        // Apache writes `Server:`, not hyper's `server:`; scanners notice.
        .title_case_headers(true)
        .keep_alive(true);
    let handler = session.clone();
    let service = service_fn(move |request| {
        let (site, session) = (site.clone(), handler.clone());
        async move { Ok::<_, Infallible>(answer(request, &site, &session, port).await) }
    });
    if let Err(err) = builder.serve_connection(TokioIo::new(io), service).await {
        // hyper has answered 400 or 431 itself; the request never reached `answer`, so log it here.
        if err.is_parse() || err.is_parse_too_large() || err.is_parse_version_h2() {
            session.event("bad_request", vec![("error", err.to_string())]);
        }
        return Err(err).context("serving HTTP");
    }
    Ok(())
}

/// Answers one request and logs it, with any credential it carries.
async fn answer(request: Request<Incoming>, site: &Site, session: &Session, port: u16) -> Response<Full<Bytes>> {
    let (head, body) = request.into_parts();
    let route = site::route(head.uri.path());
    let mut fields: Fields = vec![
        ("method", head.method.to_string()),
        ("path", head.uri.to_string()),
        ("version", format!("{:?}", head.version)),
        ("headers", headers_json(&head.headers)),
    ];
    if let Some(agent) = head.headers.get(USER_AGENT) {
        fields.push((
            "user_agent",
            prefix_bytes(&String::from_utf8_lossy(agent.as_bytes()), MAX_LOGGED_VALUE).to_string(),
        ));
    }

    let (response, body) = match read_body(body, session).await {
        Ok(body) => {
            let login = match route {
                Route::Login { posts: true } if head.method == Method::POST && is_form(&head.headers) => {
                    form::login(&body)
                }
                _ => None,
            };
            let failed_login = matches!(route, Route::Login { posts: true }) && head.method == Method::POST;
            (site.answer(&head.method, route, failed_login, port), Ok((body, login)))
        }
        Err(status) => {
            let text = match status {
                StatusCode::PAYLOAD_TOO_LARGE => {
                    "The requested resource does not allow request data with this request, or the amount of data \
                     provided in the request exceeds the capacity limit."
                }
                StatusCode::REQUEST_TIMEOUT => "Server timeout waiting for the HTTP request from the client.",
                _ => "Your browser sent a request that this server could not understand.",
            };
            let mut response = site.error(status, text, port);
            // The unread rest of the body is not waited for: the connection ends with this answer.
            response.headers_mut().insert(CONNECTION, HeaderValue::from_static("close"));
            (response, Err(()))
        }
    };

    let status = response.status();
    fields.push(("status", status.as_u16().to_string()));
    if let Ok((body, _)) = &body
        && !body.is_empty()
    {
        fields.push(("body", String::from_utf8_lossy(body).into_owned()));
    }
    session.event("request", fields);

    // A header credential's outcome is known only where the page asked for one.
    let header_outcome = (status == StatusCode::UNAUTHORIZED).then_some("failure");
    if let Some(credential) = head.headers.get(AUTHORIZATION).and_then(|v| form::authorization(v.as_bytes())) {
        let fields = credential::fields(&credential.principal, credential.kind, &credential.secret, header_outcome);
        session.event("auth_attempt", fields);
    }
    if let Ok((_, Some(login))) = &body {
        session.event("auth_attempt", credential::fields(&login.principal, login.kind, &login.secret, Some("failure")));
    }
    response
}

/// The request body, at most `limits.max_line` bytes, each part arriving within `limits.idle`;
/// otherwise the status to refuse the request with.
async fn read_body(body: Incoming, session: &Session) -> Result<Bytes, StatusCode> {
    let limit = session.limits.max_line;
    // A declared length past the limit is refused before a byte of it is read.
    if body.size_hint().lower() > limit as u64 {
        return Err(StatusCode::PAYLOAD_TOO_LARGE);
    }
    let collected = tokio::time::timeout(session.limits.idle, Limited::new(body, limit).collect()).await;
    match collected {
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        Ok(Err(err)) if err.is::<http_body_util::LengthLimitError>() => Err(StatusCode::PAYLOAD_TOO_LARGE),
        Ok(Err(_)) => Err(StatusCode::BAD_REQUEST),
        Err(_) => Err(StatusCode::REQUEST_TIMEOUT),
    }
}

fn is_form(headers: &HeaderMap) -> bool {
    headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|v| {
        v.split(';').next().unwrap_or("").trim().eq_ignore_ascii_case("application/x-www-form-urlencoded")
    })
}

/// The request headers as a JSON object text in the order they came: lowercase names, values as
/// text (a repeated header's values joined by `, `), at most [`MAX_LOGGED_HEADERS`] names and
/// [`MAX_LOGGED_VALUE`] bytes per value. Written like DECNET's (`{"host": "x", "accept": "*/*"}`).
fn headers_json(headers: &HeaderMap) -> String {
    let mut out = String::from("{");
    for (n, name) in headers.keys().take(MAX_LOGGED_HEADERS).enumerate() {
        let mut value = String::new();
        for (i, part) in headers.get_all(name).iter().enumerate() {
            if value.len() >= MAX_LOGGED_VALUE {
                break;
            }
            if i > 0 {
                value.push_str(", ");
            }
            value.push_str(&String::from_utf8_lossy(part.as_bytes()));
        }
        if n > 0 {
            out.push_str(", ");
        }
        out.push_str(&json_string(name.as_str()));
        out.push_str(": ");
        out.push_str(&json_string(prefix_bytes(&value, MAX_LOGGED_VALUE)));
    }
    out.push('}');
    out
}

fn json_string(text: &str) -> String {
    // Serialising a string cannot fail.
    serde_json::to_string(text).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_are_a_bounded_json_object_in_arrival_order() {
        let mut headers = HeaderMap::new();
        headers.append("Host", HeaderValue::from_static("x"));
        headers.append("User-Agent", HeaderValue::from_static("curl/8.5.0"));
        headers.append("Cookie", HeaderValue::from_static("a=1"));
        headers.append("Cookie", HeaderValue::from_static("b=\"2\""));
        headers.append("X-Bin", HeaderValue::from_bytes(b"\xff").unwrap());
        assert_eq!(
            headers_json(&headers),
            r#"{"host": "x", "user-agent": "curl/8.5.0", "cookie": "a=1, b=\"2\"", "x-bin": "�"}"#
        );

        let mut many = HeaderMap::new();
        for n in 0..100 {
            many.append(format!("x-{n}").parse::<hyper::header::HeaderName>().unwrap(), HeaderValue::from_static("v"));
        }
        many.append("x-0", HeaderValue::from_str(&"é".repeat(2000)).unwrap());
        let json: serde_json::Map<String, serde_json::Value> = serde_json::from_str(&headers_json(&many)).unwrap();
        assert_eq!(json.len(), MAX_LOGGED_HEADERS);
        let long = json["x-0"].as_str().unwrap();
        assert!(long.len() <= MAX_LOGGED_VALUE && long.starts_with("v, éé"), "{}", long.len());
    }
}
