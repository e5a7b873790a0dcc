//! What an operator asks of the canary, as the routes call it: mint a token (a new unguessable
//! callback, its bait's place checked, its decky checked against its topology; `pending` until the
//! planter plants it), preview a generator token's bait, store an uploaded blob. They are the
//! planter's verbs, written apart from its planting loop: it holds the store and makes the bait.

use chrono::Utc;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use super::{Bait, CallbackToken, CanaryKind, GenerateError, PlantError, Planter, sniff_content_type};
use crate::db::{CanaryBlob, CanaryToken, CanaryTokenState, DbError, DbResult, NewCanaryBlob};
use crate::fleet::file_drop::DropPath;

/// How a token calls home (DECNET's `kind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum TokenKind {
    Http,
    Dns,
    AwsPassive,
}

impl TokenKind {
    pub fn as_str(self) -> &'static str {
        match self {
            TokenKind::Http => "http",
            TokenKind::Dns => "dns",
            TokenKind::AwsPassive => "aws_passive",
        }
    }
}

/// Where a new token's bait comes from: a generator, or an uploaded blob put at a given path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BaitSource {
    Generator(CanaryKind),
    Blob(Uuid),
}

impl BaitSource {
    /// The source when exactly one of the two is given.
    pub fn one_of(generator: Option<CanaryKind>, blob: Option<Uuid>) -> Option<BaitSource> {
        match (generator, blob) {
            (Some(generator), None) => Some(BaitSource::Generator(generator)),
            (None, Some(blob)) => Some(BaitSource::Blob(blob)),
            _ => None,
        }
    }
}

/// A token to mint.
#[derive(Clone, Debug)]
pub struct NewToken {
    pub decky_name: String,
    pub kind: TokenKind,
    /// The MazeNET topology the decky belongs to; `None` for a fleet decky.
    pub topology_id: Option<Uuid>,
    pub source: BaitSource,
    /// Where the bait goes, absolute; the generator's default place when `None`.
    pub placement_path: Option<String>,
    /// The operator's uuid.
    pub created_by: String,
}

/// Why a token was not minted. The texts are the client's answer.
#[derive(Debug, thiserror::Error)]
pub enum MintError {
    #[error("topology {0} not found")]
    TopologyNotFound(Uuid),
    #[error("decky {decky:?} is not in topology {topology}")]
    NotInTopology { decky: String, topology: Uuid },
    #[error("blob not found")]
    BlobNotFound,
    /// A bait that cannot be made as asked (a bad placement path, a generator needing a DNS zone):
    /// the reason is the client's.
    #[error("{0}")]
    Refused(String),
    #[error("no randomness for a callback token")]
    Randomness(#[source] std::io::Error),
    #[error(transparent)]
    Plant(PlantError),
    #[error(transparent)]
    Db(#[from] DbError),
}

impl From<PlantError> for MintError {
    fn from(err: PlantError) -> Self {
        match err {
            PlantError::Bait(reason) => MintError::Refused(reason),
            other => MintError::Plant(other),
        }
    }
}

impl Planter {
    /// Stores a new `pending` token and wakes the planter for it.
    pub async fn mint(&self, new: NewToken) -> Result<CanaryToken, MintError> {
        if let Some(topology) = new.topology_id {
            let detail = self.db.topology_detail(topology).await.map_err(|err| match err {
                DbError::NotFound => MintError::TopologyNotFound(topology),
                other => other.into(),
            })?;
            if detail.decky_named(&new.decky_name).is_none() {
                return Err(MintError::NotInTopology { decky: new.decky_name, topology });
            }
        }
        let callback_token = CallbackToken::random().map_err(MintError::Randomness)?;
        let placement_path = match new.source {
            BaitSource::Generator(generator) => {
                self.generate(generator, &callback_token, new.placement_path.as_deref())?.file.path
            }
            BaitSource::Blob(blob) => {
                self.db.canary_blob(blob).await.map_err(|err| match err {
                    DbError::NotFound => MintError::BlobNotFound,
                    other => other.into(),
                })?;
                let path = new.placement_path.unwrap_or_default();
                check_upload_placement(&path)?;
                path
            }
        };
        let (generator, blob_uuid) = match new.source {
            BaitSource::Generator(generator) => (Some(generator.as_str().to_string()), None),
            BaitSource::Blob(blob) => (None, Some(blob)),
        };
        let token = CanaryToken {
            uuid: Uuid::new_v4(),
            kind: new.kind.as_str().to_string(),
            decky_name: new.decky_name,
            topology_id: new.topology_id.map(|id| id.to_string()),
            blob_uuid,
            instrumenter: None,
            generator,
            placement_path,
            callback_token: callback_token.to_string(),
            placed_at: None,
            last_triggered_at: None,
            trigger_count: 0,
            created_by: new.created_by,
            created_at: Utc::now(),
            state: CanaryTokenState::Pending,
            last_error: None,
        };
        self.db.add_canary_token(&token).await?;
        self.wake();
        Ok(token)
    }

    /// The bait a generator token plants (deterministic: what planting puts in the decky); `None`
    /// for an uploaded blob's token, which has nothing to make.
    pub fn preview(&self, token: &CanaryToken) -> Result<Option<Bait>, PlantError> {
        let generator = token.generator.as_deref().and_then(|name| name.parse::<CanaryKind>().ok());
        let callback = CallbackToken::parse(&token.callback_token).ok();
        let (Some(generator), Some(callback)) = (generator, callback) else { return Ok(None) };
        self.generate(generator, &callback, Some(&token.placement_path)).map(Some)
    }

    /// Stores an uploaded file as a blob (its type told from its bytes and name), or answers the
    /// blob already stored with the same bytes.
    pub async fn store_blob(&self, filename: String, bytes: Vec<u8>, uploaded_by: String) -> DbResult<CanaryBlob> {
        let blob = NewCanaryBlob {
            uuid: Uuid::new_v4(),
            sha256: crate::text::hex(&Sha256::digest(&bytes)),
            content_type: sniff_content_type(&filename, &bytes).to_string(),
            filename,
            uploaded_by,
            uploaded_at: Utc::now(),
            bytes,
        };
        self.db.add_canary_blob(&blob).await
    }
}

/// An upload's placement: absolute, no `..`, no control characters or quotes (the generators'
/// rule), under a directory a decky takes files in.
fn check_upload_placement(path: &str) -> Result<(), MintError> {
    if path.chars().any(|c| c == '"' || c == '\'') {
        return Err(MintError::Refused(GenerateError::BadPath(path.to_string()).to_string()));
    }
    DropPath::parse(path).map(drop).map_err(|err| MintError::Refused(err.to_string()))
}
