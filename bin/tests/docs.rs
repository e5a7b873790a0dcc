//! The overview pages keep up with the house: every module of the library, every worker of the
//! roster, every `svc` subcommand and every page under `docs/` is named in the README or in
//! `docs/architecture.md`, so a newcomer who reads those two finds every part. Adding one of them
//! without a line there fails here, naming what is missing.

use std::path::Path;
use std::process::Command;

use svc::worker::roster::WORKERS;

fn read(relative: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

/// The README and the architecture page, the two a newcomer is sent to.
struct Overview {
    readme: String,
    architecture: String,
}

impl Overview {
    fn load() -> Self {
        Overview { readme: read("README.md"), architecture: read("docs/architecture.md") }
    }

    fn names(&self, needle: &str) -> bool {
        self.readme.contains(needle) || self.architecture.contains(needle)
    }
}

fn assert_all_named(what: &str, missing: Vec<String>) {
    assert!(missing.is_empty(), "{what} named in neither README.md nor docs/architecture.md: {missing:?}");
}

/// `pub mod x;` lines of `src/lib.rs`.
fn library_modules() -> Vec<String> {
    let lib = read("src/lib.rs");
    let modules: Vec<String> = lib
        .lines()
        .filter_map(|line| line.trim().strip_prefix("pub mod ")?.strip_suffix(';'))
        .map(str::to_string)
        .collect();
    assert!(modules.len() > 20, "src/lib.rs lists too few modules to be read right: {modules:?}");
    modules
}

/// The subcommands `svc --help` lists (clap's `Commands:` block), less `help`.
fn subcommands() -> Vec<String> {
    let out = Command::new(env!("CARGO_BIN_EXE_svc")).arg("--help").output().unwrap();
    assert!(out.status.success(), "svc --help failed: {out:?}");
    let help = String::from_utf8(out.stdout).unwrap();
    let commands: Vec<String> = help
        .lines()
        .skip_while(|line| !line.starts_with("Commands:"))
        .skip(1)
        .take_while(|line| !line.trim().is_empty())
        // A command's line is indented two spaces; its wrapped description, further.
        .filter(|line| line.starts_with("  ") && !line.starts_with("   "))
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_string)
        .collect();
    assert!(commands.len() > 10, "svc --help lists too few commands to be read right:\n{help}");
    commands
}

/// Every `docs/*.md` file but the architecture page itself.
fn docs_pages() -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs");
    let mut pages: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.ends_with(".md") && name != "architecture.md")
        .collect();
    pages.sort();
    pages
}

#[test]
fn every_library_module_is_named_by_its_path() {
    let overview = Overview::load();
    let missing = library_modules()
        .into_iter()
        .filter(|m| !overview.names(&format!("src/{m}/")) && !overview.names(&format!("src/{m}.rs")))
        .collect();
    assert_all_named("modules of src/lib.rs (as `src/<name>/` or `src/<name>.rs`)", missing);
}

#[test]
fn every_roster_worker_is_named() {
    let overview = Overview::load();
    let missing =
        WORKERS.iter().map(|w| w.name).filter(|name| !overview.names(&format!("`{name}`"))).map(String::from).collect();
    assert_all_named("workers of the roster (as `<name>`)", missing);
}

#[test]
fn every_subcommand_is_named() {
    let overview = Overview::load();
    let missing = subcommands().into_iter().filter(|c| !overview.names(&format!("`svc {c}"))).collect();
    assert_all_named("svc subcommands (as `svc <name>…`)", missing);
}

#[test]
fn every_docs_page_is_linked() {
    let overview = Overview::load();
    let missing = docs_pages()
        .into_iter()
        .filter(|page| {
            !overview.readme.contains(&format!("](docs/{page})"))
                && !overview.architecture.contains(&format!("]({page})"))
        })
        .collect();
    assert_all_named("pages of docs/ (as a link)", missing);
}
