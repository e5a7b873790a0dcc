//! The log shipping wire between a worker host's forwarder and the master's log listener
//! (`SVC_SWARM_SYSLOG_PORT`, DECNET's 6514): RFC 5425 octet-counted frames (`"<N> <message>"`) over
//! mutual TLS, as DECNET frames them. Every frame the forwarder sends is one RFC 5424 line (it ships
//! only lines that start with `<`, the syslog PRI), except the control frames both sides exchange,
//! which start with `@svc ` and carry JSON: the listener opens with where the host's lines stand
//! ([`Control::Resume`]); the forwarder ends each batch of lines with the file position after it
//! ([`Control::Batch`]); the listener answers each batch it has committed, lines and position in
//! one transaction, with that position ([`Control::Ack`]). The forwarder keeps its position until
//! acknowledged, so a batch is stored once or read again, never lost or stored twice (DECNET saves
//! its offset after writing, without any acknowledgement).

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt};

use crate::db::IngestCursor;

/// The largest frame either side accepts: a line at the ingester's limit and its framing.
pub const MAX_FRAME_BYTES: usize = 1024 * 1024 + 64;
/// RFC 5425's octet count, as DECNET reads it: at most 10 digits.
const MAX_DIGITS: usize = 10;
/// What starts a control frame; no log line starts so (a line starts with `<`).
const CONTROL: &[u8] = b"@svc ";

/// A control frame.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Control {
    /// Listener → forwarder, once, first: the position the master has stored for this host, where
    /// the forwarder starts (`None`: the file's start).
    Resume { cursor: Option<IngestCursor> },
    /// Forwarder → listener: the lines since the previous batch end here; the file position after
    /// them. A batch without lines keeps the link alive.
    Batch { cursor: IngestCursor },
    /// Listener → forwarder: the batch ending at `cursor` is stored.
    Ack { cursor: IngestCursor },
}

/// Why a peer's frames are not read on.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("malformed frame length")]
    MalformedLength,
    #[error("frame of {0} bytes is over the limit")]
    TooLong(u64),
    #[error("connection closed inside a frame")]
    Truncated,
    #[error("malformed control frame: {0}")]
    Control(String),
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// Appends `message` as one octet-counted frame.
pub fn encode(message: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(message.len().to_string().as_bytes());
    out.push(b' ');
    out.extend_from_slice(message);
}

/// Appends `control` as one frame.
pub fn encode_control(control: &Control, out: &mut Vec<u8>) {
    let mut message = CONTROL.to_vec();
    serde_json::to_writer(&mut message, control).expect("a control frame serialises");
    encode(&message, out);
}

/// The control frame `frame` is, if it is one.
pub fn control(frame: &[u8]) -> Option<Result<Control, FrameError>> {
    let json = frame.strip_prefix(CONTROL)?;
    Some(serde_json::from_slice(json).map_err(|err| FrameError::Control(err.to_string())))
}

/// Whether the forwarder may ship `line`: an RFC 5424 line starts with its PRI, and nothing that
/// could be taken for a control frame is shipped.
pub fn shippable(line: &[u8]) -> bool {
    line.first() == Some(&b'<')
}

/// Reads the next frame into `frame`; false at a clean end (the peer closed before a frame began).
/// The length is digits only, at most [`MAX_DIGITS`] of them, then one space; anything else, or a
/// length over `max`, is an error and the caller drops the connection.
pub async fn read_frame<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    frame: &mut Vec<u8>,
    max: usize,
) -> Result<bool, FrameError> {
    let mut length: u64 = 0;
    let mut digits = 0;
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return if digits == 0 { Ok(false) } else { Err(FrameError::Truncated) };
        }
        let mut used = 0;
        let mut ended = false;
        for &byte in available {
            used += 1;
            match byte {
                b'0'..=b'9' if digits < MAX_DIGITS => {
                    length = length * 10 + u64::from(byte - b'0');
                    digits += 1;
                }
                b' ' if digits > 0 => {
                    ended = true;
                    break;
                }
                _ => return Err(FrameError::MalformedLength),
            }
        }
        reader.consume(used);
        if ended {
            break;
        }
    }
    if length > max as u64 {
        return Err(FrameError::TooLong(length));
    }
    frame.clear();
    frame.resize(length as usize, 0);
    match reader.read_exact(frame).await {
        Ok(_) => Ok(true),
        Err(err) if err.kind() == std::io::ErrorKind::UnexpectedEof => Err(FrameError::Truncated),
        Err(err) => Err(err.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn frames(bytes: &[u8]) -> Result<Vec<Vec<u8>>, FrameError> {
        let mut reader = tokio::io::BufReader::with_capacity(3, bytes);
        let mut out = Vec::new();
        let mut frame = Vec::new();
        while read_frame(&mut reader, &mut frame, 100).await? {
            out.push(frame.clone());
        }
        Ok(out)
    }

    #[tokio::test]
    async fn frames_round_trip_across_buffer_edges() {
        let mut wire = Vec::new();
        encode(b"<13>1 - a", &mut wire);
        encode(b"", &mut wire);
        let cursor = IngestCursor { file_id: "1:2".into(), offset: 42, fingerprint: "ab".into() };
        encode_control(&Control::Batch { cursor: cursor.clone() }, &mut wire);
        let read = frames(&wire).await.unwrap();
        assert_eq!(read[0], b"<13>1 - a");
        assert!(read[1].is_empty());
        assert_eq!(control(&read[2]).unwrap().unwrap(), Control::Batch { cursor });
        assert!(control(&read[0]).is_none());
    }

    #[tokio::test]
    async fn a_malformed_length_is_an_error() {
        for bad in [&b"x1 a"[..], b" 1 a", b"12345678901 a", b"-1 a", b"3\na"] {
            assert!(matches!(frames(bad).await, Err(FrameError::MalformedLength)), "{bad:?}");
        }
        assert!(matches!(frames(b"101 ").await, Err(FrameError::TooLong(101))));
        assert!(matches!(frames(b"5 ab").await, Err(FrameError::Truncated)));
        assert!(matches!(frames(b"12").await, Err(FrameError::Truncated)));
        assert!(frames(b"").await.unwrap().is_empty());
    }

    #[test]
    fn only_syslog_lines_are_shipped() {
        assert!(shippable(b"<13>1 x"));
        assert!(!shippable(b"@svc {\"type\":\"ack\"}"));
        assert!(!shippable(b""));
    }
}
