//! Databases of the scenarios: a SQLite file in a temporary directory, or a
//! fresh Postgres schema per test (dropped afterwards). An unreachable
//! Postgres server fails the test; it never skips it.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// The Postgres server used when `SYNCSTORE_PG_URL` is unset.
const DEFAULT_PG_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

/// Which storage a scenario runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// A SQLite file.
    Sqlite,
    /// A schema of the Postgres server at `SYNCSTORE_PG_URL`.
    Postgres,
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
        }
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        if let Self::Postgres { server, schema } = self {
            if let Ok(mut client) = postgres::Client::connect(server, postgres::NoTls) {
                let _ =
                    client.batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"));
            }
        }
    }
}
