//! The repository read the threat-intel exports and the TAXII collection walk: profiles in the
//! order they last changed, a page at a time from a keyset position, on every backend under test.

use svc_test_support::in_process as common;

use chrono::Utc;
use common::TestDb;
use common::logs::at;
use svc::db::{AttackerProfile, AttackerWindow, ChangePosition, Db, PROFILER_LEASE_SOURCE, ProfilerBatch};

const HOLDER: &str = "export-test";

/// `ip`, first seen at minute `first`, last seen at `last`, changed at `changed`.
fn profile(ip: &str, first: i64, last: i64, changed: i64) -> AttackerProfile {
    AttackerProfile { last_seen: at(last), ..AttackerProfile::new(ip, at(first), at(changed)) }
}

async fn walk(db: &Db, window: &AttackerWindow, page: u32) -> Vec<String> {
    let mut after = None;
    let mut seen = Vec::new();
    for _ in 0..100 {
        let rows = db.attackers_changed(window, after, page).await.unwrap();
        assert!(rows.len() <= page as usize);
        let Some(last) = rows.last() else { break };
        after = Some(ChangePosition::of(last));
        seen.extend(rows.iter().map(|p| p.ip.clone()));
    }
    seen
}

#[tokio::test]
async fn profiles_are_walked_in_change_order_a_page_at_a_time_within_the_window() {
    for backend in TestDb::all() {
        let db = backend.open().await;
        let lease = std::time::Duration::from_secs(3600);
        assert!(db.acquire_worker_lease(PROFILER_LEASE_SOURCE, HOLDER, Utc::now(), lease).await.unwrap());
        // Five profiles changed at the same minute: ties broken by uuid, none skipped or repeated.
        let mut profiles: Vec<AttackerProfile> = (0..5).map(|n| profile(&format!("10.0.0.{n}"), 0, 10, 50)).collect();
        profiles.push(profile("10.0.1.1", 0, 5, 20));
        profiles.push(profile("10.0.1.2", 30, 40, 60));
        let batch = ProfilerBatch { last_log_id: 1, profiles: profiles.clone(), ..ProfilerBatch::default() };
        db.commit_profiles(HOLDER, 0, &batch).await.unwrap();

        let mut tied: Vec<&AttackerProfile> = profiles[..5].iter().collect();
        tied.sort_by_key(|p| p.uuid.to_string());
        let mut expected = vec!["10.0.1.1".to_string()];
        expected.extend(tied.iter().map(|p| p.ip.clone()));
        expected.push("10.0.1.2".into());
        for page in [1, 2, 3, 100] {
            assert_eq!(walk(&db, &AttackerWindow::default(), page).await, expected, "{} page {page}", backend.name);
        }

        let since = AttackerWindow { since: Some(at(10)), ..AttackerWindow::default() };
        assert_eq!(walk(&db, &since, 2).await, expected[1..], "last seen at or after minute 10");
        let until = AttackerWindow { until: Some(at(29)), ..AttackerWindow::default() };
        assert_eq!(walk(&db, &until, 2).await, expected[..6], "first seen at or before minute 29");
        let changed = AttackerWindow { changed_after: Some(at(50)), ..AttackerWindow::default() };
        assert_eq!(walk(&db, &changed, 2).await, ["10.0.1.2"], "changed strictly after minute 50");
        let nothing = AttackerWindow { since: Some(at(41)), until: Some(at(1)), changed_after: None };
        assert!(walk(&db, &nothing, 2).await.is_empty());
    }
}
