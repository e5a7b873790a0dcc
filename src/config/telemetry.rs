//! `TelemetryConfig`: who may read `GET /metrics`, and where traces go when
//! `SVC_DEVELOPER_TRACING` (the API section, as the spec names it) turns them on.

use super::env::Env;
use super::rules;
use crate::secret::Secret;
use crate::traces::OtlpProtocol;

#[derive(Clone, Debug)]
pub struct TelemetryConfig {
    /// `SVC_METRICS_TOKEN`: the bearer token a scraper sends to `/metrics`. Unset: `/metrics` is
    /// served without one only while the API binds loopback, and not at all on a public binding.
    pub metrics_token: Option<Secret>,
    /// `SVC_OTEL_PROTOCOL`.
    pub otlp_protocol: OtlpProtocol,
    /// `SVC_OTEL_ENDPOINT`: the collector's base URL.
    pub otlp_endpoint: String,
}

impl TelemetryConfig {
    pub(super) fn read(env: &mut Env) -> TelemetryConfig {
        let metrics_token = env.secret("SVC_METRICS_TOKEN");
        if let Some(token) = &metrics_token {
            env.report_all(rules::metrics_token(token));
        }
        let otlp_protocol = match env.get_or("SVC_OTEL_PROTOCOL", "grpc").trim() {
            "grpc" => OtlpProtocol::Grpc,
            "http/protobuf" => OtlpProtocol::HttpProtobuf,
            _ => {
                env.report("SVC_OTEL_PROTOCOL", "must be `grpc` or `http/protobuf`");
                OtlpProtocol::Grpc
            }
        };
        let default_endpoint = match otlp_protocol {
            OtlpProtocol::Grpc => "http://localhost:4317",
            OtlpProtocol::HttpProtobuf => "http://localhost:4318",
        };
        let otlp_endpoint = env.non_empty_or("SVC_OTEL_ENDPOINT", default_endpoint).trim_end_matches('/').to_string();
        if !otlp_endpoint.starts_with("http://") && !otlp_endpoint.starts_with("https://") {
            env.report("SVC_OTEL_ENDPOINT", "must be an http:// or https:// URL");
        }
        TelemetryConfig { metrics_token, otlp_protocol, otlp_endpoint }
    }
}
