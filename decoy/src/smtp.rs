//! The SMTP decoy: a Postfix that takes any mail for anyone (an open relay is what spammers probe
//! for) and logs the envelope and a digest of each message, and that logs every `AUTH` attempt and
//! refuses it. Each message is kept among the decky's artifacts (`artifacts.rs`) for an admin to
//! read; nothing is delivered or relayed, and the decoy never connects out.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

use crate::credential;
use crate::line::LineReader;
use crate::session::{Decoy, Session};
use crate::settings::Settings;

/// Recipients of one message (Postfix's `smtpd_recipient_limit` is 1000; a decoy needs fewer).
const MAX_RECIPIENTS: usize = 100;

/// Refused commands before the server hangs up (Postfix's `smtpd_hard_error_limit`).
const MAX_ERRORS: usize = 20;

/// The longest envelope address taken (RFC 5321's path limit is 256 octets).
const MAX_ADDRESS: usize = 320;

/// The longest `Subject` logged.
const MAX_SUBJECT: usize = 512;

const AUTH_FAILED: &str = "535 5.7.8 Error: authentication failed";

struct Smtp {
    banner: String,
    hostname: String,
}

pub fn decoy(settings: &Settings, hostname: &str) -> anyhow::Result<Arc<dyn Decoy>> {
    let hostname = hostname.to_string();
    let banner = match settings.get("banner") {
        Some(b) if b.starts_with("220") => b.to_string(),
        Some(b) => format!("220 {b}"),
        None => format!("220 {hostname} ESMTP Postfix (Ubuntu)"),
    };
    Ok(Arc::new(Smtp { banner, hostname }))
}

#[async_trait]
impl Decoy for Smtp {
    async fn serve(&self, stream: TcpStream, session: Session) -> anyhow::Result<()> {
        let (read, write) = stream.into_split();
        let mut conn = Conn {
            lines: LineReader::new(read, session.limits.max_line, session.limits.idle),
            write,
            idle: session.limits.idle,
            helo: false,
            mail_from: None,
            rcpt_to: Vec::new(),
            errors: 0,
        };
        // A line that cannot be read or a reply that cannot be written just ends the session.
        let _ = self.dialogue(&mut conn, &session).await;
        Ok(())
    }
}

/// Why the dialogue stopped: the peer left, stalled, broke the limits or said goodbye.
struct Ended;

/// One SMTP connection and its transaction.
struct Conn {
    lines: LineReader<OwnedReadHalf>,
    write: OwnedWriteHalf,
    idle: Duration,
    helo: bool,
    mail_from: Option<String>,
    rcpt_to: Vec<String>,
    errors: usize,
}

impl Conn {
    async fn reply(&mut self, text: &str) -> Result<(), Ended> {
        let bytes = format!("{text}\r\n");
        match tokio::time::timeout(self.idle, self.write.write_all(bytes.as_bytes())).await {
            Ok(Ok(())) => Ok(()),
            _ => Err(Ended),
        }
    }

    /// Sends a refusal and counts it; too many end the session.
    async fn error(&mut self, text: &str, hostname: &str) -> Result<(), Ended> {
        self.reply(text).await?;
        self.errors += 1;
        if self.errors >= MAX_ERRORS {
            self.reply(&format!("421 4.7.0 {hostname} Error: too many errors")).await?;
            return Err(Ended);
        }
        Ok(())
    }

    async fn line(&mut self) -> Result<String, Ended> {
        self.lines.next_text().await.map_err(|_| Ended)
    }

    fn reset(&mut self) {
        self.mail_from = None;
        self.rcpt_to.clear();
    }
}

impl Smtp {
    async fn dialogue(&self, conn: &mut Conn, session: &Session) -> Result<(), Ended> {
        conn.reply(&self.banner).await?;
        loop {
            let line = conn.line().await?;
            let (verb, arg) = match line.trim().split_once(' ') {
                Some((verb, arg)) => (verb.to_ascii_uppercase(), arg.trim().to_string()),
                None => (line.trim().to_ascii_uppercase(), String::new()),
            };
            self.command(conn, session, &verb, &arg).await?;
        }
    }

    async fn command(&self, conn: &mut Conn, session: &Session, verb: &str, arg: &str) -> Result<(), Ended> {
        let host = self.hostname.as_str();
        match verb {
            "EHLO" | "HELO" if arg.is_empty() => conn.error(&format!("501 Syntax: {verb} hostname"), host).await,
            "HELO" => {
                conn.helo = true;
                conn.reset();
                conn.reply(&format!("250 {host}")).await
            }
            "EHLO" => {
                conn.helo = true;
                conn.reset();
                conn.reply(&format!(
                    "250-{host}\r\n250-PIPELINING\r\n250-SIZE 10240000\r\n250-VRFY\r\n250-AUTH PLAIN LOGIN\r\n\
                     250-ENHANCEDSTATUSCODES\r\n250-8BITMIME\r\n250 DSN"
                ))
                .await
            }
            "AUTH" if !conn.helo => conn.error("503 5.5.1 Error: send HELO/EHLO first", host).await,
            "AUTH" if conn.mail_from.is_some() => {
                conn.error("503 5.5.1 Error: MAIL transaction in progress", host).await
            }
            "AUTH" => self.auth(conn, session, arg).await,
            "MAIL" | "RCPT" | "DATA" if !conn.helo => conn.error("503 5.5.1 Error: send HELO/EHLO first", host).await,
            "MAIL" => {
                let Some(from) = address(arg, "FROM:") else {
                    return conn.error("501 5.5.4 Syntax: MAIL FROM:<address>", host).await;
                };
                if conn.mail_from.is_some() {
                    return conn.error("503 5.5.1 Error: nested MAIL command", host).await;
                }
                session.event("mail_from", vec![("mail_from", from.clone())]);
                conn.mail_from = Some(from);
                conn.reply("250 2.1.0 Ok").await
            }
            "RCPT" => {
                if conn.mail_from.is_none() {
                    return conn.error("503 5.5.1 Error: need MAIL command", host).await;
                }
                let Some(to) = address(arg, "TO:") else {
                    return conn.error("501 5.5.4 Syntax: RCPT TO:<address>", host).await;
                };
                if to.is_empty() {
                    return conn.error("501 5.1.3 Bad recipient address syntax", host).await;
                }
                if conn.rcpt_to.len() >= MAX_RECIPIENTS {
                    return conn.error("452 4.5.3 Error: too many recipients", host).await;
                }
                session.event("rcpt_to", vec![("rcpt_to", to.clone())]);
                conn.rcpt_to.push(to);
                conn.reply("250 2.1.5 Ok").await
            }
            "DATA" if conn.mail_from.is_none() => conn.error("503 5.5.1 Error: need RCPT command", host).await,
            "DATA" if conn.rcpt_to.is_empty() => conn.error("554 5.5.1 Error: no valid recipients", host).await,
            "DATA" => self.data(conn, session).await,
            "RSET" => {
                conn.reset();
                conn.reply("250 2.0.0 Ok").await
            }
            "NOOP" => conn.reply("250 2.0.0 Ok").await,
            "VRFY" if arg.is_empty() => conn.error("501 5.5.4 Syntax: VRFY address", host).await,
            "VRFY" => conn.reply(&format!("252 2.0.0 {arg}")).await,
            "QUIT" => {
                conn.reply("221 2.0.0 Bye").await?;
                Err(Ended)
            }
            _ => conn.error("502 5.5.2 Error: command not recognized", host).await,
        }
    }

    /// `AUTH LOGIN` and `AUTH PLAIN`, the initial response inline or after a `334`: the credentials
    /// are logged, and refused.
    async fn auth(&self, conn: &mut Conn, session: &Session, arg: &str) -> Result<(), Ended> {
        let host = self.hostname.as_str();
        let (mechanism, initial) = match arg.split_once(' ') {
            Some((mechanism, initial)) => (mechanism.to_ascii_uppercase(), Some(initial.trim().to_string())),
            None => (arg.to_ascii_uppercase(), None),
        };
        let (user, password) = match mechanism.as_str() {
            "LOGIN" => {
                let user = match initial {
                    Some(user) => user,
                    None => {
                        conn.reply("334 VXNlcm5hbWU6").await?;
                        conn.line().await?
                    }
                };
                let Some(user) = decode(conn, &user, host).await? else { return Ok(()) };
                conn.reply("334 UGFzc3dvcmQ6").await?;
                let password = conn.line().await?;
                let Some(password) = decode(conn, &password, host).await? else { return Ok(()) };
                (user, password)
            }
            "PLAIN" => {
                let response = match initial {
                    Some(response) => response,
                    None => {
                        conn.reply("334 ").await?;
                        conn.line().await?
                    }
                };
                let Some(response) = decode(conn, &response, host).await? else { return Ok(()) };
                // authzid NUL authcid NUL passwd
                let mut parts = response.splitn(3, |&b| b == 0);
                let (Some(_), Some(user), Some(password)) = (parts.next(), parts.next(), parts.next()) else {
                    return conn.error(&format!("{AUTH_FAILED}: Invalid authentication mechanism"), host).await;
                };
                (user.to_vec(), password.to_vec())
            }
            "" => return conn.error("501 5.5.4 Syntax: AUTH mechanism", host).await,
            _ => return conn.error("504 5.5.4 Unrecognized authentication type", host).await,
        };
        let user = String::from_utf8_lossy(&user);
        session.event("auth_attempt", credential::fields(&user, "plaintext", &password, Some("failure")));
        conn.error(AUTH_FAILED, host).await
    }

    /// The message after `DATA`, up to the lone `.`: its digest logged, the message kept.
    async fn data(&self, conn: &mut Conn, session: &Session) -> Result<(), Ended> {
        conn.reply("354 End data with <CR><LF>.<CR><LF>").await?;
        let max = session.limits.max_upload;
        let mut message = Vec::new();
        loop {
            let line = conn.lines.next_line().await.map_err(|_| Ended)?;
            if line == b"." {
                break;
            }
            // Dot-stuffing undone: a leading `.` was doubled by the client.
            let line = line.strip_prefix(b".").unwrap_or(&line);
            message.extend_from_slice(line);
            message.extend_from_slice(b"\r\n");
            if message.len() > max {
                conn.reply("552 5.3.4 Error: message file too big").await?;
                return Err(Ended);
            }
        }

        let sha256 = Sha256::digest(&message);
        let queue_id = queue_id(&sha256, session);
        let sha256: String = svc_core::text::hex(&sha256);
        let stored_as = format!("{sha256}.eml");
        let mut fields = vec![
            ("mail_from", conn.mail_from.clone().unwrap_or_default()),
            ("rcpt_to", conn.rcpt_to.join(",")),
            ("size", message.len().to_string()),
            ("sha256", sha256),
        ];
        if let Some(subject) = subject(&message) {
            fields.push(("subject", subject));
        }
        fields.push(("queue_id", queue_id.clone()));
        if let Some(kept) = session.keep(&stored_as, message).await {
            fields.push(("stored_as", stored_as));
            fields.push(("stored", kept.as_field()));
        }
        session.event("message_accepted", fields);
        conn.reset();
        conn.reply(&format!("250 2.0.0 Ok: queued as {queue_id}")).await
    }
}

/// The address of `MAIL FROM:<x>` / `RCPT TO:<y>` (`prefix` is `FROM:` or `TO:`), brackets
/// removed, parameters after it ignored; `None` when the argument is not that shape or the
/// address is longer than [`MAX_ADDRESS`].
fn address(arg: &str, prefix: &str) -> Option<String> {
    let head = arg.get(..prefix.len())?;
    if !head.eq_ignore_ascii_case(prefix) {
        return None;
    }
    let rest = arg[prefix.len()..].trim_start();
    let address = match rest.strip_prefix('<') {
        Some(inner) => inner[..inner.find('>')?].trim(),
        None => rest.split_whitespace().next()?,
    };
    (address.len() <= MAX_ADDRESS).then(|| address.to_string())
}

/// Decodes a base64 SASL response; `None` (after the refusal) when the client cancelled with `*`
/// or sent something else.
async fn decode(conn: &mut Conn, text: &str, host: &str) -> Result<Option<Vec<u8>>, Ended> {
    let text = text.trim();
    if text == "*" {
        conn.error("501 5.7.0 Authentication aborted", host).await?;
        return Ok(None);
    }
    match STANDARD.decode(text) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(_) => {
            conn.error("501 5.5.2 Cannot decode response", host).await?;
            Ok(None)
        }
    }
}

/// The `Subject` header of `message` (folded lines unfolded), if it has one.
fn subject(message: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(message);
    let mut subject: Option<String> = None;
    for line in text.split("\r\n") {
        if line.is_empty() {
            break;
        }
        match subject.as_mut() {
            // A folded continuation of the subject.
            Some(value) if line.starts_with([' ', '\t']) => {
                value.push(' ');
                value.push_str(line.trim());
            }
            Some(_) => break,
            None => {
                if let Some((name, value)) = line.split_once(':')
                    && name.eq_ignore_ascii_case("subject")
                {
                    subject = Some(value.trim().to_string());
                }
            }
        }
    }
    subject.map(|s| s.chars().take(MAX_SUBJECT).collect())
}

/// A Postfix-looking queue id (11 hex digits), from the message and when and whence it came.
fn queue_id(digest: &[u8], session: &Session) -> String {
    let mut hasher = Sha256::new();
    hasher.update(digest);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos();
    hasher.update(nanos.to_le_bytes());
    hasher.update(session.peer.to_string().as_bytes());
    let id: String = hasher.finalize().iter().take(6).map(|b| format!("{b:02X}")).collect();
    id[..11].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelope_addresses_lose_their_brackets_and_parameters() {
        assert_eq!(address("FROM:<a@b.example> SIZE=100", "FROM:").as_deref(), Some("a@b.example"));
        assert_eq!(address("from: <>", "FROM:").as_deref(), Some(""));
        assert_eq!(address("To:c@d.example", "TO:").as_deref(), Some("c@d.example"));
        assert_eq!(address("c@d.example", "TO:"), None);
        assert_eq!(address("TO:<unterminated", "TO:"), None);
        assert_eq!(address("TÖ", "TO:"), None);
        assert_eq!(address(&format!("TO:<{}@x.example>", "a".repeat(400)), "TO:"), None);
    }

    #[test]
    fn the_subject_is_read_from_the_headers_only() {
        let message = b"From: x\r\nSubject: Invoice\r\n  overdue\r\nTo: y\r\n\r\nSubject: not this\r\n";
        assert_eq!(subject(message).as_deref(), Some("Invoice overdue"));
        assert_eq!(subject(b"From: x\r\n\r\nSubject: body\r\n"), None);
    }
}
