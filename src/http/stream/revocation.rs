//! Ends an open event stream once its session is no longer good: every stream route wraps its
//! frames in [`until_revoked`], which re-checks the session every `SVC_SSE_RECHECK_SECS` (at most
//! 10 s) against the database and, once the token is logged out or expired, the user's password or
//! role changed (or reset), or the user deleted, sends a final `event: error` frame and ends the
//! stream. A database failure during a check is logged and the stream goes on: the store being
//! down is `/health`'s news, and the next check decides.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::response::Response;
use axum::response::sse::Event;
use futures::{Stream, StreamExt, stream};
use serde_json::json;
use uuid::Uuid;

use super::sse;
use crate::auth::session::{AuthError, Credential, Session, Sessions};
use crate::http::AppState;

/// The final frame's message.
pub const SESSION_ENDED: &str = "Session expired or revoked";

/// The event-stream response of `frames` for `session`'s caller, ended once the session is revoked.
pub fn response<S>(state: &AppState, session: &Session, frames: S) -> Response
where
    S: Stream<Item = Result<Event, Infallible>> + Send + 'static,
{
    sse::response(until_revoked(frames, state.sessions.clone(), session, state.config.api.sse_recheck))
}

/// `frames` until the session is revoked, then the final error frame.
pub fn until_revoked<S>(
    frames: S,
    sessions: Arc<Sessions>,
    session: &Session,
    every: Duration,
) -> impl Stream<Item = Result<Event, Infallible>> + Send + 'static
where
    S: Stream<Item = Result<Event, Infallible>> + Send + 'static,
{
    let start = tokio::time::Instant::now() + every;
    let guard = Guard {
        frames: Box::pin(frames),
        sessions,
        user: session.user.uuid,
        credential: session.credential.clone(),
        checks: tokio::time::interval_at(start, every),
        ended: false,
    };
    stream::unfold(guard, |mut guard| async move {
        let frame = guard.next().await?;
        Some((frame, guard))
    })
}

struct Guard<S> {
    frames: std::pin::Pin<Box<S>>,
    sessions: Arc<Sessions>,
    user: Uuid,
    credential: Credential,
    checks: tokio::time::Interval,
    ended: bool,
}

impl<S: Stream<Item = Result<Event, Infallible>>> Guard<S> {
    async fn next(&mut self) -> Option<Result<Event, Infallible>> {
        if self.ended {
            return None;
        }
        loop {
            tokio::select! {
                // Polling `next` again after a check resumes the same frame: the feed keeps its
                // own state between polls.
                frame = self.frames.next() => return frame,
                _ = self.checks.tick() => match self.sessions.recheck(self.user, &self.credential).await {
                    Ok(()) => {}
                    Err(AuthError::Rejected(reason)) => {
                        tracing::info!(user = %self.user, %reason, "Ending an event stream: its session ended");
                        self.ended = true;
                        let data = json!({"type": "error", "message": SESSION_ENDED});
                        return Some(Ok(Event::default().event("error").data(data.to_string())));
                    }
                    Err(AuthError::Store(err)) => {
                        tracing::warn!(error = %err, "Cannot re-check an event stream's session");
                    }
                },
            }
        }
    }
}
