//! The security headers every answer carries: `X-Content-Type-Options: nosniff` (a browser never
//! reads a JSON body or an error as script or HTML), and on the developer-mode documentation pages
//! a `Content-Security-Policy` that lets them load only what they need: Swagger UI (`/docs`) its own
//! files from this server; ReDoc (`/redoc`) its bundle and fonts from the hosts its page names and
//! its inline start-up script, which embeds the document. Token answers add `Cache-Control:
//! no-store` themselves ([`NO_STORE`]).

use axum::extract::Request;
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::Response;

/// For answers that carry a credential (a token, a stream ticket): no cache keeps them.
pub const NO_STORE: [(header::HeaderName, &str); 1] = [(header::CACHE_CONTROL, "no-store")];

/// Swagger UI: its scripts, styles and images from this server (its styles also set inline).
const SWAGGER_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; \
    img-src 'self' data:; font-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; \
    form-action 'none'";
/// ReDoc: the page's inline start-up script and the bundle, fonts and styles it names.
const REDOC_POLICY: &str = "default-src 'none'; script-src 'unsafe-inline' https://cdn.redoc.ly; \
    style-src 'unsafe-inline' https://fonts.googleapis.com; font-src https://fonts.gstatic.com; \
    img-src 'self' data:; worker-src blob:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; \
    form-action 'none'";

/// The policy of a documentation page at `path`, if it is one.
fn page_policy(path: &str) -> Option<&'static str> {
    let under = |prefix: &str| path == prefix || path.starts_with(&format!("{prefix}/"));
    if under("/docs") {
        Some(SWAGGER_POLICY)
    } else if under("/redoc") {
        Some(REDOC_POLICY)
    } else {
        None
    }
}

/// Adds the security headers to the answer.
pub async fn security_headers(request: Request, next: Next) -> Response {
    let policy = page_policy(request.uri().path());
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    if let Some(policy) = policy {
        headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(policy));
    }
    response
}
