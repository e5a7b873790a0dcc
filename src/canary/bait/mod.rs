//! The bait, made: given a kind, the callback it must reach and a seed, [`generate`] returns the
//! bytes, path, mode and type of the files to plant; [`sniff_content_type`] tells an uploaded blob's
//! type; [`CallbackToken`] and [`Callback`] are the token a bait carries and where it calls home.
//! Pure: nothing here does I/O, reads the clock or the configuration, so the API, the baseline
//! seeding at deploy time and a later re-check all get byte-identical files from the same inputs
//! (DECNET's generators promise the same, and its planter relies on it to be idempotent). A
//! layering test keeps it so.

mod blob;
mod callback;
mod draw;
mod generate;

pub use blob::sniff_content_type;
pub(crate) use callback::is_dns_label;
pub use callback::{Callback, CallbackError, CallbackToken};
pub use generate::generate;

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// What a bait is. The strings are DECNET's generator names (`decnet/canary/factory.py`), which its
/// dashboard sends as a token's `generator`; DECNET's own token `kind` (`http`, `dns`,
/// `aws_passive`) says which channel a token calls home by, and is not this.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum CanaryKind {
    /// `~/.aws/credentials` whose default profile sends every AWS call to the callback.
    AwsCreds,
    /// A production `.env` whose API and webhook URLs are the callback.
    EnvFile,
    /// A repository's `.git/config` whose `origin` is the callback.
    GitConfig,
    /// A real ed25519 OpenSSH key and the `~/.ssh/config` host that resolves the callback's name.
    SshKey,
    /// A `mysqldump` file that makes the importing server replicate from the callback's name.
    MysqlDump,
    /// An HTML report with a remote image at the callback.
    Honeydoc,
    /// A Word document with an external image at the callback.
    HoneydocDocx,
    /// A PDF whose open action is the callback.
    HoneydocPdf,
    /// An HTML page whose script and image beacon to the callback.
    FingerprintHtml,
    /// An SVG diagram whose script and image beacon to the callback.
    FingerprintSvg,
}

impl CanaryKind {
    pub const ALL: [CanaryKind; 10] = [
        CanaryKind::AwsCreds,
        CanaryKind::EnvFile,
        CanaryKind::GitConfig,
        CanaryKind::SshKey,
        CanaryKind::MysqlDump,
        CanaryKind::Honeydoc,
        CanaryKind::HoneydocDocx,
        CanaryKind::HoneydocPdf,
        CanaryKind::FingerprintHtml,
        CanaryKind::FingerprintSvg,
    ];

    /// The name on the wire (DECNET's generator name).
    pub fn as_str(self) -> &'static str {
        match self {
            CanaryKind::AwsCreds => "aws_creds",
            CanaryKind::EnvFile => "env_file",
            CanaryKind::GitConfig => "git_config",
            CanaryKind::SshKey => "ssh_key",
            CanaryKind::MysqlDump => "mysql_dump",
            CanaryKind::Honeydoc => "honeydoc",
            CanaryKind::HoneydocDocx => "honeydoc_docx",
            CanaryKind::HoneydocPdf => "honeydoc_pdf",
            CanaryKind::FingerprintHtml => "fingerprint_html",
            CanaryKind::FingerprintSvg => "fingerprint_svg",
        }
    }

    /// Whether the bait can only call home by a DNS lookup (a MySQL server or an SSH client reaches a
    /// host, not a URL), so it needs a callback with a DNS zone.
    pub fn needs_dns(self) -> bool {
        matches!(self, CanaryKind::SshKey | CanaryKind::MysqlDump)
    }
}

impl std::fmt::Display for CanaryKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for CanaryKind {
    type Err = UnknownKind;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        CanaryKind::ALL.into_iter().find(|kind| kind.as_str() == name).ok_or_else(|| UnknownKind(name.to_string()))
    }
}

#[derive(Debug, thiserror::Error)]
#[error("unknown canary kind {0:?}")]
pub struct UnknownKind(pub String);

/// The operating system a decky pretends to run, which decides its user's name and where bait goes
/// (DECNET's personas: Windows deckies are Linux containers with Windows-shaped paths under `/home`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PersonaOs {
    #[default]
    Linux,
    Windows,
}

/// Whose files the bait pretends to be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Persona {
    pub os: PersonaOs,
    pub user: String,
}

impl Persona {
    /// DECNET's default user for the system: `admin`, or `Administrator` on Windows.
    pub fn for_os(os: PersonaOs) -> Self {
        let user = match os {
            PersonaOs::Linux => "admin",
            PersonaOs::Windows => "Administrator",
        };
        Persona { os, user: user.to_string() }
    }

    pub fn home(&self) -> String {
        if self.user == "root" { "/root".to_string() } else { format!("/home/{}", self.user) }
    }
}

/// What to make: the kind, the callback it must reach, whose files it imitates, and the seed every
/// plausible value (names, numbers, keys, dates) is drawn from. DECNET keeps the seed with the token
/// (`secret_seed`); the same request always gives the same bytes.
#[derive(Clone, Copy, Debug)]
pub struct BaitRequest<'a> {
    pub kind: CanaryKind,
    pub callback: &'a Callback,
    pub persona: &'a Persona,
    pub seed: &'a [u8],
    /// Where the bait goes, absolute; `None` for the kind's default under the persona's home.
    pub path: Option<&'a str>,
}

/// The files to plant: the bait itself, then any file it needs beside it to call home (the SSH
/// client configuration naming the key's host, the rest of a git repository).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bait {
    pub file: BaitFile,
    pub companions: Vec<BaitFile>,
}

impl Bait {
    pub fn files(&self) -> impl Iterator<Item = &BaitFile> {
        std::iter::once(&self.file).chain(&self.companions)
    }
}

#[derive(Clone, PartialEq, Eq)]
pub struct BaitFile {
    /// Absolute path inside the decky.
    pub path: String,
    /// Unix permission bits.
    pub mode: u32,
    pub content: Vec<u8>,
    pub content_type: &'static str,
    /// How long before planting the file should seem last written (its mtime), so it does not look
    /// new the day the decky came up.
    pub age: Duration,
}

impl std::fmt::Debug for BaitFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BaitFile")
            .field("path", &self.path)
            .field("mode", &format_args!("{:o}", self.mode))
            .field("content_type", &self.content_type)
            .field("len", &self.content.len())
            .field("age", &self.age)
            .finish()
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum GenerateError {
    #[error("{0} calls home by a DNS lookup; configure a DNS zone for the callbacks")]
    NeedsDnsZone(CanaryKind),
    #[error("placement path {0:?} must be absolute, without `..`, control characters or quotes")]
    BadPath(String),
}
