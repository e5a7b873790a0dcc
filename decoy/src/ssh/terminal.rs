//! The shell side of an SSH session channel: a line editor over the keystrokes a pty sends, or
//! plain lines without one, feeding the fake shell.

use crate::session::Session;
use crate::shell::{FakeShell, Outcome};

/// Output text for the client: `\r\n` line ends when a terminal is attached (its `onlcr`),
/// as-is otherwise.
pub(super) fn line_ends(text: &str, pty: bool) -> Vec<u8> {
    if pty { text.replace('\n', "\r\n").into_bytes() } else { text.as_bytes().to_vec() }
}

/// The shell's side of a session channel: with a pty, a line editor over keystrokes (echo,
/// backspace, Ctrl-C, Ctrl-D, arrow keys swallowed) and a prompt; without one, plain lines read as
/// bash reads a script.
pub(super) struct Terminal {
    pub(super) shell: FakeShell,
    pty: bool,
    line: Vec<u8>,
    /// Inside an escape sequence (an arrow key, say), which is swallowed.
    escape: Escape,
    /// The last byte ended a line with CR, so an LF right after it is the same line end.
    after_cr: bool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Escape {
    None,
    /// After ESC.
    Started,
    /// After `ESC [` or `ESC O`, until the final byte.
    Sequence,
}

/// What a batch of keystrokes produced.
pub(super) struct Typed {
    pub(super) output: Vec<u8>,
    pub(super) exit: bool,
}

impl Terminal {
    pub(super) fn new(shell: FakeShell, pty: bool) -> Terminal {
        Terminal { shell, pty, line: Vec::new(), escape: Escape::None, after_cr: false }
    }

    pub(super) fn feed(&mut self, data: &[u8], session: &Session) -> Typed {
        let mut output = Vec::new();
        for &byte in data {
            let after_cr = std::mem::replace(&mut self.after_cr, byte == b'\r');
            match self.escape {
                Escape::Started => {
                    self.escape = if byte == b'[' || byte == b'O' { Escape::Sequence } else { Escape::None };
                    continue;
                }
                Escape::Sequence => {
                    if (0x40..=0x7e).contains(&byte) {
                        self.escape = Escape::None;
                    }
                    continue;
                }
                Escape::None => {}
            }
            match byte {
                b'\n' if after_cr => {}
                b'\r' | b'\n' => {
                    if self.pty {
                        output.extend_from_slice(b"\r\n");
                    }
                    if self.enter(session, &mut output) {
                        return Typed { output, exit: true };
                    }
                }
                0x1b => self.escape = Escape::Started,
                0x7f | 0x08 => {
                    if self.erase() && self.pty {
                        output.extend_from_slice(b"\x08 \x08");
                    }
                }
                // Ctrl-C: the line is dropped.
                0x03 if self.pty => {
                    self.line.clear();
                    output.extend_from_slice(format!("^C\r\n{}", self.shell.prompt()).as_bytes());
                }
                // Ctrl-D on an empty line logs out; elsewhere it does nothing.
                0x04 if self.pty => {
                    if self.line.is_empty() {
                        output.extend_from_slice(b"logout\r\n");
                        return Typed { output, exit: true };
                    }
                }
                // Ctrl-U: the line is erased.
                0x15 if self.pty => {
                    while self.erase() {
                        output.extend_from_slice(b"\x08 \x08");
                    }
                }
                // Tab and other control characters: no completion, nothing shown.
                0x00..=0x1f => {}
                _ => {
                    if self.line.len() < session.limits.max_line {
                        self.line.push(byte);
                        if self.pty {
                            output.push(byte);
                        }
                    }
                }
            }
        }
        Typed { output, exit: false }
    }

    /// Removes the last character typed (all its UTF-8 bytes); false when the line was empty.
    fn erase(&mut self) -> bool {
        while let Some(byte) = self.line.pop() {
            if byte & 0xc0 != 0x80 {
                return true;
            }
        }
        false
    }

    /// Runs the line typed, writing its output and the next prompt; true when the shell exits.
    fn enter(&mut self, session: &Session, output: &mut Vec<u8>) -> bool {
        let line = String::from_utf8_lossy(&std::mem::take(&mut self.line)).into_owned();
        if !line.trim().is_empty() {
            session.shell_command(self.shell.user(), self.shell.cwd(), &line);
            match self.shell.run(&line) {
                Outcome::Output(text) => output.extend_from_slice(&line_ends(&text, self.pty)),
                Outcome::Exit => {
                    if self.pty {
                        output.extend_from_slice(b"logout\r\n");
                    }
                    return true;
                }
            }
        }
        if self.pty {
            output.extend_from_slice(self.shell.prompt().as_bytes());
        }
        false
    }

    /// The client sent EOF: a last line without its end still runs (a script's last line).
    pub(super) fn end_of_input(&mut self, session: &Session) -> Vec<u8> {
        let mut output = Vec::new();
        if !self.pty && !self.line.is_empty() {
            self.enter(session, &mut output);
        }
        output
    }
}
