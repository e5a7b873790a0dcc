//! The telnet decoy: a telnetd's option negotiation, an Ubuntu `login:` / `Password:` dialogue that
//! logs every attempt, and the fake shell behind the credentials the INI names. The client's own
//! negotiation (`IAC …`) is stripped from its input before lines are read, so it never reaches a
//! username, a password or a command.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use async_trait::async_trait;
use tokio::io::{AsyncRead, ReadBuf};
use tokio::net::TcpStream;
use tokio::net::tcp::OwnedWriteHalf;

use crate::credential;
use crate::line::LineReader;
use crate::session::{Decoy, Session};
use crate::settings::{DEFAULT_USERS, Settings};
use crate::shell::{FakeShell, Outcome};
use crate::transcript::Recording;

const IAC: u8 = 255;
const DONT: u8 = 254;
const WILL: u8 = 251;
const SB: u8 = 250;
const SE: u8 = 240;
const ECHO: u8 = 1;
const SGA: u8 = 3;
const NAWS: u8 = 31;
const DO: u8 = 253;

/// What a telnetd sends first: it will echo (so the client stops echoing the password), it will not
/// wait for go-aheads, and it asks for the window size.
const NEGOTIATION: &[u8] = &[IAC, WILL, ECHO, IAC, WILL, SGA, IAC, DO, NAWS];

/// The longest subnegotiation (`IAC SB … IAC SE`) skipped; a longer one ends the session.
const MAX_SUBNEGOTIATION: usize = 1024;

/// Failed logins before `login` gives up.
const MAX_FAILURES: usize = 3;

/// `login:` prompts (empty usernames included) before `login` gives up.
const MAX_PROMPTS: usize = 10;

const WELCOME: &str = "Welcome to Ubuntu 22.04.4 LTS (GNU/Linux 5.15.0-105-generic x86_64)\r\n\r\n \
* Documentation:  https://help.ubuntu.com\r\n * Management:     https://landscape.canonical.com\r\n \
* Support:        https://ubuntu.com/pro\r\n\r\n";

struct Telnet {
    banner: String,
    hostname: String,
    users: Vec<(String, String)>,
}

pub fn decoy(settings: &Settings, hostname: &str) -> anyhow::Result<Arc<dyn Decoy>> {
    Ok(Arc::new(Telnet {
        banner: settings.get("banner").unwrap_or("Ubuntu 22.04.4 LTS").to_string(),
        hostname: hostname.to_string(),
        users: settings.users(DEFAULT_USERS),
    }))
}

#[async_trait]
impl Decoy for Telnet {
    async fn serve(&self, stream: TcpStream, session: Session) -> anyhow::Result<()> {
        let (read, write) = stream.into_split();
        let write = Arc::new(write);
        let echo = Arc::new(AtomicBool::new(false));
        let input = TelnetInput::new(read, Some(Echo { on: echo.clone(), to: write.clone() }));
        let mut conn = Conn {
            lines: LineReader::new(input, session.limits.max_line, session.limits.idle),
            write,
            echo,
            idle: session.limits.idle,
        };
        // A write that fails or stalls, like a line that cannot be read, just ends the session.
        let _ = self.dialogue(&mut conn, &session).await;
        Ok(())
    }
}

/// Why the dialogue stopped: the peer left, stalled, or broke the limits.
struct Ended;

impl Telnet {
    async fn dialogue(&self, conn: &mut Conn, session: &Session) -> Result<(), Ended> {
        conn.send(NEGOTIATION).await?;
        conn.send(format!("{}\r\n", self.banner).as_bytes()).await?;
        let Some(user) = self.login(conn, session).await? else { return Ok(()) };

        let mut recording = Recording::start(session, 80, 24);
        self.shell(conn, session, &user, &mut recording).await
    }

    /// The logged-in shell until `exit` or the connection's end, each answer and each line typed
    /// (as typed, and as its echo shows it) recorded.
    async fn shell(
        &self,
        conn: &mut Conn,
        session: &Session,
        user: &str,
        recording: &mut Recording,
    ) -> Result<(), Ended> {
        let mut shell = FakeShell::new(&self.hostname, user);
        let mut answer = WELCOME.to_string();
        loop {
            answer.push_str(&shell.prompt());
            recording.output(answer.as_bytes());
            conn.send(answer.as_bytes()).await?;
            let typed = conn.echoed_line().await?;
            recording.input(&[typed.as_slice(), b"\r"].concat());
            recording.output(&[erase(&typed).as_slice(), b"\r\n"].concat());
            let line = String::from_utf8_lossy(&erase(&typed)).into_owned();
            let command = line.trim();
            if command.is_empty() {
                answer.clear();
                continue;
            }
            session.shell_command(shell.user(), shell.cwd(), command);
            answer = match shell.run(command) {
                Outcome::Output(text) => text.replace('\n', "\r\n"),
                Outcome::Exit => {
                    recording.output(b"logout\r\n");
                    return conn.send(b"logout\r\n").await;
                }
            };
        }
    }

    /// The `login:` dialogue: the user who got in, or `None` once `login` gives up.
    async fn login(&self, conn: &mut Conn, session: &Session) -> Result<Option<String>, Ended> {
        let mut failures = 0;
        for _ in 0..MAX_PROMPTS {
            conn.send(format!("{} login: ", self.hostname).as_bytes()).await?;
            let user = String::from_utf8_lossy(&erase(&conn.echoed_line().await?)).trim().to_string();
            if user.is_empty() {
                continue;
            }
            conn.send(b"Password: ").await?;
            let password = erase(&conn.lines.next_line().await.map_err(|_| Ended)?);
            conn.send(b"\r\n").await?;

            let success = self.users.iter().any(|(u, p)| *u == user && p.as_bytes() == password.as_slice());
            let outcome = if success { "success" } else { "failure" };
            session.event("auth_attempt", credential::fields(&user, "plaintext", &password, Some(outcome)));
            if success {
                return Ok(Some(user));
            }
            conn.send(b"\r\nLogin incorrect\r\n").await?;
            failures += 1;
            if failures >= MAX_FAILURES {
                return Ok(None);
            }
        }
        Ok(None)
    }
}

/// One telnet connection: its lines (negotiation stripped) and where answers go.
struct Conn {
    lines: LineReader<TelnetInput<tokio::net::tcp::OwnedReadHalf>>,
    write: Arc<OwnedWriteHalf>,
    /// Set while the line being typed is echoed back (the username, a command; never a password).
    echo: Arc<AtomicBool>,
    idle: Duration,
}

impl Conn {
    /// Writes all of `bytes`, or gives up when the peer has not taken any for the idle time.
    async fn send(&self, mut bytes: &[u8]) -> Result<(), Ended> {
        while !bytes.is_empty() {
            tokio::time::timeout(self.idle, self.write.writable()).await.map_err(|_| Ended)?.map_err(|_| Ended)?;
            match self.write.try_write(bytes) {
                Ok(n) => bytes = &bytes[n..],
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => {}
                Err(_) => return Err(Ended),
            }
        }
        Ok(())
    }

    /// The next line, echoed back as it is typed.
    async fn echoed_line(&mut self) -> Result<Vec<u8>, Ended> {
        self.echo.store(true, Ordering::Relaxed);
        let line = self.lines.next_line().await;
        self.echo.store(false, Ordering::Relaxed);
        line.map_err(|_| Ended)
    }
}

/// A line as typed at a terminal: each backspace or DEL erases the byte before it.
fn erase(line: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(line.len());
    for &b in line {
        match b {
            0x08 | 0x7f => {
                out.pop();
            }
            _ => out.push(b),
        }
    }
    out
}

/// Where echoed input goes, and whether it is wanted now.
struct Echo<W> {
    on: Arc<AtomicBool>,
    to: Arc<W>,
}

/// Something echoed bytes can be written to without waiting: echo is best effort.
trait EchoSink {
    fn echo(&self, bytes: &[u8]);
}

impl EchoSink for OwnedWriteHalf {
    fn echo(&self, bytes: &[u8]) {
        // Echo is cosmetic: what the socket cannot take right now is dropped.
        let _ = self.try_write(bytes);
    }
}

/// Where the reader is in the telnet command syntax.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Data,
    /// After a `\r`: a `\n` or NUL that follows belongs to the same line end.
    AfterCr,
    /// After `IAC`.
    Iac,
    /// After `IAC WILL|WONT|DO|DONT`: the option byte.
    Option,
    /// Inside `IAC SB …`.
    Sub,
    /// Inside `IAC SB …`, after an `IAC`.
    SubIac,
}

/// The data bytes of a telnet stream: negotiation stripped (`IAC IAC` is a literal 0xff, `IAC SB …
/// IAC SE` skipped up to [`MAX_SUBNEGOTIATION`] bytes), NULs dropped, and every line end (`\r\n`,
/// `\r\0`, a lone `\r` or `\n`) made one `\n`. While echo is on, data bytes are echoed until the
/// line ends.
struct TelnetInput<R, W = OwnedWriteHalf> {
    inner: R,
    state: State,
    sub_len: usize,
    echo: Option<Echo<W>>,
    /// Bytes echoed on the current line, which a backspace may erase.
    echoed: usize,
}

impl<R, W> TelnetInput<R, W> {
    fn new(inner: R, echo: Option<Echo<W>>) -> Self {
        TelnetInput { inner, state: State::Data, sub_len: 0, echo, echoed: 0 }
    }
}

impl<R, W: EchoSink> TelnetInput<R, W> {
    /// Filters `input` into `out`; an error when a subnegotiation runs past its bound.
    fn filter(&mut self, input: &[u8], out: &mut Vec<u8>) -> io::Result<()> {
        let mut echo_out = Vec::new();
        for &b in input {
            self.state = match self.state {
                State::Data | State::AfterCr => match b {
                    IAC => State::Iac,
                    b'\n' | 0 if self.state == State::AfterCr => State::Data,
                    b'\r' | b'\n' => {
                        out.push(b'\n');
                        if self.echoing() {
                            echo_out.extend_from_slice(b"\r\n");
                            if let Some(echo) = &self.echo {
                                echo.on.store(false, Ordering::Relaxed);
                            }
                        }
                        self.echoed = 0;
                        if b == b'\r' { State::AfterCr } else { State::Data }
                    }
                    0 => State::Data,
                    _ => {
                        self.data(b, out, &mut echo_out, self.echoing());
                        State::Data
                    }
                },
                State::Iac => match b {
                    IAC => {
                        self.data(IAC, out, &mut echo_out, self.echoing());
                        State::Data
                    }
                    WILL..=DONT => State::Option,
                    SB => {
                        self.sub_len = 0;
                        State::Sub
                    }
                    _ => State::Data,
                },
                State::Option => State::Data,
                State::SubIac if b == SE => State::Data,
                State::Sub | State::SubIac => {
                    self.sub_len += 1;
                    if self.sub_len > MAX_SUBNEGOTIATION {
                        return Err(io::Error::new(io::ErrorKind::InvalidData, "telnet subnegotiation too long"));
                    }
                    // `IAC IAC` inside is an escaped 0xff; `IAC` then anything but `SE` is lenience.
                    if b == IAC && self.state == State::Sub { State::SubIac } else { State::Sub }
                }
            };
        }
        if !echo_out.is_empty()
            && let Some(echo) = &self.echo
        {
            echo.to.echo(&echo_out);
        }
        Ok(())
    }

    fn echoing(&self) -> bool {
        self.echo.as_ref().is_some_and(|e| e.on.load(Ordering::Relaxed))
    }

    /// One data byte: kept, and echoed (a backspace as one erased character) when echo is on.
    fn data(&mut self, b: u8, out: &mut Vec<u8>, echo_out: &mut Vec<u8>, echoing: bool) {
        out.push(b);
        if !echoing {
            return;
        }
        match b {
            0x08 | 0x7f if self.echoed > 0 => {
                self.echoed -= 1;
                echo_out.extend_from_slice(b"\x08 \x08");
            }
            0x20..=0x7e | 0x80.. => {
                self.echoed += 1;
                echo_out.push(b);
            }
            _ => {}
        }
    }
}

impl<R: AsyncRead + Unpin, W: EchoSink> AsyncRead for TelnetInput<R, W> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let mut chunk = [0u8; 1024];
        let room = buf.remaining().min(chunk.len());
        if room == 0 {
            return Poll::Ready(Ok(()));
        }
        // Negotiation alone yields no data: read on until some arrives (or the peer stops, which
        // the caller's idle timeout sees), since an empty read would mean the end of the stream.
        loop {
            let mut raw = ReadBuf::new(&mut chunk[..room]);
            ready!(Pin::new(&mut this.inner).poll_read(cx, &mut raw))?;
            let input = raw.filled();
            if input.is_empty() {
                return Poll::Ready(Ok(()));
            }
            let mut out = Vec::with_capacity(input.len());
            this.filter(input, &mut out)?;
            if !out.is_empty() {
                // Filtering never lengthens the input, which fit in `room`.
                buf.put_slice(&out);
                return Poll::Ready(Ok(()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    #[derive(Default)]
    struct Recorded(Mutex<Vec<u8>>);

    impl EchoSink for Recorded {
        fn echo(&self, bytes: &[u8]) {
            self.0.lock().unwrap().extend_from_slice(bytes);
        }
    }

    async fn lines(input: &[u8]) -> Vec<Result<Vec<u8>, crate::line::LineError>> {
        let filtered: TelnetInput<&[u8], Recorded> = TelnetInput::new(input, None);
        let mut reader = LineReader::new(filtered, 64, Duration::from_secs(1));
        let mut out = Vec::new();
        loop {
            let line = reader.next_line().await;
            let end = line.is_err();
            out.push(line);
            if end {
                return out;
            }
        }
    }

    #[tokio::test]
    async fn negotiation_is_stripped_and_line_ends_are_one() {
        let input =
            b"\xff\xfd\x01\xff\xfb\x1f\xff\xfa\x1f\x00\x50\x00\x0a\xff\xf0ro\xff\xf1ot\r\x00pa\xff\xffss\r\nx\ry\n";
        let got = lines(input).await;
        assert_eq!(got[0].as_deref(), Ok(&b"root"[..]));
        assert_eq!(got[1].as_deref(), Ok(&b"pa\xffss"[..]));
        assert_eq!(got[2].as_deref(), Ok(&b"x"[..]));
        assert_eq!(got[3].as_deref(), Ok(&b"y"[..]));
        assert_eq!(got[4], Err(crate::line::LineError::Closed));
    }

    #[tokio::test]
    async fn an_endless_subnegotiation_ends_the_stream() {
        let mut input = vec![IAC, SB, 24];
        input.extend(std::iter::repeat_n(b'a', 4096));
        input.extend_from_slice(b"\r\nroot\r\n");
        let got = lines(&input).await;
        assert_eq!(got[0], Err(crate::line::LineError::Closed));
    }

    #[test]
    fn echo_stops_at_the_end_of_the_line_and_shows_backspaces() {
        let sink = Arc::new(Recorded::default());
        let on = Arc::new(AtomicBool::new(true));
        let mut filter = TelnetInput::new((), Some(Echo { on: on.clone(), to: sink.clone() }));
        let mut out = Vec::new();
        filter.filter(b"\x7fab\x7fc\r\nsecret\r\n", &mut out).unwrap();
        assert_eq!(out, b"\x7fab\x7fc\nsecret\n");
        assert_eq!(sink.0.lock().unwrap().as_slice(), b"ab\x08 \x08c\r\n");
        assert!(!on.load(Ordering::Relaxed));
        assert_eq!(erase(b"\x7fab\x7fc"), b"ac");
    }
}
