//! The dependency rule of the layout (`bin` → `workers`, `decoy` → `svc`; inside `svc`, `startup` and `http`
//! above everything else; the repository below the configuration), checked on the source itself so
//! a change that breaks it fails here rather than in a later reader's head.

use std::path::{Path, PathBuf};

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            files.push(path);
        }
    }
    files
}

/// Every file under `dir` (relative to the workspace) that mentions one of `needles`.
fn offenders(dir: &str, needles: &[&str], exempt: impl Fn(&Path) -> bool) -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    rust_files(&root.join(dir))
        .into_iter()
        .filter(|path| !exempt(path.strip_prefix(root).unwrap()))
        .filter(|path| {
            let text = std::fs::read_to_string(path).unwrap();
            needles.iter().any(|needle| text.contains(needle))
        })
        .map(|path| path.strip_prefix(root).unwrap().display().to_string())
        .collect()
}

#[test]
fn workers_and_decoys_never_reach_into_the_api() {
    let found = offenders("workers", &["svc::startup", "svc::http"], |_| false);
    assert!(found.is_empty(), "these worker files import the API's startup or http: {found:?}");
    // A decky runs alone in its container: no API, no database, no configuration.
    let found = offenders("decoy", &["svc::startup", "svc::http", "svc::db", "svc::config"], |_| false);
    assert!(found.is_empty(), "these decoy files import the API, the repository or the configuration: {found:?}");
}

#[test]
fn nothing_below_startup_and_http_imports_them() {
    let above = |path: &Path| path.starts_with("src/http") || path == Path::new("src/startup.rs");
    let found = offenders("src", &["crate::http", "crate::startup"], above);
    assert!(found.is_empty(), "these files sit below startup and http but import them: {found:?}");
}

#[test]
fn the_repository_does_not_depend_on_the_configuration() {
    let found = offenders("src/db", &["crate::config"], |_| false);
    assert!(found.is_empty(), "the repository imports the environment configuration: {found:?}");
}

#[test]
fn handlers_and_workers_never_see_sqlx() {
    let found = offenders("src/http", &["sqlx"], |_| false);
    let workers = offenders("workers/src", &["sqlx"], |_| false);
    assert!(found.is_empty() && workers.is_empty(), "sqlx outside the repository: {found:?} {workers:?}");
}
