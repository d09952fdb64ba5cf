//! `ServerStorage` for [`PostgresStorage`]: validation in the normative order,
//! then one short delegation per method.

use std::sync::Arc;

use sync_core::{
    validate, ActivationOutcome, AuthoritativeQueryRequest, AuthoritativeQueryResult,
    BlobReferencingRow, Capabilities, CheckpointDeclaration, CheckpointKey, ClientCursorInfo,
    ClientRecord, CommitMetadata, CommitMetadataQuery, CommitPruneQuery, CommitPruneResult,
    CommitRecord, CommitWindowQuery, CompiledSchema, Coverage, EnsureOptions, EnsureOutcome, Error,
    FenceTriggerState, IndexRowScanQuery, PartitionRegistryEntry, PrunedReactionCounts,
    ReactionClaimQuery, ReactionFailureUpdate, ReactionListQuery, ReactionPruneQuery, Result,
    RoundEntry, RoundEntryRequest, RowScanQuery, SchemaMarker, ScopeActivityQuery,
    ScopeCommitActivity, ScopeFilter, SegmentStore, ServeContext, ServeGate, ServerStorage,
    SourceChange, StorageTransaction, StoredCheckpoint, StoredCommit, StoredPushResult,
    StoredReaction, StoredRow, StoredScopes,
};

use crate::instance::{Finish, PostgresStorage};
use crate::state::{require_tables, resolve};
use crate::transaction::PgTransaction;
use crate::{
    admin, blobs, checkpoints, clients, commit_log, coverage, ensure, fence_trigger, gate, inspect,
    marker, partition_lock, pruning, push_results, query, reactions, registry, round_entry, rows,
    scans, validation, window,
};

impl ServerStorage for PostgresStorage {
    fn capabilities(&self) -> Capabilities {
        Capabilities::ALL
    }

    fn ensure_schema(&self, schema: &CompiledSchema, opts: &EnsureOptions) -> Result<()> {
        ensure::ensure_schema(self, schema, opts).map(|_| ())
    }

    fn ensure_schema_outcome(
        &self,
        schema: &CompiledSchema,
        opts: &EnsureOptions,
    ) -> Result<EnsureOutcome> {
        ensure::ensure_schema(self, schema, opts)
    }

    fn ensured_version(&self) -> Option<i32> {
        self.ensured().map(|e| e.version)
    }

    fn ensured_schema(&self) -> Option<Arc<CompiledSchema>> {
        self.ensured().map(|e| Arc::clone(&e.schema))
    }

    fn read_schema_marker(&self) -> Result<Option<SchemaMarker>> {
        self.with_conn(marker::read)
    }

    fn touch_partition(
        &self,
        partition: &str,
        at_ms: i64,
        initial_log_epoch: &str,
    ) -> Result<PartitionRegistryEntry> {
        validate::partition(partition)?;
        validate::log_epoch(initial_log_epoch)?;
        // Idempotent (insert-if-absent, then refresh the timestamp): a replay
        // after a lost reply returns the same entry, so it takes the
        // retry-on-a-fresh-connection path of reads instead of paying a
        // liveness round trip before every engine round.
        self.with_conn(|c| registry::touch(c, partition, at_ms, initial_log_epoch))
    }

    fn enter_round(&self, request: &RoundEntryRequest) -> Result<RoundEntry> {
        round_entry::validate_request(request)?;
        // Idempotent like the touch it contains: a replay after a lost reply
        // reads the same entry.
        self.with_conn(|c| round_entry::enter(c, request))
    }

    fn rotate_partition_log_epoch(
        &self,
        partition: &str,
        log_epoch: &str,
        at_ms: i64,
    ) -> Result<PartitionRegistryEntry> {
        validate::partition(partition)?;
        validate::log_epoch(log_epoch)?;
        registry::rotate(self, partition, log_epoch, at_ms)
    }

    fn get_partition_log_epoch(&self, partition: &str) -> Result<Option<String>> {
        validate::partition(partition)?;
        self.with_conn(|c| registry::log_epoch(c, partition))
    }

    fn list_partition_registry(&self) -> Result<Vec<PartitionRegistryEntry>> {
        self.with_conn(registry::list)
    }

    fn list_partitions(&self) -> Result<Vec<String>> {
        self.with_conn(registry::names)
    }

    fn begin(&self, partition: &str) -> Result<Box<dyn StorageTransaction + '_>> {
        Ok(Box::new(PgTransaction::begin(self, partition)?))
    }

    fn get_max_commit_seq(&self, partition: &str) -> Result<i64> {
        validate::partition(partition)?;
        self.with_conn(|c| commit_log::max_commit_seq(c, partition))
    }

    fn get_horizon_seq(&self, partition: &str) -> Result<i64> {
        validate::partition(partition)?;
        self.with_conn(|c| commit_log::horizon_seq(c, partition))
    }

    fn set_horizon_seq(&self, partition: &str, seq: i64) -> Result<()> {
        validate::partition(partition)?;
        validate::safe_non_negative("seq", seq)?;
        match self.config().push_lock_timeout_ms {
            // One upsert takes (or waits for) the partition row lock.
            None => self.with_conn_write(|c| commit_log::set_horizon_seq(c, partition, seq)),
            Some(ms) => self.with_write(|c| {
                c.simple(&format!("SET LOCAL lock_timeout = {ms}"))?;
                commit_log::set_horizon_seq(c, partition, seq).map(Finish::Commit)
            }),
        }
    }

    fn prune_commits_through(
        &self,
        partition: &str,
        query: &CommitPruneQuery,
    ) -> Result<CommitPruneResult> {
        validate::partition(partition)?;
        validate::prune_query(query)?;
        pruning::prune_through(self, partition, query)
    }

    fn get_commit_seq_before(&self, partition: &str, created_before_ms: i64) -> Result<i64> {
        validate::partition(partition)?;
        self.with_conn(|c| commit_log::commit_seq_before(c, partition, created_before_ms))
    }

    fn get_row(&self, partition: &str, table: &str, row_id: &str) -> Result<Option<StoredRow>> {
        validate::partition(partition)?;
        let ensured = self.ensured();
        let (_, sql) = resolve(ensured.as_deref(), table)?;
        self.with_conn(|c| rows::get_row(c, sql, partition, row_id))
    }

    fn get_push_result(
        &self,
        partition: &str,
        client_id: &str,
        client_commit_id: &str,
    ) -> Result<Option<StoredPushResult>> {
        validate::partition(partition)?;
        self.with_conn(|c| push_results::get(c, partition, client_id, client_commit_id))
    }

    fn read_commit_window(
        &self,
        partition: &str,
        query: &CommitWindowQuery,
    ) -> Result<Vec<StoredCommit>> {
        validate::partition(partition)?;
        resolve(self.ensured().as_deref(), &query.table)?;
        self.with_conn(|c| window::read_commit_window(c, partition, query))
    }

    fn latest_scoped_change_seq(
        &self,
        partition: &str,
        table: &str,
        filter: &ScopeFilter,
    ) -> Result<i64> {
        validate::partition(partition)?;
        resolve(self.ensured().as_deref(), table)?;
        self.with_conn(|c| window::latest_scoped_change_seq(c, partition, table, filter))
    }

    fn scan_rows(&self, partition: &str, query: &RowScanQuery) -> Result<Vec<StoredRow>> {
        let ensured = self.ensured();
        let plan = scans::plan_scan(ensured.as_deref(), partition, query)?;
        if matches!(plan, scans::ScanPlan::Empty) {
            return Ok(Vec::new());
        }
        if let Some(rows) =
            self.with_conn(|c| scans::scan_rows(c, partition, query, plan, Some(1)))?
        {
            return Ok(rows);
        }
        self.with_snapshot(|c| scans::scan_rows(c, partition, query, plan, None))
            .map(Option::unwrap_or_default)
    }

    fn scan_rows_by_index(
        &self,
        partition: &str,
        query: &IndexRowScanQuery,
    ) -> Result<Vec<StoredRow>> {
        let ensured = self.ensured();
        let mut lookup = Some(scans::plan_index_lookup(
            ensured.as_deref(),
            partition,
            query,
        )?);
        self.with_conn(|c| {
            // A retry on a fresh connection plans the lookup again.
            let lookup = match lookup.take() {
                Some(lookup) => lookup,
                None => scans::plan_index_lookup(ensured.as_deref(), partition, query)?,
            };
            scans::scan_rows_by_index(c, partition, query, lookup)
        })
    }

    fn scan_partition_rows(
        &self,
        partition: &str,
        table: &str,
        after_row_id: Option<&str>,
        limit: i64,
    ) -> Result<Vec<StoredRow>> {
        let ensured = self.ensured();
        let sql = scans::plan_partition_scan(ensured.as_deref(), partition, table, limit)?;
        self.with_conn(|c| scans::scan_partition_rows(c, sql, partition, after_row_id, limit))
    }

    fn get_client_record(&self, partition: &str, client_id: &str) -> Result<Option<ClientRecord>> {
        validate::partition(partition)?;
        self.with_conn(|c| clients::get(c, partition, client_id))
    }

    fn put_client_record(&self, partition: &str, record: &ClientRecord) -> Result<()> {
        validate::partition(partition)?;
        if record.client_id.is_empty() {
            return Err(Error::invalid_argument("client_id", "empty"));
        }
        // Refreshing the same actor's record is soft state: one idempotent
        // statement, committed without waiting for its WAL flush unless
        // configured otherwise, and run again on another connection if
        // this one is lost. A new record (the actor binding) is a durable
        // write like any other.
        let level = self.soft_commit_level();
        if self.with_conn(|c| clients::refresh(c, partition, record, level))? {
            return Ok(());
        }
        self.with_conn_write(|c| clients::put(c, partition, record))
    }

    fn list_client_cursors(&self, partition: &str) -> Result<Vec<ClientCursorInfo>> {
        validate::partition(partition)?;
        self.with_conn(|c| clients::cursors(c, partition))
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
        let level = self.soft_commit_level();
        let advance = clients::Advance {
            client_id,
            actor_id,
            log_epoch,
            cursor,
            at_ms: updated_at_ms,
        };
        self.with_conn_write(|c| clients::advance(c, partition, &advance, level))
    }

    fn update_client_cursor(
        &self,
        partition: &str,
        client_id: &str,
        cursor: i64,
        updated_at_ms: i64,
    ) -> Result<bool> {
        validate::partition(partition)?;
        self.with_conn_write(|c| clients::update(c, partition, client_id, cursor, updated_at_ms))
    }

    fn get_active_client_cursor_floor(
        &self,
        partition: &str,
        cutoff_ms: i64,
    ) -> Result<Option<i64>> {
        validate::partition(partition)?;
        self.with_conn(|c| clients::floor(c, partition, cutoff_ms))
    }

    fn claim_reactions(
        &self,
        partition: &str,
        query: &ReactionClaimQuery,
    ) -> Result<Vec<StoredReaction>> {
        validate::partition(partition)?;
        if query.kinds.is_empty() || query.limit <= 0 {
            return Ok(Vec::new());
        }
        self.with_conn_write(|c| reactions::claim(c, partition, query))
    }

    fn complete_reaction(
        &self,
        partition: &str,
        key: &str,
        lease_owner: &str,
        completed_at_ms: i64,
    ) -> Result<bool> {
        validate::partition(partition)?;
        self.with_conn_write(|c| {
            reactions::complete(c, partition, key, lease_owner, completed_at_ms)
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
        self.with_conn_write(|c| {
            reactions::extend(c, partition, key, lease_owner, lease_expires_at_ms)
        })
    }

    fn fail_reaction(
        &self,
        partition: &str,
        key: &str,
        update: &ReactionFailureUpdate,
    ) -> Result<bool> {
        validate::partition(partition)?;
        self.with_conn_write(|c| reactions::fail(c, partition, key, update))
    }

    fn retry_reaction(&self, partition: &str, key: &str, now_ms: i64) -> Result<bool> {
        validate::partition(partition)?;
        self.with_conn_write(|c| reactions::retry(c, partition, key, now_ms))
    }

    fn get_reaction(&self, partition: &str, key: &str) -> Result<Option<StoredReaction>> {
        validate::partition(partition)?;
        self.with_conn(|c| reactions::get(c, partition, key))
    }

    fn list_reactions(
        &self,
        partition: &str,
        query: &ReactionListQuery,
    ) -> Result<Vec<StoredReaction>> {
        validate::partition(partition)?;
        self.with_conn(|c| reactions::list(c, partition, query))
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
        self.with_conn_write(|c| reactions::prune(c, partition, query))
    }

    fn list_rows_referencing_blob(
        &self,
        partition: &str,
        blob_id: &str,
    ) -> Result<Vec<BlobReferencingRow>> {
        validate::partition(partition)?;
        let ensured = self.ensured();
        self.with_snapshot(|c| blobs::rows_referencing(c, ensured.as_deref(), partition, blob_id))
    }

    fn list_referenced_blob_ids(&self, partition: &str) -> Result<Vec<String>> {
        validate::partition(partition)?;
        self.with_conn(|c| blobs::blob_ids(c, partition))
    }

    fn list_client_records(&self, partition: &str) -> Result<Vec<ClientRecord>> {
        validate::partition(partition)?;
        self.with_conn(|c| clients::list(c, partition))
    }

    fn list_commit_metadata(
        &self,
        partition: &str,
        query: &CommitMetadataQuery,
    ) -> Result<Vec<CommitMetadata>> {
        validate::partition(partition)?;
        self.with_conn(|c| admin::commit_metadata(c, partition, query))
    }

    fn scope_activity(
        &self,
        partition: &str,
        query: &ScopeActivityQuery,
    ) -> Result<Vec<ScopeCommitActivity>> {
        validate::partition(partition)?;
        self.with_conn(|c| admin::scope_activity(c, partition, query))
    }

    fn get_row_scopes(
        &self,
        partition: &str,
        table: &str,
        row_id: &str,
    ) -> Result<Option<(i64, StoredScopes)>> {
        validate::partition(partition)?;
        let ensured = self.ensured();
        let (_, sql) = resolve(ensured.as_deref(), table)?;
        self.with_conn(|c| rows::get_row_scopes(c, sql, partition, row_id))
    }

    fn read_commits(
        &self,
        partition: &str,
        after_seq: i64,
        limit: i64,
    ) -> Result<Vec<CommitRecord>> {
        inspect::validate_commits(partition, after_seq, limit)?;
        self.with_snapshot(|c| inspect::read_commits(c, partition, after_seq, limit))
    }

    fn inspect_table_rows(
        &self,
        partition: &str,
        table: &str,
        after_row_id: Option<&str>,
        limit: i64,
    ) -> Result<Vec<StoredRow>> {
        inspect::validate_inspect(partition, limit)?;
        self.with_snapshot(|c| inspect::inspect_rows(c, partition, table, after_row_id, limit))
    }

    fn query_authoritative(
        &self,
        partition: &str,
        request: &AuthoritativeQueryRequest,
        ctx: &ServeContext,
    ) -> Result<AuthoritativeQueryResult> {
        query::query_pool(self, partition, request, ctx)
    }

    fn read_checkpoints(&self, partition: &str) -> Result<Vec<StoredCheckpoint>> {
        validate::partition(partition)?;
        self.with_conn(|c| checkpoints::read_all(c, partition))
    }

    fn read_checkpoint(&self, partition: &str, name: &str) -> Result<Option<StoredCheckpoint>> {
        validate::partition(partition)?;
        validate::checkpoint_name(name)?;
        self.with_conn(|c| checkpoints::read_one(c, partition, name))
    }

    fn list_pending_checkpoints(&self, schema_version: i32) -> Result<Vec<CheckpointKey>> {
        validate::schema_version(schema_version)?;
        self.with_conn(|c| checkpoints::pending(c, schema_version))
    }

    fn list_unfinished_checkpoints(&self, schema_version: i32) -> Result<Vec<StoredCheckpoint>> {
        validate::schema_version(schema_version)?;
        self.with_conn(|c| checkpoints::unfinished(c, schema_version))
    }

    fn read_serve_gate(&self, partition: &str, running: i32) -> Result<ServeGate> {
        gate::validate_args(partition, running)?;
        self.with_conn(|c| gate::read(c, partition, running))
    }

    fn declare_checkpoint(
        &self,
        partition: &str,
        name: &str,
        schema_version: i32,
        now_ms: i64,
    ) -> Result<StoredCheckpoint> {
        validate::partition(partition)?;
        validate::checkpoint_name(name)?;
        validate::schema_version(schema_version)?;
        let decl = CheckpointDeclaration::new(partition, name, schema_version);
        self.with_write(|c| checkpoints::declare(c, &decl, now_ms).map(Finish::Commit))
    }

    fn claim_checkpoint(
        &self,
        partition: &str,
        name: &str,
        schema_version: i32,
        now_ms: i64,
    ) -> Result<StoredCheckpoint> {
        validate::partition(partition)?;
        validate::checkpoint_name(name)?;
        validate::schema_version(schema_version)?;
        self.with_conn_write(|c| checkpoints::claim(c, partition, name, schema_version, now_ms))
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
        validate::partition(partition)?;
        validation::advance(name, watermark, observed_rows)?;
        self.with_write(|c| {
            let advanced = checkpoints::advance(
                c,
                partition,
                name,
                owner_epoch,
                watermark,
                observed_rows,
                now_ms,
            )?;
            Ok(if advanced {
                Finish::Commit(true)
            } else {
                Finish::Rollback(false)
            })
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
        validate::partition(partition)?;
        let sources = validation::activate(self.ensured().as_deref(), name, watermark, sources)?;
        self.with_write(|c| {
            partition_lock::lock(c, partition, self.config().push_lock_timeout_ms)?;
            let outcome = checkpoints::activate(
                c,
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
        let tables = require_tables(self.ensured().as_deref(), tables)?;
        self.with_conn(|c| coverage::coverage_seq(c, partition, &tables))
    }

    fn has_source_changes_above(
        &self,
        partition: &str,
        tables: &[String],
        seq: i64,
    ) -> Result<Coverage> {
        validate::partition(partition)?;
        let tables = validation::coverage(self.ensured().as_deref(), tables, seq)?;
        self.with_conn(|c| coverage::changes_above(c, partition, &tables, seq))
    }

    fn list_source_changes(
        &self,
        partition: &str,
        tables: &[String],
        after_seq: i64,
        limit: i64,
    ) -> Result<Vec<SourceChange>> {
        validate::partition(partition)?;
        let tables =
            validation::source_listing(self.ensured().as_deref(), tables, after_seq, limit)?;
        self.with_conn(|c| coverage::source_changes(c, partition, &tables, after_seq, limit))
    }

    fn required_writer_version(&self, partition: &str) -> Result<Option<i32>> {
        validate::partition(partition)?;
        self.with_conn(|c| checkpoints::required_writer_version(c, partition))
    }

    fn segment_store(&self) -> Option<&dyn SegmentStore> {
        Some(self)
    }

    fn writer_fence_trigger(&self) -> Result<FenceTriggerState> {
        // Catalog only, without the lazy bootstrap: an operator read reports
        // the fence as the database holds it, never after repairing it.
        let mut conn = self.checkout_raw()?;
        fence_trigger::state(&mut conn)
    }
}
