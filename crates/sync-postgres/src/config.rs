//! Construction options of [`PostgresStorage`](crate::PostgresStorage)
//! (`dialects.md` §2.2).

use std::sync::Arc;

use sync_core::limits::{DEFAULT_POOL_WAIT_MS, DEFAULT_POSTGRES_POOL_SIZE};
use sync_core::segments::SegmentLimits;
use sync_core::{Clock, SystemClock};

use crate::citus::DistributeOptions;

/// Default `SET LOCAL lock_timeout` of the migration transaction.
pub const DEFAULT_MIGRATION_LOCK_TIMEOUT_MS: u64 = 60_000;

/// Configuration of a Postgres storage instance.
///
/// `pool_size`, `pool_wait_ms` and `schema` shape the pool built by
/// [`PostgresStorage::connect`](crate::PostgresStorage::connect); a pool
/// handed to [`PostgresStorage::new`](crate::PostgresStorage::new) is used as
/// built by the host (which then sets `search_path` itself).
#[derive(Debug, Clone)]
pub struct PostgresConfig {
    /// Schema every pooled connection works in (`SET search_path TO "<schema>"`
    /// on acquire). `None` keeps the server's default `search_path`.
    pub schema: Option<String>,
    /// `SET LOCAL lock_timeout` before the migration lock (ms).
    pub migration_lock_timeout_ms: u64,
    /// Optional `SET LOCAL lock_timeout` before every wait for a partition
    /// write lock (push lock, rotation, prune, activation, horizon) in ms; a
    /// timeout is `sync.storage.busy`. `None` waits for as long as the lock
    /// is held.
    pub push_lock_timeout_ms: Option<u64>,
    /// Optional `SET LOCAL statement_timeout` of every transaction (ms).
    pub statement_timeout_ms: Option<u64>,
    /// `max_size` of the pool built by `connect`.
    pub pool_size: u32,
    /// Pool checkout wait of the pool built by `connect` (ms); a timeout is
    /// `sync.storage.busy`.
    pub pool_wait_ms: u64,
    /// Source of installation timestamps of checkpoints declared through `ensure_schema`.
    pub clock: Arc<dyn Clock>,
    /// On a Citus coordinator, a bootstrap that creates the storage tables
    /// distributes them by partition in the same transaction, as
    /// [`PostgresStorage::distribute`](crate::PostgresStorage::distribute)
    /// does afterwards. `None` (the default) leaves a new schema local (or
    /// to schema-based sharding); ignored on plain Postgres and when the
    /// tables exist already.
    pub citus_distribution: Option<DistributeOptions>,
    /// Whether a write that only refreshes an existing client record of the
    /// same actor (`put_client_record` of a pull, `advance_client_cursor`)
    /// waits for its WAL flush. `false` (the default) commits it with
    /// `synchronous_commit = off` for that transaction only: a crash can
    /// lose only such refreshes of the last moments, leaving each record as
    /// its previous durable write left it (`docs/decisions.md`, "Client
    /// records without an fsync per pull"). A new record, another actor's
    /// record and every push keep the server's `synchronous_commit`.
    pub client_record_synchronous_commit: bool,
    /// Whether every pooled connection plans for short statements: `SET jit
    /// = off` and `SET max_parallel_workers_per_gather = 0` once, when the
    /// pool opens it. `true` (the default): every statement of the storage
    /// is a keyed read or write of at most a few pages, for which a JIT
    /// compilation (tens to hundreds of milliseconds) or a parallel plan
    /// (which collects and sorts where the serial plan streams) never pays;
    /// both were measured to turn pages of a few milliseconds into pages of
    /// 100 ms or more when an estimate is off (`docs/decisions.md`,
    /// "Short-statement planning on Postgres"). `false` leaves the server's
    /// settings.
    pub short_statement_planning: bool,
    /// The limits of the segment store in the schema
    /// (`ServerStorage::segment_store`); default 64 MiB per segment.
    pub segment_limits: SegmentLimits,
    /// Whether every appended commit is announced with `NOTIFY
    /// syncstore_commits` (sent with the transaction's `COMMIT`, no extra
    /// round trip) and the storage offers a commit feed
    /// (`ServerStorage::commit_feed`, a `LISTEN` connection of its own
    /// outside the pool, built by [`PostgresStorage::connect`](crate::PostgresStorage::connect)).
    /// Turn it on in every process that pushes to a database whose
    /// realtime sockets are served by several processes (`syncstore serve`
    /// does). `false` (the default): Postgres serializes the commits of
    /// notifying transactions database-wide, a cost a single process need
    /// not pay.
    pub announce_commits: bool,
}

impl Default for PostgresConfig {
    fn default() -> Self {
        Self {
            schema: None,
            migration_lock_timeout_ms: DEFAULT_MIGRATION_LOCK_TIMEOUT_MS,
            push_lock_timeout_ms: None,
            statement_timeout_ms: None,
            pool_size: DEFAULT_POSTGRES_POOL_SIZE,
            pool_wait_ms: DEFAULT_POOL_WAIT_MS,
            clock: Arc::new(SystemClock),
            citus_distribution: None,
            client_record_synchronous_commit: false,
            short_statement_planning: true,
            segment_limits: SegmentLimits::default(),
            announce_commits: false,
        }
    }
}
