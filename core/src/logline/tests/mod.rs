//! The parser against literal lines of every shape (DECNET's own test lines first), the formatter's
//! exact output; `properties`: parsing never panics and what the formatter writes reads back;
//! `sample`: the 400-line reference sample reads as DECNET reads it.

use chrono::{DateTime, TimeZone, Timelike, Utc};

use super::*;

mod properties;
mod sample;

/// DECNET's literal test lines (`reference/decnet-workers.md` §1).
const DECNET_LINES: [&str; 5] = [
    r#"<134>1 2026-05-02T06:00:25.453826+00:00 omega-decky smtp - disconnect [relay@55555 src_ip="192.168.1.5"]"#,
    r#"<134>1 2026-05-02T06:22:48.089309+00:00 omega-decky auth-helper - auth_attempt [relay@55555 username="root" src_ip="192.168.1.5"]"#,
    r#"<14>1 2026-05-02T06:22:48.089309+00:00 omega-decky 1 - - -  2026-05-02T06:22:48.089286+00:00 SRV-DELTA-77 bash - command [timeQuality tzKnown="1" isSynced="1" syncAccuracy="326228"] CMD uid=0 user=root src=192.168.1.5 pwd=/root cmd=ls /var/www/html"#,
    r#"<134>1 2024-01-15T12:00:00+00:00 decky-01 http - request [relay@55555 src_ip="1.2.3.4"] login attempt"#,
    r#"<38>1 2026-04-27T03:08:46+00:00 dmz-gateway sshd 940 - - pam_unix(sshd:auth): authentication failure; logname= uid=0 euid=0 tty=ssh ruser= rhost=157.66.144.16 user=root"#,
];

/// What a line must parse to.
struct Case {
    line: &'static str,
    decky: &'static str,
    service: &'static str,
    event_type: &'static str,
    attacker_ip: &'static str,
    fields: &'static [(&'static str, &'static str)],
    msg: Option<&'static str>,
}

const TS: &str = "2026-05-02T06:00:25.453826+00:00";

fn cases() -> Vec<Case> {
    vec![
        // DECNET's five.
        Case {
            line: DECNET_LINES[0],
            decky: "omega-decky",
            service: "smtp",
            event_type: "disconnect",
            attacker_ip: "192.168.1.5",
            fields: &[("src_ip", "192.168.1.5")],
            msg: None,
        },
        Case {
            line: DECNET_LINES[1],
            decky: "omega-decky",
            service: "auth-helper",
            event_type: "auth_attempt",
            attacker_ip: "192.168.1.5",
            fields: &[("username", "root"), ("src_ip", "192.168.1.5")],
            msg: None,
        },
        Case {
            line: DECNET_LINES[2],
            decky: "SRV-DELTA-77",
            service: "bash",
            event_type: "command",
            attacker_ip: "192.168.1.5",
            fields: &[],
            msg: Some("CMD uid=0 user=root src=192.168.1.5 pwd=/root cmd=ls /var/www/html"),
        },
        Case {
            line: DECNET_LINES[3],
            decky: "decky-01",
            service: "http",
            event_type: "request",
            attacker_ip: "1.2.3.4",
            fields: &[("src_ip", "1.2.3.4")],
            msg: Some("login attempt"),
        },
        Case {
            line: DECNET_LINES[4],
            decky: "dmz-gateway",
            service: "sshd",
            event_type: "-",
            attacker_ip: "157.66.144.16",
            fields: &[],
            msg: Some(
                "pam_unix(sshd:auth): authentication failure; logname= uid=0 euid=0 tty=ssh ruser= rhost=157.66.144.16 user=root",
            ),
        },
        // Escapes: \" \\ \] unescaped; a backslash before anything else stays.
        Case {
            line: r#"<134>1 2026-05-02T06:00:25Z d s - e [relay@55555 cmd="say \"hi\" \\ done\]" raw="a\nb" src_ip="9.9.9.9"]"#,
            decky: "d",
            service: "s",
            event_type: "e",
            attacker_ip: "9.9.9.9",
            fields: &[("cmd", r#"say "hi" \ done]"#), ("raw", r"a\nb"), ("src_ip", "9.9.9.9")],
            msg: None,
        },
        // An escaped `]` does not end the element (DECNET truncates here); a bare one does, even
        // inside quotes (RFC 5424 wants it escaped there), leaving that value unterminated: it and
        // what follows are not parameters.
        Case {
            line: r#"<134>1 2026-05-02T06:00:25Z d http - request [relay@55555 path="/a\]b" q="x]y" src_ip="1.1.1.1"] tail"#,
            decky: "d",
            service: "http",
            event_type: "request",
            attacker_ip: "Unknown",
            fields: &[("path", "/a]b")],
            msg: Some("tail"),
        },
        // a.b.c.d:port is split and remote_port added.
        Case {
            line: r#"<134>1 2026-05-02T06:00:25Z d http - request [relay@55555 remote_addr="203.0.113.9:51234"]"#,
            decky: "d",
            service: "http",
            event_type: "request",
            attacker_ip: "203.0.113.9",
            fields: &[("remote_addr", "203.0.113.9:51234"), ("remote_port", "51234")],
            msg: None,
        },
        // A remote_port already there is kept.
        Case {
            line: r#"<134>1 2026-05-02T06:00:25Z d http - request [relay@55555 remote_port="1" src_ip="203.0.113.9:2"]"#,
            decky: "d",
            service: "http",
            event_type: "request",
            attacker_ip: "203.0.113.9",
            fields: &[("remote_port", "1"), ("src_ip", "203.0.113.9:2")],
            msg: None,
        },
        // [v6]:port is split, brackets stripped.
        Case {
            line: r#"<134>1 2026-05-02T06:00:25Z d http - request [relay@55555 remote_addr="[2001:db8::5\]:443"]"#,
            decky: "d",
            service: "http",
            event_type: "request",
            attacker_ip: "2001:db8::5",
            fields: &[("remote_addr", "[2001:db8::5]:443"), ("remote_port", "443")],
            msg: None,
        },
        // A bare IPv6 value is an address, not host `2001:db8:` port `1` (CONTRACT.md).
        Case {
            line: r#"<134>1 2026-05-02T06:00:25Z d ssh - connect [relay@55555 src_ip="2001:db8::1"]"#,
            decky: "d",
            service: "ssh",
            event_type: "connect",
            attacker_ip: "2001:db8::1",
            fields: &[("src_ip", "2001:db8::1")],
            msg: None,
        },
        // Field priority, not line order; the first present decides, and an empty one names no one
        // (DECNET stores it empty, and tries no other field).
        Case {
            line: r#"<134>1 2026-05-02T06:00:25Z d ssh - connect [relay@55555 ip="9.9.9.9" src_ip="" client_ip="5.5.5.5"]"#,
            decky: "d",
            service: "ssh",
            event_type: "connect",
            attacker_ip: UNKNOWN_IP,
            fields: &[("ip", "9.9.9.9"), ("src_ip", ""), ("client_ip", "5.5.5.5")],
            msg: None,
        },
        // The prober: the probed host is the attacker.
        Case {
            line: r#"<134>1 2026-05-02T06:00:25Z decnet-prober prober - jarm_fingerprint [relay@55555 target_ip="198.51.100.7" target_port="443" jarm="2ad2ad"]"#,
            decky: "decnet-prober",
            service: "prober",
            event_type: "jarm_fingerprint",
            attacker_ip: "198.51.100.7",
            fields: &[("target_ip", "198.51.100.7"), ("target_port", "443"), ("jarm", "2ad2ad")],
            msg: None,
        },
        // A repeated key keeps its first position and takes the last value (Python dict).
        Case {
            line: r#"<134>1 2026-05-02T06:00:25Z d s - e [relay@55555 a="1" b="2" a="3"]"#,
            decky: "d",
            service: "s",
            event_type: "e",
            attacker_ip: UNKNOWN_IP,
            fields: &[("a", "3"), ("b", "2")],
            msg: None,
        },
        // MSG fallback 1: the first key=value token (in text order) whose key is an address field,
        // its value as written.
        Case {
            line: "<134>1 2026-05-02T06:00:25Z d s - e - peer ip=10.9.9.9 client_ip=10.1.1.1:4444 done",
            decky: "d",
            service: "s",
            event_type: "e",
            attacker_ip: "10.9.9.9",
            fields: &[],
            msg: Some("peer ip=10.9.9.9 client_ip=10.1.1.1:4444 done"),
        },
        // MSG fallback 2: anchored; the listener after `on` is not the attacker.
        Case {
            line: "<38>1 2026-04-27T03:08:46+00:00 gw sshd 940 - - Connection from 10.0.0.5 port 4242 on 172.17.0.2 port 22",
            decky: "gw",
            service: "sshd",
            event_type: "-",
            attacker_ip: "10.0.0.5",
            fields: &[],
            msg: Some("Connection from 10.0.0.5 port 4242 on 172.17.0.2 port 22"),
        },
        Case {
            line: "<38>1 2026-04-27T03:08:46+00:00 gw sshd 940 - - Accepted password for root FROM 2001:db8::7 port 22 ssh2",
            decky: "gw",
            service: "sshd",
            event_type: "-",
            attacker_ip: "2001:db8::7",
            fields: &[],
            msg: Some("Accepted password for root FROM 2001:db8::7 port 22 ssh2"),
        },
        Case {
            line: "<38>1 2026-04-27T03:08:46+00:00 gw app - - - 172.17.0.2 saw Client: 8.8.4.4.",
            decky: "gw",
            service: "app",
            event_type: "-",
            attacker_ip: "8.8.4.4",
            fields: &[],
            msg: Some("172.17.0.2 saw Client: 8.8.4.4."),
        },
        // MSG fallback 3: the first dotted quad on word boundaries, valid or not.
        Case {
            line: "<38>1 2026-04-27T03:08:46+00:00 gw app - - - v1.2.3.4 999.1.1.1 scan by 7.7.7.7!",
            decky: "gw",
            service: "app",
            event_type: "-",
            attacker_ip: "999.1.1.1",
            fields: &[],
            msg: Some("v1.2.3.4 999.1.1.1 scan by 7.7.7.7!"),
        },
        // None: Unknown.
        Case {
            line: "<134>1 2026-05-02T06:00:25Z d s - startup - service started from scratch",
            decky: "d",
            service: "s",
            event_type: "startup",
            attacker_ip: UNKNOWN_IP,
            fields: &[],
            msg: Some("service started from scratch"),
        },
        // CMD with a nil MSGID, not wrapped.
        Case {
            line: "<13>1 2026-05-02T06:00:25Z decky-02 bash - - - CMD uid=1000 user=bob src=203.0.113.4 pwd=/tmp cmd=id",
            decky: "decky-02",
            service: "bash",
            event_type: "command",
            attacker_ip: "203.0.113.4",
            fields: &[],
            msg: Some("CMD uid=1000 user=bob src=203.0.113.4 pwd=/tmp cmd=id"),
        },
        // Native rsyslog line with a PID.
        Case {
            line: "<38>1 2026-04-27T03:08:46+00:00 dmz-gateway sshd 940 - - Accepted password for root from 10.0.0.5 port 4242 ssh2",
            decky: "dmz-gateway",
            service: "sshd",
            event_type: "-",
            attacker_ip: "10.0.0.5",
            fields: &[],
            msg: Some("Accepted password for root from 10.0.0.5 port 4242 ssh2"),
        },
        // Several elements; only relay@55555 gives fields; others skipped, escapes and all.
        Case {
            line: r#"<134>1 2026-05-02T06:00:25Z d s - e [timeQuality tzKnown="1"][meta note="a \"]\" b" x="]"][relay@55555 src="4.4.4.4" k="v"] after"#,
            decky: "d",
            service: "s",
            event_type: "e",
            attacker_ip: "4.4.4.4",
            fields: &[("src", "4.4.4.4"), ("k", "v")],
            msg: Some("after"),
        },
        // Two relay elements: the first gives the fields.
        Case {
            line: r#"<134>1 2026-05-02T06:00:25Z d s - e [relay@55555 a="1"][relay@55555 b="2"]"#,
            decky: "d",
            service: "s",
            event_type: "e",
            attacker_ip: UNKNOWN_IP,
            fields: &[("a", "1")],
            msg: None,
        },
        // Nil SD alone: no MSG. After nil SD the MSG loses its leading whitespace only.
        Case {
            line: "<134>1 2026-05-02T06:00:25Z d s - e -",
            decky: "d",
            service: "s",
            event_type: "e",
            attacker_ip: UNKNOWN_IP,
            fields: &[],
            msg: None,
        },
        Case {
            line: "<134>1 2026-05-02T06:00:25Z d s - e -  two  spaces ",
            decky: "d",
            service: "s",
            event_type: "e",
            attacker_ip: UNKNOWN_IP,
            fields: &[],
            msg: Some("two  spaces "),
        },
        // No SD at all, just prose: all of it is MSG (DECNET does the same).
        Case {
            line: "<134>1 2026-05-02T06:00:25Z d s - e hello from 6.6.6.6",
            decky: "d",
            service: "s",
            event_type: "e",
            attacker_ip: "6.6.6.6",
            fields: &[],
            msg: Some("hello from 6.6.6.6"),
        },
        // An element that never ends (a line cut short): no fields and no MSG, as DECNET reads it.
        Case {
            line: r#"<134>1 2026-05-02T06:00:25Z d s - e [relay@55555 src_ip="1.2.3.4" user="ro"#,
            decky: "d",
            service: "s",
            event_type: "e",
            attacker_ip: UNKNOWN_IP,
            fields: &[],
            msg: None,
        },
        // Prose that merely starts with `[`: the MSG is what follows the first `] `.
        Case {
            line: "<134>1 2026-05-02T06:00:25Z d s - e [pid 12] connection from 8.8.8.8",
            decky: "d",
            service: "s",
            event_type: "e",
            attacker_ip: "8.8.8.8",
            fields: &[],
            msg: Some("connection from 8.8.8.8"),
        },
        // Looks wrapped, but the remainder is no header: an ordinary nil-SD line.
        Case {
            line: "<14>1 2026-05-02T06:22:48Z omega-decky 1 - - -  not a header",
            decky: "omega-decky",
            service: "1",
            event_type: "-",
            attacker_ip: UNKNOWN_IP,
            fields: &[],
            msg: Some("not a header"),
        },
        // Unicode in tokens and values; a trailing CRLF is not part of the line.
        Case {
            line: "<134>1 2026-05-02T06:00:25Z dé ßvc - ev [relay@55555 name=\"ünï \\]\" src_ip=\"1.0.0.1\"] ✓\r\n",
            decky: "dé",
            service: "ßvc",
            event_type: "ev",
            attacker_ip: "1.0.0.1",
            fields: &[("name", "ünï ]"), ("src_ip", "1.0.0.1")],
            msg: Some("✓"),
        },
    ]
}

#[test]
fn literal_lines_parse_to_their_parts() {
    let mut wrong = Vec::new();
    for case in cases() {
        let parsed = parse(case.line).unwrap_or_else(|e| panic!("{}: {e}", case.line));
        let fields: Vec<(&str, &str)> = parsed.fields.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let got = (
            &*parsed.decky,
            &*parsed.service,
            &*parsed.event_type,
            &*parsed.attacker_ip,
            fields,
            parsed.msg.as_deref(),
        );
        let want = (case.decky, case.service, case.event_type, case.attacker_ip, case.fields.to_vec(), case.msg);
        if got != want {
            wrong.push(format!("{}\n  want {want:?}\n  got  {got:?}", case.line));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

fn utc(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text).unwrap().with_timezone(&Utc)
}

#[test]
fn decnet_lines_carry_pri_and_timestamp() {
    let first = parse(DECNET_LINES[0]).unwrap();
    assert_eq!(first.pri, 134);
    assert_eq!(first.timestamp, Some(utc("2026-05-02T06:00:25.453826Z")));
    // The double-wrapped line keeps the outer PRI and the outer time, as DECNET reads it.
    let wrapped = parse(DECNET_LINES[2]).unwrap();
    assert_eq!(wrapped.pri, 14);
    assert_eq!(wrapped.timestamp, Some(utc("2026-05-02T06:22:48.089309Z")));
    assert_eq!(parse(DECNET_LINES[4]).unwrap().pri, 38);
}

#[test]
fn double_wrap_keeps_the_outer_time_whatever_the_inner_one() {
    let line = "<14>1 2026-05-02T06:22:48Z omega-decky 1 - - - 2026-05-02T99:00:00Z SRV bash - command - CMD cmd=id";
    let parsed = parse(line).unwrap();
    assert_eq!((parsed.decky.as_str(), parsed.service.as_str()), ("SRV", "bash"));
    assert_eq!(parsed.timestamp, Some(utc("2026-05-02T06:22:48Z")));
}

#[test]
fn timestamps_normalise_to_utc_and_keep_their_fraction() {
    let at = |ts: &str| parse(&format!("<134>1 {ts} d s - e -")).unwrap().timestamp;
    assert_eq!(at(TS), Some(utc("2026-05-02T06:00:25.453826Z")));
    assert_eq!(at("2026-05-02T08:00:25.5+02:00"), Some(utc("2026-05-02T06:00:25.5Z")));
    assert_eq!(at("2026-05-01T23:30:00-06:30"), Some(utc("2026-05-02T06:00:00Z")));
    assert_eq!(at("2026-05-02T06:00:25z"), Some(utc("2026-05-02T06:00:25Z")));
    assert_eq!(at("2026-05-02T06:00:25.123456789Z").map(|t| t.nanosecond()), Some(123_456_789));
    assert_eq!(at("2026-05-02T06:00:25.1234567891234Z").map(|t| t.nanosecond()), Some(123_456_789));
    // Naive: taken as UTC.
    assert_eq!(at("2026-05-02T06:00:25"), Some(utc("2026-05-02T06:00:25Z")));
    assert_eq!(at("2026-05-02T06:00:25.000001"), Some(utc("2026-05-02T06:00:25.000001Z")));
    // A leap second is kept as chrono's leap representation of :59.
    let leap = at("2016-12-31T23:59:60.5Z").unwrap();
    assert_eq!((leap.second(), leap.nanosecond()), (59, 1_500_000_000));
    for bad in [
        "-",
        "yesterday",
        "2026-05-02",
        "2026-13-02T06:00:25Z",
        "2026-02-30T06:00:25Z",
        "2026-05-02T24:00:00Z",
        "2026-05-02T06:00:25.Z",
        "2026-05-02T06:00:25+0200",
        "2026-05-02T06:00:25+24:00",
        "2026-05-02T06:00:25Zjunk",
        "2026-05-02 06:00:25",
        "1700000000",
    ] {
        let line = format!("<134>1 {bad} d s - e -");
        let parsed = parse(&line).unwrap_or_else(|e| panic!("{line}: {e}"));
        assert_eq!(parsed.timestamp, None, "{bad}");
    }
}

#[test]
fn garbage_is_not_a_line() {
    for bad in [
        "",
        "hello world",
        "\u{0}\u{1}\u{2}\u{ff}\u{fffd}",
        "134>1 2026-05-02T06:00:25Z d s - e -",
        "<>1 2026-05-02T06:00:25Z d s - e -",
        "<x>1 2026-05-02T06:00:25Z d s - e -",
        "<134",
        "<134>",
        "<134>1",
        "<134>1 ",
        "<134>2 2026-05-02T06:00:25Z d s - e -",
        "<134>11 2026-05-02T06:00:25Z d s - e -",
        "<134> 1 2026-05-02T06:00:25Z d s - e -",
        "<134>1 2026-05-02T06:00:25Z",
        "<134>1 2026-05-02T06:00:25Z d",
        "<134>1 2026-05-02T06:00:25Z d s",
        "<134>1 2026-05-02T06:00:25Z d s -",
        "<134>1 2026-05-02T06:00:25Z d s - ",
        // Ends right after MSGID: DECNET wants at least the nil structured data.
        "<134>1 2026-05-02T06:00:25Z d s - e",
        "<134>1  2026-05-02T06:00:25Z d s - e -",
        "<134>1 2026-05-02T06:00:25Z d  s - e -",
        // Python's whitespace ends a header field: a tab, an ideographic space, U+001F.
        "<134>1 2026-05-02T06:00:25Z d\ts - e -",
        "<134>1 2026-05-02T06:00:25Z d \u{3000}s - e -",
        "<134>1 2026-05-02T06:00:25Z d\u{1f}x s - e -",
        // Nothing after MSGID's space.
        "<134>1 2026-05-02T06:00:25Z d s - e ",
    ] {
        assert!(parse(bad).is_err(), "{bad:?} parsed");
    }
    // DECNET reads any PRI digits; one past u16 is kept as its largest value.
    assert_eq!(parse("<192>1 2026-05-02T06:00:25Z d s - e -").unwrap().pri, 192);
    assert_eq!(parse("<999999>1 2026-05-02T06:00:25Z d s - e -").unwrap().pri, u16::MAX);
    assert_eq!(parse("<191>1 - - - - - -").unwrap().pri, 191);
    assert_eq!(parse("<0>1 - - - - - -").unwrap().pri, 0);
}

#[test]
fn fields_json_keeps_line_order() {
    let parsed = parse(r#"<134>1 - d s - e [relay@55555 zeta="1" alpha="q\"uote" src_ip="1.2.3.4:5"]"#).unwrap();
    assert_eq!(parsed.fields_json(), r#"{"zeta":"1","alpha":"q\"uote","src_ip":"1.2.3.4:5","remote_port":"5"}"#);
    assert_eq!(parsed.field("alpha"), Some("q\"uote"));
    assert_eq!(parsed.field("nope"), None);
    assert_eq!(parse("<134>1 - d s - e -").unwrap().fields_json(), "{}");
}

#[test]
fn many_repeated_keys_stay_linear_and_last_wins() {
    let mut line = String::from("<134>1 - d s - e [relay@55555");
    for round in 0..3 {
        for key in 0..200 {
            line.push_str(&format!(" k{key}=\"{round}\""));
        }
    }
    line.push(']');
    let parsed = parse(&line).unwrap();
    assert_eq!(parsed.fields.len(), 200);
    assert_eq!(parsed.fields[0], ("k0".to_owned(), "2".to_owned()));
    assert_eq!(parsed.field("k199"), Some("2"));
}

/// Every scan is linear: hostile megabyte lines of each shape parse at once.
#[test]
fn huge_hostile_lines_parse_in_linear_time() {
    let started = std::time::Instant::now();
    let header = "<134>1 2026-05-02T06:00:25Z d s - e ";
    let bodies = [
        format!("- {}", "from ".repeat(200_000)),
        format!("- {}", "src=rhost=client: ".repeat(60_000)),
        format!("- {}", "1.2.3.".repeat(170_000)),
        format!("- from {}", "a:".repeat(500_000)),
        format!("[relay@55555 {}]", "k=\"\\\"]\" ".repeat(100_000)),
        format!("[relay@55555 {}", "a=\"".repeat(250_000)),
        format!("{}x", "[".repeat(1_000_000)),
        format!("- CMD {}cmd=x", "pwd=a b ".repeat(120_000)),
    ];
    for body in &bodies {
        let line = format!("{header}{body}");
        let _ = parse(&line);
        let _ = parse_shell_command(body.trim_start_matches("- "));
    }
    assert!(started.elapsed() < std::time::Duration::from_secs(10), "took {:?}", started.elapsed());
}

#[test]
fn shell_command_bodies() {
    let full = parse_shell_command("CMD uid=0 user=root src=192.168.1.5 pwd=/root cmd=ls /var/www/html").unwrap();
    assert_eq!(
        full,
        ShellCommand {
            uid: Some("0".into()),
            user: Some("root".into()),
            src: Some("192.168.1.5".into()),
            pwd: Some("/root".into()),
            command: "ls /var/www/html".into(),
        }
    );
    let tricky = parse_shell_command("CMD uid=0 tty=pts/0 pwd=/my dir cmd=env A=b cmd=x  ").unwrap();
    assert_eq!(tricky.uid.as_deref(), Some("0"));
    assert_eq!(tricky.pwd.as_deref(), Some("/my dir"));
    assert_eq!(tricky.user, None);
    assert_eq!(tricky.command, "env A=b cmd=x  ");
    assert_eq!(parse_shell_command("CMD cmd=").unwrap().command, "");
    assert_eq!(parse_shell_command("CMD uid=0 user=root"), None);
    assert_eq!(parse_shell_command("CMD uid=0 xcmd=ls"), None);
    assert_eq!(parse_shell_command("cmd=ls"), None);
    assert_eq!(parse_shell_command("CMDcmd=ls"), None);
}

fn entry(fields: &[(&str, &str)], msg: Option<&str>) -> Entry {
    Entry {
        severity: Severity::Info,
        timestamp: utc("2026-05-02T06:22:48.089309Z"),
        hostname: "omega-decky".into(),
        app_name: "auth-helper".into(),
        msgid: "auth_attempt".into(),
        fields: fields.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        msg: msg.map(str::to_owned),
    }
}

#[test]
fn format_writes_what_decnet_writes() {
    assert_eq!(
        format(&entry(&[("username", "root"), ("src_ip", "192.168.1.5")], None)),
        r#"<134>1 2026-05-02T06:22:48.089309+00:00 omega-decky auth-helper - auth_attempt [relay@55555 username="root" src_ip="192.168.1.5"]"#
    );
    let startup = Entry {
        severity: Severity::Warning,
        timestamp: utc("2024-01-15T12:00:00Z"),
        msgid: "startup".into(),
        ..entry(&[], Some("service started"))
    };
    assert_eq!(
        format(&startup),
        "<132>1 2024-01-15T12:00:00+00:00 omega-decky auth-helper - startup - service started"
    );
    let error = Entry { severity: Severity::Error, ..entry(&[], Some("")) };
    assert!(format(&error).starts_with("<131>1 "));
    assert!(format(&error).ends_with(" auth_attempt -"), "empty MSG is no MSG");
}

#[test]
fn format_escapes_and_sanitises() {
    let odd = Entry {
        hostname: "".into(),
        app_name: "my app\t1".into(),
        msgid: "a\u{7}b".into(),
        ..entry(&[("we-ird key!", "a\\b\"c]d\ne\rf"), ("---", "x")], Some("two\nlines"))
    };
    assert_eq!(
        format(&odd),
        r#"<134>1 2026-05-02T06:22:48.089309+00:00 - my_app_1 - a_b [relay@55555 weirdkey="a\\b\"c\]d\ne\rf" _="x"] two\nlines"#
    );
    let back = parse(&format(&odd)).unwrap();
    assert_eq!(back.decky, "-");
    assert_eq!(back.service, "my_app_1");
    assert_eq!(back.field("weirdkey"), Some("a\\b\"c]d\\ne\\rf"));
    assert_eq!(back.msg.as_deref(), Some("two\\nlines"));
}

#[test]
fn format_timestamps_like_python_isoformat() {
    let at = |t: DateTime<Utc>| format(&Entry { timestamp: t, ..entry(&[], None) });
    assert!(at(utc("2026-05-02T06:22:48.000001Z")).contains(" 2026-05-02T06:22:48.000001+00:00 "));
    assert!(at(utc("2026-05-02T06:22:48.999999999Z")).contains(" 2026-05-02T06:22:48.999999+00:00 "));
    assert!(at(utc("2026-05-02T06:22:48Z")).contains(" 2026-05-02T06:22:48+00:00 "));
    assert!(at(utc("0001-01-01T00:00:00Z")).contains(" 0001-01-01T00:00:00+00:00 "));
    let far = Utc.with_ymd_and_hms(12026, 1, 1, 0, 0, 0).unwrap();
    let line = at(far);
    assert!(line.starts_with("<134>1 - omega-decky "), "{line}");
    assert_eq!(parse(&line).unwrap().timestamp, None);
}

#[test]
fn formatted_literal_lines_round_trip() {
    for case in cases().iter().filter(|c| c.event_type != "-" && c.event_type != "command") {
        let parsed = parse(case.line).unwrap_or_else(|e| panic!("{}: {e}", case.line));
        let again = parse(&format(&Entry {
            severity: Severity::Info,
            timestamp: parsed.timestamp.unwrap_or_else(Utc::now),
            hostname: parsed.decky.clone(),
            app_name: parsed.service.clone(),
            msgid: parsed.event_type.clone(),
            fields: parsed.fields.clone(),
            msg: parsed.msg.clone(),
        }))
        .unwrap();
        assert_eq!(
            (&again.decky, &again.service, &again.event_type, &again.attacker_ip, &again.fields, &again.msg),
            (&parsed.decky, &parsed.service, &parsed.event_type, &parsed.attacker_ip, &parsed.fields, &parsed.msg),
            "{}",
            case.line
        );
    }
}
