//! Observations from the shell commands an attacker typed, as far as the command text and its
//! timestamps honestly support them. Keystroke timing, tab completion, typos and editing keys never
//! reach a command log, so the primitives built on them are not emitted here; what is left is what
//! the words of a command line show:
//!
//! - `motor.shell_mastery.pipe_chaining_depth`: the longest pipeline seen. A pipeline's stages are
//!   in the text itself, so a deep one is direct evidence; `shallow` claims the absence of longer
//!   ones and waits for [`MIN_FOR_ABSENCE_OF_PIPES`] commands.
//! - `cognitive.error_resilience.fallback_to_man`: `man`, `info`, `apropos`, `whatis`, `help` or a
//!   `--help` argument is the attacker reaching for documentation (`-h` is not: it is
//!   "human-readable" to `df`, `ls`, `du`). `absent` only after [`MIN_FOR_ABSENCE`] commands.
//! - `cognitive.tool_vocabulary`: distinct program names. The count only grows, so `moderate` and
//!   `broad` are lower bounds the commands prove; `narrow` waits for [`MIN_FOR_ABSENCE`] commands.
//! - `operational.cleanup_behavior`: distinct kinds of anti-forensics (history cleared, history
//!   disabled, a history file removed, logs removed, files shredded); one kind is `partial`, two or
//!   more `thorough`, `none` only after [`MIN_FOR_ABSENCE`] commands.
//! - `environmental.terminal_multiplexer`: `tmux` or `screen` run as a program. Not running one is
//!   not evidence of working without one (the log never sees the attacker's own terminal), so
//!   `none` is never emitted.
//!
//! Values are registry labels only: never command text, file names or credentials. Everything
//! these need lives in [`ShellTally`], kept in the profile's fold state, so emission after a
//! restart is what it would have been without one.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use svc::observation::{ENVELOPE_VERSION, Observation, Window};
use svc::text::prefix_bytes;
use uuid::Uuid;

/// This sensor's `source`; the intake skips records carrying it (they are stored already).
pub const SOURCE: &str = "workers/src/profiler/shell.rs";

/// Commands seen before a reading that claims something is absent (`none`, `narrow`, `absent`).
pub const MIN_FOR_ABSENCE: u64 = 10;
/// Commands seen before `shallow`: short pipelines are the norm, so fewer commands suffice.
pub const MIN_FOR_ABSENCE_OF_PIPES: u64 = 5;
/// Distinct programs kept; far above the `broad` threshold, so the cap never changes a reading.
const MAX_PROGRAMS: usize = 64;
/// Longer command text is read up to here: no shell reading needs more, and it bounds the work.
const MAX_COMMAND_BYTES: usize = 8 * 1024;
const MODERATE_VOCABULARY: usize = 5;
const BROAD_VOCABULARY: usize = 12;

/// What the commands of one attacker showed so far.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ShellTally {
    pub commands: u64,
    /// Epoch milliseconds of the earliest and latest command: the observations' window.
    pub first_ms: Option<i64>,
    pub last_ms: Option<i64>,
    pub max_pipe_stages: u32,
    pub help_seen: bool,
    /// Distinct program names (at most [`MAX_PROGRAMS`]).
    pub programs: BTreeSet<String>,
    /// Distinct [`Cleanup`] kinds, by label.
    pub cleanup: BTreeSet<String>,
    /// The multiplexer run last.
    pub multiplexer: Option<String>,
}

/// One primitive's reading: a registry label and the confidence in it.
#[derive(Clone, Debug, PartialEq)]
pub struct Reading {
    pub primitive: &'static str,
    pub value: &'static str,
    pub confidence: f64,
}

impl ShellTally {
    /// Folds in one command typed at `at_ms` (epoch milliseconds).
    pub fn add(&mut self, command: &str, at_ms: i64) {
        self.commands += 1;
        self.first_ms = Some(self.first_ms.map_or(at_ms, |t| t.min(at_ms)));
        self.last_ms = Some(self.last_ms.map_or(at_ms, |t| t.max(at_ms)));
        for pipeline in pipelines(prefix_bytes(command, MAX_COMMAND_BYTES)) {
            self.max_pipe_stages = self.max_pipe_stages.max(pipeline.len() as u32);
            for stage in &pipeline {
                self.add_stage(stage);
            }
        }
    }

    fn add_stage(&mut self, stage: &Stage) {
        let (assignments, program, args) = stage.split_program();
        for assignment in assignments {
            if disables_history(assignment) {
                self.cleanup.insert(Cleanup::HistoryDisabled.label().into());
            }
        }
        if stage.redirects.iter().any(|t| is_history_file(t)) {
            self.cleanup.insert(Cleanup::HistoryFileRemoved.label().into());
        }
        if stage.redirects.iter().any(|t| is_log_file(t)) {
            self.cleanup.insert(Cleanup::LogsRemoved.label().into());
        }
        let Some(program) = program else { return };
        if args.iter().any(|a| a == "--help") || matches!(program, "man" | "info" | "apropos" | "whatis" | "help") {
            self.help_seen = true;
        }
        if matches!(program, "tmux" | "screen") {
            self.multiplexer = Some(program.to_string());
        }
        for kind in cleanup_kinds(program, args) {
            self.cleanup.insert(kind.label().into());
        }
        if self.programs.len() < MAX_PROGRAMS {
            self.programs.insert(program.to_string());
        }
    }

    /// Every primitive the commands so far support, with its value.
    pub fn readings(&self) -> Vec<Reading> {
        let n = self.commands;
        if n == 0 {
            return Vec::new();
        }
        let confidence = confidence(n);
        let mut readings = Vec::new();
        let mut read = |primitive, value: Option<&'static str>| {
            if let Some(value) = value {
                readings.push(Reading { primitive, value, confidence });
            }
        };
        read(
            "motor.shell_mastery.pipe_chaining_depth",
            match self.max_pipe_stages {
                4.. => Some("deep"),
                3 => Some("moderate"),
                _ if n >= MIN_FOR_ABSENCE_OF_PIPES => Some("shallow"),
                _ => None,
            },
        );
        read(
            "cognitive.error_resilience.fallback_to_man",
            match self.help_seen {
                true => Some("present"),
                false if n >= MIN_FOR_ABSENCE => Some("absent"),
                false => None,
            },
        );
        read(
            "cognitive.tool_vocabulary",
            match self.programs.len() {
                BROAD_VOCABULARY.. => Some("broad"),
                MODERATE_VOCABULARY.. => Some("moderate"),
                _ if n >= MIN_FOR_ABSENCE => Some("narrow"),
                _ => None,
            },
        );
        read(
            "operational.cleanup_behavior",
            match self.cleanup.len() {
                2.. => Some("thorough"),
                1 => Some("partial"),
                _ if n >= MIN_FOR_ABSENCE => Some("none"),
                _ => None,
            },
        );
        read(
            "environmental.terminal_multiplexer",
            match self.multiplexer.as_deref() {
                Some("tmux") => Some("tmux"),
                Some("screen") => Some("screen"),
                _ => None,
            },
        );
        readings
    }

    /// The commands' time span, epoch seconds.
    fn window(&self) -> Option<Window> {
        Some(Window { start_ts: self.first_ms? as f64 / 1000.0, end_ts: self.last_ms? as f64 / 1000.0 })
    }
}

/// Confidence in a reading from `n` commands: `n / (n + 5)`, at most 0.95. One command is thin
/// evidence (0.17), twenty are fair (0.8); never certain, because a command log misses what runs
/// without a prompt (scripts, `ssh host cmd`). Rounded to three places so the stored value is the
/// same whatever the batch boundaries were.
pub fn confidence(n: u64) -> f64 {
    let c = n as f64 / (n as f64 + 5.0);
    (c.min(0.95) * 1000.0).round() / 1000.0
}

/// The observations to store for an attacker whose tally went from `before` to `after`: those
/// whose value, confidence or window changed. Each replaces the previous one of its primitive
/// (same `evidence_ref`), so what is stored is always the reading of the whole tally.
pub fn observations(before: &ShellTally, after: &ShellTally, attacker: Uuid, now_s: f64) -> Vec<Observation> {
    let Some(window) = after.window() else { return Vec::new() };
    let old = before.readings();
    let window_moved = before.window() != Some(window);
    after
        .readings()
        .into_iter()
        .filter(|reading| window_moved || !old.contains(reading))
        .map(|reading| Observation {
            primitive: reading.primitive.to_string(),
            value: serde_json::Value::String(reading.value.to_string()),
            confidence: reading.confidence,
            window,
            source: SOURCE.to_string(),
            id: Some(Uuid::new_v4().to_string()),
            identity_ref: Some(attacker.to_string()),
            evidence_ref: Some(evidence_ref(attacker)),
            ts: Some(now_s),
            v: ENVELOPE_VERSION,
        })
        .collect()
}

/// Where the evidence is: the attacker's command list.
pub fn evidence_ref(attacker: Uuid) -> String {
    format!("svc:attackers/{attacker}/commands")
}

/// Kinds of anti-forensics a command line can show.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cleanup {
    /// `history -c`.
    HistoryCleared,
    /// `unset HISTFILE`, `export HISTSIZE=0`, `set +o history`.
    HistoryDisabled,
    /// A `*_history` file deleted, truncated or linked to /dev/null.
    HistoryFileRemoved,
    /// Files under /var/log deleted or truncated, or the journal vacuumed.
    LogsRemoved,
    /// `shred`, `wipe`, `srm`.
    Shredded,
}

impl Cleanup {
    fn label(self) -> &'static str {
        match self {
            Cleanup::HistoryCleared => "history_cleared",
            Cleanup::HistoryDisabled => "history_disabled",
            Cleanup::HistoryFileRemoved => "history_file_removed",
            Cleanup::LogsRemoved => "logs_removed",
            Cleanup::Shredded => "shredded",
        }
    }
}

fn cleanup_kinds(program: &str, args: &[String]) -> Vec<Cleanup> {
    let mut kinds = Vec::new();
    let operands = || args.iter().filter(|a| !a.starts_with('-'));
    match program {
        "history" if args.iter().any(|a| a.starts_with('-') && !a.starts_with("--") && a.contains('c')) => {
            kinds.push(Cleanup::HistoryCleared)
        }
        "unset" if operands().any(|a| is_history_variable(a)) => kinds.push(Cleanup::HistoryDisabled),
        "export" | "declare" | "typeset" if operands().any(|a| disables_history(a)) => {
            kinds.push(Cleanup::HistoryDisabled)
        }
        "set" if args.windows(2).any(|w| w[0] == "+o" && w[1] == "history") => kinds.push(Cleanup::HistoryDisabled),
        "journalctl" if args.iter().any(|a| a.starts_with("--vacuum") || a == "--rotate") => {
            kinds.push(Cleanup::LogsRemoved)
        }
        "rm" | "unlink" | "truncate" | "shred" | "wipe" | "srm" | "ln" | "cp" | "mv" => {
            // `ln -sf /dev/null ~/.bash_history`, `cp /dev/null /var/log/wtmp`: the target is
            // what goes; `mv x /var/log/y` only counts when it overwrites a log with something.
            if operands().any(|a| is_history_file(a)) {
                kinds.push(Cleanup::HistoryFileRemoved);
            }
            let writes_logs = match program {
                "mv" | "cp" | "ln" => operands().next_back().is_some_and(|a| is_log_file(a)),
                _ => operands().any(|a| is_log_file(a)),
            };
            if writes_logs {
                kinds.push(Cleanup::LogsRemoved);
            }
        }
        _ => {}
    }
    if matches!(program, "shred" | "wipe" | "srm") {
        kinds.push(Cleanup::Shredded);
    }
    kinds
}

fn is_history_variable(name: &str) -> bool {
    matches!(name, "HISTFILE" | "HISTSIZE" | "HISTFILESIZE" | "HISTSAVE")
}

/// `HISTFILE=/dev/null`, `HISTSIZE=0`, `HISTFILE=` and the like.
fn disables_history(assignment: &str) -> bool {
    let Some((name, value)) = assignment.split_once('=') else { return false };
    match name {
        "HISTFILE" => value.is_empty() || value == "/dev/null",
        "HISTSIZE" | "HISTFILESIZE" => value == "0",
        _ => false,
    }
}

fn is_history_file(path: &str) -> bool {
    path.rsplit('/').next().is_some_and(|name| name.ends_with("_history") || name == ".history")
}

fn is_log_file(path: &str) -> bool {
    path.starts_with("/var/log/") || path == "/var/log" || path.contains("/var/log/")
}

/// One command of a pipeline: its words, and the targets of its redirections.
#[derive(Debug, Default, PartialEq)]
struct Stage {
    words: Vec<String>,
    redirects: Vec<String>,
}

impl Stage {
    /// Leading `NAME=value` assignments, the program (wrappers such as `sudo` and `env` looked
    /// through, path stripped) and its arguments.
    fn split_program(&self) -> (&[String], Option<&str>, &[String]) {
        let words = &self.words;
        let assigned = words.iter().take_while(|w| is_assignment(w)).count();
        let mut at = assigned;
        while let Some(word) = words.get(at) {
            let name = basename(word);
            let skip_args: &[&str] = match name {
                "sudo" | "doas" => &["-u", "-g", "-p", "-C", "-U", "-r", "-t", "-D", "-h"],
                "env" => &["-u", "-C", "-S"],
                "nice" => &["-n"],
                "nohup" | "time" | "exec" | "command" | "builtin" | "busybox" | "timeout" | "stdbuf" => &[],
                _ => break,
            };
            at += 1;
            while let Some(word) = words.get(at) {
                if skip_args.contains(&word.as_str()) {
                    at += 2;
                } else if word.starts_with('-')
                    || (name == "env" && is_assignment(word))
                    || (name == "timeout" && word.starts_with(|c: char| c.is_ascii_digit()))
                {
                    at += 1;
                } else {
                    break;
                }
            }
        }
        let program = words.get(at).map(|w| basename(w)).filter(|name| is_program_name(name));
        let args = words.get(at + 1..).unwrap_or(&[]);
        (&words[..assigned], program, args)
    }
}

fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

fn basename(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

/// What a program name can look like; anything else (an expansion, a quoted sentence) is not
/// counted, so the tally never keeps arbitrary text.
fn is_program_name(name: &str) -> bool {
    (1..=32).contains(&name.len())
        && !name.starts_with('-')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'+' | b'-'))
}

/// Splits a command line into pipelines (separated by `;`, `&&`, `||`, `&`, newlines and
/// parentheses or backquotes, so `$(id)` and `(cd x; ls)` count their inner commands) of stages
/// (separated by `|`). Quotes group words and hide operators; an unclosed quote runs to the end.
/// Tolerant by design: any text gives some answer.
fn pipelines(command: &str) -> Vec<Vec<Stage>> {
    let mut lexer = Lexer::default();
    let mut chars = command.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(next) = chars.next() {
                    lexer.push(next);
                }
            }
            '\'' => {
                lexer.quoted = true;
                for c in chars.by_ref() {
                    if c == '\'' {
                        break;
                    }
                    lexer.push(c);
                }
            }
            '"' => {
                lexer.quoted = true;
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' => {
                            if let Some(next) = chars.next() {
                                lexer.push(next);
                            }
                        }
                        c => lexer.push(c),
                    }
                }
            }
            ' ' | '\t' | '\r' => lexer.end_word(),
            '|' if chars.peek() == Some(&'|') => {
                chars.next();
                lexer.end_pipeline();
            }
            '|' => {
                if chars.peek() == Some(&'&') {
                    chars.next();
                }
                lexer.end_stage();
            }
            '&' if chars.peek() == Some(&'>') => {
                chars.next();
                let appends = chars.next_if_eq(&'>').is_some();
                lexer.redirect(!appends);
            }
            ';' | '&' | '\n' | '(' | ')' | '`' | '{' | '}' => lexer.end_pipeline(),
            '$' if chars.peek() == Some(&'{') => {
                // `${VAR}` is one expansion, not a block.
                lexer.push('$');
                for c in chars.by_ref() {
                    lexer.push(c);
                    if c == '}' {
                        break;
                    }
                }
            }
            '>' | '<' => {
                // `2>` is a descriptor, not a word; `>&2` duplicates one and names no file. Only
                // `>` empties its target: `>>` appends and `<`, `<<` read.
                if !lexer.quoted && lexer.word.bytes().all(|b| b.is_ascii_digit()) {
                    lexer.word.clear();
                }
                lexer.end_word();
                let mut truncates = c == '>';
                while chars.peek().is_some_and(|&c| c == '>' || c == '<') {
                    chars.next();
                    truncates = false;
                }
                if chars.peek() == Some(&'&') {
                    chars.next();
                    while chars.peek().is_some_and(|c| c.is_ascii_digit() || *c == '-') {
                        chars.next();
                    }
                } else {
                    lexer.redirect(truncates);
                }
            }
            c => lexer.push(c),
        }
    }
    lexer.end_pipeline();
    lexer.pipelines
}

#[derive(Default)]
struct Lexer {
    pipelines: Vec<Vec<Stage>>,
    stages: Vec<Stage>,
    stage: Stage,
    word: String,
    /// The word has a quoted part, so it exists even when empty (`''`).
    quoted: bool,
    /// The next word is a redirection target: `Some(true)` for one the redirection empties (kept,
    /// for the cleanup kinds), `Some(false)` for one it only reads or appends to (dropped).
    redirecting: Option<bool>,
}

impl Lexer {
    fn push(&mut self, c: char) {
        self.word.push(c);
    }

    fn redirect(&mut self, truncates: bool) {
        self.end_word();
        self.redirecting = Some(truncates);
    }

    fn end_word(&mut self) {
        if self.word.is_empty() && !self.quoted {
            return;
        }
        let word = std::mem::take(&mut self.word);
        self.quoted = false;
        match self.redirecting.take() {
            Some(true) => self.stage.redirects.push(word),
            Some(false) => {}
            None => self.stage.words.push(word),
        }
    }

    fn end_stage(&mut self) {
        self.end_word();
        self.redirecting = None;
        let stage = std::mem::take(&mut self.stage);
        if !stage.words.is_empty() || !stage.redirects.is_empty() {
            self.stages.push(stage);
        }
    }

    fn end_pipeline(&mut self) {
        self.end_stage();
        if !self.stages.is_empty() {
            self.pipelines.push(std::mem::take(&mut self.stages));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(command: &str) -> Vec<Vec<Vec<String>>> {
        pipelines(command).into_iter().map(|p| p.into_iter().map(|s| s.words).collect()).collect()
    }

    fn programs(command: &str) -> Vec<String> {
        let mut tally = ShellTally::default();
        tally.add(command, 0);
        tally.programs.into_iter().collect()
    }

    fn tally(commands: &[&str]) -> ShellTally {
        let mut tally = ShellTally::default();
        for (i, command) in commands.iter().enumerate() {
            tally.add(command, 1_000 * i as i64);
        }
        tally
    }

    fn value(tally: &ShellTally, primitive: &str) -> Option<&'static str> {
        tally.readings().into_iter().find(|r| r.primitive == primitive).map(|r| r.value)
    }

    #[test]
    fn splits_pipelines_stages_and_words() {
        assert_eq!(
            words("cat /etc/passwd | grep root|wc -l; id && uname -a || echo 'a | b; c'"),
            vec![
                vec![vec!["cat", "/etc/passwd"], vec!["grep", "root"], vec!["wc", "-l"]],
                vec![vec!["id"]],
                vec![vec!["uname", "-a"]],
                vec![vec!["echo", "a | b; c"]],
            ]
        );
        assert_eq!(words(r#"echo "x\"y" a\ b ''"#), vec![vec![vec!["echo", "x\"y", "a b", ""]]]);
        assert_eq!(words("echo $(id) `whoami`"), vec![vec![vec!["echo", "$"]], vec![vec!["id"]], vec![vec!["whoami"]]]);
        assert_eq!(words("echo 'unclosed | x"), vec![vec![vec!["echo", "unclosed | x"]]]);
        assert_eq!(words("  ;; | && "), Vec::<Vec<Vec<String>>>::new());
    }

    #[test]
    fn redirections_are_not_words() {
        let stages = pipelines("cat a 2>/dev/null >> /var/log/x 2>&1 >&2 &>o < in");
        assert_eq!(stages.len(), 1);
        assert_eq!(stages[0][0].words, ["cat", "a"]);
        assert_eq!(stages[0][0].redirects, ["/dev/null", "o"], "appended to or read: not emptied");
    }

    #[test]
    fn program_names_look_through_wrappers_and_paths() {
        assert_eq!(programs("/usr/bin/id"), ["id"]);
        assert_eq!(programs("sudo -u root -E /bin/bash -c x"), ["bash"]);
        assert_eq!(programs("env -i A=1 B=2 python3 x.py"), ["python3"]);
        assert_eq!(programs("X=1 Y=2 nohup nice -n 5 timeout 10 wget http://x"), ["wget"]);
        assert_eq!(programs("busybox wget x; sudo"), ["wget"]);
        assert_eq!(programs("'rm -rf /' \"$X\" ${Y}"), Vec::<String>::new());
        assert_eq!(programs("${SHELL} -c id"), Vec::<String>::new(), "an expansion is no name");
        assert_eq!(programs("ls | (cd /tmp && ./run.sh)"), ["cd", "ls", "run.sh"]);
    }

    #[test]
    fn pipe_depth_thresholds() {
        let pipe = "motor.shell_mastery.pipe_chaining_depth";
        assert_eq!(value(&tally(&["a | b"; 4]), pipe), None, "shallow needs 5 commands");
        assert_eq!(value(&tally(&["a | b"; 5]), pipe), Some("shallow"));
        assert_eq!(value(&tally(&["a | b | c"]), pipe), Some("moderate"));
        assert_eq!(value(&tally(&["a | b | c | d"]), pipe), Some("deep"));
        assert_eq!(value(&tally(&["a || b || c || d"; 5]), pipe), Some("shallow"), "|| is not a pipe");
        assert_eq!(value(&tally(&["ls", "a|b|c|d|e", "id"]), pipe), Some("deep"), "the longest counts");
    }

    #[test]
    fn fallback_to_man() {
        let man = "cognitive.error_resilience.fallback_to_man";
        assert_eq!(value(&tally(&["man tar"]), man), Some("present"));
        assert_eq!(value(&tally(&["/usr/bin/info ls"]), man), Some("present"));
        assert_eq!(value(&tally(&["tar --help | less"]), man), Some("present"));
        assert_eq!(value(&tally(&["df -h"; 9]), man), None, "absent needs 10 commands");
        assert_eq!(value(&tally(&["df -h"; 10]), man), Some("absent"), "-h is not help");
        assert_eq!(value(&tally(&["echo man"; 10]), man), Some("absent"), "an argument is not a program");
    }

    #[test]
    fn tool_vocabulary_thresholds() {
        let vocabulary = "cognitive.tool_vocabulary";
        assert_eq!(value(&tally(&["a", "b", "c", "d"]), vocabulary), None);
        assert_eq!(value(&tally(&["ls"; 10]), vocabulary), Some("narrow"));
        assert_eq!(value(&tally(&["a", "b", "c", "d", "e"]), vocabulary), Some("moderate"));
        let eleven = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k"];
        assert_eq!(value(&tally(&eleven), vocabulary), Some("moderate"));
        assert_eq!(value(&tally(&[&eleven[..], &["l"]].concat()), vocabulary), Some("broad"));
        let many: Vec<String> = (0..200).map(|i| format!("tool{i}")).collect();
        let many = tally(&many.iter().map(String::as_str).collect::<Vec<_>>());
        assert_eq!(many.programs.len(), MAX_PROGRAMS);
        assert_eq!(value(&many, vocabulary), Some("broad"));
    }

    #[test]
    fn cleanup_kinds_are_recognised() {
        let kinds = |command: &str| tally(&[command]).cleanup.into_iter().collect::<Vec<_>>();
        assert_eq!(kinds("history -c"), ["history_cleared"]);
        assert_eq!(kinds("history -cw"), ["history_cleared"]);
        assert_eq!(kinds("history | tail"), Vec::<String>::new());
        assert_eq!(kinds("unset HISTFILE"), ["history_disabled"]);
        assert_eq!(kinds("export HISTFILE=/dev/null"), ["history_disabled"]);
        assert_eq!(kinds("HISTSIZE=0"), ["history_disabled"]);
        assert_eq!(kinds("set +o history"), ["history_disabled"]);
        assert_eq!(kinds("rm -f ~/.bash_history"), ["history_file_removed"]);
        assert_eq!(kinds("cat /dev/null > /root/.bash_history"), ["history_file_removed"]);
        assert_eq!(kinds("ln -sf /dev/null .zsh_history"), ["history_file_removed"]);
        assert_eq!(kinds("rm -rf /var/log/auth.log"), ["logs_removed"]);
        assert_eq!(kinds("echo > /var/log/wtmp"), ["logs_removed"]);
        assert_eq!(kinds("journalctl --vacuum-time=1s"), ["logs_removed"]);
        assert_eq!(kinds("cp /var/log/syslog /tmp/x"), Vec::<String>::new(), "copying a log away removes nothing");
        assert_eq!(kinds("cat /var/log/syslog"), Vec::<String>::new());
        assert_eq!(kinds("shred -u notes.txt"), ["shredded"]);
        assert_eq!(kinds("sudo shred -zu ~/.bash_history"), ["history_file_removed", "shredded"]);
    }

    #[test]
    fn cleanup_thresholds() {
        let cleanup = "operational.cleanup_behavior";
        assert_eq!(value(&tally(&["ls"; 9]), cleanup), None, "none needs 10 commands");
        assert_eq!(value(&tally(&["ls"; 10]), cleanup), Some("none"));
        assert_eq!(value(&tally(&["history -c"]), cleanup), Some("partial"));
        assert_eq!(value(&tally(&["history -c", "history -c"]), cleanup), Some("partial"), "kinds, not commands");
        assert_eq!(value(&tally(&["history -c", "unset HISTFILE"]), cleanup), Some("thorough"));
    }

    #[test]
    fn multiplexer_only_when_run() {
        let mux = "environmental.terminal_multiplexer";
        assert_eq!(value(&tally(&["ls"; 50]), mux), None, "never none");
        assert_eq!(value(&tally(&["tmux new -s x"]), mux), Some("tmux"));
        assert_eq!(value(&tally(&["/usr/bin/screen -dmS a ./x"]), mux), Some("screen"));
        assert_eq!(value(&tally(&["screen -r", "tmux a"]), mux), Some("tmux"), "the latest");
        assert_eq!(value(&tally(&["apt install tmux"]), mux), None);
    }

    #[test]
    fn confidence_grows_with_commands() {
        assert_eq!(confidence(1), 0.167);
        assert_eq!(confidence(5), 0.5);
        assert_eq!(confidence(20), 0.8);
        assert_eq!(confidence(1_000_000), 0.95);
    }

    #[test]
    fn observations_carry_labels_and_the_window() {
        let attacker = Uuid::new_v4();
        let before = ShellTally::default();
        let mut after = ShellTally::default();
        after.add("cat /etc/shadow | grep root | cut -d: -f2 | cut -c1-8", 10_000);
        after.add("HISTFILE= tmux", 12_500);
        let obs = observations(&before, &after, attacker, 99.0);
        let got: Vec<(&str, &str)> = obs.iter().map(|o| (o.primitive.as_str(), o.value.as_str().unwrap())).collect();
        assert_eq!(
            got,
            [
                ("motor.shell_mastery.pipe_chaining_depth", "deep"),
                ("operational.cleanup_behavior", "partial"),
                ("environmental.terminal_multiplexer", "tmux"),
            ]
        );
        for o in &obs {
            assert_eq!(o.window, Window { start_ts: 10.0, end_ts: 12.5 });
            assert_eq!(o.source, SOURCE);
            assert_eq!(o.identity_ref.as_deref(), Some(attacker.to_string().as_str()));
            assert_eq!(o.evidence_ref.as_deref(), Some(format!("svc:attackers/{attacker}/commands").as_str()));
            assert_eq!((o.confidence, o.ts, o.v), (confidence(2), Some(99.0), 1));
            assert!(Uuid::parse_str(o.id.as_deref().unwrap()).is_ok());
        }
        // Nothing changed: nothing emitted. A later command moves the window: all again.
        assert!(observations(&after, &after, attacker, 99.0).is_empty());
        let mut later = after.clone();
        later.add("cat x", 20_000);
        assert_eq!(observations(&after, &later, attacker, 99.0).len(), 3);
    }

    #[test]
    fn values_never_carry_command_text() {
        let secret = "hunter2-Secret";
        let commands = [
            format!("echo {secret} | passwd --stdin root | tee /tmp/{secret} | nc x 1"),
            format!("mysql -u root -p{secret} -e 'select 1'"),
            format!("tmux new -s {secret}"),
            format!("rm -f /var/log/{secret}.log; history -c"),
        ];
        let mut tally = ShellTally::default();
        for (i, c) in commands.iter().cycle().take(20).enumerate() {
            tally.add(c, i as i64);
        }
        let obs = observations(&ShellTally::default(), &tally, Uuid::new_v4(), 0.0);
        assert_eq!(obs.len(), 5);
        let text = serde_json::to_string(&obs).unwrap();
        assert!(!text.contains(secret), "{text}");
    }

    #[test]
    fn every_observation_passes_validation() {
        let mut growing = ShellTally::default();
        let commands = ["man ls", "tmux", "a|b|c|d", "history -c", "unset HISTFILE", "screen"];
        for (i, command) in commands.iter().cycle().take(40).enumerate() {
            let before = growing.clone();
            growing.add(command, 1_700_000_000_000 + 1_000 * i as i64);
            for o in observations(&before, &growing, Uuid::new_v4(), 1_700_000_100.0) {
                let record = serde_json::to_value(&o).unwrap();
                assert_eq!(svc::observation::validate(&record), Ok(o.clone()), "{record}");
            }
        }
        // Every label each rule can give, on its own.
        for commands in [&["ls"; 10][..], &["a|b|c"], &["a|b"; 5], &["x"; 12], &["tmux"]] {
            let tally = tally(commands);
            for o in observations(&ShellTally::default(), &tally, Uuid::new_v4(), 0.0) {
                let record = serde_json::to_value(&o).unwrap();
                assert!(svc::observation::validate(&record).is_ok(), "{record}");
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn any_text_is_read_without_panicking(command in "\\PC*", at in proptest::num::i64::ANY) {
            let mut tally = ShellTally::default();
            tally.add(&command, at);
            let _ = tally.readings();
        }

        #[test]
        fn shell_like_text_is_read_without_panicking(command in "[a-z |;&<>'\"\\\\$()`{}=/.\\-0-9\n]{0,200}") {
            let mut tally = ShellTally::default();
            tally.add(&command, 0);
            let _ = observations(&ShellTally::default(), &tally, Uuid::new_v4(), 0.0);
        }
    }
}
