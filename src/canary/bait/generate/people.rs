//! The made-up organisation a bait belongs to and the people in it: plain, ordinary names, so a file
//! reads as one of many an office leaves lying around.

use crate::canary::bait::draw::Draw;

const FIRST: &[&str] = &[
    "maria", "james", "priya", "daniel", "sofia", "kenji", "laura", "michael", "aisha", "thomas", "elena", "david",
    "wei", "hannah", "lucas", "fatima", "oliver", "ines", "marco", "sarah",
];

const LAST: &[&str] = &[
    "novak",
    "fischer",
    "okafor",
    "tanaka",
    "larsen",
    "moreau",
    "kowalski",
    "silva",
    "brennan",
    "haddad",
    "lindqvist",
    "patel",
    "ferreira",
    "weber",
    "kim",
    "costa",
    "murphy",
    "rossi",
    "schmidt",
    "andersen",
];

/// (name, domain, short name used in host and database names)
const ORGS: &[(&str, &str, &str)] = &[
    ("Halvorsen Freight", "halvorsenfreight.com", "hfr"),
    ("Brightline Analytics", "brightline-analytics.io", "bla"),
    ("Corvid Health Systems", "corvidhealth.net", "chs"),
    ("Meridian Retail Group", "meridianretail.co", "mrg"),
    ("Atlas Grid Energy", "atlasgrid.io", "age"),
    ("Kestrel Payments", "kestrelpay.com", "kpy"),
];

pub(super) struct Org {
    pub name: &'static str,
    pub domain: &'static str,
    pub short: &'static str,
}

/// The organisation, the same for every value of one bait.
pub(super) fn org(draw: &Draw<'_>) -> Org {
    let (name, domain, short) = draw.pick("org", ORGS);
    Org { name, domain, short }
}

pub(super) struct Person {
    pub first: &'static str,
    pub last: &'static str,
}

impl Person {
    /// "Maria Novak".
    pub fn full_name(&self) -> String {
        format!("{} {}", capitalised(self.first), capitalised(self.last))
    }

    /// "maria.novak@domain".
    pub fn email(&self, domain: &str) -> String {
        format!("{}.{}@{domain}", self.first, self.last)
    }

    /// "m.novak": how logins and commit names are often written.
    pub fn login(&self) -> String {
        format!("{}.{}", &self.first[..1], self.last)
    }
}

pub(super) fn person(draw: &Draw<'_>, label: &str) -> Person {
    Person { first: draw.pick(&format!("{label}/first"), FIRST), last: draw.pick(&format!("{label}/last"), LAST) }
}

fn capitalised(word: &str) -> String {
    let mut chars = word.chars();
    chars.next().map(|first| first.to_ascii_uppercase().to_string() + chars.as_str()).unwrap_or_default()
}
