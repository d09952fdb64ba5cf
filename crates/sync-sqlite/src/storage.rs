//! `SqliteStorage` and its `ServerStorage` impl (`storage-contract.md` §4):
//! each method validates its arguments, picks a connection discipline from
//! [`Pools`] and delegates to one function of a topic module.

use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use sync_core::segments::SegmentLimits;
use sync_core::{
    validate, ActivationOutcome, AuthoritativeQueryRequest, AuthoritativeQueryResult,
    BlobReferencingRow, Capabilities, CheckpointKey, ClientCursorInfo, ClientRecord, Clock,
    CommitMetadata, CommitMetadataQuery, CommitPruneQuery, CommitPruneResult, CommitRecord,
    CommitWindowQuery, CompiledSchema, Coverage, EnsureOptions, EnsureOutcome, Error, ErrorCode,
    FenceTriggerState, IndexRowScanQuery, PartitionRegistryEntry, PrunedReactionCounts,
    ReactionClaimQuery, ReactionFailureUpdate, ReactionListQuery, ReactionPruneQuery, Result,
    RoundEntry, RoundEntryRequest, RowScanQuery, SchemaMarker, ScopeActivityQuery,
    ScopeCommitActivity, ScopeFilter, SegmentStore, ServeContext, ServeGate, ServerStorage,
    SourceChange, StorageTransaction, StoredCheckpoint, StoredCommit, StoredPushResult,
    StoredReaction, StoredRow, StoredScopes,
};
use sync_schema::ObservedTables;

use crate::config::{SqliteConfig, Synchronous};
use crate::errors::DbResultExt;
use crate::pools::{Finish, Pools};
use crate::state::{fingerprint, require_table, Ensured};
use crate::transaction::SqliteTransaction;
use crate::wal::WalCheckpointReport;
use crate::{
    admin, blobs, bootstrap, checkpoints, clients, commit_log, ensure, gate, inspect, pruning,
    push_results, query, reactions, reads, registry, round_entry, rows,
};

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
            .field("ensured_version", &self.ensured_version())
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
    /// `sync.storage.invalid_argument` (`argument = path`).
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
    /// the journal mode is left as it is. Every read of [`ServerStorage`]
    /// works; every write (including `ensure_schema`) fails.
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

    fn ensured(&self) -> Option<Arc<Ensured>> {
        self.ensured
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn with_table<T>(
        &self,
        partition: &str,
        table: &str,
        f: impl FnOnce(&crate::state::TableSql) -> Result<T>,
    ) -> Result<T> {
        validate::partition(partition)?;
        let ensured = self.ensured();
        let table = require_table(ensured.as_deref(), table)?;
        f(table)
    }
}

impl ServerStorage for SqliteStorage {
    fn capabilities(&self) -> Capabilities {
        Capabilities::ALL
    }

    fn ensure_schema(&self, schema: &CompiledSchema, opts: &EnsureOptions) -> Result<()> {
        self.ensure_schema_outcome(schema, opts).map(|_| ())
    }

    fn ensure_schema_outcome(
        &self,
        schema: &CompiledSchema,
        opts: &EnsureOptions,
    ) -> Result<EnsureOutcome> {
        ensure::validate_declarations(schema, opts)?;
        let _serialized = self
            .ensure_lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let wanted = fingerprint(schema);
        if self
            .ensured()
            .is_some_and(|e| e.version() == schema.version && e.fingerprint == wanted)
        {
            return Ok(EnsureOutcome::Verified);
        }
        // A storage that cannot write (read-only file or mount, `mode=ro`,
        // moved file) says so now, not at the first push.
        drop(self.pools.writer()?);
        let outcome = ensure::run(&self.pools, schema, opts, || self.clock.now_ms())?;
        let ensured = Arc::new(Ensured::new(Arc::new(schema.clone())));
        *self.ensured.write().unwrap_or_else(PoisonError::into_inner) = Some(ensured);
        Ok(outcome)
    }

    fn ensured_version(&self) -> Option<i32> {
        self.ensured().map(|e| e.version())
    }

    fn ensured_schema(&self) -> Option<Arc<CompiledSchema>> {
        self.ensured().map(|e| e.schema.clone())
    }

    fn read_schema_marker(&self) -> Result<Option<SchemaMarker>> {
        self.pools.read_snapshot(|conn| {
            let marker = ensure::read_marker(conn)?;
            let fence = checkpoints::database_fence(conn)?;
            Ok(marker.map(|m| SchemaMarker {
                schema_version: m.version,
                layouts: m.layouts.unwrap_or_default(),
                required_writer_version: fence,
            }))
        })
    }

    // ---- §4.2 partition registry -----------------------------------------

    fn touch_partition(
        &self,
        partition: &str,
        authenticated_at_ms: i64,
        initial_log_epoch: &str,
    ) -> Result<PartitionRegistryEntry> {
        validate::partition(partition)?;
        validate::log_epoch(initial_log_epoch)?;
        self.pools.write_once(|conn| {
            registry::touch(conn, partition, authenticated_at_ms, initial_log_epoch)
        })
    }

    fn enter_round(&self, request: &RoundEntryRequest) -> Result<RoundEntry> {
        round_entry::enter(&self.pools, request)
    }

    fn rotate_partition_log_epoch(
        &self,
        partition: &str,
        log_epoch: &str,
        authenticated_at_ms: i64,
    ) -> Result<PartitionRegistryEntry> {
        validate::partition(partition)?;
        validate::log_epoch(log_epoch)?;
        self.pools
            .write(|conn| registry::rotate(conn, partition, log_epoch, authenticated_at_ms))
    }

    fn get_partition_log_epoch(&self, partition: &str) -> Result<Option<String>> {
        validate::partition(partition)?;
        self.pools.read(|conn| registry::log_epoch(conn, partition))
    }

    fn list_partition_registry(&self) -> Result<Vec<PartitionRegistryEntry>> {
        self.pools.read(registry::list)
    }

    fn list_partitions(&self) -> Result<Vec<String>> {
        self.pools.read(registry::partitions)
    }

    // ---- §4.3 transactions -----------------------------------------------

    fn begin(&self, partition: &str) -> Result<Box<dyn StorageTransaction + '_>> {
        validate::partition(partition)?;
        let ensured = self.ensured();
        let seat = self.pools.member()?;
        Ok(Box::new(SqliteTransaction::new(seat, ensured, partition)))
    }

    // ---- §4.4 commit log, horizon, pruning -------------------------------

    fn get_max_commit_seq(&self, partition: &str) -> Result<i64> {
        validate::partition(partition)?;
        self.pools
            .read(|conn| commit_log::max_commit_seq(conn, partition))
    }

    fn get_horizon_seq(&self, partition: &str) -> Result<i64> {
        validate::partition(partition)?;
        self.pools
            .read(|conn| commit_log::horizon_seq(conn, partition))
    }

    fn set_horizon_seq(&self, partition: &str, seq: i64) -> Result<()> {
        validate::partition(partition)?;
        validate::safe_non_negative("seq", seq)?;
        self.pools
            .write_once(|conn| commit_log::raise_horizon(conn, partition, seq))
    }

    fn prune_commits_through(
        &self,
        partition: &str,
        query: &CommitPruneQuery,
    ) -> Result<CommitPruneResult> {
        validate::partition(partition)?;
        validate::prune_query(query)?;
        self.pools
            .write(|conn| pruning::prune_through(conn, partition, query))
    }

    fn get_commit_seq_before(&self, partition: &str, created_before_ms: i64) -> Result<i64> {
        validate::partition(partition)?;
        self.pools
            .read(|conn| commit_log::commit_seq_before(conn, partition, created_before_ms))
    }

    // ---- §4.5–§4.7 reads -------------------------------------------------

    fn get_row(&self, partition: &str, table: &str, row_id: &str) -> Result<Option<StoredRow>> {
        self.with_table(partition, table, |t| {
            self.pools
                .read(|conn| rows::get(conn, t, partition, row_id))
        })
    }

    fn get_push_result(
        &self,
        partition: &str,
        client_id: &str,
        client_commit_id: &str,
    ) -> Result<Option<StoredPushResult>> {
        validate::partition(partition)?;
        let text = self
            .pools
            .read(|conn| push_results::get_text(conn, partition, client_id, client_commit_id))?;
        push_results::parse(text)
    }

    fn read_commit_window(
        &self,
        partition: &str,
        query: &CommitWindowQuery,
    ) -> Result<Vec<StoredCommit>> {
        let ensured = self.ensured();
        if reads::validate_window(ensured.as_deref(), partition, query)?.is_none() {
            return Ok(Vec::new());
        }
        self.pools
            .read_snapshot(|conn| reads::commit_window(conn, partition, query))
    }

    fn latest_scoped_change_seq(
        &self,
        partition: &str,
        table: &str,
        filter: &ScopeFilter,
    ) -> Result<i64> {
        let ensured = self.ensured();
        if !reads::validate_latest(ensured.as_deref(), partition, table, filter)? {
            return Ok(0);
        }
        self.pools
            .read_snapshot(|conn| reads::latest_scoped_seq(conn, partition, table, filter))
    }

    fn scan_rows(&self, partition: &str, query: &RowScanQuery) -> Result<Vec<StoredRow>> {
        let ensured = self.ensured();
        let Some(table) = reads::validate_scan(ensured.as_deref(), partition, query)? else {
            return Ok(Vec::new());
        };
        self.pools
            .read_snapshot(|conn| reads::scan_rows(conn, table, partition, query))
    }

    // ---- §4.8 trusted lookups and partition scans ------------------------

    fn scan_rows_by_index(
        &self,
        partition: &str,
        query: &IndexRowScanQuery,
    ) -> Result<Vec<StoredRow>> {
        let ensured = self.ensured();
        let table = reads::validate_index_scan(ensured.as_deref(), partition, query)?;
        self.pools
            .read(|conn| reads::index_scan(conn, table, partition, query))
    }

    fn scan_partition_rows(
        &self,
        partition: &str,
        table: &str,
        after_row_id: Option<&str>,
        limit: i64,
    ) -> Result<Vec<StoredRow>> {
        let ensured = self.ensured();
        let table = reads::validate_partition_scan(ensured.as_deref(), partition, table, limit)?;
        self.pools
            .read(|conn| reads::partition_scan(conn, table, partition, after_row_id, limit))
    }

    // ---- §4.9 clients and cursors ----------------------------------------

    fn get_client_record(&self, partition: &str, client_id: &str) -> Result<Option<ClientRecord>> {
        validate::partition(partition)?;
        self.pools
            .read(|conn| clients::get(conn, partition, client_id))
    }

    fn put_client_record(&self, partition: &str, record: &ClientRecord) -> Result<()> {
        validate::partition(partition)?;
        if record.client_id.is_empty() {
            return Err(Error::invalid_argument("client_id", "empty"));
        }
        // Refreshing the same actor's record is soft state: it commits at
        // `client_record_synchronous`; a new record (the actor binding)
        // keeps the writer's level.
        if self
            .pools
            .write_once_soft(|conn| clients::refresh(conn, partition, record))?
        {
            return Ok(());
        }
        self.pools
            .write_once(|conn| clients::put(conn, partition, record))
    }

    fn list_client_cursors(&self, partition: &str) -> Result<Vec<ClientCursorInfo>> {
        validate::partition(partition)?;
        self.pools.read(|conn| clients::cursors(conn, partition))
    }

    fn advance_client_cursor(
        &self,
        partition: &str,
        client_id: &str,
        actor_id: &str,
        log_epoch: &str,
        cursor: i64,
        updated_at_ms: i64,
    ) -> Result<bool> {
        validate::partition(partition)?;
        validate::log_epoch(log_epoch)?;
        self.pools.write_once_soft(|conn| {
            clients::advance(
                conn,
                partition,
                client_id,
                actor_id,
                log_epoch,
                cursor,
                updated_at_ms,
            )
        })
    }

    fn update_client_cursor(
        &self,
        partition: &str,
        client_id: &str,
        cursor: i64,
        updated_at_ms: i64,
    ) -> Result<bool> {
        validate::partition(partition)?;
        self.pools
            .write_once(|conn| clients::update(conn, partition, client_id, cursor, updated_at_ms))
    }

    fn get_active_client_cursor_floor(
        &self,
        partition: &str,
        cutoff_ms: i64,
    ) -> Result<Option<i64>> {
        validate::partition(partition)?;
        self.pools
            .read(|conn| clients::active_floor(conn, partition, cutoff_ms))
    }

    // ---- §4.10 reactions -------------------------------------------------

    fn claim_reactions(
        &self,
        partition: &str,
        query: &ReactionClaimQuery,
    ) -> Result<Vec<StoredReaction>> {
        validate::partition(partition)?;
        if query.kinds.is_empty() || query.limit <= 0 {
            return Ok(Vec::new());
        }
        self.pools
            .write_once(|conn| reactions::claim(conn, partition, query))
    }

    fn complete_reaction(
        &self,
        partition: &str,
        key: &str,
        lease_owner: &str,
        completed_at_ms: i64,
    ) -> Result<bool> {
        validate::partition(partition)?;
        self.pools.write_once(|conn| {
            reactions::complete(conn, partition, key, lease_owner, completed_at_ms)
        })
    }

    fn extend_reaction_lease(
        &self,
        partition: &str,
        key: &str,
        lease_owner: &str,
        lease_expires_at_ms: i64,
    ) -> Result<bool> {
        validate::partition(partition)?;
        self.pools.write_once(|conn| {
            reactions::extend(conn, partition, key, lease_owner, lease_expires_at_ms)
        })
    }

    fn fail_reaction(
        &self,
        partition: &str,
        key: &str,
        update: &ReactionFailureUpdate,
    ) -> Result<bool> {
        validate::partition(partition)?;
        self.pools
            .write_once(|conn| reactions::fail(conn, partition, key, update))
    }

    fn retry_reaction(&self, partition: &str, key: &str, now_ms: i64) -> Result<bool> {
        validate::partition(partition)?;
        self.pools
            .write_once(|conn| reactions::retry(conn, partition, key, now_ms))
    }

    fn get_reaction(&self, partition: &str, key: &str) -> Result<Option<StoredReaction>> {
        validate::partition(partition)?;
        self.pools.read(|conn| reactions::get(conn, partition, key))
    }

    fn list_reactions(
        &self,
        partition: &str,
        query: &ReactionListQuery,
    ) -> Result<Vec<StoredReaction>> {
        validate::partition(partition)?;
        self.pools
            .read(|conn| reactions::list(conn, partition, query))
    }

    fn prune_reactions(
        &self,
        partition: &str,
        query: &ReactionPruneQuery,
    ) -> Result<PrunedReactionCounts> {
        validate::partition(partition)?;
        if query.limit <= 0 {
            return Ok(PrunedReactionCounts::default());
        }
        self.pools
            .write_once(|conn| reactions::prune(conn, partition, query))
    }

    // ---- §4.11 blob references -------------------------------------------

    fn list_rows_referencing_blob(
        &self,
        partition: &str,
        blob_id: &str,
    ) -> Result<Vec<BlobReferencingRow>> {
        validate::partition(partition)?;
        let ensured = self.ensured();
        self.pools.read_snapshot(|conn| {
            blobs::rows_referencing(conn, ensured.as_deref(), partition, blob_id)
        })
    }

    fn list_referenced_blob_ids(&self, partition: &str) -> Result<Vec<String>> {
        validate::partition(partition)?;
        self.pools
            .read(|conn| blobs::referenced_ids(conn, partition))
    }

    // ---- §4.12 admin -----------------------------------------------------

    fn list_client_records(&self, partition: &str) -> Result<Vec<ClientRecord>> {
        validate::partition(partition)?;
        self.pools.read(|conn| clients::list(conn, partition))
    }

    fn list_commit_metadata(
        &self,
        partition: &str,
        query: &CommitMetadataQuery,
    ) -> Result<Vec<CommitMetadata>> {
        validate::partition(partition)?;
        self.pools
            .read(|conn| admin::commit_metadata(conn, partition, query))
    }

    fn scope_activity(
        &self,
        partition: &str,
        query: &ScopeActivityQuery,
    ) -> Result<Vec<ScopeCommitActivity>> {
        validate::partition(partition)?;
        self.pools
            .read(|conn| admin::scope_activity(conn, partition, query))
    }

    fn get_row_scopes(
        &self,
        partition: &str,
        table: &str,
        row_id: &str,
    ) -> Result<Option<(i64, StoredScopes)>> {
        self.with_table(partition, table, |t| {
            self.pools
                .read(|conn| admin::row_scopes(conn, t, partition, row_id))
        })
    }

    fn read_commits(
        &self,
        partition: &str,
        after_seq: i64,
        limit: i64,
    ) -> Result<Vec<CommitRecord>> {
        inspect::validate_commits(partition, after_seq, limit)?;
        self.pools
            .read_snapshot(|conn| inspect::read_commits(conn, partition, after_seq, limit))
    }

    fn inspect_table_rows(
        &self,
        partition: &str,
        table: &str,
        after_row_id: Option<&str>,
        limit: i64,
    ) -> Result<Vec<StoredRow>> {
        inspect::validate_inspect(partition, limit)?;
        self.pools.read_snapshot(|conn| {
            inspect::inspect_rows(conn, partition, table, after_row_id, limit)
        })
    }

    // ---- §4.13 registered queries ----------------------------------------

    fn query_authoritative(
        &self,
        partition: &str,
        request: &AuthoritativeQueryRequest,
        ctx: &ServeContext,
    ) -> Result<AuthoritativeQueryResult> {
        let ensured = self.ensured();
        let prepared = query::prepare(ensured.as_deref(), partition, request)?;
        let running = ensured.as_ref().map_or(0, |e| e.version());
        self.pools
            .read_snapshot(|conn| query::run_gated(conn, partition, running, &prepared, ctx))
    }

    // ---- §4.14 RFC 0007 --------------------------------------------------

    fn read_checkpoints(&self, partition: &str) -> Result<Vec<StoredCheckpoint>> {
        validate::partition(partition)?;
        self.pools
            .read(|conn| checkpoints::read_all(conn, partition))
    }

    fn read_checkpoint(&self, partition: &str, name: &str) -> Result<Option<StoredCheckpoint>> {
        checkpoints::validate_key(partition, name)?;
        self.pools
            .read(|conn| checkpoints::read_one(conn, partition, name))
    }

    fn list_pending_checkpoints(&self, schema_version: i32) -> Result<Vec<CheckpointKey>> {
        validate::schema_version(schema_version)?;
        self.pools
            .read(|conn| checkpoints::list_pending(conn, schema_version))
    }

    fn list_unfinished_checkpoints(&self, schema_version: i32) -> Result<Vec<StoredCheckpoint>> {
        validate::schema_version(schema_version)?;
        self.pools
            .read(|conn| checkpoints::list_unfinished(conn, schema_version))
    }

    fn read_serve_gate(&self, partition: &str, running_schema_version: i32) -> Result<ServeGate> {
        gate::validate_args(partition, running_schema_version)?;
        self.pools
            .read(|conn| gate::read(conn, partition, running_schema_version))
    }

    fn declare_checkpoint(
        &self,
        partition: &str,
        name: &str,
        schema_version: i32,
        now_ms: i64,
    ) -> Result<StoredCheckpoint> {
        checkpoints::validate_versioned(partition, name, schema_version)?;
        self.pools
            .write(|conn| checkpoints::declare(conn, partition, name, schema_version, now_ms))
    }

    fn claim_checkpoint(
        &self,
        partition: &str,
        name: &str,
        schema_version: i32,
        now_ms: i64,
    ) -> Result<StoredCheckpoint> {
        checkpoints::validate_versioned(partition, name, schema_version)?;
        self.pools
            .write_once(|conn| checkpoints::claim(conn, partition, name, schema_version, now_ms))
    }

    fn advance_checkpoint(
        &self,
        partition: &str,
        name: &str,
        owner_epoch: i64,
        watermark: i64,
        observed_rows: i64,
        now_ms: i64,
    ) -> Result<bool> {
        checkpoints::validate_advance(partition, name, watermark, observed_rows)?;
        self.pools.write(|conn| {
            checkpoints::advance(
                conn,
                partition,
                name,
                owner_epoch,
                watermark,
                observed_rows,
                now_ms,
            )
        })
    }

    fn activate_checkpoint(
        &self,
        partition: &str,
        name: &str,
        owner_epoch: i64,
        watermark: i64,
        sources: &[String],
        now_ms: i64,
    ) -> Result<ActivationOutcome> {
        let ensured = self.ensured();
        let sources = checkpoints::validate_activate(
            ensured.as_deref(),
            partition,
            name,
            watermark,
            sources,
        )?;
        self.pools.write_decide(|conn| {
            let outcome = checkpoints::activate(
                conn,
                partition,
                name,
                owner_epoch,
                watermark,
                &sources,
                now_ms,
            )?;
            Ok(match outcome {
                ActivationOutcome::Activated => Finish::Commit(outcome),
                _ => Finish::Rollback(outcome),
            })
        })
    }

    fn source_coverage_seq(&self, partition: &str, tables: &[String]) -> Result<i64> {
        validate::partition(partition)?;
        let ensured = self.ensured();
        let tables = crate::state::require_tables(ensured.as_deref(), tables)?;
        self.pools
            .read(|conn| checkpoints::coverage_seq(conn, partition, &tables))
    }

    fn has_source_changes_above(
        &self,
        partition: &str,
        tables: &[String],
        seq: i64,
    ) -> Result<Coverage> {
        let ensured = self.ensured();
        let tables =
            checkpoints::validate_tables_seq(ensured.as_deref(), partition, tables, "seq", seq)?;
        self.pools
            .read_snapshot(|conn| checkpoints::changes_above(conn, partition, &tables, seq))
    }

    fn list_source_changes(
        &self,
        partition: &str,
        tables: &[String],
        after_seq: i64,
        limit: i64,
    ) -> Result<Vec<SourceChange>> {
        let ensured = self.ensured();
        let tables = checkpoints::validate_tables_seq(
            ensured.as_deref(),
            partition,
            tables,
            "after_seq",
            after_seq,
        )?;
        validate::lookup_limit(limit)?;
        self.pools
            .read(|conn| checkpoints::source_changes(conn, partition, &tables, after_seq, limit))
    }

    fn required_writer_version(&self, partition: &str) -> Result<Option<i32>> {
        validate::partition(partition)?;
        self.pools
            .read_snapshot(|conn| checkpoints::required_writer_version(conn, partition))
    }

    fn segment_store(&self) -> Option<&dyn SegmentStore> {
        Some(self)
    }

    fn writer_fence_trigger(&self) -> Result<FenceTriggerState> {
        self.pools.read_snapshot(bootstrap::fence_trigger_state)
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
}
