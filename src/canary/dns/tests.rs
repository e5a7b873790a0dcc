//! The canary zone's queries and answers, well-formed and hostile.

use super::*;

fn zone() -> DnsZone {
    DnsZone::parse("Trap.Example.NET.").unwrap()
}

/// A query for `name` as a stub resolver sends it (RD set), with an EDNS OPT record after it.
fn query(id: u16, name: &str, qtype: u16) -> Vec<u8> {
    let mut packet = id.to_be_bytes().to_vec();
    packet.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 1]);
    for label in name.split('.').filter(|label| !label.is_empty()) {
        packet.push(label.len() as u8);
        packet.extend_from_slice(label.as_bytes());
    }
    packet.push(0);
    packet.extend_from_slice(&qtype.to_be_bytes());
    packet.extend_from_slice(&CLASS_IN.to_be_bytes());
    packet.extend_from_slice(&[0, 0, 41, 4, 208, 0, 0, 0, 0, 0, 0]);
    packet
}

fn parsed(packet: &[u8]) -> Query<'_> {
    match parse(packet) {
        Packet::Query(query) => query,
        other => panic!("not a query: {other:?}"),
    }
}

fn rcode(reply: &[u8]) -> u8 {
    reply[3] & 0xf
}

#[test]
fn zones_are_checked_and_folded() {
    assert_eq!(zone().as_str(), "trap.example.net");
    assert_eq!(DnsZone::parse("canary").unwrap().as_str(), "canary");
    for bad in ["", ".", "a..b", "a_b.c", "-a.b", "a-.b", "a b", "ex\u{e9}.net", &"a".repeat(64)] {
        assert!(DnsZone::parse(bad).is_err(), "{bad:?}");
    }
    let long = ["a".repeat(63), "b".repeat(63), "c".repeat(63), "d".repeat(30)].join(".");
    assert!(DnsZone::parse(&long).is_err(), "no room left for a token");
}

#[test]
fn a_token_under_the_zone_is_found_whatever_its_case_and_depth() {
    let packet = query(0xbeef, "0f3A9c.TRAP.example.net", TYPE_A);
    let query = parsed(&packet);
    assert_eq!(query.name(), "0f3a9c.trap.example.net");
    let token = CallbackToken::parse("0f3a9c").unwrap();
    assert_eq!(query.place(&zone()), Place::Below(vec![token.clone()]));
    let deeper = query_place("x_y.0f3a9c.trap.example.net");
    assert_eq!(deeper, Place::Below(vec![token]), "labels that are no token are skipped");
    assert_eq!(query_place("trap.example.net"), Place::Apex);
    assert_eq!(query_place("example.net"), Place::Outside);
    assert_eq!(query_place("0f3a9c.trap.example.org"), Place::Outside);
    assert_eq!(query_place("0f3a9c.xtrap.example.net"), Place::Outside);
    assert_eq!(query_place("x_y.trap.example.net"), Place::Below(vec![]));
    let many = format!("{}.trap.example.net", ["a"; 20].join("."));
    assert!(matches!(query_place(&many), Place::Below(tokens) if tokens.len() == MAX_CANDIDATES));
}

fn query_place(name: &str) -> Place {
    parsed(&query(1, name, TYPE_A)).place(&zone())
}

#[test]
fn answers_echo_the_question_and_carry_the_address_only_for_a() {
    let packet = query(0xbeef, "0f3A9c.trap.example.net", TYPE_A);
    let query = parsed(&packet);
    let reply = query.answer(Rcode::NoError, Some(Ipv4Addr::new(192, 0, 2, 7)));
    assert_eq!(&reply[..2], &[0xbe, 0xef]);
    assert_eq!(reply[2], 0x85, "QR, AA and RD");
    assert_eq!((rcode(&reply), &reply[4..12]), (0, &[0, 1, 0, 1, 0, 0, 0, 0][..]));
    let question_end = HEADER + query.question.len();
    assert_eq!(&reply[HEADER..question_end], &packet[HEADER..question_end], "the question as sent, case and all");
    assert_eq!(&reply[question_end..], &[0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 0, 0, 4, 192, 0, 2, 7]);

    let any = query_answer(TYPE_ANY, Rcode::NoError);
    assert_eq!(any[7], 1, "ANY gets the A record");
    for (qtype, code) in [(28, Rcode::NoError), (TYPE_A, Rcode::NxDomain), (TYPE_A, Rcode::Refused)] {
        let reply = query_answer(qtype, code);
        assert_eq!((reply[7], rcode(&reply)), (0, code as u8), "{qtype} {code:?}");
        assert_eq!(reply[2] & 0x04 != 0, code != Rcode::Refused, "AA unless refused");
    }
    let plain = parsed(&packet).answer(Rcode::NoError, None);
    assert_eq!((plain[7], plain.len()), (0, HEADER + query.question.len()), "no address: no data");
}

fn query_answer(qtype: u16, rcode: Rcode) -> Vec<u8> {
    parsed(&query(9, "abc.trap.example.net", qtype)).answer(rcode, Some(Ipv4Addr::LOCALHOST))
}

#[test]
fn odd_labels_are_escaped_in_the_name() {
    let mut packet = query(1, "x.trap.example.net", TYPE_A);
    packet[HEADER + 1] = b'.';
    assert_eq!(parsed(&packet).name(), "\\046.trap.example.net");
}

#[test]
fn malformed_queries_are_refused_and_answers_ignored() {
    let good = query(0x1234, "abc.trap.example.net", TYPE_A);
    assert_eq!(parse(&good[..11]), Packet::Ignore, "no whole header");
    let mut answer = good.clone();
    answer[2] |= 0x80;
    assert_eq!(parse(&answer), Packet::Ignore, "a response is never answered");

    let formerr = |packet: &[u8]| match parse(packet) {
        Packet::Refuse(reply) => {
            assert_eq!((&reply[..2], rcode(&reply), reply.len()), (&[0x12, 0x34][..], 1, HEADER));
        }
        other => panic!("not refused: {other:?}"),
    };
    for cut in HEADER..good.len() - 11 {
        formerr(&good[..cut]);
    }
    let mut two = good.clone();
    two[5] = 2;
    formerr(&two);
    let mut none = good.clone();
    none[5] = 0;
    formerr(&none);
    let mut pointer = good.clone();
    pointer[HEADER] = 0xc0;
    formerr(&pointer);
    let mut reserved = good.clone();
    reserved[HEADER] = 0x40;
    formerr(&reserved);
    let mut long = good[..HEADER].to_vec();
    for _ in 0..5 {
        long.push(63);
        long.extend_from_slice(&[b'a'; 63]);
    }
    long.extend_from_slice(&[0, 0, 1, 0, 1]);
    formerr(&long);

    let mut notify = good.clone();
    notify[2] = 0x20;
    match parse(&notify) {
        Packet::Refuse(reply) => assert_eq!(rcode(&reply), Rcode::NotImp as u8),
        other => panic!("{other:?}"),
    }
}

#[test]
fn random_bytes_never_panic() {
    // A small xorshift: the same bytes every run, no dependency.
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let good = query(7, "abc.trap.example.net", TYPE_A);
    for round in 0..20_000 {
        let len = (next() % 600) as usize;
        let mut packet: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        if round % 2 == 0 {
            // Keep a plausible header so the question parser is what is exercised.
            packet.splice(..packet.len().min(HEADER), good[..HEADER].iter().copied());
        }
        if round % 3 == 0 {
            let mut mutated = good.clone();
            let at = (next() as usize) % mutated.len();
            mutated[at] = next() as u8;
            packet = mutated;
        }
        if let Packet::Query(query) = parse(&packet) {
            let _ = query.place(&zone());
            let _ = query.name();
            assert!(query.answer(Rcode::NoError, Some(Ipv4Addr::LOCALHOST)).len() <= 512);
        }
    }
}
