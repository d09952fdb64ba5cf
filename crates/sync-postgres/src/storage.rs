//! The Postgres backend behind the validating front (`sync_core::front`):
//! each method of [`StorageBackend`] receives checked arguments and makes
//! one short delegation.

use std::sync::Arc;

use sync_core::front::{
    AdminBackend, BlobRefsBackend, Checked, CheckpointName, Handle, IndexScanBackend, LogEpoch,
    Partition, QueryBackend, ReactionsBackend, Request, StorageBackend, Table, Tables,
};
use sync_core::{
    ActivationOutcome, CheckpointDeclaration, CheckpointKey, ClientCursorInfo, ClientRecord,
    CommitPruneQuery, CommitPruneResult, CommitWindowQuery, CompiledSchema, Coverage,
    EnsureOptions, EnsureOutcome, FenceTriggerState, PartitionRegistryEntry, Result, RoundEntry,
    RoundEntryRequest, RowScanQuery, ScannedRow, SchemaMarker, ScopeFilter, SegmentStore,
    ServeGate, SourceChange, StoredCheckpoint, StoredCommit, StoredPushResult, StoredRow,
};

use crate::instance::{Finish, PostgresStorage};
use crate::state::Ensured;
use crate::transaction::PgTransaction;
use crate::{
    checkpoints, clients, commit_log, coverage, ensure, fence_trigger, gate, marker,
    partition_lock, pruning, push_results, registry, round_entry, rows, scans, window,
};

impl StorageBackend for PostgresStorage {
    type Schema = Ensured;
    type Transaction<'s> = PgTransaction<'s>;

    fn ensured(&self) -> Option<Arc<Ensured>> {
        PostgresStorage::ensured(self)
    }

    fn ensure_schema(
        &self,
        schema: &CompiledSchema,
        opts: Request<'_, EnsureOptions>,
    ) -> Result<EnsureOutcome> {
        ensure::ensure_schema(self, schema, &opts)
    }

    fn read_schema_marker(&self) -> Result<Option<SchemaMarker>> {
        self.with_conn(marker::read)
    }

    fn touch_partition(
        &self,
        p: Partition<'_>,
        at_ms: i64,
        epoch: LogEpoch<'_>,
    ) -> Result<PartitionRegistryEntry> {
        // Idempotent (insert-if-absent, then refresh the timestamp): a replay
        // after a lost reply returns the same entry, so it takes the
        // retry-on-a-fresh-connection path of reads instead of paying a
        // liveness round trip before every engine round.
        self.with_conn(|c| registry::touch(c, &p, at_ms, &epoch))
    }

    fn enter_round(&self, request: Request<'_, RoundEntryRequest>) -> Result<RoundEntry> {
        // Idempotent like the touch it contains: a replay after a lost reply
        // reads the same entry.
        self.with_conn(|c| round_entry::enter(c, &request))
    }

    fn rotate_partition_log_epoch(
        &self,
        p: Partition<'_>,
        epoch: LogEpoch<'_>,
        at_ms: i64,
    ) -> Result<PartitionRegistryEntry> {
        registry::rotate(self, &p, &epoch, at_ms)
    }

    fn get_partition_log_epoch(&self, p: Partition<'_>) -> Result<Option<String>> {
        self.with_conn(|c| registry::log_epoch(c, &p))
    }

    fn list_partition_registry(&self) -> Result<Vec<PartitionRegistryEntry>> {
        self.with_conn(registry::list)
    }

    fn list_partitions(&self) -> Result<Vec<String>> {
        self.with_conn(registry::names)
    }

    fn begin(&self, p: Partition<'_>, ensured: Option<Arc<Ensured>>) -> Result<PgTransaction<'_>> {
        PgTransaction::begin(self, &p, ensured)
    }

    fn get_max_commit_seq(&self, p: Partition<'_>) -> Result<i64> {
        self.with_conn(|c| commit_log::max_commit_seq(c, &p))
    }

    fn get_horizon_seq(&self, p: Partition<'_>) -> Result<i64> {
        self.with_conn(|c| commit_log::horizon_seq(c, &p))
    }

    fn set_horizon_seq(&self, p: Partition<'_>, seq: Checked<i64>) -> Result<()> {
        let seq = seq.get();
        match self.config().push_lock_timeout_ms {
            // One upsert takes (or waits for) the partition row lock.
            None => self.with_conn_write(|c| commit_log::set_horizon_seq(c, &p, seq)),
            Some(ms) => self.with_write(|c| {
                c.simple(&format!("SET LOCAL lock_timeout = {ms}"))?;
                commit_log::set_horizon_seq(c, &p, seq).map(Finish::Commit)
            }),
        }
    }

    fn prune_commits_through(
        &self,
        p: Partition<'_>,
        query: Request<'_, CommitPruneQuery>,
    ) -> Result<CommitPruneResult> {
        pruning::prune_through(self, &p, &query)
    }

    fn get_commit_seq_before(&self, p: Partition<'_>, before_ms: i64) -> Result<i64> {
        self.with_conn(|c| commit_log::commit_seq_before(c, &p, before_ms))
    }

    fn get_row(
        &self,
        p: Partition<'_>,
        table: Table<'_, Handle<Self>>,
        row_id: &str,
    ) -> Result<Option<StoredRow>> {
        self.with_conn(|c| rows::get_row(c, &table, &p, row_id))
    }

    fn get_push_result(
        &self,
        p: Partition<'_>,
        client_id: &str,
        commit_id: &str,
    ) -> Result<Option<StoredPushResult>> {
        self.with_conn(|c| push_results::get(c, &p, client_id, commit_id))
    }

    fn read_commit_window(
        &self,
        p: Partition<'_>,
        _table: Table<'_, Handle<Self>>,
        query: Request<'_, CommitWindowQuery>,
    ) -> Result<Vec<StoredCommit>> {
        self.with_conn(|c| window::read_commit_window(c, &p, &query))
    }

    fn latest_scoped_change_seq(
        &self,
        p: Partition<'_>,
        table: Table<'_, Handle<Self>>,
        filter: Request<'_, ScopeFilter>,
    ) -> Result<i64> {
        self.with_conn(|c| window::latest_scoped_change_seq(c, &p, table.name(), &filter))
    }

    fn scan_rows(
        &self,
        p: Partition<'_>,
        table: Table<'_, Handle<Self>>,
        query: Request<'_, RowScanQuery>,
    ) -> Result<Vec<StoredRow>> {
        scans::pooled_scan(self, &p, &table, &query)
    }

    fn scan_row_payloads(
        &self,
        p: Partition<'_>,
        table: Table<'_, Handle<Self>>,
        query: Request<'_, RowScanQuery>,
    ) -> Result<Vec<ScannedRow>> {
        scans::pooled_scan(self, &p, &table, &query)
    }

    fn scan_partition_rows(
        &self,
        p: Partition<'_>,
        table: Table<'_, Handle<Self>>,
        after: Option<&str>,
        limit: Checked<i64>,
    ) -> Result<Vec<StoredRow>> {
        self.with_conn(|c| scans::scan_partition_rows(c, &table, &p, after, limit.get()))
    }

    fn get_client_record(&self, p: Partition<'_>, client_id: &str) -> Result<Option<ClientRecord>> {
        self.with_conn(|c| clients::get(c, &p, client_id))
    }

    fn put_client_record(&self, p: Partition<'_>, record: Request<'_, ClientRecord>) -> Result<()> {
        // Refreshing the same actor's record is soft state: one idempotent
        // statement, committed without waiting for its WAL flush unless
        // configured otherwise, and run again on another connection if
        // this one is lost. A new record (the actor binding) is a durable
        // write like any other.
        let level = self.soft_commit_level();
        if self.with_conn(|c| clients::refresh(c, &p, &record, level))? {
            return Ok(());
        }
        self.with_conn_write(|c| clients::put(c, &p, &record))
    }

    fn list_client_cursors(&self, p: Partition<'_>) -> Result<Vec<ClientCursorInfo>> {
        self.with_conn(|c| clients::cursors(c, &p))
    }

    fn advance_client_cursor(
        &self,
        p: Partition<'_>,
        client_id: &str,
        actor_id: &str,
        epoch: LogEpoch<'_>,
        cursor: i64,
        at_ms: i64,
    ) -> Result<bool> {
        let level = self.soft_commit_level();
        let advance = clients::Advance {
            client_id,
            actor_id,
            log_epoch: &epoch,
            cursor,
            at_ms,
        };
        self.with_conn_write(|c| clients::advance(c, &p, &advance, level))
    }

    fn update_client_cursor(
        &self,
        p: Partition<'_>,
        client_id: &str,
        cursor: i64,
        at_ms: i64,
    ) -> Result<bool> {
        self.with_conn_write(|c| clients::update(c, &p, client_id, cursor, at_ms))
    }

    fn get_active_client_cursor_floor(&self, p: Partition<'_>, cutoff: i64) -> Result<Option<i64>> {
        self.with_conn(|c| clients::floor(c, &p, cutoff))
    }

    fn read_checkpoints(&self, p: Partition<'_>) -> Result<Vec<StoredCheckpoint>> {
        self.with_conn(|c| checkpoints::read_all(c, &p))
    }

    fn read_checkpoint(
        &self,
        p: Partition<'_>,
        name: CheckpointName<'_>,
    ) -> Result<Option<StoredCheckpoint>> {
        self.with_conn(|c| checkpoints::read_one(c, &p, &name))
    }

    fn list_pending_checkpoints(&self, version: Checked<i32>) -> Result<Vec<CheckpointKey>> {
        self.with_conn(|c| checkpoints::pending(c, version.get()))
    }

    fn list_unfinished_checkpoints(&self, version: Checked<i32>) -> Result<Vec<StoredCheckpoint>> {
        self.with_conn(|c| checkpoints::unfinished(c, version.get()))
    }

    fn read_serve_gate(&self, p: Partition<'_>, running: Checked<i32>) -> Result<ServeGate> {
        self.with_conn(|c| gate::read(c, &p, running.get()))
    }

    fn declare_checkpoint(
        &self,
        p: Partition<'_>,
        name: CheckpointName<'_>,
        version: Checked<i32>,
        now_ms: i64,
    ) -> Result<StoredCheckpoint> {
        let decl = CheckpointDeclaration::new(&*p, &*name, version.get());
        self.with_write(|c| checkpoints::declare(c, &decl, now_ms).map(Finish::Commit))
    }

    fn claim_checkpoint(
        &self,
        p: Partition<'_>,
        name: CheckpointName<'_>,
        version: Checked<i32>,
        now_ms: i64,
    ) -> Result<StoredCheckpoint> {
        self.with_conn_write(|c| checkpoints::claim(c, &p, &name, version.get(), now_ms))
    }

    fn advance_checkpoint(
        &self,
        p: Partition<'_>,
        name: CheckpointName<'_>,
        epoch: i64,
        watermark: Checked<i64>,
        observed: Checked<i64>,
        now_ms: i64,
    ) -> Result<bool> {
        let (watermark, observed) = (watermark.get(), observed.get());
        self.with_write(|c| {
            let advanced = checkpoints::advance(c, &p, &name, epoch, watermark, observed, now_ms)?;
            Ok(if advanced {
                Finish::Commit(true)
            } else {
                Finish::Rollback(false)
            })
        })
    }

    fn activate_checkpoint(
        &self,
        p: Partition<'_>,
        name: CheckpointName<'_>,
        epoch: i64,
        watermark: Checked<i64>,
        sources: &Tables,
        now_ms: i64,
    ) -> Result<ActivationOutcome> {
        self.with_write(|c| {
            partition_lock::lock(c, &p, self.config().push_lock_timeout_ms)?;
            let outcome =
                checkpoints::activate(c, &p, &name, epoch, watermark.get(), sources, now_ms)?;
            Ok(match outcome {
                ActivationOutcome::Activated => Finish::Commit(outcome),
                _ => Finish::Rollback(outcome),
            })
        })
    }

    fn source_coverage_seq(&self, p: Partition<'_>, tables: &Tables) -> Result<i64> {
        self.with_conn(|c| coverage::coverage_seq(c, &p, tables))
    }

    fn has_source_changes_above(
        &self,
        p: Partition<'_>,
        tables: &Tables,
        seq: Checked<i64>,
    ) -> Result<Coverage> {
        self.with_conn(|c| coverage::changes_above(c, &p, tables, seq.get()))
    }

    fn list_source_changes(
        &self,
        p: Partition<'_>,
        tables: &Tables,
        after: Checked<i64>,
        limit: Checked<i64>,
    ) -> Result<Vec<SourceChange>> {
        self.with_conn(|c| coverage::source_changes(c, &p, tables, after.get(), limit.get()))
    }

    fn required_writer_version(&self, p: Partition<'_>) -> Result<Option<i32>> {
        self.with_conn(|c| checkpoints::required_writer_version(c, &p))
    }

    fn segment_store(&self) -> Option<&dyn SegmentStore> {
        Some(self)
    }

    fn commit_feed(&self) -> Option<std::sync::Arc<dyn sync_core::CommitFeed>> {
        self.commit_feed_of()
    }

    fn writer_fence_trigger(&self) -> Result<FenceTriggerState> {
        // Catalog only, without the lazy bootstrap: an operator read reports
        // the fence as the database holds it, never after repairing it.
        let mut conn = self.checkout_raw()?;
        fence_trigger::state(&mut conn)
    }

    fn index_scan(&self) -> Option<&dyn IndexScanBackend<Ensured>> {
        Some(self)
    }

    fn reactions(&self) -> Option<&dyn ReactionsBackend> {
        Some(self)
    }

    fn blob_refs(&self) -> Option<&dyn BlobRefsBackend> {
        Some(self)
    }

    fn admin(&self) -> Option<&dyn AdminBackend<Ensured>> {
        Some(self)
    }

    fn authoritative_query(&self) -> Option<&dyn QueryBackend<Ensured>> {
        Some(self)
    }
}
