//! The topology store on every backend under test: a topology with its parts round-trips, names
//! are unique, the status machine refuses illegal moves and records legal ones, edits are guarded
//! by status and version, and the mutation queue hands each mutation to exactly one claimer, one
//! at a time per topology, failing the claims a dead mutator left.

use svc_test_support::in_process as common;

use chrono::{Duration, Utc};
use common::TestDb;
use serde_json::json;
use svc::db::{
    ABANDONED_MUTATION, Db, DbError, Edge, EditGuard, Lan, MutationState, Topology, TopologyDecky, TopologyDetail,
    TopologyEdit, TopologyStatus,
};
use uuid::Uuid;

const LIVE: [TopologyStatus; 2] = [TopologyStatus::Active, TopologyStatus::Degraded];

fn topology(name: &str) -> TopologyDetail {
    let id = Uuid::new_v4();
    let now = Utc::now();
    let lan = |name: &str, subnet: &str, is_dmz| Lan {
        id: Uuid::new_v4(),
        topology_id: id,
        name: name.into(),
        subnet: subnet.into(),
        is_dmz,
        docker_network_id: None,
        x: Some(1.5),
        y: None,
    };
    let lans = vec![lan("LAN-00", "10.214.0.0/24", true), lan("LAN-01", "10.214.1.0/24", false)];
    let decky = |name: &str, ip: &str| TopologyDecky {
        uuid: Uuid::new_v4(),
        topology_id: id,
        name: name.into(),
        services: vec!["ssh".into(), "http".into()],
        decky_config: Some(json!({"forwards_l3": true})),
        ip: Some(ip.into()),
        state: "pending".into(),
        last_error: None,
        x: None,
        y: Some(2.0),
    };
    let deckies = vec![decky("decky-001", "10.214.0.2"), decky("decky-002", "10.214.1.2")];
    let edge = |decky: &TopologyDecky, lan: &Lan, ip: &str| Edge {
        id: Uuid::new_v4(),
        topology_id: id,
        decky_uuid: decky.uuid,
        lan_id: lan.id,
        ip: Some(ip.into()),
        is_bridge: decky.name == "decky-002",
        forwards_l3: true,
    };
    let edges = vec![
        edge(&deckies[0], &lans[0], "10.214.0.2"),
        edge(&deckies[1], &lans[1], "10.214.1.2"),
        edge(&deckies[1], &lans[0], "10.214.0.3"),
    ];
    let topology = Topology {
        id,
        name: name.into(),
        mode: "unihost".into(),
        target_host_uuid: None,
        status: TopologyStatus::Pending,
        version: 1,
        needs_resync: false,
        created_at: now,
        status_changed_at: now,
        email_personas: "[]".into(),
        language_default: "en".into(),
        config_snapshot: json!({"seed": 7}),
    };
    TopologyDetail { topology, lans, deckies, edges }
}

fn sorted(mut detail: TopologyDetail) -> TopologyDetail {
    detail.lans.sort_by(|a, b| a.name.cmp(&b.name));
    detail.deckies.sort_by(|a, b| a.name.cmp(&b.name));
    detail.edges.sort_by_key(|e| (e.decky_uuid, e.id));
    let at = |t: &mut Topology| {
        t.created_at = chrono::DateTime::from_timestamp_millis(t.created_at.timestamp_millis()).unwrap();
        t.status_changed_at = chrono::DateTime::from_timestamp_millis(t.status_changed_at.timestamp_millis()).unwrap();
    };
    at(&mut detail.topology);
    detail
}

async fn live(db: &Db, name: &str) -> TopologyDetail {
    let detail = topology(name);
    db.create_topology(&detail).await.unwrap();
    let id = detail.topology.id;
    db.set_topology_status(id, None, TopologyStatus::Deploying, None, Utc::now()).await.unwrap();
    db.set_topology_status(id, None, TopologyStatus::Active, None, Utc::now()).await.unwrap();
    detail
}

#[tokio::test]
async fn a_topology_round_trips_and_its_name_is_unique() {
    for backend in TestDb::all() {
        let db = backend.open().await;
        let detail = topology("maze");
        db.create_topology(&detail).await.unwrap();
        let stored = db.topology_detail(detail.topology.id).await.unwrap();
        assert_eq!(sorted(stored), sorted(detail.clone()), "{}", backend.name);
        assert!(matches!(db.create_topology(&topology("maze")).await, Err(DbError::Conflict)), "{}", backend.name);
        assert!(matches!(db.topology(Uuid::new_v4()).await, Err(DbError::NotFound)));
        // Names are unique exactly as written, on every backend (README, "Topologies").
        for other in ["Maze", "MAZE", "maze ", "mazé"] {
            db.create_topology(&topology(other)).await.unwrap_or_else(|e| panic!("{}: {other:?}: {e}", backend.name));
        }
        assert!(matches!(db.create_topology(&topology("Maze")).await, Err(DbError::Conflict)), "{}", backend.name);
        let mut cased = topology("cased lans");
        cased.lans[1].name = "lan-00".into();
        db.create_topology(&cased).await.unwrap_or_else(|e| panic!("{}: LAN-00 and lan-00: {e}", backend.name));
        let page = db.topologies(None, 10, 0).await.unwrap();
        for id in page.rows.iter().map(|t| t.id).filter(|id| *id != detail.topology.id) {
            db.delete_topology(id, &[TopologyStatus::Pending]).await.unwrap();
        }

        db.create_topology(&topology("other")).await.unwrap();
        let page = db.topologies(None, 1, 0).await.unwrap();
        assert_eq!((page.total, page.rows.len()), (2, 1));
        assert_eq!(db.topologies(Some(TopologyStatus::Pending), 10, 0).await.unwrap().total, 2);
        assert_eq!(db.topologies(Some(TopologyStatus::Active), 10, 0).await.unwrap().total, 0);

        // Only a deletable status lets it go, and it takes its parts along.
        db.set_topology_status(detail.topology.id, None, TopologyStatus::Deploying, None, Utc::now()).await.unwrap();
        let deletable = [TopologyStatus::Pending, TopologyStatus::TornDown, TopologyStatus::Failed];
        assert!(matches!(db.delete_topology(detail.topology.id, &deletable).await, Err(DbError::Conflict)));
        db.set_topology_status(detail.topology.id, None, TopologyStatus::Failed, Some("boom"), Utc::now())
            .await
            .unwrap();
        db.delete_topology(detail.topology.id, &deletable).await.unwrap();
        assert!(matches!(db.topology_detail(detail.topology.id).await, Err(DbError::NotFound)));
        assert!(matches!(db.delete_topology(detail.topology.id, &deletable).await, Err(DbError::NotFound)));
        db.close().await;
    }
}

#[tokio::test]
async fn the_status_machine_refuses_illegal_moves_and_records_legal_ones() {
    for backend in TestDb::all() {
        let db = backend.open().await;
        let detail = topology("maze");
        let id = detail.topology.id;
        db.create_topology(&detail).await.unwrap();
        let t0 = Utc::now();
        assert!(matches!(
            db.set_topology_status(id, None, TopologyStatus::Active, None, t0).await,
            Err(DbError::Conflict)
        ));
        // `from` narrows further: deploying is legal from pending, but not asked from active.
        assert!(matches!(
            db.set_topology_status(id, Some(&[TopologyStatus::Active]), TopologyStatus::Deploying, None, t0).await,
            Err(DbError::Conflict)
        ));
        let left = db.set_topology_status(id, None, TopologyStatus::Deploying, None, t0).await.unwrap();
        assert_eq!(left, TopologyStatus::Pending);
        let t1 = t0 + Duration::seconds(1);
        db.set_topology_status(id, None, TopologyStatus::Degraded, Some("one decky failed"), t1).await.unwrap();
        let events = db.status_events(id, 10).await.unwrap();
        let moves: Vec<_> = events.iter().map(|e| (e.from_status, e.to_status, e.reason.clone())).collect();
        assert_eq!(
            moves,
            [
                (TopologyStatus::Deploying, TopologyStatus::Degraded, Some("one decky failed".to_string())),
                (TopologyStatus::Pending, TopologyStatus::Deploying, None),
            ],
            "{}",
            backend.name
        );
        assert_eq!(db.status_events(id, 1).await.unwrap().len(), 1);
        let topology = db.topology(id).await.unwrap();
        assert_eq!(
            (topology.status, topology.status_changed_at.timestamp_millis()),
            (TopologyStatus::Degraded, t1.timestamp_millis())
        );
        assert!(matches!(db.status_events(Uuid::new_v4(), 10).await, Err(DbError::NotFound)));
        db.close().await;
    }
}

#[tokio::test]
async fn edits_are_guarded_by_status_and_version() {
    for backend in TestDb::all() {
        let db = backend.open().await;
        let detail = topology("maze");
        let id = detail.topology.id;
        db.create_topology(&detail).await.unwrap();
        let pending = [TopologyStatus::Pending];
        let mut lan = detail.lans[1].clone();
        lan.name = "inner".into();
        let stale = EditGuard::change(&pending, Some(0));
        assert!(matches!(
            db.edit_topology(id, stale, &[TopologyEdit::UpdateLan(lan.clone())]).await,
            Err(DbError::Conflict)
        ));
        let current = EditGuard::change(&pending, Some(1));
        let after = db.edit_topology(id, current, &[TopologyEdit::UpdateLan(lan.clone())]).await.unwrap();
        assert_eq!(after.version, 2, "{}", backend.name);
        // The same version again is now stale.
        assert!(matches!(db.edit_topology(id, current, &[TopologyEdit::UpdateLan(lan)]).await, Err(DbError::Conflict)));

        // A taken name fails the whole edit, version included.
        let any = EditGuard::change(&pending, None);
        let mut twin = detail.lans[0].clone();
        twin.id = Uuid::new_v4();
        let fine = detail.lans[0].clone();
        assert!(matches!(
            db.edit_topology(id, any, &[TopologyEdit::UpdateLan(fine), TopologyEdit::AddLan(twin)]).await,
            Err(DbError::Conflict)
        ));
        assert_eq!(db.topology(id).await.unwrap().version, 2);

        // Removing a LAN takes its edges; removing a decky takes its own.
        let edited = db.edit_topology(id, any, &[TopologyEdit::RemoveLan(detail.lans[0].id)]).await.unwrap();
        assert_eq!(edited.version, 3);
        let now = db.topology_detail(id).await.unwrap();
        assert_eq!((now.lans.len(), now.edges.len()), (1, 1), "{}", backend.name);
        db.edit_topology(id, any, &[TopologyEdit::RemoveDecky(detail.deckies[1].uuid)]).await.unwrap();
        assert!(db.topology_detail(id).await.unwrap().edges.is_empty());
        assert!(matches!(
            db.edit_topology(id, any, &[TopologyEdit::RemoveEdge(Uuid::new_v4())]).await,
            Err(DbError::NotFound)
        ));

        // Not pending: refused.
        db.set_topology_status(id, None, TopologyStatus::Deploying, None, Utc::now()).await.unwrap();
        assert!(matches!(
            db.edit_topology(id, any, &[TopologyEdit::RemoveDecky(detail.deckies[0].uuid)]).await,
            Err(DbError::Conflict)
        ));
        assert!(matches!(db.edit_topology(Uuid::new_v4(), any, &[]).await, Err(DbError::NotFound)));
        db.close().await;
    }
}

#[tokio::test]
async fn mutations_queue_and_are_claimed_one_at_a_time_per_topology() {
    for backend in TestDb::all() {
        let db = backend.open().await;
        let pending_topology = topology("draft");
        db.create_topology(&pending_topology).await.unwrap();
        let guard = EditGuard::change(&LIVE, None);
        assert!(matches!(
            db.enqueue_mutation(pending_topology.topology.id, guard, "add_lan", &json!({}), Utc::now()).await,
            Err(DbError::Conflict)
        ));

        let detail = live(&db, "maze").await;
        let id = detail.topology.id;
        let version = db.topology(id).await.unwrap().version;
        let stale = EditGuard::change(&LIVE, Some(version - 1));
        assert!(matches!(
            db.enqueue_mutation(id, stale, "add_lan", &json!({}), Utc::now()).await,
            Err(DbError::Conflict)
        ));
        let t0 = Utc::now();
        let first = db.enqueue_mutation(id, guard, "add_lan", &json!({"name": "a"}), t0).await.unwrap();
        // The same millisecond: the queue keeps the order they came in.
        let second = db.enqueue_mutation(id, guard, "add_lan", &json!({"name": "b"}), t0).await.unwrap();
        assert_eq!(db.topology(id).await.unwrap().version, version + 2);
        let listed = db.mutations(id, None).await.unwrap();
        assert_eq!(listed.iter().map(|m| m.id).collect::<Vec<_>>(), [second.id, first.id], "newest first");
        assert_eq!(listed[1].payload, json!({"name": "a"}));

        let now = Utc::now();
        let long_ago = now - Duration::minutes(5);
        let claim = db.claim_mutation("m1", now, long_ago).await.unwrap();
        let claimed = claim.mutation.unwrap();
        assert_eq!((claimed.id, claimed.state), (first.id, MutationState::Applying), "{}", backend.name);
        // One applying per topology: the second waits.
        assert!(db.claim_mutation("m2", now, long_ago).await.unwrap().mutation.is_none());
        assert!(db.has_pending_mutations().await.unwrap());
        db.finish_mutation(first.id, MutationState::Applied, None, Utc::now()).await.unwrap();
        assert!(matches!(
            db.finish_mutation(first.id, MutationState::Failed, None, Utc::now()).await,
            Err(DbError::NotFound)
        ));
        let next = db.claim_mutation("m2", now, long_ago).await.unwrap().mutation.unwrap();
        assert_eq!(next.id, second.id);
        assert!(!db.has_pending_mutations().await.unwrap());
        assert_eq!(db.mutations(id, Some(MutationState::Applied)).await.unwrap().len(), 1);

        // Its claimer died: the next claim after the timeout fails it, once.
        let later = now + Duration::minutes(10);
        let claim = db.claim_mutation("m3", later, later - Duration::minutes(5)).await.unwrap();
        assert!(claim.mutation.is_none());
        assert_eq!(claim.abandoned.len(), 1, "{}", backend.name);
        assert_eq!(claim.abandoned[0].id, second.id);
        let failed = &db.mutations(id, Some(MutationState::Failed)).await.unwrap()[0];
        assert_eq!(failed.reason.as_deref(), Some(ABANDONED_MUTATION));
        assert!(db.claim_mutation("m3", later, later - Duration::minutes(5)).await.unwrap().abandoned.is_empty());
        assert!(matches!(
            db.finish_mutation(second.id, MutationState::Applied, None, Utc::now()).await,
            Err(DbError::NotFound)
        ));
        db.close().await;
    }
}

#[tokio::test]
async fn racing_claimers_never_share_a_mutation() {
    for backend in TestDb::all() {
        let db = backend.open().await;
        let guard = EditGuard::change(&LIVE, None);
        let mut expected = std::collections::BTreeSet::new();
        for n in 0..4 {
            let detail = live(&db, &format!("maze-{n}")).await;
            for k in 0..3 {
                let m = db
                    .enqueue_mutation(detail.topology.id, guard, "add_lan", &json!({"k": k}), Utc::now())
                    .await
                    .unwrap();
                expected.insert(m.id);
            }
        }
        // Eight claimers drain the queue together, each finishing what it claimed.
        let claimers: Vec<_> = (0..8)
            .map(|n| {
                let db = db.clone();
                tokio::spawn(async move {
                    let mut mine = Vec::new();
                    let mut idle = 0;
                    while idle < 50 {
                        let now = Utc::now();
                        match db.claim_mutation(&format!("c{n}"), now, now - Duration::minutes(5)).await {
                            Ok(claim) => match claim.mutation {
                                Some(m) => {
                                    idle = 0;
                                    mine.push(m.id);
                                    db.finish_mutation(m.id, MutationState::Applied, None, Utc::now()).await.unwrap();
                                }
                                None if !db.has_pending_mutations().await.unwrap() => break,
                                None => idle += 1,
                            },
                            // A deadlock victim (MySQL) claims nothing and tries again.
                            Err(DbError::Other(_)) => idle += 1,
                            Err(err) => panic!("{err}"),
                        }
                        tokio::task::yield_now().await;
                    }
                    mine
                })
            })
            .collect();
        let mut claimed = Vec::new();
        for claimer in claimers {
            claimed.extend(claimer.await.unwrap());
        }
        let unique: std::collections::BTreeSet<_> = claimed.iter().copied().collect();
        assert_eq!(claimed.len(), unique.len(), "a mutation was claimed twice on {}", backend.name);
        assert_eq!(unique, expected, "every mutation applied once on {}", backend.name);
        db.close().await;
    }
}
