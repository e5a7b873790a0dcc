//! The SSH decoy against a real SSH client (russh's) on 127.0.0.1: what the attacker sees (banner,
//! logins, the fake shell) and the lines the decky writes about it.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use russh::client::{self, AuthResult, Handle};
use russh::keys::ssh_key::private::Ed25519Keypair;
use russh::keys::{PrivateKey, PrivateKeyWithHashAlg, PublicKeyOrCertificate};
use russh::{ChannelMsg, Preferred, SshId, kex};
use svc_core::logline::{LogLine, parse_shell_command};
use svc_decoy::session::Limits;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

mod common;
use common::{Loopback, service};

const DECKY: &str = "web-01";
/// How long a test waits for anything before it fails.
const WAIT: Duration = Duration::from_secs(10);

/// A running SSH decoy on a free port of 127.0.0.1; stops when dropped.
struct Decoy {
    decky: Loopback,
    addr: SocketAddr,
}

impl Decoy {
    async fn start(settings: &[(&str, &str)]) -> Decoy {
        let limits = Limits { idle: Duration::from_secs(3), ..Limits::default() };
        Decoy::start_with(settings, limits).await
    }

    async fn start_with(settings: &[(&str, &str)], limits: Limits) -> Decoy {
        let decky = Loopback::start(DECKY, &[service("ssh", settings)], limits).await;
        Decoy { addr: decky.address("ssh"), decky }
    }

    /// The lines of `event_type` once at least `n` are there (up to [`WAIT`]).
    async fn events(&self, event_type: &str, n: usize) -> Vec<LogLine> {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let found: Vec<LogLine> = self.decky.parsed().into_iter().filter(|l| l.event_type == event_type).collect();
            if found.len() >= n {
                return found;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{n} `{event_type}` lines never came: {:#?}",
                self.decky.lines.all()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn connect(&self) -> Handle<Client> {
        self.connect_with(client::Config::default()).await
    }

    async fn connect_with(&self, config: client::Config) -> Handle<Client> {
        let config = client::Config { inactivity_timeout: Some(WAIT), ..config };
        tokio::time::timeout(WAIT, client::connect(Arc::new(config), self.addr, Client)).await.unwrap().unwrap()
    }

    /// A client logged in as root with the right password.
    async fn login(&self) -> Handle<Client> {
        let mut ssh = self.connect().await;
        let auth = ssh.authenticate_password("root", "hunter2").await.unwrap();
        assert!(auth.success(), "root:hunter2 was refused");
        ssh
    }
}

const USERS: (&str, &str) = ("users", "root:hunter2, admin:admin");

/// Accepts any host key: the decoy's is made at start.
struct Client;

impl client::Handler for Client {
    type Error = russh::Error;

    async fn check_server_key(&mut self, _key: &PublicKeyOrCertificate) -> Result<bool, Self::Error> {
        Ok(true)
    }
}

fn field<'a>(line: &'a LogLine, key: &str) -> &'a str {
    line.field(key).unwrap_or_else(|| panic!("no `{key}` in {line:?}"))
}

/// Reads channel data until it ends with `end` (or the channel closes); the text read.
async fn read_until(channel: &mut russh::Channel<client::Msg>, end: &str) -> String {
    let mut text = String::new();
    let deadline = tokio::time::Instant::now() + WAIT;
    while !text.ends_with(end) {
        match tokio::time::timeout_at(deadline, channel.wait()).await {
            Ok(Some(ChannelMsg::Data { data })) => text.push_str(&String::from_utf8_lossy(&data)),
            Ok(Some(_)) => {}
            Ok(None) => panic!("the channel closed before {end:?}; read {text:?}"),
            Err(_) => panic!("no {end:?} in time; read {text:?}"),
        }
    }
    text
}

/// Everything a channel sends until it closes: its output and exit status.
async fn read_to_close(channel: &mut russh::Channel<client::Msg>) -> (String, Option<u32>) {
    let (mut text, mut status) = (String::new(), None);
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        match tokio::time::timeout_at(deadline, channel.wait()).await.expect("the channel never closed") {
            Some(ChannelMsg::Data { data }) => text.push_str(&String::from_utf8_lossy(&data)),
            Some(ChannelMsg::ExitStatus { exit_status }) => status = Some(exit_status),
            Some(ChannelMsg::Close) | None => return (text, status),
            Some(_) => {}
        }
    }
}

#[tokio::test]
async fn passwords_are_logged_and_only_the_listed_ones_open() {
    let decoy = Decoy::start(&[USERS]).await;
    let mut ssh = decoy.connect().await;

    let auth = ssh.authenticate_password("root", "wrong-pw").await.unwrap();
    assert!(matches!(auth, AuthResult::Failure { .. }));
    let auth = ssh.authenticate_password("root", "hunter2").await.unwrap();
    assert!(auth.success());

    let attempts = decoy.events("auth_attempt", 2).await;
    for (line, (secret, outcome)) in attempts.iter().zip([("wrong-pw", "failure"), ("hunter2", "success")]) {
        assert_eq!((line.decky.as_str(), line.service.as_str()), (DECKY, "ssh"));
        assert_eq!(field(line, "principal"), "root");
        assert_eq!(field(line, "username"), "root");
        assert_eq!(field(line, "secret_kind"), "plaintext");
        assert_eq!(field(line, "secret_b64"), STANDARD.encode(secret));
        assert_eq!(field(line, "secret_printable"), secret);
        assert_eq!(field(line, "outcome"), outcome);
        assert_eq!(field(line, "src_ip"), "127.0.0.1");
        assert_eq!(line.attacker_ip, "127.0.0.1");
    }
}

#[tokio::test]
async fn exec_answers_from_the_fake_system_and_logs_the_command() {
    let decoy = Decoy::start(&[USERS]).await;
    let ssh = decoy.login().await;

    let mut channel = ssh.channel_open_session().await.unwrap();
    channel.exec(true, "uname -a").await.unwrap();
    let (output, status) = read_to_close(&mut channel).await;
    assert!(output.starts_with(&format!("Linux {DECKY} ")), "{output:?}");
    assert!(output.ends_with("GNU/Linux\n"), "no terminal, so no CR: {output:?}");
    assert_eq!(status, Some(0));

    let command = &decoy.events("command", 1).await[0];
    assert_eq!((command.decky.as_str(), command.service.as_str()), (DECKY, "bash"));
    assert_eq!(field(command, "src_ip"), "127.0.0.1");
    assert_eq!(field(command, "service"), "ssh");
    let cmd = parse_shell_command(command.msg.as_deref().unwrap()).unwrap();
    assert_eq!(cmd.command, "uname -a");
    assert_eq!((cmd.user.as_deref(), cmd.uid.as_deref()), (Some("root"), Some("0")));
    assert_eq!((cmd.pwd.as_deref(), cmd.src.as_deref()), (Some("/root"), Some("127.0.0.1")));

    // Nothing is forwarded anywhere.
    assert!(ssh.channel_open_direct_tcpip("127.0.0.1", u32::from(decoy.addr.port()), "10.0.0.9", 4000).await.is_err());
}

#[tokio::test]
async fn an_interactive_shell_echoes_edits_and_answers() {
    let decoy = Decoy::start(&[USERS]).await;
    let ssh = decoy.login().await;
    let prompt = format!("root@{DECKY}:~# ");

    let mut channel = ssh.channel_open_session().await.unwrap();
    channel.request_pty(true, "xterm-256color", 80, 24, 0, 0, &[]).await.unwrap();
    channel.request_shell(true).await.unwrap();
    let banner = read_until(&mut channel, &prompt).await;
    assert!(banner.starts_with("Welcome to Ubuntu"), "{banner:?}");

    // Keystrokes one by one, as a terminal sends them.
    for key in ["i", "d", "\r"] {
        channel.data_bytes(key.as_bytes().to_vec()).await.unwrap();
    }
    let answer = read_until(&mut channel, &prompt).await;
    assert_eq!(answer, format!("id\r\nuid=0(root) gid=0(root) groups=0(root)\r\n{prompt}"));

    // A typo fixed with backspace, an arrow key, then a line abandoned with Ctrl-C.
    channel.data_bytes(&b"whoamx\x7fi\x1b[A\r"[..]).await.unwrap();
    let answer = read_until(&mut channel, &prompt).await;
    assert_eq!(answer, format!("whoamx\x08 \x08i\r\nroot\r\n{prompt}"));
    channel.data_bytes(&b"rm -rf /\x03"[..]).await.unwrap();
    assert_eq!(read_until(&mut channel, &prompt).await, format!("rm -rf /^C\r\n{prompt}"));

    channel.data_bytes(&b"cd /var/www/html\r"[..]).await.unwrap();
    read_until(&mut channel, &format!("root@{DECKY}:/var/www/html# ")).await;

    channel.data_bytes(&b"exit\r"[..]).await.unwrap();
    let (output, status) = read_to_close(&mut channel).await;
    assert_eq!(output, "exit\r\nlogout\r\n");
    assert_eq!(status, Some(0));

    let commands: Vec<(String, Option<String>)> = decoy
        .events("command", 4)
        .await
        .iter()
        .map(|l| parse_shell_command(l.msg.as_deref().unwrap()).unwrap())
        .map(|c| (c.command, c.pwd))
        .collect();
    let root = Some("/root".to_string());
    assert_eq!(
        commands,
        [
            ("id".into(), root.clone()),
            ("whoami".into(), root.clone()),
            ("cd /var/www/html".into(), root),
            ("exit".into(), Some("/var/www/html".into()))
        ]
    );

    // The session, recorded: every keystroke as sent, everything shown, on the terminal's size.
    let recorded = &decoy.events("session_recorded", 1).await[0];
    assert_eq!((field(recorded, "service"), field(recorded, "width"), field(recorded, "height")), ("ssh", "80", "24"));
    assert_eq!(field(recorded, "truncated"), "false");
    let cast: Vec<(f64, String, String)> = serde_json::from_str(field(recorded, "cast")).unwrap();
    let on = |channel: &str| -> String { cast.iter().filter(|e| e.1 == channel).map(|e| e.2.as_str()).collect() };
    assert_eq!(on("i"), "id\rwhoamx\u{7f}i\u{1b}[A\rrm -rf /\u{3}cd /var/www/html\rexit\r");
    let shown = on("o");
    assert!(shown.starts_with("Welcome to Ubuntu") && shown.contains("uid=0(root)"), "{shown:?}");
    assert!(shown.ends_with("# exit\r\nlogout\r\n"), "{shown:?}");
    assert!(cast.windows(2).all(|pair| pair[0].0 <= pair[1].0), "in time order");
}

#[tokio::test]
async fn a_shell_session_cut_off_by_the_client_is_still_recorded() {
    let decoy = Decoy::start(&[USERS]).await;
    let ssh = decoy.login().await;
    let mut channel = ssh.channel_open_session().await.unwrap();
    channel.request_shell(true).await.unwrap();
    channel.data_bytes(&b"uname -a\n"[..]).await.unwrap();
    read_until(&mut channel, "GNU/Linux\n").await;
    drop((channel, ssh));

    let recorded = &decoy.events("session_recorded", 1).await[0];
    let cast: Vec<(f64, String, String)> = serde_json::from_str(field(recorded, "cast")).unwrap();
    assert_eq!(cast[0].2, "uname -a\n", "no terminal: no greeting, the command first");
    assert!(cast[1].2.starts_with("Linux web-01"), "{cast:?}");
    assert_eq!((field(recorded, "width"), field(recorded, "height")), ("80", "24"), "no pty: 80 x 24");
}

#[tokio::test]
async fn the_banners_of_both_sides() {
    let decoy = Decoy::start(&[USERS, ("banner", "OpenSSH_7.4")]).await;

    // What a client reads first.
    let mut raw = BufReader::new(TcpStream::connect(decoy.addr).await.unwrap());
    let mut first = String::new();
    tokio::time::timeout(WAIT, raw.read_line(&mut first)).await.unwrap().unwrap();
    assert_eq!(first, "SSH-2.0-OpenSSH_7.4\r\n");
    drop(raw);

    let client_banner = "SSH-2.0-OpenSSH_9.6p1 Ubuntu-3ubuntu13.5";
    let config = client::Config {
        client_id: SshId::Standard(client_banner.into()),
        preferred: Preferred {
            kex: vec![
                kex::CURVE25519,
                kex::DH_G14_SHA256,
                kex::EXTENSION_SUPPORT_AS_CLIENT,
                kex::EXTENSION_OPENSSH_STRICT_KEX_AS_CLIENT,
            ]
            .into(),
            ..Preferred::default()
        },
        ..client::Config::default()
    };
    let mut ssh = decoy.connect_with(config).await;
    assert!(ssh.authenticate_password("root", "hunter2").await.unwrap().success());

    // The raw connection above sent nothing, so only the client's banner is on record.
    let banners = decoy.events("ssh_client_banner", 1).await;
    assert_eq!(banners.len(), 1, "{banners:#?}");
    let line = &banners[0];
    assert_eq!((line.decky.as_str(), line.service.as_str()), (DECKY, "ssh"));
    assert_eq!(field(line, "client_banner"), client_banner);
    assert_eq!(
        field(line, "kex"),
        "curve25519-sha256,diffie-hellman-group14-sha256,ext-info-c,kex-strict-c-v00@openssh.com"
    );
    assert_eq!(field(line, "src_ip"), "127.0.0.1");
}

#[tokio::test]
async fn the_default_banner_is_ubuntus_openssh() {
    let decoy = Decoy::start(&[]).await;
    let mut raw = BufReader::new(TcpStream::connect(decoy.addr).await.unwrap());
    let mut first = String::new();
    tokio::time::timeout(WAIT, raw.read_line(&mut first)).await.unwrap().unwrap();
    assert_eq!(first, "SSH-2.0-OpenSSH_8.9p1 Ubuntu-3ubuntu0.10\r\n");
}

fn client_key(seed: u8) -> PrivateKey {
    PrivateKey::from(Ed25519Keypair::from_seed(&[seed; 32]))
}

#[tokio::test]
async fn public_keys_are_logged_and_refused() {
    let decoy = Decoy::start(&[USERS]).await;
    let mut ssh = decoy.connect().await;
    let key = client_key(7);
    let public = key.public_key().to_openssh().unwrap();
    assert!(public.starts_with("ssh-ed25519 AAAA"));

    let auth = ssh.authenticate_publickey("deploy", PrivateKeyWithHashAlg::new(Arc::new(key), None)).await.unwrap();
    assert!(!auth.success());

    let line = &decoy.events("auth_attempt", 1).await[0];
    assert_eq!(field(line, "principal"), "deploy");
    assert_eq!(field(line, "secret_kind"), "ssh_publickey");
    assert_eq!(field(line, "secret_printable"), public.trim());
    assert_eq!(field(line, "secret_b64"), STANDARD.encode(public.trim()));
    assert_eq!(field(line, "outcome"), "failure");

    // The shell still opens for the right password on the same connection.
    assert!(ssh.authenticate_password("root", "hunter2").await.unwrap().success());
}

#[tokio::test]
async fn a_client_trying_too_many_credentials_is_cut_off() {
    let decoy = Decoy::start(&[USERS]).await;
    let mut ssh = decoy.connect().await;
    for seed in 1..=6 {
        let key = PrivateKeyWithHashAlg::new(Arc::new(client_key(seed)), None);
        assert!(!ssh.authenticate_publickey("root", key).await.unwrap().success());
    }
    let key = PrivateKeyWithHashAlg::new(Arc::new(client_key(7)), None);
    let seventh = ssh.authenticate_publickey("root", key).await;
    assert!(!seventh.is_ok_and(|auth| auth.success()));
    let deadline = tokio::time::Instant::now() + WAIT;
    while !ssh.is_closed() {
        assert!(tokio::time::Instant::now() < deadline, "the connection stayed open");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    decoy.events("disconnect", 1).await;
    assert_eq!(decoy.decky.parsed().iter().filter(|l| l.event_type == "auth_attempt").count(), 6);
}

/// Waits until the server closes `stream` (a read gives end of file or an error).
async fn closed_by_server(stream: &mut TcpStream, within: Duration) {
    let mut buf = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
            Ok(Ok(0) | Err(_)) => return,
            Ok(Ok(_)) => {}
            Err(_) => panic!("the server kept the connection open"),
        }
    }
}

#[tokio::test]
async fn garbage_and_silence_do_not_stop_the_decoy() {
    let limits = Limits { idle: Duration::from_secs(1), ..Limits::default() };
    let decoy = Decoy::start_with(&[USERS], limits).await;

    // 1 MB that is no SSH at all, instead of a banner.
    let mut garbage = TcpStream::connect(decoy.addr).await.unwrap();
    let junk: Vec<u8> = (0..1 << 20).map(|i: u32| (i.wrapping_mul(2_654_435_761) >> 24) as u8 | 0x80).collect();
    // The server hangs up part-way: the write may fail, which is the point.
    let _ = tokio::time::timeout(WAIT, garbage.write_all(&junk)).await;
    closed_by_server(&mut garbage, WAIT).await;

    // A connection that says nothing is closed after the idle time.
    let mut silent = TcpStream::connect(decoy.addr).await.unwrap();
    closed_by_server(&mut silent, Duration::from_secs(5)).await;

    // Both are on record, the garbage with what it sent first.
    let banners = decoy.events("ssh_client_banner", 1).await;
    assert_eq!(field(&banners[0], "client_banner").len(), 255);
    assert_eq!(banners.len(), 1, "the silent client sent no banner");

    let ssh = decoy.login().await;
    let mut channel = ssh.channel_open_session().await.unwrap();
    channel.exec(true, "whoami").await.unwrap();
    assert_eq!(read_to_close(&mut channel).await, ("root\n".to_string(), Some(0)));
}

#[tokio::test]
async fn a_session_past_its_time_limit_is_cut_off() {
    let limits = Limits { session: Duration::from_secs(1), idle: Duration::from_secs(30), ..Limits::default() };
    let decoy = Decoy::start_with(&[USERS], limits).await;
    let ssh = decoy.login().await;
    let mut channel = ssh.channel_open_session().await.unwrap();
    channel.request_pty(true, "xterm", 80, 24, 0, 0, &[]).await.unwrap();
    channel.request_shell(true).await.unwrap();
    read_until(&mut channel, &format!("root@{DECKY}:~# ")).await;

    // The client keeps the shell open; the decoy ends the connection at the limit.
    read_to_close(&mut channel).await;
    let deadline = tokio::time::Instant::now() + WAIT;
    while !ssh.is_closed() {
        assert!(tokio::time::Instant::now() < deadline, "the connection outlived the session limit");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let disconnect = &decoy.events("disconnect", 1).await[0];
    let duration: f64 = field(disconnect, "duration_s").parse().unwrap();
    assert!((1.0..3.0).contains(&duration), "{duration}");
}
