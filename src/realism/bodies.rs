//! What a synthetic file is called and what it holds, per content class, from templates and the
//! persona who wrote it; no LLM. The shapes follow DECNET's realism (`decnet/realism/naming.py`,
//! `bodies.py`): user files under the persona's home with names people give them (`notes.txt`,
//! `TODO.md`, `deploy.sh`), system files where logrotate and cron put them (`/var/log/cron.log.1`,
//! no epoch suffix), scratch files shaped like `mkstemp`'s. The texts are this project's own.

use chrono::{DateTime, Duration, Utc};

use super::draw::Draw;
use super::weights::ContentClass;

/// Who wrote a file, where, and when it last changed: what a body may mention.
#[derive(Debug, Clone)]
pub struct Author<'a> {
    pub persona: &'a str,
    pub role: &'a str,
    pub signature: Option<&'a str>,
    pub hostname: &'a str,
    pub last_modified: DateTime<Utc>,
}

/// The login a persona's display name gives (`Ana Ruiz` → `anaruiz`), `user` when that would
/// not be a plausible POSIX login: DECNET's rule, so paths never leak an odd display name.
pub fn login_for(persona: &str) -> String {
    let login: String = persona.to_lowercase().chars().filter(|c| *c != ' ').collect();
    if !login.is_empty() && login.chars().all(|c| c.is_ascii_alphanumeric()) { login } else { "user".into() }
}

const NOTE_NAMES: [&str; 8] = [
    "notes.txt",
    "scratch.md",
    "ideas.txt",
    "Untitled-2.txt",
    "meeting-notes.md",
    "keys.txt",
    "passwords.txt",
    "misc.txt",
];
const TODO_NAMES: [&str; 5] = ["TODO.md", "todo.txt", "tasks.md", "this-week.txt", "backlog.md"];
const DRAFT_NAMES: [&str; 6] =
    ["budget-DRAFT.md", "proposal.md", "reply-to-audit.txt", "postmortem-draft.md", "memo.txt", "1on1-notes.md"];
const SCRIPT_NAMES: [&str; 7] =
    ["backup.sh", "deploy.sh", "cleanup.sh", "rotate-logs.sh", "sync.py", "check_disk.py", "tmp.sh"];
const CRON_LOGS: [&str; 3] = ["/var/log/cron.log", "/var/log/cron.log.1", "/var/log/cron.log.2.gz"];
const DAEMON_LOGS: [&str; 5] =
    ["/var/log/daemon.log", "/var/log/syslog", "/var/log/messages", "/var/log/auth.log", "/var/log/auth.log.1"];

/// The absolute path a file of `class` by `persona` gets; `None` for the classes other writers
/// own (mail, canaries).
pub fn path(class: ContentClass, persona: &str, draw: &mut Draw) -> Option<String> {
    let home = |names: &[&str], draw: &mut Draw| format!("/home/{}/{}", login_for(persona), draw.pick(names));
    Some(match class {
        ContentClass::Note => home(&NOTE_NAMES, draw),
        ContentClass::Todo => home(&TODO_NAMES, draw),
        ContentClass::Draft => home(&DRAFT_NAMES, draw),
        ContentClass::Script => home(&SCRIPT_NAMES, draw),
        ContentClass::LogCron => draw.pick(&CRON_LOGS).to_string(),
        ContentClass::LogDaemon => draw.pick(&DAEMON_LOGS).to_string(),
        ContentClass::CacheTmp => {
            const CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
            let token: String = (0..6).map(|_| *draw.pick(CHARS) as char).collect();
            format!("/tmp/.cache-{token}")
        }
        _ => return None,
    })
}

const NOTE_LINES: [&str; 10] = [
    "chase facilities about the badge reader on 3",
    "ping on-call before touching the replica",
    "staging migration: ask for the new timeline",
    "runbook step 4 is wrong, fix after the shift",
    "vpn cert expires end of month, renew",
    "standup notes -> wiki when there's time",
    "prod disk alert again, talk to ops on monday",
    "auditor wants the access review by friday",
    "printer on 2 still jams, ticket open",
    "new laptop for the intern, order through IT",
];

const TODO_ITEMS: [&str; 10] = [
    "rotate the service account keys",
    "review the open PRs",
    "clean up old logs on the build box",
    "update the onboarding doc",
    "answer the ticket about the shared drive",
    "test a backup restore",
    "push the fix to staging",
    "reply to the auditor",
    "patch the CVE backlog",
    "renew the wildcard certificate",
];

const DRAFT_TOPICS: [(&str, &str); 3] = [
    (
        "Quick status on the migration",
        "We are ahead of plan on the data move, but the staging soak showed a regression in the login \
         path. A fix should land before the end of the week; I will confirm once it is verified.",
    ),
    (
        "Follow-up from yesterday's meeting",
        "Action items as agreed:\n\n- engineering owns the rollout plan\n- operations updates the runbook\n\
         - we meet again on Friday to check progress",
    ),
    (
        "Proposal for the next release",
        "Three points for discussion:\n\n1. no data model changes this time\n2. the new endpoint ships \
         behind a feature flag\n3. rollback is a single configuration change",
    ),
];

const CRON_JOBS: [&str; 5] = [
    "(root) CMD (run-parts /etc/cron.hourly)",
    "(root) CMD (test -x /usr/sbin/anacron || run-parts --report /etc/cron.daily)",
    "(www-data) CMD (php /var/www/app/artisan schedule:run >> /dev/null 2>&1)",
    "(backup) CMD (/usr/local/bin/backup.sh)",
    "(root) CMD (/usr/lib/php/sessionclean)",
];

const DAEMON_LINES: [&str; 7] = [
    "systemd[1]: Starting Daily apt download activities...",
    "systemd[1]: apt-daily.service: Deactivated successfully.",
    "systemd[1]: Started Session 214 of User {login}.",
    "sshd[{pid}]: pam_unix(sshd:session): session opened for user {login}(uid=1000) by (uid=0)",
    "sshd[{pid}]: Received disconnect from 10.0.4.17 port 51022:11: disconnected by user",
    "CRON[{pid}]: pam_unix(cron:session): session closed for user root",
    "systemd-logind[612]: New session 214 of user {login}.",
];

/// What a file of `class` holds, from its seed.
pub fn body(class: ContentClass, author: &Author<'_>, seed: u64) -> String {
    let mut draw = Draw::seeded(seed);
    let login = login_for(author.persona);
    match class {
        ContentClass::Note => {
            let n = draw.within(2, 5) as usize;
            lines(draw.sample(&NOTE_LINES, n))
        }
        ContentClass::Todo => {
            let n = draw.within(3, 7) as usize;
            let items = draw.sample(&TODO_ITEMS, n);
            lines(items.into_iter().map(|item| format!("- [{}] {item}", if draw.chance(0.33) { "x" } else { " " })))
        }
        ContentClass::Draft => {
            let (subject, text) = draw.pick(&DRAFT_TOPICS);
            let signature =
                author.signature.map(str::to_string).unwrap_or_else(|| format!("{}\n{}", author.persona, author.role));
            format!("Subject: {subject}\n\nHi all,\n\n{text}\n\nThanks,\n{signature}\n")
        }
        ContentClass::Script => script(&mut draw, author),
        ContentClass::LogCron => log(&mut draw, author, 8, 24, |draw| {
            format!("CRON[{}]: {}", draw.within(1000, 99999), draw.pick(&CRON_JOBS))
        }),
        ContentClass::LogDaemon => log(&mut draw, author, 10, 30, |draw| {
            let pid = draw.within(1000, 99999).to_string();
            draw.pick(&DAEMON_LINES).replace("{login}", &login).replace("{pid}", &pid)
        }),
        ContentClass::CacheTmp => {
            const CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
            let n = draw.within(64, 256);
            format!("session={}\n", (0..n).map(|_| *draw.pick(CHARS) as char).collect::<String>())
        }
        _ => String::new(),
    }
}

fn lines<T: AsRef<str>>(lines: impl IntoIterator<Item = T>) -> String {
    lines.into_iter().map(|line| format!("{}\n", line.as_ref())).collect()
}

fn script(draw: &mut Draw, author: &Author<'_>) -> String {
    let login = login_for(author.persona);
    match draw.within(0, 2) {
        0 => format!(
            "#!/usr/bin/env bash\n# nightly dump, {login}\nset -euo pipefail\n\nDEST=/var/backups\nSTAMP=$(date +%Y%m%d-%H%M)\n\
             mysqldump --single-transaction app | gzip > \"$DEST/app-$STAMP.sql.gz\"\n\
             find \"$DEST\" -name 'app-*.sql.gz' -mtime +14 -delete\n"
        ),
        1 => format!(
            "#!/usr/bin/env bash\nset -e\n# ship the build to {host}\nrsync -az --delete ./dist/ deploy@{host}:/srv/app/\n\
             ssh deploy@{host} 'sudo systemctl restart app'\n",
            host = author.hostname
        ),
        _ => "#!/usr/bin/env python3\n\"\"\"Warn when a disk is nearly full.\"\"\"\nimport shutil\nimport sys\n\n\
              def main() -> int:\n    usage = shutil.disk_usage('/')\n    if usage.used / usage.total > 0.9:\n\
              \x20       print('disk over 90%', file=sys.stderr)\n        return 1\n    return 0\n\n\
              if __name__ == '__main__':\n    sys.exit(main())\n"
            .to_string(),
    }
}

/// Syslog lines up to the file's last change, oldest first.
fn log(
    draw: &mut Draw,
    author: &Author<'_>,
    least: u64,
    most: u64,
    mut line: impl FnMut(&mut Draw) -> String,
) -> String {
    let n = draw.within(least, most);
    let mut at = author.last_modified;
    let mut out = Vec::with_capacity(n as usize);
    for _ in 0..n {
        out.push(format!("{} {} {}", at.format("%b %e %H:%M:%S"), author.hostname, line(draw)));
        at -= Duration::seconds(draw.within(30, 3600) as i64);
    }
    out.reverse();
    lines(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logins_are_decnets() {
        assert_eq!(login_for("Ana Ruiz"), "anaruiz");
        assert_eq!(login_for("José"), "user");
        assert_eq!(login_for(""), "user");
    }
}
