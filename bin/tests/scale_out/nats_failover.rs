//! NATS as a cluster (issue 37): an `svc api` given every node's URL goes on through a surviving
//! node when the one it uses is killed. Its heartbeats, the stop intents it sends and the topology
//! events it streams keep flowing; three real `nats-server` nodes on loopback, no database server.

use std::path::Path;
use std::time::{Duration, Instant};

use futures::StreamExt;
use reqwest::Method;
use serde_json::json;
use svc_test_support::in_process::sse::EventStream;
use svc_test_support::processes::{self as common, Proc, eventually};

use super::services::NatsCluster;

/// `svc api` on every node of `cluster`, once it is connected: (process, port, the node it uses).
async fn api_on(cluster: &NatsCluster, dir: &Path) -> (Proc, u16, usize) {
    let (mut command, port) = common::api_command(dir, None);
    command.env("SVC_NATS_URL", cluster.urls());
    let api = common::start_api(command, port).await;
    eventually("the API is connected to one node", || async { cluster.node_of("svc-api").await.is_some() }).await;
    let used = cluster.node_of("svc-api").await.unwrap();
    (api, port, used)
}

/// Waits until the API is connected to a node other than `dead`; returns that node.
async fn moved_off(cluster: &NatsCluster, dead: usize) -> usize {
    eventually("the API is on a surviving node", || async {
        cluster.node_of("svc-api").await.is_some_and(|n| n != dead)
    })
    .await;
    cluster.node_of("svc-api").await.unwrap()
}

#[tokio::test]
async fn heartbeats_keep_flowing_when_the_nats_node_an_api_uses_dies() {
    let mut cluster = NatsCluster::start();
    let dir = tempfile::tempdir().unwrap();
    let (_api, _port, used) = api_on(&cluster, dir.path()).await;
    let watcher = async_nats::connect(cluster.url((used + 1) % 3)).await.unwrap();
    let mut heartbeats = watcher.subscribe("system.api.health").await.unwrap();
    let heard = tokio::time::timeout(common::DEADLINE, heartbeats.next()).await;
    assert!(matches!(heard, Ok(Some(_))), "the API's heartbeat crosses the cluster to another node");

    cluster.kill(used);
    let killed = Instant::now();
    // What the dead node had buffered may still arrive; a heartbeat sent after the kill proves the
    // API reconnected to a surviving node.
    loop {
        let heard = tokio::time::timeout(Duration::from_secs(10), heartbeats.next()).await;
        assert!(matches!(heard, Ok(Some(_))), "heartbeats stopped {:?} after the node died", killed.elapsed());
        if killed.elapsed() > Duration::from_secs(2) {
            break;
        }
    }
    let now = moved_off(&cluster, used).await;
    eprintln!("NATS failover: heartbeats continued; the API is on node {now} after node {used} died");
}

#[tokio::test]
async fn stop_intents_and_topology_events_keep_flowing_when_the_nats_node_an_api_uses_dies() {
    let mut cluster = NatsCluster::start();
    let dir = tempfile::tempdir().unwrap();
    let (_api, port, used) = api_on(&cluster, dir.path()).await;
    let other = (used + 1) % 3;
    // The worker and the publisher of topology events know only a node that survives.
    let mut command = common::svc(dir.path(), &["worker", "fixture-a"]);
    command.env("SVC_NATS_URL", cluster.url(other));
    let mut worker = Proc::spawn(command);
    eventually("the worker is heard", || async {
        common::status_of(&common::list_workers(port).await, "fixture-a") == "ok"
    })
    .await;
    let token = common::admin_token(port).await;
    let (status, topology) =
        common::api_call(port, &token, Method::POST, "/topologies/blank", Some(json!({"name": "failover"}))).await;
    assert_eq!(status, 201, "{topology}");
    let id = topology["id"].as_str().unwrap().to_string();
    let url = format!("http://127.0.0.1:{port}/api/v1/topologies/{id}/events");
    let response = reqwest::Client::new().get(url).bearer_auth(&token).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let mut stream = EventStream::new(response);
    let snapshot = stream.next_event(common::DEADLINE).await.expect("the stream is open");
    assert_eq!(snapshot.event.as_deref(), Some("snapshot"), "{snapshot:?}");

    cluster.kill(used);
    let killed = Instant::now();
    let now = moved_off(&cluster, used).await;

    // An event published on a surviving node reaches the stream the API serves; the API's
    // subscription is renewed on its new node, whose interest crosses the cluster a moment later,
    // so the publisher repeats until one arrives.
    let publisher = async_nats::connect(cluster.url(other)).await.unwrap();
    let subject = format!("topology.{id}.status");
    let frame = loop {
        assert!(killed.elapsed() < common::DEADLINE, "no topology event {:?} after the node died", killed.elapsed());
        let event = json!({"topic": subject, "type": "status", "ts": 1.0, "payload": {"to": "active"}});
        publisher.publish(subject.clone(), event.to_string().into()).await.unwrap();
        publisher.flush().await.unwrap();
        let next = tokio::time::timeout(Duration::from_millis(500), stream.next_event(common::DEADLINE)).await;
        if let Ok(frame) = next {
            break frame.expect("the stream stays open across the failover");
        }
    };
    assert_eq!(frame.event.as_deref(), Some("status"), "{frame:?}");
    assert_eq!(frame.json()["payload"], json!({"to": "active"}));
    let streamed = killed.elapsed();

    // A stop intent sent through the API after the kill reaches the worker on another node.
    let (status, body) = common::workers_api(Method::POST, port, "/workers/fixture-a/stop").await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(worker.wait().code(), Some(0), "{}", worker.output());
    assert!(worker.output().contains("Stop requested"), "{}", worker.output());
    eprintln!(
        "NATS failover: node {used} killed, the API on node {now}; a topology event streamed {streamed:?} \
         after the kill, the stop intent obeyed {:?} after it",
        killed.elapsed()
    );
}
