//! Requests counted per route template, method and status, each with a latency histogram. The
//! route is axum's matched template (`/api/v1/attackers/{uuid}`), or [`UNMATCHED_ROUTE`] for a
//! path no route takes, and the method is one of a fixed list or `other`: a client can choose
//! neither a new series nor a label's text.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use axum::http::Method;

use super::{Exposition, Kind};

/// Upper bounds of the latency buckets, in seconds: from a cached read to the 30 s request timeout.
pub const LATENCY_BUCKETS: [f64; 12] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0];

/// The route label of a request no route matched (404s of scans, mostly).
pub const UNMATCHED_ROUTE: &str = "unmatched";

/// The method label: the standard methods by name, anything else `other`.
pub fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Key {
    route: String,
    method: &'static str,
    status: u16,
}

#[derive(Debug, Default)]
struct Series {
    count: u64,
    sum_seconds: f64,
    /// Per bucket, the requests at most that long (not cumulative; summed when written).
    buckets: [u64; LATENCY_BUCKETS.len()],
}

/// Every request this process answered, by route template, method and status.
#[derive(Debug, Default)]
pub struct RequestMetrics {
    series: Mutex<HashMap<Key, Series>>,
}

impl RequestMetrics {
    /// Counts one answered request. `route` must be a template (or [`UNMATCHED_ROUTE`]).
    pub fn record(&self, route: &str, method: &'static str, status: u16, took: Duration) {
        let seconds = took.as_secs_f64();
        let mut series = self.series.lock().expect("request metrics lock");
        let key = Key { route: route.to_string(), method, status };
        let entry = series.entry(key).or_default();
        entry.count += 1;
        entry.sum_seconds += seconds;
        if let Some(bucket) = LATENCY_BUCKETS.iter().position(|bound| seconds <= *bound) {
            entry.buckets[bucket] += 1;
        }
    }

    /// Writes `svc_http_requests_total` and `svc_http_request_duration_seconds`, series in a stable order.
    pub fn write(&self, out: &mut Exposition) {
        let series = self.series.lock().expect("request metrics lock");
        let mut keys: Vec<&Key> = series.keys().collect();
        keys.sort();
        out.family(
            "svc_http_requests_total",
            Kind::Counter,
            "Requests answered, by route template, method and status.",
        );
        for key in &keys {
            let status = key.status.to_string();
            let labels = [("route", key.route.as_str()), ("method", key.method), ("status", status.as_str())];
            out.sample("svc_http_requests_total", &labels, series[*key].count as f64);
        }
        out.family(
            "svc_http_request_duration_seconds",
            Kind::Histogram,
            "Time from request to response head, by route template, method and status.",
        );
        for key in &keys {
            let one = &series[*key];
            let status = key.status.to_string();
            let mut cumulative = 0;
            for (bound, in_bucket) in LATENCY_BUCKETS.iter().zip(one.buckets) {
                cumulative += in_bucket;
                let le = bound.to_string();
                let labels =
                    [("route", key.route.as_str()), ("method", key.method), ("status", status.as_str()), ("le", &le)];
                out.sample("svc_http_request_duration_seconds_bucket", &labels, cumulative as f64);
            }
            let labels = [("route", key.route.as_str()), ("method", key.method), ("status", status.as_str())];
            let inf =
                [("route", key.route.as_str()), ("method", key.method), ("status", status.as_str()), ("le", "+Inf")];
            out.sample("svc_http_request_duration_seconds_bucket", &inf, one.count as f64);
            out.sample("svc_http_request_duration_seconds_sum", &labels, one.sum_seconds);
            out.sample("svc_http_request_duration_seconds_count", &labels, one.count as f64);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_written_cumulative_with_the_count_under_inf() {
        let metrics = RequestMetrics::default();
        metrics.record("/api/v1/logs", "GET", 200, Duration::from_millis(3));
        metrics.record("/api/v1/logs", "GET", 200, Duration::from_secs(20));
        let mut out = Exposition::default();
        metrics.write(&mut out);
        let text = out.finish();
        let line = |le: &str| {
            format!(
                "svc_http_request_duration_seconds_bucket{{route=\"/api/v1/logs\",method=\"GET\",status=\"200\",le=\"{le}\"}}"
            )
        };
        assert!(text.contains(&format!("{} 0\n", line("0.0025"))), "{text}");
        assert!(text.contains(&format!("{} 1\n", line("0.005"))), "{text}");
        assert!(text.contains(&format!("{} 1\n", line("10"))), "the 20 s request is past every bound");
        assert!(text.contains(&format!("{} 2\n", line("+Inf"))));
        assert!(text.contains("svc_http_requests_total{route=\"/api/v1/logs\",method=\"GET\",status=\"200\"} 2\n"));
    }

    #[test]
    fn an_unknown_method_is_other() {
        assert_eq!(method_label(&Method::from_bytes(b"PROPFIND").unwrap()), "other");
        assert_eq!(method_label(&Method::GET), "GET");
    }
}
