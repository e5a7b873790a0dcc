//! ICMP error behaviour, DECNET's `icmp_error` (IPv4, `v4`) and `icmp6_error` (IPv6, `v6`): four
//! stimuli a stack, or the path to it, may answer with an error, sent at once, then the first
//! error quoting each is read from a raw ICMP socket for a while. Which stimuli drew the error
//! they aim at is the matrix (a letter each, `.` for silence or another answer); silence is
//! informative too, as stacks differ in what they answer and how fast they rate-limit. Raw sockets
//! need CAP_NET_RAW: without it no listener opens and the probe is reported skipped.

pub mod v4;
pub mod v6;

use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::OwnedFd;
use std::time::Duration;

use rustix::net::RecvFlags;
use sha2::{Digest, Sha256};
use tokio::time::Instant;

/// The traceroute ports: closed almost everywhere, and common enough to pass unremarked.
const CLOSED_PORTS: std::ops::RangeInclusive<u16> = 33434..=33534;
/// How often the raw socket is looked at while waiting.
const POLL: Duration = Duration::from_millis(20);

/// One stimulus: its key in DECNET's `errors`, its matrix letter, and the error it aims at.
#[derive(Debug)]
pub struct Stimulus {
    pub name: &'static str,
    pub letter: char,
    pub icmp_type: u8,
    /// `None`: any code of the type.
    pub icmp_code: Option<u8>,
}

/// The first ICMP error that quoted a stimulus.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reply {
    /// The error's sender: the target, or a router on the way.
    pub from: IpAddr,
    pub icmp_type: u8,
    pub icmp_code: u8,
    /// Bytes of the stimulus (its IP header on) the error quotes.
    pub echo_len: usize,
    pub rtt_ms: u64,
}

/// What one stimulus drew.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Answer {
    /// False when the kernel refused to send it.
    pub sent: bool,
    pub reply: Option<Reply>,
}

/// The four answers of one target, in the order of its family's stimuli.
#[derive(Debug)]
pub struct Elicited {
    pub stimuli: &'static [Stimulus; 4],
    pub answers: [Answer; 4],
}

impl Stimulus {
    /// Whether `answer` is the error this stimulus aims at (DECNET's `returned`).
    pub fn returned(&self, answer: &Answer) -> bool {
        answer
            .reply
            .as_ref()
            .is_some_and(|r| r.icmp_type == self.icmp_type && self.icmp_code.is_none_or(|code| code == r.icmp_code))
    }
}

impl Elicited {
    pub fn matrix(&self) -> String {
        self.pairs().map(|(s, a)| if s.returned(a) { s.letter } else { '.' }).collect()
    }

    /// DECNET's hash, so the two compare: the first 32 hex digits of the SHA-256 of
    /// `matrix:(echo lengths):(codes)` in Python's tuple spelling, a length 0 and a code -1 where
    /// no error came (an answer of another type counts). Python's `code or -1` also turns a code 0
    /// (Time Exceeded) into -1; kept for the same reason.
    pub fn hash(&self) -> String {
        let tuple =
            |values: Vec<i64>| format!("({})", values.iter().map(i64::to_string).collect::<Vec<_>>().join(", "));
        let lens = self.answers.iter().map(|a| a.reply.as_ref().map_or(0, |r| r.echo_len as i64)).collect();
        let codes = self
            .answers
            .iter()
            .map(|a| a.reply.as_ref().map_or(-1, |r| i64::from(r.icmp_code)))
            .map(|code| if code == 0 { -1 } else { code })
            .collect();
        let raw = format!("{}:{}:{}", self.matrix(), tuple(lens), tuple(codes));
        svc::text::hex(&Sha256::digest(raw.as_bytes())[..16])
    }

    pub fn any_sent(&self) -> bool {
        self.answers.iter().any(|a| a.sent)
    }

    pub fn pairs(&self) -> impl Iterator<Item = (&Stimulus, &Answer)> {
        self.stimuli.iter().zip(&self.answers)
    }
}

/// The four stimuli of `target`'s family, and what they drew within `wait`; returns the closed
/// port the first went to too. `Err` without CAP_NET_RAW.
pub async fn elicit(target: IpAddr, wait: Duration) -> io::Result<(u16, Elicited)> {
    match target {
        IpAddr::V4(v4) => v4::Listener::open()?.elicit(v4, wait).await,
        IpAddr::V6(v6) => v6::Listener::open()?.elicit(v6, wait).await,
    }
}

/// A UDP port of this host held for the probe, so no other socket takes the source port a
/// stimulus is recognised by; and the closed port of the target it is sent to.
fn ports(family: IpAddr) -> io::Result<(UdpSocket, u16, u16)> {
    let socket = UdpSocket::bind(SocketAddr::new(family, 0))?;
    let local = socket.local_addr()?.port();
    // The kernel's random ephemeral port picks the closed port too.
    let span = CLOSED_PORTS.end() - CLOSED_PORTS.start() + 1;
    Ok((socket, local, CLOSED_PORTS.start() + local % span))
}

/// Reads `listener` until every sent stimulus has its error or `wait` has passed since the last
/// was sent; `recognise` names the stimulus a packet answers and reads the error.
async fn collect(
    listener: &OwnedFd,
    sent_at: [Option<Instant>; 4],
    wait: Duration,
    recognise: impl Fn(&[u8], Option<IpAddr>) -> Option<(usize, Reply)>,
) -> [Answer; 4] {
    let mut answers: [Answer; 4] = std::array::from_fn(|i| Answer { sent: sent_at[i].is_some(), reply: None });
    let Some(last) = sent_at.iter().flatten().max().copied() else { return answers };
    let mut buf = [0u8; 1500];
    loop {
        while let Ok((n, _, from)) = rustix::net::recvfrom(listener, &mut buf[..], RecvFlags::DONTWAIT) {
            let from = from.and_then(|a| SocketAddr::try_from(a).ok()).map(|a| a.ip());
            if let Some((index, mut reply)) = recognise(&buf[..n], from)
                && let (Some(at), None) = (sent_at[index], &answers[index].reply)
            {
                reply.rtt_ms = at.elapsed().as_millis() as u64;
                answers[index].reply = Some(reply);
            }
        }
        let done = answers.iter().all(|a| !a.sent || a.reply.is_some());
        if done || last.elapsed() >= wait {
            return answers;
        }
        tokio::time::sleep(POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(icmp_type: u8, icmp_code: u8, echo_len: usize) -> Answer {
        let from = "192.0.2.1".parse().unwrap();
        Answer { sent: true, reply: Some(Reply { from, icmp_type, icmp_code, echo_len, rtt_ms: 1 }) }
    }

    #[test]
    fn matrix_and_hash_are_decnets() {
        // A Linux target behind a router: Port Unreachable, the router's Time Exceeded and
        // Fragmentation Needed, and the bad option ignored (its datagram draws Port Unreachable).
        let elicited = Elicited {
            stimuli: &v4::STIMULI,
            answers: [answer(3, 3, 60), answer(11, 0, 60), answer(3, 4, 548), answer(3, 3, 40)],
        };
        assert_eq!(elicited.matrix(), "PTF.");
        // Python: sha256(b"PTF.:(60, 60, 548, 40):(3, -1, 4, 3)").hexdigest()[:32]
        assert_eq!(elicited.hash(), "0b04deb3c9509c19d285efecb832552b");
        let silent = Elicited { stimuli: &v4::STIMULI, answers: Default::default() };
        assert_eq!((silent.matrix().as_str(), silent.hash().as_str()), ("....", "10f08da12c7b395c1e64c7091f9ba12f"));
        assert!(!silent.any_sent());
    }
}
