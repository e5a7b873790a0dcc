//! `svc config`: every setting svc reads, printed from the definitions that read it: the `Config`
//! tree's (`svc::config::settings`, noted while the parser reads an empty environment) and the
//! command options that also take a variable (clap's own `env` arguments). `--markdown` prints the
//! page `docs/configuration.md` holds; `--check` validates the current environment.

use std::process::ExitCode;

use clap::CommandFactory;
use svc::config::{Config, settings};

#[derive(clap::Args)]
pub struct ConfigArgs {
    /// Print the Markdown page kept as docs/configuration.md instead of a plain table.
    #[arg(long, conflicts_with = "check")]
    markdown: bool,
    /// Validate the current environment as `svc api` would, reporting every problem at once (no
    /// secret's value is ever printed); exits 78 when there is any, 0 otherwise.
    #[arg(long)]
    check: bool,
}

pub fn run(args: ConfigArgs) -> ExitCode {
    if args.check {
        return check();
    }
    let sections = sections();
    print!("{}", if args.markdown { markdown(&sections) } else { plain(&sections) });
    ExitCode::SUCCESS
}

/// The same checks `svc api` and `svc supervise` make before anything starts.
fn check() -> ExitCode {
    match Config::read_env().check_for_api() {
        Ok(()) => {
            println!("configuration ok");
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("svc: {err}");
            ExitCode::from(crate::exit_status::EXIT_CONFIG)
        }
    }
}

/// A heading and its settings, in reading order.
struct Section {
    title: String,
    settings: Vec<Row>,
}

/// One line of the printout, from the `Config` tree or from a command's options.
struct Row {
    var: String,
    default: Option<String>,
    meaning: String,
}

fn sections() -> Vec<Section> {
    let mut sections: Vec<Section> = Vec::new();
    for setting in settings() {
        let row = Row { var: setting.var.to_string(), default: setting.default, meaning: setting.meaning.to_string() };
        match sections.last_mut() {
            Some(last) if last.title == setting.section => last.settings.push(row),
            _ => sections.push(Section { title: setting.section.to_string(), settings: vec![row] }),
        }
    }
    sections.extend(command_sections());
    sections
}

/// The options of each command that also read a variable (`svc supervise`, `svc decky`), with
/// clap's default and the first line of their help.
fn command_sections() -> Vec<Section> {
    let cli = crate::Cli::command();
    let mut sections = Vec::new();
    for command in cli.get_subcommands() {
        let settings: Vec<Row> = command
            .get_arguments()
            .filter_map(|arg| {
                let var = arg.get_env()?.to_str()?;
                let default = arg.get_default_values().iter().map(|v| v.to_string_lossy()).collect::<Vec<_>>();
                let help = arg.get_help().map(|h| h.to_string().replace('\n', " ")).unwrap_or_default();
                let meaning = first_sentence(&help);
                Some(Row {
                    var: var.to_string(),
                    default: (!default.is_empty()).then(|| default.join(",")),
                    meaning: format!("`--{}`: {}", arg.get_long().unwrap_or_default(), meaning),
                })
            })
            .collect();
        if !settings.is_empty() {
            sections.push(Section { title: format!("`svc {}`", command.get_name()), settings });
        }
    }
    sections
}

/// Up to the first full stop that ends a sentence (one followed by a capital), without it.
fn first_sentence(help: &str) -> &str {
    let ends = help.match_indices(". ").find(|(i, _)| help[i + 2..].starts_with(char::is_uppercase));
    ends.map_or(help, |(i, _)| &help[..i]).trim_end_matches('.')
}

fn plain(sections: &[Section]) -> String {
    let width = sections.iter().flat_map(|s| &s.settings).map(|s| s.var.len()).max().unwrap_or(0);
    let default_width = 24;
    let mut out = String::new();
    for (i, section) in sections.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&format!("# {}\n", section.title.replace('`', "")));
        for s in &section.settings {
            let default = s.default.as_deref().unwrap_or("-");
            let meaning = s.meaning.replace('`', "");
            if default.len() > default_width {
                out.push_str(&format!(
                    "{:width$}  {default}\n{:width$}  {:default_width$}  {meaning}\n",
                    s.var, "", ""
                ));
            } else {
                out.push_str(&format!("{:width$}  {default:default_width$}  {meaning}\n", s.var));
            }
        }
    }
    out
}

/// The page `docs/configuration.md` holds; a test keeps the two the same.
fn markdown(sections: &[Section]) -> String {
    let mut out = String::from(MARKDOWN_HEAD);
    for section in sections {
        out.push_str(&format!("\n## {}\n\n| variable | default | meaning |\n|---|---|---|\n", section.title));
        for s in &section.settings {
            let default = s.default.as_deref().map_or("—".to_string(), |d| format!("`{d}`"));
            out.push_str(&format!("| `{}` | {default} | {} |\n", s.var, s.meaning.replace('|', "\\|")));
        }
    }
    out
}

const MARKDOWN_HEAD: &str = "\
# Configuration

<!-- Generated by `svc config --markdown`; a test fails when this page differs from it. Edit
     src/config/ (defaults in the getter calls, meanings in settings.rs) or a command's clap
     arguments, then run `svc config --markdown > docs/configuration.md`. -->

Everything comes from `SVC_*` environment variables, read once at start. A bad configuration is
reported in full, one line per variable at fault, and `svc` exits with status 78 before anything
starts; no message ever contains a secret. `svc config --check` runs the same checks as `svc api`
on the current environment without starting anything. When `SVC_API_HOST` is not a loopback
address, the API also refuses a loopback CORS origin and a plaintext `http://` canary base to a
remote host. A default of — means unset: off, or nothing.
";
