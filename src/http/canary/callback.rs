//! The canary's HTTP callback (`/c/{token}` and below, at the root; see the module above): the
//! request read into a `canary::Call`, the trigger recorder asked, its finding answered as a
//! stock web server would (the pixel for a known token, the 404 page for anything else).

use std::net::SocketAddr;

use axum::Router;
use axum::body::Body;
use axum::extract::{ConnectInfo, Path, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::canary::{Call, CallbackToken, Heard};
use crate::http::AppState;

/// The request headers a trigger keeps: at most this many, each value cut to this many characters.
const MAX_HEADERS: usize = 32;
const MAX_HEADER_CHARS: usize = 512;

/// The 1×1 transparent GIF every known token's callback answers.
const PIXEL: &[u8] = b"GIF89a\x01\x00\x01\x00\x80\x01\x00\x00\x00\x00\xff\xff\xff!\xf9\x04\x01\x00\x00\x01\x00,\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;";
/// The page anything else answers: what a stock web server says.
const NOT_FOUND_PAGE: &str = "<html>\r\n<head><title>404 Not Found</title></head>\r\n<body>\r\n\
     <center><h1>404 Not Found</h1></center>\r\n</body>\r\n</html>\r\n";

/// The callback listener, at the root: `/c/{token}` and below, GET (so HEAD) and POST.
pub fn callback_router(state: AppState) -> Router {
    Router::new()
        .route("/c", get(not_found_page).post(not_found_page))
        .route("/c/", get(not_found_page).post(not_found_page))
        .route("/c/{token}", get(callback).post(callback))
        .route("/c/{token}/", get(callback).post(callback))
        .route("/c/{token}/{*rest}", get(callback).post(callback))
        .with_state(state)
}

// ---- the callback ----

async fn not_found_page() -> Response {
    (StatusCode::NOT_FOUND, [(header::CONTENT_TYPE, "text/html")], NOT_FOUND_PAGE).into_response()
}

/// A bait calling home: a trigger when the token is known, the same 404 page otherwise. The body
/// of a POST is never read.
async fn callback(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Path(params): Path<Vec<(String, String)>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    let token = params.iter().find(|(name, _)| name == "token").map(|(_, value)| value.as_str()).unwrap_or("");
    let Ok(token) = CallbackToken::parse(token) else { return not_found_page().await };
    let user_agent = headers.get(header::USER_AGENT).map(|value| {
        crate::text::prefix_chars(&String::from_utf8_lossy(value.as_bytes()), MAX_HEADER_CHARS).to_string()
    });
    let call = Call {
        src_ip: peer.ip(),
        method: method.as_str().to_string(),
        path: Some(uri.path_and_query().map_or_else(|| uri.path().to_string(), |pq| pq.as_str().to_string())),
        user_agent,
        dns_qname: None,
        headers: header_text(&headers),
    };
    match state.canary_triggers.heard(&token, call).await {
        Heard::Unknown => not_found_page().await,
        Heard::Known | Heard::Unsure => pixel(&method),
    }
}

fn pixel(method: &Method) -> Response {
    let body = if *method == Method::HEAD { Body::empty() } else { Body::from(PIXEL) };
    let mut response = (StatusCode::OK, body).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("image/gif"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// The request's headers as a JSON object text, bounded.
fn header_text(headers: &HeaderMap) -> String {
    let mut object = serde_json::Map::new();
    for (name, value) in headers.iter().take(MAX_HEADERS) {
        let value = String::from_utf8_lossy(value.as_bytes());
        object.insert(
            name.as_str().to_string(),
            serde_json::Value::String(crate::text::prefix_chars(&value, MAX_HEADER_CHARS).to_string()),
        );
    }
    serde_json::Value::Object(object).to_string()
}
