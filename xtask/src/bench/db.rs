//! Fresh databases per measurement: SQLite files in a temporary directory,
//! Postgres schemas `bench_<run>_<n>` on the test server, MariaDB databases
//! `bench_<run>_<n>` on the server of `--mariadb-url`. Each is removed
//! (file deleted, schema or database dropped) when its handle goes out of
//! scope, unless `SYNCSTORE_BENCH_KEEP` is set (then each is kept, and named
//! on stderr, for inspection: `EXPLAIN`, `EXPLAIN QUERY PLAN`).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use sync_core::{EnsureOptions, ServerStorage};
use sync_mariadb::{MariadbConfig, MariadbStorage, MariadbUrl};
use sync_postgres::{DistributeOptions, PostgresConfig, PostgresStorage};
use sync_sqlite::{SqliteConfig, SqliteStorage, Synchronous};

use super::fixture;
use super::mariadb_server;
use super::raw::RawClient;
use super::raw_mariadb::RawMariadb;
use super::raw_postgres::RawPostgres;
use super::raw_sqlite::RawSqlite;

/// Set to keep every database a run creates (see the module documentation).
const KEEP_ENV: &str = "SYNCSTORE_BENCH_KEEP";

/// The dialects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    Postgres,
    Mariadb,
}

impl Dialect {
    /// `sqlite` / `postgres` / `mariadb`.
    pub fn name(self) -> &'static str {
        match self {
            Dialect::Sqlite => "sqlite",
            Dialect::Postgres => "postgres",
            Dialect::Mariadb => "mariadb",
        }
    }
}

/// How each fresh Postgres schema is laid out when the server is a Citus
/// coordinator (`docs/scale-out.md`); ours and the raw client share it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CitusLayout {
    /// Created with `citus.enable_schema_based_sharding = on`: a
    /// distributed schema Citus places on one node.
    Schemas,
    /// Distributed by partition with this many shards before the first
    /// write (`PostgresStorage::distribute`); later tables follow.
    Rows { shard_count: u32 },
}

/// Where a dialect's databases are created.
#[derive(Debug)]
pub struct Env {
    pub dialect: Dialect,
    dir: Option<tempfile::TempDir>,
    pg_url: String,
    citus: Option<CitusLayout>,
    /// Page size of every SQLite file (`None`: SQLite's default).
    page_size: Option<u32>,
    run: String,
    next: AtomicU64,
}

impl Env {
    /// SQLite databases in a new temporary directory (under `base` when given).
    pub fn sqlite(base: Option<&Path>) -> Result<Self> {
        let dir = match base {
            Some(base) => tempfile::Builder::new()
                .prefix("syncstore-bench-")
                .tempdir_in(base)?,
            None => tempfile::Builder::new()
                .prefix("syncstore-bench-")
                .tempdir()?,
        };
        Ok(Self {
            dialect: Dialect::Sqlite,
            dir: Some(dir),
            pg_url: String::new(),
            citus: None,
            page_size: None,
            run: run_tag(),
            next: AtomicU64::new(0),
        })
    }

    /// Whether fresh Postgres schemas are laid out on a Citus coordinator.
    pub fn on_citus(&self) -> bool {
        self.citus.is_some()
    }

    /// Postgres schemas on the server at `url`, laid out by `citus` when
    /// the server is a Citus coordinator.
    pub fn postgres(url: &str, citus: Option<CitusLayout>) -> Self {
        Self {
            dialect: Dialect::Postgres,
            dir: None,
            pg_url: url.to_owned(),
            citus,
            page_size: None,
            run: run_tag(),
            next: AtomicU64::new(0),
        }
    }

    /// Databases on the MariaDB server at `url` (its credentials; its own
    /// database is only used to log in).
    pub fn mariadb(url: &str) -> Self {
        Self {
            dialect: Dialect::Mariadb,
            dir: None,
            pg_url: url.to_owned(),
            citus: None,
            page_size: None,
            run: run_tag(),
            next: AtomicU64::new(0),
        }
    }

    /// Every SQLite file created at `page_size` bytes a page (`None`:
    /// SQLite's default); other dialects ignore it.
    pub fn with_page_size(self, page_size: Option<u32>) -> Self {
        Self { page_size, ..self }
    }

    /// The server URL (Postgres, MariaDB; empty for SQLite).
    pub fn pg_url(&self) -> &str {
        &self.pg_url
    }

    /// A new empty database (SQLite `synchronous` as given; ignored on Postgres).
    pub fn fresh(&self, synchronous: Synchronous) -> Result<Db> {
        let n = self.next.fetch_add(1, Ordering::SeqCst);
        let location = match self.dialect {
            Dialect::Sqlite => {
                let dir = self.dir.as_ref().context("sqlite env without directory")?;
                let path = dir.path().join(format!("db-{n}.sqlite"));
                if let Some(size) = self.page_size {
                    // Whichever client opens the file first finds its page
                    // size fixed: switching to WAL writes the header.
                    let conn = rusqlite::Connection::open(&path)?;
                    conn.pragma_update(None, "page_size", size)?;
                    let _mode: String =
                        conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0))?;
                }
                Location::Sqlite(path)
            }
            Dialect::Postgres => {
                let schema = format!("bench_{}_{n}", self.run);
                let mut client = postgres::Client::connect(&self.pg_url, postgres::NoTls)?;
                let sharding = match self.citus {
                    Some(CitusLayout::Schemas) => "SET citus.enable_schema_based_sharding = on; ",
                    _ => "",
                };
                client.batch_execute(&format!("{sharding}CREATE SCHEMA \"{schema}\""))?;
                if let Some(CitusLayout::Rows { shard_count }) = self.citus {
                    let config = PostgresConfig {
                        schema: Some(schema.clone()),
                        ..PostgresConfig::default()
                    };
                    PostgresStorage::connect(&self.pg_url, config)?.distribute(
                        &DistributeOptions {
                            shard_count: Some(shard_count),
                        },
                    )?;
                }
                Location::Postgres {
                    url: self.pg_url.clone(),
                    schema,
                }
            }
            Dialect::Mariadb => {
                let database = format!("bench_{}_{n}", self.run);
                mariadb_server::create_database(&self.pg_url, &database)?;
                Location::Mariadb {
                    url: self.pg_url.clone(),
                    database,
                }
            }
        };
        Ok(Db {
            dialect: self.dialect,
            location,
            synchronous,
            owned: true,
        })
    }
}

fn run_tag() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{:x}{:x}", nanos & 0xff_ffff_ffff, std::process::id())
}

/// Where one database lives.
#[derive(Debug, Clone)]
pub enum Location {
    Sqlite(PathBuf),
    Postgres {
        url: String,
        schema: String,
    },
    /// A database on the server of `url` (whose own database is only used
    /// to log in).
    Mariadb {
        url: String,
        database: String,
    },
}

impl Location {
    /// The MariaDB storage's URL of a MariaDB location.
    fn mariadb_url(url: &str, database: &str) -> Result<MariadbUrl> {
        Ok(MariadbUrl::parse(url)?.with_database(database))
    }
}

/// One database; a fresh one is removed on drop.
#[derive(Debug)]
pub struct Db {
    pub dialect: Dialect,
    pub location: Location,
    pub synchronous: Synchronous,
    owned: bool,
}

impl Db {
    /// The database at an existing location (the child process); left in
    /// place on drop.
    pub fn at(location: Location, synchronous: Synchronous) -> Self {
        Db {
            dialect: match location {
                Location::Sqlite(_) => Dialect::Sqlite,
                Location::Postgres { .. } => Dialect::Postgres,
                Location::Mariadb { .. } => Dialect::Mariadb,
            },
            location,
            synchronous,
            owned: false,
        }
    }

    /// Opens the storage without ensuring a schema, the SQLite
    /// configuration adjusted by `tweak` (after `synchronous` is set).
    pub fn open_with(&self, tweak: fn(&mut SqliteConfig)) -> Result<Arc<dyn ServerStorage>> {
        Ok(match &self.location {
            Location::Sqlite(path) => {
                let mut config = SqliteConfig {
                    synchronous: self.synchronous,
                    ..SqliteConfig::default()
                };
                tweak(&mut config);
                Arc::new(SqliteStorage::open(path, config)?)
            }
            Location::Postgres { url, schema } => Arc::new(PostgresStorage::connect(
                url,
                PostgresConfig {
                    schema: Some(schema.clone()),
                    ..PostgresConfig::default()
                },
            )?),
            Location::Mariadb { url, database } => Arc::new(MariadbStorage::connect_to(
                Location::mariadb_url(url, database)?,
                MariadbConfig::default(),
            )?),
        })
    }

    /// A storage of this database that announces its commits and offers a
    /// commit feed (Postgres; on SQLite the same as [`Db::storage`]), the
    /// benchmark schema ensured.
    pub fn announcing_storage(&self) -> Result<Arc<dyn ServerStorage>> {
        let storage: Arc<dyn ServerStorage> = match &self.location {
            Location::Sqlite(_) | Location::Mariadb { .. } => return self.storage(false),
            Location::Postgres { url, schema } => Arc::new(PostgresStorage::connect(
                url,
                PostgresConfig {
                    schema: Some(schema.clone()),
                    announce_commits: true,
                    ..PostgresConfig::default()
                },
            )?),
        };
        storage.ensure_schema(&fixture::schema(false)?, &EnsureOptions::default())?;
        Ok(storage)
    }

    /// Opens the storage and ensures the benchmark schema.
    pub fn storage(&self, with_derived: bool) -> Result<Arc<dyn ServerStorage>> {
        self.storage_with(with_derived, |_| {})
    }

    /// [`Db::storage`] with the SQLite configuration adjusted by `tweak`.
    pub fn storage_with(
        &self,
        with_derived: bool,
        tweak: fn(&mut SqliteConfig),
    ) -> Result<Arc<dyn ServerStorage>> {
        let storage = self.open_with(tweak)?;
        storage.ensure_schema(&fixture::schema(with_derived)?, &EnsureOptions::default())?;
        Ok(storage)
    }

    /// The MariaDB storage of a MariaDB database, the benchmark schema
    /// ensured (the concrete type: its fault plan counts statements).
    pub fn mariadb_storage(&self) -> Result<Arc<MariadbStorage>> {
        let Location::Mariadb { url, database } = &self.location else {
            anyhow::bail!("not a MariaDB database");
        };
        let storage = MariadbStorage::connect_to(
            Location::mariadb_url(url, database)?,
            MariadbConfig::default(),
        )?;
        storage.ensure_schema(&fixture::schema(false)?, &EnsureOptions::default())?;
        Ok(Arc::new(storage))
    }

    /// A raw client on this database (the schema must have been ensured).
    pub fn raw(&self) -> Result<Box<dyn RawClient>> {
        Ok(match &self.location {
            Location::Sqlite(path) => {
                Box::new(RawSqlite::open(path, self.synchronous.as_pragma())?)
            }
            Location::Postgres { url, schema } => Box::new(RawPostgres::connect(url, schema)?),
            Location::Mariadb { url, database } => Box::new(RawMariadb::connect(url, database)?),
        })
    }

    /// A raw client for many concurrent writers: on SQLite it waits up to
    /// `busy` for the file's write lock (the default client gives up after 5 s).
    pub fn raw_waiting(&self, busy: std::time::Duration) -> Result<Box<dyn RawClient>> {
        Ok(match &self.location {
            Location::Sqlite(path) => Box::new(RawSqlite::open_waiting(
                path,
                self.synchronous.as_pragma(),
                busy,
            )?),
            Location::Postgres { .. } | Location::Mariadb { .. } => self.raw()?,
        })
    }

    /// A raw client connecting through another URL (the round-trip proxy).
    pub fn raw_via(&self, url: &str) -> Result<Box<dyn RawClient>> {
        match &self.location {
            Location::Postgres { schema, .. } => Ok(Box::new(RawPostgres::connect(url, schema)?)),
            Location::Sqlite(_) | Location::Mariadb { .. } => self.raw(),
        }
    }

    /// The storage connecting through another URL (the round-trip proxy).
    pub fn storage_via(&self, url: &str) -> Result<Arc<dyn ServerStorage>> {
        match &self.location {
            Location::Postgres { schema, .. } => {
                let storage = PostgresStorage::connect(
                    url,
                    PostgresConfig {
                        schema: Some(schema.clone()),
                        ..PostgresConfig::default()
                    },
                )?;
                storage.ensure_schema(&fixture::schema(false)?, &EnsureOptions::default())?;
                Ok(Arc::new(storage))
            }
            Location::Sqlite(_) | Location::Mariadb { .. } => self.storage(false),
        }
    }

    /// Copies a SQLite database (template seeding); checkpoints the WAL first.
    pub fn copy_sqlite_to(&self, target: &Db) -> Result<()> {
        let (Location::Sqlite(from), Location::Sqlite(to)) = (&self.location, &target.location)
        else {
            anyhow::bail!("copy_sqlite_to needs two SQLite databases");
        };
        let conn = rusqlite::Connection::open(from)?;
        // Only the last connection to close checkpoints on its own, and a
        // pooled one may still be closing on the pool's thread: copy the WAL
        // into the file here, and refuse a copy that would miss some of it.
        let (busy, wal, copied): (i64, i64, i64) =
            conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |row| {
                Ok((row.get(0)?, row.get(1)?, row.get(2)?))
            })?;
        anyhow::ensure!(
            busy == 0 && wal == copied,
            "checkpoint of {from:?} before copying it: busy {busy}, {copied} of {wal} WAL pages copied"
        );
        drop(conn);
        std::fs::copy(from, to).with_context(|| format!("copying {from:?}"))?;
        Ok(())
    }

    /// A copy of this database's scan tables (`todos` and `sync_row_scopes`)
    /// laid out as the reference server's release 0.15.48 creates them, for
    /// W3's `reference-in own-layout` rows; removed on drop like any fresh
    /// database. Postgres: a schema `<schema>_ref` with the two tables in the
    /// reference's DDL — default collation, the scope index's primary key
    /// and no `sync_row_scopes_by_row` (which the reference adds later) —
    /// autovacuum off on both, so the copy stays unanalyzed until W3
    /// analyzes it. SQLite: a file beside this one whose `sync_row_scopes`
    /// is a rowid table with its primary key as a separate index (this
    /// storage's is `WITHOUT ROWID`); `todos` is the same in both. MariaDB:
    /// `None` (the reference has no MariaDB dialect).
    pub fn reference_layout_copy(&self) -> Result<Option<Db>> {
        let location = match &self.location {
            Location::Sqlite(path) => {
                let mut name = path.clone().into_os_string();
                name.push("-reference");
                let copy = PathBuf::from(name);
                let conn = rusqlite::Connection::open(&copy)?;
                let _mode: String =
                    conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0))?;
                conn.execute("ATTACH DATABASE ?1 AS src", [path.to_string_lossy()])?;
                let todos: String = conn.query_row(
                    "SELECT sql FROM src.sqlite_schema WHERE type = 'table' AND name = 'todos'",
                    [],
                    |r| r.get(0),
                )?;
                conn.execute_batch(&format!(
                    "BEGIN; {todos}; \
                     CREATE TABLE sync_row_scopes(partition TEXT NOT NULL, tbl TEXT NOT NULL, \
                       var TEXT NOT NULL, value TEXT NOT NULL, row_id TEXT NOT NULL, \
                       PRIMARY KEY(partition, tbl, var, value, row_id)); \
                     INSERT INTO todos SELECT * FROM src.todos; \
                     INSERT INTO sync_row_scopes SELECT partition, tbl, var, value, row_id \
                       FROM src.sync_row_scopes; \
                     COMMIT; DETACH DATABASE src"
                ))?;
                Location::Sqlite(copy)
            }
            Location::Postgres { url, schema } => {
                let copy = format!("{schema}_ref");
                let mut client = postgres::Client::connect(url, postgres::NoTls)?;
                client.batch_execute(&format!(
                    "BEGIN; CREATE SCHEMA \"{copy}\"; \
                     CREATE TABLE \"{copy}\".sync_row_scopes(partition TEXT NOT NULL, \
                       tbl TEXT NOT NULL, var TEXT NOT NULL, value TEXT NOT NULL, \
                       row_id TEXT NOT NULL, PRIMARY KEY(partition, tbl, var, value, row_id)) \
                       WITH (autovacuum_enabled = off); \
                     CREATE TABLE \"{copy}\".todos (LIKE \"{schema}\".todos) \
                       WITH (autovacuum_enabled = off); \
                     ALTER TABLE \"{copy}\".todos \
                       ALTER COLUMN _sync_partition TYPE text COLLATE \"default\", \
                       ALTER COLUMN _sync_row_id TYPE text COLLATE \"default\", \
                       ADD PRIMARY KEY (_sync_partition, _sync_row_id); \
                     INSERT INTO \"{copy}\".todos SELECT * FROM \"{schema}\".todos; \
                     INSERT INTO \"{copy}\".sync_row_scopes \
                       SELECT partition, tbl, var, value, row_id FROM \"{schema}\".sync_row_scopes; \
                     COMMIT"
                ))?;
                Location::Postgres {
                    url: url.clone(),
                    schema: copy,
                }
            }
            Location::Mariadb { .. } => return Ok(None),
        };
        Ok(Some(Db {
            dialect: self.dialect,
            location,
            synchronous: self.synchronous,
            owned: true,
        }))
    }

    /// Runs a scalar `SELECT` (verification and setup checks).
    pub fn count(&self, sql: &str) -> Result<i64> {
        match &self.location {
            Location::Sqlite(path) => {
                let conn = rusqlite::Connection::open(path)?;
                Ok(conn.query_row(sql, [], |r| r.get(0))?)
            }
            Location::Postgres { url, schema } => {
                let mut client = postgres::Client::connect(url, postgres::NoTls)?;
                client.batch_execute(&format!("SET search_path TO \"{schema}\""))?;
                Ok(client.query_one(sql, &[])?.try_get(0)?)
            }
            Location::Mariadb { url, database } => {
                use mysql::prelude::Queryable;
                let mut conn = mysql::Conn::new(mariadb_server::opts(url, Some(database))?)?;
                let value: Option<Option<i64>> = conn.query_first(sql)?;
                value
                    .flatten()
                    .with_context(|| format!("{sql} returned no value"))
            }
        }
    }

    fn remove(&self) {
        if std::env::var_os(KEEP_ENV).is_some() {
            match &self.location {
                Location::Sqlite(path) => eprintln!("bench: kept {}", path.display()),
                Location::Postgres { schema, .. } => eprintln!("bench: kept schema {schema}"),
                Location::Mariadb { database, .. } => {
                    eprintln!("bench: kept database {database}");
                }
            }
            return;
        }
        match &self.location {
            Location::Sqlite(path) => {
                for suffix in ["", "-wal", "-shm"] {
                    let mut p = path.clone().into_os_string();
                    p.push(suffix);
                    let _ = std::fs::remove_file(PathBuf::from(p));
                }
            }
            Location::Postgres { url, schema } => {
                if let Ok(mut client) = postgres::Client::connect(url, postgres::NoTls) {
                    let _ = client
                        .batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"));
                }
            }
            Location::Mariadb { url, database } => mariadb_server::drop_database(url, database),
        }
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        if self.owned {
            self.remove();
        }
    }
}
