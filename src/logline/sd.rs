//! Structured data and MSG: what follows MSGID. Only the `relay@55555` element's parameters become
//! fields; other elements (rsyslog's `[timeQuality …]`, …) are scanned with the same quoting rules
//! and skipped.
//!
//! Unlike DECNET, whose non-greedy regex ends the element at the first `]` even when it is escaped
//! (truncating such values), an element ends only at a `]` outside a quoted value, so values that
//! contain `]` are kept whole.

use std::collections::HashMap;

/// The SD-ID of the element whose parameters are a line's fields (private enterprise number 55555).
pub(super) const RELAY_SD_ID: &str = "relay@55555";

/// What follows MSGID, split.
#[derive(Debug, Default)]
pub(super) struct Body<'a> {
    /// `relay@55555` parameters, unescaped, in line order, each key once (see [`Fields`]).
    pub fields: Vec<(String, String)>,
    /// The text after the structured data and its one separating space; `None` when empty.
    pub msg: Option<&'a str>,
}

/// Splits the structured data from the MSG.
///
/// - `-` (nil): MSG is what follows it (after one space).
/// - `[…]…`: elements back to back; MSG is what follows the last one (after one space).
/// - Anything else is not structured data (RFC 5424 forbids it, sloppy writers do it): the whole
///   text is the MSG, as DECNET reads it.
/// - Malformed structured data (an unterminated value or element, a parameter without `="`): the
///   fields of the `relay@55555` parameters completed before the fault are kept (a line cut short
///   still names its attacker), and the MSG is the whole text from the first `[`, because where the
///   structured data should have ended cannot be known and prose that merely starts with `[`
///   still carries addresses for the MSG fallbacks.
pub(super) fn split(rest: &str) -> Body<'_> {
    match rest.as_bytes().first() {
        None => Body::default(),
        Some(b'-') => Body { fields: Vec::new(), msg: message(&rest[1..]) },
        Some(b'[') => {
            // One allocation for the fields: each has an `=` (plus room for `remote_port`).
            let mut fields = Fields::with_capacity(memchr::memchr_iter(b'=', rest.as_bytes()).count().min(64) + 1);
            match elements(rest, &mut fields) {
                Some(end) => Body { fields: fields.into_vec(), msg: message(&rest[end..]) },
                None => Body { fields: fields.into_vec(), msg: Some(rest) },
            }
        }
        Some(_) => Body { fields: Vec::new(), msg: Some(rest) },
    }
}

/// The MSG after the structured data: drop one separating space; nothing left is no MSG.
fn message(after_sd: &str) -> Option<&str> {
    let msg = after_sd.strip_prefix(' ').unwrap_or(after_sd);
    (!msg.is_empty()).then_some(msg)
}

/// Scans the elements starting at `text[0] == '['`; the byte index just past the last `]`, or
/// `None` when the structured data is malformed.
fn elements(text: &str, fields: &mut Fields) -> Option<usize> {
    let b = text.as_bytes();
    let mut i = 0;
    while b.get(i) == Some(&b'[') {
        i += 1;
        let id_start = i;
        while i < b.len() && !matches!(b[i], b' ' | b']' | b'"' | b'=') {
            i += 1;
        }
        let is_relay = &text[id_start..i] == RELAY_SD_ID;
        loop {
            while b.get(i) == Some(&b' ') {
                i += 1;
            }
            match b.get(i)? {
                b']' => {
                    i += 1;
                    break;
                }
                _ => {
                    let name_start = i;
                    while i < b.len() && !matches!(b[i], b'=' | b' ' | b']' | b'"') {
                        i += 1;
                    }
                    let name = &text[name_start..i];
                    if name.is_empty() || b.get(i) != Some(&b'=') || b.get(i + 1) != Some(&b'"') {
                        return None;
                    }
                    i += 2;
                    let (raw, end) = quoted(text, i)?;
                    i = end;
                    if is_relay {
                        fields.insert(name, unescape(raw));
                    }
                }
            }
        }
    }
    Some(i)
}

/// The raw (still escaped) value starting at `start`, just after the opening quote, and the index
/// just past its closing quote.
fn quoted(text: &str, start: usize) -> Option<(&str, usize)> {
    let b = text.as_bytes();
    let mut i = start;
    while let Some(found) = memchr::memchr2(b'"', b'\\', b.get(i..)?) {
        i += found;
        if b[i] == b'"' {
            return Some((&text[start..i], i + 1));
        }
        i += 2;
    }
    None
}

/// RFC 5424 §6.3.3: `\"`, `\\` and `\]` stand for the character; a backslash before anything else
/// is kept as it is.
fn unescape(raw: &str) -> String {
    if !raw.contains('\\') {
        return raw.to_owned();
    }
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.clone().next() {
            Some(next @ ('"' | '\\' | ']')) => {
                out.push(next);
                chars.next();
            }
            _ => out.push('\\'),
        }
    }
    out
}

/// Fields with Python dict semantics, as DECNET builds them: a repeated key keeps its first
/// position and takes the last value. Lines have a handful of fields, so a linear search is the
/// fastest lookup; past [`Fields::INDEX_FROM`] a hash index keeps a hostile line with thousands of
/// parameters linear.
#[derive(Default)]
pub(super) struct Fields {
    fields: Vec<(String, String)>,
    index: Option<HashMap<String, usize>>,
}

impl Fields {
    const INDEX_FROM: usize = 32;

    fn with_capacity(capacity: usize) -> Self {
        Fields { fields: Vec::with_capacity(capacity), index: None }
    }

    fn insert(&mut self, key: &str, value: String) {
        let found = match &self.index {
            Some(index) => index.get(key).copied(),
            None => self.fields.iter().position(|(k, _)| k == key),
        };
        if let Some(at) = found {
            self.fields[at].1 = value;
            return;
        }
        self.fields.push((key.to_owned(), value));
        if let Some(index) = &mut self.index {
            index.insert(key.to_owned(), self.fields.len() - 1);
        } else if self.fields.len() >= Self::INDEX_FROM {
            self.index = Some(self.fields.iter().enumerate().map(|(at, (k, _))| (k.clone(), at)).collect());
        }
    }

    fn into_vec(self) -> Vec<(String, String)> {
        self.fields
    }
}
