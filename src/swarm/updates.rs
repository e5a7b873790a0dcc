//! The master's side of swarm updates: the release it ships (a gzipped tar of its own svc binary
//! and its units, DECNET's `exclude` globs narrowing it), and each call to a host's updater over
//! the pinned caller (`caller::AgentCaller::updater_endpoint`: a host without a stored updater
//! fingerprint is never dialled). Each call ends in a per-host result with DECNET's statuses;
//! transport failures are generic, their cause in the log.

use std::io::Write;
use std::path::Path;

use bytes::Bytes;
use flate2::Compression;
use flate2::write::GzEncoder;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use super::caller::AgentCaller;
use super::client::{Answer, CallError, Endpoint};
use super::pki::fingerprint as sha256_hex;
use super::updater::provenance;
use super::updater::releases::{BINARY, UNITS};
use super::wire::{HEALTH_PATH, ROLLBACK_PATH, UPDATE_PATH, UPDATE_SELF_PATH};
use crate::db::SwarmHost;

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
pub async fn rollback(caller: &AgentCaller, host: &SwarmHost) -> Result<Answer, HostResult> {
    let updater = endpoint(caller, host)?;
    updater.post(ROLLBACK_PATH, &serde_json::json!({})).await.map_err(|err| {
        tracing::warn!(host = %host.name, error = %err, "Rollback call failed");
        failed(host, "failed", "transport failure")
    })
}

/// The updater's `/health` body, or why it was not had.
pub async fn health(caller: &AgentCaller, host: &SwarmHost) -> Result<Value, String> {
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
