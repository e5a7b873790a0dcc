//! The deadline every request runs under: one still unanswered after it gets an empty 408, so a
//! graceful shutdown drains. A route that waits on something slower (a swarm update waits for
//! hosts to restart) asks for its own with a [`RouteDeadline`] layer on its router: the shared
//! [`request_deadline`] middleware runs before routing knows the route, so the layer tells it
//! through the request, and the deadline is measured from the same start either way.

use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tokio::sync::oneshot;
use tokio::time::Instant;
use tower::{Layer, Service};

use crate::config::Config;

/// How a route's deadline follows from the configuration.
pub type DeadlineOf = fn(&Config) -> Duration;

/// A route's own deadline, from the configuration, in place of the shared one: a layer its router
/// adds (`.layer(RouteDeadline(|config| …))`).
#[derive(Clone, Copy)]
pub struct RouteDeadline(pub DeadlineOf);

impl<S> Layer<S> for RouteDeadline {
    type Service = WithRouteDeadline<S>;

    fn layer(&self, inner: S) -> Self::Service {
        WithRouteDeadline { inner, deadline: self.0 }
    }
}

/// A route's service that tells [`request_deadline`] its [`RouteDeadline`] as a request reaches it.
#[derive(Clone)]
pub struct WithRouteDeadline<S> {
    inner: S,
    deadline: DeadlineOf,
}

impl<S, B> Service<axum::http::Request<B>> for WithRouteDeadline<S>
where
    S: Service<axum::http::Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: axum::http::Request<B>) -> Self::Future {
        if let Some(ask) = request.extensions().get::<AskDeadline>()
            && let Some(sender) = ask.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).take()
        {
            // The receiver is gone only when the request already ended.
            let _ = sender.send(self.deadline);
        }
        self.inner.call(request)
    }
}

/// Where a route's deadline travels back to [`request_deadline`], which put it in the request.
#[derive(Clone)]
struct AskDeadline(Arc<Mutex<Option<oneshot::Sender<DeadlineOf>>>>);

/// Answers 408 to a request unanswered after `limit`, or after its route's own deadline.
pub async fn request_deadline(
    State((config, limit)): State<(Arc<Config>, Duration)>,
    mut request: Request,
    next: Next,
) -> Response {
    let start = Instant::now();
    let (ask, mut asked) = oneshot::channel();
    request.extensions_mut().insert(AskDeadline(Arc::new(Mutex::new(Some(ask)))));
    let answer = next.run(request);
    tokio::pin!(answer);
    let deadline = tokio::time::sleep_until(start + limit);
    tokio::pin!(deadline);
    let mut listening = true;
    loop {
        tokio::select! {
            biased;
            response = &mut answer => return response,
            route = &mut asked, if listening => {
                listening = false;
                if let Ok(route) = route {
                    deadline.as_mut().reset(start + route(&config));
                }
            }
            () = &mut deadline => return StatusCode::REQUEST_TIMEOUT.into_response(),
        }
    }
}

#[cfg(test)]
mod tests {
    use axum::Router;
    use axum::body::Body;
    use axum::routing::get;
    use tower::ServiceExt;

    use super::*;

    #[tokio::test]
    async fn a_route_deadline_replaces_the_shared_one_from_the_same_start() {
        let config = Arc::new(Config::from_vars(Vec::new()).unwrap());
        let slow = || async {
            tokio::time::sleep(Duration::from_millis(600)).await;
            "done"
        };
        let app = Router::new()
            .route("/shared", get(slow))
            .merge(Router::new().route("/longer", get(slow)).layer(RouteDeadline(|_| Duration::from_secs(5))))
            .merge(Router::new().route("/shorter", get(slow)).layer(RouteDeadline(|_| Duration::from_millis(100))))
            .layer(axum::middleware::from_fn_with_state((config, Duration::from_millis(300)), request_deadline));
        let answer = |path: &'static str| {
            let app = app.clone();
            async move {
                let started = std::time::Instant::now();
                let response = app.oneshot(axum::http::Request::get(path).body(Body::empty()).unwrap()).await.unwrap();
                (response.status(), started.elapsed())
            }
        };
        assert_eq!(answer("/shared").await.0, StatusCode::REQUEST_TIMEOUT);
        assert_eq!(answer("/longer").await.0, StatusCode::OK);
        let (status, waited) = answer("/shorter").await;
        assert_eq!(status, StatusCode::REQUEST_TIMEOUT);
        assert!(waited < Duration::from_millis(300), "the route's shorter deadline holds: {waited:?}");
    }
}
