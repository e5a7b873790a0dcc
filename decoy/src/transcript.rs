//! Recording an interactive shell session (SSH with a shell, telnet after login): what the attacker
//! typed and what the decoy answered, with the time of each, as asciinema v2 events. When the
//! recording is dropped (the shell exited, the client hung up, the session's time ran out) one
//! `session_recorded` line carries it (DECNET's event and fields: `sid`, `service`,
//! `duration_s`, `bytes`, `truncated`), the events in its `cast` field and the terminal size in
//! `width` and `height`. The line is the only copy: the ingester stores it like any other, so the
//! transcript needs no store of its own and reaches the master the way every line does.
//!
//! Bounded: at most [`MAX_RECORDED_BYTES`] of terminal data per session (input and output
//! together, as typed and sent); past that, nothing more is recorded, `truncated` is `true`, and the
//! session itself goes on.

use std::time::Instant;

use serde_json::{Value, json};
use uuid::Uuid;

use crate::session::Session;

/// Terminal bytes one session's transcript keeps: a long session of typing and answers fits, and
/// the line stays far below the collector's 1 MiB line limit even with JSON escaping.
pub const MAX_RECORDED_BYTES: usize = 64 * 1024;

/// One session's recording, from its first prompt to its end.
pub struct Recording {
    session: Session,
    sid: Uuid,
    started: Instant,
    width: u32,
    height: u32,
    events: Vec<Value>,
    bytes: usize,
    truncated: bool,
}

impl Recording {
    /// A recording of `session`'s terminal of `width` × `height` (80 × 24 when the client named
    /// none).
    pub fn start(session: &Session, width: u32, height: u32) -> Recording {
        let (width, height) = if width == 0 || height == 0 { (80, 24) } else { (width, height) };
        Recording {
            session: session.clone(),
            sid: Uuid::new_v4(),
            started: Instant::now(),
            width,
            height,
            events: vec![],
            bytes: 0,
            truncated: false,
        }
    }

    /// What the attacker typed.
    pub fn input(&mut self, data: &[u8]) {
        self.record("i", data);
    }

    /// What the decoy sent back.
    pub fn output(&mut self, data: &[u8]) {
        self.record("o", data);
    }

    fn record(&mut self, channel: &str, data: &[u8]) {
        if data.is_empty() || self.truncated {
            return;
        }
        let room = MAX_RECORDED_BYTES - self.bytes;
        let kept = &data[..data.len().min(room)];
        self.truncated = kept.len() < data.len();
        self.bytes += kept.len();
        let at = (self.started.elapsed().as_secs_f64() * 1000.0).round() / 1000.0;
        self.events.push(json!([at, channel, String::from_utf8_lossy(kept)]));
    }
}

/// The end of the session: logged as `session_recorded`, unless nothing at all was recorded.
impl Drop for Recording {
    fn drop(&mut self) {
        if self.events.is_empty() {
            return;
        }
        let fields = vec![
            ("sid", self.sid.to_string()),
            ("service", self.session.service.to_string()),
            ("duration_s", format!("{:.3}", self.started.elapsed().as_secs_f64())),
            ("bytes", self.bytes.to_string()),
            ("truncated", self.truncated.to_string()),
            ("width", self.width.to_string()),
            ("height", self.height.to_string()),
            ("cast", Value::Array(std::mem::take(&mut self.events)).to_string()),
        ];
        self.session.event("session_recorded", fields);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_keep_their_order_stop_at_the_cap_and_are_logged_at_the_end() {
        let (emitter, lines) = crate::emit::Emitter::memory("web-01");
        let session = Session::new("ssh", "192.0.2.7:40000".parse().unwrap(), Default::default(), emitter);
        let mut recording = Recording::start(&session, 0, 0);
        recording.output(b"root@web:~# ");
        recording.input(b"id\r");
        recording.output(b"");
        let big = vec![b'x'; MAX_RECORDED_BYTES];
        recording.output(&big);
        recording.input(b"more");
        assert_eq!((recording.width, recording.height), (80, 24));
        assert_eq!(recording.events.len(), 3, "the empty write is no event, nothing after the cap is");
        assert_eq!((recording.bytes, recording.truncated), (MAX_RECORDED_BYTES, true));
        assert!(lines.all().is_empty(), "nothing is logged before the end");
        drop(recording);

        let logged = lines.all();
        assert_eq!(logged.len(), 1);
        let line = svc_core::logline::parse(&logged[0]).unwrap();
        assert_eq!((line.event_type.as_str(), line.field("service")), ("session_recorded", Some("ssh")));
        assert_eq!((line.field("truncated"), line.field("width")), (Some("true"), Some("80")));
        assert_eq!(line.attacker_ip, "192.0.2.7");
        let cast: Value = serde_json::from_str(line.field("cast").unwrap()).unwrap();
        assert_eq!(cast[0][1], "o");
        assert_eq!((cast[1][1].as_str(), cast[1][2].as_str()), (Some("i"), Some("id\r")));
        assert_eq!(cast[2][2].as_str().unwrap().len(), MAX_RECORDED_BYTES - 15);
        let silent = Recording::start(&session, 100, 40);
        drop(silent);
        assert_eq!(lines.all().len(), 1, "a session with nothing recorded is not logged");
    }
}
