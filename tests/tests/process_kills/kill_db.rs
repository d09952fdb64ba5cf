//! The databases of the process kills: a fresh SQLite file, Postgres
//! schema or MariaDB database per scenario, which the worker and the test
//! open by location.

use sync_core::ServerStorage;
use sync_mariadb::scratch::ScratchDatabase;
use syncstore_tests::mariadb::{self, MigrationState};
use syncstore_tests::{mariadb_url, pg_url};

/// A database the worker and the test open by location.
pub enum KillDb {
    Sqlite {
        _dir: tempfile::TempDir,
        path: String,
    },
    Postgres {
        schema: String,
    },
    Mariadb {
        db: ScratchDatabase,
    },
}

impl KillDb {
    /// A fresh, empty database of `dialect`; panics with the reason when
    /// its server cannot be reached.
    pub fn new(dialect: &str) -> Self {
        match dialect {
            "sqlite" => {
                let dir =
                    tempfile::tempdir().unwrap_or_else(|e| panic!("temporary directory: {e}"));
                let path = dir.path().join("sync.db").to_string_lossy().into_owned();
                KillDb::Sqlite { _dir: dir, path }
            }
            "postgres" => {
                use std::sync::atomic::{AtomicU64, Ordering};
                static NEXT: AtomicU64 = AtomicU64::new(0);
                let schema = format!(
                    "kill_{}_{}",
                    std::process::id(),
                    NEXT.fetch_add(1, Ordering::SeqCst)
                );
                admin(&format!(
                    "DROP SCHEMA IF EXISTS \"{schema}\" CASCADE; CREATE SCHEMA \"{schema}\""
                ));
                KillDb::Postgres { schema }
            }
            "mariadb" => {
                let url = mariadb_url();
                let base = sync_mariadb::MariadbUrl::parse(&url)
                    .unwrap_or_else(|e| panic!("SYNCSTORE_MARIADB_URL {url}: {e:?}"));
                let db = ScratchDatabase::create(&base).unwrap_or_else(|e| {
                    panic!(
                        "MariaDB is not reachable at {url} ({e:?}); start it or set \
                         SYNCSTORE_MARIADB_URL"
                    )
                });
                KillDb::Mariadb { db }
            }
            other => panic!("unknown dialect {other}"),
        }
    }

    /// The worker's location arguments.
    pub fn args(&self) -> [String; 2] {
        match self {
            KillDb::Sqlite { path, .. } => ["--sqlite".into(), path.clone()],
            KillDb::Postgres { schema } => ["--postgres".into(), schema.clone()],
            KillDb::Mariadb { db } => ["--mariadb".into(), db.url().database().to_owned()],
        }
    }

    /// A new process on the database (its schema not ensured yet).
    pub fn open(&self) -> Box<dyn ServerStorage> {
        match self {
            KillDb::Sqlite { path, .. } => Box::new(
                sync_sqlite::SqliteStorage::open(path, sync_sqlite::SqliteConfig::default())
                    .unwrap_or_else(|e| panic!("reopen {path}: {e:?}")),
            ),
            KillDb::Postgres { schema } => {
                let config = sync_postgres::PostgresConfig {
                    schema: Some(schema.clone()),
                    ..sync_postgres::PostgresConfig::default()
                };
                Box::new(
                    sync_postgres::PostgresStorage::connect(&pg_url(), config)
                        .unwrap_or_else(|e| panic!("reconnect: {e:?}")),
                )
            }
            KillDb::Mariadb { db } => Box::new(
                sync_mariadb::MariadbStorage::connect_to(
                    db.url().clone(),
                    sync_mariadb::MariadbConfig::default(),
                )
                .unwrap_or_else(|e| panic!("reconnect: {e:?}")),
            ),
        }
    }

    /// Whether a bump is one transaction, so that a killed one leaves
    /// nothing of itself (SQLite, Postgres); MariaDB's DDL commits
    /// statement by statement and a killed bump is rolled forward.
    pub fn migrations_are_transactional(&self) -> bool {
        !matches!(self, KillDb::Mariadb { .. })
    }

    /// Where a migration stands, read around the API once no migrator
    /// holds the migration lock (a killed migrator's session has ended:
    /// nothing more of its migration can land); `None` where a bump is one
    /// transaction and the schema marker says it all.
    pub fn migration_state(&self) -> Option<MigrationState> {
        let KillDb::Mariadb { db } = self else {
            return None;
        };
        let mut conn = db
            .raw()
            .unwrap_or_else(|e| panic!("migration state: connect: {e:?}"));
        Some(mariadb::settled_migration_state(&mut conn))
    }
}

impl Drop for KillDb {
    fn drop(&mut self) {
        if let KillDb::Postgres { schema } = self {
            if let Ok(mut client) = postgres::Client::connect(&pg_url(), postgres::NoTls) {
                let _ =
                    client.batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"));
            }
        }
        // A scratch MariaDB database drops itself.
    }
}

fn admin(sql: &str) {
    let url = pg_url();
    let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap_or_else(|e| {
        panic!("PostgreSQL is not reachable at {url} ({e}); start it or set SYNCSTORE_PG_URL")
    });
    client
        .batch_execute(sql)
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}
