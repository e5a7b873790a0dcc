//! The HTTP server on a real socket: peer addresses, hostile slow clients, graceful draining.

use svc_test_support::in_process as common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use axum::routing::get;
use common::TestDb;
use svc::http::AppState;
use svc::startup::Lifespan;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

struct Server {
    addr: SocketAddr,
    shutdown: CancellationToken,
    serving: JoinHandle<std::io::Result<()>>,
    lifespan: Lifespan,
    _db: TestDb,
}

impl Server {
    /// `routes` with the shared layers, on a free loopback port.
    async fn start(routes: Router<AppState>) -> Server {
        let db = TestDb::sqlite();
        let lifespan = Lifespan::start(db.api_config(&[]), vec![]).await.unwrap();
        let app = svc::http::with_layers(routes, lifespan.state().clone());
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let shutdown = CancellationToken::new();
        let serving = tokio::spawn(svc::http::serve(listener, app, shutdown.clone()));
        Server { addr, shutdown, serving, lifespan, _db: db }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    async fn stop(self) {
        self.shutdown.cancel();
        self.serving.await.unwrap().unwrap();
        self.lifespan.shutdown().await;
    }
}

#[tokio::test]
async fn handlers_see_the_socket_peer_not_forwarded_headers() {
    let routes = Router::new()
        .route("/peer", get(|ConnectInfo(peer): ConnectInfo<SocketAddr>| async move { peer.ip().to_string() }));
    let server = Server::start(routes).await;
    let body = reqwest::Client::new()
        .get(server.url("/peer"))
        .header("x-forwarded-for", "203.0.113.9")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(body, "127.0.0.1");
    server.stop().await;
}

#[tokio::test]
async fn clients_that_never_finish_a_request_head_are_cut_off_while_others_are_served() {
    let server = Server::start(Router::new().route("/ok", get(|| async { "ok" }))).await;
    let partial: [&[u8]; 4] = [
        b"",                                  // connects and says nothing
        b"P",                                 // one byte, as if starting an HTTP/2 preface
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",  // an HTTP/2 prior-knowledge preface
        b"GET /ok HTTP/1.1\r\nHost: svc\r\n", // headers that never end
    ];
    let mut slow = Vec::new();
    for bytes in partial {
        let mut stream = TcpStream::connect(server.addr).await.unwrap();
        stream.write_all(bytes).await.unwrap();
        slow.push((bytes, stream));
    }

    // Meanwhile a well-behaved client is served.
    assert_eq!(reqwest::get(server.url("/ok")).await.unwrap().text().await.unwrap(), "ok");

    // Each slow one is disconnected (hyper may answer 400 or 408 first), none held open.
    let limit = svc::http::HEADER_READ_TIMEOUT + Duration::from_secs(5);
    let closed = slow.into_iter().map(|(bytes, mut stream)| async move {
        let mut answer = Vec::new();
        let read = tokio::time::timeout(limit, stream.read_to_end(&mut answer)).await;
        (String::from_utf8_lossy(bytes).into_owned(), read.is_ok(), String::from_utf8_lossy(&answer).into_owned())
    });
    for (sent, was_closed, answer) in join_all_spawned(closed).await {
        assert!(was_closed, "a connection that sent {sent:?} was still open after {limit:?}");
        assert!(answer.is_empty() || answer.starts_with("HTTP/1.1 4"), "{sent:?} got {answer}");
    }
    server.stop().await;
}

/// Awaits every future concurrently, keeping their order.
async fn join_all_spawned<F>(futures: impl IntoIterator<Item = F>) -> Vec<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let handles: Vec<_> = futures.into_iter().map(tokio::spawn).collect();
    let mut outputs = Vec::new();
    for handle in handles {
        outputs.push(handle.await.unwrap());
    }
    outputs
}

#[tokio::test]
async fn shutdown_lets_an_in_flight_request_finish_and_refuses_new_ones() {
    let handling = Arc::new(Notify::new());
    let notify = handling.clone();
    let routes = Router::new().route(
        "/slow",
        get(move || async move {
            notify.notify_one();
            tokio::time::sleep(Duration::from_millis(500)).await;
            "done"
        }),
    );
    let server = Server::start(routes).await;
    let in_flight = tokio::spawn(reqwest::get(server.url("/slow")));
    handling.notified().await;
    let addr = server.addr;
    server.stop().await;
    let response = in_flight.await.unwrap().unwrap();
    assert_eq!(response.text().await.unwrap(), "done");
    assert!(TcpStream::connect(addr).await.is_err(), "still accepting after shutdown");
}

#[tokio::test]
async fn an_idle_keep_alive_connection_does_not_hold_up_shutdown() {
    let server = Server::start(Router::new().route("/ok", get(|| async { "ok" }))).await;
    let mut idle = TcpStream::connect(server.addr).await.unwrap();
    idle.write_all(b"GET /ok HTTP/1.1\r\nHost: svc\r\n\r\n").await.unwrap();
    let mut buf = [0u8; 512];
    let n = idle.read(&mut buf).await.unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));

    tokio::time::timeout(Duration::from_secs(5), server.stop()).await.expect("shutdown waited on an idle connection");
    let mut rest = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), idle.read_to_end(&mut rest)).await;
    assert!(read.is_ok(), "the idle connection was left open");
}
