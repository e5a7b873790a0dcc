//! The HTTP and HTTPS decoys against real clients (`curl`, `openssl`, raw sockets) on loopback: what
//! the client sees, the lines written (parsed back with `svc_core::logline`), and what the ingester
//! derives from them (credentials, the `http_useragent` fingerprint). Hostile input (a 1 MB header,
//! a 1 MB body, TLS noise, a stalled head) is refused without taking the decoy down.

use std::net::SocketAddr;
use std::process::Stdio;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use chrono::Utc;
use sha2::{Digest, Sha256};
use svc_core::logline::LogLine;
use svc_decoy::session::Limits;
use svc_workers::ingest::derive::derive;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

mod common;
use common::{Loopback, service};

const DECKY: &str = "web-01";
/// The HTTPS service's `hostname` setting: what its certificate names.
const TLS_NAME: &str = "intranet.corp.local";

/// A decky serving `http` (no settings) and `https` (`hostname` set) on free loopback ports.
struct Running {
    decky: Loopback,
    http: SocketAddr,
    https: SocketAddr,
}

impl Running {
    async fn start(limits: Limits) -> Running {
        let services = [service("http", &[]), service("https", &[("hostname", TLS_NAME)])];
        let decky = Loopback::start(DECKY, &services, limits).await;
        Running { http: decky.address("http"), https: decky.address("https"), decky }
    }

    /// Every line so far, parsed.
    fn parsed(&self) -> Vec<LogLine> {
        self.decky.parsed()
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.http)
    }

    fn tls_url(&self, path: &str) -> String {
        format!("https://{}{path}", self.https)
    }

    /// The first line matching `wanted`, waiting up to 5 s for it.
    async fn wait_for(&self, what: &str, wanted: impl Fn(&LogLine) -> bool) -> LogLine {
        for _ in 0..250 {
            if let Some(line) = self.parsed().into_iter().find(&wanted) {
                return line;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("no {what} line; lines:\n{}", self.decky.lines.all().join("\n"));
    }

    /// The `event` line of `service` whose `path` is `path`.
    async fn event(&self, service: &str, event: &str, path: &str) -> LogLine {
        self.wait_for(&format!("{service} {event} {path}"), |l| {
            l.service == service && l.event_type == event && l.field("path") == Some(path)
        })
        .await
    }

    async fn auth_attempt(&self, service: &str, principal: &str) -> LogLine {
        self.wait_for(&format!("{service} auth_attempt {principal}"), |l| {
            l.service == service && l.event_type == "auth_attempt" && l.field("principal") == Some(principal)
        })
        .await
    }

    async fn stop(self) {
        self.decky.stop().await;
    }
}

/// What a command printed.
struct Output {
    ok: bool,
    stdout: String,
    stderr: String,
}

async fn run(program: &str, args: &[&str]) -> Output {
    let child = tokio::process::Command::new(program).args(args).stdin(Stdio::null()).kill_on_drop(true).output();
    let output = tokio::time::timeout(Duration::from_secs(15), child).await.unwrap().unwrap();
    Output {
        ok: output.status.success(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// `curl` with a time limit, silent but for errors.
async fn curl(args: &[&str]) -> Output {
    let mut all = vec!["--max-time", "10", "-sS"];
    all.extend_from_slice(args);
    run("curl", &all).await
}

/// The status code of one request.
async fn status(args: &[&str]) -> String {
    let mut all = vec!["-o", "/dev/null", "-w", "%{http_code}"];
    all.extend_from_slice(args);
    curl(&all).await.stdout
}

/// The User-Agent this machine's curl sends: `curl/<version>`.
async fn curl_user_agent() -> String {
    let version = run("curl", &["--version"]).await.stdout;
    let number = version.split_whitespace().nth(1).unwrap();
    format!("curl/{number}")
}

fn headers(line: &LogLine) -> serde_json::Map<String, serde_json::Value> {
    serde_json::from_str(line.field("headers").unwrap()).unwrap()
}

/// The fingerprint bounties the ingester derives from `line`, as JSON objects.
fn fingerprints(line: &LogLine) -> Vec<serde_json::Value> {
    derive(line, Utc::now())
        .bounties
        .into_iter()
        .filter(|b| b.bounty_type == "fingerprint")
        .map(|b| serde_json::from_str(&b.payload).unwrap())
        .collect()
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

#[tokio::test]
async fn the_root_shows_a_login_page_and_the_request_is_logged() {
    let decky = Running::start(Limits::default()).await;
    let agent = curl_user_agent().await;

    let page = curl(&["-i", &decky.url("/")]).await;
    assert!(page.ok, "{}", page.stderr);
    assert!(page.stdout.starts_with("HTTP/1.1 200 OK\r\n"), "{}", page.stdout);
    assert!(page.stdout.contains("\r\nServer: Apache/2.4.52 (Ubuntu)\r\n"), "{}", page.stdout);
    assert!(page.stdout.contains("\r\nContent-Type: text/html; charset=UTF-8\r\n"));
    assert!(page.stdout.contains(r#"<form method="post" action="/login">"#));
    assert!(page.stdout.contains(r#"name="username""#) && page.stdout.contains(r#"name="password" type="password""#));
    assert!(page.stdout.contains(&format!("<h1>{DECKY}</h1>")), "the page names the decky");

    let line = decky.event("http", "request", "/").await;
    assert_eq!((line.decky.as_str(), line.service.as_str(), line.event_type.as_str()), (DECKY, "http", "request"));
    assert_eq!(line.field("method"), Some("GET"));
    assert_eq!(line.field("version"), Some("HTTP/1.1"));
    assert_eq!(line.field("status"), Some("200"));
    assert_eq!(line.field("user_agent"), Some(agent.as_str()));
    assert_eq!(line.field("src_ip"), Some("127.0.0.1"));
    assert_eq!(line.attacker_ip, "127.0.0.1");
    assert!(line.field("src_port").unwrap().parse::<u16>().is_ok());
    let headers = headers(&line);
    assert_eq!(headers["user-agent"], agent.as_str());
    assert_eq!(headers["host"], decky.http.to_string().as_str());
    assert_eq!(headers["accept"], "*/*");

    // The ingester's reading: a `http_useragent` fingerprint naming curl.
    let fingerprint = fingerprints(&line).into_iter().find(|f| f["fingerprint_type"] == "http_useragent").unwrap();
    assert_eq!(fingerprint["value"], agent.as_str());
    assert_eq!(fingerprint["tool"], "curl");
    assert_eq!(fingerprint["category"], "cli");
    assert_eq!((&fingerprint["method"], &fingerprint["path"]), (&"GET".into(), &"/".into()));
    decky.stop().await;
}

#[tokio::test]
async fn probe_paths_get_plausible_answers_over_one_kept_alive_connection() {
    let decky = Running::start(Limits::default()).await;
    let paths = ["/robots.txt", "/wp-login.php", "/admin", "/.env", "/phpmyadmin/", "/cgi-bin/x?a=1&b=%00"];
    let mut args = vec!["-w".to_string(), "%{http_code} %{num_connects}\n".to_string()];
    for path in paths {
        args.extend(["-o".to_string(), "/dev/null".to_string(), decky.url(path)]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = curl(&args).await;
    assert!(out.ok, "{}", out.stderr);
    // One connection made, then reused (`num_connects` 0) for every later request.
    assert_eq!(out.stdout, "200 1\n200 0\n403 0\n404 0\n401 0\n404 0\n");
    for (path, status) in paths.iter().zip(["200", "200", "403", "404", "401", "404"]) {
        let line = decky.event("http", "request", path).await;
        assert_eq!(line.field("status"), Some(status), "{path}");
    }
    let connects = decky.parsed().iter().filter(|l| l.event_type == "connect").count();
    assert_eq!(connects, 1);

    let robots = curl(&[&decky.url("/robots.txt")]).await.stdout;
    assert!(robots.starts_with("User-agent: *\n"));
    let forbidden = curl(&["-i", &decky.url("/admin")]).await.stdout;
    assert!(forbidden.contains("<h1>Forbidden</h1>"));
    assert!(
        forbidden.contains(&format!("<address>Apache/2.4.52 (Ubuntu) Server at {DECKY} Port {}", decky.http.port()))
    );
    // hyper writes header names in title case (`Www-Authenticate`); clients read them in any case.
    let protected = curl(&["-i", &decky.url("/phpmyadmin/")]).await.stdout.to_ascii_lowercase();
    assert!(protected.contains("\r\nwww-authenticate: basic realm=\"phpmyadmin\"\r\n"), "{protected}");
    let wordpress = curl(&[&decky.url("/wp-login.php")]).await.stdout;
    assert!(wordpress.contains(r#"name="password""#));
    assert_eq!(status(&["-X", "DELETE", &decky.url("/")]).await, "405");
    decky.stop().await;
}

#[tokio::test]
async fn a_posted_login_form_is_an_auth_attempt() {
    let decky = Running::start(Limits::default()).await;
    let page = curl(&["-d", "username=admin&password=s3cr%21t", &decky.url("/login")]).await;
    assert!(page.stdout.contains("Invalid username or password."), "{}", page.stdout);
    assert!(page.stdout.contains(r#"<form method="post" action="/login">"#));

    let request = decky.event("http", "request", "/login").await;
    assert_eq!(request.field("method"), Some("POST"));
    assert_eq!(request.field("status"), Some("200"));
    assert_eq!(request.field("body"), Some("username=admin&password=s3cr%21t"));
    assert_eq!(headers(&request)["content-type"], "application/x-www-form-urlencoded");

    let attempt = decky.auth_attempt("http", "admin").await;
    assert_eq!((attempt.decky.as_str(), attempt.event_type.as_str()), (DECKY, "auth_attempt"));
    assert_eq!(attempt.field("username"), Some("admin"));
    assert_eq!(attempt.field("secret_kind"), Some("plaintext"));
    assert_eq!(attempt.field("secret_b64"), Some(STANDARD.encode("s3cr!t").as_str()));
    assert_eq!(attempt.field("secret_printable"), Some("s3cr!t"));
    assert_eq!(attempt.field("outcome"), Some("failure"));
    assert_eq!(attempt.field("src_ip"), Some("127.0.0.1"));
    let credential = derive(&attempt, Utc::now()).credential.unwrap();
    assert_eq!(credential.principal.as_deref(), Some("admin"));
    assert_eq!(credential.secret_sha256, sha256_hex(b"s3cr!t"));
    assert_eq!((credential.service.as_str(), credential.decky.as_str()), ("http", DECKY));

    // WordPress's field names, bytes that are not UTF-8 kept as sent.
    curl(&["-d", "log=wp+user&pwd=p%E4ss&wp-submit=Log+In", &decky.url("/wp-login.php")]).await;
    let attempt = decky.auth_attempt("http", "wp user").await;
    assert_eq!(attempt.field("secret_b64"), Some(STANDARD.encode(b"p\xe4ss").as_str()));
    assert_eq!(attempt.field("secret_printable"), Some("p?ss"));

    // A form posted elsewhere, or not urlencoded, is no attempt.
    curl(&["-d", "username=x&password=y", &decky.url("/search")]).await;
    curl(&["-F", "username=z", "-F", "password=w", &decky.url("/login")]).await;
    decky.event("http", "request", "/search").await;
    let posts = decky.parsed().iter().filter(|l| l.field("method") == Some("POST")).count();
    assert_eq!(posts, 4);
    let attempts = decky.parsed().iter().filter(|l| l.event_type == "auth_attempt").count();
    assert_eq!(attempts, 2);
    decky.stop().await;
}

#[tokio::test]
async fn https_serves_the_same_site_with_a_self_signed_certificate_for_the_hostname() {
    let decky = Running::start(Limits::default()).await;
    let page = curl(&["-k", "-v", &decky.tls_url("/")]).await;
    assert!(page.ok, "{}", page.stderr);
    assert!(page.stdout.contains(r#"<form method="post" action="/login">"#));
    assert!(page.stdout.contains(&format!("<h1>{TLS_NAME}</h1>")));
    assert!(page.stderr.contains(&format!("subject: CN={TLS_NAME}")), "{}", page.stderr);
    assert!(page.stderr.contains(&format!("issuer: CN={TLS_NAME}")));
    assert!(page.stderr.contains("ALPN: server accepted http/1.1"), "{}", page.stderr);
    assert!(page.stderr.contains("< Server: Apache/2.4.52 (Ubuntu)"));
    // Without `-k` the certificate is refused: nobody vouches for it.
    let strict = curl(&[&decky.tls_url("/")]).await;
    assert!(!strict.ok && strict.stderr.contains("certificate"), "{}", strict.stderr);

    let line = decky.event("https", "request", "/").await;
    assert_eq!((line.decky.as_str(), line.service.as_str()), (DECKY, "https"));
    assert_eq!(line.field("status"), Some("200"));
    assert_eq!(line.field("src_ip"), Some("127.0.0.1"));

    curl(&["-k", "-d", "username=admin&password=s3cr%21t", &decky.tls_url("/login")]).await;
    let attempt = decky.auth_attempt("https", "admin").await;
    assert_eq!(attempt.field("secret_b64"), Some(STANDARD.encode("s3cr!t").as_str()));

    // The certificate as openssl reads it: self-signed (it verifies against itself), for the name.
    let hello = run("openssl", &["s_client", "-connect", &decky.https.to_string(), "-servername", TLS_NAME]).await;
    let begin = hello.stdout.find("-----BEGIN CERTIFICATE-----").expect("openssl shows the certificate");
    let end = hello.stdout.find("-----END CERTIFICATE-----").unwrap() + "-----END CERTIFICATE-----".len();
    let dir = tempfile::tempdir().unwrap();
    let pem = dir.path().join("cert.pem");
    std::fs::write(&pem, format!("{}\n", &hello.stdout[begin..end])).unwrap();
    let pem = pem.to_str().unwrap();
    let cert = run("openssl", &["x509", "-in", pem, "-noout", "-subject", "-issuer", "-ext", "subjectAltName"]).await;
    assert!(cert.stdout.contains(&format!("subject=CN = {TLS_NAME}")), "{}", cert.stdout);
    assert!(cert.stdout.contains(&format!("issuer=CN = {TLS_NAME}")));
    assert!(cert.stdout.contains(&format!("DNS:{TLS_NAME}")));
    let verified = run("openssl", &["verify", "-CAfile", pem, pem]).await;
    assert!(verified.ok && verified.stdout.contains(": OK"), "{}{}", verified.stdout, verified.stderr);
    decky.stop().await;
}

#[tokio::test]
async fn authorization_headers_are_auth_attempts() {
    let decky = Running::start(Limits::default()).await;
    assert_eq!(status(&["-u", "bob:hunter 2", &decky.url("/phpmyadmin/")]).await, "401");
    let attempt = decky.auth_attempt("http", "bob").await;
    assert_eq!(attempt.field("secret_kind"), Some("plaintext"));
    assert_eq!(attempt.field("secret_b64"), Some(STANDARD.encode("hunter 2").as_str()));
    assert_eq!(attempt.field("outcome"), Some("failure"));
    let credential = derive(&attempt, Utc::now()).credential.unwrap();
    assert_eq!(credential.secret_sha256, sha256_hex(b"hunter 2"));

    assert_eq!(status(&["-H", "Authorization: Bearer tok-123", &decky.url("/api/v1/users")]).await, "404");
    let attempt = decky
        .wait_for("bearer", |l| l.event_type == "auth_attempt" && l.field("secret_kind") == Some("http_bearer"))
        .await;
    assert_eq!(attempt.field("principal"), Some(""));
    assert_eq!(attempt.field("secret_b64"), Some(STANDARD.encode("tok-123").as_str()));
    assert_eq!(attempt.field("outcome"), None, "the page asked for no credential");
    let credential = derive(&attempt, Utc::now()).credential.unwrap();
    assert_eq!(credential.secret_kind, "http_bearer");
    assert_eq!(credential.secret_printable, "tok-123");
    decky.stop().await;
}

/// Writes `request` on a fresh connection to `address` while reading what comes back (at most
/// 64 KiB, until the server closes or 10 s pass): a refusing server may close before the writer is
/// done, so the write's failure is no failure here.
async fn send_raw(address: SocketAddr, request: Vec<u8>) -> Vec<u8> {
    let stream = TcpStream::connect(address).await.unwrap();
    let (mut reader, mut writer) = stream.into_split();
    let writing = tokio::spawn(async move {
        let _ = writer.write_all(&request).await;
        writer
    });
    let mut answer = Vec::new();
    let mut chunk = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while answer.len() < 64 * 1024 {
        match tokio::time::timeout_at(deadline, reader.read(&mut chunk)).await {
            Ok(Ok(n)) if n > 0 => answer.extend_from_slice(&chunk[..n]),
            Ok(_) => break,
            Err(_) => panic!("the server kept the connection open"),
        }
    }
    writing.abort();
    answer
}

/// The status line of an answer, if one arrived.
fn status_line(answer: &[u8]) -> String {
    String::from_utf8_lossy(answer).lines().next().unwrap_or("").to_string()
}

#[tokio::test]
async fn oversized_heads_and_bodies_and_tls_noise_are_refused_and_the_decoy_stays_up() {
    let decky = Running::start(Limits::default()).await;
    let megabyte = 1 << 20;

    // A 1 MB header line: hyper answers 431 (unless the reset beats it) and the head is logged.
    let mut request = b"GET /big-header HTTP/1.1\r\nHost: x\r\nX-Fill: ".to_vec();
    request.extend(std::iter::repeat_n(b'a', megabyte));
    request.extend_from_slice(b"\r\n\r\n");
    let answer = send_raw(decky.http, request).await;
    let line = status_line(&answer);
    assert!(line.is_empty() || line.starts_with("HTTP/1.1 431"), "{line}");
    let refused = decky.wait_for("bad_request", |l| l.event_type == "bad_request").await;
    assert!(refused.field("error").unwrap().contains("too large"), "{:?}", refused.field("error"));
    assert_eq!(refused.field("src_ip"), Some("127.0.0.1"));

    // A declared 1 MB body: 413 before it is sent (curl waits on `Expect: 100-continue`).
    let dir = tempfile::tempdir().unwrap();
    let body = dir.path().join("body");
    std::fs::write(&body, format!("username=admin&password={}", "x".repeat(megabyte))).unwrap();
    let upload = format!("@{}", body.display());
    assert_eq!(status(&["--data-binary", &upload, &decky.url("/login")]).await, "413");
    let line = decky.event("http", "request", "/login").await;
    assert_eq!(line.field("status"), Some("413"));
    assert_eq!(line.field("body"), None);

    // A chunked 1 MB body, no length announced: cut off at the limit.
    let mut request = b"POST /login HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\
        Content-Type: application/x-www-form-urlencoded\r\n\r\n"
        .to_vec();
    for _ in 0..256 {
        request.extend_from_slice(b"1000\r\n");
        request.extend(std::iter::repeat_n(b'p', 4096));
        request.extend_from_slice(b"\r\n");
    }
    request.extend_from_slice(b"0\r\n\r\n");
    let answer = send_raw(decky.http, request).await;
    let line = status_line(&answer);
    assert!(line.is_empty() || line.starts_with("HTTP/1.1 413"), "{line}");
    decky
        .wait_for("chunked 413", |l| {
            l.field("status") == Some("413") && l.field("headers").is_some_and(|h| h.contains("chunked"))
        })
        .await;
    assert!(!decky.parsed().iter().any(|l| l.event_type == "auth_attempt"), "no credential from a refused body");

    // Binary noise to the HTTP port: 400.
    let noise: Vec<u8> = (0..4096u32).map(|n| (n.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    let answer = send_raw(decky.http, noise.clone()).await;
    let line = status_line(&answer);
    assert!(line.is_empty() || line.starts_with("HTTP/1.1 400"), "{line}");

    // Noise, and plain HTTP, to the HTTPS port: the handshake fails and says why.
    let mut noise = noise.repeat(16);
    noise[0] = 0x16; // a TLS handshake record's type, then nonsense
    send_raw(decky.https, noise).await;
    send_raw(decky.https, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()).await;
    decky.wait_for("tls_error", |l| l.service == "https" && l.event_type == "tls_error").await;

    // Every refused connection has ended; both services still answer.
    assert_eq!(status(&[&decky.url("/")]).await, "200");
    assert_eq!(status(&["-k", &decky.tls_url("/")]).await, "200");
    decky.stop().await;
}

#[tokio::test]
async fn a_head_that_never_ends_is_dropped_after_the_idle_time() {
    let limits = Limits { idle: Duration::from_millis(300), ..Limits::default() };
    let decky = Running::start(limits).await;
    for address in [decky.http, decky.https] {
        let mut stream = TcpStream::connect(address).await.unwrap();
        if address == decky.http {
            stream.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n").await.unwrap();
        }
        let mut rest = Vec::new();
        // Closed well within the test's patience, with nothing answered for the stalled request.
        tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut rest)).await.unwrap().ok();
        assert!(!String::from_utf8_lossy(&rest).contains("200 OK"));
    }
    decky.wait_for("http disconnect", |l| l.service == "http" && l.event_type == "disconnect").await;
    decky.wait_for("https disconnect", |l| l.service == "https" && l.event_type == "disconnect").await;
    decky.stop().await;
}
