//! Planting: each canary token's bait put in its decky on this host, and kept there. A token is
//! planted when it is made (the API wakes the planter), again whenever its decky's container
//! starts (a restart empties the in-memory directories bait lives in, `fleet::file_drop`) or is
//! replaced, and retried while its decky is not running; a revoked token's files are removed.
//! The outcome is the token's `state`: `planted` with `placed_at`, or `failed` with a
//! `last_error` an operator can act on. Bait comes from the pure generators (`bait`), or is an
//! uploaded blob's bytes, written through the engine's archive API (`fleet::file_drop`).

use std::collections::HashMap;
use std::time::Duration;

use chrono::Utc;
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::{Bait, BaitFile, BaitRequest, Callback, CallbackToken, CanaryKind, Persona, PersonaOs};
use crate::db::{CanaryToken, CanaryTokenFilter, CanaryTokenState, Db, DbError};
use crate::fleet::file_drop::{self, DropPath};
use crate::fleet::{ContainerStart, Fleet, FleetError};
use crate::runtime::ContainerInfo;

/// How often tokens not planted yet (their decky down, the engine away) are tried again.
const RETRY_EVERY: Duration = Duration::from_secs(30);
/// How long a burst of container starts is gathered into one pass.
const GATHER: Duration = Duration::from_millis(300);
/// How old an uploaded blob's file seems (its mtime), like a generated bait's.
const UPLOAD_AGE: Duration = Duration::from_secs(30 * 86_400);
const UPLOAD_MODE: u32 = 0o644;

/// Where baits call home.
#[derive(Clone, Debug)]
pub struct CallbackHome {
    /// The base of HTTP callbacks (`{base}/c/{token}`).
    pub http_base: String,
    /// The zone DNS callbacks are names under, when one is set.
    pub dns_zone: Option<String>,
}

/// Why a token's bait is not in its decky; the text is the token's `last_error`.
#[derive(Debug, thiserror::Error)]
pub enum PlantError {
    #[error("decky {0} is not running on this host")]
    NotRunning(String),
    #[error("{0}")]
    Bait(String),
    #[error("{0}")]
    Drop(#[from] file_drop::DropError),
    #[error("the token's blob is gone")]
    BlobGone,
    #[error(transparent)]
    Fleet(#[from] FleetError),
    #[error(transparent)]
    Db(#[from] DbError),
}

/// Plants and keeps the tokens' bait; one per API process.
pub struct Planter {
    pub(super) db: Db,
    fleet: Fleet,
    home: CallbackHome,
    /// The container each token's bait went into last: one that started again, or a new one for
    /// the decky, needs it again.
    planted: std::sync::Mutex<HashMap<Uuid, String>>,
    /// One token's plant or removal at a time, each re-reading the token, so a revoke never
    /// races a plant into leaving the file or the state `planted`.
    one_at_a_time: tokio::sync::Mutex<()>,
    wake: tokio::sync::Notify,
}

impl Planter {
    pub fn new(db: Db, fleet: Fleet, home: CallbackHome) -> Planter {
        Planter {
            db,
            fleet,
            home,
            planted: Default::default(),
            one_at_a_time: Default::default(),
            wake: Default::default(),
        }
    }

    /// The bait `kind` makes for `token` at `path` (its default place when `None`): what is
    /// planted, and what a preview shows.
    pub fn generate(&self, kind: CanaryKind, token: &CallbackToken, path: Option<&str>) -> Result<Bait, PlantError> {
        let callback = Callback::new(&self.home.http_base, self.home.dns_zone.as_deref(), token.clone())
            .map_err(|err| PlantError::Bait(format!("canary callback: {err}")))?;
        let persona = Persona::for_os(PersonaOs::Linux);
        let request =
            BaitRequest { kind, callback: &callback, persona: &persona, seed: token.as_str().as_bytes(), path };
        let bait = super::generate(&request).map_err(|err| PlantError::Bait(err.to_string()))?;
        for file in bait.files() {
            DropPath::parse(&file.path).map_err(|err| PlantError::Bait(err.to_string()))?;
        }
        Ok(bait)
    }

    /// Asks for a pass now (a token was made).
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    /// Plants until `cancel`: a pass at once, when woken, when containers start, and every
    /// [`RETRY_EVERY`].
    pub async fn run(&self, cancel: CancellationToken) {
        let mut starts = self.fleet.container_starts();
        let mut every = tokio::time::interval(RETRY_EVERY);
        loop {
            tokio::select! {
                () = cancel.cancelled() => return,
                () = self.wake.notified() => {}
                _ = every.tick() => {}
                start = starts.recv() => {
                    self.forget(start);
                    // The rest of a burst (a fleet coming up), and what is left of it queued.
                    tokio::select! {
                        () = cancel.cancelled() => return,
                        () = tokio::time::sleep(GATHER) => {}
                    }
                    while let Ok(start) = starts.try_recv() {
                        self.forget(Ok(start));
                    }
                }
            }
            self.pass().await;
        }
    }

    /// A started container holds no bait any more; a lag or an end may have hidden which.
    fn forget(&self, start: Result<ContainerStart, RecvError>) {
        let mut planted = self.planted.lock().expect("never poisoned");
        match start {
            Ok(ContainerStart::Container(id)) => planted.retain(|_, container| *container != id),
            Ok(ContainerStart::Unknown) | Err(_) => planted.clear(),
        }
    }

    /// Plants every live token whose decky's container does not hold its bait yet.
    async fn pass(&self) {
        let tokens = match self.db.canary_tokens(&CanaryTokenFilter::default()).await {
            Ok(tokens) => tokens,
            Err(err) => return tracing::debug!(error = %err, "Canary planting skipped"),
        };
        if tokens.iter().all(|token| token.state == CanaryTokenState::Revoked) {
            return;
        }
        // The engine away is not the tokens' failure (nor an error each pass): they wait for it.
        if !self.fleet.ping().await {
            return tracing::debug!("Canary planting waits for the container engine");
        }
        let containers = match self.fleet.decky_containers().await {
            Ok(containers) => containers,
            Err(err) => return tracing::debug!(error = %err, "Canary planting skipped"),
        };
        for token in tokens.into_iter().filter(|token| token.state != CanaryTokenState::Revoked) {
            let container = containers.get(&(token.topology_id.clone(), token.decky_name.clone()));
            let holds = container.is_some_and(|c| {
                self.planted.lock().expect("never poisoned").get(&token.uuid) == Some(&c.id)
                    && token.state == CanaryTokenState::Planted
            });
            if !holds {
                self.plant(token.uuid, container).await;
            }
        }
    }

    /// Plants one token into `container`, and stores the outcome.
    async fn plant(&self, uuid: Uuid, container: Option<&ContainerInfo>) {
        let _one = self.one_at_a_time.lock().await;
        // Read again under the lock: a revoke may have come in since the pass listed it.
        let token = match self.db.canary_token(uuid).await {
            Ok(token) if token.state != CanaryTokenState::Revoked => token,
            _ => return,
        };
        let outcome = match container.filter(|c| c.is_running()) {
            None => Err(PlantError::NotRunning(token.decky_name.clone())),
            Some(container) => self.put(&token, &container.id).await.map(|()| container.id.clone()),
        };
        let stored = match outcome {
            Ok(container) => {
                self.planted.lock().expect("never poisoned").insert(uuid, container);
                tracing::info!(token = %uuid, decky = %token.decky_name, path = %token.placement_path, "Canary bait planted");
                self.db.set_canary_token_state(uuid, CanaryTokenState::Planted, None, Some(Utc::now())).await
            }
            Err(err) => {
                self.planted.lock().expect("never poisoned").remove(&uuid);
                let text = err.to_string();
                if token.state == CanaryTokenState::Failed && token.last_error.as_deref() == Some(text.as_str()) {
                    return;
                }
                tracing::warn!(token = %uuid, decky = %token.decky_name, error = %text, "Canary bait not planted");
                self.db.set_canary_token_state(uuid, CanaryTokenState::Failed, Some(&text), None).await
            }
        };
        if let Err(err) = stored {
            tracing::error!(token = %uuid, error = %err, "Canary token state not stored");
        }
    }

    /// Writes every file of the token's bait into `container`.
    async fn put(&self, token: &CanaryToken, container: &str) -> Result<(), PlantError> {
        let now = u64::try_from(Utc::now().timestamp()).unwrap_or(0);
        for file in self.files(token).await? {
            let path = DropPath::parse(&file.path).map_err(|err| PlantError::Bait(err.to_string()))?;
            let mtime = now.saturating_sub(file.age.as_secs());
            file_drop::put(self.fleet.runtime(), container, &path, &file.content, file.mode, mtime).await?;
        }
        Ok(())
    }

    /// The files a token plants: its generator's bait, or its blob at its path.
    async fn files(&self, token: &CanaryToken) -> Result<Vec<BaitFile>, PlantError> {
        let callback = CallbackToken::parse(&token.callback_token)
            .map_err(|err| PlantError::Bait(format!("canary callback: {err}")))?;
        if let Some(kind) = token.generator.as_deref() {
            let kind = kind.parse::<CanaryKind>().map_err(|err| PlantError::Bait(err.to_string()))?;
            let bait = self.generate(kind, &callback, Some(&token.placement_path))?;
            return Ok(bait.files().cloned().collect());
        }
        let blob = token.blob_uuid.ok_or_else(|| PlantError::Bait("the token has no generator or blob".into()))?;
        let content = self.db.canary_blob_bytes(blob).await.map_err(|err| match err {
            DbError::NotFound => PlantError::BlobGone,
            other => other.into(),
        })?;
        let content_type = "application/octet-stream";
        Ok(vec![BaitFile {
            path: token.placement_path.clone(),
            mode: UPLOAD_MODE,
            content,
            content_type,
            age: UPLOAD_AGE,
        }])
    }

    /// Revokes the token (`NotFound` when there is none) and removes its files from its decky,
    /// if that runs here; a decky not running holds none that will last (its drop directories are
    /// in memory). A file that cannot be removed is logged: the token is revoked all the same.
    pub async fn revoke(&self, uuid: Uuid) -> Result<(), DbError> {
        let _one = self.one_at_a_time.lock().await;
        self.db.set_canary_token_state(uuid, CanaryTokenState::Revoked, None, None).await?;
        self.planted.lock().expect("never poisoned").remove(&uuid);
        let token = self.db.canary_token(uuid).await?;
        if let Err(err) = self.remove(&token).await {
            tracing::warn!(token = %uuid, decky = %token.decky_name, error = %err, "Canary bait not removed");
        }
        Ok(())
    }

    async fn remove(&self, token: &CanaryToken) -> Result<(), PlantError> {
        let key = (token.topology_id.clone(), token.decky_name.clone());
        let containers = self.fleet.decky_containers().await?;
        let Some(container) = containers.get(&key).filter(|c| c.is_running()) else { return Ok(()) };
        for file in self.files(token).await? {
            let path = DropPath::parse(&file.path).map_err(|err| PlantError::Bait(err.to_string()))?;
            file_drop::remove(self.fleet.runtime(), &container.id, &path).await?;
        }
        tracing::info!(token = %token.uuid, decky = %token.decky_name, "Canary bait removed");
        Ok(())
    }
}
