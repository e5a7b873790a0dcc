//! `svc migrate` and `svc user …`: operate on the database directly, without the API running.

use std::io::{BufRead, IsTerminal};

use anyhow::{Context, bail};
use chrono::Utc;
use clap::Subcommand;
use svc::auth::hashing::HashPool;
use svc::auth::password;
use svc::auth::username::check_username;
use svc::config::Config;
use svc::db::{self, Db, DbError, NewUser, Role};

#[derive(Subcommand)]
pub enum UserCommand {
    /// Create a user. The password is prompted for on a terminal, or read as one line from stdin.
    Add {
        username: String,
        /// `admin` (every route) or `viewer` (read-only routes).
        #[arg(long, default_value = "viewer")]
        role: Role,
        /// Make the user choose a new password at first login.
        #[arg(long)]
        must_change_password: bool,
    },
    /// Set a user's password, read like `add` does (never from the command line). Every token the
    /// user holds stops working.
    Passwd {
        username: String,
        /// Make the user choose a new password at next login.
        #[arg(long)]
        must_change_password: bool,
    },
    /// List users: name, role, whether a password change is pending.
    List,
}

pub async fn migrate(config: &Config) -> anyhow::Result<()> {
    let db = open(config).await?;
    println!("migrations applied ({})", db.backend());
    db.close().await;
    Ok(())
}

pub async fn run(command: UserCommand, config: &Config) -> anyhow::Result<()> {
    let db = open(config).await?;
    let result = match command {
        UserCommand::Add { username, role, must_change_password } => {
            add(&db, username, role, must_change_password).await
        }
        UserCommand::Passwd { username, must_change_password } => passwd(&db, &username, must_change_password).await,
        UserCommand::List => list(&db).await,
    };
    db.close().await;
    result
}

pub async fn open(config: &Config) -> anyhow::Result<Db> {
    let db = db::connect(&config.db)?;
    db.migrate().await.context("applying migrations")?;
    Ok(db)
}

async fn add(db: &Db, username: String, role: Role, must_change_password: bool) -> anyhow::Result<()> {
    check_username(&username)?;
    let password_hash = read_new_password().await?;
    let user = NewUser { username: username.clone(), password_hash, role, must_change_password };
    match db.add_user(user, Utc::now()).await {
        Ok(user) => println!("created {} ({}) {}", user.username, user.role.as_str(), user.uuid),
        Err(DbError::Conflict) => bail!("user {username} already exists"),
        Err(err) => return Err(err.into()),
    }
    Ok(())
}

async fn passwd(db: &Db, username: &str, must_change_password: bool) -> anyhow::Result<()> {
    let user = match db.user_by_name(username).await {
        Err(DbError::NotFound) => bail!("no user named {username}"),
        other => other?,
    };
    let password_hash = read_new_password().await?;
    db.set_password(user.uuid, &password_hash, must_change_password, Utc::now()).await?;
    println!("password updated for {username}; existing tokens are revoked");
    Ok(())
}

async fn list(db: &Db) -> anyhow::Result<()> {
    for user in db.list_users().await? {
        let pending = if user.must_change_password { "must-change-password" } else { "" };
        println!("{}\t{}\t{}\t{}", user.username, user.role.as_str(), user.uuid, pending);
    }
    Ok(())
}

/// Reads a new password from the terminal (twice) or one line of stdin, checks the policy and
/// hashes it off the async runtime.
async fn read_new_password() -> anyhow::Result<String> {
    let password = if std::io::stdin().is_terminal() {
        let first = rpassword::prompt_password("New password: ")?;
        let second = rpassword::prompt_password("Repeat password: ")?;
        if first != second {
            bail!("the passwords do not match");
        }
        first
    } else {
        let mut line = String::new();
        std::io::stdin().lock().read_line(&mut line).context("reading the password from stdin")?;
        line.trim_end_matches(['\n', '\r']).to_string()
    };
    password::check_policy(&password)?;
    HashPool::default().hash(password).await
}
