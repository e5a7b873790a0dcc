//! A webhook receiver on 127.0.0.1 that the test runs: it records every request (path, headers,
//! body) and answers from a script (200 once the script is used up), and a bare listener that only
//! counts connections, for destinations that must never be reached.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};

/// One request the receiver got.
#[derive(Clone, Debug)]
pub struct Hit {
    pub path: String,
    pub headers: HeaderMap,
    pub body: Bytes,
    /// The status the receiver answered it with.
    pub answered: u16,
}

impl Hit {
    pub fn header(&self, name: &str) -> &str {
        self.headers.get(name).map_or("", |v| v.to_str().unwrap())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap()
    }
}

/// A scripted answer: a status, and where a redirect points.
type Answer = (u16, Option<String>);

#[derive(Clone, Default)]
struct Shared {
    hits: Arc<Mutex<Vec<Hit>>>,
    /// Answers to give first, in order.
    script: Arc<Mutex<VecDeque<Answer>>>,
    /// The answer once the script is used up (200 until set).
    otherwise: Arc<Mutex<Option<u16>>>,
}

pub struct Receiver {
    pub addr: SocketAddr,
    shared: Shared,
    task: tokio::task::JoinHandle<()>,
}

impl Receiver {
    pub async fn start() -> Receiver {
        let shared = Shared::default();
        let app = Router::new().fallback(record).with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Receiver { addr, shared, task }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// The next requests get these statuses, in order.
    pub fn answer(&self, statuses: &[u16]) {
        self.shared.script.lock().unwrap().extend(statuses.iter().map(|s| (*s, None)));
    }

    /// The next request is redirected to `location`.
    pub fn redirect(&self, location: &str) {
        self.shared.script.lock().unwrap().push_back((302, Some(location.to_string())));
    }

    /// Every request after the script gets `status` from now on.
    pub fn answer_always(&self, status: u16) {
        *self.shared.otherwise.lock().unwrap() = Some(status);
    }

    pub fn hits(&self) -> Vec<Hit> {
        self.shared.hits.lock().unwrap().clone()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn record(State(shared): State<Shared>, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let otherwise = shared.otherwise.lock().unwrap().unwrap_or(200);
    let (status, location) = shared.script.lock().unwrap().pop_front().unwrap_or((otherwise, None));
    shared.hits.lock().unwrap().push(Hit { path: uri.to_string(), headers, body, answered: status });
    let status = StatusCode::from_u16(status).unwrap();
    match location {
        Some(location) => (status, [(header::LOCATION, location)]).into_response(),
        None => status.into_response(),
    }
}

/// A listener that accepts and counts connections, and never answers.
pub struct Tripwire {
    pub port: u16,
    connections: Arc<AtomicUsize>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Tripwire {
    /// On 127.0.0.1 and, when the host has IPv6 loopback, on [::1], with one port.
    pub async fn start() -> Tripwire {
        let v4 = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = v4.local_addr().unwrap().port();
        let mut listeners = vec![v4];
        if let Ok(v6) = tokio::net::TcpListener::bind(("::1", port)).await {
            listeners.push(v6);
        }
        let connections = Arc::new(AtomicUsize::new(0));
        let tasks = listeners
            .into_iter()
            .map(|listener| {
                let connections = connections.clone();
                tokio::spawn(async move {
                    while let Ok((stream, _)) = listener.accept().await {
                        connections.fetch_add(1, Ordering::SeqCst);
                        drop(stream);
                    }
                })
            })
            .collect();
        Tripwire { port, connections, tasks }
    }

    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

impl Drop for Tripwire {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}
