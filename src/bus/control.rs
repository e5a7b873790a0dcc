//! Control intents on `system.<worker>.control`: the API publishes them, the worker runner listens.

use serde::{Deserialize, Serialize};

use super::{Bus, BusError, Event, epoch_seconds, topics};

/// The message type of a control event.
pub const CONTROL_TYPE: &str = "control";

/// What a worker is asked to do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ControlRequest {
    /// `stop`; `start` is reserved (a stopped process cannot hear it).
    pub action: String,
    /// Who asked, for the worker's log.
    pub requested_by: String,
    pub ts: f64,
}

impl ControlRequest {
    pub fn stop(requested_by: impl Into<String>) -> ControlRequest {
        ControlRequest { action: "stop".into(), requested_by: requested_by.into(), ts: epoch_seconds() }
    }

    pub fn is_stop(&self) -> bool {
        self.action == "stop"
    }

    /// Reads a control event's payload; anything else on the subject is not a request.
    pub fn from_message(body: &[u8]) -> Option<ControlRequest> {
        let event: Event = serde_json::from_slice(body).ok()?;
        serde_json::from_value(event.payload).ok()
    }
}

/// Publishes `request` to `worker` and waits until the server has it.
pub async fn send(bus: &Bus, worker: &str, request: &ControlRequest) -> Result<(), BusError> {
    let topic = topics::worker_control(worker)?;
    let payload = serde_json::to_value(request).expect("a control request serialises");
    bus.publish_confirmed(&Event::new(topic, CONTROL_TYPE, payload)).await
}

/// Control requests for `worker`, or `None` when there is no bus.
pub async fn listen(bus: &Bus, worker: &str) -> Result<Option<async_nats::Subscriber>, BusError> {
    Ok(bus.subscribe(topics::worker_control(worker)?).await)
}
