//! The writer pool (exactly one connection) and the reader pool, and the
//! four ways pool-level methods use them (`dialects.md` §2.1).
//!
//! - [`Pools::read`]: one statement (or independent statements) on a reader;
//! - [`Pools::read_snapshot`]: several reads in one deferred `BEGIN`;
//! - [`Pools::write_once`]: one autocommit statement on the writer;
//! - [`Pools::write`]: `BEGIN IMMEDIATE … COMMIT` on the writer.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use r2d2::{ManageConnection, Pool, PooledConnection};
use r2d2_sqlite::SqliteConnectionManager;
use rusqlite::{Connection, OpenFlags};
use sync_core::{BackendCause, Error, ErrorCode, Result};

use crate::bootstrap;
use crate::companions::{self, FileStamp};
use crate::config::{SqliteConfig, Synchronous};
use crate::errors::{pool_error, DbResultExt};
use crate::file_state;
use crate::seam;
use crate::wal::{Checkpointer, WalCheckpointReport};
use crate::writer::{AloneWriter, Seat, Writer};

/// Capacity of each connection's prepared-statement cache.
const STATEMENT_CACHE_CAPACITY: usize = 256;

/// Minimum SQLite version: `RETURNING` and `DROP COLUMN` (3.35.0).
const MIN_SQLITE_VERSION: i32 = 3_035_000;

/// A connection manager that reports a connection still inside a
/// transaction as broken, so r2d2 discards it instead of handing an open
/// transaction to the next user (a failed `ROLLBACK` leaves exactly that).
///
/// The writer's manager also reports a connection whose `PRAGMA
/// synchronous` is not the configured level as broken: a soft write
/// ([`Pools::write_once_soft`]) lowers it for one statement, and a failed
/// restore must not leave later pushes without their `fsync`.
pub(crate) struct Manager {
    inner: SqliteConnectionManager,
    /// The `PRAGMA synchronous` level every checked-in writer must have.
    synchronous: Option<i64>,
}

impl ManageConnection for Manager {
    type Connection = Connection;
    type Error = rusqlite::Error;

    fn connect(&self) -> std::result::Result<Connection, rusqlite::Error> {
        self.inner.connect()
    }

    fn is_valid(&self, conn: &mut Connection) -> std::result::Result<(), rusqlite::Error> {
        self.inner.is_valid(conn)
    }

    fn has_broken(&self, conn: &mut Connection) -> bool {
        !conn.is_autocommit()
            || self.synchronous.is_some_and(|level| {
                conn.query_row("PRAGMA synchronous", [], |row| row.get::<_, i64>(0))
                    .ok()
                    .is_none_or(|found| found != level)
            })
    }
}

impl std::fmt::Debug for Manager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Manager").finish_non_exhaustive()
    }
}

/// A pooled connection.
pub(crate) type Conn = PooledConnection<Manager>;

/// The two pools of one storage instance.
#[derive(Debug)]
pub(crate) struct Pools {
    writer: Arc<Writer>,
    readers: Pool<Manager>,
    path: PathBuf,
    /// The database file as SQLite resolved it (differs from `path` for a
    /// URI file name).
    file: PathBuf,
    /// Opened by [`Pools::open_read_only`]: every connection is `query_only`.
    read_only: bool,
    /// Opened `immutable` (no lock, no `-wal`/`-shm`): the file as it was
    /// then, which every read checks it still is.
    immutable: Option<FileStamp>,
    /// The lowered level of [`Pools::write_once_soft`], with the configured
    /// one to restore; `None` when both are the same.
    soft: Option<(Synchronous, Synchronous)>,
}

impl Pools {
    /// Opens both pools on `path`: checks the SQLite version and runs the
    /// base DDL on a writer-configured connection first, so a bad path or
    /// an old library fails immediately instead of after the pool timeout.
    ///
    /// Only this first connection may create the file; every later one
    /// opens it without `CREATE`, so a file unlinked under the storage is
    /// never silently replaced by an empty one. A file that cannot be
    /// opened says why in `details.cause` (`directory_missing`,
    /// `read_only`, `corrupt`, …). A missing file whose `-wal` or `-shm`
    /// still stands is `sync.storage.stranded_journal`, never created.
    pub(crate) fn open(path: &Path, config: &SqliteConfig) -> Result<Self> {
        companions::refuse_stranded(path)?;
        let first = writer_manager(path, config, true)
            .connect()
            .db()
            .map_err(|e| file_open_error(path, e))?;
        check_version(&first)?;
        bootstrap::run(&first).map_err(|e| file_open_error(path, e))?;
        let file = resolved_file(&first, path);
        drop(first);
        let writer_manager = writer_manager(path, config, false);

        let pool = Pool::builder()
            .max_size(1)
            .connection_timeout(positive(config.writer_wait_ms))
            .test_on_check_out(false)
            .build(writer_manager)
            .map_err(Error::backend)?;
        let checkpointer = match config.wal_checkpoints {
            Some(wal) => Some(Checkpointer::start(
                &file,
                Duration::from_millis(config.busy_timeout_ms),
                wal,
            )?),
            None => None,
        };
        let writer = Arc::new(Writer::new(
            pool,
            file.clone(),
            positive(config.writer_wait_ms),
            config.group_commit,
            checkpointer,
        ));
        let readers = Pool::builder()
            .max_size(config.readers.max(1))
            .min_idle(Some(0))
            .connection_timeout(positive(config.writer_wait_ms))
            .test_on_check_out(false)
            .build(reader_manager(path, config))
            .map_err(Error::backend)?;
        Ok(Self {
            writer,
            readers,
            path: path.to_path_buf(),
            file,
            read_only: false,
            immutable: None,
            soft: (config.client_record_synchronous.level() < config.synchronous.level())
                .then_some((config.client_record_synchronous, config.synchronous)),
        })
    }

    /// Opens both pools read-only on an existing file: `SQLITE_OPEN_READ_ONLY`
    /// (never creates the file, never runs DDL, never switches the journal
    /// mode) and `query_only` on every connection. A missing file or a
    /// database without `sync_schema_meta` is
    /// `sync.storage.not_a_sync_database`; a missing file whose `-wal` or
    /// `-shm` stands is `sync.storage.stranded_journal`.
    ///
    /// A file with no `-wal`, `-shm` or `-journal` beside it has no
    /// connection open on it in WAL mode: it is opened `immutable`, which
    /// creates no file (a read-only directory works, nothing is left
    /// behind), and every read then checks that no writer has opened or
    /// changed the file since (else `sync.storage.busy`, `reason =
    /// writer_opened`). With any of them present a writer may be live: the
    /// file is opened read-only through its WAL, which sees the writer's
    /// commits consistently.
    pub(crate) fn open_read_only(path: &Path, config: &SqliteConfig) -> Result<Self> {
        companions::refuse_stranded(path)?;
        // A missing file in an existing directory is simply not a database
        // yet; a missing directory is left to SQLite to report.
        let directory_exists = path
            .parent()
            .is_none_or(|dir| dir.as_os_str().is_empty() || dir.is_dir());
        if !path.exists() && directory_exists {
            return Err(Error::new(ErrorCode::NotASyncDatabase).detail("reason", "no_file"));
        }
        let immutable = (!companions::journal_present(path))
            .then(|| companions::immutable_uri(path).zip(FileStamp::of(path)))
            .flatten();
        let (target, stamp) = match immutable {
            Some((uri, stamp)) => (PathBuf::from(uri), Some(stamp)),
            None => (path.to_path_buf(), None),
        };
        let first = read_only_manager(&target, config, String::new())
            .connect()
            .db()
            .map_err(|e| file_open_error(path, e))?;
        check_version(&first)?;
        let tables: i64 = first
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'sync_schema_meta'",
                [],
                |row| row.get(0),
            )
            .db()?;
        if tables == 0 {
            return Err(Error::new(ErrorCode::NotASyncDatabase).detail("reason", "no_tables"));
        }
        let overlay = bootstrap::read_only_overlay(&first)?;
        let file = resolved_file(&first, path);
        drop(first);
        let manager = || read_only_manager(&target, config, overlay.clone());
        let build = |size: u32| {
            Pool::builder()
                .max_size(size)
                .min_idle(Some(0))
                .connection_timeout(positive(config.writer_wait_ms))
                .test_on_check_out(false)
                .build(manager())
                .map_err(Error::backend)
        };
        let writer = Arc::new(Writer::new(
            build(1)?,
            file.clone(),
            positive(config.writer_wait_ms),
            crate::config::GroupCommit::OFF,
            None,
        ));
        Ok(Self {
            writer,
            readers: build(config.readers.max(1))?,
            path: path.to_path_buf(),
            file,
            read_only: true,
            immutable: stamp,
            soft: None,
        })
    }

    /// Whether the pools were opened read-only, for inspection.
    pub(crate) fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// The database file.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Takes the writer alone (waits up to `writer_wait_ms` for it and for
    /// an open commit group to end, then `busy`). Refuses with
    /// `cause = moved` when the database file was moved or unlinked, and
    /// with `cause = read_only` when it cannot be written.
    pub(crate) fn writer(&self) -> Result<AloneWriter<'_>> {
        self.writer.alone()
    }

    /// Takes the writer for a transaction from `begin`: opens a new SQLite
    /// transaction or joins the open commit group.
    pub(crate) fn member(&self) -> Result<Seat> {
        self.writer.member()
    }

    /// Waits until `members` transactions and `alone` pool-level writers
    /// queue for the writer.
    pub(crate) fn await_queued(&self, members: usize, alone: usize) -> Result<()> {
        self.writer.await_queued(members, alone)
    }

    /// Runs one pass of the background WAL checkpointer now (after the
    /// passes already asked for); `None` without one.
    pub(crate) fn run_wal_checkpoint(&self) -> Result<Option<WalCheckpointReport>> {
        self.writer
            .checkpointer()
            .map(Checkpointer::run_now)
            .transpose()
    }

    /// Checks out a reader; refuses with `cause = moved` like
    /// [`Pools::writer`] rather than read a file nobody writes any more.
    pub(crate) fn reader(&self) -> Result<Conn> {
        file_state::refuse_if_missing(&self.file)?;
        self.refuse_if_changed()?;
        let conn = self.readers.get().map_err(pool_error)?;
        file_state::refuse_if_moved(&conn)?;
        Ok(conn)
    }

    /// Runs `f` on a reader connection (committed state only).
    pub(crate) fn read<T>(&self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        let conn = self.reader()?;
        let value = f(&conn)?;
        self.refuse_if_changed()?;
        Ok(value)
    }

    /// Runs `f` on a reader inside one deferred `BEGIN` (one snapshot).
    pub(crate) fn read_snapshot<T>(&self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        let conn = self.reader()?;
        let value = in_snapshot(&conn, f)?;
        self.refuse_if_changed()?;
        Ok(value)
    }

    /// On an `immutable` open: refuses once a writer has opened or changed
    /// the file (what was read may be inconsistent).
    fn refuse_if_changed(&self) -> Result<()> {
        match &self.immutable {
            Some(stamp) => stamp.refuse_if_changed(&self.file),
            None => Ok(()),
        }
    }

    /// Runs `f` inside one deferred `BEGIN` (one snapshot) on the writer
    /// when it is idle — nobody holds it or waits for it — else on a
    /// reader, as [`Pools::read_snapshot`]. A reader drops its page cache
    /// whenever the database changed since its last read, so after every
    /// push it reads each page again from the file; the writer's cache
    /// stays current across its own commits. Never waits for the writer,
    /// and gives it back before returning.
    pub(crate) fn read_snapshot_warm<T>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T>,
    ) -> Result<T> {
        match self.writer.try_alone() {
            Some(writer) => {
                self.refuse_if_changed()?;
                let value = in_snapshot(&writer, f)?;
                self.refuse_if_changed()?;
                Ok(value)
            }
            None => self.read_snapshot(f),
        }
    }

    /// Runs `f` on the writer in autocommit mode (one atomic statement).
    pub(crate) fn write_once<T>(&self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        let conn = self.writer()?;
        let result = f(&conn);
        conn.committed();
        result
    }

    /// [`Pools::write_once`] for a write of soft state (a client record of
    /// the same actor refreshed): the statement commits at
    /// `SqliteConfig::client_record_synchronous`, then the writer's own level
    /// is restored before the connection goes back to the pool. A restore
    /// that fails is an error, and the pool discards the connection.
    pub(crate) fn write_once_soft<T>(&self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        let Some((soft, configured)) = self.soft else {
            return self.write_once(f);
        };
        let conn = self.writer()?;
        set_synchronous(&conn, soft)?;
        let result = f(&conn);
        conn.committed();
        // The write's own error first; a failed restore after it still
        // makes the pool discard the connection (`Manager::has_broken`).
        let restored = set_synchronous(&conn, configured);
        let value = result?;
        restored?;
        Ok(value)
    }

    /// Runs `f` on the writer inside `BEGIN IMMEDIATE`; commits on `Ok`,
    /// rolls back on `Err`.
    pub(crate) fn write<T>(&self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        self.write_decide(|conn| f(conn).map(Finish::Commit))
    }

    /// [`Pools::write`] for DDL: temporary storage in files meanwhile
    /// ([`with_temp_files`]).
    pub(crate) fn write_ddl<T>(&self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        let conn = self.writer()?;
        with_temp_files(&conn, || {
            begin_immediate(&conn)?;
            match f(&conn) {
                Ok(value) => {
                    commit(&conn)?;
                    conn.committed();
                    Ok(value)
                }
                Err(error) => {
                    rollback(&conn);
                    Err(error)
                }
            }
        })
    }

    /// Like [`Pools::write`], but `f` decides whether to commit or roll back.
    pub(crate) fn write_decide<T>(
        &self,
        f: impl FnOnce(&Connection) -> Result<Finish<T>>,
    ) -> Result<T> {
        let conn = self.writer()?;
        begin_immediate(&conn)?;
        match f(&conn) {
            Ok(Finish::Commit(value)) => {
                commit(&conn)?;
                conn.committed();
                Ok(value)
            }
            Ok(Finish::Rollback(value)) => {
                rollback(&conn);
                Ok(value)
            }
            Err(error) => {
                rollback(&conn);
                Err(error)
            }
        }
    }
}

/// Runs `f` with the writer's temporary storage in files, SQLite's default,
/// then back in memory: for DDL, whose sorts (`CREATE INDEX` on a table of
/// any size) must spill to disk, not to memory. Called outside a
/// transaction (SQLite refuses to switch inside one). A restore that fails
/// leaves the writer on files, only slower: it is not the DDL's error.
pub(crate) fn with_temp_files<T>(conn: &Connection, f: impl FnOnce() -> Result<T>) -> Result<T> {
    exec(conn, TEMP_IN_FILES)?;
    let result = f();
    let _restored = exec(conn, TEMP_IN_MEMORY);
    result
}

/// The writer's temporary storage outside DDL (set by its manager).
const TEMP_IN_MEMORY: &str = "PRAGMA temp_store = MEMORY";
/// The writer's temporary storage during DDL.
const TEMP_IN_FILES: &str = "PRAGMA temp_store = FILE";

/// How a [`Pools::write_decide`] body ends its transaction.
#[derive(Debug)]
pub(crate) enum Finish<T> {
    /// Commit and return the value.
    Commit(T),
    /// Roll back (nothing was written) and return the value.
    Rollback(T),
}

/// Executes one cached parameterless statement.
pub(crate) fn exec(conn: &Connection, sql: &str) -> Result<()> {
    seam::exec(conn, sql).db()
}

/// `BEGIN IMMEDIATE`: the database-wide write lock (waits `busy_timeout`).
pub(crate) fn begin_immediate(conn: &Connection) -> Result<()> {
    exec(conn, "BEGIN IMMEDIATE")
}

/// `COMMIT`; on failure the transaction is rolled back (its own error is
/// ignored) and the `COMMIT` error returned. A database file moved or
/// unlinked since the transaction began is refused (`cause = moved`) and
/// rolled back instead: nothing is acknowledged into a file nobody will
/// open again.
pub(crate) fn commit(conn: &Connection) -> Result<()> {
    if let Err(error) = file_state::refuse_if_moved(conn) {
        rollback(conn);
        return Err(error);
    }
    match exec(conn, "COMMIT") {
        Ok(()) => Ok(()),
        Err(error) => {
            rollback(conn);
            Err(error)
        }
    }
}

/// Runs reads `f` on `conn` inside one deferred `BEGIN` (one snapshot).
/// They changed nothing: ending with `ROLLBACK` is equivalent and cannot
/// fail on a busy commit; a connection it leaves inside the transaction is
/// discarded by the pool ([`Manager::has_broken`]).
fn in_snapshot<T>(conn: &Connection, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
    exec(conn, "BEGIN")?;
    let result = f(conn);
    let _ = exec(conn, "ROLLBACK");
    result
}

/// `ROLLBACK`, ignoring failures: a connection left inside a transaction is
/// discarded by the pool ([`Manager::has_broken`]).
pub(crate) fn rollback(conn: &Connection) {
    if !conn.is_autocommit() {
        let _ = conn.execute_batch("ROLLBACK");
    }
}

fn positive(ms: u64) -> Duration {
    Duration::from_millis(ms.max(1))
}

/// The database file itself as SQLite resolved it (a URI file name
/// differs from the path it was opened with).
fn resolved_file(conn: &Connection, path: &Path) -> PathBuf {
    conn.path()
        .filter(|p| !p.is_empty())
        .map_or_else(|| path.to_path_buf(), PathBuf::from)
}

/// Open flags: read-write, URI file names, and `CREATE` only when asked.
fn open_flags(create: bool) -> OpenFlags {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_URI
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    if create {
        flags | OpenFlags::SQLITE_OPEN_CREATE
    } else {
        flags
    }
}

/// Refines the cause of an error opening the file at `path`: a missing
/// directory, or a directory or file that cannot be written.
fn file_open_error(path: &Path, error: Error) -> Error {
    if !error.is(ErrorCode::Backend) {
        return error;
    }
    let parent = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    match std::fs::metadata(parent) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            error.with_cause(BackendCause::DirectoryMissing)
        }
        Ok(meta) if meta.permissions().readonly() => error.with_cause(BackendCause::ReadOnly),
        _ => error,
    }
}

/// Sets `PRAGMA synchronous` on the writer (no I/O), through the seam so a
/// test sees, and can fail, each change.
fn set_synchronous(conn: &Connection, level: Synchronous) -> Result<()> {
    let sql = match level {
        Synchronous::Normal => "PRAGMA synchronous = NORMAL",
        Synchronous::Full => "PRAGMA synchronous = FULL",
    };
    seam::batch(conn, sql).db()
}

fn writer_manager(path: &Path, config: &SqliteConfig, create: bool) -> Manager {
    let busy = Duration::from_millis(config.busy_timeout_ms);
    let synchronous = config.synchronous.as_pragma();
    let background_checkpoints = config.wal_checkpoints.is_some();
    // Only the connection that may create the file sets its page size; on
    // an existing file in WAL mode SQLite ignores the PRAGMA anyway.
    let page_size = config.page_size.filter(|_| create);
    let inner = SqliteConnectionManager::file(path)
        .with_flags(open_flags(create))
        .with_init(move |conn| {
            conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE_CAPACITY);
            stable_plans(conn)?;
            conn.busy_timeout(busy)?;
            if let Some(size) = page_size {
                // Before the journal mode: switching to WAL writes the
                // header of a new file, which fixes its page size.
                conn.pragma_update(None, "page_size", size)?;
            }
            let _mode: String =
                conn.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))?;
            conn.pragma_update(None, "synchronous", synchronous)?;
            conn.pragma_update(None, "foreign_keys", "OFF")?;
            // A push's rejection savepoint keeps the original of every page
            // the push changes in a statement journal, which SQLite moves to
            // a temporary file once it passes 64 KiB: at 4 KiB pages, about
            // one single-row push in six created, wrote and unlinked a file.
            // In memory, the journal is bounded by the pages one transaction
            // changes; DDL switches back to files (`with_temp_files`).
            conn.pragma_update(None, "temp_store", "MEMORY")?;
            crate::barrier_guards::register_storage_function(conn)?;
            if background_checkpoints {
                // The background checkpointer copies WAL pages; no commit does.
                conn.pragma_update(None, "wal_autocheckpoint", 0)?;
            }
            Ok(())
        });
    Manager {
        inner,
        synchronous: Some(config.synchronous.level()),
    }
}

fn reader_manager(path: &Path, config: &SqliteConfig) -> Manager {
    let busy = Duration::from_millis(config.busy_timeout_ms);
    let mmap = reader_mmap_size(config);
    let inner = SqliteConnectionManager::file(path)
        .with_flags(open_flags(false))
        .with_init(move |conn| {
            conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE_CAPACITY);
            stable_plans(conn)?;
            conn.busy_timeout(busy)?;
            conn.pragma_update(None, "mmap_size", mmap)?;
            conn.pragma_update(None, "query_only", "ON")?;
            Ok(())
        });
    Manager {
        inner,
        synchronous: None,
    }
}

/// `PRAGMA mmap_size` of a reader ([`SqliteConfig::reader_mmap_size`]);
/// SQLite caps it at its own maximum, so a size beyond `i64` is that
/// maximum too.
fn reader_mmap_size(config: &SqliteConfig) -> i64 {
    i64::try_from(config.reader_mmap_size).unwrap_or(i64::MAX)
}

/// Read-only connections: `overlay` (see `bootstrap::read_only_overlay`)
/// runs in the `temp` schema before `query_only` is switched on.
fn read_only_manager(path: &Path, config: &SqliteConfig, overlay: String) -> Manager {
    let busy = Duration::from_millis(config.busy_timeout_ms);
    let mmap = reader_mmap_size(config);
    let inner = SqliteConnectionManager::file(path)
        .with_flags(
            OpenFlags::SQLITE_OPEN_READ_ONLY
                | OpenFlags::SQLITE_OPEN_URI
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .with_init(move |conn| {
            conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE_CAPACITY);
            stable_plans(conn)?;
            conn.busy_timeout(busy)?;
            conn.execute_batch(&overlay)?;
            conn.pragma_update(None, "mmap_size", mmap)?;
            conn.pragma_update(None, "query_only", "ON")?;
            Ok(())
        });
    Manager {
        inner,
        synchronous: None,
    }
}

/// Turns on SQLite's query planner stability guarantee on `conn`: a
/// statement's plan never depends on the values bound to it. Without it,
/// once `ANALYZE` has written `sqlite_stat4` (the bundled library is built
/// with it), every statement whose plan looked at a bound value is
/// re-prepared each time that value is bound again: a 100-value scan page
/// (a hundred merged ranges) was compiled anew for every page, 20 times
/// slower than before the `ANALYZE` (`docs/decisions.md`, "Plans that do
/// not depend on bound values (SQLite)").
pub fn stable_plans(conn: &Connection) -> rusqlite::Result<()> {
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
        true,
    )
    .map(drop)
}

/// Refuses SQLite libraries older than 3.35 (`sync.storage.backend`).
fn check_version(conn: &Connection) -> Result<()> {
    let version: String = conn
        .query_row("SELECT sqlite_version()", [], |row| row.get(0))
        .db()?;
    let number = version_number(&version);
    if number < MIN_SQLITE_VERSION {
        return Err(Error::new(ErrorCode::Backend)
            .detail("reason", "sqlite_too_old")
            .detail("actual", version)
            .detail("expected", "3.35.0"));
    }
    Ok(())
}

/// `3.45.1` → 3045001.
fn version_number(version: &str) -> i32 {
    let mut parts = version
        .split('.')
        .map(|p| p.trim().parse::<i32>().unwrap_or(0));
    let major = parts.next().unwrap_or(0);
    let minor = parts.next().unwrap_or(0);
    let patch = parts.next().unwrap_or(0);
    major * 1_000_000 + minor * 1_000 + patch
}

#[cfg(test)]
mod tests {
    use super::{version_number, with_temp_files, Pools};
    use crate::errors::DbResultExt;
    use crate::SqliteConfig;

    /// The number `PRAGMA name` answers on `conn`.
    fn pragma(conn: &rusqlite::Connection, name: &str) -> i64 {
        conn.query_row(&format!("PRAGMA {name}"), [], |row| row.get(0))
            .unwrap()
    }

    /// `PRAGMA temp_store`: 1 files, 2 memory.
    fn temp_store(conn: &rusqlite::Connection) -> i64 {
        pragma(conn, "temp_store")
    }

    #[test]
    fn the_writer_keeps_temporary_storage_in_memory_except_for_ddl() {
        let dir = tempfile::tempdir().unwrap();
        let pools = Pools::open(&dir.path().join("t.db"), &SqliteConfig::default()).unwrap();
        let writer = pools.writer().unwrap();
        assert_eq!(temp_store(&writer), 2);
        let inside = with_temp_files(&writer, || Ok(temp_store(&writer))).unwrap();
        assert_eq!(inside, 1);
        assert_eq!(temp_store(&writer), 2);
        let failed: sync_core::Result<()> = with_temp_files(&writer, || {
            writer.execute_batch("SELECT * FROM no_such_table").db()
        });
        assert!(failed.is_err());
        assert_eq!(temp_store(&writer), 2, "restored after a failure too");
        drop(writer);
        let ddl = pools.write_ddl(|conn| Ok(temp_store(conn))).unwrap();
        assert_eq!(ddl, 1);
        assert_eq!(pools.write_once(|conn| Ok(temp_store(conn))).unwrap(), 2);
    }

    /// `PRAGMA mmap_size` of a connection.
    fn mmap_size(conn: &rusqlite::Connection) -> i64 {
        pragma(conn, "mmap_size")
    }

    #[test]
    fn readers_map_the_file_as_configured_and_the_writer_never_does() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.db");
        let pools = Pools::open(&path, &SqliteConfig::default()).unwrap();
        let default = i64::try_from(crate::DEFAULT_READER_MMAP_SIZE).unwrap();
        assert_eq!(pools.read(|conn| Ok(mmap_size(conn))).unwrap(), default);
        assert_eq!(mmap_size(&pools.writer().unwrap()), 0);
        drop(pools);
        let off = SqliteConfig {
            reader_mmap_size: 0,
            ..SqliteConfig::default()
        };
        let pools = Pools::open(&path, &off).unwrap();
        assert_eq!(pools.read(|conn| Ok(mmap_size(conn))).unwrap(), 0);
        drop(pools);
        let huge = SqliteConfig {
            reader_mmap_size: u64::MAX,
            ..SqliteConfig::default()
        };
        let pools = Pools::open(&path, &huge).unwrap();
        let capped = pools.read(|conn| Ok(mmap_size(conn))).unwrap();
        assert!(
            capped > default,
            "capped at SQLite's maximum, not refused: {capped}"
        );
    }

    #[test]
    fn parses_versions() {
        assert_eq!(version_number("3.35.0"), 3_035_000);
        assert_eq!(version_number("3.34.1"), 3_034_001);
        assert_eq!(version_number("3.50"), 3_050_000);
        assert!(version_number("3.9.2") < 3_035_000);
    }
}
