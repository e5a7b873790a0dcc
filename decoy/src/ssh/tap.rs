//! The accepted stream as russh sees it, copying aside the client's first bytes (its banner and
//! key-exchange order) and failing once the session is over.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use svc_core::text::printable;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_util::sync::WaitForCancellationFutureOwned;

use crate::session::Session;

use super::{MAX_BANNER, MAX_KEXINIT, MSG_KEXINIT};

/// The accepted TCP stream as russh reads and writes it, with two additions: the client's first
/// bytes are copied aside (at most its identification line and first packet) and logged as
/// `ssh_client_banner`, and the stream fails once `stop` fires, so the russh task never outlives
/// the session.
pub(super) struct Tap<S> {
    inner: S,
    capture: Option<Capture>,
    stop: Pin<Box<WaitForCancellationFutureOwned>>,
}

impl<S> Tap<S> {
    pub(super) fn new(inner: S, session: Session, stop: WaitForCancellationFutureOwned) -> Tap<S> {
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
            return (printable(&self.bytes[..self.bytes.len().min(MAX_BANNER)]), None);
        };
        let line = &self.bytes[..end];
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        (printable(line), kex_methods(&self.bytes[end + 1..]))
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
    Some(printable(list))
}

#[cfg(test)]
mod tests {
    use super::*;

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
