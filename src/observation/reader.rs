//! Observations one JSON record per line (JSON Lines), as sensors write them to files and as
//! `svc observation validate|ingest` read them: each line validated on its own, so one bad record
//! costs only itself.

use std::io::{self, BufRead};

use super::{Invalid, Observation, Problem, parse_strict, validate};

/// The longest line read. An observation is a few hundred bytes and the largest registry value (an
/// hour×weekday histogram of 168 numbers) a few KiB, so 1 MiB is ample headroom for object values;
/// it bounds what a runaway line (a binary file, a log with no newline) can make us hold in memory.
pub const MAX_LINE_BYTES: usize = 1 << 20;

/// The records of `reader`, one per non-blank line, each with its 1-based line number and the
/// outcome of [`validate`]. A line that is not JSON, or is longer than [`MAX_LINE_BYTES`], is an
/// `Invalid` record (an oversized line is skipped without being held). A read error ends the
/// iteration after being yielded.
pub fn read_records<R: BufRead>(reader: R) -> impl Iterator<Item = io::Result<(usize, Result<Observation, Invalid>)>> {
    Records { reader, line: Vec::new(), number: 0, failed: false }
}

struct Records<R> {
    reader: R,
    line: Vec<u8>,
    number: usize,
    failed: bool,
}

impl<R: BufRead> Iterator for Records<R> {
    type Item = io::Result<(usize, Result<Observation, Invalid>)>;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.failed {
            let oversized = match next_line(&mut self.reader, &mut self.line) {
                Ok(None) => return None,
                Ok(Some(oversized)) => oversized,
                Err(err) => {
                    self.failed = true;
                    return Some(Err(err));
                }
            };
            self.number += 1;
            if oversized {
                let reason = format!("line is longer than {MAX_LINE_BYTES} bytes");
                return Some(Ok((self.number, Err(whole_record(reason)))));
            }
            let text = self.line.trim_ascii();
            if text.is_empty() {
                continue;
            }
            let outcome = match parse_strict(text) {
                Ok(record) => validate(&record),
                // Well-formed, but naming a key twice.
                Err(err) if err.classify() == serde_json::error::Category::Data => {
                    Err(whole_record(format!("{err}: two readers could take different values")))
                }
                Err(err) => Err(whole_record(format!("not JSON: {err}"))),
            };
            return Some(Ok((self.number, outcome)));
        }
        None
    }
}

/// Reads the next line (without its newline) into `line`; `None` at the end of input, `Some(true)`
/// when the line was longer than [`MAX_LINE_BYTES`] (then it is consumed but not kept).
fn next_line(reader: &mut impl BufRead, line: &mut Vec<u8>) -> io::Result<Option<bool>> {
    line.clear();
    let (mut read_any, mut oversized) = (false, false);
    loop {
        let buf = match reader.fill_buf() {
            Ok(buf) => buf,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
            Err(err) => return Err(err),
        };
        if buf.is_empty() {
            return Ok(read_any.then_some(oversized));
        }
        read_any = true;
        let (chunk, used, done) = match memchr::memchr(b'\n', buf) {
            Some(at) => (&buf[..at], at + 1, true),
            None => (buf, buf.len(), false),
        };
        if !oversized && line.len() + chunk.len() > MAX_LINE_BYTES {
            oversized = true;
            line.clear();
        }
        if !oversized {
            line.extend_from_slice(chunk);
        }
        reader.consume(used);
        if done {
            return Ok(Some(oversized));
        }
    }
}

fn whole_record(reason: String) -> Invalid {
    Invalid { problems: vec![Problem { field: String::new(), reason }] }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcomes(input: &[u8]) -> Vec<(usize, Result<(), String>)> {
        read_records(io::BufReader::with_capacity(64, input))
            .map(|r| r.unwrap())
            .map(|(n, outcome)| (n, outcome.map(|_| ()).map_err(|e| e.to_string())))
            .collect()
    }

    const GOOD: &str = r#"{"primitive":"motor.keystroke_cadence","value":"bursty","confidence":0.5,"window":{"start_ts":1,"end_ts":2},"source":"s.py"}"#;

    #[test]
    fn blank_lines_are_skipped_and_numbers_count_every_line() {
        let input = format!("{GOOD}\n\n   \r\n{{not json\n{GOOD}");
        let got = outcomes(input.as_bytes());
        assert_eq!(got.len(), 3);
        assert_eq!(got[0], (1, Ok(())));
        assert_eq!(got[1].0, 4);
        assert!(got[1].1.as_ref().unwrap_err().starts_with("not JSON: "), "{got:?}");
        assert_eq!(got[2], (5, Ok(())));
    }

    #[test]
    fn a_record_naming_a_key_twice_is_refused() {
        let twice = GOOD.replacen(r#""value":"bursty""#, r#""value":"bursty","value":"machine""#, 1);
        let got = outcomes(format!("{twice}\n{GOOD}").as_bytes());
        let reason = got[0].1.as_ref().unwrap_err();
        assert!(reason.starts_with("duplicate key `value` at line 1"), "{reason}");
        assert_eq!(got[1], (2, Ok(())));
    }

    #[test]
    fn an_oversized_line_is_reported_and_the_next_line_still_read() {
        let mut input = vec![b'x'; MAX_LINE_BYTES + 10];
        input.push(b'\n');
        input.extend_from_slice(GOOD.as_bytes());
        let got = outcomes(&input);
        assert_eq!(got[0].0, 1);
        assert!(got[0].1.as_ref().unwrap_err().contains("longer than"), "{got:?}");
        assert_eq!(got[1], (2, Ok(())));
    }

    #[test]
    fn a_line_of_exactly_the_limit_is_read() {
        let mut input = GOOD.as_bytes().to_vec();
        input.resize(MAX_LINE_BYTES, b' ');
        assert_eq!(outcomes(&input), vec![(1, Ok(()))]);
    }
}
