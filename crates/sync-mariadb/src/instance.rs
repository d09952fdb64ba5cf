//! [`MariadbStorage`]: the pool, the configuration and the session facts
//! of one MariaDB database.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use r2d2::Pool;
use sync_core::{Error, ErrorCode, Result};

use crate::bootstrap;
use crate::config::{MariadbConfig, MariadbUrl, DEFAULT_METADATA_LOCK_WAIT_SECONDS};
use crate::ensured::Ensured;
use crate::pool::{build_pool, checkout, Conn, Manager, Pooled, READ_ONLY_SESSION};
use crate::session::{LockWaits, SessionFacts};

/// A MariaDB storage: one r2d2 pool of set-up connections to one database.
pub struct MariadbStorage {
    url: MariadbUrl,
    config: MariadbConfig,
    waits: LockWaits,
    facts: SessionFacts,
    pool: Pool<Manager>,
    ensured: RwLock<Option<Arc<Ensured>>>,
    ensure_lock: Mutex<()>,
    #[cfg(feature = "fault-injection")]
    faults: sync_core::fault::FaultSlot,
}

impl fmt::Debug for MariadbStorage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MariadbStorage")
            .field("database", &self.url.database())
            .field("version", &self.facts.version)
            .field("pool_size", &self.config.pool_size)
            .finish()
    }
}

impl MariadbStorage {
    /// Connects to `url` (`mariadb://user[:password]@host[:port]/database`
    /// or `mysql://…`). One probe connection is opened and set up first, so
    /// an unreachable server, refused credentials, a missing database or a
    /// server that is not MariaDB ≥ 10.6 fail here with
    /// `sync.storage.backend` and `details.cause`; then the pool is built
    /// from `config`, and the internal tables, the fence trigger and the
    /// barrier's guard triggers are created where the catalog lacks them.
    pub fn connect(url: &str, config: MariadbConfig) -> Result<Self> {
        Self::connect_to(MariadbUrl::parse(url)?, config)
    }

    /// [`MariadbStorage::connect`] with a parsed URL.
    pub fn connect_to(url: MariadbUrl, config: MariadbConfig) -> Result<Self> {
        let waits = LockWaits {
            row_seconds: config.row_lock_wait_seconds(),
            metadata_seconds: DEFAULT_METADATA_LOCK_WAIT_SECONDS,
        };
        let opts = url.connection_opts();
        let (probe, facts) = Conn::open(&opts, waits)?;
        drop(probe);
        let pool = build_pool(
            Manager::new(opts, waits),
            config.pool_size,
            config.pool_wait_ms,
        )?;
        let storage = Self {
            url,
            config,
            waits,
            facts,
            pool,
            ensured: RwLock::new(None),
            ensure_lock: Mutex::new(()),
            #[cfg(feature = "fault-injection")]
            faults: sync_core::fault::FaultSlot::default(),
        };
        storage.ensure_base_tables()?;
        Ok(storage)
    }

    /// Connects to `url` for inspection only: every session's transactions
    /// are read-only (`SET SESSION TRANSACTION READ ONLY`), and nothing is
    /// created — not even the internal tables. A database without
    /// `sync_schema_meta` is `sync.storage.not_a_sync_database`
    /// (`reason = no_tables`). The probe and pool errors are those of
    /// [`MariadbStorage::connect`].
    pub fn connect_read_only(url: &str, config: MariadbConfig) -> Result<Self> {
        let url = MariadbUrl::parse(url)?;
        let waits = LockWaits {
            row_seconds: config.row_lock_wait_seconds(),
            metadata_seconds: DEFAULT_METADATA_LOCK_WAIT_SECONDS,
        };
        let opts = url.connection_opts();
        let (mut probe, facts) = Conn::open(&opts, waits)?;
        probe.run(READ_ONLY_SESSION)?;
        let found: Option<i64> = probe.first(
            "SELECT 1 FROM information_schema.TABLES \
             WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'sync_schema_meta'",
            (),
        )?;
        if found.is_none() {
            return Err(Error::new(ErrorCode::NotASyncDatabase).detail("reason", "no_tables"));
        }
        drop(probe);
        let pool = build_pool(
            Manager::read_only(opts, waits),
            config.pool_size,
            config.pool_wait_ms,
        )?;
        Ok(Self {
            url,
            config,
            waits,
            facts,
            pool,
            ensured: RwLock::new(None),
            ensure_lock: Mutex::new(()),
            #[cfg(feature = "fault-injection")]
            faults: sync_core::fault::FaultSlot::default(),
        })
    }

    /// The database the storage works in.
    pub fn database(&self) -> &str {
        self.url.database()
    }

    /// What the probe connection's session reported (server version,
    /// `sql_mode`, character set).
    pub fn session_facts(&self) -> &SessionFacts {
        &self.facts
    }

    /// Creates the internal tables, the writer-fence trigger and the
    /// barrier's guard triggers where the catalog lacks them (or holds a
    /// trigger defined otherwise); returns whether any DDL ran. A complete
    /// catalog costs three catalog reads and takes no lock.
    pub fn ensure_base_tables(&self) -> Result<bool> {
        let mut conn = self.conn()?;
        bootstrap::bootstrap(
            &mut conn,
            &self.url.connection_opts(),
            self.waits,
            self.config.migration_lock_timeout_ms,
            |own| self.hook(own),
        )
    }

    /// The configuration.
    pub(crate) fn config(&self) -> &MariadbConfig {
        &self.config
    }

    /// The URL.
    pub(crate) fn url(&self) -> &MariadbUrl {
        &self.url
    }

    /// The lock waits of pooled connections.
    pub(crate) fn lock_waits(&self) -> LockWaits {
        self.waits
    }

    /// The schema last ensured on this instance.
    pub(crate) fn ensured_schema(&self) -> Option<Arc<Ensured>> {
        self.ensured
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Records the schema of a successful `ensure_schema`.
    pub(crate) fn set_ensured(&self, ensured: Arc<Ensured>) {
        *self.ensured.write().unwrap_or_else(PoisonError::into_inner) = Some(ensured);
    }

    /// Serializes `ensure_schema` calls of this instance.
    pub(crate) fn ensure_guard(&self) -> std::sync::MutexGuard<'_, ()> {
        self.ensure_lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `f` on a pooled connection.
    pub(crate) fn with_conn<T>(
        &self,
        f: impl FnOnce(&mut crate::pool::Conn) -> Result<T>,
    ) -> Result<T> {
        let mut conn = self.conn()?;
        f(&mut conn)
    }

    /// Runs `f` in a transaction on a pooled connection (`READ COMMITTED`,
    /// the session's level): committed when it succeeds, rolled back
    /// otherwise.
    pub(crate) fn with_write<T>(
        &self,
        f: impl FnOnce(&mut crate::pool::Conn) -> Result<T>,
    ) -> Result<T> {
        let mut conn = self.conn()?;
        conn.run("START TRANSACTION")?;
        match f(&mut conn) {
            Ok(value) => match conn.run("COMMIT") {
                Ok(()) => Ok(value),
                Err(error) => {
                    conn.rollback();
                    Err(crate::session::lost_at_commit(error))
                }
            },
            Err(error) => {
                conn.rollback();
                Err(error)
            }
        }
    }

    /// Runs `f` in one `REPEATABLE READ` read-only snapshot on a pooled
    /// connection (multi-statement pool reads). The level is asked for this
    /// one transaction; should the transaction then fail to start, the
    /// request would still be pending for the connection's next one, so
    /// the connection is discarded instead of returned to the pool.
    pub(crate) fn with_read<T>(
        &self,
        f: impl FnOnce(&mut crate::pool::Conn) -> Result<T>,
    ) -> Result<T> {
        let mut conn = self.conn()?;
        conn.run("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")?;
        if let Err(error) = conn.run("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY") {
            conn.discard();
            return Err(error);
        }
        let result = f(&mut conn);
        match result {
            Ok(value) => conn.run("COMMIT").map(|()| value),
            Err(error) => {
                conn.rollback();
                Err(error)
            }
        }
    }

    /// A pooled connection, waiting up to the configured `pool_wait_ms`;
    /// a checkout timeout is `sync.storage.busy`.
    pub(crate) fn conn(&self) -> Result<Pooled> {
        let mut conn = checkout(&self.pool, self.config.pool_wait_ms)?;
        self.hook(&mut conn);
        Ok(conn)
    }

    /// Gives `conn` the installed fault plan, or takes a previous one away
    /// (a no-op without the `fault-injection` feature).
    pub(crate) fn hook(&self, conn: &mut Conn) {
        #[cfg(feature = "fault-injection")]
        conn.set_fault_hook(self.faults.get().map(|plan| {
            Arc::new(crate::faults::FaultHook {
                plan,
                side: self.url.connection_opts(),
            })
        }));
        #[cfg(not(feature = "fault-injection"))]
        let _ = conn;
    }

    /// Installs (`Some`) or removes (`None`) the fault plan every statement
    /// of this instance consults from its next connection checkout on — the
    /// pool's connections and the migration session — (feature
    /// `fault-injection`, tests only; see `sync_core::fault`). The session
    /// set-up of a new connection and the base DDL's own connection are not
    /// counted.
    #[cfg(feature = "fault-injection")]
    pub fn set_fault_plan(&self, plan: Option<Arc<sync_core::fault::FaultPlan>>) {
        self.faults.set(plan);
    }
}
