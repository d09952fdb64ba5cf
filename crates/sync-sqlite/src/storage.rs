//! The SQLite backend behind the validating front (`sync_core::front`):
//! each method of [`StorageBackend`] receives checked arguments, picks a
//! connection discipline from the pools and delegates to one function of a
//! topic module.

use std::sync::{Arc, PoisonError};

use sync_core::front::{
    AdminBackend, BlobRefsBackend, Checked, CheckpointName, Handle, IndexScanBackend, LogEpoch,
    Partition, QueryBackend, ReactionsBackend, Request, StorageBackend, Table, Tables,
};
use sync_core::{
    ActivationOutcome, CheckpointKey, ClientCursorInfo, ClientRecord, CommitPruneQuery,
    CommitPruneResult, CommitWindowQuery, CompiledSchema, Coverage, EnsureOptions, EnsureOutcome,
    FenceTriggerState, PartitionRegistryEntry, Result, RoundEntry, RoundEntryRequest, RowScanQuery,
    ScannedRow, SchemaMarker, ScopeFilter, SegmentStore, ServeGate, SourceChange, StoredCheckpoint,
    StoredCommit, StoredPushResult, StoredRow,
};

use crate::instance::SqliteStorage;
use crate::pools::Finish;
use crate::state::{fingerprint, Ensured};
use crate::transaction::SqliteTransaction;
use crate::{
    bootstrap, checkpoints, clients, commit_log, ensure, gate, pruning, push_results, reads,
    registry, round_entry, rows,
};

impl StorageBackend for SqliteStorage {
    type Schema = Ensured;
    type Transaction<'s> = SqliteTransaction;

    fn ensured(&self) -> Option<Arc<Ensured>> {
        self.ensured_state()
    }

    fn ensure_schema(
        &self,
        schema: &CompiledSchema,
        opts: Request<'_, EnsureOptions>,
    ) -> Result<EnsureOutcome> {
        let _serialized = self
            .ensure_lock()
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let wanted = fingerprint(schema);
        if self
            .ensured_state()
            .is_some_and(|e| e.version() == schema.version && e.fingerprint == wanted)
        {
            return Ok(EnsureOutcome::Verified);
        }
        // A storage that cannot write (read-only file or mount, `mode=ro`,
        // moved file) says so now, not at the first push.
        drop(self.pools().writer()?);
        let outcome = ensure::run(self.pools(), schema, &opts, || self.now_ms())?;
        self.record_ensured(Arc::new(Ensured::new(Arc::new(schema.clone()))));
        Ok(outcome)
    }

    fn read_schema_marker(&self) -> Result<Option<SchemaMarker>> {
        self.pools().read_snapshot(|conn| {
            let marker = ensure::read_marker(conn)?;
            let fence = checkpoints::database_fence(conn)?;
            Ok(marker.map(|m| SchemaMarker {
                schema_version: m.version,
                layouts: m.layouts.unwrap_or_default(),
                required_writer_version: fence,
            }))
        })
    }

    fn touch_partition(
        &self,
        p: Partition<'_>,
        at_ms: i64,
        epoch: LogEpoch<'_>,
    ) -> Result<PartitionRegistryEntry> {
        self.pools()
            .write_once(|conn| registry::touch(conn, &p, at_ms, &epoch))
    }

    fn enter_round(&self, request: Request<'_, RoundEntryRequest>) -> Result<RoundEntry> {
        round_entry::enter(self.pools(), &request)
    }

    fn rotate_partition_log_epoch(
        &self,
        p: Partition<'_>,
        epoch: LogEpoch<'_>,
        at_ms: i64,
    ) -> Result<PartitionRegistryEntry> {
        self.pools()
            .write(|conn| registry::rotate(conn, &p, &epoch, at_ms))
    }

    fn get_partition_log_epoch(&self, p: Partition<'_>) -> Result<Option<String>> {
        self.pools().read(|conn| registry::log_epoch(conn, &p))
    }

    fn list_partition_registry(&self) -> Result<Vec<PartitionRegistryEntry>> {
        self.pools().read(registry::list)
    }

    fn list_partitions(&self) -> Result<Vec<String>> {
        self.pools().read(registry::partitions)
    }

    fn begin(&self, p: Partition<'_>, ensured: Option<Arc<Ensured>>) -> Result<SqliteTransaction> {
        let seat = self.pools().member()?;
        let writer_version = ensured.map_or(0, |e| e.version());
        Ok(SqliteTransaction::new(seat, writer_version, &p))
    }

    fn get_max_commit_seq(&self, p: Partition<'_>) -> Result<i64> {
        self.pools()
            .read(|conn| commit_log::max_commit_seq(conn, &p))
    }

    fn get_horizon_seq(&self, p: Partition<'_>) -> Result<i64> {
        self.pools().read(|conn| commit_log::horizon_seq(conn, &p))
    }

    fn set_horizon_seq(&self, p: Partition<'_>, seq: Checked<i64>) -> Result<()> {
        self.pools()
            .write_once(|conn| commit_log::raise_horizon(conn, &p, seq.get()))
    }

    fn prune_commits_through(
        &self,
        p: Partition<'_>,
        query: Request<'_, CommitPruneQuery>,
    ) -> Result<CommitPruneResult> {
        self.pools()
            .write(|conn| pruning::prune_through(conn, &p, &query))
    }

    fn get_commit_seq_before(&self, p: Partition<'_>, before_ms: i64) -> Result<i64> {
        self.pools()
            .read(|conn| commit_log::commit_seq_before(conn, &p, before_ms))
    }

    fn get_row(
        &self,
        p: Partition<'_>,
        table: Table<'_, Handle<Self>>,
        row_id: &str,
    ) -> Result<Option<StoredRow>> {
        self.pools()
            .read(|conn| rows::get(conn, &table, &p, row_id))
    }

    fn get_push_result(
        &self,
        p: Partition<'_>,
        client_id: &str,
        commit_id: &str,
    ) -> Result<Option<StoredPushResult>> {
        let text = self
            .pools()
            .read(|conn| push_results::get_text(conn, &p, client_id, commit_id))?;
        push_results::parse(text)
    }

    fn read_commit_window(
        &self,
        p: Partition<'_>,
        _table: Table<'_, Handle<Self>>,
        query: Request<'_, CommitWindowQuery>,
    ) -> Result<Vec<StoredCommit>> {
        self.pools()
            .read_snapshot(|conn| reads::commit_window(conn, &p, &query))
    }

    fn latest_scoped_change_seq(
        &self,
        p: Partition<'_>,
        table: Table<'_, Handle<Self>>,
        filter: Request<'_, ScopeFilter>,
    ) -> Result<i64> {
        self.pools()
            .read_snapshot(|conn| reads::latest_scoped_seq(conn, &p, table.name(), &filter))
    }

    fn scan_rows(
        &self,
        p: Partition<'_>,
        table: Table<'_, Handle<Self>>,
        query: Request<'_, RowScanQuery>,
    ) -> Result<Vec<StoredRow>> {
        self.pools()
            .read_snapshot(|conn| reads::scan_rows(conn, &table, &p, &query))
    }

    fn scan_row_payloads(
        &self,
        p: Partition<'_>,
        table: Table<'_, Handle<Self>>,
        query: Request<'_, RowScanQuery>,
    ) -> Result<Vec<ScannedRow>> {
        self.pools()
            .read_snapshot(|conn| reads::scan_rows(conn, &table, &p, &query))
    }

    fn scan_partition_rows(
        &self,
        p: Partition<'_>,
        table: Table<'_, Handle<Self>>,
        after: Option<&str>,
        limit: Checked<i64>,
    ) -> Result<Vec<StoredRow>> {
        self.pools()
            .read(|conn| reads::partition_scan(conn, &table, &p, after, limit.get()))
    }

    fn get_client_record(&self, p: Partition<'_>, client_id: &str) -> Result<Option<ClientRecord>> {
        self.pools().read(|conn| clients::get(conn, &p, client_id))
    }

    fn put_client_record(&self, p: Partition<'_>, record: Request<'_, ClientRecord>) -> Result<()> {
        // Refreshing the same actor's record is soft state: it commits at
        // `client_record_synchronous`; a new record (the actor binding)
        // keeps the writer's level.
        if self
            .pools()
            .write_once_soft(|conn| clients::refresh(conn, &p, &record))?
        {
            return Ok(());
        }
        self.pools()
            .write_once(|conn| clients::put(conn, &p, &record))
    }

    fn list_client_cursors(&self, p: Partition<'_>) -> Result<Vec<ClientCursorInfo>> {
        self.pools().read(|conn| clients::cursors(conn, &p))
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
        self.pools().write_once_soft(|conn| {
            clients::advance(conn, &p, client_id, actor_id, &epoch, cursor, at_ms)
        })
    }

    fn update_client_cursor(
        &self,
        p: Partition<'_>,
        client_id: &str,
        cursor: i64,
        at_ms: i64,
    ) -> Result<bool> {
        self.pools()
            .write_once(|conn| clients::update(conn, &p, client_id, cursor, at_ms))
    }

    fn get_active_client_cursor_floor(&self, p: Partition<'_>, cutoff: i64) -> Result<Option<i64>> {
        self.pools()
            .read(|conn| clients::active_floor(conn, &p, cutoff))
    }

    fn read_checkpoints(&self, p: Partition<'_>) -> Result<Vec<StoredCheckpoint>> {
        self.pools().read(|conn| checkpoints::read_all(conn, &p))
    }

    fn read_checkpoint(
        &self,
        p: Partition<'_>,
        name: CheckpointName<'_>,
    ) -> Result<Option<StoredCheckpoint>> {
        self.pools()
            .read(|conn| checkpoints::read_one(conn, &p, &name))
    }

    fn list_pending_checkpoints(&self, version: Checked<i32>) -> Result<Vec<CheckpointKey>> {
        self.pools()
            .read(|conn| checkpoints::list_pending(conn, version.get()))
    }

    fn list_unfinished_checkpoints(&self, version: Checked<i32>) -> Result<Vec<StoredCheckpoint>> {
        self.pools()
            .read(|conn| checkpoints::list_unfinished(conn, version.get()))
    }

    fn read_serve_gate(&self, p: Partition<'_>, running: Checked<i32>) -> Result<ServeGate> {
        self.pools()
            .read(|conn| gate::read(conn, &p, running.get()))
    }

    fn declare_checkpoint(
        &self,
        p: Partition<'_>,
        name: CheckpointName<'_>,
        version: Checked<i32>,
        now_ms: i64,
    ) -> Result<StoredCheckpoint> {
        self.pools()
            .write(|conn| checkpoints::declare(conn, &p, &name, version.get(), now_ms))
    }

    fn claim_checkpoint(
        &self,
        p: Partition<'_>,
        name: CheckpointName<'_>,
        version: Checked<i32>,
        now_ms: i64,
    ) -> Result<StoredCheckpoint> {
        self.pools()
            .write_once(|conn| checkpoints::claim(conn, &p, &name, version.get(), now_ms))
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
        self.pools()
            .write(|conn| checkpoints::advance(conn, &p, &name, epoch, watermark, observed, now_ms))
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
        self.pools().write_decide(|conn| {
            let outcome =
                checkpoints::activate(conn, &p, &name, epoch, watermark.get(), sources, now_ms)?;
            Ok(match outcome {
                ActivationOutcome::Activated => Finish::Commit(outcome),
                _ => Finish::Rollback(outcome),
            })
        })
    }

    fn source_coverage_seq(&self, p: Partition<'_>, tables: &Tables) -> Result<i64> {
        self.pools()
            .read(|conn| checkpoints::coverage_seq(conn, &p, tables))
    }

    fn has_source_changes_above(
        &self,
        p: Partition<'_>,
        tables: &Tables,
        seq: Checked<i64>,
    ) -> Result<Coverage> {
        self.pools()
            .read_snapshot(|conn| checkpoints::changes_above(conn, &p, tables, seq.get()))
    }

    fn list_source_changes(
        &self,
        p: Partition<'_>,
        tables: &Tables,
        after: Checked<i64>,
        limit: Checked<i64>,
    ) -> Result<Vec<SourceChange>> {
        self.pools()
            .read(|conn| checkpoints::source_changes(conn, &p, tables, after.get(), limit.get()))
    }

    fn required_writer_version(&self, p: Partition<'_>) -> Result<Option<i32>> {
        self.pools()
            .read_snapshot(|conn| checkpoints::required_writer_version(conn, &p))
    }

    fn segment_store(&self) -> Option<&dyn SegmentStore> {
        Some(self)
    }

    fn writer_fence_trigger(&self) -> Result<FenceTriggerState> {
        self.pools().read_snapshot(bootstrap::fence_trigger_state)
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
