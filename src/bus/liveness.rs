//! Noticing a server that stopped answering but keeps its socket open (a paused or wedged
//! nats-server): the TCP connection looks fine and the client's own pings only go out when nothing
//! else is sent, so it could read `connected` for minutes. Every [`ECHO_EVERY`] the connection
//! sends itself a message through the server; one not back within [`ECHO_TIMEOUT`] forces a
//! reconnect, which reads as disconnected until the server answers again.

use std::time::Duration;

use futures::{FutureExt, StreamExt};
use tokio_util::sync::CancellationToken;

use super::topics;

pub const ECHO_EVERY: Duration = Duration::from_secs(2);
pub const ECHO_TIMEOUT: Duration = Duration::from_secs(3);

/// Runs until `stop` (the last handle on the bus is gone) or the client is drained.
pub async fn watch(client: async_nats::Client, stop: CancellationToken) {
    let subject = topics::bus_echo(&uuid::Uuid::new_v4());
    let Ok(mut echoes) = client.subscribe(subject.clone()).await else { return };
    let mut every = tokio::time::interval(ECHO_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = every.tick() => {}
        }
        if client.connection_state() != async_nats::connection::State::Connected {
            continue;
        }
        // Echoes that came back after their deadline are not proof of life now.
        while let Some(Some(_)) = echoes.next().now_or_never() {}
        if client.publish(subject.clone(), bytes::Bytes::new()).await.is_err() {
            continue;
        }
        tokio::select! {
            () = stop.cancelled() => return,
            echoed = tokio::time::timeout(ECHO_TIMEOUT, echoes.next()) => match echoed {
                Ok(Some(_)) => {}
                // The subscription ended: the client was drained or closed.
                Ok(None) => return,
                Err(_) => {
                    tracing::warn!(timeout = ?ECHO_TIMEOUT, "Bus server stopped answering; reconnecting");
                    let _ = client.force_reconnect().await;
                }
            }
        }
    }
}
