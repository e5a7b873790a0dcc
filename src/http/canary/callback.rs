//! The canary callback listener (`/c/{token}` and below, at the root): see the module above.

use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{ConnectInfo, Path, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use chrono::Utc;
use uuid::Uuid;

use crate::bus::{Event, topics};
use crate::canary::{CallbackToken, Trigger};
use crate::db::{CanaryToken, CanaryTrigger, DbError};
use crate::http::AppState;

/// The callback waits at most this long for the store before answering anyway.
const CALLBACK_DEADLINE: Duration = Duration::from_secs(5);
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
    let recorded = tokio::time::timeout(CALLBACK_DEADLINE, async {
        let Some(stored) = state.db.canary_token_by_callback(token.as_str()).await? else { return Ok(false) };
        record(&state, stored, peer, &method, &uri, &headers).await?;
        Ok::<bool, DbError>(true)
    })
    .await;
    match recorded {
        Ok(Ok(true)) => pixel(&method),
        Ok(Ok(false)) => not_found_page().await,
        Ok(Err(err)) => {
            tracing::error!(error = %err, "Canary trigger not stored");
            pixel(&method)
        }
        Err(_) => {
            tracing::error!("Canary trigger not stored in time");
            pixel(&method)
        }
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

/// Stores the trigger, then hands it to the ingest file and the bus.
async fn record(
    state: &AppState,
    token: CanaryToken,
    peer: SocketAddr,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
) -> Result<(), DbError> {
    let now = Utc::now();
    let path = uri.path_and_query().map_or_else(|| uri.path().to_string(), |pq| pq.as_str().to_string());
    let user_agent = headers.get(header::USER_AGENT).map(|value| {
        crate::text::prefix_chars(&String::from_utf8_lossy(value.as_bytes()), MAX_HEADER_CHARS).to_string()
    });
    let trigger = Trigger {
        token_uuid: token.uuid,
        trigger_uuid: Uuid::new_v4(),
        decky: token.decky_name,
        kind: token.kind,
        generator: token.generator,
        placement_path: token.placement_path,
        src_ip: peer.ip().to_canonical().to_string(),
        method: method.as_str().to_string(),
        path: crate::text::prefix_chars(&path, 2048).to_string(),
        user_agent,
    };
    let stored = CanaryTrigger {
        uuid: trigger.trigger_uuid,
        token_uuid: trigger.token_uuid,
        occurred_at: now,
        src_ip: trigger.src_ip.clone(),
        user_agent: trigger.user_agent.clone(),
        method: trigger.method.clone(),
        request_path: Some(trigger.path.clone()),
        dns_qname: None,
        headers: header_text(headers),
    };
    state.db.record_canary_trigger(&stored).await?;
    tracing::warn!(token = %trigger.token_uuid, decky = %trigger.decky, src_ip = %trigger.src_ip, "Canary token triggered");
    match state.config.ingest.log_file.as_deref() {
        Some(file) => {
            let line = trigger.line(now) + "\n";
            if let Err(err) = crate::logline::append(file, line.as_bytes()).await {
                tracing::error!(path = %file.display(), error = %err, "Cannot write a canary trigger to the ingest file");
            }
        }
        None => tracing::warn!(token = %trigger.token_uuid, "No ingest file: canary trigger not in the logs"),
    }
    let event = Event::new(topics::canary_triggered(trigger.token_uuid), "triggered", trigger.event_payload());
    if let Err(err) = state.bus.publish(&event).await {
        tracing::warn!(error = %err, token = %trigger.token_uuid, "Canary trigger event not published");
    }
    Ok(())
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
