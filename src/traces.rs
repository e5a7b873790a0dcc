//! OpenTelemetry traces (startup step 7), only when `SVC_DEVELOPER_TRACING` is on: an OTLP exporter
//! (gRPC, or HTTP/protobuf) behind a batching provider whose resource names the process
//! (`service.name` = `svc-api`, `svc-worker-<name>`…), joined to `tracing` by a layer, so the spans
//! svc opens (a server span per request named by its route template, one per store verb, one per
//! bus publish and receive with the trace carried in a `traceparent` header, one per line the
//! collector writes and one per line the ingester stores, in the same trace) are
//! exported. Off, nothing of it exists: no provider, no exporter, no layer, and [`enabled`] is false
//! so the places that would open a span open none. An unreachable collector never stops a process:
//! the exporter connects lazily and a failed export is dropped (and logged by the SDK).

use std::sync::atomic::{AtomicBool, Ordering};

use opentelemetry::trace::{
    SpanContext, SpanId, TraceContextExt as _, TraceFlags, TraceId, TraceState, TracerProvider as _,
};
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
use tracing_opentelemetry::OpenTelemetrySpanExt as _;
use tracing_subscriber::Registry;

/// Whether this process exports traces: read where a span would be opened.
static ENABLED: AtomicBool = AtomicBool::new(false);

/// Whether spans are wanted in this process (the tracing layer is installed).
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// How spans reach the OpenTelemetry collector (`SVC_OTEL_PROTOCOL`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OtlpProtocol {
    /// OTLP over gRPC, DECNET's choice (port 4317).
    Grpc,
    /// OTLP over HTTP with protobuf bodies, to `<endpoint>/v1/traces` (port 4318).
    HttpProtobuf,
}

/// The layer that hands `tracing` spans to OpenTelemetry.
pub type TraceLayer = tracing_opentelemetry::OpenTelemetryLayer<Registry, SdkTracer>;

/// This process's trace export; [`Traces::off`] when tracing is not on.
#[derive(Debug, Default)]
pub struct Traces {
    provider: Option<SdkTracerProvider>,
}

impl Traces {
    pub fn off() -> Traces {
        Traces::default()
    }

    /// The exporter (over `protocol` to `endpoint`) and provider for `service`, and the layer to add
    /// to the subscriber; `crate::logging::traces` calls it only with `SVC_DEVELOPER_TRACING` on.
    /// Must run inside the tokio runtime (the gRPC channel lives on it). An exporter that cannot be
    /// built is reported on stderr (logging is not up yet) and the process goes on without traces.
    pub fn start(protocol: OtlpProtocol, endpoint: &str, service: &str) -> (Traces, Option<TraceLayer>) {
        let exporter = match protocol {
            OtlpProtocol::Grpc => {
                opentelemetry_otlp::SpanExporter::builder().with_tonic().with_endpoint(endpoint).build()
            }
            OtlpProtocol::HttpProtobuf => opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_protocol(Protocol::HttpBinary)
                .with_endpoint(format!("{endpoint}/v1/traces"))
                .build(),
        };
        let exporter = match exporter {
            Ok(exporter) => exporter,
            Err(err) => {
                eprintln!("svc: traces off: cannot build the OTLP exporter for {endpoint}: {err}");
                return (Traces::off(), None);
            }
        };
        let resource = Resource::builder()
            .with_service_name(service.to_string())
            .with_attribute(opentelemetry::KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
            .build();
        let provider = SdkTracerProvider::builder().with_batch_exporter(exporter).with_resource(resource).build();
        let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("svc"));
        ENABLED.store(true, Ordering::Relaxed);
        (Traces { provider: Some(provider) }, Some(layer))
    }

    /// Exports what is still buffered and shuts the provider down (the spec's "shut down tracing").
    /// Blocking: call it outside async code, with the runtime still alive.
    pub fn shutdown(self) {
        let Some(provider) = self.provider else { return };
        ENABLED.store(false, Ordering::Relaxed);
        if let Err(err) = provider.force_flush() {
            tracing::warn!(error = %err, "Traces not all exported at shutdown");
        }
        if let Err(err) = provider.shutdown() {
            tracing::warn!(error = %err, "Trace provider did not shut down cleanly");
        }
    }
}

/// The W3C `traceparent` naming `span`, to carry it to another process (in a line, a NATS
/// header); `None` when the span is not exported (traces off, or a disabled span).
pub fn traceparent(span: &tracing::Span) -> Option<String> {
    let context = span.context();
    let ids = context.span().span_context().clone();
    ids.is_valid().then(|| format!("00-{}-{}-{:02x}", ids.trace_id(), ids.span_id(), ids.trace_flags().to_u8()))
}

/// Makes `span` continue the trace of the remote span `trace_id`/`span_id` (hex, as carried);
/// false when they are not valid ids or the span is not exported.
pub fn continue_trace(span: &tracing::Span, trace_id: &str, span_id: &str) -> bool {
    let (Ok(trace_id), Ok(span_id)) = (TraceId::from_hex(trace_id), SpanId::from_hex(span_id)) else {
        return false;
    };
    let parent = SpanContext::new(trace_id, span_id, TraceFlags::SAMPLED, true, TraceState::default());
    parent.is_valid() && span.set_parent(opentelemetry::Context::new().with_remote_span_context(parent)).is_ok()
}

/// A request's server span, named `<METHOD> <route template>` as OpenTelemetry's HTTP conventions
/// ask (the raw path would make every URL its own name), for the API and the agent alike. A request
/// carrying a well-formed W3C `traceparent` header (the master calling an agent, a traced client)
/// continues that trace.
pub fn server_span<B>(request: &axum::http::Request<B>) -> tracing::Span {
    use crate::metrics::{UNMATCHED_ROUTE, method_label};
    let route = request.extensions().get::<axum::extract::MatchedPath>().map_or(UNMATCHED_ROUTE, |path| path.as_str());
    let method = method_label(request.method());
    let span = tracing::info_span!(
        "request",
        otel.name = %format_args!("{method} {route}"),
        otel.kind = "server",
        http.request.method = method,
        http.route = route,
        http.response.status_code = tracing::field::Empty,
    );
    let carried = request.headers().get("traceparent").and_then(|value| value.to_str().ok());
    if let Some(carried) = carried.and_then(crate::logline::read_traceparent) {
        continue_trace(&span, carried.trace_id, carried.span_id);
    }
    span
}

/// With traces on, a `collector.event` span for one line the collector writes, and the
/// `traceparent` the line then carries to the ingester; off, `None` (and no span).
pub fn line_written() -> Option<String> {
    if !enabled() {
        return None;
    }
    traceparent(&tracing::info_span!("collector.event", otel.kind = "producer"))
}

/// The trace and span ids to store with a line that carried `carried`: with traces on, those of an
/// `ingester.process_record` span continuing the collector's trace (so the row names the span that
/// stored it); off, the collector's own, as carried.
pub fn line_stored(
    carried: &crate::logline::TraceContext<'_>,
    decky: &str,
    service: &str,
    event_type: &str,
) -> (String, String) {
    let as_carried = || (carried.trace_id.to_string(), carried.span_id.to_string());
    if !enabled() {
        return as_carried();
    }
    let span = tracing::info_span!("ingester.process_record", otel.kind = "consumer", decky, service, event_type);
    if !continue_trace(&span, carried.trace_id, carried.span_id) {
        return as_carried();
    }
    let context = span.context();
    let ids = context.span().span_context().clone();
    if ids.is_valid() { (ids.trace_id().to_string(), ids.span_id().to_string()) } else { as_carried() }
}
