//! The body of a shell command line, `CMD uid=0 user=root src=1.2.3.4 pwd=/root cmd=ls /var/www/html`,
//! which SSH's PROMPT_COMMAND hands to `logger` (the profiler reads commands from it).

/// One command an attacker ran in a decoy shell.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShellCommand {
    pub uid: Option<String>,
    pub user: Option<String>,
    /// The attacker address the shell saw (`$SSH_CLIENT`'s first word).
    pub src: Option<String>,
    pub pwd: Option<String>,
    /// Everything after `cmd=`, verbatim: it may hold spaces and `=`.
    pub command: String,
}

/// Reads a `CMD …` body; `None` when `msg` is not one or has no `cmd=`.
///
/// `cmd=` must start a word and ends the attributes: the rest of the line is the command. Before it,
/// a word `key=value` with a letters-and-underscore key starts an attribute (unknown keys are
/// ignored), and any other word continues the previous value, so a `pwd` with spaces stays whole.
pub fn parse_shell_command(msg: &str) -> Option<ShellCommand> {
    let body = msg.strip_prefix("CMD ")?;
    let cmd_at = word_starts(body).find(|&at| body[at..].starts_with("cmd="))?;
    let command = body[cmd_at + 4..].to_owned();

    let mut shell = ShellCommand { uid: None, user: None, src: None, pwd: None, command };
    let mut current: Option<&mut Option<String>> = None;
    for word in body[..cmd_at].split(' ').filter(|w| !w.is_empty()) {
        match attribute(word) {
            Some((key, value)) => {
                let slot = match key {
                    "uid" => &mut shell.uid,
                    "user" => &mut shell.user,
                    "src" => &mut shell.src,
                    "pwd" => &mut shell.pwd,
                    _ => {
                        current = None;
                        continue;
                    }
                };
                *slot = Some(value.to_owned());
                current = Some(slot);
            }
            None => {
                if let Some(Some(value)) = current.as_deref_mut() {
                    value.push(' ');
                    value.push_str(word);
                }
            }
        }
    }
    Some(shell)
}

/// Byte offsets in `text` where a space-separated word starts.
fn word_starts(text: &str) -> impl Iterator<Item = usize> + '_ {
    let b = text.as_bytes();
    (0..b.len()).filter(move |&i| b[i] != b' ' && (i == 0 || b[i - 1] == b' '))
}

/// `key=value` with a key of ASCII letters and `_`.
fn attribute(word: &str) -> Option<(&str, &str)> {
    let (key, value) = word.split_once('=')?;
    (!key.is_empty() && key.bytes().all(|b| b.is_ascii_alphabetic() || b == b'_')).then_some((key, value))
}
