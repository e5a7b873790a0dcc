//! Runs argon2 on the blocking pool with a bound on concurrent hashes, so a login storm queues for
//! the hashing threads instead of taking every core from the threads that serve other requests.

use std::sync::{Arc, OnceLock};

use tokio::sync::Semaphore;

use super::password;

#[derive(Debug)]
pub struct HashPool {
    permits: Arc<Semaphore>,
}

impl Default for HashPool {
    fn default() -> Self {
        HashPool::new(default_concurrency())
    }
}

/// One core is left to the request loop; a single-core host hashes one at a time.
fn default_concurrency() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().saturating_sub(1).max(1))
}

impl HashPool {
    pub fn new(concurrency: usize) -> Self {
        HashPool { permits: Arc::new(Semaphore::new(concurrency.max(1))) }
    }

    async fn run<T: Send + 'static>(&self, work: impl FnOnce() -> T + Send + 'static) -> anyhow::Result<T> {
        let permit = self.permits.clone().acquire_owned().await?;
        Ok(tokio::task::spawn_blocking(move || {
            let _permit = permit;
            work()
        })
        .await?)
    }

    pub async fn hash(&self, password: String) -> anyhow::Result<String> {
        self.run(move || password::hash(&password)).await?
    }

    /// Verifies against the stored hash, or, for an unknown user, against a hash of nothing anyone
    /// knows: both cost one argon2 run, so timing does not tell an unknown user from a wrong password.
    pub async fn verify(&self, password: String, phc: Option<String>) -> anyhow::Result<bool> {
        self.run(move || match phc {
            Some(phc) => password::verify(&password, &phc),
            None => {
                password::verify(&password, decoy_hash());
                false
            }
        })
        .await
    }
}

fn decoy_hash() -> &'static str {
    static DECOY: OnceLock<String> = OnceLock::new();
    DECOY.get_or_init(|| password::hash(&uuid::Uuid::new_v4().to_string()).expect("argon2 hashes a uuid"))
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
