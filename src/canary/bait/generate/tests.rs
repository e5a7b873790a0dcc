//! Each kind's bait carries its callback where the client that trips it reads it, is the same for
//! the same seed and differs by token. The files' readers (PDF, Word, ssh-keygen, git, INI, XML)
//! check them in `tests/canary_generators.rs`.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

use super::*;
use crate::canary::bait::{CallbackToken, UnknownKind};

fn callback(token: &str) -> Callback {
    Callback::new("https://cdn.example.net", Some("t.example.net"), CallbackToken::parse(token).unwrap()).unwrap()
}

fn bait(kind: CanaryKind, callback: &Callback, seed: &[u8]) -> Bait {
    let persona = Persona::for_os(PersonaOs::Linux);
    generate(&BaitRequest { kind, callback, persona: &persona, seed, path: None }).unwrap()
}

fn text(file: &BaitFile) -> &str {
    std::str::from_utf8(&file.content).unwrap()
}

fn line_with<'a>(text: &'a str, start: &str) -> &'a str {
    text.lines().map(str::trim).find(|line| line.starts_with(start)).unwrap_or_else(|| panic!("no {start}: {text}"))
}

/// Every value written in base64 (`'…'` after `SET @b = `), decoded.
fn unwrapped_sql(dump: &str) -> String {
    let wrapped = line_with(dump, "SET @b = '").trim_start_matches("SET @b = '").trim_end_matches("';");
    String::from_utf8(STANDARD.decode(wrapped).unwrap()).unwrap()
}

#[test]
fn each_kind_carries_its_callback_where_its_client_reads_it() {
    let callback = callback("9f2c4e1a");
    let url = callback.url();
    let dns = callback.dns_name().unwrap();
    for kind in CanaryKind::ALL {
        let bait = bait(kind, &callback, b"seed");
        let file = &bait.file;
        match kind {
            CanaryKind::AwsCreds => {
                let endpoints: Vec<&str> = text(file).lines().filter(|line| line.starts_with("endpoint_url")).collect();
                assert_eq!(endpoints, [format!("endpoint_url = {url}"), format!("endpoint_url = {url}")]);
            }
            CanaryKind::EnvFile => {
                assert_eq!(line_with(text(file), "API_BASE_URL="), format!("API_BASE_URL={url}"));
                assert_eq!(line_with(text(file), "WEBHOOK_NOTIFY_URL="), format!("WEBHOOK_NOTIFY_URL={url}/webhook"));
            }
            CanaryKind::GitConfig => {
                let remote = text(file).split("[remote \"origin\"]").nth(1).unwrap();
                assert!(line_with(remote, "url = ").starts_with(&format!("url = {url}/")), "{remote}");
                assert!(line_with(remote, "url = ").ends_with(".git"));
                let head = bait.companions.iter().find(|f| f.path.ends_with("/.git/HEAD")).expect("HEAD");
                assert!(text(head).starts_with("ref: refs/heads/"));
            }
            CanaryKind::SshKey => {
                let config = &bait.companions[0];
                assert_eq!(config.path, "/home/admin/.ssh/config");
                assert_eq!(line_with(text(config), "HostName"), format!("HostName {dns}"));
                assert_eq!(line_with(text(config), "IdentityFile"), "IdentityFile ~/.ssh/id_ed25519");
                let body: String = text(file).lines().filter(|line| !line.starts_with("-----")).collect();
                let blob = STANDARD.decode(body).unwrap();
                assert!(blob.starts_with(b"openssh-key-v1\0"));
                assert!(blob.windows(dns.len()).any(|window| window == dns.as_bytes()), "the comment names {dns}");
            }
            CanaryKind::MysqlDump => {
                assert!(text(file).contains(&format!(",'invoice.paid','{url}',")));
                assert!(unwrapped_sql(text(file)).contains(&format!("SOURCE_HOST='{dns}'")));
                assert!(!text(file).contains(dns), "the name is only in the wrapped statement");
                assert!(text(file).contains("START REPLICA;"));
            }
            CanaryKind::Honeydoc => {
                assert!(text(file).contains(&format!("<img src=\"{url}\" width=\"1\" height=\"1\"")));
            }
            CanaryKind::HoneydocDocx => {
                let mut zip = zip::ZipArchive::new(std::io::Cursor::new(&file.content)).unwrap();
                let mut rels = String::new();
                std::io::Read::read_to_string(&mut zip.by_name("word/_rels/document.xml.rels").unwrap(), &mut rels)
                    .unwrap();
                assert!(rels.contains(&format!("/image\" Target=\"{url}\" TargetMode=\"External\"")), "{rels}");
            }
            CanaryKind::HoneydocPdf => {
                let pdf = String::from_utf8_lossy(&file.content);
                assert!(pdf.contains("/OpenAction 6 0 R"));
                assert!(pdf.contains(&format!("6 0 obj\n<< /Type /Action /S /URI /URI ({url}) >>")));
            }
            CanaryKind::FingerprintHtml => {
                assert!(text(file).contains(&format!("var u=\"{url}\"")));
                assert!(text(file).contains(&format!("<noscript><img src=\"{url}\"")));
            }
            CanaryKind::FingerprintSvg => {
                assert!(text(file).contains(&format!("var u=\"{url}\"")));
                assert!(text(file).contains(&format!("<image href=\"{url}\"")));
            }
        }
    }
}

#[test]
fn the_same_seed_gives_the_same_files_and_tokens_differ() {
    let first = callback("0a1b2c3d");
    let second = callback("4e5f6a7b");
    for kind in CanaryKind::ALL {
        assert_eq!(bait(kind, &first, b"one"), bait(kind, &first, b"one"), "{kind}");
        let (one, other) = (bait(kind, &first, b"one"), bait(kind, &second, b"one"));
        assert_ne!(one.file.content, other.file.content, "{kind}: a different token");
        let other_seed = bait(kind, &first, b"two");
        assert_ne!(one.file.content, other_seed.file.content, "{kind}: a different seed");
    }
}

#[test]
fn nothing_in_the_bait_gives_it_away() {
    let callback = callback("77aa55cc");
    for kind in CanaryKind::ALL {
        for seed in [&b"a"[..], b"b", b"c"] {
            for file in bait(kind, &callback, seed).files() {
                let content = String::from_utf8_lossy(&file.content).to_lowercase();
                for word in ["canary", "honeypot", "honey", "decnet", "bait", "decoy", "trap"] {
                    assert!(!content.contains(word), "{kind} {} says {word}", file.path);
                    assert!(!file.path.to_lowercase().contains(word), "{}", file.path);
                }
            }
        }
    }
}

#[test]
fn placement_follows_the_persona_or_the_request() {
    let callback = callback("abc123");
    let windows = Persona::for_os(PersonaOs::Windows);
    let request = |kind, path| BaitRequest { kind, callback: &callback, persona: &windows, seed: b"s", path };
    let env = generate(&request(CanaryKind::EnvFile, None)).unwrap();
    assert_eq!((env.file.path.as_str(), env.file.mode), ("/home/Administrator/Desktop/prod.env", 0o600));
    let ssh = generate(&request(CanaryKind::SshKey, Some("/opt/deploy/keys/prod"))).unwrap();
    assert_eq!(ssh.file.path, "/opt/deploy/keys/prod");
    assert_eq!(ssh.companions[0].path, "/home/Administrator/.ssh/config");
    assert!(text(&ssh.companions[0]).contains("IdentityFile /opt/deploy/keys/prod\n"));
    let git = generate(&request(CanaryKind::GitConfig, Some("/srv/app/.git/config"))).unwrap();
    let paths: Vec<&str> = git.companions.iter().map(|file| file.path.as_str()).collect();
    assert_eq!(
        paths,
        ["/srv/app/.git/HEAD", "/srv/app/.git/refs/remotes/origin/HEAD", "/srv/app/.git/objects/info/packs"]
    );
    for bad in ["relative", "/a/../b", "/a/b\nHost x", "/a/'b", "/dir/"] {
        assert_eq!(
            generate(&request(CanaryKind::EnvFile, Some(bad))),
            Err(GenerateError::BadPath(bad.to_string())),
            "{bad:?}"
        );
    }
}

#[test]
fn kinds_that_call_home_by_dns_need_a_zone() {
    let without = Callback::new("https://cdn.example.net", None, CallbackToken::parse("abc").unwrap()).unwrap();
    let persona = Persona::for_os(PersonaOs::Linux);
    for kind in CanaryKind::ALL {
        let made = generate(&BaitRequest { kind, callback: &without, persona: &persona, seed: b"s", path: None });
        if kind.needs_dns() {
            assert_eq!(made, Err(GenerateError::NeedsDnsZone(kind)));
        } else {
            assert!(made.is_ok(), "{kind}");
        }
    }
}

#[test]
fn kinds_travel_as_decnets_generator_names() {
    for kind in CanaryKind::ALL {
        assert_eq!(serde_json::to_value(kind).unwrap(), kind.as_str());
        assert_eq!(serde_json::from_value::<CanaryKind>(kind.as_str().into()).unwrap(), kind);
        assert_eq!(kind.as_str().parse::<CanaryKind>().unwrap(), kind);
    }
    let names: Vec<&str> = CanaryKind::ALL.iter().map(|kind| kind.as_str()).collect();
    assert_eq!(
        names,
        [
            "aws_creds",
            "env_file",
            "git_config",
            "ssh_key",
            "mysql_dump",
            "honeydoc",
            "honeydoc_docx",
            "honeydoc_pdf",
            "fingerprint_html",
            "fingerprint_svg"
        ]
    );
    assert!(matches!("pdf".parse::<CanaryKind>(), Err(UnknownKind(_))));
}
