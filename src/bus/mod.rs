//! The message bus: one NATS connection per process, the JSON event envelope every message uses,
//! the worker heartbeat and control messages, and the API's worker registry. The database is the
//! truth; the bus carries health, control intents and hints, so losing it degrades, never fails:
//! with no `SVC_NATS_URL`, or while the server is unreachable, publishing and subscribing are
//! no-ops and the connection keeps being retried in the background.

pub mod bus_health;
pub mod control;
pub mod heartbeat;
mod liveness;
pub mod logs;
pub mod registry;
pub mod topics;

use std::time::Duration;

use async_nats::connection::State;
use serde::{Deserialize, Serialize};

pub use control::ControlRequest;
pub use heartbeat::{Counters, Fault, HealthPayload};
pub use registry::{Tier, WorkerRegistry, WorkerRow};

/// How long startup waits for a first connection before going on without one.
const CONNECT_WAIT: Duration = Duration::from_secs(2);
/// One connection attempt; an unreachable server must not hold a retry for long.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Reconnect attempts back off to this, so a returning server is noticed within seconds.
const MAX_RECONNECT_DELAY: Duration = Duration::from_secs(2);
/// The NATS header that carries a message's trace (W3C trace context).
const TRACEPARENT: &str = "traceparent";
/// Bounds a flush or drain against a server that stopped answering.
const ROUND_TRIP_TIMEOUT: Duration = Duration::from_secs(2);

/// Every message on the bus: `{topic, type, ts, payload}`, `ts` in epoch seconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub topic: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub ts: f64,
    pub payload: serde_json::Value,
}

impl Event {
    pub fn new(topic: impl Into<String>, kind: impl Into<String>, payload: serde_json::Value) -> Event {
        Event { topic: topic.into(), kind: kind.into(), ts: epoch_seconds(), payload }
    }
}

/// Now, in epoch seconds.
pub fn epoch_seconds() -> f64 {
    chrono::Utc::now().timestamp_micros() as f64 / 1e6
}

#[derive(Debug, thiserror::Error)]
pub enum BusError {
    /// No bus is configured, or it is not reachable right now.
    #[error("bus unavailable")]
    Unavailable,
    #[error(transparent)]
    BadSubject(#[from] topics::BadToken),
    #[error("bus publish failed: {0}")]
    Publish(String),
}

/// A process's handle on the bus; cheap to clone. Absent when no URL is configured.
#[derive(Clone, Debug)]
pub struct Bus {
    client: Option<async_nats::Client>,
    /// Ends the liveness watch when the last handle goes.
    _watch: Option<std::sync::Arc<tokio_util::sync::DropGuard>>,
}

impl Bus {
    /// A bus that is never there: every publish is a no-op.
    pub fn absent() -> Bus {
        Bus { client: None, _watch: None }
    }

    /// Connects to `url` (one server, or a cluster's servers separated by commas: any one that
    /// answers will do, and a lost one is replaced by another) as `name`, waiting at most a couple of seconds. An unreachable server
    /// gives a disconnected bus that keeps retrying in the background; no URL gives an absent one.
    pub async fn connect(url: Option<&str>, name: &str) -> Bus {
        let Some(url) = url else {
            tracing::info!("No SVC_NATS_URL: running without a bus");
            return Bus::absent();
        };
        let options = async_nats::ConnectOptions::new()
            .name(name)
            .retry_on_initial_connect()
            .max_reconnects(None)
            .connection_timeout(CONNECT_TIMEOUT)
            .reconnect_delay_callback(|attempts| {
                let exp = u32::try_from(attempts).unwrap_or(u32::MAX).min(8);
                (Duration::from_millis(100) * 2u32.pow(exp)).min(MAX_RECONNECT_DELAY)
            })
            .event_callback(|event| async move {
                match event {
                    async_nats::Event::Connected => tracing::info!("Bus connected"),
                    async_nats::Event::Disconnected => tracing::warn!("Bus disconnected; reconnecting"),
                    other => tracing::debug!(event = %other, "Bus event"),
                }
            });
        // async-nats takes a list of servers, but not as one string.
        let servers: Vec<&str> = url.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
        let client = match options.connect(servers).await {
            Ok(client) => client,
            Err(err) => {
                // Only an unusable URL gets here: connection failures are retried in the background.
                tracing::error!(error = %err, "SVC_NATS_URL is unusable; running without a bus");
                return Bus::absent();
            }
        };
        let stop = tokio_util::sync::CancellationToken::new();
        tokio::spawn(liveness::watch(client.clone(), stop.clone()));
        let bus = Bus { client: Some(client), _watch: Some(std::sync::Arc::new(stop.drop_guard())) };
        let deadline = tokio::time::Instant::now() + CONNECT_WAIT;
        while !bus.is_connected() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if !bus.is_connected() {
            tracing::warn!("Bus not reachable yet; going on without it and retrying in the background");
        }
        bus
    }

    pub fn is_connected(&self) -> bool {
        self.connected().is_ok()
    }

    /// Publishes `event` on its topic. Fails fast with [`BusError::Unavailable`] rather than
    /// queueing while the bus is down: a late heartbeat or stop intent would mislead.
    pub async fn publish(&self, event: &Event) -> Result<(), BusError> {
        use tracing::Instrument;
        let client = self.connected()?;
        let body = serde_json::to_vec(event).expect("an event serialises");
        // A producer span only while traces are exported: off, not even a disabled span is made.
        if !crate::traces::enabled() {
            return client
                .publish(event.topic.clone(), body.into())
                .await
                .map_err(|err| BusError::Publish(err.to_string()));
        }
        let span = tracing::info_span!(
            "bus.publish",
            otel.name = %format_args!("publish {}", event.topic),
            otel.kind = "producer",
            messaging.system = "nats",
            messaging.destination.name = %event.topic,
        );
        let mut headers = async_nats::HeaderMap::new();
        if let Some(traceparent) = crate::traces::traceparent(&span) {
            headers.insert(TRACEPARENT, traceparent.as_str());
        }
        client
            .publish_with_headers(event.topic.clone(), headers, body.into())
            .instrument(span)
            .await
            .map_err(|err| BusError::Publish(err.to_string()))
    }

    /// Publishes `body` as it is on `subject` (an answer to a request, which is no event).
    pub async fn publish_raw(&self, subject: String, body: Vec<u8>) -> Result<(), BusError> {
        let client = self.connected()?;
        client.publish(subject, body.into()).await.map_err(|err| BusError::Publish(err.to_string()))
    }

    /// Publishes `event` and waits until the server has it, for intents a caller is told were sent.
    pub async fn publish_confirmed(&self, event: &Event) -> Result<(), BusError> {
        self.publish(event).await?;
        round_trip(self.connected()?).await
    }

    /// Sends `body` to whoever answers on `subject` and waits at most `timeout` for the answer;
    /// `None` when no one answered.
    pub async fn request(
        &self,
        subject: String,
        body: Vec<u8>,
        timeout: Duration,
    ) -> Result<Option<bytes::Bytes>, BusError> {
        let client = self.connected()?;
        let request = async_nats::Request::new().payload(body.into()).timeout(Some(timeout));
        match client.send_request(subject, request).await {
            Ok(message) => Ok(Some(message.payload)),
            Err(err) => match err.kind() {
                async_nats::RequestErrorKind::NoResponders | async_nats::RequestErrorKind::TimedOut => Ok(None),
                async_nats::RequestErrorKind::Other => Err(BusError::Publish(err.to_string())),
            },
        }
    }

    /// Messages on `subject`, surviving reconnects. `None` when there is no bus at all. When the
    /// bus is up, the server has the subscription on return (a round trip, bounded), so what is
    /// published after that reaches it.
    pub async fn subscribe(&self, subject: String) -> Option<async_nats::Subscriber> {
        let client = self.client.as_ref()?;
        match client.subscribe(subject.clone()).await {
            Ok(subscriber) => {
                if self.is_connected() {
                    let _ = round_trip(client).await;
                }
                Some(subscriber)
            }
            Err(err) => {
                tracing::warn!(%subject, error = %err, "Bus subscription failed");
                None
            }
        }
    }

    /// Sends what is buffered and closes the connection; bounded, as the server may be gone.
    pub async fn close(&self) {
        let Some(client) = &self.client else { return };
        if self.is_connected() {
            // Flush first: a short-lived publisher (`svc worker sniffer --replay`) stops right after
            // its last publish, and draining alone was seen to lose those messages.
            let _ = tokio::time::timeout(ROUND_TRIP_TIMEOUT, async {
                let _ = client.flush().await;
                client.drain().await
            })
            .await;
        }
    }

    fn connected(&self) -> Result<&async_nats::Client, BusError> {
        match &self.client {
            Some(client) if client.connection_state() == State::Connected => Ok(client),
            _ => Err(BusError::Unavailable),
        }
    }
}

/// The span to handle `message` in, while traces are exported: a consumer span continuing the
/// trace its publisher carried in the `traceparent` header (a new trace when there is none). Off,
/// [`tracing::Span::none`].
pub fn received(message: &async_nats::Message) -> tracing::Span {
    if !crate::traces::enabled() {
        return tracing::Span::none();
    }
    let span = tracing::info_span!(
        "bus.receive",
        otel.name = %format_args!("receive {}", message.subject),
        otel.kind = "consumer",
        messaging.system = "nats",
        messaging.destination.name = %message.subject,
    );
    let carried = message.headers.as_ref().and_then(|headers| headers.get(TRACEPARENT));
    if let Some(carried) = carried.and_then(|value| crate::logline::read_traceparent(value.as_str())) {
        crate::traces::continue_trace(&span, carried.trace_id, carried.span_id);
    }
    span
}

/// Returns once the server has processed everything `client` sent before the call: a message to a
/// fresh inbox of our own comes back only after the server has read what preceded it. (A flush only
/// empties the client's buffer into the socket, which leaves a subscription racing other
/// connections' publishes.) Bounded, as the server may be gone.
async fn round_trip(client: &async_nats::Client) -> Result<(), BusError> {
    use futures::StreamExt;
    let inbox = client.new_inbox();
    let echo = async {
        let mut echo = client.subscribe(inbox.clone()).await.map_err(|err| BusError::Publish(err.to_string()))?;
        client.publish(inbox, bytes::Bytes::new()).await.map_err(|err| BusError::Publish(err.to_string()))?;
        client.flush().await.map_err(|err| BusError::Publish(err.to_string()))?;
        echo.next().await.ok_or(BusError::Unavailable)?;
        let _ = echo.unsubscribe().await;
        Ok(())
    };
    tokio::time::timeout(ROUND_TRIP_TIMEOUT, echo).await.unwrap_or(Err(BusError::Unavailable))
}
