//! What `GET /metrics` reports, in Prometheus's text format: the request counts and latencies this
//! process measures itself ([`RequestMetrics`], one series per route template, method and status),
//! and the exposition writer every other figure goes through ([`Exposition`]). Label values come
//! only from bounded sets (route templates, not raw paths; a fixed list of methods; never an
//! attacker's address), so a scan of random paths cannot grow the series. What the scrape reads
//! from the rest of the process (registry, store, bus) is gathered in `http::metrics`.

mod exposition;
mod requests;

pub use exposition::{CONTENT_TYPE, Exposition, Kind};
pub use requests::{LATENCY_BUCKETS, RequestMetrics, UNMATCHED_ROUTE, method_label};
