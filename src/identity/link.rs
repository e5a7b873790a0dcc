//! The linking itself, on plain data: attackers with their primitives in, identities out. Two
//! attackers are linked when they share values of at least [`MIN_SHARED_KINDS`] kinds of
//! primitive; a value more than [`COMMON`] attackers share is a tool's, not a person's, and links
//! nothing. Identities are the connected components of the links (two or more attackers), found
//! with a union-find over the links strongest first, so each identity is explained by a maximum
//! spanning forest of its links and its confidence is that forest's weakest link. Deterministic:
//! the same attackers give the same identities, whatever order they come in. Campaigns are formed
//! the same way one level up: identities whose attackers share a value of any one kind. The work is
//! bounded by the attackers times [`COMMON`] (each value's group is capped), never attackers squared.

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
    pub campaign: Option<Uuid>,
}

/// Identities whose attackers share a value of any one kind: an operation run by several.
#[derive(Clone, Debug, PartialEq)]
pub struct Campaign {
    pub uuid: Uuid,
    /// In the order of their oldest attacker.
    pub identities: Vec<Uuid>,
    /// The links between identities that joined them: a spanning set, strongest first.
    pub links: Vec<Link>,
    /// The weakest of `links`.
    pub confidence: f64,
}

/// What linking finds.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Linked {
    /// In the order of their oldest attacker.
    pub identities: Vec<Identity>,
    /// In the order of their oldest identity.
    pub campaigns: Vec<Campaign>,
}

/// How sure `kinds` shared kinds make a link: each halves the doubt (2 → 0.75, 3 → 0.875…).
pub fn confidence(kinds: u32) -> f64 {
    1.0 - 0.5f64.powi(kinds as i32)
}

/// The identities and campaigns of `members`.
pub fn link(mut members: Vec<Member>) -> Linked {
    members.sort_by_key(|m| (m.first_seen, m.uuid));
    let pairs = shared_kinds(&members);
    let identities = identities_of(&members, &pairs);
    campaigns_of(&members, &pairs, identities)
}

/// Each pair of attackers (indices into `members`) that shares a value, with the kinds it shares
/// (a bit each). A value more than [`COMMON`] attackers share counts for no pair.
fn shared_kinds(members: &[Member]) -> Vec<((u32, u32), u32)> {
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
    pairs.into_iter().collect()
}

/// The identities: attackers joined by pairs sharing [`MIN_SHARED_KINDS`] kinds, strongest pairs
/// first, oldest first; each with its attackers' indices.
fn identities_of(members: &[Member], pairs: &[((u32, u32), u32)]) -> Vec<(Identity, Vec<u32>)> {
    let mut forest = UnionFind::new(members.len());
    let mut kept: Vec<Edge> = Vec::new();
    for ((a, b), kinds) in strongest_first(pairs.iter().filter(|(_, kinds)| kinds.count_ones() >= MIN_SHARED_KINDS)) {
        if forest.union(a, b) {
            kept.push((a, b, kinds));
        }
    }
    let mut identities: Vec<(Identity, Vec<u32>)> = components(&mut forest, members.len(), kept)
        .into_iter()
        .map(|(indices, joined)| {
            let links: Vec<Link> = joined
                .iter()
                .map(|&(a, b, kinds)| link_of(&members[a as usize], &members[b as usize], kinds))
                .collect();
            let confidence = links.iter().map(|l| l.confidence).fold(1.0, f64::min);
            let of: Vec<Member> = indices.iter().map(|&i| members[i as usize].clone()).collect();
            let identity =
                Identity { uuid: named_uuid("identity", of[0].uuid), members: of, links, confidence, campaign: None };
            (identity, indices)
        })
        .collect();
    identities.sort_by_key(|(identity, _)| (identity.members[0].first_seen, identity.members[0].uuid));
    identities
}

/// The campaigns: identities whose attackers share any value (one kind is enough here), each
/// identity marked with its campaign.
fn campaigns_of(members: &[Member], pairs: &[((u32, u32), u32)], identities: Vec<(Identity, Vec<u32>)>) -> Linked {
    let mut identity_of: Vec<Option<u32>> = vec![None; members.len()];
    for (i, (_, indices)) in identities.iter().enumerate() {
        for &attacker in indices {
            identity_of[attacker as usize] = Some(i as u32);
        }
    }
    let mut identities: Vec<Identity> = identities.into_iter().map(|(identity, _)| identity).collect();
    let between = pairs.iter().filter(
        |((a, b), _)| matches!((identity_of[*a as usize], identity_of[*b as usize]), (Some(x), Some(y)) if x != y),
    );
    let mut groups = UnionFind::new(identities.len());
    let mut joined: Vec<(u32, u32, Edge)> = Vec::new();
    for ((a, b), kinds) in strongest_first(between) {
        let (x, y) = (identity_of[a as usize].expect("in one"), identity_of[b as usize].expect("in one"));
        if groups.union(x, y) {
            joined.push((x, y, (a, b, kinds)));
        }
    }
    // Edges between identities, each naming its attackers' edge in `joined` by index.
    let campaign_links: Vec<Edge> = joined.iter().enumerate().map(|(k, &(x, y, _))| (x, y, k as u32)).collect();
    let campaigns: Vec<Campaign> = components(&mut groups, identities.len(), campaign_links)
        .into_iter()
        .map(|(indices, edges)| {
            let links: Vec<Link> = edges
                .iter()
                .map(|&(_, _, k)| {
                    let (_, _, (a, b, kinds)) = joined[k as usize];
                    link_of(&members[a as usize], &members[b as usize], kinds)
                })
                .collect();
            let confidence = links.iter().map(|l| l.confidence).fold(1.0, f64::min);
            let uuid = named_uuid("campaign", identities[indices[0] as usize].members[0].uuid);
            for &i in &indices {
                identities[i as usize].campaign = Some(uuid);
            }
            Campaign {
                uuid,
                identities: indices.iter().map(|&i| identities[i as usize].uuid).collect(),
                links,
                confidence,
            }
        })
        .collect();
    Linked { identities, campaigns }
}

/// `pairs` with the most kinds first, then by the pair: the order a deterministic maximum spanning
/// forest takes them in.
fn strongest_first<'a>(pairs: impl Iterator<Item = &'a ((u32, u32), u32)>) -> Vec<((u32, u32), u32)> {
    let mut pairs: Vec<((u32, u32), u32)> = pairs.copied().collect();
    pairs.sort_by(|a, b| b.1.count_ones().cmp(&a.1.count_ones()).then(a.0.cmp(&b.0)));
    pairs
}

/// The groups of two or more of `forest`'s `n` elements, each with the kept edges inside it, in the
/// order of their smallest element.
fn components(forest: &mut UnionFind, n: usize, kept: Vec<Edge>) -> Vec<(Vec<u32>, Vec<Edge>)> {
    let mut groups: BTreeMap<u32, (Vec<u32>, Vec<Edge>)> = BTreeMap::new();
    for index in 0..n as u32 {
        groups.entry(forest.find(index)).or_default().0.push(index);
    }
    for edge in kept {
        groups.get_mut(&forest.find(edge.0)).expect("a group per root").1.push(edge);
    }
    groups.into_values().filter(|(indices, _)| indices.len() > 1).collect()
}

/// An identity's or a campaign's uuid (`what`), named by its oldest attacker's: the first 16 bytes
/// of a SHA-256 of both, as a version 8 (custom) uuid, so it stays as long as that attacker is its
/// oldest.
pub fn named_uuid(what: &str, oldest: Uuid) -> Uuid {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest([b"svc ", what.as_bytes(), b" ", oldest.as_bytes()].concat());
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
        let linked = link(members.clone());
        let identities = &linked.identities;
        assert_eq!(identities.len(), 1);
        let one = &identities[0];
        let uuids: Vec<u128> = one.members.iter().map(|m| m.uuid.as_u128()).collect();
        assert_eq!(uuids, [1, 2, 4]);
        assert_eq!(one.uuid, named_uuid("identity", Uuid::from_u128(1)), "named by the oldest");
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
        assert_eq!(link(reversed), linked, "deterministic");
    }

    #[test]
    fn identities_sharing_one_value_are_a_campaign() {
        use Primitive::*;
        let members = vec![
            // Two identities with tools of their own, calling back to the same C2 (JARM).
            member(1, &[(Ja3, "a"), (SshClient, "A"), (Jarm, "c2")]),
            member(2, &[(Ja3, "a"), (SshClient, "A")]),
            member(3, &[(Ja3, "b"), (SshClient, "B"), (Jarm, "c2")]),
            member(4, &[(Ja3, "b"), (SshClient, "B")]),
            // An identity of its own: shares nothing with them.
            member(5, &[(Ja3, "c"), (SshClient, "C")]),
            member(6, &[(Ja3, "c"), (SshClient, "C")]),
            // Shares the JARM, but is no identity: campaigns group identities.
            member(7, &[(Jarm, "c2")]),
        ];
        let linked = link(members);
        assert_eq!(linked.identities.len(), 3);
        assert_eq!(linked.campaigns.len(), 1);
        let campaign = &linked.campaigns[0];
        assert_eq!(campaign.identities, [linked.identities[0].uuid, linked.identities[1].uuid]);
        assert_eq!((campaign.confidence, campaign.links.len()), (0.5, 1));
        assert_eq!(campaign.links[0].shared, [Shared { primitive: Jarm, value: "c2".into() }]);
        assert_eq!(campaign.uuid, named_uuid("campaign", Uuid::from_u128(1)));
        let assigned: Vec<Option<Uuid>> = linked.identities.iter().map(|i| i.campaign).collect();
        assert_eq!(assigned, [Some(campaign.uuid), Some(campaign.uuid), None]);
    }

    #[test]
    fn a_value_too_many_share_links_nobody() {
        let members: Vec<Member> = (1..=COMMON as u128 + 1)
            .map(|n| member(n, &[(Primitive::Ja3, "curl"), (Primitive::SshClient, "SSH-2.0-libssh")]))
            .collect();
        assert_eq!(link(members), Linked::default());
    }
}
