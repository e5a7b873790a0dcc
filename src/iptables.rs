//! svc's own chains in the host's iptables, the one mechanism the topologies' NAT exemption
//! (`topology::nat`) and the fleets' host isolation (`fleet::host_isolation`) share. A chain is
//! named for what it serves, lives in one table and is jumped to first from one built-in chain;
//! each change replaces its rules as a whole with one `iptables-restore --noflush`, computed from
//! the table as `iptables -S` lists it, so an unchanged chain costs one listing and nothing else
//! of the host's rules is ever touched. A chain with no rules left is removed with its jumps.

use std::time::Duration;

/// How long one `iptables` command may take (it waits for the xtables lock).
const IPTABLES_TIMEOUT: Duration = Duration::from_secs(30);

/// One of svc's chains: its `table`, the built-in chain (`hook`) that jumps to it first, its name
/// (iptables names are at most 28 characters).
#[derive(Clone, Copy, Debug)]
pub struct OwnChain<'a> {
    pub table: &'static str,
    pub hook: &'static str,
    pub name: &'a str,
}

impl OwnChain<'_> {
    /// The `iptables-restore --noflush` input that takes the table, as `iptables -S` lists it, to
    /// the chain holding exactly `rules` (each what follows `-A <chain> `, as `iptables -S`
    /// prints it) and jumped to first from the hook; with no rules, to no chain and no jump.
    /// `None` when the table is so already.
    pub fn script(&self, listing: &str, rules: &[String]) -> Option<String> {
        let OwnChain { table, hook, name } = *self;
        let jump = format!("-A {hook} -j {name}");
        let jumps = listing.lines().filter(|line| line.trim() == jump).count();
        let exists = listing.lines().any(|line| line.trim() == format!("-N {name}"));
        let wanted: Vec<String> = rules.iter().map(|rule| format!("-A {name} {rule}")).collect();
        let own = format!("-A {name} ");
        let held: Vec<&str> = listing.lines().map(str::trim).filter(|line| line.starts_with(&own)).collect();
        let current = if rules.is_empty() { !exists } else { exists && jumps == 1 && held == wanted };
        if current {
            return None;
        }
        let mut lines = vec![format!("*{table}")];
        if rules.is_empty() {
            lines.extend((0..jumps).map(|_| format!("-D {hook} -j {name}")));
            lines.push(format!("-F {name}"));
            lines.push(format!("-X {name}"));
        } else {
            // Declaring the chain makes it, or empties one that exists.
            lines.push(format!(":{name} - [0:0]"));
            lines.extend(wanted);
            lines.extend((1..jumps).map(|_| format!("-D {hook} -j {name}")));
            if jumps == 0 {
                lines.push(format!("-I {hook} 1 -j {name}"));
            }
        }
        lines.push("COMMIT".into());
        Some(lines.join("\n") + "\n")
    }

    /// Makes the host's chain hold exactly `rules` (none: removes it); whether it had to change.
    pub async fn apply(&self, rules: &[String]) -> Result<bool, IptablesError> {
        match self.script(&self.listing().await?, rules) {
            Some(script) => run("iptables-restore", &["-w", "--noflush"], &script).await.map(|_| true),
            None => Ok(false),
        }
    }

    /// Whether the host's chain holds exactly `rules` (none: is absent).
    pub async fn is_current(&self, rules: &[String]) -> Result<bool, IptablesError> {
        Ok(self.script(&self.listing().await?, rules).is_none())
    }

    async fn listing(&self) -> Result<String, IptablesError> {
        run("iptables", &["-w", "-t", self.table, "-S"], "").await
    }
}

/// Why iptables could not read or change a host table, in its own words: for the log.
#[derive(Debug, thiserror::Error)]
pub enum IptablesError {
    #[error("{program}: {source}")]
    Run { program: &'static str, source: std::io::Error },
    #[error("{program}: {stderr}")]
    Refused { program: &'static str, stderr: String },
    #[error("{program}: timed out")]
    TimedOut { program: &'static str },
}

/// `program args` with `input` on its standard input; its standard output.
async fn run(program: &'static str, args: &[&str], input: &str) -> Result<String, IptablesError> {
    use tokio::io::AsyncWriteExt;
    let mut child = tokio::process::Command::new(program)
        .args(args)
        .env("LC_ALL", "C")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|source| IptablesError::Run { program, source })?;
    let mut stdin = child.stdin.take().expect("stdin is piped");
    let work = async move {
        stdin.write_all(input.as_bytes()).await?;
        drop(stdin);
        child.wait_with_output().await
    };
    match tokio::time::timeout(IPTABLES_TIMEOUT, work).await {
        Ok(Ok(output)) if output.status.success() => Ok(String::from_utf8_lossy(&output.stdout).into_owned()),
        Ok(Ok(output)) => {
            Err(IptablesError::Refused { program, stderr: String::from_utf8_lossy(&output.stderr).trim().to_string() })
        }
        Ok(Err(source)) => Err(IptablesError::Run { program, source }),
        Err(_) => Err(IptablesError::TimedOut { program }),
    }
}
