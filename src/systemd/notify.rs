//! `sd_notify` for `Type=notify` units: a datagram to `$NOTIFY_SOCKET`, which systemd sets only for
//! a unit that expects one. Anywhere else it does nothing.

use std::io;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};

/// Tells the service manager the service is ready to serve.
pub fn ready() {
    send("READY=1");
}

/// Tells the service manager the service is shutting down.
pub fn stopping() {
    send("STOPPING=1");
}

fn send(state: &str) {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else { return };
    if let Err(err) = send_to(&path.to_string_lossy(), state) {
        tracing::warn!(error = %err, state, "Could not notify the service manager");
    }
}

/// `@name` is a socket in the abstract namespace; anything else is a path.
fn send_to(socket: &str, state: &str) -> io::Result<()> {
    let addr = match socket.strip_prefix('@') {
        Some(name) => SocketAddr::from_abstract_name(name.as_bytes())?,
        None => SocketAddr::from_pathname(socket)?,
    };
    UnixDatagram::unbound()?.send_to_addr(state.as_bytes(), &addr)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_reaches_the_socket() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify");
        let listener = UnixDatagram::bind(&path).unwrap();
        send_to(path.to_str().unwrap(), "READY=1").unwrap();
        let mut buf = [0u8; 64];
        let n = listener.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1");
    }
}
