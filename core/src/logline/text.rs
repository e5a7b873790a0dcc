//! Python's character classes, as DECNET's reader (Python `re` on `str`) applies them: which
//! characters are whitespace (`\s`, `str.strip`) and which are word characters (`\w`, `\b`).

/// Python's whitespace: Unicode White_Space plus the ASCII separators U+001C–U+001F.
pub(super) fn is_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// Python's word character: a letter or digit of any script, or `_`.
pub(super) fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// `text.strip()`.
pub(super) fn strip(text: &str) -> &str {
    text.trim_matches(is_space)
}

/// `text.lstrip()`.
pub(super) fn lstrip(text: &str) -> &str {
    text.trim_start_matches(is_space)
}

/// The char at byte `at` (a char boundary), if any.
pub(super) fn char_at(text: &str, at: usize) -> Option<char> {
    text.get(at..).and_then(|rest| rest.chars().next())
}

/// The char ending just before byte `at` (a char boundary), if any.
pub(super) fn char_before(text: &str, at: usize) -> Option<char> {
    text.get(..at).and_then(|head| head.chars().next_back())
}
