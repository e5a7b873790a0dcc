//! The HTTP server on a real socket: peer addresses, hostile slow clients, graceful draining.

mod common;

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
async fn a_client_trickling_its_headers_is_cut_off_while_others_are_served() {
    let server = Server::start(Router::new().route("/ok", get(|| async { "ok" }))).await;
    let mut slow = TcpStream::connect(server.addr).await.unwrap();
    slow.write_all(b"GET /ok HTTP/1.1\r\nHost: svc\r\n").await.unwrap();

    // Meanwhile a well-behaved client is served.
    assert_eq!(reqwest::get(server.url("/ok")).await.unwrap().text().await.unwrap(), "ok");

    // The slow one never completes its headers and is disconnected (hyper may say 408 first).
    let limit = svc::http::HEADER_READ_TIMEOUT + Duration::from_secs(5);
    let mut answer = Vec::new();
    let read = tokio::time::timeout(limit, slow.read_to_end(&mut answer)).await;
    assert!(read.is_ok(), "the slow connection was still open after {limit:?}");
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.is_empty() || answer.starts_with("HTTP/1.1 408"), "{answer}");
    server.stop().await;
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
