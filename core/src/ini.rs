//! The deployment INI's syntax, read as DECNET reads it (Python's `configparser` with
//! `interpolation=None, strict=False`): `[section]` headers, `key = value` or `key: value` options
//! (keys case-insensitive), whole-line `#`/`;` comments, indented continuation lines, `[DEFAULT]`
//! options inherited by every section, a repeated section merged and a repeated key's last value
//! kept. What the sections mean is `svc::fleet::plan`'s business.

use std::collections::{BTreeMap, HashMap};

/// The most sections a deployment INI may hold (decky and per-service sections together; one
/// decky section expands to up to 100 deckies with `amount`). Checked while parsing, so a huge INI
/// is refused at its first section past the limit, in time linear in what was read.
pub const MAX_SECTIONS: usize = 4096;

/// Why INI text was refused: the error contract (`svc::http::extract`) answers each variant as
/// its own configuration conflict, and shows these words in developer mode.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum IniSyntaxError {
    #[error("INI content is empty")]
    Empty,
    #[error("Invalid INI format: line {line}: {reason}")]
    Format { line: usize, reason: &'static str },
    #[error("INI must contain at least one section naming a decky")]
    NoSections,
}

/// Why an INI past [`MAX_SECTIONS`] is refused.
pub const TOO_MANY_SECTIONS: &str = "more than 4096 sections";

/// One section's options, keys lowercased, in key order.
pub type Options = BTreeMap<String, String>;

/// INI text as sections in the order they first appear, `[DEFAULT]` folded into each.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ini {
    sections: Vec<(String, Options)>,
}

impl Ini {
    /// Reads `text`; refuses what `configparser` refuses, and text with no section at all.
    pub fn parse(text: &str) -> Result<Ini, IniSyntaxError> {
        if text.trim().is_empty() {
            return Err(IniSyntaxError::Empty);
        }
        let mut defaults = Options::new();
        let mut sections: Vec<(String, Options)> = Vec::new();
        // Where each section is in `sections`, so a header is found in constant time.
        let mut positions: HashMap<String, usize> = HashMap::new();
        // The section being filled (`None`: DEFAULT), and the key a continuation line extends.
        let mut current: Option<Option<usize>> = None;
        let mut last_key: Option<(String, usize)> = None;
        for (index, raw) in text.lines().enumerate() {
            let line_no = index + 1;
            let line = raw.trim_end_matches('\r');
            let trimmed = line.trim();
            if trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with(';') {
                // A blank line ends a multi-line value; a comment does not add to it.
                if trimmed.is_empty() {
                    last_key = None;
                }
                continue;
            }
            if line.contains('\0') {
                return Err(IniSyntaxError::Format { line: line_no, reason: "a NUL character" });
            }
            let indent = line.len() - line.trim_start().len();
            if indent > 0
                && let Some((key, key_indent)) = &last_key
                && indent > *key_indent
            {
                let options = options_of(&mut sections, &mut defaults, current.flatten());
                if let Some(value) = options.get_mut(key) {
                    value.push('\n');
                    value.push_str(trimmed);
                }
                continue;
            }
            if let Some(rest) = trimmed.strip_prefix('[') {
                let Some(end) = rest.rfind(']') else {
                    return Err(IniSyntaxError::Format { line: line_no, reason: "a section header without `]`" });
                };
                let name = &rest[..end];
                if name.is_empty() {
                    return Err(IniSyntaxError::Format { line: line_no, reason: "an empty section name" });
                }
                current = Some(if name == "DEFAULT" {
                    None
                } else {
                    Some(match positions.get(name) {
                        Some(at) => *at,
                        None if sections.len() == MAX_SECTIONS => {
                            return Err(IniSyntaxError::Format { line: line_no, reason: TOO_MANY_SECTIONS });
                        }
                        None => {
                            positions.insert(name.to_string(), sections.len());
                            sections.push((name.to_string(), Options::new()));
                            sections.len() - 1
                        }
                    })
                });
                last_key = None;
                continue;
            }
            let Some(section) = current else {
                return Err(IniSyntaxError::Format { line: line_no, reason: "an option before any section header" });
            };
            let Some(at) = trimmed.find(['=', ':']) else {
                return Err(IniSyntaxError::Format {
                    line: line_no,
                    reason: "a line that is neither a section nor `key = value`",
                });
            };
            let key = trimmed[..at].trim().to_lowercase();
            if key.is_empty() {
                return Err(IniSyntaxError::Format { line: line_no, reason: "an option without a name" });
            }
            let value = trimmed[at + 1..].trim().to_string();
            options_of(&mut sections, &mut defaults, section).insert(key.clone(), value);
            last_key = Some((key, indent));
        }
        if sections.is_empty() {
            return Err(IniSyntaxError::NoSections);
        }
        for (_, options) in &mut sections {
            for (key, value) in &defaults {
                options.entry(key.clone()).or_insert_with(|| value.clone());
            }
        }
        Ok(Ini { sections })
    }

    /// Every section but `[DEFAULT]`, in the order each first appeared.
    pub fn sections(&self) -> impl Iterator<Item = (&str, &Options)> {
        self.sections.iter().map(|(name, options)| (name.as_str(), options))
    }

    pub fn section(&self, name: &str) -> Option<&Options> {
        self.sections.iter().find(|(n, _)| n == name).map(|(_, options)| options)
    }
}

fn options_of<'a>(
    sections: &'a mut [(String, Options)],
    defaults: &'a mut Options,
    section: Option<usize>,
) -> &'a mut Options {
    match section {
        Some(at) => &mut sections[at].1,
        None => defaults,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_options_comments_and_continuations_read_as_configparser_reads_them() {
        let ini = Ini::parse(
            "# fleet\r\n[DEFAULT]\nservices = ssh\n\n[general]\nnet = 10.0.0.0/24\nGW: 10.0.0.1\n\
             [web]\n; comment\nservices = http,\n   ssh\nip=10.0.0.5\n[general]\ninterface = eth0\n",
        )
        .unwrap();
        let names: Vec<&str> = ini.sections().map(|(n, _)| n).collect();
        assert_eq!(names, ["general", "web"]);
        let general = ini.section("general").unwrap();
        assert_eq!(general["gw"], "10.0.0.1");
        assert_eq!(general["interface"], "eth0", "a repeated section is merged");
        assert_eq!(general["services"], "ssh", "DEFAULT options reach every section");
        let web = ini.section("web").unwrap();
        assert_eq!(web["services"], "http,\nssh");
        assert_eq!(web["ip"], "10.0.0.5");
    }

    #[test]
    fn a_repeated_key_keeps_its_last_value() {
        let ini = Ini::parse("[a]\nip = 1\nIP = 2\n").unwrap();
        assert_eq!(ini.section("a").unwrap()["ip"], "2");
    }

    #[test]
    fn refusals_name_the_phrase_the_error_contract_looks_for() {
        assert_eq!(Ini::parse(" \n\t\n"), Err(IniSyntaxError::Empty));
        for bad in ["ip = 1\n[a]\n", "[a]\njust words\n", "[a\nx=1\n", "[]\n", "[a]\n= 1\n"] {
            let err = Ini::parse(bad).unwrap_err();
            assert!(err.to_string().contains("Invalid INI format"), "{bad:?}: {err}");
        }
        assert_eq!(Ini::parse("# only a comment\n"), Err(IniSyntaxError::NoSections));
    }

    #[test]
    fn the_section_limit_is_checked_while_parsing_so_a_huge_ini_stops_at_its_first_section_past_it() {
        let huge: String = (0..74_000).map(|n| format!("[d{n}]\nservices = ssh\n")).collect();
        let err = Ini::parse(&huge).unwrap_err();
        // Section n's header is on line 2n + 1: the parse stopped at section 4097 (n = 4096).
        let stopped_at = 2 * MAX_SECTIONS + 1;
        assert_eq!(err, IniSyntaxError::Format { line: stopped_at, reason: TOO_MANY_SECTIONS });
        assert!(err.to_string().contains("Invalid INI format"), "{err}");

        let at_the_limit: String = (0..MAX_SECTIONS).map(|n| format!("[d{n}]\nservices = ssh\n")).collect();
        assert_eq!(Ini::parse(&at_the_limit).unwrap().sections().count(), MAX_SECTIONS);
        // A repeated header is the same section, not one more.
        let repeated = format!("{at_the_limit}[d0]\nip = 10.0.0.9\n");
        assert_eq!(Ini::parse(&repeated).unwrap().section("d0").unwrap()["ip"], "10.0.0.9");
    }
}
