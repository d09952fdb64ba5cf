//! A storage wrapper for E-048 and C-349: every call delegates to the
//! wrapped storage, except that a transaction's `scan_rows` fails with
//! `sync.storage.busy` (a reader call that poisons the push transaction;
//! E-048 also fails it with `backend` and `connection_lost`),
//! and the batch methods `enter_round`, `begin_push` and
//! `stage_client_record` keep their default bodies (the path of a dialect
//! that does not batch or stage). For E-038 it can also fail the reads of
//! stored push results with `busy`, and for E-049 a transaction's row
//! writes (`upsert_row`).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use sync_core::{
    ActivationOutcome, AuthoritativeQueryRequest, AuthoritativeQueryResult, BlobReferencingRow,
    Capabilities, CheckpointKey, ClientCursorInfo, ClientRecord, CommitMetadata,
    CommitMetadataQuery, CommitPruneQuery, CommitPruneResult, CommitRecord, CommitWindowQuery,
    CompiledSchema, Coverage, EnsureOptions, EnsureOutcome, Error, ErrorCode, IndexRowScanQuery,
    NewCommit, NewReaction, PartitionRegistryEntry, PrunedReactionCounts, ReactionClaimQuery,
    ReactionFailureUpdate, ReactionListQuery, ReactionPruneQuery, Result, RowScanQuery,
    SchemaMarker, ScopeActivityQuery, ScopeCommitActivity, ScopeFilter, ServeContext, ServeGate,
    ServerStorage, SourceChange, StorageTransaction, StoredCheckpoint, StoredCommit,
    StoredPushResult, StoredReaction, StoredRow, StoredScopes,
};

/// Delegates to `inner`; transactions fail `scan_rows` with `busy`.
pub(crate) struct BusyScans {
    inner: Arc<dyn ServerStorage>,
    push_results: BusyPushResults,
    row_writes: bool,
    /// The code a transaction's `scan_rows` fails with.
    scan_error: ErrorCode,
    /// Set once a transaction committed a rejected push result.
    rejected: AtomicBool,
    /// Calls of the storage's own `get_push_result` (not a transaction's).
    push_result_reads: AtomicUsize,
    /// Transactions begun so far.
    begins: AtomicUsize,
    /// The ordinal (from 0, in `begin` order) of each transaction asked to
    /// stage a client record; the wrapper declines each, as the default
    /// body does.
    stage_requests: Mutex<Vec<usize>>,
}

impl BusyScans {
    /// Wraps `inner`: only a transaction's `scan_rows` fails.
    pub(crate) fn new(inner: Arc<dyn ServerStorage>) -> Self {
        Self {
            inner,
            push_results: BusyPushResults::Never,
            row_writes: false,
            scan_error: ErrorCode::Busy,
            rejected: AtomicBool::new(false),
            push_result_reads: AtomicUsize::new(0),
            begins: AtomicUsize::new(0),
            stage_requests: Mutex::new(Vec::new()),
        }
    }

    /// Fails these reads of a stored push result too.
    pub(crate) fn failing_push_results(mut self, which: BusyPushResults) -> Self {
        self.push_results = which;
        self
    }

    /// How many times the storage's own `get_push_result` was called (the
    /// default `enter_round` reads each pushed commit's result through it).
    pub(crate) fn push_result_reads(&self) -> usize {
        self.push_result_reads.load(Ordering::SeqCst)
    }

    /// The ordinals of the transactions asked to stage a client record.
    pub(crate) fn stage_requests(&self) -> Vec<usize> {
        self.stage_requests
            .lock()
            .map(|list| list.clone())
            .unwrap_or_default()
    }

    /// Fails a transaction's `scan_rows` with `code` instead of `busy`.
    pub(crate) fn failing_scans_with(mut self, code: ErrorCode) -> Self {
        self.scan_error = code;
        self
    }

    /// Fails a transaction's `upsert_row` with `busy` too.
    pub(crate) fn failing_row_writes(mut self) -> Self {
        self.row_writes = true;
        self
    }
}

/// Which reads of a stored push result a [`BusyScans`] fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BusyPushResults {
    /// None: every read delegates.
    Never,
    /// The storage's own read (the round entry's, step P1), with `busy`.
    AtEntry,
    /// A transaction's read (the push prelude's, step P6), with `busy`.
    InTransaction,
    /// The storage's own read once a transaction has committed a rejected
    /// result (the canonical rejection's, step R3), with this code.
    AfterRejection(ErrorCode),
}

struct BusyTx<'a> {
    inner: Box<dyn StorageTransaction + 'a>,
    push_results: BusyPushResults,
    row_writes: bool,
    scan_error: ErrorCode,
    rejected: &'a AtomicBool,
    ordinal: usize,
    stage_requests: &'a Mutex<Vec<usize>>,
}

fn busy() -> Error {
    Error::new(ErrorCode::Busy)
}

impl ServerStorage for BusyScans {
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
    fn ensure_schema(&self, schema: &CompiledSchema, opts: &EnsureOptions) -> Result<()> {
        self.inner.ensure_schema(schema, opts)
    }
    fn ensure_schema_outcome(
        &self,
        schema: &CompiledSchema,
        opts: &EnsureOptions,
    ) -> Result<EnsureOutcome> {
        self.inner.ensure_schema_outcome(schema, opts)
    }
    fn list_unfinished_checkpoints(&self, schema_version: i32) -> Result<Vec<StoredCheckpoint>> {
        self.inner.list_unfinished_checkpoints(schema_version)
    }
    fn ensured_version(&self) -> Option<i32> {
        self.inner.ensured_version()
    }
    fn ensured_schema(&self) -> Option<Arc<CompiledSchema>> {
        self.inner.ensured_schema()
    }
    fn read_schema_marker(&self) -> Result<Option<SchemaMarker>> {
        self.inner.read_schema_marker()
    }
    fn touch_partition(
        &self,
        partition: &str,
        authenticated_at_ms: i64,
        initial_log_epoch: &str,
    ) -> Result<PartitionRegistryEntry> {
        self.inner
            .touch_partition(partition, authenticated_at_ms, initial_log_epoch)
    }
    fn rotate_partition_log_epoch(
        &self,
        partition: &str,
        log_epoch: &str,
        authenticated_at_ms: i64,
    ) -> Result<PartitionRegistryEntry> {
        self.inner
            .rotate_partition_log_epoch(partition, log_epoch, authenticated_at_ms)
    }
    fn get_partition_log_epoch(&self, partition: &str) -> Result<Option<String>> {
        self.inner.get_partition_log_epoch(partition)
    }
    fn list_partition_registry(&self) -> Result<Vec<PartitionRegistryEntry>> {
        self.inner.list_partition_registry()
    }
    fn list_partitions(&self) -> Result<Vec<String>> {
        self.inner.list_partitions()
    }
    fn begin(&self, partition: &str) -> Result<Box<dyn StorageTransaction + '_>> {
        Ok(Box::new(BusyTx {
            inner: self.inner.begin(partition)?,
            push_results: self.push_results,
            row_writes: self.row_writes,
            scan_error: self.scan_error,
            rejected: &self.rejected,
            ordinal: self.begins.fetch_add(1, Ordering::SeqCst),
            stage_requests: &self.stage_requests,
        }))
    }
    fn get_max_commit_seq(&self, partition: &str) -> Result<i64> {
        self.inner.get_max_commit_seq(partition)
    }
    fn get_horizon_seq(&self, partition: &str) -> Result<i64> {
        self.inner.get_horizon_seq(partition)
    }
    fn set_horizon_seq(&self, partition: &str, seq: i64) -> Result<()> {
        self.inner.set_horizon_seq(partition, seq)
    }
    fn prune_commits_through(
        &self,
        partition: &str,
        query: &CommitPruneQuery,
    ) -> Result<CommitPruneResult> {
        self.inner.prune_commits_through(partition, query)
    }
    fn get_commit_seq_before(&self, partition: &str, created_before_ms: i64) -> Result<i64> {
        self.inner
            .get_commit_seq_before(partition, created_before_ms)
    }
    fn get_row(&self, partition: &str, table: &str, row_id: &str) -> Result<Option<StoredRow>> {
        self.inner.get_row(partition, table, row_id)
    }
    fn get_push_result(
        &self,
        partition: &str,
        client_id: &str,
        client_commit_id: &str,
    ) -> Result<Option<StoredPushResult>> {
        self.push_result_reads.fetch_add(1, Ordering::SeqCst);
        match self.push_results {
            BusyPushResults::AtEntry => return Err(busy()),
            BusyPushResults::AfterRejection(code) if self.rejected.load(Ordering::SeqCst) => {
                return Err(Error::new(code));
            }
            _ => {}
        }
        self.inner
            .get_push_result(partition, client_id, client_commit_id)
    }
    fn read_commit_window(
        &self,
        partition: &str,
        query: &CommitWindowQuery,
    ) -> Result<Vec<StoredCommit>> {
        self.inner.read_commit_window(partition, query)
    }
    fn latest_scoped_change_seq(
        &self,
        partition: &str,
        table: &str,
        filter: &ScopeFilter,
    ) -> Result<i64> {
        self.inner
            .latest_scoped_change_seq(partition, table, filter)
    }
    fn scan_rows(&self, partition: &str, query: &RowScanQuery) -> Result<Vec<StoredRow>> {
        self.inner.scan_rows(partition, query)
    }
    fn scan_row_payloads(
        &self,
        partition: &str,
        query: &RowScanQuery,
    ) -> Result<Vec<sync_core::ScannedRow>> {
        self.inner.scan_row_payloads(partition, query)
    }
    fn scan_rows_by_index(
        &self,
        partition: &str,
        query: &IndexRowScanQuery,
    ) -> Result<Vec<StoredRow>> {
        self.inner.scan_rows_by_index(partition, query)
    }
    fn scan_partition_rows(
        &self,
        partition: &str,
        table: &str,
        after_row_id: Option<&str>,
        limit: i64,
    ) -> Result<Vec<StoredRow>> {
        self.inner
            .scan_partition_rows(partition, table, after_row_id, limit)
    }
    fn get_client_record(&self, partition: &str, client_id: &str) -> Result<Option<ClientRecord>> {
        self.inner.get_client_record(partition, client_id)
    }
    fn put_client_record(&self, partition: &str, record: &ClientRecord) -> Result<()> {
        self.inner.put_client_record(partition, record)
    }
    fn list_client_cursors(&self, partition: &str) -> Result<Vec<ClientCursorInfo>> {
        self.inner.list_client_cursors(partition)
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
        self.inner.advance_client_cursor(
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
        self.inner
            .update_client_cursor(partition, client_id, cursor, updated_at_ms)
    }
    fn get_active_client_cursor_floor(
        &self,
        partition: &str,
        cutoff_ms: i64,
    ) -> Result<Option<i64>> {
        self.inner
            .get_active_client_cursor_floor(partition, cutoff_ms)
    }
    fn claim_reactions(
        &self,
        partition: &str,
        query: &ReactionClaimQuery,
    ) -> Result<Vec<StoredReaction>> {
        self.inner.claim_reactions(partition, query)
    }
    fn complete_reaction(
        &self,
        partition: &str,
        key: &str,
        lease_owner: &str,
        completed_at_ms: i64,
    ) -> Result<bool> {
        self.inner
            .complete_reaction(partition, key, lease_owner, completed_at_ms)
    }
    fn extend_reaction_lease(
        &self,
        partition: &str,
        key: &str,
        lease_owner: &str,
        lease_expires_at_ms: i64,
    ) -> Result<bool> {
        self.inner
            .extend_reaction_lease(partition, key, lease_owner, lease_expires_at_ms)
    }
    fn fail_reaction(
        &self,
        partition: &str,
        key: &str,
        update: &ReactionFailureUpdate,
    ) -> Result<bool> {
        self.inner.fail_reaction(partition, key, update)
    }
    fn retry_reaction(&self, partition: &str, key: &str, now_ms: i64) -> Result<bool> {
        self.inner.retry_reaction(partition, key, now_ms)
    }
    fn get_reaction(&self, partition: &str, key: &str) -> Result<Option<StoredReaction>> {
        self.inner.get_reaction(partition, key)
    }
    fn list_reactions(
        &self,
        partition: &str,
        query: &ReactionListQuery,
    ) -> Result<Vec<StoredReaction>> {
        self.inner.list_reactions(partition, query)
    }
    fn prune_reactions(
        &self,
        partition: &str,
        query: &ReactionPruneQuery,
    ) -> Result<PrunedReactionCounts> {
        self.inner.prune_reactions(partition, query)
    }
    fn list_rows_referencing_blob(
        &self,
        partition: &str,
        blob_id: &str,
    ) -> Result<Vec<BlobReferencingRow>> {
        self.inner.list_rows_referencing_blob(partition, blob_id)
    }
    fn list_referenced_blob_ids(&self, partition: &str) -> Result<Vec<String>> {
        self.inner.list_referenced_blob_ids(partition)
    }
    fn list_client_records(&self, partition: &str) -> Result<Vec<ClientRecord>> {
        self.inner.list_client_records(partition)
    }
    fn list_commit_metadata(
        &self,
        partition: &str,
        query: &CommitMetadataQuery,
    ) -> Result<Vec<CommitMetadata>> {
        self.inner.list_commit_metadata(partition, query)
    }
    fn scope_activity(
        &self,
        partition: &str,
        query: &ScopeActivityQuery,
    ) -> Result<Vec<ScopeCommitActivity>> {
        self.inner.scope_activity(partition, query)
    }
    fn get_row_scopes(
        &self,
        partition: &str,
        table: &str,
        row_id: &str,
    ) -> Result<Option<(i64, StoredScopes)>> {
        self.inner.get_row_scopes(partition, table, row_id)
    }
    fn read_commits(
        &self,
        partition: &str,
        after_seq: i64,
        limit: i64,
    ) -> Result<Vec<CommitRecord>> {
        self.inner.read_commits(partition, after_seq, limit)
    }
    fn inspect_table_rows(
        &self,
        partition: &str,
        table: &str,
        after_row_id: Option<&str>,
        limit: i64,
    ) -> Result<Vec<StoredRow>> {
        self.inner
            .inspect_table_rows(partition, table, after_row_id, limit)
    }
    fn query_authoritative(
        &self,
        partition: &str,
        request: &AuthoritativeQueryRequest,
        ctx: &ServeContext,
    ) -> Result<AuthoritativeQueryResult> {
        self.inner.query_authoritative(partition, request, ctx)
    }
    fn read_checkpoints(&self, partition: &str) -> Result<Vec<StoredCheckpoint>> {
        self.inner.read_checkpoints(partition)
    }
    fn read_checkpoint(&self, partition: &str, name: &str) -> Result<Option<StoredCheckpoint>> {
        self.inner.read_checkpoint(partition, name)
    }
    fn list_pending_checkpoints(&self, schema_version: i32) -> Result<Vec<CheckpointKey>> {
        self.inner.list_pending_checkpoints(schema_version)
    }
    fn read_serve_gate(&self, partition: &str, running_schema_version: i32) -> Result<ServeGate> {
        self.inner
            .read_serve_gate(partition, running_schema_version)
    }
    fn declare_checkpoint(
        &self,
        partition: &str,
        name: &str,
        schema_version: i32,
        now_ms: i64,
    ) -> Result<StoredCheckpoint> {
        self.inner
            .declare_checkpoint(partition, name, schema_version, now_ms)
    }
    fn claim_checkpoint(
        &self,
        partition: &str,
        name: &str,
        schema_version: i32,
        now_ms: i64,
    ) -> Result<StoredCheckpoint> {
        self.inner
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
        self.inner.advance_checkpoint(
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
        self.inner
            .activate_checkpoint(partition, name, owner_epoch, watermark, sources, now_ms)
    }
    fn source_coverage_seq(&self, partition: &str, tables: &[String]) -> Result<i64> {
        self.inner.source_coverage_seq(partition, tables)
    }
    fn has_source_changes_above(
        &self,
        partition: &str,
        tables: &[String],
        seq: i64,
    ) -> Result<Coverage> {
        self.inner.has_source_changes_above(partition, tables, seq)
    }
    fn list_source_changes(
        &self,
        partition: &str,
        tables: &[String],
        after_seq: i64,
        limit: i64,
    ) -> Result<Vec<SourceChange>> {
        self.inner
            .list_source_changes(partition, tables, after_seq, limit)
    }
    fn required_writer_version(&self, partition: &str) -> Result<Option<i32>> {
        self.inner.required_writer_version(partition)
    }
}

impl StorageTransaction for BusyTx<'_> {
    fn stage_client_record(&mut self, record: &ClientRecord) -> Result<bool> {
        let _ = record;
        if let Ok(mut list) = self.stage_requests.lock() {
            list.push(self.ordinal);
        }
        Ok(false)
    }
    fn partition(&self) -> &str {
        self.inner.partition()
    }
    fn writer_version(&self) -> i32 {
        self.inner.writer_version()
    }
    fn get_row(&mut self, table: &str, row_id: &str) -> Result<Option<StoredRow>> {
        self.inner.get_row(table, row_id)
    }
    fn get_tombstone_seq(&mut self, table: &str, row_id: &str) -> Result<Option<i64>> {
        self.inner.get_tombstone_seq(table, row_id)
    }
    fn get_delete_scopes(
        &mut self,
        table: &str,
        row_id: &str,
        commit_seq: i64,
    ) -> Result<Option<sync_core::StoredScopes>> {
        self.inner.get_delete_scopes(table, row_id, commit_seq)
    }
    fn get_rows(&mut self, table: &str, row_ids: &[String]) -> Result<Vec<Option<StoredRow>>> {
        self.inner.get_rows(table, row_ids)
    }
    fn get_push_result(
        &mut self,
        client_id: &str,
        client_commit_id: &str,
    ) -> Result<Option<StoredPushResult>> {
        if self.push_results == BusyPushResults::InTransaction {
            return Err(busy());
        }
        self.inner.get_push_result(client_id, client_commit_id)
    }
    fn scan_rows(&mut self, query: &RowScanQuery) -> Result<Vec<StoredRow>> {
        let _ = query;
        Err(Error::new(self.scan_error))
    }
    fn scan_rows_by_index(&mut self, query: &IndexRowScanQuery) -> Result<Vec<StoredRow>> {
        self.inner.scan_rows_by_index(query)
    }
    fn scan_partition_rows(
        &mut self,
        table: &str,
        after_row_id: Option<&str>,
        limit: i64,
    ) -> Result<Vec<StoredRow>> {
        self.inner.scan_partition_rows(table, after_row_id, limit)
    }
    fn max_commit_seq(&mut self) -> Result<i64> {
        self.inner.max_commit_seq()
    }
    fn query_authoritative(
        &mut self,
        request: &AuthoritativeQueryRequest,
    ) -> Result<AuthoritativeQueryResult> {
        self.inner.query_authoritative(request)
    }
    fn lock_partition_for_push(&mut self) -> Result<()> {
        self.inner.lock_partition_for_push()
    }
    fn commit_rejected_push_result(
        self: Box<Self>,
        client_id: &str,
        client_commit_id: &str,
        result: &StoredPushResult,
    ) -> Result<()> {
        let this = *self;
        this.inner
            .commit_rejected_push_result(client_id, client_commit_id, result)?;
        this.rejected.store(true, Ordering::SeqCst);
        Ok(())
    }
    fn upsert_row(&mut self, table: &str, row: &StoredRow, op_index: Option<u32>) -> Result<()> {
        if self.row_writes {
            return Err(busy());
        }
        self.inner.upsert_row(table, row, op_index)
    }
    fn upsert_rows(&mut self, table: &str, rows: &[StoredRow]) -> Result<()> {
        self.inner.upsert_rows(table, rows)
    }
    fn delete_row(&mut self, table: &str, row_id: &str) -> Result<()> {
        self.inner.delete_row(table, row_id)
    }
    fn clear_tombstone(&mut self, table: &str, row_id: &str) -> Result<()> {
        self.inner.clear_tombstone(table, row_id)
    }
    fn set_blob_refs(&mut self, table: &str, row_id: &str, blob_ids: &[String]) -> Result<()> {
        self.inner.set_blob_refs(table, row_id, blob_ids)
    }
    fn append_commit(&mut self, commit: &NewCommit) -> Result<i64> {
        self.inner.append_commit(commit)
    }
    fn enqueue_reactions(&mut self, reactions: &[NewReaction]) -> Result<()> {
        self.inner.enqueue_reactions(reactions)
    }
    fn put_push_result(
        &mut self,
        client_id: &str,
        client_commit_id: &str,
        result: &StoredPushResult,
    ) -> Result<()> {
        self.inner
            .put_push_result(client_id, client_commit_id, result)
    }
    fn read_serve_gate(&mut self, running_schema_version: i32) -> Result<ServeGate> {
        self.inner.read_serve_gate(running_schema_version)
    }
    fn read_checkpoint(&mut self, name: &str) -> Result<Option<StoredCheckpoint>> {
        self.inner.read_checkpoint(name)
    }
    fn advance_checkpoint(
        &mut self,
        name: &str,
        owner_epoch: i64,
        watermark: i64,
        observed_rows: i64,
        now_ms: i64,
    ) -> Result<bool> {
        self.inner
            .advance_checkpoint(name, owner_epoch, watermark, observed_rows, now_ms)
    }
    fn activate_checkpoint(
        &mut self,
        name: &str,
        owner_epoch: i64,
        watermark: i64,
        sources: &[String],
        now_ms: i64,
    ) -> Result<ActivationOutcome> {
        self.inner
            .activate_checkpoint(name, owner_epoch, watermark, sources, now_ms)
    }
    fn has_source_changes_above(&mut self, tables: &[String], seq: i64) -> Result<Coverage> {
        self.inner.has_source_changes_above(tables, seq)
    }
    fn list_source_changes(
        &mut self,
        tables: &[String],
        after_seq: i64,
        limit: i64,
    ) -> Result<Vec<SourceChange>> {
        self.inner.list_source_changes(tables, after_seq, limit)
    }
    fn commit(self: Box<Self>) -> Result<()> {
        let this = *self;
        this.inner.commit()
    }
    fn rollback(self: Box<Self>) -> Result<()> {
        let this = *self;
        this.inner.rollback()
    }
}
