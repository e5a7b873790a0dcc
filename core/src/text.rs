//! Untrusted text bounded and shown safely, by the same rules wherever it is done: cut to a number
//! of characters or of bytes without splitting a character, and secret bytes written as printable
//! ASCII (the emitters' rule, which the ingester applies too), bytes as hex; and text escaped for
//! HTML and XML.

/// The first `max_chars` characters of `text` (a column of that width holds them).
pub fn prefix_chars(text: &str, max_chars: usize) -> &str {
    if text.len() <= max_chars {
        return text;
    }
    match text.char_indices().nth(max_chars) {
        Some((end, _)) => &text[..end],
        None => text,
    }
}

/// `bytes` as lowercase hex, two digits each (how digests, keys and tokens are written).
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// At most `max_bytes` bytes of `text`, ending on a character boundary.
pub fn prefix_bytes(text: &str, max_bytes: usize) -> &str {
    if text.len() <= max_bytes {
        return text;
    }
    let mut end = max_bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Bytes as text, every byte outside `[0x20, 0x7f)` as `?`: a secret's `secret_printable`.
pub fn printable(bytes: &[u8]) -> String {
    bytes.iter().map(|&b| if (0x20..0x7f).contains(&b) { char::from(b) } else { '?' }).collect()
}

/// `text` safe inside HTML or XML, as element content or a quoted attribute value.
pub fn markup_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn character_prefixes_count_characters_and_keep_them_whole() {
        assert_eq!(prefix_chars("abc", 5), "abc");
        assert_eq!(prefix_chars("abcdef", 3), "abc");
        assert_eq!(prefix_chars("ééé", 2), "éé");
        assert_eq!(prefix_chars("éé", 2), "éé");
        assert_eq!(prefix_chars("", 0), "");
    }

    #[test]
    fn byte_prefixes_never_split_a_character() {
        assert_eq!(prefix_bytes("abc", 5), "abc");
        assert_eq!(prefix_bytes("abcdef", 3), "abc");
        assert_eq!(prefix_bytes("éé", 3), "é");
        assert_eq!(prefix_bytes("éé", 1), "");
        assert_eq!(prefix_bytes("", 0), "");
    }

    #[test]
    fn only_printable_ascii_shows() {
        assert_eq!(printable(b"pa\xffss\n ~\x7f"), "pa?ss? ~?");
    }
}
