//! Reading a Server-Sent Events response frame by frame, as the stream tests see it: comments
//! (keepalives) included, each frame's `event`, `id` and `data` parsed from the raw body.

use std::time::{Duration, Instant};

use serde_json::Value;

/// One Server-Sent Event.
#[derive(Debug, Default)]
pub struct Frame {
    pub event: Option<String>,
    pub id: Option<String>,
    pub data: String,
    pub comment: Option<String>,
}

impl Frame {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.data).unwrap_or_else(|e| panic!("frame data is JSON ({e}): {self:?}"))
    }
}

/// An open event stream, read frame by frame.
pub struct EventStream {
    response: reqwest::Response,
    buffer: String,
}

impl EventStream {
    pub fn new(response: reqwest::Response) -> EventStream {
        EventStream { response, buffer: String::new() }
    }

    /// The next frame (comments included), or `None` when the server ended the stream. Panics when
    /// nothing arrives within `within`.
    pub async fn next_within(&mut self, within: Duration) -> Option<Frame> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                return Some(parse_frame(&block));
            }
            let chunk = tokio::time::timeout_at(deadline, self.response.chunk())
                .await
                .unwrap_or_else(|_| panic!("no frame within {within:?}; buffered: {:?}", self.buffer));
            match chunk {
                Ok(Some(bytes)) => self.buffer.push_str(std::str::from_utf8(&bytes).unwrap()),
                Ok(None) | Err(_) => return None,
            }
        }
    }

    /// The next frame that is not a comment.
    pub async fn next_event(&mut self, within: Duration) -> Option<Frame> {
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let frame = self.next_within(left).await?;
            if frame.comment.is_none() {
                return Some(frame);
            }
        }
    }
}

fn parse_frame(block: &str) -> Frame {
    let mut frame = Frame::default();
    let mut data = Vec::new();
    for line in block.lines().filter(|l| !l.is_empty()) {
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "" => frame.comment = Some(value.to_string()),
            "event" => frame.event = Some(value.to_string()),
            "id" => frame.id = Some(value.to_string()),
            "data" => data.push(value),
            other => panic!("unexpected field {other:?} in {block:?}"),
        }
    }
    frame.data = data.join("\n");
    frame
}
