//! A repository's `.git/config` whose `origin` is the callback (`{url}/{team}/{repo}.git`, DECNET's
//! mechanism): every `git fetch`, `pull` or `push` requests it, `ls-remote` too. DECNET plants the
//! config alone, which git does not take for a repository ("not a git repository"); here the files
//! git checks for come with it (`HEAD`, a `refs/` and an `objects/` entry), so those commands work up
//! to the request.

use super::people;
use super::{Input, parent};
use crate::canary::bait::Bait;
use crate::canary::bait::draw::Draw;

const REPOSITORIES: &[&str] =
    &["infra-terraform", "billing-api", "deploy-scripts", "platform-config", "ansible-playbooks", "data-pipeline"];

/// The folder (under the home) the repository is checked out in.
pub(super) fn repository_folder(draw: &Draw<'_>, windows: bool) -> String {
    let folder = if windows { "source/repos" } else { draw.pick("folder", &["src", "projects", "work"]) };
    format!("{folder}/{}", draw.pick("repository", REPOSITORIES))
}

pub(super) fn make(input: &Input<'_>) -> Bait {
    let draw = &input.draw;
    let org = people::org(draw);
    let author = people::person(draw, "author");
    let repository = draw.pick("repository", REPOSITORIES);
    let branch = draw.pick("branch", &["main", "master"]);
    let content = format!(
        "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n\
         [remote \"origin\"]\n\turl = {url}/{team}/{repository}.git\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n\
         [branch \"{branch}\"]\n\tremote = origin\n\tmerge = refs/heads/{branch}\n\
         [user]\n\tname = {name}\n\temail = {email}\n",
        url = input.callback.url(),
        team = org.short,
        name = author.full_name(),
        email = author.email(org.domain),
    );
    let mut companions = Vec::new();
    if input.path.ends_with("/.git/config") {
        let git_dir = parent(&input.path);
        for (name, text) in [
            ("HEAD", format!("ref: refs/heads/{branch}\n")),
            ("refs/remotes/origin/HEAD", format!("ref: refs/remotes/origin/{branch}\n")),
            ("objects/info/packs", "\n".to_string()),
        ] {
            companions.push(input.file(format!("{git_dir}/{name}"), 0o644, text.into_bytes(), "text/plain", 30));
        }
    }
    Bait { file: input.file(input.path.clone(), 0o644, content.into_bytes(), "text/plain", 30), companions }
}
