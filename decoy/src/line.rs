//! Reading an untrusted line protocol (telnet, FTP, SMTP, HTTP heads): one line at a time, never
//! more than the limit buffered, never waiting longer than the idle time.

use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};

/// Why a line could not be read.
#[derive(Debug, PartialEq, Eq)]
pub enum LineError {
    /// The peer closed the connection (or it broke).
    Closed,
    /// Nothing arrived for the idle time.
    Idle,
    /// The line grew past the limit without ending.
    TooLong,
}

/// Reads lines ending in `\n` (a `\r` before it dropped) from `reader`, buffering at most
/// `max_line` bytes.
pub struct LineReader<R> {
    reader: R,
    buffer: Vec<u8>,
    max_line: usize,
    idle: Duration,
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    pub fn new(reader: R, max_line: usize, idle: Duration) -> Self {
        LineReader { reader, buffer: Vec::with_capacity(256), max_line, idle }
    }

    /// The next line's bytes, without its end.
    pub async fn next_line(&mut self) -> Result<Vec<u8>, LineError> {
        loop {
            if let Some(end) = self.buffer.iter().position(|&b| b == b'\n') {
                let mut line: Vec<u8> = self.buffer.drain(..=end).collect();
                line.pop();
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                return Ok(line);
            }
            if self.buffer.len() >= self.max_line {
                return Err(LineError::TooLong);
            }
            self.fill(self.max_line - self.buffer.len()).await?;
        }
    }

    /// The next line as text (invalid UTF-8 replaced).
    pub async fn next_text(&mut self) -> Result<String, LineError> {
        self.next_line().await.map(|line| String::from_utf8_lossy(&line).into_owned())
    }

    /// Exactly `n` bytes (a body announced by its length), within the idle time per read.
    pub async fn read_exact(&mut self, n: usize) -> Result<Vec<u8>, LineError> {
        while self.buffer.len() < n {
            self.fill(n - self.buffer.len()).await?;
        }
        Ok(self.buffer.drain(..n).collect())
    }

    /// One read of at most `room` bytes (and at most 4 KiB) into the buffer, within the idle time.
    async fn fill(&mut self, room: usize) -> Result<(), LineError> {
        let mut chunk = [0u8; 4096];
        let room = room.min(chunk.len());
        let read = tokio::time::timeout(self.idle, self.reader.read(&mut chunk[..room]))
            .await
            .map_err(|_| LineError::Idle)?
            .map_err(|_| LineError::Closed)?;
        if read == 0 {
            return Err(LineError::Closed);
        }
        self.buffer.extend_from_slice(&chunk[..read]);
        Ok(())
    }

    /// The reader, for a protocol that switches to something else (TLS, raw data).
    pub fn into_inner(self) -> R {
        self.reader
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lines_end_at_newlines_and_never_grow_past_the_limit() {
        let input: &[u8] = b"USER root\r\nPASS x\n";
        let mut lines = LineReader::new(input, 64, Duration::from_secs(1));
        assert_eq!(lines.next_text().await.unwrap(), "USER root");
        assert_eq!(lines.next_text().await.unwrap(), "PASS x");
        assert_eq!(lines.next_line().await, Err(LineError::Closed));

        let long = vec![b'a'; 1 << 20];
        let mut lines = LineReader::new(&long[..], 64, Duration::from_secs(1));
        assert_eq!(lines.next_line().await, Err(LineError::TooLong));
    }

    #[tokio::test]
    async fn a_silent_peer_times_out() {
        let (_keep_open, quiet) = tokio::io::duplex(64);
        let mut lines = LineReader::new(quiet, 64, Duration::from_millis(20));
        assert_eq!(lines.next_line().await, Err(LineError::Idle));
    }
}
