//! The linking itself, on plain data: attackers with their primitives in, identities out. Two
//! attackers are linked when they share values of at least [`MIN_SHARED_KINDS`] kinds of
//! primitive; a value more than [`COMMON`] attackers share is a tool's, not a person's, and links
//! nothing. Identities are the connected components of the links (two or more attackers), found
//! with a union-find over the links strongest first, so each identity is explained by a maximum
//! spanning forest of its links and its confidence is that forest's weakest link. Deterministic:
//! the same attackers give the same identities, whatever order they come in. The work is bounded
//! by the attackers times [`COMMON`] (each value's group is capped), never attackers squared.

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

/// A value more attackers than this share links nothing.
pub const COMMON: usize = 50;
/// Kinds of primitive two attackers must share to be linked.
pub const MIN_SHARED_KINDS: u32 = 2;

/// What cannot easily be changed between addresses, strongest kinds last in no particular sense:
/// each kind counts once however many values of it two attackers share.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Primitive {
    /// The TLS client's JA3 (its ClientHello), from the sniffer.
    Ja3,
    /// The SSH client's identification line and key exchange order, from the SSH decoy.
    SshClient,
    /// The HASSH of an SSH server on the attacker's own host, from the prober.
    HasshServer,
    /// The JARM of a TLS server on the attacker's own host, from the prober.
    Jarm,
    /// The SHA-256 of a TLS server's certificate on the attacker's own host, from the prober.
    Certificate,
}

impl Primitive {
    pub const ALL: [Primitive; 5] =
        [Primitive::Ja3, Primitive::SshClient, Primitive::HasshServer, Primitive::Jarm, Primitive::Certificate];

    pub fn name(self) -> &'static str {
        match self {
            Primitive::Ja3 => "ja3",
            Primitive::SshClient => "ssh_client",
            Primitive::HasshServer => "hassh_server",
            Primitive::Jarm => "jarm",
            Primitive::Certificate => "certificate",
        }
    }

    fn bit(self) -> u32 {
        1 << self as u32
    }
}

/// One attacker as linking sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct Member {
    pub uuid: Uuid,
    pub ip: String,
    pub first_seen: DateTime<Utc>,
    pub last_seen: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// Its distinct primitive values.
    pub primitives: Vec<(Primitive, String)>,
}

/// A value two linked attackers share.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, ToSchema)]
pub struct Shared {
    pub primitive: Primitive,
    pub value: String,
}

/// Why two attackers are one: what they share, and how sure that makes it.
#[derive(Clone, Debug, PartialEq, Serialize, ToSchema)]
pub struct Link {
    pub attackers: [Uuid; 2],
    pub shared: Vec<Shared>,
    pub confidence: f64,
}

/// Attackers linked into one.
#[derive(Clone, Debug, PartialEq)]
pub struct Identity {
    pub uuid: Uuid,
    /// Oldest first (first seen, then uuid).
    pub members: Vec<Member>,
    /// The links that joined them: a maximum spanning forest, strongest first.
    pub links: Vec<Link>,
    /// The weakest of `links`.
    pub confidence: f64,
}

/// How sure `kinds` shared kinds make a link: each halves the doubt (2 → 0.75, 3 → 0.875…).
pub fn confidence(kinds: u32) -> f64 {
    1.0 - 0.5f64.powi(kinds as i32)
}

/// The identities of `members`, in the order of their oldest member.
pub fn link(mut members: Vec<Member>) -> Vec<Identity> {
    members.sort_by_key(|m| (m.first_seen, m.uuid));
    // Each value's attackers, ascending; a value of too many is dropped.
    let mut groups: HashMap<(Primitive, &str), Vec<u32>> = HashMap::new();
    for (index, member) in members.iter().enumerate() {
        for (primitive, value) in &member.primitives {
            let group = groups.entry((*primitive, value.as_str())).or_default();
            if group.last() != Some(&(index as u32)) {
                group.push(index as u32);
            }
        }
    }
    groups.retain(|_, group| (2..=COMMON).contains(&group.len()));
    // The kinds each pair shares.
    let mut pairs: HashMap<(u32, u32), u32> = HashMap::new();
    for ((primitive, _), group) in &groups {
        for (i, &a) in group.iter().enumerate() {
            for &b in &group[i + 1..] {
                *pairs.entry((a, b)).or_default() |= primitive.bit();
            }
        }
    }
    let mut edges: Vec<(u32, (u32, u32))> = pairs
        .into_iter()
        .filter(|(_, kinds)| kinds.count_ones() >= MIN_SHARED_KINDS)
        .map(|(pair, kinds)| (kinds, pair))
        .collect();
    // Most kinds first, then by the pair: a deterministic maximum spanning forest.
    edges.sort_by(|a, b| b.0.count_ones().cmp(&a.0.count_ones()).then(a.1.cmp(&b.1)));
    let mut forest = UnionFind::new(members.len());
    let mut kept: Vec<Edge> = Vec::new();
    for (kinds, (a, b)) in edges {
        if forest.union(a, b) {
            kept.push((a, b, kinds));
        }
    }

    let mut components: BTreeMap<u32, (Vec<u32>, Vec<Edge>)> = BTreeMap::new();
    for index in 0..members.len() as u32 {
        let root = forest.find(index);
        components.entry(root).or_default().0.push(index);
    }
    for (a, b, kinds) in kept {
        let root = forest.find(a);
        components.get_mut(&root).expect("a component per root").1.push((a, b, kinds));
    }
    let mut identities: Vec<Identity> = components
        .into_values()
        .filter(|(indices, _)| indices.len() > 1)
        .map(|(indices, joined)| {
            let links: Vec<Link> = joined
                .iter()
                .map(|&(a, b, kinds)| link_of(&members[a as usize], &members[b as usize], kinds))
                .collect();
            let confidence = links.iter().map(|l| l.confidence).fold(1.0, f64::min);
            let members: Vec<Member> = indices.iter().map(|&i| members[i as usize].clone()).collect();
            Identity { uuid: identity_uuid(members[0].uuid), members, links, confidence }
        })
        .collect();
    identities.sort_by(|a, b| {
        (a.members[0].first_seen, a.members[0].uuid).cmp(&(b.members[0].first_seen, b.members[0].uuid))
    });
    identities
}

/// An identity's uuid, named by its oldest attacker's: the first 16 bytes of a SHA-256 of it, as
/// a version 8 (custom) uuid, so it stays as long as that attacker is its oldest.
pub fn identity_uuid(oldest: Uuid) -> Uuid {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest([b"svc identity ".as_slice(), oldest.as_bytes()].concat());
    let bytes: [u8; 16] = digest[..16].try_into().expect("16 bytes");
    uuid::Builder::from_custom_bytes(bytes).into_uuid()
}

/// The link between `a` and `b`: the values of `kinds` they share.
fn link_of(a: &Member, b: &Member, kinds: u32) -> Link {
    let mut shared: Vec<Shared> = a
        .primitives
        .iter()
        .filter(|(primitive, value)| {
            kinds & primitive.bit() != 0 && b.primitives.iter().any(|(p, v)| p == primitive && v == value)
        })
        .map(|(primitive, value)| Shared { primitive: *primitive, value: value.clone() })
        .collect();
    shared.sort_by(|x, y| (x.primitive, &x.value).cmp(&(y.primitive, &y.value)));
    Link { attackers: [a.uuid, b.uuid], shared, confidence: confidence(kinds.count_ones()) }
}

/// A link kept: the two attackers' indices and the kinds they share (a bit each).
type Edge = (u32, u32, u32);

struct UnionFind(Vec<u32>);

impl UnionFind {
    fn new(n: usize) -> UnionFind {
        UnionFind((0..n as u32).collect())
    }

    fn find(&mut self, mut x: u32) -> u32 {
        while self.0[x as usize] != x {
            let parent = self.0[x as usize];
            self.0[x as usize] = self.0[parent as usize];
            x = parent;
        }
        x
    }

    /// Joins the sets of `a` and `b`; false when they were one already. The smaller index is the
    /// root, so roots do not depend on the order of unions.
    fn union(&mut self, a: u32, b: u32) -> bool {
        let (ra, rb) = (self.find(a), self.find(b));
        if ra == rb {
            return false;
        }
        let (low, high) = if ra < rb { (ra, rb) } else { (rb, ra) };
        self.0[high as usize] = low;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(n: u128, primitives: &[(Primitive, &str)]) -> Member {
        let at = DateTime::from_timestamp(1_800_000_000 + n as i64, 0).unwrap();
        Member {
            uuid: Uuid::from_u128(n),
            ip: format!("198.51.100.{n}"),
            first_seen: at,
            last_seen: at,
            updated_at: at,
            primitives: primitives.iter().map(|(p, v)| (*p, v.to_string())).collect(),
        }
    }

    #[test]
    fn two_shared_kinds_link_one_does_not_and_the_result_ignores_order() {
        use Primitive::*;
        let members = vec![
            member(1, &[(Ja3, "j1"), (SshClient, "SSH-2.0-Go kex1")]),
            member(2, &[(Ja3, "j1"), (SshClient, "SSH-2.0-Go kex1"), (Jarm, "c2")]),
            // Same JA3 only: a common client, not the same person.
            member(3, &[(Ja3, "j1"), (SshClient, "SSH-2.0-libssh kex2")]),
            // Joins through the second: JARM and certificate of the same C2.
            member(4, &[(Jarm, "c2"), (Certificate, "cert"), (SshClient, "SSH-2.0-Go kex1")]),
            member(5, &[]),
        ];
        let identities = link(members.clone());
        assert_eq!(identities.len(), 1);
        let one = &identities[0];
        let uuids: Vec<u128> = one.members.iter().map(|m| m.uuid.as_u128()).collect();
        assert_eq!(uuids, [1, 2, 4]);
        assert_eq!(one.uuid, identity_uuid(Uuid::from_u128(1)), "named by the oldest");
        assert_eq!(one.uuid.get_version_num(), 8);
        // 2–4 share SSH client and JARM (2 kinds), 1–2 and 1–4 JA3/SSH and SSH only: the forest
        // keeps two links of two kinds.
        assert_eq!(one.links.len(), 2);
        assert_eq!(one.confidence, 0.75);
        assert_eq!(
            one.links[0].shared,
            [
                Shared { primitive: Ja3, value: "j1".into() },
                Shared { primitive: SshClient, value: "SSH-2.0-Go kex1".into() }
            ]
        );

        let mut reversed = members;
        reversed.reverse();
        assert_eq!(link(reversed), identities, "deterministic");
    }

    #[test]
    fn a_value_too_many_share_links_nobody() {
        let members: Vec<Member> = (1..=COMMON as u128 + 1)
            .map(|n| member(n, &[(Primitive::Ja3, "curl"), (Primitive::SshClient, "SSH-2.0-libssh")]))
            .collect();
        assert!(link(members).is_empty());
    }
}
