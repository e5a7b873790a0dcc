//! Runs argon2 on the blocking pool with a bound on concurrent hashes, so a login storm queues for
//! the hashing threads instead of taking every core from the threads that serve other requests.
//! Each of the bounded slots keeps its argon2 memory (19 MiB) and lends it to the hash it runs:
//! hashing then costs no allocation, and RSS stays at what the slots hold whatever the number of
//! logins or threads (measured in `benches/login_rss.sh`).

use std::sync::{Arc, Mutex, OnceLock};

use tokio::sync::Semaphore;

use super::password::{self, Workspace};

/// At most this many hashes at once, whatever the core count: each slot keeps 19 MiB.
const MAX_CONCURRENCY: usize = 2;

#[derive(Debug)]
pub struct HashPool {
    permits: Arc<Semaphore>,
    /// One per slot in use so far; a hash takes one and gives it back.
    workspaces: Arc<Mutex<Vec<Workspace>>>,
}

impl Default for HashPool {
    fn default() -> Self {
        HashPool::new(default_concurrency())
    }
}

/// One core is left to the request loop; a single-core host hashes one at a time.
fn default_concurrency() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().saturating_sub(1).clamp(1, MAX_CONCURRENCY))
}

impl HashPool {
    pub fn new(concurrency: usize) -> Self {
        HashPool { permits: Arc::new(Semaphore::new(concurrency.max(1))), workspaces: Arc::default() }
    }

    async fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce(&mut Workspace) -> T + Send + 'static,
    ) -> anyhow::Result<T> {
        let permit = self.permits.clone().acquire_owned().await?;
        let workspaces = self.workspaces.clone();
        Ok(tokio::task::spawn_blocking(move || {
            let _permit = permit;
            let mut workspace = workspaces.lock().expect("workspaces lock").pop().unwrap_or_default();
            let result = work(&mut workspace);
            workspaces.lock().expect("workspaces lock").push(workspace);
            result
        })
        .await?)
    }

    pub async fn hash(&self, password: String) -> anyhow::Result<String> {
        self.run(move |workspace| password::hash_in(&password, workspace)).await?
    }

    /// Verifies against the stored hash, or, for an unknown user, against a hash of nothing anyone
    /// knows: both cost one argon2 run, so timing does not tell an unknown user from a wrong password.
    pub async fn verify(&self, password: String, phc: Option<String>) -> anyhow::Result<bool> {
        self.run(move |workspace| match phc {
            Some(phc) => password::verify_in(&password, &phc, workspace),
            None => {
                password::verify_in(&password, decoy_hash(workspace), workspace);
                false
            }
        })
        .await
    }
}

fn decoy_hash(workspace: &mut Workspace) -> &'static str {
    static DECOY: OnceLock<String> = OnceLock::new();
    DECOY.get_or_init(|| password::hash_in(&uuid::Uuid::new_v4().to_string(), workspace).expect("argon2 hashes a uuid"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn hashes_and_verifies_off_the_loop() {
        let pool = HashPool::new(1);
        let phc = pool.hash("correct horse battery".into()).await.unwrap();
        assert!(pool.verify("correct horse battery".into(), Some(phc.clone())).await.unwrap());
        assert!(!pool.verify("wrong horse battery".into(), Some(phc)).await.unwrap());
        assert!(!pool.verify("correct horse battery".into(), None).await.unwrap());
    }
}
