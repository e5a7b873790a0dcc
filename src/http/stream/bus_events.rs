//! The event streams fed from the bus (`/attackers/{uuid}/events`, `/topologies/{id}/events`): a
//! route says which subjects it follows, how it names a bus event (or leaves it out) and what its
//! opening frames are; [`BusEvents::open`] does the rest the same way for both.
//!
//! It subscribes before it reads the opening snapshot, so an event published while the snapshot
//! is read reaches the client (at worst twice, in the snapshot and live) and none is lost between
//! the two. A client that falls [`BACKLOG`] events behind is dropped rather than buffered. Without a
//! bus the stream holds its opening frames and keepalives, as DECNET's does. Server shutdown ends
//! it at once, the session's revocation within `SVC_SSE_RECHECK_SECS` (`revocation`), and however it ends, its slot of the per-user cap is freed.

use std::convert::Infallible;
use std::future::Future;

use axum::response::sse::Event;
use futures::{Stream, StreamExt, stream};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::sse::SseSlot;
use crate::bus::{self, Bus};
use crate::http::Result;

/// Events a client may fall behind before it is dropped.
pub const BACKLOG: usize = 256;

/// One bus-fed stream: what it follows and how its frames are named.
pub struct BusEvents<N> {
    /// Names the stream in the log (`topology <id>`).
    pub label: String,
    /// The subjects to follow.
    pub subjects: Vec<String>,
    /// The frame name of an event on a subject, or `None` when the event is not this stream's.
    pub name: N,
}

impl<N> BusEvents<N>
where
    N: Fn(&str, &bus::Event) -> Option<String> + Send + 'static,
{
    /// The event-stream response: `opening` (read after subscribing), then each followed event
    /// `name` keeps, as `event: <name>` with the event as JSON data. `slot` is held until the
    /// stream ends; `closing` ends it. The route wraps the frames in `revocation::response`.
    pub async fn open<O>(
        self,
        bus: &Bus,
        closing: CancellationToken,
        slot: SseSlot,
        opening: O,
    ) -> Result<impl Stream<Item = Result<Event, Infallible>> + Send + 'static + use<N, O>>
    where
        O: Future<Output = Result<Vec<Event>>>,
    {
        let mut subscribers = Vec::new();
        for subject in &self.subjects {
            subscribers.extend(bus.subscribe(subject.clone()).await);
        }
        let opening = opening.await?;

        let (tx, rx) = tokio::sync::mpsc::channel::<Event>(BACKLOG);
        // Without a bus nothing sends, and this sender keeps the channel (so the stream) open.
        let idle_sender = if subscribers.is_empty() {
            Some(tx)
        } else {
            tokio::spawn(forward(self, stream::select_all(subscribers), tx, closing.clone()));
            None
        };
        let live = stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|event| (event, rx)) });
        let frames = stream::iter(opening).chain(live).take_until(closing.cancelled_owned()).map(move |event| {
            // The stream owns its slot and, without a bus, its idle sender.
            let _held = (&slot, &idle_sender);
            Ok::<_, Infallible>(event)
        });
        Ok(frames)
    }
}

/// Sends the stream's events to its client until the client goes, falls behind, or the server closes.
async fn forward<N>(
    events: BusEvents<N>,
    mut messages: stream::SelectAll<async_nats::Subscriber>,
    tx: tokio::sync::mpsc::Sender<Event>,
    closing: CancellationToken,
) where
    N: Fn(&str, &bus::Event) -> Option<String>,
{
    loop {
        let message = tokio::select! {
            () = closing.cancelled() => return,
            () = tx.closed() => return,
            message = messages.next() => message,
        };
        let Some(message) = message else { return };
        let Ok(event) = serde_json::from_slice::<bus::Event>(&message.payload) else { continue };
        let Some(name) = (events.name)(&message.subject, &event) else { continue };
        // Full: the client is too slow to keep; ending the channel ends its stream.
        if tx.try_send(Event::default().event(name).data(json!(event).to_string())).is_err() {
            tracing::info!(stream = %events.label, "Dropping an event stream that fell behind");
            return;
        }
    }
}
