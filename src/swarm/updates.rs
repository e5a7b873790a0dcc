//! The master's side of swarm updates: the hosts a push targets (those with an updater), the
//! release it ships (a gzipped tar of its own svc binary and its units, DECNET's `exclude` globs
//! narrowing it), pushed to every target in parallel, a host's rollback and each host's release
//! slots; every call to a host's updater goes over the pinned caller
//! (`caller::AgentCaller::updater_endpoint`: a host without a stored updater fingerprint is never
//! dialled). Each call ends in a per-host result with DECNET's statuses; transport failures are
//! generic, their cause in the log.

use std::io::Write;
use std::path::Path;

use bytes::Bytes;
use flate2::Compression;
use flate2::write::GzEncoder;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use super::caller::{AgentCaller, CertificatesUnavailable};
use super::client::{Answer, CallError, Endpoint};
use super::master::SwarmMaster;
use super::pki::fingerprint as sha256_hex;
use super::updater::provenance;
use super::updater::releases::{BINARY, SlotView, UNITS};
use super::wire::{HEALTH_PATH, ROLLBACK_PATH, UPDATE_PATH, UPDATE_SELF_PATH};
use crate::db::{Db, DbError, SwarmHost};

/// 400 of a push that names both hosts and `all`, or neither.
pub const EXACTLY_ONE_TARGET: &str = "Specify exactly one of host_uuids or all=true.";
/// 404 of a push to `all` when no host has an updater.
pub const NO_TARGETS: &str = "No targets: no enrolled hosts have an updater bundle.";

/// Why a push or a rollback was not attempted (a host's own failure is its result instead).
#[derive(Debug, thiserror::Error)]
pub enum UpdateError {
    #[error("{}", EXACTLY_ONE_TARGET)]
    NotExactlyOneTarget,
    #[error("{}", NO_TARGETS)]
    NoTargets,
    /// The listed hosts are unknown or have no updater.
    #[error("Unknown or updater-less host(s): [{0}]")]
    UnknownTargets(String),
    #[error("Unknown host: {0}")]
    UnknownHost(Uuid),
    #[error("Host '{0}' has no updater bundle — nothing to roll back.")]
    NoUpdater(String),
    /// The updater has no previous release to put back; its words.
    #[error("{0}")]
    NoPreviousRelease(String),
    #[error(transparent)]
    Store(#[from] DbError),
    #[error(transparent)]
    Certificates(#[from] CertificatesUnavailable),
    /// The release could not be built (the binary unreadable, the archive unwritable).
    #[error("{0:#}")]
    Release(anyhow::Error),
}

/// What a push sends every host: one tarball, its digest and provenance.
#[derive(Clone, Debug)]
pub struct Release {
    pub tgz: Bytes,
    pub sha256: String,
    pub sha: String,
}

/// Does `glob` (`*` any run, `?` one character) match all of `path`?
fn glob_matches(glob: &str, path: &str) -> bool {
    fn go(glob: &[char], path: &[char]) -> bool {
        match glob.split_first() {
            None => path.is_empty(),
            Some(('*', rest)) => (0..=path.len()).any(|skip| go(rest, &path[skip..])),
            Some(('?', rest)) => !path.is_empty() && go(rest, &path[1..]),
            Some((c, rest)) => path.first() == Some(c) && go(rest, &path[1..]),
        }
    }
    go(&glob.chars().collect::<Vec<_>>(), &path.chars().collect::<Vec<_>>())
}

/// The release of `binary` with the units a host runs, less what `exclude` matches. Reads the
/// binary: call it off the request loop.
pub fn build_release(binary: &Path, exclude: &[String]) -> std::io::Result<Release> {
    let svc = std::fs::read(binary)?;
    let sha = provenance(&svc);
    let mut files: Vec<(String, u32, Vec<u8>)> = vec![(BINARY.to_string(), 0o755, svc)];
    for (name, text) in super::bundle::unit_files() {
        files.push((format!("{UNITS}/{name}"), 0o644, text.into_bytes()));
    }
    files.retain(|(path, _, _)| !exclude.iter().any(|glob| glob_matches(glob, path)));
    let mut tar = tar::Builder::new(GzEncoder::new(Vec::new(), Compression::fast()));
    let now = chrono::Utc::now().timestamp().max(0) as u64;
    for (path, mode, data) in &files {
        let mut header = tar::Header::new_gnu();
        header.set_size(data.len() as u64);
        header.set_mode(*mode);
        header.set_mtime(now);
        header.set_cksum();
        tar.append_data(&mut header, path, data.as_slice())?;
    }
    let mut gzip = tar.into_inner()?;
    gzip.flush()?;
    let tgz = gzip.finish()?;
    Ok(Release { sha256: sha256_hex(&tgz), sha, tgz: Bytes::from(tgz) })
}

/// The multipart body of an upload: DECNET's fields (`tarball` named `tree.tgz`, `sha`, `sha256`,
/// and `confirm_self` for a self-update).
pub fn upload_body(release: &Release, confirm_self: bool) -> (String, Bytes) {
    let boundary = format!("svc-{}", Uuid::new_v4().simple());
    let mut body = Vec::with_capacity(release.tgz.len() + 1024);
    let mut text = |name: &str, value: &str| {
        body.extend_from_slice(
            format!("--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n").as_bytes(),
        );
    };
    text("sha", &release.sha);
    text("sha256", &release.sha256);
    if confirm_self {
        text("confirm_self", "true");
    }
    body.extend_from_slice(
        format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"tarball\"; filename=\"tree.tgz\"\r\n\
             Content-Type: application/gzip\r\n\r\n"
        )
        .as_bytes(),
    );
    body.extend_from_slice(&release.tgz);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), Bytes::from(body))
}

/// One host's outcome of a push (DECNET's `PushHostResult`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct HostResult {
    pub host_uuid: Uuid,
    pub host_name: String,
    /// `updated`, `rolled-back`, `failed`, `self-updated` or `self-failed`.
    pub status: String,
    pub http_status: Option<u16>,
    pub sha: Option<String>,
    pub detail: Option<String>,
    pub stderr: Option<String>,
}

/// 2xx/409/other of an updater, read into DECNET's statuses: the error and the probes' lines come
/// from the updater's `detail` (an object, or a plain text).
fn read_answer(host: &SwarmHost, release_sha: &str, answer: &Answer, ok: &str) -> HostResult {
    let status = match answer.status.as_u16() {
        200 => ok,
        409 => "rolled-back",
        _ => "failed",
    };
    let body = answer.json();
    let (detail, stderr) = match &body["detail"] {
        Value::Object(fields) => (
            fields.get("error").and_then(Value::as_str).map(String::from),
            fields.get("stderr").and_then(Value::as_str).filter(|s| !s.is_empty()).map(String::from),
        ),
        Value::String(text) => (Some(text.clone()), None),
        _ => (None, None),
    };
    if status != ok {
        tracing::warn!(host = %host.name, status = answer.status.as_u16(), detail = ?detail, stderr = ?stderr, "Updater refused the release");
    }
    HostResult {
        host_uuid: host.uuid,
        host_name: host.name.clone(),
        status: status.to_string(),
        http_status: Some(answer.status.as_u16()),
        sha: Some(release_sha.to_string()),
        detail,
        stderr,
    }
}

fn failed(host: &SwarmHost, status: &str, detail: &str) -> HostResult {
    HostResult {
        host_uuid: host.uuid,
        host_name: host.name.clone(),
        status: status.to_string(),
        http_status: None,
        sha: None,
        detail: Some(detail.to_string()),
        stderr: None,
    }
}

/// The updater of `host`, or the result that says why none is dialled.
// The result is the caller's answer for that host, returned at once: boxing it buys nothing.
#[allow(clippy::result_large_err)]
fn endpoint(caller: &AgentCaller, host: &SwarmHost) -> Result<Endpoint, HostResult> {
    if host.address.is_empty() {
        return Err(failed(host, "failed", "host has no address yet"));
    }
    caller.updater_endpoint(host).ok_or_else(|| {
        tracing::warn!(host = %host.name, "No updater fingerprint stored for the host: not dialled");
        failed(host, "failed", "host has no updater fingerprint")
    })
}

/// Pushes `release` to `host`'s agent slot and, when `include_self` and it was `updated`, to its
/// updater too.
pub async fn push(caller: &AgentCaller, host: &SwarmHost, release: &Release, include_self: bool) -> HostResult {
    let updater = match endpoint(caller, host) {
        Ok(updater) => updater,
        Err(result) => return result,
    };
    let answer = match updater.send(hyper::Method::POST, UPDATE_PATH, Some(upload_body(release, false))).await {
        Ok(answer) => answer,
        Err(err) => {
            tracing::warn!(host = %host.name, error = %err, "Update push failed");
            return failed(host, "failed", "transport failure");
        }
    };
    let result = read_answer(host, &release.sha, &answer, "updated");
    if !include_self || result.status != "updated" {
        return result;
    }
    match self_update(&updater, host, release).await {
        Ok(outcome) => outcome,
        Err(_) => HostResult {
            status: "self-failed".into(),
            detail: Some("agent updated OK but self-update transport failure".into()),
            ..result
        },
    }
}

/// Pushes `release` to `host`'s updater itself.
pub async fn push_self(caller: &AgentCaller, host: &SwarmHost, release: &Release) -> HostResult {
    let updater = match endpoint(caller, host) {
        Ok(updater) => updater,
        Err(result) => return result,
    };
    self_update(&updater, host, release).await.unwrap_or_else(|_| failed(host, "self-failed", "transport failure"))
}

/// `/update-self`: 200, or a connection the re-executing updater dropped, is `self-updated`.
async fn self_update(updater: &Endpoint, host: &SwarmHost, release: &Release) -> Result<HostResult, CallError> {
    match updater.send(hyper::Method::POST, UPDATE_SELF_PATH, Some(upload_body(release, true))).await {
        Ok(answer) => {
            let mut result = read_answer(host, &release.sha, &answer, "self-updated");
            if result.status != "self-updated" {
                result.status = "self-failed".into();
            }
            Ok(result)
        }
        Err(CallError::Transport) => Ok(HostResult {
            detail: Some("updater re-exec dropped connection (expected)".into()),
            ..failed(host, "self-updated", "")
        }),
        Err(err) => {
            tracing::warn!(host = %host.name, error = %err, "Self-update push failed");
            Err(err)
        }
    }
}

/// The updater's answer to a rollback, or the `failed` result when it was not reached.
#[allow(clippy::result_large_err)]
async fn rollback(caller: &AgentCaller, host: &SwarmHost) -> Result<Answer, HostResult> {
    let updater = endpoint(caller, host)?;
    updater.post(ROLLBACK_PATH, &serde_json::json!({})).await.map_err(|err| {
        tracing::warn!(host = %host.name, error = %err, "Rollback call failed");
        failed(host, "failed", "transport failure")
    })
}

/// The updater's `/health` body, or why it was not had.
async fn health(caller: &AgentCaller, host: &SwarmHost) -> Result<Value, String> {
    let updater = endpoint(caller, host).map_err(|result| result.detail.unwrap_or_default())?;
    match updater.get(HEALTH_PATH).await {
        Ok(answer) if answer.status.is_success() => Ok(answer.json()),
        Ok(answer) => {
            tracing::warn!(host = %host.name, status = answer.status.as_u16(), "Updater health refused");
            Err("host unreachable".into())
        }
        Err(_) => Err("host unreachable".into()),
    }
}

/// Every host with an updater (its fingerprint stored).
async fn hosts_with_updater(db: &Db) -> Result<Vec<SwarmHost>, DbError> {
    Ok(db.swarm_hosts(None).await?.into_iter().filter(|h| h.updater_cert_fingerprint.is_some()).collect())
}

/// One host's releases as its updater reports them.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct HostReleases {
    pub host_uuid: Uuid,
    pub host_name: String,
    pub address: String,
    pub reachable: bool,
    pub agent_status: Option<String>,
    pub current_sha: Option<String>,
    pub previous_sha: Option<String>,
    pub releases: Vec<SlotView>,
    pub detail: Option<String>,
}

impl HostReleases {
    /// `host` as its updater's `/health` answer describes it; without one, unreachable and why.
    fn new(host: SwarmHost, answer: Result<Value, String>) -> HostReleases {
        let mut view = HostReleases {
            host_uuid: host.uuid,
            host_name: host.name,
            address: host.address,
            reachable: false,
            agent_status: None,
            current_sha: None,
            previous_sha: None,
            releases: Vec::new(),
            detail: None,
        };
        match answer {
            Ok(health) => {
                let releases: Vec<SlotView> = serde_json::from_value(health["releases"].clone()).unwrap_or_default();
                let sha_of = |slot: &str| releases.iter().find(|r| r.slot == slot).and_then(|r| r.sha.clone());
                view.current_sha = sha_of("active");
                view.previous_sha = sha_of("prev");
                view.agent_status = health["agent_status"].as_str().or(health["status"].as_str()).map(String::from);
                view.reachable = true;
                view.releases = releases;
            }
            Err(detail) => view.detail = Some(detail),
        }
        view
    }
}

/// Every host with an updater, each asked for its release slots in parallel; one that does not
/// answer is `reachable: false`.
pub async fn host_releases(db: &Db, master: &SwarmMaster) -> Result<Vec<HostReleases>, UpdateError> {
    let hosts = hosts_with_updater(db).await?;
    let caller = master.caller().await?;
    let answers = futures::future::join_all(hosts.iter().map(|host| health(&caller, host))).await;
    Ok(hosts.into_iter().zip(answers).map(|(host, answer)| HostReleases::new(host, answer)).collect())
}

/// What a push is asked to do (the routes' body).
#[derive(Clone, Debug, Default, Deserialize, utoipa::ToSchema)]
pub struct PushRequest {
    /// The hosts to update; or `all`.
    #[serde(default)]
    pub host_uuids: Option<Vec<Uuid>>,
    /// Every host with an updater.
    #[serde(default)]
    pub all: bool,
    /// After a host's agent is updated, update its updater too.
    #[serde(default)]
    pub include_self: bool,
    /// Globs (`*`, `?`) of release paths (`svc`, `units/<name>`) to leave out.
    #[serde(default)]
    pub exclude: Vec<String>,
}

/// What a push shipped, and each host's result.
#[derive(Debug)]
pub struct Pushed {
    pub release: Release,
    pub results: Vec<HostResult>,
}

/// The hosts a push names: exactly one of `host_uuids` (non-empty) and `all`; a named host must
/// be known and have an updater, and `all` must find one.
async fn targets(db: &Db, request: &PushRequest) -> Result<Vec<SwarmHost>, UpdateError> {
    let named = request.host_uuids.as_ref().filter(|hosts| !hosts.is_empty());
    match (named, request.all) {
        (None, true) => {
            let hosts = hosts_with_updater(db).await?;
            if hosts.is_empty() {
                return Err(UpdateError::NoTargets);
            }
            Ok(hosts)
        }
        (Some(uuids), false) => {
            let (mut hosts, mut missing) = (Vec::new(), Vec::new());
            for uuid in uuids {
                match db.swarm_host(*uuid).await {
                    Ok(host) if host.updater_cert_fingerprint.is_some() => hosts.push(host),
                    Ok(_) | Err(DbError::NotFound) => missing.push(uuid.to_string()),
                    Err(err) => return Err(err.into()),
                }
            }
            if !missing.is_empty() {
                missing.sort();
                missing.dedup();
                let listed = missing.iter().map(|uuid| format!("'{uuid}'")).collect::<Vec<_>>().join(", ");
                return Err(UpdateError::UnknownTargets(listed));
            }
            hosts.dedup_by_key(|host| host.uuid);
            Ok(hosts)
        }
        _ => Err(UpdateError::NotExactlyOneTarget),
    }
}

/// This master's release (`bundle::shipped_binary`), built off the request loop.
async fn release(configured_binary: Option<&Path>, exclude: Vec<String>) -> Result<Release, UpdateError> {
    let binary = super::bundle::shipped_binary(configured_binary).map_err(UpdateError::Release)?;
    let built = tokio::task::spawn_blocking(move || build_release(&binary, &exclude))
        .await
        .map_err(|err| UpdateError::Release(anyhow::anyhow!("release build task: {err}")))?;
    built.map_err(|err| UpdateError::Release(anyhow::anyhow!("building the release: {err}")))
}

/// Pushes this master's svc to the hosts `request` names, in parallel: each host's updater stages
/// it, restarts the agent on it and probes it (`updated`), or puts the previous release back
/// (`rolled-back`); `include_self` then updates the updater (`self-updated`, `self-failed`). With
/// `only_self`, the release goes to the updaters themselves instead.
pub async fn push_release(
    db: &Db,
    master: &SwarmMaster,
    configured_binary: Option<&Path>,
    request: PushRequest,
    only_self: bool,
    by: &str,
) -> Result<Pushed, UpdateError> {
    let hosts = targets(db, &request).await?;
    let release = release(configured_binary, request.exclude).await?;
    let caller = master.caller().await?;
    tracing::info!(hosts = hosts.len(), sha = %release.sha, bytes = release.tgz.len(), only_self, %by, "Pushing a release");
    let pushes = hosts.iter().map(|host| {
        let (caller, release) = (&caller, &release);
        async move {
            if only_self {
                push_self(caller, host, release).await
            } else {
                push(caller, host, release, request.include_self).await
            }
        }
    });
    let results = futures::future::join_all(pushes).await;
    Ok(Pushed { release, results })
}

/// A host's rollback: `rolled-back`, or `failed` with the updater's status and words (or none
/// when it was not reached).
#[derive(Debug)]
pub struct RolledBack {
    pub host: SwarmHost,
    pub status: &'static str,
    pub http_status: Option<u16>,
    pub detail: Option<String>,
}

/// Puts host `uuid`'s previous release back and restarts its agent on it.
pub async fn rollback_host(db: &Db, master: &SwarmMaster, uuid: Uuid, by: &str) -> Result<RolledBack, UpdateError> {
    let host = db.swarm_host(uuid).await.map_err(|err| match err {
        DbError::NotFound => UpdateError::UnknownHost(uuid),
        other => other.into(),
    })?;
    if host.updater_cert_fingerprint.is_none() {
        return Err(UpdateError::NoUpdater(host.name));
    }
    tracing::info!(host = %host.name, %uuid, %by, "Rolling a host back");
    let answer = match rollback(&master.caller().await?, &host).await {
        Ok(answer) => answer,
        Err(result) => return Ok(RolledBack { host, status: "failed", http_status: None, detail: result.detail }),
    };
    let detail = match &answer.json()["detail"] {
        Value::String(text) => Some(text.clone()),
        Value::Object(fields) => fields.get("error").and_then(Value::as_str).map(String::from),
        _ => None,
    };
    match answer.status.as_u16() {
        200 => Ok(RolledBack { host, status: "rolled-back", http_status: Some(200), detail: None }),
        404 => Err(UpdateError::NoPreviousRelease(detail.unwrap_or_else(|| "no previous release".into()))),
        other => {
            tracing::warn!(host = %host.name, status = other, detail = ?detail, "Rollback refused by the updater");
            Ok(RolledBack { host, status: "failed", http_status: Some(other), detail })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_whole_paths() {
        assert!(glob_matches("units/*", "units/svc-agent.service"));
        assert!(glob_matches("*.service", "units/svc-agent.service"));
        assert!(glob_matches("sv?", "svc"));
        assert!(!glob_matches("units/*", "svc"));
        assert!(!glob_matches("sv", "svc"));
    }
}
