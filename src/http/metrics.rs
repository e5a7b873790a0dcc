//! `GET /metrics`: the process in Prometheus's text format, for whoever [`MetricsReader`] admits,
//! and the middleware that counts every request by route template ([`count_request`]). A scrape
//! reads what exists already: the request counts, the worker registry (each worker's counters and
//! heartbeat age; ingest and webhook delivery figures come from there), the bus, the store's pool
//! and faults, the open event streams, the fleet's deckies by state, and how far ingestion is
//! behind the end of its file. Only the last two ask the store; a store that cannot answer leaves
//! them out and says so in `svc_scrape_store_ok`.

use std::time::Instant;

use axum::Router;
use axum::extract::{MatchedPath, Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use super::AppState;
use super::guard::MetricsReader;
use crate::bus;
use crate::db::{self, DeployState};
use crate::metrics::{self, Exposition, Kind, UNMATCHED_ROUTE};
use crate::roster::{Counter, counters};

/// At most this many worker names get series, known ones first: a bus client inventing names
/// cannot grow a scrape without bound.
const MAX_WORKERS: usize = 64;
/// At most this many counters of one worker get series.
const MAX_COUNTERS_PER_WORKER: usize = 64;

pub fn router() -> Router<AppState> {
    Router::new().route("/metrics", get(scrape))
}

/// Counts the request under its route template once it is answered (timeouts, panics and 404s
/// included: this runs outside every other layer's answer).
pub async fn count_request(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    let route = request.extensions().get::<MatchedPath>().map(|path| path.as_str().to_owned());
    let method = metrics::method_label(request.method());
    let response = next.run(request).await;
    let route = route.as_deref().unwrap_or(UNMATCHED_ROUTE);
    state.requests.record(route, method, response.status().as_u16(), started.elapsed());
    response
}

/// Records the status on the server span and logs the request's end.
pub fn span_response<B>(response: &axum::http::Response<B>, latency: std::time::Duration, span: &tracing::Span) {
    let status = response.status().as_u16();
    span.record("http.response.status_code", status);
    tracing::info!(status, latency_ms = latency.as_millis() as u64, "finished processing request");
}

async fn scrape(State(state): State<AppState>, _reader: MetricsReader) -> Response {
    let body = gather(&state).await;
    ([(header::CONTENT_TYPE, metrics::CONTENT_TYPE)], body).into_response()
}

/// Every figure, family by family.
pub async fn gather(state: &AppState) -> String {
    let mut out = Exposition::default();
    state.requests.write(&mut out);
    let now = bus::epoch_seconds();
    let bus_connected = state.bus.is_connected();
    out.single(
        "svc_bus_connected",
        Kind::Gauge,
        "1 while this process's bus connection is up.",
        f64::from(u8::from(bus_connected)),
    );
    write_workers(state, &mut out, bus_connected, now);
    let pool = state.db.pool_use();
    out.family("svc_db_pool_connections", Kind::Gauge, "Connections of the store's pool, in use or idle.");
    out.sample("svc_db_pool_connections", &[("state", "in_use")], f64::from(pool.open.saturating_sub(pool.idle)));
    out.sample("svc_db_pool_connections", &[("state", "idle")], f64::from(pool.idle));
    out.single(
        "svc_db_store_faults_total",
        Kind::Counter,
        "Store failures that meant the store itself was unavailable (unreachable, full, read-only).",
        db::store_faults_seen() as f64,
    );
    out.single("svc_sse_streams_open", Kind::Gauge, "Event streams open on this replica.", state.sse.total() as f64);
    let store_ok = write_store_figures(state, &mut out).await;
    out.single(
        "svc_scrape_store_ok",
        Kind::Gauge,
        "1 when the store answered this scrape (fleet and ingest lag figures are present).",
        f64::from(u8::from(store_ok)),
    );
    out.finish()
}

/// Per worker: up, heartbeat age and its own counters; then the ingest and webhook figures the
/// issue names, taken from those counters.
fn write_workers(state: &AppState, out: &mut Exposition, bus_connected: bool, now: f64) {
    let rows: Vec<_> = state.workers.rows(bus_connected, now).into_iter().take(MAX_WORKERS).collect();
    out.family("svc_worker_up", Kind::Gauge, "1 while the worker runs embedded here or its heartbeat is fresh.");
    for row in &rows {
        let up = state.workers.is_up(&row.name, bus_connected, now);
        out.sample("svc_worker_up", &[("worker", &row.name)], f64::from(u8::from(up)));
    }
    out.family("svc_worker_heartbeat_age_seconds", Kind::Gauge, "Seconds since the worker's last heartbeat arrived.");
    for row in &rows {
        if let Some(age) = row.seconds_since {
            out.sample("svc_worker_heartbeat_age_seconds", &[("worker", &row.name)], age);
        }
    }
    out.family(
        "svc_worker_counter",
        Kind::Gauge,
        "A worker's own counts as it reports them (running totals, or gauges such as frames_per_sec).",
    );
    for row in &rows {
        for (counter, value) in state.workers.counters_of(&row.name).iter().take(MAX_COUNTERS_PER_WORKER) {
            out.sample("svc_worker_counter", &[("worker", &row.name), ("counter", counter)], *value as f64);
        }
    }
    out.family(
        "svc_ingest_lines_total",
        Kind::Counter,
        "Lines the ingester read, by outcome (stored, or refused and why).",
    );
    let lines = [
        ("stored", counters::ingest::LINES_STORED),
        ("malformed", counters::ingest::LINES_MALFORMED),
        ("oversized", counters::ingest::LINES_OVERSIZED),
    ];
    write_outcomes(state, out, "svc_ingest_lines_total", "ingest", lines);
    out.family("svc_webhook_deliveries_total", Kind::Counter, "Webhook deliveries by outcome.");
    let deliveries = [
        ("ok", counters::webhook::DELIVERIES_OK),
        ("failed", counters::webhook::DELIVERIES_FAILED),
        ("lost", counters::webhook::DELIVERIES_LOST),
    ];
    write_outcomes(state, out, "svc_webhook_deliveries_total", "webhook", deliveries);
}

/// One sample of `family` per outcome, each the value of the worker's counter for it (0 before
/// the worker reported one).
fn write_outcomes(state: &AppState, out: &mut Exposition, family: &str, worker: &str, outcomes: [(&str, Counter); 3]) {
    let reported = state.workers.counters_of(worker);
    for (outcome, counter) in outcomes {
        let value = reported.get(counter.name()).copied().unwrap_or(0);
        out.sample(family, &[("outcome", outcome)], value as f64);
    }
}

/// The fleet's deckies by state and the ingest lag; false when the store did not answer.
async fn write_store_figures(state: &AppState, out: &mut Exposition) -> bool {
    let fleet = match state.db.fleet().await {
        Ok(fleet) => fleet,
        Err(err) => {
            tracing::debug!(error = %err, "Scrape without the store's figures");
            return false;
        }
    };
    out.family("svc_fleet_deckies", Kind::Gauge, "Deckies of the fleet by deploy state.");
    for wanted in [DeployState::Pending, DeployState::Running, DeployState::Failed] {
        let count = fleet.deckies.iter().filter(|decky| decky.state == wanted).count();
        out.sample("svc_fleet_deckies", &[("state", wanted.as_str())], count as f64);
    }
    let Some(path) = &state.config.ingest.log_file else { return true };
    // Keyed like the ingester keys its cursor: by the file's absolute path.
    let source = std::path::absolute(path).unwrap_or_else(|_| path.clone()).display().to_string();
    let cursor = match state.db.ingest_cursor(&source).await {
        Ok(cursor) => cursor,
        Err(err) => {
            tracing::debug!(error = %err, "Scrape without the ingest lag");
            return false;
        }
    };
    let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    let stored = cursor.map_or(0, |c| c.offset);
    out.single(
        "svc_ingest_lag_bytes",
        Kind::Gauge,
        "Bytes of the ingest file not yet stored (file size minus the stored position).",
        size.saturating_sub(stored) as f64,
    );
    true
}
