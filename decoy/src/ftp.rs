//! The FTP decoy: a vsftpd that logs every login (anonymous ones get in), shows a small made-up
//! tree, and logs every upload with its hash (`file_captured`), keeping its bytes among the decky's
//! artifacts (`artifacts.rs`). Transfers are passive only (`PASV`, `EPSV`): the decoy listens for
//! the data connection and never connects out, so `PORT` and `EPRT` are refused. No file is ever
//! served back.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;
use svc_core::text::hex;

use async_trait::async_trait;
use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;

use crate::credential;
use crate::line::LineReader;
use crate::session::{Decoy, Session};
use crate::settings::{DEFAULT_USERS, Settings};

/// Failed logins before the server hangs up (vsftpd's `max_login_fails`).
const MAX_FAILURES: usize = 3;

/// Unknown or refused commands before the server hangs up: a client sending noise is not an FTP
/// client.
const MAX_ERRORS: usize = 20;

const FEATURES: &str = "211-Features:\r\n EPRT\r\n EPSV\r\n MDTM\r\n PASV\r\n REST STREAM\r\n SIZE\r\n TVFS\r\n211 End";

const HELP: &str = "214-The following commands are recognized.\r\n ABOR ACCT ALLO APPE CDUP CWD  DELE EPRT EPSV FEAT \
HELP LIST MDTM MKD\r\n MODE NLST NOOP OPTS PASS PASV PORT PWD  QUIT REIN REST RETR RMD  RNFR\r\n RNTO SITE SIZE SMNT \
STAT STOR STOU STRU SYST TYPE USER XCUP XCWD XMKD\r\n XPWD XRMD\r\n214 Help OK.";

/// One entry of the made-up tree: name, size (`None` for a directory), date as `ls` shows it.
type Entry = (&'static str, Option<u64>, &'static str);

const TREE: &[(&str, &[Entry])] = &[
    (
        "/",
        &[
            ("pub", None, "Mar 14  2024"),
            ("upload", None, "Nov 20 09:12"),
            ("README.txt", Some(1092), "Jan 08  2024"),
            ("backup_2024-10.tar.gz", Some(15_728_640), "Oct 31 23:55"),
        ],
    ),
    (
        "/pub",
        &[("firmware_v2.1.bin", Some(4_194_304), "Jun 03  2024"), ("manual.pdf", Some(2_381_004), "Jun 03  2024")],
    ),
    ("/upload", &[]),
];

struct Ftp {
    banner: String,
    users: Vec<(String, String)>,
}

pub fn decoy(settings: &Settings, _hostname: &str) -> anyhow::Result<Arc<dyn Decoy>> {
    let banner = match settings.get("banner") {
        Some(b) if b.starts_with("220") => b.to_string(),
        Some(b) => format!("220 {b}"),
        None => "220 (vsFTPd 3.0.5)".to_string(),
    };
    Ok(Arc::new(Ftp { banner, users: settings.users(DEFAULT_USERS) }))
}

#[async_trait]
impl Decoy for Ftp {
    async fn serve(&self, stream: TcpStream, session: Session) -> anyhow::Result<()> {
        let local_ip = stream.local_addr()?.ip().to_canonical();
        let (read, write) = stream.into_split();
        let mut conn = Control {
            lines: LineReader::new(read, session.limits.max_line, session.limits.idle),
            write,
            idle: session.limits.idle,
            local_ip,
            user: None,
            logged_in: None,
            cwd: "/".to_string(),
            passive: None,
            failures: 0,
            errors: 0,
        };
        // A line that cannot be read or a reply that cannot be written just ends the session.
        let _ = self.dialogue(&mut conn, &session).await;
        Ok(())
    }
}

/// Why the dialogue stopped: the peer left, stalled, broke the limits or said goodbye.
struct Ended;

/// One control connection and its state.
struct Control {
    lines: LineReader<OwnedReadHalf>,
    write: OwnedWriteHalf,
    idle: Duration,
    /// Where the control connection arrived: where a passive data connection is offered.
    local_ip: IpAddr,
    /// The name given by `USER`, waiting for `PASS`.
    user: Option<String>,
    logged_in: Option<String>,
    cwd: String,
    /// The listener of the last `PASV`/`EPSV`, waiting for its one data connection.
    passive: Option<TcpListener>,
    failures: usize,
    errors: usize,
}

impl Control {
    /// Sends one reply (`\r\n` added), within the idle time.
    async fn reply(&mut self, text: &str) -> Result<(), Ended> {
        let bytes = format!("{text}\r\n");
        match tokio::time::timeout(self.idle, self.write.write_all(bytes.as_bytes())).await {
            Ok(Ok(())) => Ok(()),
            _ => Err(Ended),
        }
    }

    /// Sends a refusal and counts it; too many end the session.
    async fn error(&mut self, text: &str) -> Result<(), Ended> {
        self.reply(text).await?;
        self.errors += 1;
        if self.errors >= MAX_ERRORS { Err(Ended) } else { Ok(()) }
    }

    /// `path` made absolute against the working directory, `.` and `..` resolved.
    fn resolve(&self, path: &str) -> String {
        crate::shell::absolute(&self.cwd, path)
    }

    /// Opens a passive listener on the control connection's local address.
    async fn listen(&mut self) -> Option<u16> {
        // The previous offer, if any, is withdrawn: one data connection at a time.
        self.passive = None;
        let listener = TcpListener::bind((self.local_ip, 0)).await.ok()?;
        let port = listener.local_addr().ok()?.port();
        self.passive = Some(listener);
        Some(port)
    }

    /// The data connection of the pending passive offer, from the client's own address, within the
    /// idle time; the offer is used up either way.
    async fn accept_data(&mut self, client: IpAddr) -> Option<TcpStream> {
        let listener = self.passive.take()?;
        let deadline = Instant::now() + self.idle;
        loop {
            let (stream, peer) = tokio::time::timeout_at(deadline, listener.accept()).await.ok()?.ok()?;
            // Like vsftpd without `pasv_promiscuous`: nobody else may take the transfer.
            if peer.ip().to_canonical() == client {
                return Some(stream);
            }
        }
    }
}

impl Ftp {
    async fn dialogue(&self, conn: &mut Control, session: &Session) -> Result<(), Ended> {
        conn.reply(&self.banner).await?;
        loop {
            let raw = conn.lines.next_line().await.map_err(|_| Ended)?;
            // The password as sent, bytes and spaces included: it is a credential.
            let password = raw.splitn(2, |&b| b == b' ').nth(1).unwrap_or_default().to_vec();
            let line = String::from_utf8_lossy(&raw);
            let line = line.trim_end_matches([' ', '\r']).to_string();
            let (verb, arg) = match line.split_once(' ') {
                Some((verb, arg)) => (verb.to_ascii_uppercase(), arg.trim().to_string()),
                None => (line.trim().to_ascii_uppercase(), String::new()),
            };
            if conn.logged_in.is_some() {
                // Never a password, even one sent again after the login.
                let command = if verb == "PASS" { "PASS".to_string() } else { line.clone() };
                session.event("command", vec![("command", command)]);
                self.command(conn, session, &verb, &arg).await?;
            } else {
                self.prelogin(conn, session, &verb, &arg, &password).await?;
            }
        }
    }

    /// Before the login only the login itself (and a few harmless commands) is answered.
    async fn prelogin(
        &self,
        conn: &mut Control,
        session: &Session,
        verb: &str,
        arg: &str,
        password: &[u8],
    ) -> Result<(), Ended> {
        match verb {
            "USER" if arg.is_empty() => conn.error("500 USER: command requires a parameter").await,
            "USER" => {
                conn.user = Some(arg.to_string());
                conn.reply("331 Please specify the password.").await
            }
            "PASS" => {
                let Some(user) = conn.user.take() else { return conn.error("503 Login with USER first.").await };
                let anonymous = user.eq_ignore_ascii_case("anonymous") || user.eq_ignore_ascii_case("ftp");
                let success = anonymous || self.users.iter().any(|(u, p)| *u == user && p.as_bytes() == password);
                let outcome = if success { "success" } else { "failure" };
                session.event("auth_attempt", credential::fields(&user, "plaintext", password, Some(outcome)));
                if success {
                    conn.cwd = "/".to_string();
                    conn.logged_in = Some(user);
                    return conn.reply("230 Login successful.").await;
                }
                conn.reply("530 Login incorrect.").await?;
                conn.failures += 1;
                if conn.failures >= MAX_FAILURES { Err(Ended) } else { Ok(()) }
            }
            "FEAT" => conn.reply(FEATURES).await,
            "QUIT" => {
                conn.reply("221 Goodbye.").await?;
                Err(Ended)
            }
            _ => conn.error("530 Please login with USER and PASS.").await,
        }
    }

    /// One command of a logged-in client.
    async fn command(&self, conn: &mut Control, session: &Session, verb: &str, arg: &str) -> Result<(), Ended> {
        match verb {
            "USER" => conn.error("530 Can't change to another user.").await,
            "PASS" => conn.reply("230 Already logged in.").await,
            "SYST" => conn.reply("215 UNIX Type: L8").await,
            "FEAT" => conn.reply(FEATURES).await,
            "HELP" => conn.reply(HELP).await,
            "NOOP" => conn.reply("200 NOOP ok.").await,
            "QUIT" => {
                conn.reply("221 Goodbye.").await?;
                Err(Ended)
            }
            "TYPE" => match arg.to_ascii_uppercase().as_str() {
                "A" | "A N" => conn.reply("200 Switching to ASCII mode.").await,
                "I" | "L 8" => conn.reply("200 Switching to Binary mode.").await,
                _ => conn.error("500 Unrecognised TYPE command.").await,
            },
            "MODE" if arg.eq_ignore_ascii_case("S") => conn.reply("200 Mode set to S.").await,
            "STRU" if arg.eq_ignore_ascii_case("F") => conn.reply("200 Structure set to F.").await,
            "MODE" => conn.error("504 Bad MODE command.").await,
            "STRU" => conn.error("504 Bad STRU command.").await,
            "OPTS" if arg.to_ascii_uppercase().starts_with("UTF8 ON") => conn.reply("200 Always in UTF8 mode.").await,
            "OPTS" => conn.error("501 Option not understood.").await,
            "REST" => {
                let at: u64 = arg.parse().unwrap_or(0);
                conn.reply(&format!("350 Restart position accepted ({at}).")).await
            }
            "ABOR" => conn.reply("225 No transfer to ABOR.").await,
            "PWD" | "XPWD" => {
                let cwd = conn.cwd.clone();
                conn.reply(&format!("257 \"{cwd}\" is the current directory")).await
            }
            "CWD" | "XCWD" | "CDUP" | "XCUP" => {
                let target = if verb.ends_with("UP") { ".." } else { arg };
                let path = conn.resolve(target);
                if directory(&path).is_some() {
                    conn.cwd = path;
                    conn.reply("250 Directory successfully changed.").await
                } else {
                    conn.error("550 Failed to change directory.").await
                }
            }
            "PASV" => {
                if !conn.local_ip.is_ipv4() {
                    return conn.error("550 Permission denied.").await;
                }
                let Some(port) = conn.listen().await else { return conn.reply("425 Could not listen.").await };
                let ip = conn.local_ip.to_string().replace('.', ",");
                conn.reply(&format!("227 Entering Passive Mode ({ip},{},{}).", port >> 8, port & 0xff)).await
            }
            "EPSV" if arg.eq_ignore_ascii_case("ALL") => conn.reply("200 EPSV ALL ok.").await,
            "EPSV" => {
                let Some(port) = conn.listen().await else { return conn.reply("425 Could not listen.").await };
                conn.reply(&format!("229 Entering Extended Passive Mode (|||{port}|)")).await
            }
            // Active mode would have the decoy connect out: never.
            "PORT" | "EPRT" => conn.error("500 Illegal PORT command.").await,
            "LIST" | "NLST" => self.list(conn, session, verb == "NLST", arg).await,
            "RETR" => conn.error("550 Failed to open file.").await,
            "STOR" | "APPE" | "STOU" => self.store(conn, session, verb, arg).await,
            "SIZE" => conn.error("550 Could not get file size.").await,
            "MDTM" => conn.error("550 Could not get file modification time.").await,
            "MKD" | "XMKD" | "RMD" | "XRMD" | "DELE" | "RNFR" | "RNTO" | "SITE" => {
                conn.error("550 Permission denied.").await
            }
            _ => conn.error("500 Unknown command.").await,
        }
    }

    /// `LIST`/`NLST` over the pending data connection.
    async fn list(&self, conn: &mut Control, session: &Session, names_only: bool, arg: &str) -> Result<(), Ended> {
        if conn.passive.is_none() {
            return conn.error("425 Use PORT or PASV first.").await;
        }
        let target = arg.split_whitespace().find(|a| !a.starts_with('-')).unwrap_or(".");
        let path = conn.resolve(target);
        let entries: Vec<Entry> = match directory(&path) {
            Some(entries) => entries.to_vec(),
            None => {
                let (parent, name) = path.rsplit_once('/').unwrap_or(("", &path));
                let parent = if parent.is_empty() { "/" } else { parent };
                directory(parent).into_iter().flatten().filter(|e| e.0 == name).copied().collect()
            }
        };
        let mut listing = String::new();
        for (name, size, date) in entries {
            if names_only {
                listing.push_str(&format!("{name}\r\n"));
            } else {
                let (mode, links, size) = match size {
                    None => ("drwxr-xr-x", 2, 4096),
                    Some(size) => ("-rw-r--r--", 1, size),
                };
                listing.push_str(&format!("{mode} {links:>4} {:<8} {:<8} {size:>8} {date} {name}\r\n", 0, 0));
            }
        }

        let Some(mut data) = conn.accept_data(session.peer.ip().to_canonical()).await else {
            return conn.reply("425 Failed to establish connection.").await;
        };
        conn.reply("150 Here comes the directory listing.").await?;
        let sent = tokio::time::timeout(conn.idle, async {
            data.write_all(listing.as_bytes()).await?;
            data.shutdown().await
        })
        .await;
        drop(data);
        match sent {
            Ok(Ok(())) => conn.reply("226 Directory send OK.").await,
            _ => conn.reply("426 Failure writing network stream.").await,
        }
    }

    /// `STOR` (and `APPE`, `STOU`): the upload read into memory up to `max_upload`, hashed, logged
    /// and kept among the decky's artifacts (named by its hash, never by the attacker's path).
    async fn store(&self, conn: &mut Control, session: &Session, verb: &str, arg: &str) -> Result<(), Ended> {
        if conn.passive.is_none() {
            return conn.error("425 Use PORT or PASV first.").await;
        }
        let name = if verb == "STOU" && arg.is_empty() { "ftp_upload" } else { arg };
        if name.is_empty() {
            return conn.error("553 Could not create file.").await;
        }
        let orig_path = conn.resolve(name);
        let Some(mut data) = conn.accept_data(session.peer.ip().to_canonical()).await else {
            return conn.reply("425 Failed to establish connection.").await;
        };
        conn.reply("150 Ok to send data.").await?;

        let max = session.limits.max_upload;
        let mut upload = Vec::new();
        let mut chunk = vec![0u8; 16 * 1024];
        // Complete, cut at the limit, or broken off (a stall or a reset) part way.
        let (cut, broken) = loop {
            let room = (max + 1 - upload.len()).min(chunk.len());
            match tokio::time::timeout(conn.idle, data.read(&mut chunk[..room])).await {
                Ok(Ok(0)) => break (false, false),
                Ok(Ok(n)) => {
                    upload.extend_from_slice(&chunk[..n]);
                    if upload.len() > max {
                        upload.truncate(max);
                        break (true, false);
                    }
                }
                _ => break (false, true),
            }
        };
        // Whatever is still coming is refused with the connection.
        drop(data);

        if !upload.is_empty() || !(cut || broken) {
            let sha256 = hex(&Sha256::digest(&upload));
            let stored_as = format!("{sha256}.bin");
            let size = upload.len().to_string();
            let mut fields = vec![
                ("stored_as", stored_as.clone()),
                ("sha256", sha256),
                ("size", size),
                ("orig_path", orig_path),
                ("truncated", (cut || broken).to_string()),
            ];
            if let Some(kept) = session.keep(&stored_as, upload).await {
                fields.push(("stored", kept.as_field()));
            }
            session.event("file_captured", fields);
        }
        if cut {
            conn.reply("552 Requested file action aborted. Exceeded storage allocation.").await
        } else if broken {
            conn.reply("426 Failure reading network stream.").await
        } else {
            conn.reply("226 Transfer complete.").await
        }
    }
}

/// The entries of the made-up directory at `path`, if it is one.
fn directory(path: &str) -> Option<&'static [Entry]> {
    TREE.iter().find(|(dir, _)| *dir == path).map(|(_, entries)| *entries)
}
