//! The storage instance: construction, pool access, the ensured schema, and
//! the three shapes of pool-level work (single statement, read snapshot,
//! write transaction).

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use postgres::tls::{MakeTlsConnect, TlsConnect};
use postgres::{NoTls, Socket};
use r2d2::Pool;
use r2d2_postgres::PostgresConnectionManager;
use sync_core::{Error, ErrorCode, Result};

use crate::bootstrap;
use crate::citus::{self, CitusPlacement, DistributeOptions, DistributeReport};
use crate::config::PostgresConfig;
use crate::errors::connect_error;
use crate::pool::{
    build_pool, built_source, search_path_statement, session_setup, source_of, Conn,
    ConnectionSource,
};
use crate::session::{self, Isolation};
use crate::state::Ensured;

/// The Postgres storage of one database schema: every method of
/// [`ServerStorage`](sync_core::ServerStorage), on an r2d2 pool.
///
/// Cheap to share behind `Arc`; every transaction checks out its own pooled
/// connection.
pub struct PostgresStorage {
    source: Box<dyn ConnectionSource>,
    config: PostgresConfig,
    ensured: RwLock<Option<Arc<Ensured>>>,
    ensure_lock: Mutex<()>,
    bootstrapped: AtomicBool,
    /// Whether the last bootstrap found the `citus` extension.
    citus: AtomicBool,
    /// The commit feed, when `config.announce_commits` and the storage was
    /// built from a URL (a listener needs a connection of its own).
    feed: Option<Arc<crate::commit_feed::PostgresCommitFeed>>,
    #[cfg(feature = "fault-injection")]
    faults: sync_core::fault::FaultSlot,
    #[cfg(feature = "fault-injection")]
    fault_side: Option<postgres::Config>,
}

impl fmt::Debug for PostgresStorage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresStorage")
            .field("config", &self.config)
            .field("ensured_version", &self.ensured().map(|e| e.version))
            .finish_non_exhaustive()
    }
}

/// How a pool-level write transaction ends when its body succeeded.
#[derive(Debug)]
pub(crate) enum Finish<T> {
    /// Commit, then return the value.
    Commit(T),
    /// Roll back (nothing to persist), then return the value.
    Rollback(T),
}

impl PostgresStorage {
    /// A storage over a host-built pool (any TLS connector). The pool must set
    /// the connections' `search_path` itself when a schema other than the
    /// server default is wanted; `config.schema`, `pool_size` and
    /// `pool_wait_ms` only shape the pool built by [`PostgresStorage::connect`].
    /// r2d2 validates every checkout by default (one extra round trip per
    /// transaction); build the pool with `test_on_check_out(false)` to avoid
    /// it — a connection the server closed while idle then fails the first
    /// round trip of a read or a transaction (nothing of it ran), is
    /// discarded, and the call runs again on another connection; a
    /// single-statement pool write checks its connection first. See
    /// `sync.storage.connection_lost` / `sync.storage.outcome_unknown`.
    pub fn new<T>(pool: Pool<PostgresConnectionManager<T>>, config: PostgresConfig) -> Self
    where
        T: MakeTlsConnect<Socket> + Clone + 'static + Sync + Send,
        T::TlsConnect: Send,
        T::Stream: Send,
        <T::TlsConnect as TlsConnect<Socket>>::Future: Send,
    {
        Self::with_source(source_of(pool), config)
    }

    /// A storage over a connection source.
    fn with_source(source: Box<dyn ConnectionSource>, config: PostgresConfig) -> Self {
        Self {
            source,
            config,
            ensured: RwLock::new(None),
            ensure_lock: Mutex::new(()),
            bootstrapped: AtomicBool::new(false),
            citus: AtomicBool::new(false),
            feed: None,
            #[cfg(feature = "fault-injection")]
            faults: sync_core::fault::FaultSlot::default(),
            #[cfg(feature = "fault-injection")]
            fault_side: None,
        }
    }

    /// Connects to `url` (a `postgres://` URL or key-value string) without
    /// TLS. Builds the pool from `config` (`pool_size`, `pool_wait_ms`, and
    /// `SET search_path TO "<schema>"` on every new connection) after one
    /// probe connection that fails fast when the server is unreachable.
    pub fn connect(url: &str, config: PostgresConfig) -> Result<Self> {
        let pg_config: postgres::Config = url
            .parse()
            .map_err(|e| Error::invalid_argument("url", "unparsable").source_error(e))?;
        let mut probe = pg_config.connect(NoTls).map_err(connect_error)?;
        if let Some(schema) = &config.schema {
            probe
                .batch_execute(&search_path_statement(schema))
                .map_err(connect_error)?;
        }
        drop(probe);
        #[cfg(feature = "fault-injection")]
        let side = pg_config.clone();
        let feed = config.announce_commits.then(|| {
            Arc::new(crate::commit_feed::PostgresCommitFeed {
                config: pg_config.clone(),
                schema: config.schema.clone(),
            })
        });
        let pool = build_pool(
            pg_config,
            session_setup(config.schema.as_deref(), config.short_statement_planning),
            config.pool_size,
            config.pool_wait_ms,
        )?;
        let source = built_source(pool, config.pool_wait_ms);
        let storage = Self {
            feed,
            ..Self::with_source(source, config)
        };
        #[cfg(feature = "fault-injection")]
        let storage = Self {
            fault_side: Some(side),
            ..storage
        };
        Ok(storage)
    }

    /// The commit feed (see `PostgresConfig::announce_commits`).
    pub(crate) fn commit_feed_of(&self) -> Option<Arc<dyn sync_core::CommitFeed>> {
        self.feed
            .clone()
            .map(|feed| feed as Arc<dyn sync_core::CommitFeed>)
    }

    /// Connects read-only, for inspection: every connection runs with
    /// `default_transaction_read_only = on` (so every transaction is `READ
    /// ONLY`, autocommit statements included), nothing is bootstrapped and no
    /// schema is created; works on a hot standby and with a role that may
    /// only read. Every read of [`ServerStorage`](sync_core::ServerStorage)
    /// works; every write (including `ensure_schema`) fails.
    ///
    /// A database (or `config.schema`) without the storage tables is
    /// `sync.storage.not_a_sync_database` (`reason = no_tables`).
    pub fn connect_read_only(url: &str, config: PostgresConfig) -> Result<Self> {
        let mut pg_config: postgres::Config = url
            .parse()
            .map_err(|e| Error::invalid_argument("url", "unparsable").source_error(e))?;
        let options = match pg_config.get_options() {
            Some(existing) => format!("{existing} -c default_transaction_read_only=on"),
            None => "-c default_transaction_read_only=on".to_owned(),
        };
        pg_config.options(&options);
        let mut probe = pg_config.connect(NoTls).map_err(connect_error)?;
        if let Some(schema) = &config.schema {
            probe
                .batch_execute(&search_path_statement(schema))
                .map_err(connect_error)?;
        }
        let found: bool = probe
            .query_one("SELECT to_regclass('sync_schema_meta') IS NOT NULL", &[])
            .and_then(|row| row.try_get(0))
            .map_err(connect_error)?;
        if !found {
            return Err(Error::new(ErrorCode::NotASyncDatabase).detail("reason", "no_tables"));
        }
        drop(probe);
        let pool = build_pool(
            pg_config,
            session_setup(config.schema.as_deref(), config.short_statement_planning),
            config.pool_size,
            config.pool_wait_ms,
        )?;
        let source = built_source(pool, config.pool_wait_ms);
        let storage = Self::with_source(source, config);
        storage.bootstrapped.store(true, Ordering::Release);
        Ok(storage)
    }

    /// Installs (`Some`) or removes (`None`) the fault plan every statement
    /// of this instance consults from its next connection checkout on
    /// (feature `fault-injection`, tests only; see `sync_core::fault`).
    /// `ConnectionLost` and `ReplyLost` terminate the backend from a side
    /// connection when the instance was built by [`PostgresStorage::connect`],
    /// else the backend terminates itself.
    #[cfg(feature = "fault-injection")]
    pub fn set_fault_plan(&self, plan: Option<Arc<sync_core::fault::FaultPlan>>) {
        self.faults.set(plan);
    }

    /// The configuration this instance was built with.
    pub fn config(&self) -> &PostgresConfig {
        &self.config
    }

    /// The `synchronous_commit` of a client record refresh: `off`, or
    /// `None` (the session's own level) when
    /// [`PostgresConfig::client_record_synchronous_commit`] asks for it.
    pub(crate) fn soft_commit_level(&self) -> Option<&'static str> {
        (!self.config.client_record_synchronous_commit).then_some("off")
    }

    /// The schema last ensured on this instance.
    pub(crate) fn ensured(&self) -> Option<Arc<Ensured>> {
        self.ensured
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// Records a successfully ensured schema.
    pub(crate) fn set_ensured(&self, ensured: Arc<Ensured>) {
        *self
            .ensured
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(ensured);
    }

    /// Serializes `ensure_schema` calls on this instance.
    pub(crate) fn ensure_guard(&self) -> MutexGuard<'_, ()> {
        self.ensure_lock
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A pooled connection without the lazy bootstrap. A connection the
    /// driver already knows closed (or whose session could not be brought
    /// back to a known state) is dropped and another checked out.
    pub(crate) fn checkout_raw(&self) -> Result<Conn> {
        for _ in 0..self.lost_retries() {
            let mut conn = self.checkout_hooked()?;
            if !conn.known_closed() {
                return Ok(conn);
            }
        }
        self.checkout_hooked()
    }

    /// How many times a call whose connection was lost before anything of
    /// it persisted runs again: once per pool slot (after a restart every
    /// idle connection is dead) and once more on a fresh connection.
    pub(crate) fn lost_retries(&self) -> u32 {
        self.config.pool_size.max(1)
    }

    /// A pooled connection the server answered on just now (one empty round
    /// trip), for a single-statement write that cannot be retried once
    /// sent: a connection the server closed while it sat idle is discarded
    /// here, before the write is sent.
    pub(crate) fn checkout_live(&self) -> Result<Conn> {
        for _ in 0..self.lost_retries() {
            let mut conn = self.checkout()?;
            if conn.answers() {
                return Ok(conn);
            }
            conn.discard();
        }
        self.checkout()
    }

    fn checkout_hooked(&self) -> Result<Conn> {
        #[cfg(feature = "fault-injection")]
        {
            let mut conn = self.source.checkout()?;
            conn.set_fault_hook(self.faults.get().map(|plan| {
                Arc::new(crate::faults::FaultHook {
                    plan,
                    side: self.fault_side.clone(),
                })
            }));
            Ok(conn)
        }
        #[cfg(not(feature = "fault-injection"))]
        self.source.checkout()
    }

    /// A pooled connection; the base DDL runs first once per instance, so
    /// every method works on a database no `ensure_schema` has touched yet.
    pub(crate) fn checkout(&self) -> Result<Conn> {
        if !self.bootstrapped.load(Ordering::Acquire) {
            self.bootstrap()?;
        }
        self.checkout_raw()
    }

    /// Runs the base DDL (catalog-driven; a warm start issues no DDL).
    pub(crate) fn bootstrap(&self) -> Result<()> {
        let mut conn = self.checkout_raw()?;
        let citus = bootstrap::run(
            &mut conn,
            self.config.statement_timeout_ms,
            self.config.citus_distribution.as_ref(),
        )?;
        self.citus.store(citus, Ordering::Release);
        self.bootstrapped.store(true, Ordering::Release);
        Ok(())
    }

    /// Whether the last bootstrap found the `citus` extension (so DDL
    /// transactions set the Citus settings they need).
    pub(crate) fn is_citus(&self) -> bool {
        self.citus.load(Ordering::Acquire)
    }

    /// The `BEGIN` text of a transaction of this storage: the isolation and
    /// the configured statement timeout.
    pub(crate) fn begin_sql(&self, isolation: Isolation) -> String {
        session::begin_sql(isolation, self.config.statement_timeout_ms, None)
    }

    /// The `BEGIN` text of a push transaction: [`Self::begin_sql`] and, on
    /// Citus, [`citus::PUSH_TRANSACTION_SETTINGS`]. Known only once the
    /// storage has bootstrapped (a transaction checks out its connection
    /// first).
    pub(crate) fn push_begin_sql(&self) -> String {
        session::begin_sql(
            Isolation::ReadCommitted,
            self.config.statement_timeout_ms,
            self.is_citus().then_some(citus::PUSH_TRANSACTION_SETTINGS),
        )
    }

    /// Distributes the storage schema by partition on a Citus coordinator
    /// (`docs/scale-out.md`): bootstraps it if needed, then, under the
    /// migration lock, hash-distributes every storage and application table
    /// by its partition column (colocated with `sync_partitions`, with
    /// `options.shard_count` shards) and makes `sync_schema_meta` a
    /// reference table. Later migrations distribute the tables they create
    /// the same way. Idempotent: a distributed schema reports
    /// `already_distributed` and changes nothing.
    ///
    /// Refuses with `sync.storage.not_distributable` when the `citus`
    /// extension is absent (`reason = citus_missing`), when the schema is a
    /// Citus distributed schema (`distributed_schema`), or when a table to
    /// distribute holds rows (`not_empty`, `table`).
    pub fn distribute(&self, options: &DistributeOptions) -> Result<DistributeReport> {
        self.bootstrap()?;
        if !self.is_citus() {
            return Err(Error::new(ErrorCode::NotDistributable).detail("reason", "citus_missing"));
        }
        let timeout = self.config.migration_lock_timeout_ms;
        self.in_transaction(Isolation::ReadCommitted, |conn| {
            crate::migrate::take_migration_lock(conn, timeout)?;
            citus::apply_ddl_settings(conn)?;
            citus::distribute_schema(conn, options).map(Finish::Commit)
        })
    }

    /// Where the storage's tables live when the database is a Citus
    /// coordinator (`docs/scale-out.md`); `None` when the `citus` extension
    /// is not installed. Reads only the catalog, so it works on a read-only
    /// storage and before the first bootstrap.
    pub fn citus_placement(&self) -> Result<Option<CitusPlacement>> {
        self.with_conn(citus::placement)
    }

    /// Reads in autocommit on a pooled connection. A connection lost under
    /// them (`connection_lost`: nothing was changed) is discarded and the
    /// reads run again on another connection ([`Self::lost_retries`] times).
    pub(crate) fn with_conn<T>(&self, mut f: impl FnMut(&mut Conn) -> Result<T>) -> Result<T> {
        let mut attempt = 0;
        loop {
            let mut conn = self.checkout()?;
            match f(&mut conn) {
                Err(err) if err.is(ErrorCode::ConnectionLost) && attempt < self.lost_retries() => {
                    attempt += 1;
                    conn.discard();
                }
                outcome => return outcome,
            }
        }
    }

    /// One autocommit write statement on a pooled connection the server
    /// answered on just before ([`Self::checkout_live`]). A connection lost
    /// once the statement was sent may have lost only the reply of a
    /// committed statement: that is `outcome_unknown`, never retried here.
    pub(crate) fn with_conn_write<T>(&self, f: impl FnOnce(&mut Conn) -> Result<T>) -> Result<T> {
        let mut conn = self.checkout_live()?;
        f(&mut conn).map_err(outcome_unknown_if_lost)
    }

    /// Multi-statement reads in one `REPEATABLE READ READ ONLY` snapshot.
    pub(crate) fn with_snapshot<T>(&self, mut f: impl FnMut(&mut Conn) -> Result<T>) -> Result<T> {
        self.in_transaction(Isolation::RepeatableReadOnly, |c| f(c).map(Finish::Commit))
    }

    /// A `READ COMMITTED` write transaction; the body decides whether it commits.
    pub(crate) fn with_write<T>(&self, f: impl FnMut(&mut Conn) -> Result<Finish<T>>) -> Result<T> {
        self.in_transaction(Isolation::ReadCommitted, f)
    }

    /// A pooled connection inside a new transaction. A pooled connection the
    /// server closed while it was idle fails its `BEGIN` (nothing ran) and is
    /// dropped by the pool; the transaction is then opened once more on
    /// another connection.
    pub(crate) fn begin_conn(&self, isolation: Isolation) -> Result<Conn> {
        let mut conn = self.checkout()?;
        let sql = self.begin_sql(isolation);
        match session::begin(&mut conn, &sql) {
            Ok(()) => Ok(conn),
            Err(_) if conn.is_closed() => {
                drop(conn);
                let mut conn = self.checkout()?;
                session::begin(&mut conn, &sql)?;
                Ok(conn)
            }
            Err(err) => Err(err),
        }
    }

    /// Runs `f` inside a new transaction; commits or rolls back as it says.
    /// A connection lost before the `COMMIT` was sent (`connection_lost`:
    /// the server rolled everything back) runs the whole transaction again
    /// on another connection ([`Self::lost_retries`] times); a connection lost at the `COMMIT` is
    /// `outcome_unknown` for a write and, for a read-only snapshot whose
    /// reads all completed, changes nothing.
    pub(crate) fn in_transaction<T>(
        &self,
        isolation: Isolation,
        mut f: impl FnMut(&mut Conn) -> Result<Finish<T>>,
    ) -> Result<T> {
        let mut attempt = 0;
        loop {
            match self.in_transaction_once(isolation, &mut f) {
                Err(err) if err.is(ErrorCode::ConnectionLost) && attempt < self.lost_retries() => {
                    attempt += 1;
                }
                outcome => return outcome,
            }
        }
    }

    fn in_transaction_once<T>(
        &self,
        isolation: Isolation,
        f: &mut impl FnMut(&mut Conn) -> Result<Finish<T>>,
    ) -> Result<T> {
        let mut conn = self.begin_conn(isolation)?;
        match f(&mut conn) {
            Ok(Finish::Commit(value)) => match session::commit(&mut conn) {
                Ok(()) => Ok(value),
                Err(err)
                    if isolation == Isolation::RepeatableReadOnly
                        && err.is(ErrorCode::OutcomeUnknown) =>
                {
                    Ok(value)
                }
                Err(err) => Err(err),
            },
            Ok(Finish::Rollback(value)) => {
                session::rollback(&mut conn);
                Ok(value)
            }
            Err(err) => {
                session::rollback(&mut conn);
                Err(err)
            }
        }
    }
}

/// A lost connection after a write was sent: whether it committed is unknown.
pub(crate) fn outcome_unknown_if_lost(err: Error) -> Error {
    if err.is(ErrorCode::ConnectionLost) {
        session::outcome_unknown(err)
    } else {
        err
    }
}
