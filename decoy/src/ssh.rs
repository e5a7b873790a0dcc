//! The SSH decoy: a real SSH server (russh) that looks like Ubuntu's OpenSSH, logs the client's
//! banner and key-exchange order, every password and public key tried, and gives the listed
//! credentials a fake shell (`shell` and `exec`) whose command lines are logged like DECNET's bash.
//! Nothing is forwarded: port forwarding, agent, X11 and subsystems (sftp) are refused.

use std::borrow::Cow;
use std::collections::HashMap;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use anyhow::anyhow;
use async_trait::async_trait;
use russh::keys::PrivateKey;
use russh::keys::ssh_key::private::Ed25519Keypair;
use russh::server::{Auth, ChannelOpenHandle, Config, Handler, Msg, PublicKeyOffer, Session as SshSession};
use russh::{Channel, ChannelId, MethodKind, MethodSet, Preferred, Pty, SshId, cipher, compression, kex, mac};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

use crate::credential;
use crate::session::{Decoy, Session};
use crate::settings::{DEFAULT_USERS, Settings};
use crate::shell::{FakeShell, Outcome};

/// What the server says it is when the INI names no banner.
const DEFAULT_BANNER: &str = "SSH-2.0-OpenSSH_8.9p1 Ubuntu-3ubuntu0.10";
/// Failed logins per connection before the server hangs up (OpenSSH's `MaxAuthTries`).
const MAX_AUTH_ATTEMPTS: usize = 6;
/// Session channels one connection may hold open at a time.
const MAX_CHANNELS: usize = 2;
/// An identification line is at most 255 bytes with its CR LF (RFC 4253 §4.2).
const MAX_BANNER: usize = 255;
/// The largest first packet (the client's KEXINIT) read for its algorithm lists (RFC 4253 §6.1).
const MAX_KEXINIT: usize = 35_000;
/// SSH_MSG_KEXINIT.
const MSG_KEXINIT: u8 = 20;

/// Ubuntu 22.04's sshd, as far as russh has the algorithms (no sntrup761, umac or DSA/RSA host
/// keys): a scanner comparing the offer with the banner should find nothing odd.
const KEX: &[kex::Name] = &[
    kex::CURVE25519,
    kex::CURVE25519_PRE_RFC_8731,
    kex::ECDH_SHA2_NISTP256,
    kex::ECDH_SHA2_NISTP384,
    kex::ECDH_SHA2_NISTP521,
    kex::DH_GEX_SHA256,
    kex::DH_G16_SHA512,
    kex::DH_G18_SHA512,
    kex::DH_G14_SHA256,
    kex::EXTENSION_OPENSSH_STRICT_KEX_AS_SERVER,
];
const CIPHERS: &[cipher::Name] = &[
    cipher::CHACHA20_POLY1305,
    cipher::AES_128_CTR,
    cipher::AES_192_CTR,
    cipher::AES_256_CTR,
    cipher::AES_128_GCM,
    cipher::AES_256_GCM,
];
const MACS: &[mac::Name] = &[
    mac::HMAC_SHA256_ETM,
    mac::HMAC_SHA512_ETM,
    mac::HMAC_SHA1_ETM,
    mac::HMAC_SHA256,
    mac::HMAC_SHA512,
    mac::HMAC_SHA1,
];
const COMPRESSION: &[compression::Name] = &[compression::NONE, compression::ZLIB_LEGACY];

/// What an interactive login prints before its first prompt.
const MOTD: &str = "Welcome to Ubuntu 22.04.4 LTS (GNU/Linux 5.15.0-105-generic x86_64)\r\n\r\n \
* Documentation:  https://help.ubuntu.com\r\n * Management:     https://landscape.canonical.com\r\n \
* Support:        https://ubuntu.com/pro\r\n\r\n";

pub fn decoy(settings: &Settings, hostname: &str) -> anyhow::Result<Arc<dyn Decoy>> {
    Ok(Arc::new(SshDecoy {
        key: host_key()?,
        banner: server_banner(settings.get("banner")),
        users: settings.users(DEFAULT_USERS).into(),
        hostname: settings.get("hostname").unwrap_or(hostname).into(),
    }))
}

struct SshDecoy {
    /// Made at start and kept for the process lifetime, so a returning client sees the same host.
    key: PrivateKey,
    banner: String,
    users: Arc<[(String, String)]>,
    /// The name the fake shell answers with.
    hostname: Arc<str>,
}

/// A fresh Ed25519 host key, from the operating system's random source (through rustls's ring
/// provider, which this crate already links).
fn host_key() -> anyhow::Result<PrivateKey> {
    let mut seed = [0u8; 32];
    rustls::crypto::ring::default_provider()
        .secure_random
        .fill(&mut seed)
        .map_err(|_| anyhow!("no randomness for the SSH host key"))?;
    Ok(PrivateKey::from(Ed25519Keypair::from_seed(&seed)))
}

/// The identification line to send: the configured one (made one line, `SSH-2.0-` added when
/// missing, cut to the protocol's length), else Ubuntu's OpenSSH.
fn server_banner(configured: Option<&str>) -> String {
    let Some(text) = configured.map(|t| t.replace(['\r', '\n'], " ")).filter(|t| !t.trim().is_empty()) else {
        return DEFAULT_BANNER.to_string();
    };
    let text = text.trim();
    let mut banner = if text.starts_with("SSH-") { text.to_string() } else { format!("SSH-2.0-{text}") };
    // 255 bytes with CR LF; the text is cut on a character boundary.
    while banner.len() > MAX_BANNER - 2 {
        banner.pop();
    }
    banner
}

#[async_trait]
impl Decoy for SshDecoy {
    async fn serve(&self, stream: TcpStream, session: Session) -> anyhow::Result<()> {
        let config = Arc::new(Config {
            server_id: SshId::Standard(Cow::Owned(self.banner.clone())),
            methods: MethodSet::from(&[MethodKind::PublicKey, MethodKind::Password][..]),
            // OpenSSH's pace on a wrong password; the first `none` probe is answered at once.
            auth_rejection_time: Duration::from_secs(1),
            auth_rejection_time_initial: Some(Duration::ZERO),
            keys: vec![self.key.clone()],
            max_auth_attempts: MAX_AUTH_ATTEMPTS,
            inactivity_timeout: Some(session.limits.idle),
            preferred: Preferred {
                kex: Cow::Borrowed(KEX),
                cipher: Cow::Borrowed(CIPHERS),
                mac: Cow::Borrowed(MACS),
                compression: Cow::Borrowed(COMPRESSION),
                ..Preferred::default()
            },
            ..Config::default()
        });
        // russh runs the connection in a task of its own; when this future ends early (session
        // time limit, shutdown) the guard cancels the token and the tapped stream fails, which ends
        // that task too.
        let stop = CancellationToken::new();
        let _stop_on_drop = stop.clone().drop_guard();
        let stream = Tap::new(stream, session.clone(), stop.cancelled_owned());
        let handler = Connection {
            session,
            users: self.users.clone(),
            hostname: self.hostname.clone(),
            attempts: 0,
            user: None,
            channels: HashMap::new(),
        };
        let running = russh::server::run_stream(config, stream, handler).await?;
        running.await?;
        Ok(())
    }
}

/// One client's connection, as russh calls it back.
struct Connection {
    session: Session,
    users: Arc<[(String, String)]>,
    hostname: Arc<str>,
    /// Passwords and public keys tried so far.
    attempts: usize,
    /// Who logged in, once someone has.
    user: Option<String>,
    channels: HashMap<ChannelId, ChannelState>,
}

/// A session channel: whether it asked for a terminal, and its shell once it runs one.
#[derive(Default)]
struct ChannelState {
    pty: bool,
    shell: Option<Terminal>,
}

impl Connection {
    /// Counts an attempt; past the limit the connection ends (public keys do not count towards
    /// russh's own limit, so a client could otherwise offer keys forever).
    fn count_attempt(&mut self) -> Result<(), russh::Error> {
        self.attempts += 1;
        if self.attempts > MAX_AUTH_ATTEMPTS { Err(russh::Error::Disconnect) } else { Ok(()) }
    }

    /// Sends a finished channel its exit status and closes it.
    fn finish(&mut self, channel: ChannelId, ssh: &mut SshSession) -> Result<(), russh::Error> {
        self.channels.remove(&channel);
        ssh.exit_status_request(channel, 0)?;
        ssh.eof(channel)?;
        ssh.close(channel)
    }
}

impl Handler for Connection {
    type Error = russh::Error;

    async fn auth_password(&mut self, user: &str, password: &str) -> Result<Auth, Self::Error> {
        self.count_attempt()?;
        let accepted = self.users.iter().any(|(u, p)| u == user && p == password);
        let outcome = if accepted { "success" } else { "failure" };
        self.session.event("auth_attempt", credential::fields(user, "plaintext", password.as_bytes(), Some(outcome)));
        if accepted {
            self.user = Some(user.to_string());
            Ok(Auth::Accept)
        } else {
            Ok(Auth::reject())
        }
    }

    /// Logged when offered, whether or not a signature came with it, and refused: keys never open
    /// the shell.
    async fn auth_publickey_offered(&mut self, user: &str, offer: PublicKeyOffer<'_>) -> Result<Auth, Self::Error> {
        self.count_attempt()?;
        let text = offer.public_key.to_openssh().unwrap_or_default();
        let fields = credential::fields(user, "ssh_publickey", text.trim().as_bytes(), Some("failure"));
        self.session.event("auth_attempt", fields);
        Ok(Auth::reject())
    }

    async fn channel_open_session(
        &mut self,
        channel: Channel<Msg>,
        reply: ChannelOpenHandle,
        _ssh: &mut SshSession,
    ) -> Result<(), Self::Error> {
        // The channel's own message stream is not read (the callbacks below get everything):
        // dropping it keeps russh from queueing for it. Dropping `reply` refuses the channel.
        if self.user.is_some() && self.channels.len() < MAX_CHANNELS {
            self.channels.insert(channel.id(), ChannelState::default());
            reply.accept().await;
        }
        Ok(())
    }

    async fn pty_request(
        &mut self,
        channel: ChannelId,
        _term: &str,
        _cols: u32,
        _rows: u32,
        _pix_width: u32,
        _pix_height: u32,
        _modes: &[(Pty, u32)],
        ssh: &mut SshSession,
    ) -> Result<(), Self::Error> {
        match self.channels.get_mut(&channel) {
            Some(state) if state.shell.is_none() => {
                state.pty = true;
                ssh.channel_success(channel)
            }
            _ => refuse(channel, ssh),
        }
    }

    /// Ubuntu's sshd takes `LANG` and `LC_*` (`AcceptEnv`) and ignores the rest.
    async fn env_request(
        &mut self,
        channel: ChannelId,
        name: &str,
        _value: &str,
        ssh: &mut SshSession,
    ) -> Result<(), Self::Error> {
        if self.channels.contains_key(&channel) && (name == "LANG" || name.starts_with("LC_")) {
            ssh.channel_success(channel)
        } else {
            refuse(channel, ssh)
        }
    }

    async fn shell_request(&mut self, channel: ChannelId, ssh: &mut SshSession) -> Result<(), Self::Error> {
        let (Some(user), Some(state)) = (&self.user, self.channels.get_mut(&channel)) else {
            return refuse(channel, ssh);
        };
        if state.shell.is_some() {
            return refuse(channel, ssh);
        }
        let terminal = Terminal::new(FakeShell::new(&self.hostname, user), state.pty);
        ssh.channel_success(channel)?;
        if state.pty {
            ssh.data(channel, format!("{MOTD}{}", terminal.shell.prompt()).into_bytes())?;
        }
        state.shell = Some(terminal);
        Ok(())
    }

    async fn exec_request(&mut self, channel: ChannelId, data: &[u8], ssh: &mut SshSession) -> Result<(), Self::Error> {
        let (Some(user), Some(state)) = (&self.user, self.channels.get(&channel)) else {
            return refuse(channel, ssh);
        };
        if state.shell.is_some() {
            return refuse(channel, ssh);
        }
        let mut shell = FakeShell::new(&self.hostname, user);
        let line = String::from_utf8_lossy(&data[..data.len().min(self.session.limits.max_line)]).into_owned();
        ssh.channel_success(channel)?;
        self.session.shell_command(shell.user(), shell.cwd(), &line);
        if let Outcome::Output(text) = shell.run(&line) {
            ssh.data(channel, line_ends(&text, state.pty))?;
        }
        self.finish(channel, ssh)
    }

    async fn subsystem_request(
        &mut self,
        channel: ChannelId,
        _name: &str,
        ssh: &mut SshSession,
    ) -> Result<(), Self::Error> {
        refuse(channel, ssh)
    }

    async fn x11_request(
        &mut self,
        channel: ChannelId,
        _single_connection: bool,
        _protocol: &str,
        _cookie: &str,
        _screen: u32,
        ssh: &mut SshSession,
    ) -> Result<(), Self::Error> {
        refuse(channel, ssh)
    }

    async fn data(&mut self, channel: ChannelId, data: &[u8], ssh: &mut SshSession) -> Result<(), Self::Error> {
        let Some(terminal) = self.channels.get_mut(&channel).and_then(|s| s.shell.as_mut()) else {
            return Ok(());
        };
        // A client that does not read its output (its window is full) gets no more: what it types
        // meanwhile is dropped, so the output russh queues for it stays bounded.
        if ssh.has_pending_data(channel) {
            return Ok(());
        }
        let typed = terminal.feed(data, &self.session);
        if !typed.output.is_empty() {
            ssh.data(channel, typed.output)?;
        }
        if typed.exit { self.finish(channel, ssh) } else { Ok(()) }
    }

    /// The client has no more input: a shell reading a script runs its last, unterminated line
    /// and exits, as bash does at end of input.
    async fn channel_eof(&mut self, channel: ChannelId, ssh: &mut SshSession) -> Result<(), Self::Error> {
        let Some(terminal) = self.channels.get_mut(&channel).and_then(|s| s.shell.as_mut()) else {
            return Ok(());
        };
        let output = terminal.end_of_input(&self.session);
        if !output.is_empty() {
            ssh.data(channel, output)?;
        }
        self.finish(channel, ssh)
    }

    async fn channel_close(&mut self, channel: ChannelId, _ssh: &mut SshSession) -> Result<(), Self::Error> {
        self.channels.remove(&channel);
        Ok(())
    }
}

/// Answers a channel request that is refused.
fn refuse(channel: ChannelId, ssh: &mut SshSession) -> Result<(), russh::Error> {
    ssh.channel_failure(channel)
}

/// Output text for the client: `\r\n` line ends when a terminal is attached (its `onlcr`),
/// as-is otherwise.
fn line_ends(text: &str, pty: bool) -> Vec<u8> {
    if pty { text.replace('\n', "\r\n").into_bytes() } else { text.as_bytes().to_vec() }
}

/// The shell's side of a session channel: with a pty, a line editor over keystrokes (echo,
/// backspace, Ctrl-C, Ctrl-D, arrow keys swallowed) and a prompt; without one, plain lines read as
/// bash reads a script.
struct Terminal {
    shell: FakeShell,
    pty: bool,
    line: Vec<u8>,
    /// Inside an escape sequence (an arrow key, say), which is swallowed.
    escape: Escape,
    /// The last byte ended a line with CR, so an LF right after it is the same line end.
    after_cr: bool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Escape {
    None,
    /// After ESC.
    Started,
    /// After `ESC [` or `ESC O`, until the final byte.
    Sequence,
}

/// What a batch of keystrokes produced.
struct Typed {
    output: Vec<u8>,
    exit: bool,
}

impl Terminal {
    fn new(shell: FakeShell, pty: bool) -> Terminal {
        Terminal { shell, pty, line: Vec::new(), escape: Escape::None, after_cr: false }
    }

    fn feed(&mut self, data: &[u8], session: &Session) -> Typed {
        let mut output = Vec::new();
        for &byte in data {
            let after_cr = std::mem::replace(&mut self.after_cr, byte == b'\r');
            match self.escape {
                Escape::Started => {
                    self.escape = if byte == b'[' || byte == b'O' { Escape::Sequence } else { Escape::None };
                    continue;
                }
                Escape::Sequence => {
                    if (0x40..=0x7e).contains(&byte) {
                        self.escape = Escape::None;
                    }
                    continue;
                }
                Escape::None => {}
            }
            match byte {
                b'\n' if after_cr => {}
                b'\r' | b'\n' => {
                    if self.pty {
                        output.extend_from_slice(b"\r\n");
                    }
                    if self.enter(session, &mut output) {
                        return Typed { output, exit: true };
                    }
                }
                0x1b => self.escape = Escape::Started,
                0x7f | 0x08 => {
                    if self.erase() && self.pty {
                        output.extend_from_slice(b"\x08 \x08");
                    }
                }
                // Ctrl-C: the line is dropped.
                0x03 if self.pty => {
                    self.line.clear();
                    output.extend_from_slice(format!("^C\r\n{}", self.shell.prompt()).as_bytes());
                }
                // Ctrl-D on an empty line logs out; elsewhere it does nothing.
                0x04 if self.pty => {
                    if self.line.is_empty() {
                        output.extend_from_slice(b"logout\r\n");
                        return Typed { output, exit: true };
                    }
                }
                // Ctrl-U: the line is erased.
                0x15 if self.pty => {
                    while self.erase() {
                        output.extend_from_slice(b"\x08 \x08");
                    }
                }
                // Tab and other control characters: no completion, nothing shown.
                0x00..=0x1f => {}
                _ => {
                    if self.line.len() < session.limits.max_line {
                        self.line.push(byte);
                        if self.pty {
                            output.push(byte);
                        }
                    }
                }
            }
        }
        Typed { output, exit: false }
    }

    /// Removes the last character typed (all its UTF-8 bytes); false when the line was empty.
    fn erase(&mut self) -> bool {
        while let Some(byte) = self.line.pop() {
            if byte & 0xc0 != 0x80 {
                return true;
            }
        }
        false
    }

    /// Runs the line typed, writing its output and the next prompt; true when the shell exits.
    fn enter(&mut self, session: &Session, output: &mut Vec<u8>) -> bool {
        let line = String::from_utf8_lossy(&std::mem::take(&mut self.line)).into_owned();
        if !line.trim().is_empty() {
            session.shell_command(self.shell.user(), self.shell.cwd(), &line);
            match self.shell.run(&line) {
                Outcome::Output(text) => output.extend_from_slice(&line_ends(&text, self.pty)),
                Outcome::Exit => {
                    if self.pty {
                        output.extend_from_slice(b"logout\r\n");
                    }
                    return true;
                }
            }
        }
        if self.pty {
            output.extend_from_slice(self.shell.prompt().as_bytes());
        }
        false
    }

    /// The client sent EOF: a last line without its end still runs (a script's last line).
    fn end_of_input(&mut self, session: &Session) -> Vec<u8> {
        let mut output = Vec::new();
        if !self.pty && !self.line.is_empty() {
            self.enter(session, &mut output);
        }
        output
    }
}

/// The accepted TCP stream as russh reads and writes it, with two additions: the client's first
/// bytes are copied aside (at most its identification line and first packet) and logged as
/// `ssh_client_banner`, and the stream fails once `stop` fires, so the russh task never outlives
/// the session.
struct Tap<S> {
    inner: S,
    capture: Option<Capture>,
    stop: Pin<Box<WaitForCancellationFutureOwned>>,
}

impl<S> Tap<S> {
    fn new(inner: S, session: Session, stop: WaitForCancellationFutureOwned) -> Tap<S> {
        Tap { inner, capture: Some(Capture { session, bytes: Vec::new() }), stop: Box::pin(stop) }
    }

    fn stopped(&mut self, cx: &mut Context<'_>) -> bool {
        self.stop.as_mut().poll(cx).is_ready()
    }
}

fn aborted() -> io::Error {
    io::Error::new(io::ErrorKind::ConnectionAborted, "session ended")
}

impl<S: AsyncRead + Unpin> AsyncRead for Tap<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.stopped(cx) {
            return Poll::Ready(Err(aborted()));
        }
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let (Poll::Ready(Ok(())), Some(capture)) = (&polled, &mut this.capture)
            && capture.add(&buf.filled()[before..])
        {
            capture.emit();
            this.capture = None;
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Tap<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        // A client that stops reading must not hold the write (and the task) past the session.
        if self.stopped(cx) {
            return Poll::Ready(Err(aborted()));
        }
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.stopped(cx) {
            return Poll::Ready(Err(aborted()));
        }
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

impl<S> Drop for Tap<S> {
    /// A client that left (or was cut off) before its first packet was complete is still logged
    /// with whatever it sent.
    fn drop(&mut self) {
        if let Some(capture) = self.capture.take()
            && !capture.bytes.is_empty()
        {
            capture.emit();
        }
    }
}

/// The client's first bytes: its identification line, then its KEXINIT packet.
struct Capture {
    session: Session,
    bytes: Vec<u8>,
}

impl Capture {
    /// Adds bytes read; true once there is enough to log (or nothing more worth waiting for).
    fn add(&mut self, read: &[u8]) -> bool {
        let room = (MAX_BANNER + 4 + MAX_KEXINIT).saturating_sub(self.bytes.len());
        self.bytes.extend_from_slice(&read[..read.len().min(room)]);
        let Some(end) = self.bytes.iter().take(MAX_BANNER).position(|&b| b == b'\n') else {
            // No line end within the longest banner: it is not SSH, and russh gives up too.
            return self.bytes.len() >= MAX_BANNER;
        };
        if !self.bytes.starts_with(b"SSH-") {
            return true;
        }
        let packet = &self.bytes[end + 1..];
        match packet.get(..4) {
            None => false,
            Some(length) => {
                let length = u32::from_be_bytes([length[0], length[1], length[2], length[3]]) as usize;
                length > MAX_KEXINIT || packet.len() >= 4 + length
            }
        }
    }

    /// The identification line (or, when there is none, the first bytes) and the key exchange
    /// methods of the client's KEXINIT in its order of preference, when it came.
    fn banner_and_kex(&self) -> (String, Option<String>) {
        let Some(end) = self.bytes.iter().take(MAX_BANNER).position(|&b| b == b'\n') else {
            return (credential::printable(&self.bytes[..self.bytes.len().min(MAX_BANNER)]), None);
        };
        let line = &self.bytes[..end];
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        (credential::printable(line), kex_methods(&self.bytes[end + 1..]))
    }

    fn emit(&self) {
        let (banner, kex) = self.banner_and_kex();
        let mut fields = vec![("client_banner", banner)];
        if let Some(kex) = kex {
            fields.push(("kex", kex));
        }
        self.session.event("ssh_client_banner", fields);
    }
}

/// The first name-list of an unencrypted KEXINIT packet (RFC 4253 §6 and §7.1): `uint32
/// packet_length, byte padding_length, byte 20, byte[16] cookie, name-list kex_algorithms, …`.
fn kex_methods(packet: &[u8]) -> Option<String> {
    let length = u32::from_be_bytes(packet.get(..4)?.try_into().ok()?) as usize;
    let payload = packet.get(5..4 + length)?;
    if payload.first() != Some(&MSG_KEXINIT) {
        return None;
    }
    let names = payload.get(17..)?;
    let names_length = u32::from_be_bytes(names.get(..4)?.try_into().ok()?) as usize;
    let list = names.get(4..4usize.checked_add(names_length)?)?;
    Some(credential::printable(list))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_banner_is_one_ssh_line() {
        assert_eq!(server_banner(None), DEFAULT_BANNER);
        assert_eq!(server_banner(Some("OpenSSH_7.4")), "SSH-2.0-OpenSSH_7.4");
        assert_eq!(server_banner(Some("SSH-2.0-dropbear_2022.83")), "SSH-2.0-dropbear_2022.83");
        assert_eq!(server_banner(Some("x\r\nSSH-2.0-y")), "SSH-2.0-x  SSH-2.0-y");
        assert_eq!(server_banner(Some(&"é".repeat(300))).len(), 252);
    }

    #[test]
    fn the_kex_list_is_read_from_the_first_packet() {
        let names = b"curve25519-sha256,ext-info-c";
        let mut payload = vec![MSG_KEXINIT];
        payload.extend_from_slice(&[7; 16]);
        payload.extend_from_slice(&(names.len() as u32).to_be_bytes());
        payload.extend_from_slice(names);
        payload.extend_from_slice(&[0; 40]);
        let mut packet = ((payload.len() + 1 + 4) as u32).to_be_bytes().to_vec();
        packet.push(4);
        packet.extend_from_slice(&payload);
        packet.extend_from_slice(&[0; 4]);
        assert_eq!(kex_methods(&packet).as_deref(), Some("curve25519-sha256,ext-info-c"));
        assert_eq!(kex_methods(&packet[..20]), None);
        assert_eq!(kex_methods(&[0xff; 64]), None);
        assert_eq!(kex_methods(&[]), None);
    }
}
