//! Scratch storages: fresh, throwaway databases of the dialect a `--db` URL
//! names, for `serve --test-control` instances.
//!
//! - SQLite: one file per storage in a temporary directory owned by this
//!   process (removed with the area).
//! - Postgres: one schema per storage in the URL's database, named
//!   `syncstore_test_<pid>_<n>` (the URL's own `schema` parameter is not
//!   used), dropped when discarded.
//! - MariaDB: one database per storage on the URL's server, named as the
//!   Postgres schemas (the URL's own database is only where the URL logs
//!   in), dropped when discarded.
//!
//! A copy is a whole storage copied at one instant, then opened as any
//! other: SQLite `VACUUM INTO` a new file; Postgres and MariaDB a new
//! schema or database brought to the same schema version by
//! `ensure_schema` (its tables, indexes, functions and triggers made the
//! storage's own way), then the rows of every table it left empty copied
//! in one transaction. Any other dialect registered with its own opener
//! has no scratch area (`sync.cli.control_unsupported`).

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use sync_core::{Clock, CompiledSchema, EnsureOptions, ServerStorage};
use sync_mariadb::{MariadbConfig, MariadbStorage, MariadbUrl};
use sync_postgres::{PostgresConfig, PostgresStorage};
use sync_sqlite::{SqliteConfig, SqliteStorage};

use crate::error::{CliCode, CliError, CliResult};
use crate::url::{create_schema, opening, unreachable, DatabaseUrl};

/// Connections of one Postgres or MariaDB scratch storage's pool:
/// instances are many and small, the server's connection limit is shared.
const SERVER_POOL_SIZE: u32 = 4;
/// Readers of one SQLite scratch storage.
const SQLITE_READERS: u32 = 2;

/// Where scratch storages are made.
#[derive(Debug)]
pub struct ScratchArea {
    base: Base,
    prefix: String,
    counter: AtomicU64,
}

#[derive(Debug)]
enum Base {
    Sqlite { dir: tempfile::TempDir },
    Postgres { url: String },
    Mariadb { server: MariadbUrl },
}

/// One scratch storage's location (its file, its schema or its database).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScratchDb {
    /// A SQLite file.
    File(PathBuf),
    /// A Postgres schema.
    Schema(String),
    /// A MariaDB database.
    Database(String),
}

fn io(what: &str, error: &std::io::Error) -> CliError {
    CliError::new(CliCode::Io)
        .detail("path", what)
        .detail("reason", error.kind().to_string())
}

impl ScratchArea {
    /// The scratch area of `url`'s dialect.
    pub fn new(url: &DatabaseUrl) -> CliResult<Self> {
        let base = match url {
            DatabaseUrl::Sqlite { .. } => Base::Sqlite {
                dir: tempfile::Builder::new()
                    .prefix("syncstore-test-")
                    .tempdir()
                    .map_err(|e| io("temporary directory", &e))?,
            },
            DatabaseUrl::Postgres { url, .. } => Base::Postgres { url: url.clone() },
            DatabaseUrl::Registered { dialect, url, .. } if *dialect == sync_mariadb::DIALECT => {
                Base::Mariadb {
                    server: MariadbUrl::parse(url).map_err(opening)?,
                }
            }
            DatabaseUrl::Registered { .. } => {
                return Err(CliError::new(CliCode::ControlUnsupported)
                    .detail("reason", "dialect_without_scratch_storage"))
            }
        };
        Ok(Self {
            base,
            prefix: format!("syncstore_test_{}", std::process::id()),
            counter: AtomicU64::new(0),
        })
    }

    /// A location no storage of this area has used.
    pub fn fresh(&self) -> ScratchDb {
        let n = self.counter.fetch_add(1, Ordering::SeqCst) + 1;
        let name = format!("{}_{n}", self.prefix);
        match &self.base {
            Base::Sqlite { dir } => ScratchDb::File(dir.path().join(format!("{name}.db"))),
            Base::Postgres { .. } => ScratchDb::Schema(name),
            Base::Mariadb { .. } => ScratchDb::Database(name),
        }
    }

    /// Opens (creating when absent) the storage at `db`, ensured at
    /// `schema`, with `clock` as its time source.
    pub fn open(
        &self,
        db: &ScratchDb,
        schema: &CompiledSchema,
        clock: Arc<dyn Clock>,
    ) -> CliResult<Arc<dyn ServerStorage>> {
        let storage: Arc<dyn ServerStorage> = match (&self.base, db) {
            (Base::Sqlite { .. }, ScratchDb::File(path)) => {
                let config = SqliteConfig {
                    readers: SQLITE_READERS,
                    ..SqliteConfig::with_clock(clock)
                };
                Arc::new(SqliteStorage::open(path, config).map_err(|e| unreachable(&e))?)
            }
            (Base::Postgres { url }, ScratchDb::Schema(name)) => {
                create_schema(url, name)?;
                let config = PostgresConfig {
                    schema: Some(name.clone()),
                    pool_size: SERVER_POOL_SIZE,
                    clock,
                    ..PostgresConfig::default()
                };
                Arc::new(PostgresStorage::connect(url, config).map_err(|e| unreachable(&e))?)
            }
            (Base::Mariadb { server }, ScratchDb::Database(name)) => {
                let url = sync_mariadb::databases::create_database(server, name)
                    .map_err(|e| unreachable(&e))?;
                let config = MariadbConfig {
                    pool_size: SERVER_POOL_SIZE,
                    clock,
                    ..MariadbConfig::default()
                };
                Arc::new(MariadbStorage::connect_to(url, config).map_err(|e| unreachable(&e))?)
            }
            _ => return Err(mismatch()),
        };
        storage.ensure_schema(schema, &EnsureOptions::default())?;
        Ok(storage)
    }

    /// A new storage holding exactly what `from` holds now (`schema` is
    /// the version both are at).
    pub fn copy(
        &self,
        from: &ScratchDb,
        schema: &CompiledSchema,
        clock: Arc<dyn Clock>,
    ) -> CliResult<ScratchDb> {
        let to = self.fresh();
        let copied = match (&self.base, from, &to) {
            (Base::Sqlite { .. }, ScratchDb::File(source), ScratchDb::File(target)) => {
                copy_sqlite(source, target)
            }
            (Base::Postgres { url }, ScratchDb::Schema(source), ScratchDb::Schema(target)) => {
                // The target's tables, indexes and triggers are made the
                // storage's own way; only rows are copied.
                drop(self.open(&to, schema, clock)?);
                copy_postgres(url, source, target)
            }
            (
                Base::Mariadb { server },
                ScratchDb::Database(source),
                ScratchDb::Database(target),
            ) => {
                drop(self.open(&to, schema, clock)?);
                sync_mariadb::databases::copy_rows(server, source, target)
                    .map_err(|e| unreachable(&e))
            }
            _ => Err(mismatch()),
        };
        if copied.is_err() {
            self.discard(&to);
        }
        copied.map(|()| to)
    }

    /// Removes the storage at `db` (its handles must be dropped first).
    /// Best effort: a failure is logged, never returned.
    pub fn discard(&self, db: &ScratchDb) {
        match (&self.base, db) {
            (Base::Sqlite { .. }, ScratchDb::File(path)) => {
                for suffix in ["", "-wal", "-shm", "-journal"] {
                    let mut file = path.clone().into_os_string();
                    file.push(suffix);
                    match std::fs::remove_file(&file) {
                        Ok(()) => {}
                        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
                        Err(error) => tracing::warn!(%error, "a scratch file was not removed"),
                    }
                }
            }
            (Base::Postgres { url }, ScratchDb::Schema(name)) => {
                if let Err(error) = drop_schema(url, name) {
                    tracing::warn!(error = %error, "a scratch schema was not dropped");
                }
            }
            (Base::Mariadb { server }, ScratchDb::Database(name)) => {
                if let Err(error) = sync_mariadb::databases::drop_database(server, name) {
                    tracing::warn!(error = %error, "a scratch database was not dropped");
                }
            }
            _ => tracing::warn!("a scratch location of another dialect was not removed"),
        }
    }
}

fn mismatch() -> CliError {
    CliError::new(CliCode::ControlInvalidRequest).detail("reason", "scratch_location")
}

fn copy_sqlite(source: &std::path::Path, target: &std::path::Path) -> CliResult<()> {
    let failed = |e: rusqlite::Error| {
        CliError::new(CliCode::Io)
            .detail("path", "backup")
            .detail("reason", e.to_string())
    };
    let connection = rusqlite::Connection::open_with_flags(
        source,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(failed)?;
    let target = target.to_str().ok_or_else(|| {
        CliError::new(CliCode::Io)
            .detail("path", "backup")
            .detail("reason", "not_utf8")
    })?;
    connection
        .execute("VACUUM INTO ?1", [target])
        .map(drop)
        .map_err(failed)
}

fn postgres_client(url: &str) -> CliResult<postgres::Client> {
    let config: postgres::Config = url
        .parse()
        .map_err(|_| CliError::new(CliCode::InvalidUrl).detail("reason", "unparsable"))?;
    config
        .connect(postgres::NoTls)
        .map_err(|error| unreachable(&sync_postgres::backend_error(error)))
}

fn pg_failed(error: postgres::Error) -> CliError {
    unreachable(&sync_postgres::backend_error(error))
}

/// Copies every row of `source`'s tables into `target`'s, in one
/// transaction (both schemas hold the same tables, `target` freshly
/// ensured). Rows go in as they are, so the guard and fence triggers see
/// what they once accepted.
fn copy_postgres(url: &str, source: &str, target: &str) -> CliResult<()> {
    let mut client = postgres_client(url)?;
    let mut tx = client.transaction().map_err(pg_failed)?;
    let tables: Vec<String> = tx
        .query(
            "SELECT c.relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE n.nspname = $1 AND c.relkind IN ('r', 'p') ORDER BY c.relname",
            &[&source],
        )
        .map_err(pg_failed)?
        .iter()
        .map(|row| row.get(0))
        .collect();
    let (s, t) = (
        sync_schema::quote_ident(source),
        sync_schema::quote_ident(target),
    );
    for table in &tables {
        let columns: Vec<String> = tx
            .query(
                "SELECT quote_ident(a.attname::text) FROM pg_attribute a \
                 JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace \
                 WHERE n.nspname = $1 AND c.relname = $2 AND a.attnum > 0 AND NOT a.attisdropped \
                 ORDER BY a.attnum",
                &[&source, table],
            )
            .map_err(pg_failed)?
            .iter()
            .map(|row| row.get(0))
            .collect();
        let list = columns.join(", ");
        let name = sync_schema::quote_ident(table);
        // A table `ensure_schema` filled (the schema marker) holds what the
        // source's holds: both were ensured at the same schema.
        tx.batch_execute(&format!(
            "INSERT INTO {t}.{name} ({list}) SELECT {list} FROM {s}.{name} \
             WHERE NOT EXISTS (SELECT 1 FROM {t}.{name})"
        ))
        .map_err(pg_failed)?;
    }
    tx.commit().map_err(pg_failed)
}

fn drop_schema(url: &str, name: &str) -> CliResult<()> {
    let mut client = postgres_client(url)?;
    client
        .batch_execute(&format!(
            "DROP SCHEMA IF EXISTS {} CASCADE",
            sync_schema::quote_ident(name)
        ))
        .map_err(pg_failed)
}
