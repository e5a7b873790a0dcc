//! Control intents on `system.<worker>.control`: the API publishes them, the worker runner listens.
//! And start requests on `system.supervisor.start`: the API asks, `svc supervise` answers.

use serde::{Deserialize, Serialize};

use std::time::Duration;

use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use super::{Bus, BusError, Event, epoch_seconds, topics};

/// How long the API waits for a supervisor's answer.
const START_ANSWER_WAIT: Duration = Duration::from_secs(2);

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

/// A supervisor's answer to a start request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StartAnswer {
    pub started: bool,
    pub detail: String,
}

#[derive(Serialize, Deserialize)]
struct StartRequest {
    worker: String,
}

/// Asks a supervisor on the bus to start `worker`; `None` when none answered.
pub async fn ask_to_start(bus: &Bus, worker: &str) -> Result<Option<StartAnswer>, BusError> {
    let body = serde_json::to_vec(&StartRequest { worker: worker.into() }).expect("serialises");
    let answer = bus.request(topics::SUPERVISOR_START.to_string(), body, START_ANSWER_WAIT).await?;
    Ok(answer.and_then(|bytes| serde_json::from_slice(&bytes).ok()))
}

/// Answers start requests with `decide` until `stop`.
pub async fn answer_start_requests(bus: &Bus, decide: impl Fn(&str) -> StartAnswer, stop: CancellationToken) {
    let Some(mut requests) = bus.subscribe(topics::SUPERVISOR_START.to_string()).await else { return };
    loop {
        let message = tokio::select! {
            () = stop.cancelled() => return,
            message = requests.next() => message,
        };
        let Some(message) = message else { return };
        let (Some(reply), Ok(request)) = (message.reply, serde_json::from_slice::<StartRequest>(&message.payload))
        else {
            continue;
        };
        let answer = serde_json::to_vec(&decide(&request.worker)).expect("serialises");
        if let Err(err) = bus.publish_raw(reply.to_string(), answer).await {
            tracing::warn!(error = %err, "Start request not answered");
        }
    }
}
