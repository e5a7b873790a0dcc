//! [`Statement`]: a statement's text and its arguments, written once and run by either driver:
//! sqlx (MySQL/MariaDB, and sqlite's other verbs) or rusqlite (sqlite's log reads, `sqlite/reads.rs`).

use rusqlite::types::{ToSql, ToSqlOutput};

/// An argument of a [`Statement`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Arg {
    Int(i64),
    Text(String),
}

impl From<i64> for Arg {
    fn from(value: i64) -> Self {
        Arg::Int(value)
    }
}

impl From<String> for Arg {
    fn from(value: String) -> Self {
        Arg::Text(value)
    }
}

impl ToSql for Arg {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        match self {
            Arg::Int(value) => value.to_sql(),
            Arg::Text(value) => value.to_sql(),
        }
    }
}

/// SQL text with `?` placeholders and the arguments they stand for, in order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Statement {
    pub sql: String,
    pub args: Vec<Arg>,
}

impl Statement {
    pub fn new(sql: impl Into<String>) -> Statement {
        Statement { sql: sql.into(), args: Vec::new() }
    }

    pub fn push(&mut self, sql: &str) -> &mut Statement {
        self.sql.push_str(sql);
        self
    }

    /// A placeholder for `arg`.
    pub fn bind(&mut self, arg: impl Into<Arg>) -> &mut Statement {
        self.sql.push('?');
        self.args.push(arg.into());
        self
    }

    /// The statement as a sqlx query of rows `O`, its arguments bound.
    pub fn query_as<'q, DB, O>(&'q self) -> sqlx::query::QueryAs<'q, DB, O, <DB as sqlx::Database>::Arguments<'q>>
    where
        DB: sqlx::Database,
        i64: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
        &'q str: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
        O: for<'r> sqlx::FromRow<'r, DB::Row>,
    {
        self.args.iter().fold(sqlx::query_as(&self.sql), |query, arg| match arg {
            Arg::Int(value) => query.bind(*value),
            Arg::Text(value) => query.bind(value.as_str()),
        })
    }
}
