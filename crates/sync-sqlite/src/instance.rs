//! `SqliteStorage`: opening a database file, the instance state
//! `ensure_schema` records, and the operator methods outside the storage
//! contract. Its contract methods are in `storage.rs`, behind the
//! validating front.

use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use sync_core::segments::SegmentLimits;
use sync_core::{Clock, Error, ErrorCode, Result};
use sync_schema::ObservedTables;

use crate::config::{SqliteConfig, Synchronous};
use crate::errors::DbResultExt;
use crate::inspect;
use crate::pools::Pools;
use crate::state::Ensured;
use crate::wal::WalCheckpointReport;

/// Server storage on one SQLite database file: a single writer connection
/// (every write transaction of every partition is serialized) and a pool of
/// reader connections that see committed state only.
pub struct SqliteStorage {
    pools: Pools,
    ensured: RwLock<Option<Arc<Ensured>>>,
    ensure_lock: Mutex<()>,
    clock: Arc<dyn Clock>,
    segment_limits: SegmentLimits,
}

impl std::fmt::Debug for SqliteStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStorage")
            .field("path", &self.pools.path())
            .field(
                "ensured_version",
                &self.ensured_state().map(|e| e.version()),
            )
            .finish_non_exhaustive()
    }
}

impl SqliteStorage {
    /// Opens (creating if needed) the database file at `path`: checks the
    /// SQLite version (≥ 3.35), switches to WAL, and runs the base DDL and
    /// the writer-fence trigger install in one `BEGIN IMMEDIATE`
    /// (`dialects.md` §2.1, §4.1). In-memory databases are not supported.
    ///
    /// An empty path, `:memory:` or a `mode=memory` URI is refused with
    /// `sync.storage.invalid_argument` (`argument = path`); a
    /// [`SqliteConfig::page_size`] SQLite does not accept, with
    /// `argument = page_size`, before any file is touched.
    pub fn open(path: impl AsRef<Path>, config: SqliteConfig) -> Result<Self> {
        let path = path.as_ref();
        let text = path.to_string_lossy();
        if text.is_empty()
            || text == ":memory:"
            || text.contains("mode=memory")
            || text.starts_with("file::memory:")
        {
            return Err(Error::invalid_argument("path", "in_memory_unsupported"));
        }
        if let Some(size) = config.page_size.filter(|&s| !crate::valid_page_size(s)) {
            return Err(Error::invalid_argument(
                "page_size",
                "not_a_power_of_two_from_512_to_65536",
            )
            .detail("page_size", size.to_string()));
        }
        let pools = Pools::open(path, &config)?;
        Ok(Self {
            pools,
            ensured: RwLock::new(None),
            ensure_lock: Mutex::new(()),
            clock: config.clock,
            segment_limits: config.segment_limits,
        })
    }

    /// Opens an existing database file read-only, for inspection: the file
    /// is opened with `SQLITE_OPEN_READ_ONLY` and every connection runs with
    /// `PRAGMA query_only = ON`; nothing is bootstrapped, no file is created,
    /// the journal mode is left as it is. Every read of
    /// [`ServerStorage`](sync_core::ServerStorage) works; every write
    /// (including `ensure_schema`) fails.
    ///
    /// A missing file or a file without the storage tables is
    /// `sync.storage.not_a_sync_database` (`reason` = `no_file` /
    /// `no_tables`).
    pub fn open_read_only(path: impl AsRef<Path>, config: SqliteConfig) -> Result<Self> {
        let pools = Pools::open_read_only(path.as_ref(), &config)?;
        Ok(Self {
            pools,
            ensured: RwLock::new(None),
            ensure_lock: Mutex::new(()),
            clock: config.clock,
            segment_limits: config.segment_limits,
        })
    }

    /// The pools (topic modules outside this file reach the database through them).
    pub(crate) fn pools(&self) -> &Pools {
        &self.pools
    }

    /// The limits of the segment store ([`SqliteConfig::segment_limits`]).
    pub(crate) fn configured_segment_limits(&self) -> SegmentLimits {
        self.segment_limits
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        self.pools.path()
    }

    /// Installs (`Some`) or removes (`None`) the fault plan every statement
    /// on this database file consults (feature `fault-injection`, tests
    /// only; see `sync_core::fault`). SQLite connections carry no
    /// per-instance state, so the plan applies to every connection of this
    /// process on the same file.
    #[cfg(feature = "fault-injection")]
    pub fn set_fault_plan(&self, plan: Option<Arc<sync_core::fault::FaultPlan>>) -> Result<()> {
        let file = self
            .pools
            .read(|conn| Ok(conn.path().unwrap_or_default().to_owned()))?;
        crate::faults::install(&file, plan);
        Ok(())
    }

    /// Whether this storage was opened by [`SqliteStorage::open_read_only`]
    /// (inspection only: every write is refused).
    pub fn is_read_only(&self) -> bool {
        self.pools.is_read_only()
    }

    /// The page size of the file, in bytes (`PRAGMA page_size`): the one it
    /// was created with ([`SqliteConfig::page_size`]). Read on a reader, so
    /// a read-only storage answers too.
    pub fn page_size(&self) -> Result<u32> {
        self.reader_pragma("page_size")
    }

    /// How many bytes of the file a reader maps (`PRAGMA mmap_size` read
    /// back from a reader): [`SqliteConfig::reader_mmap_size`] as SQLite
    /// applied it (capped at its maximum; 0 when mapping is off).
    pub fn reader_mmap_size(&self) -> Result<u64> {
        self.reader_pragma("mmap_size")
    }

    /// The number a reader's `PRAGMA name` answers (`name` is one of this
    /// file's constants), as `T`; a number outside `T` is a backend error
    /// with `reason = unexpected_<name>`.
    fn reader_pragma<T: TryFrom<i64>>(&self, name: &'static str) -> Result<T> {
        let sql = format!("PRAGMA {name}");
        let value: i64 = self
            .pools
            .read(|conn| conn.query_row(&sql, [], |row| row.get(0)).db())?;
        T::try_from(value).map_err(|_| {
            Error::new(ErrorCode::Backend)
                .detail("reason", format!("unexpected_{name}"))
                .detail(name, value)
        })
    }

    /// The `PRAGMA synchronous` in force on the writer connection (every
    /// commit goes through it), read back from SQLite: what an
    /// acknowledged commit survives (`SqliteConfig::synchronous`). Waits for
    /// the writer like any write.
    pub fn synchronous(&self) -> Result<Synchronous> {
        let level: i64 = self.pools.write_once(|conn| {
            conn.query_row("PRAGMA synchronous", [], |row| row.get(0))
                .db()
        })?;
        Synchronous::from_level(level).ok_or_else(|| {
            Error::new(ErrorCode::Backend)
                .detail("reason", "unexpected_synchronous")
                .detail("level", level)
        })
    }

    /// Blocks until at least `transactions` calls of `begin` and `writes`
    /// pool-level writes (bumps included) wait for the writer connection, or
    /// fails `busy` after `writer_wait_ms`. For tests that need a commit
    /// group to form: the transactions queued when the writer's holder
    /// commits join its group.
    pub fn await_queued_writers(&self, transactions: usize, writes: usize) -> Result<()> {
        self.pools.await_queued(transactions, writes)
    }

    /// Runs one pass of the background WAL checkpointer now — after every
    /// pass already asked for — and reports what it found and did; `None`
    /// when the storage has no background checkpointer
    /// (`SqliteConfig::wal_checkpoints`). For operators and tests: the
    /// checkpointer runs on its own after every `every_commits` commits.
    pub fn run_wal_checkpoint(&self) -> Result<Option<WalCheckpointReport>> {
        self.pools.run_wal_checkpoint()
    }

    /// The schema `ensure_schema` last recorded on this instance.
    pub(crate) fn ensured_state(&self) -> Option<Arc<Ensured>> {
        self.ensured
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Records a successful `ensure_schema`.
    pub(crate) fn record_ensured(&self, ensured: Arc<Ensured>) {
        *self.ensured.write().unwrap_or_else(PoisonError::into_inner) = Some(ensured);
    }

    /// Serializes `ensure_schema` calls on this instance.
    pub(crate) fn ensure_lock(&self) -> &Mutex<()> {
        &self.ensure_lock
    }

    /// The instance clock's time (checkpoints installed by a bump).
    pub(crate) fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }
}

impl sync_schema::ObserveTables for SqliteStorage {
    /// Read-only introspection of the named application tables (absent ones
    /// recorded as absent), as `ensure_schema` observes them
    /// (`schema-and-migrations.md` §7.1), in one read snapshot. Lets operator
    /// tools preview a migration plan without applying it.
    fn observe_tables(&self, tables: &[String]) -> Result<ObservedTables> {
        self.pools
            .read_snapshot(|conn| inspect::observe_tables(conn, tables))
    }

    /// `COUNT(*)` of the table when it exists, else 0.
    fn count_table_rows(&self, table: &str) -> Result<Option<u64>> {
        self.pools
            .read_snapshot(|conn| inspect::count_table_rows(conn, table))
            .map(Some)
    }
}
