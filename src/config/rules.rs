//! Every validation rule beyond a value's type and range (those are `env.rs`'s): the ones every
//! command enforces while the environment is read (CORS origins, the MySQL URL), and the ones the
//! master API enforces before it starts ([`for_api`]: public binding, master mode, the JWT secret,
//! the admin password, in the order of the startup steps). Each returns problems rather than
//! stopping, so all of them are reported at once; no message ever contains a secret's value.

use std::net::IpAddr;

use super::{Config, ConfigProblem, Mode};
use crate::auth::password::{self, PolicyError};

/// Secrets seen in tutorials, sample files and defaults; an attacker tries these first.
const INSECURE_JWT_SECRETS: &[&str] = &[
    "secret",
    "changeme",
    "change-me",
    "change_me",
    "changethis",
    "jwt-secret",
    "jwt_secret",
    "jwtsecret",
    "your-secret-key",
    "your_secret_key",
    "supersecret",
    "super-secret",
    "super-secret-key",
    "mysecret",
    "default",
    "password",
    "admin",
    "test",
    "testing",
    "development",
    "svc",
    "decnet",
    "please-change-me",
    "insecure",
];

/// A metrics token shorter than this is guessable by trying.
const MIN_METRICS_TOKEN_LEN: usize = 24;

/// HS256 keys shorter than this are guessable offline from a single token.
const MIN_JWT_SECRET_LEN: usize = 32;

const BAD_ADMIN_PASSWORDS: &[&str] = &[
    "admin",
    "password",
    "changeme",
    "letmein",
    "secret",
    "default",
    "administrator",
    "admin123",
    "admin12345",
    "password123",
    "password1234",
    "adminadmin",
    "adminpassword",
    "changeme123",
    "123456789012",
    "qwertyuiop12",
    "qwerty123456",
];

/// `SVC_CORS_ORIGINS` lists origins explicitly, each a well-formed origin.
pub(super) fn cors_origins(origins: &[String]) -> Vec<ConfigProblem> {
    let var = "SVC_CORS_ORIGINS";
    let mut problems = Vec::new();
    if origins.iter().any(|o| o == "*") {
        problems.push(ConfigProblem::new(var, "must list origins explicitly; the wildcard `*` is not allowed"));
    }
    for origin in origins.iter().filter(|o| *o != "*") {
        if origin_host(origin).is_none() || origin.bytes().any(|b| b.is_ascii_whitespace() || b.is_ascii_control()) {
            problems.push(ConfigProblem::new(
                var,
                format!("`{origin}` is not an origin like https://dashboard.example:8443"),
            ));
        }
    }
    problems
}

/// `SVC_DB_URL` is present, a MySQL URL, and names the database.
pub(super) fn mysql_url(url: &str) -> Option<ConfigProblem> {
    let var = "SVC_DB_URL";
    if url.is_empty() {
        Some(ConfigProblem::new(var, "is required when SVC_DB_TYPE=mysql (mysql://user:password@host:3306/db)"))
    } else if !url.starts_with("mysql://") && !url.starts_with("mariadb://") {
        Some(ConfigProblem::new(var, "must start with mysql:// when SVC_DB_TYPE=mysql"))
    } else if mysql_database_name(url).is_none() {
        Some(ConfigProblem::new(var, "must name a database (mysql://user:password@host:3306/svc)"))
    } else {
        None
    }
}

/// Every rule the master API enforces before it starts, in the order of the startup steps (2, 3,
/// 4), then the admin password the first admin is created with.
pub(super) fn for_api(config: &Config) -> Vec<ConfigProblem> {
    let mut problems = public_binding(config);
    problems.extend(master_mode(config));
    problems.extend(jwt_secret(config));
    problems.extend(admin_password(config));
    problems
}

/// The rules for an API reachable from other hosts; relaxed only by `SVC_TESTING=1`.
fn public_binding(config: &Config) -> Vec<ConfigProblem> {
    let api = &config.api;
    if config.testing || api.binds_loopback() {
        return vec![];
    }
    let mut problems = Vec::new();
    for origin in &api.cors_origins {
        if origin_host(origin).is_some_and(is_loopback_host) {
            problems.push(ConfigProblem::new(
                "SVC_CORS_ORIGINS",
                format!("contains the loopback origin {origin} while SVC_API_HOST is not loopback"),
            ));
        }
    }
    if let Some(base) = &api.canary_http_base
        && base.to_ascii_lowercase().starts_with("http://")
        && !origin_host(base).is_some_and(is_loopback_host)
    {
        problems.push(ConfigProblem::new(
            "SVC_CANARY_HTTP_BASE",
            "is plaintext http:// to a non-loopback host while SVC_API_HOST is not loopback; use https://",
        ));
    }
    problems
}

/// The master API does not run on an agent host unless `SVC_DISALLOW_MASTER=false`.
fn master_mode(config: &Config) -> Vec<ConfigProblem> {
    if config.mode == Mode::Agent && config.api.disallow_master {
        return vec![ConfigProblem::new(
            "SVC_MODE",
            "is `agent`, and the master API is master-only: it does not start on an agent host \
             (SVC_DISALLOW_MASTER=false overrides)",
        )];
    }
    vec![]
}

/// `SVC_JWT_SECRET` is present and, unless `SVC_TESTING=1`, not guessable.
fn jwt_secret(config: &Config) -> Vec<ConfigProblem> {
    let var = "SVC_JWT_SECRET";
    let Some(secret) = &config.api.jwt_secret else {
        return vec![ConfigProblem::new(var, "is required (generate one with `openssl rand -hex 32`)")];
    };
    if config.testing {
        return vec![];
    }
    let value = secret.expose();
    if INSECURE_JWT_SECRETS.contains(&value.to_ascii_lowercase().as_str()) {
        return vec![ConfigProblem::new(var, "is a known-insecure value; generate one with `openssl rand -hex 32`")];
    }
    if value.chars().count() < MIN_JWT_SECRET_LEN {
        return vec![ConfigProblem::new(
            var,
            format!("is shorter than {MIN_JWT_SECRET_LEN} characters; generate one with `openssl rand -hex 32`"),
        )];
    }
    if value.chars().all(|c| value.starts_with(c)) {
        return vec![ConfigProblem::new(var, "repeats a single character; generate one with `openssl rand -hex 32`")];
    }
    vec![]
}

/// `SVC_ADMIN_PASSWORD` is present, within the password limits and, unless `SVC_TESTING=1`, not a
/// password attackers try first.
fn admin_password(config: &Config) -> Vec<ConfigProblem> {
    let var = "SVC_ADMIN_PASSWORD";
    let Some(secret) = &config.api.admin_password else {
        return vec![ConfigProblem::new(var, "is required")];
    };
    let value = secret.expose();
    match password::check_policy(value) {
        // Never relaxed: a longer password cannot be hashed without truncating it.
        Err(err @ PolicyError::TooLong) => return vec![ConfigProblem::new(var, format!("is invalid: {err}"))],
        _ if config.testing => return vec![],
        Err(err) => return vec![ConfigProblem::new(var, format!("is invalid: {err}"))],
        Ok(()) => {}
    }
    if BAD_ADMIN_PASSWORDS.contains(&value.to_lowercase().as_str()) {
        return vec![ConfigProblem::new(var, "is a known-bad password; choose another")];
    }
    vec![]
}

/// The database of `mysql://[user[:password]@]host[:port]/database[?options]`.
fn mysql_database_name(url: &str) -> Option<&str> {
    let rest = url.split_once("://")?.1;
    let path = rest.split_once('/')?.1;
    let name = path.split(['?', '#']).next()?;
    (!name.is_empty() && !name.contains('/')).then_some(name)
}

/// The host of `scheme://host[:port][/path]`, without brackets around an IPv6 literal.
fn origin_host(origin: &str) -> Option<&str> {
    let (scheme, rest) = origin.split_once("://")?;
    if scheme.is_empty() || !scheme.chars().all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c)) {
        return None;
    }
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
    let host =
        if let Some(v6) = authority.strip_prefix('[') { v6.split_once(']')?.0 } else { authority.split(':').next()? };
    (!host.is_empty()).then_some(host)
}

pub(super) fn is_loopback_host(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.eq_ignore_ascii_case("localhost") || host.to_ascii_lowercase().ends_with(".localhost") {
        return true;
    }
    host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// `SVC_METRICS_TOKEN`: long enough not to be guessed, and sendable in a header as it is.
pub(super) fn metrics_token(token: &crate::secret::Secret) -> Option<ConfigProblem> {
    let token = token.expose();
    if token.len() < MIN_METRICS_TOKEN_LEN {
        return Some(ConfigProblem::new(
            "SVC_METRICS_TOKEN",
            format!("must be at least {MIN_METRICS_TOKEN_LEN} characters (`openssl rand -hex 24`)"),
        ));
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Some(ConfigProblem::new("SVC_METRICS_TOKEN", "must be printable ASCII without spaces"));
    }
    None
}
