//! Structured data and MSG: what follows MSGID, read as DECNET reads it, except that an escaped
//! `\]` does not end an element (DECNET's non-greedy `\[relay@55555\s+(.*?)\]` stops there and
//! truncates the value).
//!
//! - `-`: no fields; MSG is the rest without its leading whitespace.
//! - `[…`: the fields are the `key="value"` parameters (`\w+="(?:[^"\\]|\\.)*"`, found anywhere in
//!   the element, text between them skipped) of the first `[relay@55555` element, which ends at
//!   its first unescaped `]`; an element that never ends has no fields. MSG is what follows the
//!   first unescaped `]` that has whitespace and more text after it, stripped.
//! - Anything else is all MSG.
//!
//! Each scan moves forward only, so reading a line takes time linear in its length.

use std::collections::HashMap;

use super::text::{char_at, is_space, is_word, lstrip, strip};

/// The SD-ID of the element whose parameters are a line's fields (private enterprise number 55555).
pub(super) const RELAY_SD_ID: &str = "relay@55555";

/// What follows MSGID, split.
#[derive(Debug, Default)]
pub(super) struct Body<'a> {
    /// `relay@55555` parameters, unescaped, in line order, each key once (see [`Fields`]).
    pub fields: Vec<(String, String)>,
    /// `None` when empty.
    pub msg: Option<&'a str>,
}

/// Splits the structured data from the MSG.
pub(super) fn split(rest: &str) -> Body<'_> {
    let msg = match rest.as_bytes().first() {
        Some(b'-') => lstrip(&rest[1..]),
        Some(b'[') => return Body { fields: relay_fields(rest), msg: message(rest) },
        _ => rest,
    };
    Body { fields: Vec::new(), msg: (!msg.is_empty()).then_some(msg) }
}

/// The parameters of the first `[relay@55555` element (followed by whitespace) in `text`.
fn relay_fields(text: &str) -> Vec<(String, String)> {
    let opening = format!("[{RELAY_SD_ID}");
    let mut from = 0;
    let start = loop {
        let Some(found) = memchr::memmem::find(&text.as_bytes()[from..], opening.as_bytes()) else {
            return Vec::new();
        };
        let after = from + found + opening.len();
        if char_at(text, after).is_some_and(is_space) {
            break after;
        }
        from = after;
    };
    let Some(end) = unescaped_closings(text, start).next() else { return Vec::new() };
    parameters(&text[start..end])
}

/// The byte offsets of the `]`s at or after `from` that no backslash escapes.
fn unescaped_closings(text: &str, from: usize) -> impl Iterator<Item = usize> + '_ {
    let bytes = text.as_bytes();
    let mut i = from;
    std::iter::from_fn(move || {
        while let Some(found) = memchr::memchr2(b']', b'\\', &bytes[i.min(bytes.len())..]) {
            let at = i + found;
            i = at + if bytes[at] == b'\\' { 2 } else { 1 };
            if bytes[at] == b']' {
                return Some(at);
            }
        }
        i = bytes.len();
        None
    })
}

/// The MSG after structured data: after the first unescaped `]` followed by whitespace and at
/// least one more character, stripped.
fn message(rest: &str) -> Option<&str> {
    let at = unescaped_closings(rest, 0).find(|&at| {
        let after = at + 1;
        char_at(rest, after).is_some_and(|c| is_space(c) && after + c.len_utf8() < rest.len())
    })?;
    let msg = strip(&rest[at + 1..]);
    (!msg.is_empty()).then_some(msg)
}

/// Python's `findall` of `(\w+)="((?:[^"\\]|\\.)*)"` over an element's text, values unescaped.
fn parameters(element: &str) -> Vec<(String, String)> {
    let bytes = element.as_bytes();
    let mut fields = Fields::with_capacity(memchr::memchr_iter(b'=', bytes).count().min(64) + 1);
    let mut i = 0;
    while i < element.len() {
        let Some(c) = char_at(element, i) else { break };
        if !is_word(c) {
            i += c.len_utf8();
            continue;
        }
        // A whole word run: a shorter one starting inside it ends at the same place.
        let run_end = element[i..].find(|c: char| !is_word(c)).map_or(element.len(), |n| i + n);
        if !element[run_end..].starts_with("=\"") {
            i = run_end;
            continue;
        }
        match quoted(element, run_end + 2) {
            Some((raw, end)) => {
                fields.insert(&element[i..run_end], unescape(raw));
                i = end;
            }
            // An unterminated value: every later `="` lies inside it and, read with the same
            // escapes, is unterminated too, so no parameter follows.
            None => break,
        }
    }
    fields.into_vec()
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
