//! The dashboard's log search grammar: what a search string means, as terms the log statements
//! turn into conditions.

/// The columns the search grammar's `key:value` names match exactly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogColumn {
    Decky,
    Service,
    EventType,
    AttackerIp,
}

impl LogColumn {
    pub const ALL: [LogColumn; 4] = [LogColumn::Decky, LogColumn::Service, LogColumn::EventType, LogColumn::AttackerIp];

    /// The column's name in the logs table, and in the counters of its values.
    pub fn name(self) -> &'static str {
        match self {
            LogColumn::Decky => "decky",
            LogColumn::Service => "service",
            LogColumn::EventType => "event_type",
            LogColumn::AttackerIp => "attacker_ip",
        }
    }
}

/// A row holding the columns whose values are counted (`log_column_totals`): a log row as stored,
/// or as the pruner reads it back.
pub trait CountedColumns {
    /// Its values, in [`LogColumn::ALL`]'s order, before the dialect cuts them to the columns' width.
    fn counted_columns(&self) -> [&str; 4];
}

/// One AND-ed term of a log search.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SearchTerm {
    /// `decky:`, `service:`, `event:`, `attacker:` / `attacker-ip:` / `attacker_ip:` → column equals.
    Column(LogColumn, String),
    /// Any other `key:value` → the field `key` (only `[A-Za-z0-9_]` kept) equals the value.
    Field(String, String),
    /// A bare token → a substring of the raw line, decky, service or attacker IP.
    Text(String),
}

/// The dashboard's search grammar (`reference/decnet-api.md` §8): shell-like tokens (quotes group
/// words; an unbalanced quote falls back to splitting on whitespace), AND-ed. `null`, `NULL`,
/// `undefined` and the empty string mean no search.
///
/// A token is split at its first `:`. A known column key (`decky`, `service`, `event`,
/// `attacker`, `attacker-ip`, `attacker_ip`) gives [`SearchTerm::Column`]; any other key, reduced
/// to `[A-Za-z0-9_]`, gives [`SearchTerm::Field`]; a key that reduces to nothing (`:x`, `-:x`)
/// leaves the whole token as [`SearchTerm::Text`], as does a token without `:`. Quoting does not
/// change this: quotes only group, so `"http://x"` is the field `http` equal to `//x`, as in
/// DECNET; a URL cannot be searched as free text.
pub fn parse_search(search: &str) -> Vec<SearchTerm> {
    if matches!(search.trim(), "" | "null" | "NULL" | "undefined") {
        return Vec::new();
    }
    let tokens = shell_words(search).unwrap_or_else(|| search.split_whitespace().map(str::to_string).collect());
    tokens.into_iter().filter(|t| !t.is_empty()).map(search_term).collect()
}

fn search_term(token: String) -> SearchTerm {
    let Some((key, value)) = token.split_once(':') else {
        return SearchTerm::Text(token);
    };
    let column = match key {
        "decky" => Some(LogColumn::Decky),
        "service" => Some(LogColumn::Service),
        "event" => Some(LogColumn::EventType),
        "attacker" | "attacker-ip" | "attacker_ip" => Some(LogColumn::AttackerIp),
        _ => None,
    };
    if let Some(column) = column {
        return SearchTerm::Column(column, value.to_string());
    }
    let key = field_key(key);
    if key.is_empty() { SearchTerm::Text(token) } else { SearchTerm::Field(key, value.to_string()) }
}

/// A field name reduced to `[A-Za-z0-9_]`: the only form that ever reaches a JSON path.
pub(super) fn field_key(key: &str) -> String {
    key.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '_').collect()
}

/// Splits like Python's `shlex.split` (POSIX mode, no comments): whitespace separates words;
/// single quotes take everything literally; double quotes let a backslash escape only `"` and
/// `\`; outside quotes a backslash escapes any character; quoted and bare parts of one word join.
/// `None` on an unbalanced quote or a trailing backslash.
fn shell_words(text: &str) -> Option<Vec<String>> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' | '\r' | '\n' => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            '\\' => {
                word.push(chars.next()?);
                in_word = true;
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next()? {
                        '\'' => break,
                        c => word.push(c),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next()? {
                        '"' => break,
                        '\\' => match chars.next()? {
                            c @ ('"' | '\\') => word.push(c),
                            c => {
                                word.push('\\');
                                word.push(c);
                            }
                        },
                        c => word.push(c),
                    }
                }
            }
            c => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        words.push(word);
    }
    Some(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(t: &str) -> SearchTerm {
        SearchTerm::Text(t.into())
    }

    fn column(c: LogColumn, v: &str) -> SearchTerm {
        SearchTerm::Column(c, v.into())
    }

    fn field(k: &str, v: &str) -> SearchTerm {
        SearchTerm::Field(k.into(), v.into())
    }

    #[test]
    fn no_search() {
        for empty in ["", "   ", "null", "NULL", "undefined", " null "] {
            assert_eq!(parse_search(empty), [], "{empty:?}");
        }
        // Only the whole search is a "no search" word; as a token it is text.
        assert_eq!(parse_search("null x"), [text("null"), text("x")]);
        assert_eq!(parse_search("Null"), [text("Null")]);
    }

    #[test]
    fn column_keys() {
        assert_eq!(
            parse_search("decky:ssh-01 service:ssh event:login attacker:1.2.3.4 attacker-ip:5.6.7.8 attacker_ip:::1"),
            [
                column(LogColumn::Decky, "ssh-01"),
                column(LogColumn::Service, "ssh"),
                column(LogColumn::EventType, "login"),
                column(LogColumn::AttackerIp, "1.2.3.4"),
                column(LogColumn::AttackerIp, "5.6.7.8"),
                column(LogColumn::AttackerIp, "::1"),
            ]
        );
        // Keys are case-sensitive: `Decky` is a field name.
        assert_eq!(parse_search("Decky:x"), [field("Decky", "x")]);
        assert_eq!(parse_search("decky:"), [column(LogColumn::Decky, "")]);
    }

    #[test]
    fn field_keys_are_sanitised() {
        assert_eq!(parse_search("username:root"), [field("username", "root")]);
        assert_eq!(parse_search("user.name:root"), [field("username", "root")]);
        assert_eq!(parse_search("a'\"]$-b_1:v"), [field("ab_1", "v")]);
        assert_eq!(parse_search("x-y:a:b"), [field("xy", "a:b")]);
        // Nothing left of the key: the token is text.
        assert_eq!(parse_search(":x"), [text(":x")]);
        assert_eq!(parse_search("-.$:x"), [text("-.$:x")]);
        assert_eq!(parse_search("é:x"), [text("é:x")]);
        // A URL is a field search on `http`, quoted or not.
        assert_eq!(parse_search("http://x/y"), [field("http", "//x/y")]);
        assert_eq!(parse_search("'http://x/y'"), [field("http", "//x/y")]);
    }

    #[test]
    fn quotes_group_and_escape() {
        assert_eq!(parse_search("\"hello world\" foo"), [text("hello world"), text("foo")]);
        assert_eq!(parse_search("'a b' c"), [text("a b"), text("c")]);
        assert_eq!(parse_search("username:\"john doe\""), [field("username", "john doe")]);
        assert_eq!(parse_search("decky:'web 01'"), [column(LogColumn::Decky, "web 01")]);
        assert_eq!(parse_search("a\"b c\"d"), [text("ab cd")]);
        assert_eq!(parse_search("a\\ b"), [text("a b")]);
        assert_eq!(parse_search("\"a\\\"b\\\\c\\d\""), [text("a\"b\\c\\d")]);
        assert_eq!(parse_search("'a\\b'"), [text("a\\b")]);
        assert_eq!(parse_search("  a \t b\n"), [text("a"), text("b")]);
        // Empty quotes give an empty word, which filters nothing.
        assert_eq!(parse_search("'' a \"\""), [text("a")]);
    }

    #[test]
    fn unbalanced_quotes_fall_back_to_whitespace() {
        assert_eq!(parse_search("\"abc def"), [text("\"abc"), text("def")]);
        assert_eq!(parse_search("it's decky:x"), [text("it's"), column(LogColumn::Decky, "x")]);
        assert_eq!(parse_search("trailing\\"), [text("trailing\\")]);
    }
}
