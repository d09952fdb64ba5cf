//! The `ServerStorage` trait: every pool-level method of the contract
//! (`storage-contract.md` §4).
//!
//! Pool reads see committed state only; argument validation precedes
//! database access; unknown partitions read as empty. Optional capability
//! groups have default bodies returning `sync.storage.capability_unsupported`.

use std::fmt;
use std::sync::Arc;

use crate::authoritative::{AuthoritativeQueryRequest, AuthoritativeQueryResult};
use crate::capabilities::{Capabilities, Capability};
use crate::checkpoints::{
    ActivationOutcome, CheckpointDeclaration, CheckpointKey, Coverage, StoredCheckpoint,
};
use crate::clients::{ClientCursorInfo, ClientRecord, PartitionRegistryEntry};
use crate::error::Result;
use crate::fence::FenceTriggerState;
use crate::gate::{ServeContext, ServeGate};
use crate::push_result::StoredPushResult;
use crate::queries::{
    BlobReferencingRow, CommitMetadataQuery, CommitPruneQuery, CommitPruneResult,
    CommitWindowQuery, IndexRowScanQuery, RowScanQuery, ScopeActivityQuery, ScopeCommitActivity,
};
use crate::reactions::{
    PrunedReactionCounts, ReactionClaimQuery, ReactionFailureUpdate, ReactionListQuery,
    ReactionPruneQuery, StoredReaction,
};
use crate::rewrite_progress::{RewriteObserver, RewriteTally};
use crate::round_entry::{LogBounds, RoundEntry, RoundEntryRequest};
use crate::rows::{
    CommitMetadata, CommitRecord, ScannedRow, SourceChange, StoredCommit, StoredRow,
};
use crate::schema::CompiledSchema;
use crate::scope::{ScopeFilter, StoredScopes};
use crate::segments::SegmentStore;
use crate::transaction::StorageTransaction;
use crate::unfinished::UnfinishedResolution;

/// Options of `ensure_schema`.
#[derive(Clone, Default)]
pub struct EnsureOptions {
    /// Checkpoints this process declares (installed by a bump; matched by the startup check).
    pub declarations: Vec<CheckpointDeclaration>,
    /// How a bump resolves checkpoints of older versions that are not
    /// activated (finish or refuse; `sync_core::resolve_unfinished`): carried
    /// to the new version or abandoned.
    pub unfinished: Vec<UnfinishedResolution>,
    /// Finish or refuse: a bump that meets a checkpoint of an older version
    /// that is not activated and has no resolution in
    /// [`EnsureOptions::unfinished`] fails with
    /// `sync.storage.checkpoint_unfinished` naming them, and changes nothing.
    /// Off by default, as the storage contract specifies `ensure_schema`
    /// (such checkpoints stay as they are); the operator command line always
    /// turns it on (`docs/decisions.md`, "Finish or refuse").
    pub refuse_unfinished: bool,
    /// Told where a bump's row rewrites are (`None`, the default: nothing
    /// is counted or reported). See [`crate::RewriteObserver`].
    pub rewrite_progress: Option<Arc<dyn RewriteObserver>>,
    /// Test hook called inside the migration transaction right after the
    /// migration lock is held (feature `test-hooks`).
    #[cfg(feature = "test-hooks")]
    pub after_migration_lock: Option<Arc<dyn Fn() + Send + Sync>>,
}

impl EnsureOptions {
    /// Options with these declarations.
    // The update is needed when the `test-hooks` field is compiled in.
    #[allow(clippy::needless_update)]
    pub fn with_declarations(declarations: Vec<CheckpointDeclaration>) -> Self {
        Self {
            declarations,
            ..Self::default()
        }
    }

    /// These options with `observer` told of the bump's row rewrites.
    pub fn with_rewrite_progress(mut self, observer: Arc<dyn RewriteObserver>) -> Self {
        self.rewrite_progress = Some(observer);
        self
    }

    /// The running tally a dialect advances while rewriting `total` rows
    /// (reports nothing without an observer).
    pub fn rewrite_tally(&self, total: u64) -> RewriteTally<'_> {
        RewriteTally::new(self.rewrite_progress.as_deref(), total)
    }

    /// Called by dialects right after taking the migration lock. Runs the
    /// `after_migration_lock` hook when the `test-hooks` feature is enabled;
    /// a no-op otherwise.
    pub fn notify_migration_locked(&self) {
        #[cfg(feature = "test-hooks")]
        if let Some(hook) = &self.after_migration_lock {
            hook();
        }
    }
}

impl fmt::Debug for EnsureOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EnsureOptions")
            .field("declarations", &self.declarations)
            .field("unfinished", &self.unfinished)
            .field("refuse_unfinished", &self.refuse_unfinished)
            .field("rewrite_progress", &self.rewrite_progress.is_some())
            .finish_non_exhaustive()
    }
}

/// What one `ensure_schema` call did to the database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EnsureOutcome {
    /// The database was already at the version (possibly because another
    /// process migrated it first); nothing was migrated by this call.
    Verified,
    /// Same version; this call ran the one-time legacy-shape upgrade.
    Upgraded,
    /// This call ran the migration transaction (a fresh database or a bump).
    Migrated,
}

impl EnsureOutcome {
    /// Whether this call changed the database's schema.
    pub fn applied(self) -> bool {
        !matches!(self, Self::Verified)
    }
}

/// The stored schema marker (`tables.md` §3.1), for operators.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaMarker {
    /// Stored schema version.
    pub schema_version: i64,
    /// Stored layouts text (verbatim).
    pub layouts: String,
    /// Database-wide writer fence.
    pub required_writer_version: Option<i32>,
}

/// Server-side storage of one database: every pool-level method of the contract.
///
/// Implementations are `Send + Sync` and shared behind `Arc`. Every call is
/// synchronous and blocks until the database answers or a configured timeout
/// expires (`sync.storage.busy`).
pub trait ServerStorage: Send + Sync {
    // ---- §4.1 schema lifecycle -------------------------------------------

    /// The optional groups this storage implements.
    fn capabilities(&self) -> Capabilities;
    /// Brings the database to `schema.version` or proves it is there, then
    /// records the schema on this instance (`schema-and-migrations.md` §9).
    fn ensure_schema(&self, schema: &CompiledSchema, opts: &EnsureOptions) -> Result<()>;
    /// [`ServerStorage::ensure_schema`], reporting what this call did: operator tools
    /// tell a migration they ran from one another process ran first.
    fn ensure_schema_outcome(
        &self,
        schema: &CompiledSchema,
        opts: &EnsureOptions,
    ) -> Result<EnsureOutcome>;
    /// The running version: `None` before the first successful `ensure_schema`.
    fn ensured_version(&self) -> Option<i32>;
    /// The schema last ensured on this instance.
    fn ensured_schema(&self) -> Option<Arc<CompiledSchema>>;
    /// The stored schema marker, `None` on a database never bumped.
    fn read_schema_marker(&self) -> Result<Option<SchemaMarker>>;

    // ---- §4.2 partition registry -----------------------------------------

    /// Registers a partition (or refreshes its activity) and returns the persisted entry.
    fn touch_partition(
        &self,
        partition: &str,
        authenticated_at_ms: i64,
        initial_log_epoch: &str,
    ) -> Result<PartitionRegistryEntry>;
    /// Replaces the log epoch after a restore; deletes the partition's client records.
    fn rotate_partition_log_epoch(
        &self,
        partition: &str,
        log_epoch: &str,
        authenticated_at_ms: i64,
    ) -> Result<PartitionRegistryEntry>;
    /// The registry epoch, without refreshing activity.
    fn get_partition_log_epoch(&self, partition: &str) -> Result<Option<String>>;
    /// The round entry: [`touch_partition`](Self::touch_partition), then
    /// [`read_serve_gate`](Self::read_serve_gate) of
    /// `running_schema_version`, [`get_client_record`](Self::get_client_record)
    /// of the client and [`get_push_result`](Self::get_push_result) of each
    /// requested commit id, and — when asked — the log bounds
    /// ([`get_max_commit_seq`](Self::get_max_commit_seq),
    /// [`get_horizon_seq`](Self::get_horizon_seq)).
    ///
    /// Batch form for dialects that pay per round trip or per commit: a
    /// dialect may serve all of it in one statement, provided the result
    /// is one that the single methods called in that order could have
    /// returned — except that a registry entry fresher than
    /// `refresh_after_ms` may be returned as stored instead of refreshed
    /// (no write at all when the partition is busy). The touch, the gate and the record fail the call as the
    /// single methods do; each push-result read's own error is returned in
    /// [`RoundEntry::push_results`]. The default calls the single methods
    /// in that order, so a dialect needs nothing to support it.
    fn enter_round(&self, request: &RoundEntryRequest) -> Result<RoundEntry> {
        let registry = self.touch_partition(
            &request.partition,
            request.authenticated_at_ms,
            &request.initial_log_epoch,
        )?;
        let gate = self.read_serve_gate(&request.partition, request.running_schema_version)?;
        let client_record = self.get_client_record(&request.partition, &request.client_id)?;
        let push_results = request
            .client_commit_ids
            .iter()
            .map(|id| self.get_push_result(&request.partition, &request.client_id, id))
            .collect();
        let log_bounds = if request.log_bounds {
            Some(LogBounds {
                max_commit_seq: self.get_max_commit_seq(&request.partition)?,
                horizon_seq: self.get_horizon_seq(&request.partition)?,
            })
        } else {
            None
        };
        Ok(RoundEntry {
            registry,
            gate,
            client_record,
            push_results,
            log_bounds,
        })
    }
    /// Every registry entry, byte-ordered by partition.
    fn list_partition_registry(&self) -> Result<Vec<PartitionRegistryEntry>>;
    /// The registered partition names, byte-ordered.
    fn list_partitions(&self) -> Result<Vec<String>>;

    // ---- §4.3 transactions -----------------------------------------------

    /// Opens a transaction bound to `partition`. Dropping it rolls back.
    fn begin(&self, partition: &str) -> Result<Box<dyn StorageTransaction + '_>>;

    // ---- §4.4 commit log, horizon, pruning -------------------------------

    /// The allocated commit counter (0 for an unknown partition).
    fn get_max_commit_seq(&self, partition: &str) -> Result<i64>;
    /// The horizon (0 by default).
    fn get_horizon_seq(&self, partition: &str) -> Result<i64>;
    /// Raises the horizon monotonically.
    fn set_horizon_seq(&self, partition: &str, seq: i64) -> Result<()>;
    /// Atomic, epoch-fenced pruning through `query.through_seq`.
    fn prune_commits_through(
        &self,
        partition: &str,
        query: &CommitPruneQuery,
    ) -> Result<CommitPruneResult>;
    /// Newest retained `commit_seq` created strictly before the bound; 0 if none.
    fn get_commit_seq_before(&self, partition: &str, created_before_ms: i64) -> Result<i64>;

    // ---- §4.5–§4.7 reads -------------------------------------------------

    /// The committed current row.
    fn get_row(&self, partition: &str, table: &str, row_id: &str) -> Result<Option<StoredRow>>;
    /// The stored push result of a commit key.
    fn get_push_result(
        &self,
        partition: &str,
        client_id: &str,
        client_commit_id: &str,
    ) -> Result<Option<StoredPushResult>>;
    /// Scope-filtered commits of one table, oldest first; commits never split.
    fn read_commit_window(
        &self,
        partition: &str,
        query: &CommitWindowQuery,
    ) -> Result<Vec<StoredCommit>>;
    /// Newest `commit_seq` with a change-scope entry matching the candidate variable.
    fn latest_scoped_change_seq(
        &self,
        partition: &str,
        table: &str,
        filter: &ScopeFilter,
    ) -> Result<i64>;
    /// Scope-filtered current rows in byte order of row id.
    fn scan_rows(&self, partition: &str, query: &RowScanQuery) -> Result<Vec<StoredRow>>;
    /// [`Self::scan_rows`] as a bootstrap serves it: the same rows, after
    /// the same checks and errors, without their scopes and column
    /// versions. A storage may verify candidates without building each
    /// row's scope map; the default projects `scan_rows`.
    fn scan_row_payloads(&self, partition: &str, query: &RowScanQuery) -> Result<Vec<ScannedRow>> {
        Ok(self
            .scan_rows(partition, query)?
            .into_iter()
            .map(ScannedRow::from)
            .collect())
    }

    // ---- §4.8 trusted lookups and partition scans ------------------------

    /// Exact lookup through a declared index (capability `IndexScan`).
    fn scan_rows_by_index(
        &self,
        partition: &str,
        query: &IndexRowScanQuery,
    ) -> Result<Vec<StoredRow>> {
        let _ = (partition, query);
        Err(Capability::IndexScan.unsupported())
    }
    /// Keyset scan of every row of one table in one partition.
    fn scan_partition_rows(
        &self,
        partition: &str,
        table: &str,
        after_row_id: Option<&str>,
        limit: i64,
    ) -> Result<Vec<StoredRow>>;

    // ---- §4.9 clients and cursors ----------------------------------------

    /// One client record.
    fn get_client_record(&self, partition: &str, client_id: &str) -> Result<Option<ClientRecord>>;
    /// Inserts or fully replaces a client record.
    ///
    /// A write that only refreshes an existing record of the same actor is
    /// soft state (the client sends it again on every pull): a dialect may
    /// commit it without waiting for durability, as long as it stays
    /// consistent and ordered — a crash may then leave the record as its
    /// previous durable write left it, never a push, row or actor binding
    /// (`docs/decisions.md`, "Client records without an fsync per pull").
    fn put_client_record(&self, partition: &str, record: &ClientRecord) -> Result<()>;
    /// Cursor summaries ordered by client id.
    fn list_client_cursors(&self, partition: &str) -> Result<Vec<ClientCursorInfo>>;
    /// Actor- and epoch-guarded monotonic cursor update; returns whether the guard matched.
    /// Soft state like a refresh in [`ServerStorage::put_client_record`].
    fn advance_client_cursor(
        &self,
        partition: &str,
        client_id: &str,
        actor_id: &str,
        log_epoch: &str,
        cursor: i64,
        updated_at_ms: i64,
    ) -> Result<bool>;
    /// Unguarded monotonic cursor update; false for a missing record.
    fn update_client_cursor(
        &self,
        partition: &str,
        client_id: &str,
        cursor: i64,
        updated_at_ms: i64,
    ) -> Result<bool>;
    /// Minimum cursor of records updated at or after `cutoff_ms`.
    fn get_active_client_cursor_floor(
        &self,
        partition: &str,
        cutoff_ms: i64,
    ) -> Result<Option<i64>>;

    // ---- §4.10 reactions (capability `Reactions`) ------------------------

    /// Leases due reactions.
    fn claim_reactions(
        &self,
        partition: &str,
        query: &ReactionClaimQuery,
    ) -> Result<Vec<StoredReaction>> {
        let _ = (partition, query);
        Err(Capability::Reactions.unsupported())
    }
    /// Owner-guarded completion.
    fn complete_reaction(
        &self,
        partition: &str,
        key: &str,
        lease_owner: &str,
        completed_at_ms: i64,
    ) -> Result<bool> {
        let _ = (partition, key, lease_owner, completed_at_ms);
        Err(Capability::Reactions.unsupported())
    }
    /// Owner-guarded lease extension.
    fn extend_reaction_lease(
        &self,
        partition: &str,
        key: &str,
        lease_owner: &str,
        lease_expires_at_ms: i64,
    ) -> Result<bool> {
        let _ = (partition, key, lease_owner, lease_expires_at_ms);
        Err(Capability::Reactions.unsupported())
    }
    /// Owner-guarded failure (retry or dead-letter).
    fn fail_reaction(
        &self,
        partition: &str,
        key: &str,
        update: &ReactionFailureUpdate,
    ) -> Result<bool> {
        let _ = (partition, key, update);
        Err(Capability::Reactions.unsupported())
    }
    /// Re-queues a dead-letter reaction.
    fn retry_reaction(&self, partition: &str, key: &str, now_ms: i64) -> Result<bool> {
        let _ = (partition, key, now_ms);
        Err(Capability::Reactions.unsupported())
    }
    /// One reaction.
    fn get_reaction(&self, partition: &str, key: &str) -> Result<Option<StoredReaction>> {
        let _ = (partition, key);
        Err(Capability::Reactions.unsupported())
    }
    /// Reactions newest first.
    fn list_reactions(
        &self,
        partition: &str,
        query: &ReactionListQuery,
    ) -> Result<Vec<StoredReaction>> {
        let _ = (partition, query);
        Err(Capability::Reactions.unsupported())
    }
    /// Deletes aged completed and dead-letter reactions.
    fn prune_reactions(
        &self,
        partition: &str,
        query: &ReactionPruneQuery,
    ) -> Result<PrunedReactionCounts> {
        let _ = (partition, query);
        Err(Capability::Reactions.unsupported())
    }

    // ---- §4.11 blob references (capability `BlobRefs`) -------------------

    /// Rows whose reference set contains the blob, ordered `(table, row_id)`.
    fn list_rows_referencing_blob(
        &self,
        partition: &str,
        blob_id: &str,
    ) -> Result<Vec<BlobReferencingRow>> {
        let _ = (partition, blob_id);
        Err(Capability::BlobRefs.unsupported())
    }
    /// Distinct referenced blob ids, byte-ordered.
    fn list_referenced_blob_ids(&self, partition: &str) -> Result<Vec<String>> {
        let _ = partition;
        Err(Capability::BlobRefs.unsupported())
    }

    // ---- §4.12 admin (capability `Admin`) --------------------------------

    /// Client records, newest update first.
    fn list_client_records(&self, partition: &str) -> Result<Vec<ClientRecord>> {
        let _ = partition;
        Err(Capability::Admin.unsupported())
    }
    /// Commit metadata, newest first.
    fn list_commit_metadata(
        &self,
        partition: &str,
        query: &CommitMetadataQuery,
    ) -> Result<Vec<CommitMetadata>> {
        let _ = (partition, query);
        Err(Capability::Admin.unsupported())
    }
    /// Commits touching one scope value, newest first.
    fn scope_activity(
        &self,
        partition: &str,
        query: &ScopeActivityQuery,
    ) -> Result<Vec<ScopeCommitActivity>> {
        let _ = (partition, query);
        Err(Capability::Admin.unsupported())
    }
    /// `(server_version, scopes)` of a row without decoding its payload.
    fn get_row_scopes(
        &self,
        partition: &str,
        table: &str,
        row_id: &str,
    ) -> Result<Option<(i64, StoredScopes)>> {
        let _ = (partition, table, row_id);
        Err(Capability::Admin.unsupported())
    }

    /// Operator read: retained commits with `commit_seq > after_seq`, oldest
    /// first, each with every change (all tables), at most `limit` (1..=1000,
    /// `invalid_limit`). Needs no ensured schema. **(decision: added for the
    /// operator tool)**
    fn read_commits(
        &self,
        partition: &str,
        after_seq: i64,
        limit: i64,
    ) -> Result<Vec<CommitRecord>> {
        let _ = (partition, after_seq, limit);
        Err(Capability::Admin.unsupported())
    }
    /// Operator read: keyset scan of a table named in the **stored** layouts
    /// (no ensured schema needed; other names → `unknown_table`), byte order,
    /// at most `limit` (1..=1000). **(decision: added for the operator tool)**
    fn inspect_table_rows(
        &self,
        partition: &str,
        table: &str,
        after_row_id: Option<&str>,
        limit: i64,
    ) -> Result<Vec<StoredRow>> {
        let _ = (partition, table, after_row_id, limit);
        Err(Capability::Admin.unsupported())
    }

    // ---- §4.13 registered queries (capability `AuthoritativeQuery`) ------

    /// A registered query in one snapshot with the serve gate and `max_commit_seq`.
    fn query_authoritative(
        &self,
        partition: &str,
        request: &AuthoritativeQueryRequest,
        ctx: &ServeContext,
    ) -> Result<AuthoritativeQueryResult> {
        let _ = (partition, request, ctx);
        Err(Capability::AuthoritativeQuery.unsupported())
    }

    // ---- §4.14 RFC 0007 --------------------------------------------------

    /// Every checkpoint of the partition, ordered by name.
    fn read_checkpoints(&self, partition: &str) -> Result<Vec<StoredCheckpoint>>;
    /// One checkpoint.
    fn read_checkpoint(&self, partition: &str, name: &str) -> Result<Option<StoredCheckpoint>>;
    /// Database-wide non-activated checkpoints at `schema_version`, ordered `(partition, name)`.
    fn list_pending_checkpoints(&self, schema_version: i32) -> Result<Vec<CheckpointKey>>;
    /// Database-wide non-activated checkpoints of versions below
    /// `schema_version`, ordered `(partition, name)`: what a bump to
    /// `schema_version` must finish or resolve (`sync_core::resolve_unfinished`).
    fn list_unfinished_checkpoints(&self, schema_version: i32) -> Result<Vec<StoredCheckpoint>>;
    /// The serve-gate token, read in one snapshot; never cached.
    fn read_serve_gate(&self, partition: &str, running_schema_version: i32) -> Result<ServeGate>;
    /// Declares a checkpoint at the current marker version and raises the partition fence.
    fn declare_checkpoint(
        &self,
        partition: &str,
        name: &str,
        schema_version: i32,
        now_ms: i64,
    ) -> Result<StoredCheckpoint>;
    /// Claims the checkpoint: `owner_epoch + 1`, state `backfilling`.
    fn claim_checkpoint(
        &self,
        partition: &str,
        name: &str,
        schema_version: i32,
        now_ms: i64,
    ) -> Result<StoredCheckpoint>;
    /// Compare-and-set progress; false when superseded or finished.
    fn advance_checkpoint(
        &self,
        partition: &str,
        name: &str,
        owner_epoch: i64,
        watermark: i64,
        observed_rows: i64,
        now_ms: i64,
    ) -> Result<bool>;
    /// Activates under the partition write lock after re-checking coverage.
    fn activate_checkpoint(
        &self,
        partition: &str,
        name: &str,
        owner_epoch: i64,
        watermark: i64,
        sources: &[String],
        now_ms: i64,
    ) -> Result<ActivationOutcome>;
    /// Highest retained `commit_seq` among changes of `tables`; 0 when none.
    fn source_coverage_seq(&self, partition: &str, tables: &[String]) -> Result<i64>;
    /// Whether retained changes of `tables` exist above `seq`, or coverage is unknowable.
    fn has_source_changes_above(
        &self,
        partition: &str,
        tables: &[String],
        seq: i64,
    ) -> Result<Coverage>;
    /// Retained changes of `tables` above `after_seq`, ordered `(commit_seq, idx)`.
    fn list_source_changes(
        &self,
        partition: &str,
        tables: &[String],
        after_seq: i64,
        limit: i64,
    ) -> Result<Vec<SourceChange>>;
    /// The effective writer fence of the partition.
    fn required_writer_version(&self, partition: &str) -> Result<Option<i32>>;
    /// Whether the database enforces the writer fence for every writer
    /// (`tables.md` §4.2a): the state of the storage's fence trigger, read
    /// from the catalog without installing or repairing anything. An
    /// operator read: a storage that cannot tell returns
    /// `sync.storage.capability_unsupported`.
    fn writer_fence_trigger(&self) -> Result<FenceTriggerState> {
        Err(
            crate::error::Error::new(crate::error::ErrorCode::CapabilityUnsupported)
                .detail("capability", "writer_fence_trigger"),
        )
    }
    /// The store of bootstrap segments in this storage's own database
    /// ([`SegmentStore`]): every instance on one database sees the same
    /// segments. `None` (the default body) for a storage that keeps none;
    /// a server then brings its own store (e.g. a
    /// [`MemorySegmentStore`](crate::segments::MemorySegmentStore)).
    fn segment_store(&self) -> Option<&dyn SegmentStore> {
        None
    }
    /// Where this process hears of the commits other processes append to
    /// the same database ([`CommitFeed`](crate::CommitFeed)), for realtime
    /// fanout across processes. `None` (the default body) for a storage
    /// that serves one process or does not announce its commits.
    fn commit_feed(&self) -> Option<std::sync::Arc<dyn crate::CommitFeed>> {
        None
    }
}
