//! Shared support of the workspace-level integration tests in `tests/tests/`:
//! "processes" of a deployment — independent storage instances with their own
//! pools — on a fresh SQLite file or a fresh Postgres schema; the fixture
//! schema family; the invariant checker; the reference model of the storage
//! contract; the bodies of the hostile-input fuzz targets (shared with
//! the cargo-fuzz crate in `fuzz/`); pushes under connection faults; and
//! MariaDB read and acted on around the API, on the test server or on a
//! throwaway server of a test's own.
#![deny(rust_2018_idioms)]
#![warn(missing_docs, missing_debug_implementations)]

#[path = "src/budget.rs"]
pub mod budget;
#[path = "src/connection_faults.rs"]
pub mod connection_faults;
#[path = "src/fixture.rs"]
pub mod fixture;
#[path = "src/fuzz_bodies.rs"]
pub mod fuzz_bodies;
#[path = "src/invariants.rs"]
pub mod invariants;
#[path = "src/mariadb.rs"]
pub mod mariadb;
#[path = "src/mariadb_server.rs"]
pub mod mariadb_server;
#[path = "src/model.rs"]
pub mod model;
#[path = "src/scenario.rs"]
pub mod scenario;
#[path = "src/snapshot.rs"]
pub mod snapshot;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use sync_core::ServerStorage;

/// The Postgres server of the tests: `SYNCSTORE_PG_URL` or the local default.
pub fn pg_url() -> String {
    std::env::var("SYNCSTORE_PG_URL")
        .ok()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

/// The MariaDB server of the tests: `SYNCSTORE_MARIADB_URL` or the local
/// default (`sync_mariadb::scratch`).
pub fn mariadb_url() -> String {
    std::env::var(sync_mariadb::scratch::URL_VARIABLE)
        .ok()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| sync_mariadb::scratch::DEFAULT_URL.to_owned())
}

/// One database shared by several "processes".
pub trait Deployment: Send + Sync {
    /// `sqlite` or `postgres`.
    fn dialect(&self) -> &'static str;
    /// A new process: a storage instance with its own pools and memo.
    fn process(&self) -> Arc<dyn ServerStorage>;
    /// A new process that announces its commits to the others and offers
    /// a commit feed (`ServerStorage::commit_feed`) where the dialect has
    /// one; otherwise the same as [`Deployment::process`].
    fn announcing_process(&self) -> Arc<dyn ServerStorage> {
        self.process()
    }
    /// Terminates every commit-feed listener of the deployment (a lost
    /// listener connection); a no-op where there are none.
    fn kill_listeners(&self) {}
    /// Every physical table of the database (or schema) with its row count,
    /// read over a raw driver connection: lets hostile-input tests prove that
    /// nothing was created, dropped or emptied behind the API's back.
    fn census(&self) -> BTreeMap<String, i64>;
}

/// A fresh SQLite file in a temporary directory.
#[derive(Debug)]
pub struct SqliteDeployment {
    dir: tempfile::TempDir,
}

impl SqliteDeployment {
    /// A new, empty deployment.
    pub fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap_or_else(|e| panic!("temporary directory: {e}")),
        }
    }
}

impl Default for SqliteDeployment {
    fn default() -> Self {
        Self::new()
    }
}

impl Deployment for SqliteDeployment {
    fn dialect(&self) -> &'static str {
        "sqlite"
    }

    fn process(&self) -> Arc<dyn ServerStorage> {
        let path = self.dir.path().join("sync.db");
        let storage = sync_sqlite::SqliteStorage::open(&path, sync_sqlite::SqliteConfig::default())
            .unwrap_or_else(|e| panic!("open {}: {e:?}", path.display()));
        Arc::new(storage)
    }

    fn census(&self) -> BTreeMap<String, i64> {
        let path = self.dir.path().join("sync.db");
        let conn = rusqlite::Connection::open_with_flags(
            &path,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
        )
        .unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
        let mut stmt = conn
            .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
            .unwrap_or_else(|e| panic!("list tables: {e}"));
        let names: Vec<String> = stmt
            .query_map([], |row| row.get(0))
            .and_then(Iterator::collect)
            .unwrap_or_else(|e| panic!("list tables: {e}"));
        names
            .into_iter()
            .map(|name| {
                let sql = format!("SELECT count(*) FROM \"{}\"", name.replace('"', "\"\""));
                let count = conn
                    .query_row(&sql, [], |row| row.get(0))
                    .unwrap_or_else(|e| panic!("count {name}: {e}"));
                (name, count)
            })
            .collect()
    }
}

/// A fresh schema on the test PostgreSQL server, dropped at the end.
#[derive(Debug)]
pub struct PostgresDeployment {
    url: String,
    schema: String,
}

impl PostgresDeployment {
    /// Creates `it_<pid>_<n>` on the server; panics with instructions when the
    /// server does not answer (a missing Postgres is a loud failure).
    pub fn new() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let url = pg_url();
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let schema = format!(
            "it_{}_{}_{nanos}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::SeqCst)
        );
        let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap_or_else(|e| {
            panic!(
                "PostgreSQL is not reachable at {url} ({e}); start it with \
                 `pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start` \
                 or set SYNCSTORE_PG_URL"
            )
        });
        client
            .batch_execute(&format!("CREATE SCHEMA \"{schema}\""))
            .unwrap_or_else(|e| panic!("create schema: {e}"));
        Self { url, schema }
    }
}

impl Default for PostgresDeployment {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for PostgresDeployment {
    fn drop(&mut self) {
        if let Ok(mut client) = postgres::Client::connect(&self.url, postgres::NoTls) {
            let _ = client.batch_execute(&format!(
                "DROP SCHEMA IF EXISTS \"{}\" CASCADE",
                self.schema
            ));
        }
    }
}

impl Deployment for PostgresDeployment {
    fn dialect(&self) -> &'static str {
        "postgres"
    }

    fn process(&self) -> Arc<dyn ServerStorage> {
        let config = sync_postgres::PostgresConfig {
            schema: Some(self.schema.clone()),
            ..sync_postgres::PostgresConfig::default()
        };
        let storage = sync_postgres::PostgresStorage::connect(&self.url, config)
            .unwrap_or_else(|e| panic!("connect: {e:?}"));
        Arc::new(storage)
    }

    fn announcing_process(&self) -> Arc<dyn ServerStorage> {
        let config = sync_postgres::PostgresConfig {
            schema: Some(self.schema.clone()),
            announce_commits: true,
            ..sync_postgres::PostgresConfig::default()
        };
        let storage = sync_postgres::PostgresStorage::connect(&self.url, config)
            .unwrap_or_else(|e| panic!("connect: {e:?}"));
        Arc::new(storage)
    }

    fn kill_listeners(&self) {
        let mut client = postgres::Client::connect(&self.url, postgres::NoTls)
            .unwrap_or_else(|e| panic!("connect: {e}"));
        client
            .execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                 WHERE application_name = $1",
                &[&format!("syncstore commit feed {}", self.schema)],
            )
            .unwrap_or_else(|e| panic!("terminate the listeners: {e}"));
    }

    fn census(&self) -> BTreeMap<String, i64> {
        let mut client = postgres::Client::connect(&self.url, postgres::NoTls)
            .unwrap_or_else(|e| panic!("connect: {e}"));
        let names: Vec<String> = client
            .query(
                "SELECT table_name::text FROM information_schema.tables \
                 WHERE table_schema = $1 ORDER BY 1",
                &[&self.schema],
            )
            .unwrap_or_else(|e| panic!("list tables: {e}"))
            .iter()
            .map(|row| row.get(0))
            .collect();
        let quote = |s: &str| format!("\"{}\"", s.replace('"', "\"\""));
        names
            .into_iter()
            .map(|name| {
                let sql = format!(
                    "SELECT count(*) FROM {}.{}",
                    quote(&self.schema),
                    quote(&name)
                );
                let count: i64 = client
                    .query_one(&sql, &[])
                    .unwrap_or_else(|e| panic!("count {name}: {e}"))
                    .get(0);
                (name, count)
            })
            .collect()
    }
}

/// The dialects every cross-dialect test runs on.
pub const DIALECTS: [&str; 2] = ["sqlite", "postgres"];

/// A fresh deployment of `dialect` (`sqlite` or `postgres`).
pub fn deployment(dialect: &str) -> Box<dyn Deployment> {
    match dialect {
        "sqlite" => Box::new(SqliteDeployment::new()),
        "postgres" => Box::new(PostgresDeployment::new()),
        other => panic!("unknown dialect {other}"),
    }
}
