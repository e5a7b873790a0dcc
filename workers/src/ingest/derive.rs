//! What a log line is worth beyond the row: captured credentials (`secret_b64`) and bounties
//! (fingerprints such as `ja3` with their `fingerprint_type`, artifacts), by the rules of
//! `reference/decnet-workers.md` §2.
//!
//! Bounties are stored once per (`bounty_type`, `attacker_ip`, `payload` text), so a payload must be
//! the same bytes every time the same line is seen: payloads are JSON objects with sorted keys
//! (`serde_json::Map` without `preserve_order`), built only from the line. They carry identity, not
//! per-request detail, except where DECNET's dashboard expects it (`http_useragent`'s method and
//! path). Fingerprint and artifact payloads copy only the fields the line has, non-empty.
//!
//! Not derived here (DECNET does them; later work): `ip_leak` / `spoofed_source` / `http_quirks`
//! from proxy headers and header order, the prober's `icmp6_error` (not probed), and the
//! `email.received` / `smtp.probe.pending` bus messages after a stored mail.

use base64::Engine as _;
use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use svc::db::{NewBounty, NewCredential};
use svc::logline::LogLine;
use svc::text::{prefix_chars, printable};

use super::useragent;

/// The bounties and the credential one line yields.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Derived {
    pub bounties: Vec<NewBounty>,
    pub credential: Option<NewCredential>,
}

/// Everything `line`, stored with `timestamp`, yields.
pub fn derive(line: &LogLine, timestamp: DateTime<Utc>) -> Derived {
    let mut bounties = Vec::new();
    let credential = credential(line, timestamp);
    if let Some(credential) = &credential {
        bounties.push(bounty(line, timestamp, &line.attacker_ip, "credential", credential_payload(credential)));
    }
    for payload in fingerprints(line) {
        // The prober's lines describe the host it probed: that host is the attacker.
        let attacker_ip = match line.service.as_str() {
            "prober" => present(line, "target_ip").unwrap_or(&line.attacker_ip),
            _ => &line.attacker_ip,
        };
        bounties.push(bounty(line, timestamp, attacker_ip, "fingerprint", payload));
    }
    if let Some(payload) = artifact(line) {
        bounties.push(bounty(line, timestamp, &line.attacker_ip, "artifact", payload));
    }
    Derived { bounties, credential }
}

fn bounty(
    line: &LogLine,
    timestamp: DateTime<Utc>,
    attacker_ip: &str,
    bounty_type: &str,
    payload: Payload,
) -> NewBounty {
    NewBounty {
        timestamp,
        decky: line.decky.clone(),
        service: line.service.clone(),
        attacker_ip: attacker_ip.to_owned(),
        bounty_type: bounty_type.to_owned(),
        payload: payload.into_text(),
    }
}

/// A field's value when the line has it non-empty (Python's truthiness, which DECNET tests with).
fn present<'a>(line: &'a LogLine, key: &str) -> Option<&'a str> {
    line.field(key).filter(|v| !v.is_empty())
}

// ---- credentials ----

/// Longest stored principal, base64 text and printable form, in characters. Longer values are cut
/// to these (DECNET's column sizes); the SHA-256 is always of the whole decoded secret, so reuse
/// still matches.
const PRINCIPAL_MAX: usize = 256;
const SECRET_B64_MAX: usize = 2048;
const SECRET_PRINTABLE_MAX: usize = 512;

/// Python's `base64.b64decode(s, validate=True)`: the standard alphabet, padding required and
/// canonical (`aGk=`, not `aGk` nor `aGk==`), non-zero trailing bits tolerated.
const STRICT_BASE64: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new()
        .with_decode_allow_trailing_bits(true)
        .with_decode_padding_mode(DecodePaddingMode::RequireCanonical),
);

/// The secret a line captured, when it carries a valid `secret_b64` (invalid: no credential; the
/// log row is stored anyway).
fn credential(line: &LogLine, seen_at: DateTime<Utc>) -> Option<NewCredential> {
    let b64 = line.field("secret_b64")?;
    if !is_base64_text(b64) {
        tracing::debug!(decky = %line.decky, service = %line.service, "secret_b64 is not base64; no credential");
        return None;
    }
    let Ok(secret) = STRICT_BASE64.decode(b64) else {
        tracing::debug!(decky = %line.decky, service = %line.service, "secret_b64 does not decode; no credential");
        return None;
    };
    // `None` from a Bearer credential is DECNET's `str(None)`: kept verbatim, as DECNET stores it.
    let principal = present(line, "principal").or_else(|| present(line, "username"));
    // Emitters always send the printable form; if one did not, derive it the way they do.
    let printable = match line.field("secret_printable") {
        Some(printable) => prefix_chars(printable, SECRET_PRINTABLE_MAX).to_owned(),
        None => prefix_chars(&printable(&secret), SECRET_PRINTABLE_MAX).to_owned(),
    };
    Some(NewCredential {
        seen_at,
        attacker_ip: line.attacker_ip.clone(),
        decky: line.decky.clone(),
        service: line.service.clone(),
        secret_kind: present(line, "secret_kind").unwrap_or("plaintext").to_owned(),
        secret_sha256: hex_sha256(&secret),
        principal: principal.map(|p| prefix_chars(p, PRINCIPAL_MAX).to_owned()),
        secret_printable: printable,
        secret_b64: prefix_chars(b64, SECRET_B64_MAX).to_owned(),
        outcome: present(line, "outcome").map(str::to_owned),
    })
}

/// DECNET's `^[A-Za-z0-9+/]*={0,2}$`.
fn is_base64_text(text: &str) -> bool {
    let body = text.strip_suffix("==").or_else(|| text.strip_suffix('=')).unwrap_or(text);
    body.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
}

fn hex_sha256(bytes: &[u8]) -> String {
    svc::text::hex(&Sha256::digest(bytes))
}

/// The vault's view of a credential: who, what kind, the printable form and the hash, and the same
/// who and printable form as `username` and `password`, the names DECNET's Bounty page reads.
/// Never the base64 secret: the bounty list is shown and searched far more widely than the
/// credential table.
fn credential_payload(credential: &NewCredential) -> Payload {
    let mut payload = Payload::default();
    let principal = credential.principal.clone().map_or(Value::Null, Value::String);
    payload.set("principal", principal.clone());
    payload.set("username", principal);
    payload.set("secret_kind", credential.secret_kind.clone());
    payload.set("secret_printable", credential.secret_printable.clone());
    payload.set("password", credential.secret_printable.clone());
    payload.set("secret_sha256", credential.secret_sha256.clone());
    payload
}

// ---- fingerprints ----

/// Every fingerprint the line carries (a sniffer's TLS session can give several).
fn fingerprints(line: &LogLine) -> Vec<Payload> {
    let mut out = Vec::new();
    let service = line.service.as_str();
    let event = line.event_type.as_str();

    if let Some(payload) = user_agent(line) {
        out.push(payload);
    }
    // The SSH client's identification and key exchange order as the SSH decoy read them (the
    // sniffer's line has the identification only): a primitive identities are linked by.
    if event == "ssh_client_banner"
        && let Some(banner) = present(line, "client_banner")
    {
        out.push(Payload::fingerprint("ssh_client").with("banner", banner).copy(line, &["kex"]));
    }
    if event == "version"
        && let Some(version) = present(line, "client_version")
    {
        out.push(Payload::fingerprint("vnc_client_version").with("value", version));
    }
    if service == "sniffer" {
        if present(line, "ja3").is_some() {
            let keys = [
                "ja3",
                "ja3s",
                "ja4",
                "ja4s",
                "tls_version",
                "sni",
                "alpn",
                "dst_port",
                "raw_ciphers",
                "raw_extensions",
            ];
            out.push(Payload::fingerprint("ja3").copy(line, &keys));
        }
        if let Some(rtt) = present(line, "ja4l_rtt_ms") {
            out.push(Payload::fingerprint("ja4l").with("rtt_ms", rtt).copy_as(line, "ja4l_client_ttl", "client_ttl"));
        }
        if let Some(mechanisms) = present(line, "resumption") {
            out.push(Payload::fingerprint("tls_resumption").with("mechanisms", mechanisms));
        }
    }
    if matches!(service, "sniffer" | "prober") && present(line, "subject_cn").is_some() {
        let keys = ["subject_cn", "issuer", "self_signed", "not_before", "not_after", "sans", "sni", "cert_sha256"];
        out.push(Payload::fingerprint("tls_certificate").copy(line, &keys));
    }
    if service == "prober" {
        let target = ["target_ip", "target_port"];
        if let Some(hash) = present(line, "jarm_hash") {
            out.push(Payload::fingerprint("jarm").with("hash", hash).copy(line, &target));
        }
        if let Some(hash) = present(line, "hassh_server_hash") {
            let keys = ["ssh_banner", "kex_algorithms", "encryption_s2c", "mac_s2c", "compression_s2c"];
            out.push(Payload::fingerprint("hassh_server").with("hash", hash).copy(line, &target).copy(line, &keys));
        }
        if let Some(hash) = present(line, "tcpfp_hash") {
            let keys = ["ttl", "window_size", "df_bit", "mss", "window_scale", "sack_ok", "timestamp", "options_order"];
            out.push(
                Payload::fingerprint("tcpfp")
                    .with("hash", hash)
                    .copy_as(line, "tcpfp_raw", "raw")
                    .copy(line, &target)
                    .copy(line, &keys),
            );
        }
        // DECNET's payload: its dashboard draws `errors`, a stimulus each.
        let stimuli = match event {
            "icmp_error" => Some(&crate::prober::icmp::v4::STIMULI),
            "icmp6_error" => Some(&crate::prober::icmp::v6::STIMULI),
            _ => None,
        };
        if let Some(stimuli) = stimuli
            && let Some(hash) = present(line, "fingerprint_hash")
        {
            let mut errors = serde_json::Map::new();
            for name in stimuli.iter().map(|s| s.name) {
                let field = |suffix: &str| present(line, &format!("{name}_{suffix}"));
                let error = serde_json::json!({
                    "sent": field("sent") == Some("true"),
                    "returned": present(line, name) == Some("true"),
                    "rtt_ms": field("rtt_ms"),
                    "src_ip": field("from"),
                    "icmp_code": field("code"),
                    "echo_len": field("echo_len"),
                });
                errors.insert(name.into(), error);
            }
            let mut icmp =
                Payload::fingerprint(event).with("fp_hash", hash).copy(line, &["matrix"]).copy(line, &target);
            icmp.set("errors", errors);
            out.push(icmp);
        }
    }
    // The HTTP fingerprint socket's events. No path or cookie: they change with every request
    // and would mint a bounty per request; JA4H already encodes method, version and header counts.
    if event == "http_request_fingerprint" && present(line, "ja4h").is_some() {
        out.push(Payload::fingerprint("ja4h").copy(line, &["ja4h", "proto", "headers_ordered"]));
    }
    if matches!(event, "http2_settings" | "http3_settings") && present(line, "settings").is_some() {
        out.push(Payload::fingerprint(event).copy(line, &["settings", "frame_order"]));
    }
    if event == "quic_client_hello" && present(line, "ja4_quic").is_some() {
        out.push(Payload::fingerprint("ja4_quic").copy(line, &["ja4_quic", "sni", "alpn", "raw_ciphers"]));
    }
    out
}

/// `http_useragent` from `fields.headers` (a JSON object text) with a User-Agent header of any
/// case, even an empty one (sending it empty is a signal). `User-Agent` itself wins over other
/// casings; among those, the first in key order. A header that is not a string is ignored.
fn user_agent(line: &LogLine) -> Option<Payload> {
    let headers = line.field("headers")?;
    let Ok(Value::Object(headers)) = serde_json::from_str::<Value>(headers) else { return None };
    let value = headers
        .get("User-Agent")
        .or_else(|| headers.iter().find(|(name, _)| name.eq_ignore_ascii_case("user-agent")).map(|(_, v)| v))?
        .as_str()?;
    let classified = useragent::classify(value);
    let mut payload = Payload::fingerprint("http_useragent").with("value", value).with("category", classified.category);
    payload.set("tool", classified.tool.map_or(Value::Null, |tool| Value::String(tool.to_owned())));
    payload.set(
        "signals",
        if classified.signals.is_empty() {
            Value::Null
        } else {
            Value::Array(classified.signals.iter().map(|s| Value::String((*s).to_owned())).collect())
        },
    );
    Some(payload.copy(line, &["method", "path"]))
}

// ---- artifacts ----

/// A captured file (`file_captured`) or stored mail (`message_stored`), by where it is stored.
fn artifact(line: &LogLine) -> Option<Payload> {
    let stored_as = present(line, "stored_as")?;
    let (kind, keys): (&str, &[&str]) = match line.event_type.as_str() {
        "file_captured" => ("file", &["sha256", "size", "orig_path", "attribution", "writer_comm"]),
        "message_stored" => ("mail", &["sha256", "size", "mail_from", "rcpt_to", "subject"]),
        _ => return None,
    };
    let mut payload = Payload::default().with("kind", kind).with("stored_as", stored_as);
    payload = payload.copy(line, keys);
    Some(payload)
}

// ---- payloads ----

/// A bounty payload under construction: a JSON object whose text has its keys sorted.
#[derive(Default)]
struct Payload(Map<String, Value>);

impl Payload {
    fn fingerprint(fingerprint_type: &str) -> Self {
        Payload::default().with("fingerprint_type", fingerprint_type)
    }

    fn set(&mut self, key: &str, value: impl Into<Value>) {
        self.0.insert(key.to_owned(), value.into());
    }

    fn with(mut self, key: &str, value: &str) -> Self {
        self.set(key, value);
        self
    }

    /// Copies each of `keys` the line has, non-empty, under the same name.
    fn copy(mut self, line: &LogLine, keys: &[&str]) -> Self {
        for key in keys {
            if let Some(value) = present(line, key) {
                self.set(key, value);
            }
        }
        self
    }

    /// Copies field `field`, if the line has it non-empty, as `key`.
    fn copy_as(mut self, line: &LogLine, field: &str, key: &str) -> Self {
        if let Some(value) = present(line, field) {
            self.set(key, value);
        }
        self
    }

    fn into_text(self) -> String {
        Value::Object(self.0).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use svc::logline::parse;

    fn at() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-05-02T06:22:48Z").unwrap().with_timezone(&Utc)
    }

    /// A line from `service`/`event` carrying `sd` (the inside of the relay element).
    fn line(service: &str, event: &str, sd: &str) -> LogLine {
        parse(&format!("<134>1 2026-05-02T06:22:48Z omega-decky {service} - {event} [relay@55555 {sd}]")).unwrap()
    }

    fn payload(bounty: &NewBounty) -> Value {
        serde_json::from_str(&bounty.payload).unwrap()
    }

    fn only(derived: &Derived, bounty_type: &str) -> Vec<Value> {
        derived.bounties.iter().filter(|b| b.bounty_type == bounty_type).map(payload).collect()
    }

    #[test]
    fn a_plain_line_yields_nothing() {
        let derived = derive(&line("smtp", "disconnect", r#"src_ip="192.168.1.5""#), at());
        assert_eq!(derived, Derived::default());
    }

    #[test]
    fn a_credential_and_its_bounty() {
        let l = line(
            "ssh",
            "auth_attempt",
            r#"src_ip="203.0.113.7" username="root" secret_printable="hunter2" secret_b64="aHVudGVyMg==" outcome="failure""#,
        );
        let derived = derive(&l, at());
        let credential = derived.credential.clone().unwrap();
        assert_eq!(
            credential,
            NewCredential {
                seen_at: at(),
                attacker_ip: "203.0.113.7".into(),
                decky: "omega-decky".into(),
                service: "ssh".into(),
                secret_kind: "plaintext".into(),
                // sha256("hunter2")
                secret_sha256: "f52fbd32b2b3b86ff88ef6c490628285f482af15ddcb29541f94bcf526a3f6c7".into(),
                principal: Some("root".into()),
                secret_printable: "hunter2".into(),
                secret_b64: "aHVudGVyMg==".into(),
                outcome: Some("failure".into()),
            }
        );
        let bounties = only(&derived, "credential");
        assert_eq!(bounties.len(), 1);
        assert_eq!(
            bounties[0],
            serde_json::json!({
                "principal": "root",
                "username": "root",
                "secret_kind": "plaintext",
                "secret_printable": "hunter2",
                "password": "hunter2",
                "secret_sha256": "f52fbd32b2b3b86ff88ef6c490628285f482af15ddcb29541f94bcf526a3f6c7",
            })
        );
        assert!(!derived.bounties[0].payload.contains("aHVudGVyMg"), "the raw secret stays out of the vault");
        assert_eq!(derived.bounties[0].attacker_ip, "203.0.113.7");
    }

    #[test]
    fn principal_kind_and_printable_rules() {
        // `principal` wins over `username`; DECNET's literal `None` is kept; kind as given.
        let bearer = line(
            "http",
            "auth_attempt",
            r#"src_ip="1.1.1.1" principal="None" username="u" secret_kind="http_bearer" secret_b64="dG9r""#,
        );
        let credential = derive(&bearer, at()).credential.unwrap();
        assert_eq!(credential.principal.as_deref(), Some("None"));
        assert_eq!(credential.secret_kind, "http_bearer");
        // No printable form sent: derived from the bytes; bytes outside 0x20..0x7f become `?`.
        assert_eq!(credential.secret_printable, "tok");
        let binary = line("vnc", "auth_attempt", r#"src_ip="1.1.1.1" secret_b64="AH9BIA==""#);
        let credential = derive(&binary, at()).credential.unwrap();
        assert_eq!(credential.secret_printable, "??A ");
        assert_eq!(credential.principal, None);
        assert_eq!(credential.outcome, None);
        // An empty principal falls back to username; an empty kind is plaintext.
        let empty = line("ftp", "auth_attempt", r#"principal="" username="bob" secret_kind="" secret_b64="""#);
        let credential = derive(&empty, at()).credential.unwrap();
        assert_eq!(credential.principal.as_deref(), Some("bob"));
        assert_eq!(credential.secret_kind, "plaintext");
        // The empty secret is a secret (an empty password was tried).
        assert_eq!(credential.secret_sha256, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    }

    #[test]
    fn bad_base64_gives_no_credential() {
        for bad in ["aGk", "aGk==", "a===", "aG k=", "aGk=\\n", "a-b_", "=aGk", "aGk=aGk=", "####", "YQ"] {
            let l = line("ssh", "auth_attempt", &format!(r#"src_ip="1.1.1.1" username="root" secret_b64="{bad}""#));
            let derived = derive(&l, at());
            assert_eq!(derived.credential, None, "{bad}");
            assert!(only(&derived, "credential").is_empty(), "{bad}");
        }
    }

    #[test]
    fn padding_variants_that_decode() {
        for (b64, secret) in [("", ""), ("YQ==", "a"), ("YWI=", "ab"), ("YWJj", "abc"), ("YR==", "a")] {
            let l = line("ssh", "auth_attempt", &format!(r#"secret_b64="{b64}""#));
            let credential = derive(&l, at()).credential.unwrap_or_else(|| panic!("{b64}"));
            assert_eq!(credential.secret_sha256, hex_sha256(secret.as_bytes()), "{b64}");
        }
    }

    #[test]
    fn long_values_are_capped_but_hashed_whole() {
        let secret = "é".repeat(1000);
        let b64 = base64::engine::general_purpose::STANDARD.encode(secret.as_bytes());
        assert!(b64.len() > SECRET_B64_MAX);
        let principal = "p".repeat(300);
        let l = line(
            "ssh",
            "auth_attempt",
            &format!(r#"username="{principal}" secret_printable="{secret}" secret_b64="{b64}""#),
        );
        let credential = derive(&l, at()).credential.unwrap();
        assert_eq!(credential.principal.unwrap().chars().count(), PRINCIPAL_MAX);
        assert_eq!(credential.secret_printable, "é".repeat(SECRET_PRINTABLE_MAX));
        assert_eq!(credential.secret_b64, b64[..SECRET_B64_MAX]);
        assert_eq!(credential.secret_sha256, hex_sha256(secret.as_bytes()));
    }

    #[test]
    fn sniffer_fingerprints() {
        let l = line(
            "sniffer",
            "tls_session",
            r#"src_ip="203.0.113.7" ja3="771,4865,0,29,0" ja3s="abc" ja4="t13d" tls_version="TLS 1.3" sni="" alpn="h2" dst_port="443" ja4l_rtt_ms="12.5" ja4l_client_ttl="64" resumption="session_ticket,psk""#,
        );
        let derived = derive(&l, at());
        let fps = only(&derived, "fingerprint");
        assert_eq!(
            fps,
            [
                serde_json::json!({"fingerprint_type": "ja3", "ja3": "771,4865,0,29,0", "ja3s": "abc", "ja4": "t13d",
                    "tls_version": "TLS 1.3", "alpn": "h2", "dst_port": "443"}),
                serde_json::json!({"fingerprint_type": "ja4l", "rtt_ms": "12.5", "client_ttl": "64"}),
                serde_json::json!({"fingerprint_type": "tls_resumption", "mechanisms": "session_ticket,psk"}),
            ]
        );
        assert!(derived.bounties.iter().all(|b| b.attacker_ip == "203.0.113.7" && b.service == "sniffer"));

        let cert = line(
            "sniffer",
            "tls_certificate",
            r#"src_ip="1.2.3.4" subject_cn="evil.example" issuer="CN=evil" self_signed="True""#,
        );
        assert_eq!(
            only(&derive(&cert, at()), "fingerprint"),
            [serde_json::json!({"fingerprint_type": "tls_certificate", "subject_cn": "evil.example",
                "issuer": "CN=evil", "self_signed": "True"})]
        );
        // Only the sniffer's lines are TLS fingerprints.
        assert!(derive(&line("http", "request", r#"ja3="x" resumption="psk""#), at()).bounties.is_empty());
    }

    #[test]
    fn prober_fingerprints_name_the_probed_host() {
        let l = line(
            "prober",
            "jarm_fingerprint",
            r#"src_ip="10.0.0.2" target_ip="198.51.100.7" target_port="443" jarm_hash="2ad2ad""#,
        );
        let derived = derive(&l, at());
        assert_eq!(derived.bounties.len(), 1);
        assert_eq!(derived.bounties[0].attacker_ip, "198.51.100.7");
        assert_eq!(
            payload(&derived.bounties[0]),
            serde_json::json!({"fingerprint_type": "jarm", "hash": "2ad2ad", "target_ip": "198.51.100.7", "target_port": "443"})
        );
        let hassh = line("prober", "hassh", r#"target_ip="198.51.100.7" hassh_server_hash="h" ssh_banner="SSH-2.0-x""#);
        assert_eq!(
            only(&derive(&hassh, at()), "fingerprint"),
            [serde_json::json!({"fingerprint_type": "hassh_server", "hash": "h", "target_ip": "198.51.100.7",
                "ssh_banner": "SSH-2.0-x"})]
        );
        let tcpfp =
            line("prober", "tcpfp", r#"target_ip="198.51.100.7" tcpfp_hash="t" tcpfp_raw="r" ttl="64" mss="1460""#);
        assert_eq!(
            only(&derive(&tcpfp, at()), "fingerprint"),
            [serde_json::json!({"fingerprint_type": "tcpfp", "hash": "t", "raw": "r", "target_ip": "198.51.100.7",
                "ttl": "64", "mss": "1460"})]
        );
        let icmp = line(
            "prober",
            "icmp6_error",
            r#"target_ip="fd00::2" target_port="33434" matrix="U..." fingerprint_hash="f" port_unreachable_v6_sent="true" port_unreachable_v6="true" port_unreachable_v6_code="4" port_unreachable_v6_from="fd00::2" port_unreachable_v6_echo_len="80" port_unreachable_v6_rtt_ms="1" hop_limit_exceeded_sent="true" hop_limit_exceeded="false""#,
        );
        let silent = |sent: bool| {
            serde_json::json!({"sent": sent, "returned": false, "icmp_code": null, "src_ip": null, "echo_len": null,
                "rtt_ms": null})
        };
        assert_eq!(
            only(&derive(&icmp, at()), "fingerprint"),
            [serde_json::json!({"fingerprint_type": "icmp6_error", "fp_hash": "f", "matrix": "U...",
            "target_ip": "fd00::2", "target_port": "33434",
            "errors": {
                "port_unreachable_v6": {"sent": true, "returned": true, "icmp_code": "4", "src_ip": "fd00::2",
                    "echo_len": "80", "rtt_ms": "1"},
                "hop_limit_exceeded": silent(true),
                "unknown_next_header": silent(false),
                "bad_dest_option": silent(false),
            }})]
        );
        let ssh =
            line("ssh", "ssh_client_banner", r#"src_ip="1.1.1.1" client_banner="SSH-2.0-Go" kex="curve25519-sha256""#);
        assert_eq!(
            only(&derive(&ssh, at()), "fingerprint"),
            [serde_json::json!({"fingerprint_type": "ssh_client", "banner": "SSH-2.0-Go", "kex": "curve25519-sha256"})]
        );
        let cert = line("prober", "tls_certificate", r#"target_ip="198.51.100.7" subject_cn="x""#);
        assert_eq!(derive(&cert, at()).bounties[0].attacker_ip, "198.51.100.7");
    }

    #[test]
    fn vnc_http_and_quic_fingerprints() {
        let vnc = line("vnc", "version", r#"src_ip="1.1.1.1" client_version="RFB 003.008""#);
        assert_eq!(
            only(&derive(&vnc, at()), "fingerprint"),
            [serde_json::json!({"fingerprint_type": "vnc_client_version", "value": "RFB 003.008"})]
        );
        assert!(derive(&line("vnc", "connect", r#"client_version="RFB 003.008""#), at()).bounties.is_empty());

        let ja4h = line(
            "http",
            "http_request_fingerprint",
            r#"remote_addr="1.1.1.1:5" proto="HTTP/1.1" method="GET" path="/x" ja4h="ge11nn05" cookie="a=b""#,
        );
        let derived = derive(&ja4h, at());
        assert_eq!(derived.bounties[0].attacker_ip, "1.1.1.1");
        assert_eq!(
            only(&derived, "fingerprint"),
            [serde_json::json!({"fingerprint_type": "ja4h", "ja4h": "ge11nn05", "proto": "HTTP/1.1"})]
        );

        let h2 =
            line("https", "http2_settings", r#"remote_addr="1.1.1.1" settings="{\"1\": 65536}" frame_order="[4, 8\]""#);
        assert_eq!(
            only(&derive(&h2, at()), "fingerprint"),
            [
                serde_json::json!({"fingerprint_type": "http2_settings", "settings": "{\"1\": 65536}", "frame_order": "[4, 8]"})
            ]
        );
        let h3 = line("https", "http3_settings", r#"settings="{}""#);
        assert_eq!(only(&derive(&h3, at()), "fingerprint")[0]["fingerprint_type"], "http3_settings");

        let quic =
            line("sniffer", "quic_client_hello", r#"src_ip="1.1.1.1" ja4_quic="q13d" sni="a.example" alpn="h3""#);
        assert_eq!(
            only(&derive(&quic, at()), "fingerprint"),
            [serde_json::json!({"fingerprint_type": "ja4_quic", "ja4_quic": "q13d", "sni": "a.example", "alpn": "h3"})]
        );
    }

    #[test]
    fn user_agent_fingerprint() {
        let l = line(
            "http",
            "request",
            r#"src_ip="1.1.1.1" method="GET" path="/admin" headers="{\"Host\": \"x\", \"user-agent\": \"curl/8.5.0\"}""#,
        );
        assert_eq!(
            only(&derive(&l, at()), "fingerprint"),
            [serde_json::json!({"fingerprint_type": "http_useragent", "value": "curl/8.5.0", "category": "cli",
                "tool": "curl", "signals": null, "method": "GET", "path": "/admin"})]
        );
        // An empty User-Agent counts; `User-Agent` wins over other casings.
        let empty = line("http", "request", r#"headers="{\"USER-AGENT\": \"x\", \"User-Agent\": \"\"}""#);
        assert_eq!(
            only(&derive(&empty, at()), "fingerprint"),
            [serde_json::json!({"fingerprint_type": "http_useragent", "value": "", "category": "empty", "tool": null,
                "signals": null})]
        );
        // No header, headers that are not a JSON object, a non-string value: nothing.
        for headers in [r#"{\"Host\": \"x\"}"#, "not json", r#"[\"User-Agent\"]"#, r#"{\"User-Agent\": 5}"#] {
            let l = line("http", "request", &format!(r#"headers="{headers}""#));
            assert!(derive(&l, at()).bounties.is_empty(), "{headers}");
        }
    }

    #[test]
    fn artifacts() {
        let file = line(
            "ssh",
            "file_captured",
            r#"src_ip="1.1.1.1" stored_as="ab12.bin" sha256="ab12" size="42" orig_path="/tmp/x" attribution="scp" writer_comm="scp" writer_pid="7""#,
        );
        assert_eq!(
            only(&derive(&file, at()), "artifact"),
            [serde_json::json!({"kind": "file", "stored_as": "ab12.bin", "sha256": "ab12", "size": "42",
                "orig_path": "/tmp/x", "attribution": "scp", "writer_comm": "scp"})]
        );
        let mail = line("smtp", "message_stored", r#"src_ip="1.1.1.1" stored_as="m1.eml" size="900""#);
        assert_eq!(
            only(&derive(&mail, at()), "artifact"),
            [serde_json::json!({"kind": "mail", "stored_as": "m1.eml", "size": "900"})]
        );
        assert!(derive(&line("ssh", "file_captured", r#"sha256="x""#), at()).bounties.is_empty());
        assert!(derive(&line("ssh", "other", r#"stored_as="x""#), at()).bounties.is_empty());
    }

    #[test]
    fn payloads_are_byte_identical_for_the_same_line_whatever_the_field_order() {
        let a = line(
            "sniffer",
            "tls_client_hello",
            r#"src_ip="1.1.1.1" ja3="j" ja4="k" sni="s" alpn="h2" headers="{\"User-Agent\": \"Mozilla/5.0\"}""#,
        );
        let b = line(
            "sniffer",
            "tls_client_hello",
            r#"headers="{\"User-Agent\": \"Mozilla/5.0\"}" alpn="h2" sni="s" ja4="k" ja3="j" src_ip="1.1.1.1""#,
        );
        let (first, again, reordered) = (derive(&a, at()), derive(&a, at()), derive(&b, at()));
        assert_eq!(first, again);
        let texts = |d: &Derived| d.bounties.iter().map(|b| b.payload.clone()).collect::<Vec<_>>();
        assert_eq!(texts(&first), texts(&reordered));
        assert_eq!(
            texts(&first)[1],
            r#"{"alpn":"h2","fingerprint_type":"ja3","ja3":"j","ja4":"k","sni":"s"}"#,
            "keys sorted, no whitespace"
        );
    }
}
