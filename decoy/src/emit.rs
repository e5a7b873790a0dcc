//! Where a decoy's events go: one RFC 5424 line each, in the exact shape of DECNET's services
//! (`reference/decnet-workers.md` §1), written through `svc_core::logline`'s formatter so the collector
//! and the ingester read them like any other decky's. Production writes to stdout; tests collect
//! the lines in memory.

use std::io::Write;
use std::sync::{Arc, Mutex};

use chrono::Utc;
use svc_core::logline::{Entry, Severity, format};

/// The SD parameters of one event, in the order they are written.
pub type Fields = Vec<(&'static str, String)>;

#[derive(Clone)]
pub struct Emitter {
    /// HOSTNAME of every line: the decky's name.
    hostname: Arc<str>,
    sink: Arc<Mutex<Box<dyn Write + Send>>>,
}

impl Emitter {
    /// Lines to this process's stdout, each flushed at once (the collector follows it live).
    pub fn stdout(hostname: &str) -> Emitter {
        Emitter::to_writer(hostname, Box::new(std::io::stdout()))
    }

    pub fn to_writer(hostname: &str, sink: Box<dyn Write + Send>) -> Emitter {
        Emitter { hostname: hostname.into(), sink: Arc::new(Mutex::new(sink)) }
    }

    /// An emitter whose lines a test reads back from the returned buffer.
    pub fn memory(hostname: &str) -> (Emitter, Lines) {
        let lines = Lines::default();
        (Emitter::to_writer(hostname, Box::new(lines.clone())), lines)
    }

    pub fn hostname(&self) -> &str {
        &self.hostname
    }

    /// Writes one line: APP-NAME `service`, MSGID `event_type`, the fields as `relay@55555`
    /// parameters, and `msg` after them when given.
    pub fn emit(&self, severity: Severity, service: &str, event_type: &str, fields: Fields, msg: Option<String>) {
        let entry = Entry {
            severity,
            timestamp: Utc::now(),
            hostname: self.hostname.to_string(),
            app_name: service.to_string(),
            msgid: event_type.to_string(),
            fields: fields.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
            msg,
        };
        let mut line = format(&entry);
        line.push('\n');
        let mut sink = self.sink.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        // A closed stdout leaves nothing to tell; the decoy keeps answering.
        let _ = sink.write_all(line.as_bytes()).and_then(|()| sink.flush());
    }
}

/// The lines an in-memory [`Emitter`] wrote, shared with the test that reads them.
#[derive(Clone, Default)]
pub struct Lines(Arc<Mutex<Vec<u8>>>);

impl Lines {
    /// Every complete line written so far.
    pub fn all(&self) -> Vec<String> {
        let bytes = self.0.lock().unwrap().clone();
        String::from_utf8_lossy(&bytes).lines().map(str::to_string).collect()
    }
}

impl Write for Lines {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
