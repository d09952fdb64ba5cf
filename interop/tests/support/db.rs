//! Databases of the scenarios: a SQLite file in a temporary directory, a
//! fresh Postgres schema per test, or a fresh MariaDB database per test
//! (both dropped afterwards). An unreachable Postgres or MariaDB server
//! fails the test; it never skips it.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// The Postgres server used when `SYNCSTORE_PG_URL` is unset.
const DEFAULT_PG_URL: &str = "postgres://postgres@127.0.0.1:5432/test";
/// The MariaDB server used when `SYNCSTORE_MARIADB_URL` is unset (its
/// database is only where the test logs in).
const DEFAULT_MARIADB_URL: &str = "mysql://root@127.0.0.1:3306/test";

/// Which storage a scenario runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// A SQLite file.
    Sqlite,
    /// A schema of the Postgres server at `SYNCSTORE_PG_URL`.
    Postgres,
    /// A database of the MariaDB server at `SYNCSTORE_MARIADB_URL`.
    Mariadb,
}

/// A database one scenario owns.
#[derive(Debug)]
pub enum Db {
    /// A SQLite file in its own temporary directory.
    Sqlite {
        /// Removed on drop.
        _dir: tempfile::TempDir,
        /// The database file (created by `migrate`).
        path: PathBuf,
    },
    /// A fresh Postgres schema.
    Postgres {
        /// The server URL.
        server: String,
        /// The schema name.
        schema: String,
    },
    /// A fresh MariaDB database, created as an operator would (`CREATE
    /// DATABASE` with the server's defaults).
    Mariadb {
        /// The server URL up to its path (`mysql://user@host:port`).
        server: String,
        /// The server URL's query, with its `?` (or empty).
        query: String,
        /// The database name.
        database: String,
    },
}

static COUNTER: AtomicU64 = AtomicU64::new(0);

fn unique() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!(
        "{:x}{:x}{}",
        nanos & 0xffff_ffff_ffff,
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

impl Db {
    /// A new, empty database of `dialect`.
    pub fn new(dialect: Dialect) -> Self {
        match dialect {
            Dialect::Sqlite => {
                let dir = tempfile::tempdir().expect("a temporary directory");
                let path = dir.path().join("interop.sqlite");
                Self::Sqlite { _dir: dir, path }
            }
            Dialect::Postgres => {
                let server =
                    std::env::var("SYNCSTORE_PG_URL").unwrap_or_else(|_| DEFAULT_PG_URL.to_owned());
                let schema = format!("syncstore_interop_{}", unique());
                let mut client = postgres::Client::connect(&server, postgres::NoTls)
                    .unwrap_or_else(|e| {
                        panic!(
                            "cannot reach PostgreSQL at {server} ({e}); start it or set \
                             SYNCSTORE_PG_URL — the Postgres scenarios are never skipped"
                        )
                    });
                client
                    .batch_execute(&format!("CREATE SCHEMA \"{schema}\""))
                    .expect("create the scenario's schema");
                Self::Postgres { server, schema }
            }
            Dialect::Mariadb => {
                let url = std::env::var("SYNCSTORE_MARIADB_URL")
                    .unwrap_or_else(|_| DEFAULT_MARIADB_URL.to_owned());
                let (server, query) = mariadb_server(&url);
                let database = format!("syncstore_interop_{}", unique());
                let mut conn = mariadb_connect(&server, &query).unwrap_or_else(|e| {
                    panic!(
                        "cannot reach MariaDB at {server} ({e}); start it or set \
                         SYNCSTORE_MARIADB_URL — the MariaDB scenarios are never skipped"
                    )
                });
                mysql::prelude::Queryable::query_drop(
                    &mut conn,
                    format!("CREATE DATABASE `{database}`"),
                )
                .expect("create the scenario's database");
                Self::Mariadb {
                    server,
                    query,
                    database,
                }
            }
        }
    }

    /// The `--db` URL of this database.
    pub fn url(&self) -> String {
        match self {
            Self::Sqlite { path, .. } => format!("sqlite:{}", path.display()),
            Self::Postgres { server, schema } => {
                let separator = if server.contains('?') { '&' } else { '?' };
                format!("{server}{separator}schema={schema}")
            }
            Self::Mariadb {
                server,
                query,
                database,
            } => format!("{server}/{database}{query}"),
        }
    }
}

/// `mysql://user@host:port/db?params` split into the server a scenario's
/// database is made on (`mysql://user@host:port`) and the query
/// (`?params`, or empty); the database is dropped.
fn mariadb_server(url: &str) -> (String, String) {
    let authority = url.find("://").map_or(0, |i| i + 3);
    let end = url[authority..]
        .find(['/', '?'])
        .map_or(url.len(), |i| authority + i);
    let query = url[end..].find('?').map_or("", |i| &url[end + i..]);
    (url[..end].to_owned(), query.to_owned())
}

/// A plain connection to `server` (either scheme) with no database
/// selected.
fn mariadb_connect(server: &str, query: &str) -> Result<mysql::Conn, mysql::Error> {
    let rest = server.split_once("://").map_or(server, |(_, rest)| rest);
    let opts = mysql::Opts::from_url(&format!("mysql://{rest}/{query}"))?;
    mysql::Conn::new(mysql::OptsBuilder::from_opts(opts).prefer_socket(false))
}

impl Drop for Db {
    fn drop(&mut self) {
        match self {
            Self::Sqlite { .. } => {}
            Self::Postgres { server, schema } => {
                if let Ok(mut client) = postgres::Client::connect(server, postgres::NoTls) {
                    let _ = client
                        .batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"));
                }
            }
            Self::Mariadb {
                server,
                query,
                database,
            } => {
                if let Ok(mut conn) = mariadb_connect(server, query) {
                    let _ = mysql::prelude::Queryable::query_drop(
                        &mut conn,
                        format!("DROP DATABASE IF EXISTS `{database}`"),
                    );
                }
            }
        }
    }
}
