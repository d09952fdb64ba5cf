//! The idempotency fault of a test instance: a storage front that
//! delegates every call, except that once armed the next idempotency
//! lookup (a pool `get_push_result`, or the first push result a round
//! entry reads) fails as an unreadable stored result,
//! `sync.idempotency_cache_miss`. The engine answers that commit as a
//! retryable cache miss and applies nothing; the switch disarms itself.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use sync_core::segments::SegmentStore;
use sync_core::{
    ActivationOutcome, AuthoritativeQueryRequest, AuthoritativeQueryResult, BlobReferencingRow,
    Capabilities, CheckpointKey, ClientCursorInfo, ClientRecord, CommitMetadata,
    CommitMetadataQuery, CommitPruneQuery, CommitPruneResult, CommitRecord, CommitWindowQuery,
    CompiledSchema, Coverage, EnsureOptions, EnsureOutcome, Error, ErrorCode, FenceTriggerState,
    IndexRowScanQuery, PartitionRegistryEntry, PrunedReactionCounts, ReactionClaimQuery,
    ReactionFailureUpdate, ReactionListQuery, ReactionPruneQuery, Result, RoundEntry,
    RoundEntryRequest, RowScanQuery, SchemaMarker, ScopeActivityQuery, ScopeCommitActivity,
    ScopeFilter, ServeContext, ServeGate, ServerStorage, SourceChange, StorageTransaction,
    StoredCheckpoint, StoredCommit, StoredPushResult, StoredReaction, StoredRow, StoredScopes,
};

/// Delegates to `inner`; fails the next idempotency lookup once armed.
///
/// It is the storage an instance's engine holds, and the last handle of the
/// wrapped storage: dropped on the async runtime (a round or a response
/// that outlived its instance), it drops the storage on the blocking pool,
/// where a dialect's synchronous client may shut down its own runtime.
pub(crate) struct IdempotencyFault {
    inner: Option<Arc<dyn ServerStorage>>,
    armed: Arc<AtomicBool>,
}

impl Drop for IdempotencyFault {
    fn drop(&mut self) {
        let Some(inner) = self.inner.take() else {
            return;
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn_blocking(move || drop(inner))),
            Err(_) => drop(inner),
        }
    }
}

impl IdempotencyFault {
    /// A front over `inner` armed by `armed`.
    pub(crate) fn new(inner: Arc<dyn ServerStorage>, armed: Arc<AtomicBool>) -> Self {
        Self {
            inner: Some(inner),
            armed,
        }
    }

    /// The wrapped storage (present until dropped).
    fn inner(&self) -> &dyn ServerStorage {
        self.inner
            .as_deref()
            .expect("the storage is present until the front is dropped")
    }

    /// Whether this lookup fails (disarming the switch).
    fn take(&self) -> bool {
        self.armed.swap(false, Ordering::SeqCst)
    }
}

fn cache_miss() -> Error {
    Error::new(ErrorCode::IdempotencyCacheMiss).detail("reason", "injected")
}

impl ServerStorage for IdempotencyFault {
    fn capabilities(&self) -> Capabilities {
        self.inner().capabilities()
    }
    fn ensure_schema(&self, schema: &CompiledSchema, opts: &EnsureOptions) -> Result<()> {
        self.inner().ensure_schema(schema, opts)
    }
    fn ensure_schema_outcome(
        &self,
        schema: &CompiledSchema,
        opts: &EnsureOptions,
    ) -> Result<EnsureOutcome> {
        self.inner().ensure_schema_outcome(schema, opts)
    }
    fn list_unfinished_checkpoints(&self, schema_version: i32) -> Result<Vec<StoredCheckpoint>> {
        self.inner().list_unfinished_checkpoints(schema_version)
    }
    fn ensured_version(&self) -> Option<i32> {
        self.inner().ensured_version()
    }
    fn ensured_schema(&self) -> Option<Arc<CompiledSchema>> {
        self.inner().ensured_schema()
    }
    fn read_schema_marker(&self) -> Result<Option<SchemaMarker>> {
        self.inner().read_schema_marker()
    }
    fn touch_partition(
        &self,
        partition: &str,
        authenticated_at_ms: i64,
        initial_log_epoch: &str,
    ) -> Result<PartitionRegistryEntry> {
        self.inner()
            .touch_partition(partition, authenticated_at_ms, initial_log_epoch)
    }
    fn rotate_partition_log_epoch(
        &self,
        partition: &str,
        log_epoch: &str,
        authenticated_at_ms: i64,
    ) -> Result<PartitionRegistryEntry> {
        self.inner()
            .rotate_partition_log_epoch(partition, log_epoch, authenticated_at_ms)
    }
    fn get_partition_log_epoch(&self, partition: &str) -> Result<Option<String>> {
        self.inner().get_partition_log_epoch(partition)
    }
    fn list_partition_registry(&self) -> Result<Vec<PartitionRegistryEntry>> {
        self.inner().list_partition_registry()
    }
    fn list_partitions(&self) -> Result<Vec<String>> {
        self.inner().list_partitions()
    }
    fn begin(&self, partition: &str) -> Result<Box<dyn StorageTransaction + '_>> {
        self.inner().begin(partition)
    }
    fn enter_round(&self, request: &RoundEntryRequest) -> Result<RoundEntry> {
        let mut entry = self.inner().enter_round(request)?;
        if let Some(first) = entry.push_results.first_mut() {
            if self.take() {
                *first = Err(cache_miss());
            }
        }
        Ok(entry)
    }
    fn get_max_commit_seq(&self, partition: &str) -> Result<i64> {
        self.inner().get_max_commit_seq(partition)
    }
    fn get_horizon_seq(&self, partition: &str) -> Result<i64> {
        self.inner().get_horizon_seq(partition)
    }
    fn set_horizon_seq(&self, partition: &str, seq: i64) -> Result<()> {
        self.inner().set_horizon_seq(partition, seq)
    }
    fn prune_commits_through(
        &self,
        partition: &str,
        query: &CommitPruneQuery,
    ) -> Result<CommitPruneResult> {
        self.inner().prune_commits_through(partition, query)
    }
    fn get_commit_seq_before(&self, partition: &str, created_before_ms: i64) -> Result<i64> {
        self.inner()
            .get_commit_seq_before(partition, created_before_ms)
    }
    fn get_row(&self, partition: &str, table: &str, row_id: &str) -> Result<Option<StoredRow>> {
        self.inner().get_row(partition, table, row_id)
    }
    fn get_push_result(
        &self,
        partition: &str,
        client_id: &str,
        client_commit_id: &str,
    ) -> Result<Option<StoredPushResult>> {
        if self.take() {
            return Err(cache_miss());
        }
        self.inner()
            .get_push_result(partition, client_id, client_commit_id)
    }
    fn read_commit_window(
        &self,
        partition: &str,
        query: &CommitWindowQuery,
    ) -> Result<Vec<StoredCommit>> {
        self.inner().read_commit_window(partition, query)
    }
    fn latest_scoped_change_seq(
        &self,
        partition: &str,
        table: &str,
        filter: &ScopeFilter,
    ) -> Result<i64> {
        self.inner()
            .latest_scoped_change_seq(partition, table, filter)
    }
    fn scan_rows(&self, partition: &str, query: &RowScanQuery) -> Result<Vec<StoredRow>> {
        self.inner().scan_rows(partition, query)
    }
    fn scan_row_payloads(
        &self,
        partition: &str,
        query: &RowScanQuery,
    ) -> Result<Vec<sync_core::ScannedRow>> {
        self.inner().scan_row_payloads(partition, query)
    }
    fn scan_rows_by_index(
        &self,
        partition: &str,
        query: &IndexRowScanQuery,
    ) -> Result<Vec<StoredRow>> {
        self.inner().scan_rows_by_index(partition, query)
    }
    fn scan_partition_rows(
        &self,
        partition: &str,
        table: &str,
        after_row_id: Option<&str>,
        limit: i64,
    ) -> Result<Vec<StoredRow>> {
        self.inner()
            .scan_partition_rows(partition, table, after_row_id, limit)
    }
    fn get_client_record(&self, partition: &str, client_id: &str) -> Result<Option<ClientRecord>> {
        self.inner().get_client_record(partition, client_id)
    }
    fn put_client_record(&self, partition: &str, record: &ClientRecord) -> Result<()> {
        self.inner().put_client_record(partition, record)
    }
    fn list_client_cursors(&self, partition: &str) -> Result<Vec<ClientCursorInfo>> {
        self.inner().list_client_cursors(partition)
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
        self.inner().advance_client_cursor(
            partition,
            client_id,
            actor_id,
            log_epoch,
            cursor,
            updated_at_ms,
        )
    }
    fn update_client_cursor(
        &self,
        partition: &str,
        client_id: &str,
        cursor: i64,
        updated_at_ms: i64,
    ) -> Result<bool> {
        self.inner()
            .update_client_cursor(partition, client_id, cursor, updated_at_ms)
    }
    fn get_active_client_cursor_floor(
        &self,
        partition: &str,
        cutoff_ms: i64,
    ) -> Result<Option<i64>> {
        self.inner()
            .get_active_client_cursor_floor(partition, cutoff_ms)
    }
    fn claim_reactions(
        &self,
        partition: &str,
        query: &ReactionClaimQuery,
    ) -> Result<Vec<StoredReaction>> {
        self.inner().claim_reactions(partition, query)
    }
    fn complete_reaction(
        &self,
        partition: &str,
        key: &str,
        lease_owner: &str,
        completed_at_ms: i64,
    ) -> Result<bool> {
        self.inner()
            .complete_reaction(partition, key, lease_owner, completed_at_ms)
    }
    fn extend_reaction_lease(
        &self,
        partition: &str,
        key: &str,
        lease_owner: &str,
        lease_expires_at_ms: i64,
    ) -> Result<bool> {
        self.inner()
            .extend_reaction_lease(partition, key, lease_owner, lease_expires_at_ms)
    }
    fn fail_reaction(
        &self,
        partition: &str,
        key: &str,
        update: &ReactionFailureUpdate,
    ) -> Result<bool> {
        self.inner().fail_reaction(partition, key, update)
    }
    fn retry_reaction(&self, partition: &str, key: &str, now_ms: i64) -> Result<bool> {
        self.inner().retry_reaction(partition, key, now_ms)
    }
    fn get_reaction(&self, partition: &str, key: &str) -> Result<Option<StoredReaction>> {
        self.inner().get_reaction(partition, key)
    }
    fn list_reactions(
        &self,
        partition: &str,
        query: &ReactionListQuery,
    ) -> Result<Vec<StoredReaction>> {
        self.inner().list_reactions(partition, query)
    }
    fn prune_reactions(
        &self,
        partition: &str,
        query: &ReactionPruneQuery,
    ) -> Result<PrunedReactionCounts> {
        self.inner().prune_reactions(partition, query)
    }
    fn list_rows_referencing_blob(
        &self,
        partition: &str,
        blob_id: &str,
    ) -> Result<Vec<BlobReferencingRow>> {
        self.inner().list_rows_referencing_blob(partition, blob_id)
    }
    fn list_referenced_blob_ids(&self, partition: &str) -> Result<Vec<String>> {
        self.inner().list_referenced_blob_ids(partition)
    }
    fn list_client_records(&self, partition: &str) -> Result<Vec<ClientRecord>> {
        self.inner().list_client_records(partition)
    }
    fn list_commit_metadata(
        &self,
        partition: &str,
        query: &CommitMetadataQuery,
    ) -> Result<Vec<CommitMetadata>> {
        self.inner().list_commit_metadata(partition, query)
    }
    fn scope_activity(
        &self,
        partition: &str,
        query: &ScopeActivityQuery,
    ) -> Result<Vec<ScopeCommitActivity>> {
        self.inner().scope_activity(partition, query)
    }
    fn get_row_scopes(
        &self,
        partition: &str,
        table: &str,
        row_id: &str,
    ) -> Result<Option<(i64, StoredScopes)>> {
        self.inner().get_row_scopes(partition, table, row_id)
    }
    fn read_commits(
        &self,
        partition: &str,
        after_seq: i64,
        limit: i64,
    ) -> Result<Vec<CommitRecord>> {
        self.inner().read_commits(partition, after_seq, limit)
    }
    fn inspect_table_rows(
        &self,
        partition: &str,
        table: &str,
        after_row_id: Option<&str>,
        limit: i64,
    ) -> Result<Vec<StoredRow>> {
        self.inner()
            .inspect_table_rows(partition, table, after_row_id, limit)
    }
    fn query_authoritative(
        &self,
        partition: &str,
        request: &AuthoritativeQueryRequest,
        ctx: &ServeContext,
    ) -> Result<AuthoritativeQueryResult> {
        self.inner().query_authoritative(partition, request, ctx)
    }
    fn read_checkpoints(&self, partition: &str) -> Result<Vec<StoredCheckpoint>> {
        self.inner().read_checkpoints(partition)
    }
    fn read_checkpoint(&self, partition: &str, name: &str) -> Result<Option<StoredCheckpoint>> {
        self.inner().read_checkpoint(partition, name)
    }
    fn list_pending_checkpoints(&self, schema_version: i32) -> Result<Vec<CheckpointKey>> {
        self.inner().list_pending_checkpoints(schema_version)
    }
    fn read_serve_gate(&self, partition: &str, running_schema_version: i32) -> Result<ServeGate> {
        self.inner()
            .read_serve_gate(partition, running_schema_version)
    }
    fn declare_checkpoint(
        &self,
        partition: &str,
        name: &str,
        schema_version: i32,
        now_ms: i64,
    ) -> Result<StoredCheckpoint> {
        self.inner()
            .declare_checkpoint(partition, name, schema_version, now_ms)
    }
    fn claim_checkpoint(
        &self,
        partition: &str,
        name: &str,
        schema_version: i32,
        now_ms: i64,
    ) -> Result<StoredCheckpoint> {
        self.inner()
            .claim_checkpoint(partition, name, schema_version, now_ms)
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
        self.inner().advance_checkpoint(
            partition,
            name,
            owner_epoch,
            watermark,
            observed_rows,
            now_ms,
        )
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
        self.inner()
            .activate_checkpoint(partition, name, owner_epoch, watermark, sources, now_ms)
    }
    fn source_coverage_seq(&self, partition: &str, tables: &[String]) -> Result<i64> {
        self.inner().source_coverage_seq(partition, tables)
    }
    fn has_source_changes_above(
        &self,
        partition: &str,
        tables: &[String],
        seq: i64,
    ) -> Result<Coverage> {
        self.inner()
            .has_source_changes_above(partition, tables, seq)
    }
    fn list_source_changes(
        &self,
        partition: &str,
        tables: &[String],
        after_seq: i64,
        limit: i64,
    ) -> Result<Vec<SourceChange>> {
        self.inner()
            .list_source_changes(partition, tables, after_seq, limit)
    }
    fn required_writer_version(&self, partition: &str) -> Result<Option<i32>> {
        self.inner().required_writer_version(partition)
    }
    fn writer_fence_trigger(&self) -> Result<FenceTriggerState> {
        self.inner().writer_fence_trigger()
    }
    fn segment_store(&self) -> Option<&dyn SegmentStore> {
        self.inner().segment_store()
    }
    fn commit_feed(&self) -> Option<Arc<dyn sync_core::CommitFeed>> {
        self.inner().commit_feed()
    }
}
