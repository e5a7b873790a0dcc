//! The canary baits read by the programs an attacker would open them with: poppler (`pdftotext`,
//! `pdfinfo`) for the PDF, python-docx for the Word file, `ssh-keygen` and `ssh -G` for the key and
//! its configuration, git for the repository (whose `ls-remote` really requests the callback, here
//! a listener on loopback), Python's INI and XML parsers, and `sh` sourcing the `.env`. `scripts/test`
//! installs the tools (`ensure_canary_test_tools` in `scripts/lib.sh`).

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use svc::canary::{Bait, BaitRequest, Callback, CallbackToken, CanaryKind, Persona, PersonaOs, generate};

const INSTALL: &str = "scripts/test installs it: ensure_canary_test_tools in scripts/lib.sh";

fn callback(base: &str) -> Callback {
    Callback::new(base, Some("t.example.net"), CallbackToken::random().unwrap()).unwrap()
}

/// The bait's files written under `root` (their absolute paths below it, with their modes); the path
/// of the bait itself.
fn plant(root: &Path, bait: &Bait) -> PathBuf {
    for file in bait.files() {
        let path = root.join(file.path.trim_start_matches('/'));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &file.content).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(file.mode)).unwrap();
    }
    root.join(bait.file.path.trim_start_matches('/'))
}

fn made(kind: CanaryKind, callback: &Callback) -> (tempfile::TempDir, PathBuf, Bait) {
    let persona = Persona::for_os(PersonaOs::Linux);
    let bait = generate(&BaitRequest { kind, callback, persona: &persona, seed: b"reader test", path: None }).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = plant(dir.path(), &bait);
    (dir, path, bait)
}

/// Runs a reader; a missing program fails the test saying what to install.
fn run(program: &str, args: &[&str], package: &str) -> Output {
    let output = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program} could not run ({e}): install {package}; {INSTALL}"));
    assert!(
        output.status.success(),
        "{program} {args:?} failed (is {package} installed? {INSTALL}):\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

fn python(program: &str, args: &[&str], package: &str) -> String {
    let all: Vec<&str> = ["-c", program].into_iter().chain(args.iter().copied()).collect();
    String::from_utf8(run("python3", &all, package).stdout).unwrap()
}

fn text(path: &Path) -> &str {
    path.to_str().unwrap()
}

#[test]
fn the_pdf_opens_in_poppler_and_shows_the_callback() {
    let callback = callback("https://cdn.example.net");
    let (_dir, path, _) = made(CanaryKind::HoneydocPdf, &callback);
    let info = run("pdfinfo", &[text(&path)], "poppler-utils");
    assert!(info.stderr.is_empty(), "pdfinfo complained: {}", String::from_utf8_lossy(&info.stderr));
    let info = String::from_utf8(info.stdout).unwrap();
    assert!(info.lines().any(|line| line.starts_with("Pages:") && line.ends_with(" 1")), "{info}");
    assert!(info.contains("Operations Review"), "{info}");
    let extracted = run("pdftotext", &["-layout", text(&path), "-"], "poppler-utils");
    assert!(extracted.stderr.is_empty(), "pdftotext complained: {}", String::from_utf8_lossy(&extracted.stderr));
    let extracted = String::from_utf8(extracted.stdout).unwrap();
    assert!(extracted.contains(callback.url()), "{extracted}");
    assert!(extracted.contains("Availability"), "{extracted}");
}

#[test]
fn the_word_document_opens_in_python_docx_with_the_callback_linked() {
    let callback = callback("https://cdn.example.net");
    let (_dir, path, _) = made(CanaryKind::HoneydocDocx, &callback);
    let read = python(
        "import sys, docx\n\
         d = docx.Document(sys.argv[1])\n\
         print('\\n'.join(p.text for p in d.paragraphs))\n\
         for t in d.tables:\n    print(' | '.join(c.text for c in t.rows[1].cells))\n\
         for r in d.part.rels.values():\n    print('REL', r.reltype.rsplit('/', 1)[1], r.is_external, r.target_ref)\n\
         print('AUTHOR', d.core_properties.author)",
        &[text(&path)],
        "python-docx (pip)",
    );
    let url = callback.url();
    assert!(read.lines().any(|line| line.ends_with(url) && line.starts_with("Live figures")), "{read}");
    assert!(read.contains(&format!("REL image True {url}\n")), "{read}");
    assert!(read.contains(&format!("REL hyperlink True {url}\n")), "{read}");
    assert!(read.contains(" | "), "a table row: {read}");
    assert!(!read.contains("AUTHOR \n") && !read.contains("AUTHOR None"), "{read}");
}

#[test]
fn the_ssh_key_is_a_real_key_and_its_host_is_the_callback_name() {
    let callback = callback("https://cdn.example.net");
    let dns = callback.dns_name().unwrap();
    let (dir, path, bait) = made(CanaryKind::SshKey, &callback);
    let public = String::from_utf8(run("ssh-keygen", &["-y", "-f", text(&path)], "openssh-client").stdout).unwrap();
    assert!(public.starts_with("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAA"), "{public}");
    let fingerprint =
        String::from_utf8(run("ssh-keygen", &["-l", "-f", text(&path)], "openssh-client").stdout).unwrap();
    assert!(
        fingerprint.starts_with("256 SHA256:") && fingerprint.contains(&format!("@{dns} (ED25519)")),
        "{fingerprint}"
    );

    let config = dir.path().join(bait.companions[0].path.trim_start_matches('/'));
    let resolved = |host: &str| {
        String::from_utf8(run("ssh", &["-G", "-F", text(&config), host], "openssh-client").stdout).unwrap()
    };
    let bastion = resolved("bastion");
    assert!(bastion.lines().any(|line| line == format!("hostname {dns}")), "{bastion}");
    assert!(bastion.contains("identityfile ~/.ssh/id_ed25519"), "{bastion}");
    // Any host under the organisation's internal domain (`Host *.{short}.internal`) jumps through it.
    let config_text = std::str::from_utf8(&bait.companions[0].content).unwrap();
    let pattern = config_text.lines().find_map(|line| line.strip_prefix("Host *.")).expect("a wildcard host");
    let internal = resolved(&format!("db01.{pattern}"));
    assert!(internal.lines().any(|line| line == "proxyjump bastion"), "{internal}");
}

#[test]
fn the_git_repository_asks_the_callback_for_its_refs() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let callback = callback(&format!("http://{}", listener.local_addr().unwrap()));
    let (_dir, path, _) = made(CanaryKind::GitConfig, &callback);
    let repository = path.parent().unwrap().parent().unwrap();
    let git_dir = run("git", &["-C", text(repository), "rev-parse", "--git-dir"], "git");
    assert_eq!(String::from_utf8(git_dir.stdout).unwrap().trim(), ".git", "git takes it for a repository");
    let remote = run("git", &["-C", text(repository), "remote", "get-url", "origin"], "git");
    assert!(String::from_utf8(remote.stdout).unwrap().starts_with(&format!("{}/", callback.url())));

    let server = std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let mut request_line = String::new();
        BufReader::new(&stream).read_line(&mut request_line).unwrap();
        (&stream).write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").unwrap();
        request_line
    });
    let fetch = Command::new("git")
        .args(["-C", text(repository), "ls-remote", "origin"])
        .env("GIT_TERMINAL_PROMPT", "0")
        .output()
        .unwrap_or_else(|e| panic!("git could not run ({e}); {INSTALL}"));
    assert!(!fetch.status.success(), "the callback answers 404");
    let request_line = server.join().unwrap();
    let expected = format!("GET /c/{}/", callback.token());
    assert!(request_line.starts_with(&expected) && request_line.contains("/info/refs?service=git-upload-pack"));
}

#[test]
fn the_aws_credentials_read_as_ini_with_aws_shaped_keys() {
    let callback = callback("https://cdn.example.net");
    let (_dir, path, _) = made(CanaryKind::AwsCreds, &callback);
    let read = python(
        "import sys, re, configparser\n\
         c = configparser.ConfigParser()\n\
         c.read(sys.argv[1])\n\
         for s in c.sections():\n\
         \x20   p = c[s]\n\
         \x20   assert re.fullmatch('AKIA[A-Z0-9]{16}', p['aws_access_key_id']), p['aws_access_key_id']\n\
         \x20   assert re.fullmatch('[A-Za-z0-9+/]{40}', p['aws_secret_access_key'])\n\
         \x20   print(s, p['region'], p['endpoint_url'])",
        &[text(&path)],
        "python3",
    );
    let profiles: Vec<&str> = read.lines().collect();
    assert_eq!(profiles.len(), 2, "{read}");
    assert!(profiles[0].starts_with("default "), "{read}");
    assert!(profiles.iter().all(|line| line.ends_with(&format!(" {}", callback.url()))), "{read}");
}

#[test]
fn the_env_file_sources_in_a_shell_with_the_callback_as_api_base() {
    let callback = callback("https://cdn.example.net");
    let (_dir, path, _) = made(CanaryKind::EnvFile, &callback);
    let read =
        run("sh", &["-c", "set -a; . \"$1\"; echo \"$API_BASE_URL $WEBHOOK_NOTIFY_URL\"", "sh", text(&path)], "dash");
    let url = callback.url();
    assert_eq!(String::from_utf8(read.stdout).unwrap(), format!("{url} {url}/webhook\n"));
}

#[test]
fn the_svg_and_html_pages_parse_with_their_beacons() {
    let callback = callback("https://cdn.example.net");
    let url = callback.url();
    let (_dir, svg, _) = made(CanaryKind::FingerprintSvg, &callback);
    let read = python(
        "import sys, xml.etree.ElementTree as E\n\
         n = '{http://www.w3.org/2000/svg}'\n\
         root = E.parse(sys.argv[1]).getroot()\n\
         assert root.tag == n + 'svg', root.tag\n\
         print(root.find(n + 'image').get('href'))\n\
         print(root.find(n + 'script').text.strip())",
        &[text(&svg)],
        "python3",
    );
    assert!(read.starts_with(&format!("{url}\n(function(){{var u=\"{url}\"")), "{read}");

    for kind in [CanaryKind::Honeydoc, CanaryKind::FingerprintHtml] {
        let (_dir, html, _) = made(kind, &callback);
        let read = python(
            "import sys, html.parser\n\
             class P(html.parser.HTMLParser):\n\
             \x20   def handle_starttag(self, tag, attrs):\n\
             \x20       a = dict(attrs)\n\
             \x20       if tag in ('img', 'a'): print(tag, a.get('src') or a.get('href'))\n\
             \x20   def handle_data(self, data):\n\
             \x20       if 'Image()' in data: print('script', data.split('\"')[1])\n\
             P().feed(open(sys.argv[1]).read())",
            &[text(&html)],
            "python3",
        );
        let expected = match kind {
            CanaryKind::Honeydoc => format!("a {url}\nimg {url}\n"),
            _ => format!("script {url}\nimg {url}\n"),
        };
        assert_eq!(read, expected, "{kind}");
    }
}
