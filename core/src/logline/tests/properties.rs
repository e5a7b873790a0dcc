//! Properties of the parser and formatter over generated input: no input makes it panic or scan
//! more than once, and whatever the formatter writes reads back as written.

use chrono::Timelike;
use proptest::prelude::*;

use super::*;

/// Pieces of the syntax, so random strings often get deep into the parser.
fn syntax_soup() -> impl Strategy<Value = String> {
    let pieces = vec![
        "<",
        ">",
        "<134>1 ",
        "<14>1 ",
        "1",
        " ",
        "  ",
        "-",
        "[",
        "]",
        "\"",
        "\\",
        "=",
        ":",
        ".",
        "relay@55555",
        "timeQuality",
        "src_ip",
        "remote_addr",
        "2026-05-02T06:22:48.089309+00:00",
        "2026-05-02T",
        "from ",
        "rhost=",
        "CMD ",
        "cmd=",
        "1.2.3.4",
        "[::1]:80",
        "2001:db8::1",
        "é",
        "\u{0}",
        "\t",
        "\n",
        "ÿ",
        "✓",
    ];
    prop::collection::vec(prop::sample::select(pieces), 0..40).prop_map(|parts| parts.concat())
}

/// A change to a valid line: cut it, insert text, or delete a stretch.
#[derive(Clone, Debug)]
enum Mutation {
    Truncate(usize),
    Insert(usize, String),
    Delete(usize, usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        any::<usize>().prop_map(Mutation::Truncate),
        (any::<usize>(), prop_oneof!["[\\[\\]\"\\\\= :-]{1,3}", any::<String>()])
            .prop_map(|(at, s)| Mutation::Insert(at, s)),
        (any::<usize>(), 1..20usize).prop_map(|(at, len)| Mutation::Delete(at, len)),
    ]
}

/// The char boundary at or before `at % (len + 1)`.
fn boundary(text: &str, at: usize) -> usize {
    let mut at = at % (text.len() + 1);
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

fn mutate(mut line: String, mutations: &[Mutation]) -> String {
    for change in mutations {
        match change {
            Mutation::Truncate(at) => line.truncate(boundary(&line, *at)),
            Mutation::Insert(at, text) => line.insert_str(boundary(&line, *at), text),
            Mutation::Delete(at, len) => {
                let start = boundary(&line, *at);
                let end = boundary(&line, start + len).max(start);
                line.replace_range(start..end, "");
            }
        }
    }
    line
}

/// An entry whose MSGID is not nil (a nil MSGID has readings of its own: `CMD`, double wrap).
fn any_entry() -> impl Strategy<Value = Entry> {
    let severity = prop::sample::select(vec![Severity::Error, Severity::Warning, Severity::Info]);
    // 0000-01-01 to 9999-12-31, to the microsecond.
    let micros = -62_167_219_200_000_000i64..253_402_300_800_000_000i64;
    let token = prop_oneof!["[a-zA-Z0-9._-]{1,24}", any::<String>()];
    let msgid = prop_oneof!["[a-z_]{1,16}", any::<String>()].prop_filter("nil MSGID", |m| header_token(m) != "-");
    // `k_` keeps generated keys off the address fields (their ports add `remote_port`).
    let key = prop_oneof!["[a-z][a-z0-9_]{0,10}", any::<String>()].prop_map(|k| format!("k_{k}"));
    let fields = prop::collection::vec((key, any::<String>()), 0..6);
    let msg = prop::option::of(any::<String>());
    (severity, micros, token.clone(), token, msgid, fields, msg).prop_map(
        |(severity, micros, hostname, app_name, msgid, fields, msg)| Entry {
            severity,
            timestamp: DateTime::from_timestamp_micros(micros).unwrap(),
            hostname,
            app_name,
            msgid,
            fields,
            msg,
        },
    )
}

fn visible_breaks(text: &str) -> String {
    text.replace('\n', "\\n").replace('\r', "\\r")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2_000, ..ProptestConfig::default() })]

    #[test]
    fn parse_never_panics_on_any_string(line in any::<String>()) {
        let _ = parse(&line);
        let _ = parse_shell_command(&line);
    }

    #[test]
    fn parse_never_panics_on_syntax_soup(line in syntax_soup()) {
        let _ = parse(&line);
        let _ = parse_shell_command(&line);
    }

    #[test]
    fn parse_never_panics_on_mutated_lines(
        which in 0..DECNET_LINES.len(),
        mutations in prop::collection::vec(mutation(), 1..6),
    ) {
        let line = mutate(DECNET_LINES[which].to_owned(), &mutations);
        let _ = parse(&line);
    }

    #[test]
    fn formatted_entries_read_back(e in any_entry()) {
        let line = format(&e);
        prop_assert!(!line.contains('\n') && !line.contains('\r'), "{line:?}");
        let back = parse(&line).map_err(|err| TestCaseError::fail(format!("{line:?}: {err}")))?;

        prop_assert_eq!(back.pri, e.severity.pri());
        prop_assert_eq!(&back.decky, &header_token(&e.hostname));
        prop_assert_eq!(&back.service, &header_token(&e.app_name));
        prop_assert_eq!(&back.event_type, &header_token(&e.msgid));
        let micros = e.timestamp.with_nanosecond(e.timestamp.nanosecond() / 1000 * 1000).unwrap();
        prop_assert_eq!(back.timestamp, Some(micros));

        let mut expected: Vec<(String, String)> = Vec::new();
        for (k, v) in &e.fields {
            let (k, v) = (field_key(k).into_owned(), visible_breaks(v));
            match expected.iter_mut().find(|(ek, _)| *ek == k) {
                Some(slot) => slot.1 = v,
                None => expected.push((k, v)),
            }
        }
        prop_assert_eq!(&back.fields, &expected);
        // DECNET's reader trims the MSG: leading whitespace after `-`, both ends after an element.
        let written = e.msg.as_deref().map(visible_breaks).unwrap_or_default();
        let trimmed = if e.fields.is_empty() { super::super::text::lstrip(&written) } else { super::super::text::strip(&written) };
        prop_assert_eq!(back.msg.as_deref(), (!trimmed.is_empty()).then_some(trimmed));
    }
}

/// Hostile lines of a mebibyte, each shaped to make a backtracking or rescanning reader quadratic
/// (a million steps squared would not finish): every scan here moves forward only.
#[test]
fn hostile_lines_of_a_mebibyte_are_read_in_one_pass() {
    const N: usize = 1 << 20;
    let head = "<134>1 2026-05-02T06:00:25Z d s - - ";
    let bodies = [
        "a".repeat(N),
        "from ".repeat(N / 5),
        "from ::".repeat(N / 7),
        "a=".repeat(N / 2),
        "1.2.3.".repeat(N / 6),
        format!("[relay@55555 {}", "k=\"\\".repeat(N / 4)),
        format!("[relay@55555 {}]", "k=\"v\" ".repeat(N / 6)),
        format!("[relay@55555 {}", "key".repeat(N / 3)),
        "[relay@55555 ".repeat(N / 13),
        "] ".repeat(N / 2),
        "\\]".repeat(N / 2),
        format!("-{}", " ".repeat(N)),
        format!("- {}", "src=".repeat(N / 4)),
    ];
    for body in bodies {
        let line = format!("{head}{body}");
        let _ = parse(&line);
        let wrapped = format!("<14>1 2026-05-02T06:00:25Z d 1 - - - 2026-05-02T06:00:25Z d bash - - {body}");
        let _ = parse(&wrapped);
    }
}
