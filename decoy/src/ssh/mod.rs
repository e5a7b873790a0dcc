//! The SSH decoy: a real SSH server (russh) that looks like Ubuntu's OpenSSH, logs the client's
//! banner and key-exchange order, every password and public key tried, and gives the listed
//! credentials a fake shell (`shell` and `exec`) whose command lines are logged like DECNET's bash.
//! Nothing is forwarded: port forwarding, agent, X11 and subsystems (sftp) are refused.

mod tap;
mod terminal;

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::anyhow;
use async_trait::async_trait;
use russh::keys::PrivateKey;
use russh::keys::ssh_key::private::Ed25519Keypair;
use russh::server::{Auth, ChannelOpenHandle, Config, Handler, Msg, PublicKeyOffer, Session as SshSession};
use russh::{Channel, ChannelId, MethodKind, MethodSet, Preferred, Pty, SshId, cipher, compression, kex, mac};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

use crate::credential;
use crate::session::{Decoy, Session};
use crate::settings::{DEFAULT_USERS, Settings};
use crate::shell::{FakeShell, Outcome};
use crate::transcript::Recording;

use tap::Tap;
use terminal::{Terminal, line_ends};

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
        hostname: hostname.into(),
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

/// A session channel: whether it asked for a terminal (and its size), and its shell, recorded,
/// once it runs one.
#[derive(Default)]
struct ChannelState {
    pty: bool,
    size: (u32, u32),
    shell: Option<Terminal>,
    recording: Option<Recording>,
}

impl Connection {
    /// Counts an attempt; past the limit the connection ends (public keys do not count towards
    /// russh's own limit, so a client could otherwise offer keys forever).
    fn count_attempt(&mut self) -> Result<(), russh::Error> {
        self.attempts += 1;
        if self.attempts > MAX_AUTH_ATTEMPTS { Err(russh::Error::Disconnect) } else { Ok(()) }
    }

    /// Drops a channel's state; its shell session, if it had one, is logged as recorded.
    fn forget(&mut self, channel: ChannelId) {
        self.channels.remove(&channel);
    }

    /// Sends `data` to the channel, recording it as the shell's output.
    fn send(
        state: &mut ChannelState,
        channel: ChannelId,
        data: Vec<u8>,
        ssh: &mut SshSession,
    ) -> Result<(), russh::Error> {
        if let Some(recording) = &mut state.recording {
            recording.output(&data);
        }
        ssh.data(channel, data)
    }

    /// Sends a finished channel its exit status and closes it.
    fn finish(&mut self, channel: ChannelId, ssh: &mut SshSession) -> Result<(), russh::Error> {
        self.forget(channel);
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
        cols: u32,
        rows: u32,
        _pix_width: u32,
        _pix_height: u32,
        _modes: &[(Pty, u32)],
        ssh: &mut SshSession,
    ) -> Result<(), Self::Error> {
        match self.channels.get_mut(&channel) {
            Some(state) if state.shell.is_none() => {
                state.pty = true;
                state.size = (cols, rows);
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
        state.recording = Some(Recording::start(&self.session, state.size.0, state.size.1));
        if state.pty {
            let greeting = format!("{MOTD}{}", terminal.shell.prompt()).into_bytes();
            Self::send(state, channel, greeting, ssh)?;
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
        let Some(state) = self.channels.get_mut(&channel) else { return Ok(()) };
        let Some(terminal) = state.shell.as_mut() else { return Ok(()) };
        // A client that does not read its output (its window is full) gets no more: what it types
        // meanwhile is dropped, so the output russh queues for it stays bounded.
        if ssh.has_pending_data(channel) {
            return Ok(());
        }
        let typed = terminal.feed(data, &self.session);
        if let Some(recording) = &mut state.recording {
            recording.input(data);
        }
        if !typed.output.is_empty() {
            Self::send(state, channel, typed.output, ssh)?;
        }
        if typed.exit { self.finish(channel, ssh) } else { Ok(()) }
    }

    /// The client has no more input: a shell reading a script runs its last, unterminated line
    /// and exits, as bash does at end of input.
    async fn channel_eof(&mut self, channel: ChannelId, ssh: &mut SshSession) -> Result<(), Self::Error> {
        let Some(state) = self.channels.get_mut(&channel) else { return Ok(()) };
        let Some(terminal) = state.shell.as_mut() else { return Ok(()) };
        let output = terminal.end_of_input(&self.session);
        if !output.is_empty() {
            Self::send(state, channel, output, ssh)?;
        }
        self.finish(channel, ssh)
    }

    async fn channel_close(&mut self, channel: ChannelId, _ssh: &mut SshSession) -> Result<(), Self::Error> {
        self.forget(channel);
        Ok(())
    }
}

/// Answers a channel request that is refused.
fn refuse(channel: ChannelId, ssh: &mut SshSession) -> Result<(), russh::Error> {
    ssh.channel_failure(channel)
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
}
