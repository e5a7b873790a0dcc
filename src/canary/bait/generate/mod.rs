//! One module per kind of bait, each owning its file's shape and how that file calls home; this one
//! resolves where the bait goes and hands the kind its inputs.

mod aws_creds;
mod docx;
mod env_file;
mod fingerprint;
mod git_config;
mod honeydoc;
mod mysql_dump;
mod pdf;
mod people;
mod report;
mod ssh_key;

use std::time::Duration;

use super::draw::Draw;
use super::{Bait, BaitFile, BaitRequest, Callback, CanaryKind, GenerateError, Persona, PersonaOs};

/// Makes the files for one bait. Deterministic: the same request gives the same bytes.
pub fn generate(request: &BaitRequest<'_>) -> Result<Bait, GenerateError> {
    let kind = request.kind;
    if kind.needs_dns() && request.callback.dns_name().is_none() {
        return Err(GenerateError::NeedsDnsZone(kind));
    }
    let draw = Draw::new(kind, request.seed);
    let path = match request.path {
        Some(path) => checked_path(path)?,
        None => default_path(kind, request.persona, &draw),
    };
    let input = Input { callback: request.callback, persona: request.persona, draw, path };
    Ok(match kind {
        CanaryKind::AwsCreds => aws_creds::make(&input),
        CanaryKind::EnvFile => env_file::make(&input),
        CanaryKind::GitConfig => git_config::make(&input),
        CanaryKind::SshKey => ssh_key::make(&input),
        CanaryKind::MysqlDump => mysql_dump::make(&input),
        CanaryKind::Honeydoc => honeydoc::make(&input),
        CanaryKind::HoneydocDocx => docx::make(&input),
        CanaryKind::HoneydocPdf => pdf::make(&input),
        CanaryKind::FingerprintHtml => fingerprint::make_html(&input),
        CanaryKind::FingerprintSvg => fingerprint::make_svg(&input),
    })
}

/// What every kind's maker gets.
struct Input<'a> {
    callback: &'a Callback,
    persona: &'a Persona,
    draw: Draw<'a>,
    /// The bait's own path, resolved.
    path: String,
}

impl Input<'_> {
    /// The DNS name; only kinds that [`CanaryKind::needs_dns`] ask, and [`generate`] checked it is there.
    fn dns_name(&self) -> &str {
        self.callback.dns_name().expect("generate checks kinds that need DNS have a name")
    }

    /// A file of this bait, last written `days` days (plus up to half as many again) before planting.
    fn file(&self, path: String, mode: u32, content: Vec<u8>, content_type: &'static str, days: u64) -> BaitFile {
        let seconds = self.draw.number(&format!("age:{path}"), days * 86_400, days * 3 / 2 * 86_400 + 86_399);
        BaitFile { path, mode, content, content_type, age: Duration::from_secs(seconds) }
    }
}

/// DECNET's default placements (`decnet/canary/paths.py`), but for the SSH key (an ed25519 key in a
/// file named `id_rsa` would be a tell), the git repository (a project folder, not the home itself)
/// and the dump (DECNET has none; a dated backup file).
fn default_path(kind: CanaryKind, persona: &Persona, draw: &Draw<'_>) -> String {
    let home = persona.home();
    let windows = persona.os == PersonaOs::Windows;
    match kind {
        CanaryKind::AwsCreds => format!("{home}/.aws/credentials"),
        CanaryKind::EnvFile if windows => format!("{home}/Desktop/prod.env"),
        CanaryKind::EnvFile => format!("{home}/.env"),
        CanaryKind::GitConfig => format!("{home}/{}/.git/config", git_config::repository_folder(draw, windows)),
        CanaryKind::SshKey => format!("{home}/.ssh/id_ed25519"),
        CanaryKind::MysqlDump => format!("{home}/backups/{}", mysql_dump::file_name(draw)),
        CanaryKind::Honeydoc => format!("{home}/Documents/quarterly_report.html"),
        CanaryKind::HoneydocDocx => format!("{home}/Documents/quarterly_report.docx"),
        CanaryKind::HoneydocPdf => format!("{home}/Documents/quarterly_report.pdf"),
        CanaryKind::FingerprintHtml => format!("{home}/Documents/asset_directory.html"),
        CanaryKind::FingerprintSvg => format!("{home}/Documents/network_topology.svg"),
    }
}

/// DECNET's `normalize_placement`, and no quotes either: some kinds write their path into a companion
/// file (an SSH `IdentityFile`), where a newline or quote would let a path add configuration.
fn checked_path(path: &str) -> Result<String, GenerateError> {
    let bad = !path.starts_with('/')
        || path.ends_with('/')
        || path.chars().any(|c| c.is_control() || c == '"' || c == '\'')
        || path.split('/').any(|segment| segment == "..");
    if bad { Err(GenerateError::BadPath(path.to_string())) } else { Ok(path.to_string()) }
}

/// The directory part of an absolute path (`/` for a file at the root).
fn parent(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(at) => &path[..at],
    }
}

#[cfg(test)]
mod tests;
