//! The mutator (`svc worker mutator`): applies the topologies' queued mutations. It wakes on
//! `topology.*.mutation.enqueued` or every `SVC_MUTATOR_POLL_S` (10 s), so a lost or absent bus
//! only delays work. Each round it claims one pending mutation at a time (the store guarantees one
//! claimer per mutation and one `applying` mutation per topology, so several mutators can run),
//! applies it (`svc::topology`: store first, then the live containers and networks) and records
//! `applied` or `failed`, announcing each step, and then each service an applied mutation gave or
//! took from a decky (`decky.<name>.service_added|service_removed`). A mutation a dead mutator left `applying` longer
//! than `SVC_MUTATOR_CLAIM_TIMEOUT_S` is failed by the next claim, so none stays stuck. A stop
//! lets the mutation in hand finish. Each round also gives the flat fleet's deckies whose
//! `mutate_interval` has passed new services (`svc::fleet::mutate`).

use chrono::Utc;
use futures::StreamExt;
use svc::bus::topics;
use svc::db::{MutationState, TopologyStatus};
use svc::fleet::Fleet;
use svc::roster::counters::mutator as counter;
use svc::topology::Topologies;
use svc::worker::{WorkerBody, WorkerContext};
use uuid::Uuid;

pub const NAME: &str = "mutator";

/// The worker `svc worker mutator` runs.
pub fn body() -> WorkerBody {
    WorkerBody::new(NAME, run)
}

async fn run(ctx: WorkerContext) -> anyhow::Result<()> {
    let fleet = Fleet::new(ctx.db.clone(), ctx.bus.clone(), ctx.config.fleet.clone());
    let topologies = Topologies::new(ctx.db.clone(), ctx.bus.clone(), fleet.clone());
    // Names this process in the claims it makes (for operators reading the table).
    let holder = format!("{NAME}-{}-{}", std::process::id(), &Uuid::new_v4().simple().to_string()[..8]);
    let mut wake = ctx.bus.subscribe(topics::ALL_MUTATIONS_ENQUEUED.to_string()).await;
    let poll = ctx.config.fleet.mutator_poll;
    loop {
        for decky in fleet.mutate_due(Utc::now(), ctx.config.ingest.log_file.clone()).await {
            tracing::debug!(%decky, "Scheduled mutation started");
            ctx.counters.add(counter::DECKIES_MUTATED, 1);
        }
        drain(&ctx, &topologies, &holder).await;
        tokio::select! {
            () = ctx.cancel.cancelled() => return Ok(()),
            () = tokio::time::sleep(poll) => {}
            Some(_) = async {
                match wake.as_mut() {
                    Some(subscriber) => subscriber.next().await,
                    None => std::future::pending().await,
                }
            } => {}
        }
    }
}

/// Beyond two polls, how long one mutation may take to apply before the mutator reads as stuck.
const APPLY_GRACE: std::time::Duration = std::time::Duration::from_secs(120);

/// Applies pending mutations until none is left to claim (or a stop is asked for).
async fn drain(ctx: &WorkerContext, topologies: &Topologies, holder: &str) {
    let timeout = chrono::Duration::from_std(ctx.config.fleet.mutator_claim_timeout).unwrap_or(chrono::Duration::MAX);
    while !ctx.cancel.is_cancelled() {
        let now = Utc::now();
        let claim = match ctx.db.claim_mutation(holder, now, now - timeout).await {
            Ok(claim) => claim,
            Err(err) => {
                tracing::warn!(error = %err, "Cannot claim a mutation; trying again at the next round");
                ctx.fault.set("the store cannot be read");
                return;
            }
        };
        // Health from facts: a claim every poll; an apply (containers made) may take a while.
        ctx.fault.worked(ctx.config.fleet.mutator_poll * 2 + APPLY_GRACE);
        for abandoned in &claim.abandoned {
            tracing::warn!(mutation = %abandoned.id, topology = %abandoned.topology_id, "Failed a mutation a stopped mutator left applying");
            ctx.counters.add(counter::MUTATIONS_ABANDONED, 1);
            topologies.announce_mutation(abandoned, MutationState::Failed.as_str()).await;
            // What that mutator did to the engine is unknown: the topology needs a look.
            let _ = topologies
                .move_status(abandoned.topology_id, None, TopologyStatus::Degraded, Some(svc::db::ABANDONED_MUTATION))
                .await;
        }
        let Some(mutation) = claim.mutation else { return };
        tracing::info!(mutation = %mutation.id, topology = %mutation.topology_id, op = %mutation.op, "Applying a mutation");
        // Read before and after, so the deckies' service changes can be announced as DECNET does.
        let before = ctx.db.topology_detail(mutation.topology_id).await;
        let state = topologies.apply(&mutation).await;
        if state == MutationState::Applied
            && let Ok(before) = before
            && let Ok(after) = ctx.db.topology_detail(mutation.topology_id).await
        {
            topologies.announce_service_changes(&before, &after).await;
        }
        ctx.counters.add(
            if state == MutationState::Applied { counter::MUTATIONS_APPLIED } else { counter::MUTATIONS_FAILED },
            1,
        );
    }
}
