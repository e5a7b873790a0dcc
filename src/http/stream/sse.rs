//! The event-stream framing every stream route shares: the response itself (headers, the 15 s
//! keepalive comment, see [`response`]) and the per-user connection cap (`SVC_SSE_MAX_PER_USER`,
//! [`SseSlots`]), checked before a response starts so an over-cap client gets a real 429
//! ([`ApiError::TooManyStreams`]).
//!
//! A slot is an RAII guard the stream holds: however the stream ends (the client goes away, an
//! error frame, server shutdown) dropping the stream drops the slot and frees it.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::{HeaderName, HeaderValue};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::Stream;
use uuid::Uuid;

use crate::http::ApiError;

/// One Server-Sent Events frame as the OpenAPI document describes a stream's items: its `event`
/// name, its `data` (a JSON text) and, on the log stream's row frames, its `id`.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct SseFrame {
    pub event: Option<String>,
    /// A JSON text.
    pub data: String,
    pub id: Option<String>,
}

/// The query of a stream route that takes only the ticket.
#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct TicketQuery {
    /// A single-use ticket from `POST /auth/sse-ticket`, for clients that cannot send a header.
    pub ticket: Option<String>,
}

impl crate::http::extract::Validate for TicketQuery {}

/// A comment line this often keeps proxies and browsers from closing an idle stream.
pub const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(15);

/// Open event streams per user, across every stream route of this replica.
#[derive(Debug)]
pub struct SseSlots {
    max_per_user: u32,
    open: Mutex<HashMap<Uuid, u32>>,
}

impl SseSlots {
    pub fn new(max_per_user: u32) -> SseSlots {
        SseSlots { max_per_user, open: Mutex::default() }
    }

    /// A slot for one more stream of `user`, or the 429 the client gets when it holds them all.
    pub fn acquire(self: &Arc<Self>, user: Uuid) -> Result<SseSlot, ApiError> {
        let mut open = self.open.lock().expect("slot lock");
        let count = open.entry(user).or_insert(0);
        if *count >= self.max_per_user {
            return Err(ApiError::TooManyStreams { max_per_user: self.max_per_user });
        }
        *count += 1;
        Ok(SseSlot { slots: self.clone(), user })
    }

    /// Streams open now, every user's.
    pub fn total(&self) -> u64 {
        self.open.lock().expect("slot lock").values().map(|n| u64::from(*n)).sum()
    }

    /// Streams `user` holds open now.
    pub fn open(&self, user: Uuid) -> u32 {
        self.open.lock().expect("slot lock").get(&user).copied().unwrap_or(0)
    }
}

/// One open stream; dropping it frees the slot.
#[derive(Debug)]
pub struct SseSlot {
    slots: Arc<SseSlots>,
    user: Uuid,
}

impl Drop for SseSlot {
    fn drop(&mut self) {
        let mut open = self.slots.open.lock().expect("slot lock");
        if let Some(count) = open.get_mut(&self.user) {
            *count -= 1;
            if *count == 0 {
                open.remove(&self.user);
            }
        }
    }
}

/// An event-stream response: `text/event-stream`, `Cache-Control: no-cache`, `X-Accel-Buffering:
/// no` (so nginx passes frames through unbuffered) and `: keepalive` whenever 15 s pass silently.
pub fn response<S>(events: S) -> Response
where
    S: Stream<Item = Result<Event, Infallible>> + Send + 'static,
{
    let mut response =
        Sse::new(events).keep_alive(KeepAlive::new().interval(KEEPALIVE_INTERVAL).text("keepalive")).into_response();
    response.headers_mut().insert(HeaderName::from_static("x-accel-buffering"), HeaderValue::from_static("no"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_gets_the_configured_number_of_slots_and_each_drop_frees_one() {
        let slots = Arc::new(SseSlots::new(2));
        let (alice, bob) = (Uuid::new_v4(), Uuid::new_v4());
        let first = slots.acquire(alice).unwrap();
        let second = slots.acquire(alice).unwrap();
        let refused = slots.acquire(alice).unwrap_err();
        assert!(matches!(refused, ApiError::TooManyStreams { max_per_user: 2 }));
        assert_eq!(refused.to_string(), "SSE connection limit (2) reached");
        let _other = slots.acquire(bob).expect("another user has slots of its own");
        drop(first);
        assert_eq!(slots.open(alice), 1);
        let _third = slots.acquire(alice).expect("a freed slot can be taken again");
        drop(second);
        assert_eq!(slots.open(alice), 1);
    }
}
