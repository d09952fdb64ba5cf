//! [`StorageBackend`] for [`MariadbStorage`]: the pool-level half of the
//! contract. The optional groups keep the trait's default bodies
//! (`sync.storage.capability_unsupported`) until they are written.

use std::sync::Arc;

use sync_core::front::{
    AdminBackend, BlobRefsBackend, Checked, CheckpointName, Handle, IndexScanBackend, LogEpoch,
    Partition, QueryBackend, ReactionsBackend, Request, StorageBackend, Table, Tables,
};
use sync_core::{
    ActivationOutcome, CheckpointKey, ClientCursorInfo, ClientRecord, CommitPruneQuery,
    CommitPruneResult, CommitWindowQuery, CompiledSchema, Coverage, EnsureOptions, EnsureOutcome,
    PartitionRegistryEntry, Result, RoundEntry, RoundEntryRequest, RowScanQuery, ScanOutput,
    ScannedRow, SchemaMarker, ScopeFilter, ServeGate, SourceChange, StoredCheckpoint, StoredCommit,
    StoredPushResult, StoredRow,
};

use crate::ensured::Ensured;
use crate::instance::MariadbStorage;
use crate::pool::Conn;
use crate::push_lock::lock_partition;
use crate::transaction::{self, MariadbTransaction};
use crate::{checkpoints, commit_log, ensure, reads, records, round_entry, rows, scans, windows};

impl StorageBackend for MariadbStorage {
    type Schema = Ensured;
    type Transaction<'s> = MariadbTransaction<'s>;

    fn ensured(&self) -> Option<Arc<Ensured>> {
        self.ensured_schema()
    }

    fn ensure_schema(
        &self,
        schema: &CompiledSchema,
        opts: Request<'_, EnsureOptions>,
    ) -> Result<EnsureOutcome> {
        let _guard = self.ensure_guard();
        if self
            .ensured_schema()
            .is_some_and(|e| **sync_core::front::EnsuredSchema::schema(&*e) == *schema)
        {
            return Ok(EnsureOutcome::Verified);
        }
        self.ensure_base_tables()?;
        let outcome = ensure::run(self, schema, opts.get())?;
        self.set_ensured(Arc::new(Ensured::new(Arc::new(schema.clone()))));
        Ok(outcome)
    }

    fn read_schema_marker(&self) -> Result<Option<SchemaMarker>> {
        let marker = self.with_conn(ensure::read_marker)?;
        Ok(marker.filter(|m| m.version > 0).map(|m| SchemaMarker {
            schema_version: m.version,
            layouts: m.layouts,
            required_writer_version: m.required_writer_version,
        }))
    }

    fn touch_partition(
        &self,
        p: Partition<'_>,
        at_ms: i64,
        epoch: LogEpoch<'_>,
    ) -> Result<PartitionRegistryEntry> {
        self.with_conn(|c| records::touch(c, p.as_str(), at_ms, epoch.as_str()))
    }

    /// One statement (`round_entry`), plus the touch when the registry
    /// entry is missing or stale.
    fn enter_round(&self, request: Request<'_, RoundEntryRequest>) -> Result<RoundEntry> {
        self.with_conn(|c| round_entry::enter(c, request.get()))
    }

    fn rotate_partition_log_epoch(
        &self,
        p: Partition<'_>,
        epoch: LogEpoch<'_>,
        at_ms: i64,
    ) -> Result<PartitionRegistryEntry> {
        self.with_write(|c| {
            lock_partition(c, p.as_str())?;
            records::rotate(c, p.as_str(), epoch.as_str(), at_ms)
        })
    }

    fn get_partition_log_epoch(&self, p: Partition<'_>) -> Result<Option<String>> {
        self.with_conn(|c| records::log_epoch(c, p.as_str()))
    }

    fn list_partition_registry(&self) -> Result<Vec<PartitionRegistryEntry>> {
        self.with_conn(records::list_registry)
    }

    fn list_partitions(&self) -> Result<Vec<String>> {
        Ok(self
            .list_partition_registry()?
            .into_iter()
            .map(|e| e.partition)
            .collect())
    }

    fn begin(
        &self,
        p: Partition<'_>,
        ensured: Option<Arc<Ensured>>,
    ) -> Result<MariadbTransaction<'_>> {
        transaction::begin(self, p.as_str(), ensured)
    }

    fn get_max_commit_seq(&self, p: Partition<'_>) -> Result<i64> {
        self.with_conn(|c| commit_log::max_commit_seq(c, p.as_str()))
    }

    fn get_horizon_seq(&self, p: Partition<'_>) -> Result<i64> {
        self.with_conn(|c| commit_log::horizon_seq(c, p.as_str()))
    }

    fn set_horizon_seq(&self, p: Partition<'_>, seq: Checked<i64>) -> Result<()> {
        self.with_write(|c| {
            lock_partition(c, p.as_str())?;
            c.exec(
                "UPDATE `sync_partitions` SET `horizon_seq` = GREATEST(`horizon_seq`, ?) \
                 WHERE `partition` = ?",
                (seq.get(), p.as_str()),
            )?;
            Ok(())
        })
    }

    fn prune_commits_through(
        &self,
        p: Partition<'_>,
        query: Request<'_, CommitPruneQuery>,
    ) -> Result<CommitPruneResult> {
        self.with_write(|c| {
            lock_partition(c, p.as_str())?;
            commit_log::prune_through(c, p.as_str(), query.get())
        })
    }

    fn get_commit_seq_before(&self, p: Partition<'_>, before_ms: i64) -> Result<i64> {
        self.with_conn(|c| commit_log::commit_seq_before(c, p.as_str(), before_ms))
    }

    fn get_row(
        &self,
        p: Partition<'_>,
        t: Table<'_, Handle<Self>>,
        row_id: &str,
    ) -> Result<Option<StoredRow>> {
        self.with_conn(|c| rows::get(c, t.handle(), p.as_str(), row_id))
    }

    fn get_push_result(
        &self,
        p: Partition<'_>,
        client_id: &str,
        client_commit_id: &str,
    ) -> Result<Option<StoredPushResult>> {
        let text = self
            .with_conn(|c| records::push_result_text(c, p.as_str(), client_id, client_commit_id))?;
        records::parse_push_result(text)
    }

    fn read_commit_window(
        &self,
        p: Partition<'_>,
        _t: Table<'_, Handle<Self>>,
        query: Request<'_, CommitWindowQuery>,
    ) -> Result<Vec<StoredCommit>> {
        self.with_conn(|c| windows::commit_window(c, p.as_str(), query.get()))
    }

    fn latest_scoped_change_seq(
        &self,
        p: Partition<'_>,
        t: Table<'_, Handle<Self>>,
        filter: Request<'_, ScopeFilter>,
    ) -> Result<i64> {
        self.with_conn(|c| reads::latest_scoped_seq(c, p.as_str(), t.name(), filter.get()))
    }

    fn scan_rows(
        &self,
        p: Partition<'_>,
        t: Table<'_, Handle<Self>>,
        query: Request<'_, RowScanQuery>,
    ) -> Result<Vec<StoredRow>> {
        self.scan(p, t, query)
    }

    fn scan_row_payloads(
        &self,
        p: Partition<'_>,
        t: Table<'_, Handle<Self>>,
        query: Request<'_, RowScanQuery>,
    ) -> Result<Vec<ScannedRow>> {
        self.scan(p, t, query)
    }

    fn scan_partition_rows(
        &self,
        p: Partition<'_>,
        t: Table<'_, Handle<Self>>,
        after: Option<&str>,
        limit: Checked<i64>,
    ) -> Result<Vec<StoredRow>> {
        self.with_conn(|c| rows::partition_scan(c, t.handle(), p.as_str(), after, limit.get()))
    }

    fn get_client_record(&self, p: Partition<'_>, client_id: &str) -> Result<Option<ClientRecord>> {
        self.with_conn(|c| records::get_client(c, p.as_str(), client_id))
    }

    fn put_client_record(&self, p: Partition<'_>, record: Request<'_, ClientRecord>) -> Result<()> {
        self.with_conn(|c| records::put_client(c, p.as_str(), record.get()))
    }

    fn list_client_cursors(&self, p: Partition<'_>) -> Result<Vec<ClientCursorInfo>> {
        self.with_conn(|c| records::cursors(c, p.as_str()))
    }

    fn advance_client_cursor(
        &self,
        p: Partition<'_>,
        client_id: &str,
        actor_id: &str,
        epoch: LogEpoch<'_>,
        cursor: i64,
        updated_at_ms: i64,
    ) -> Result<bool> {
        self.with_conn(|c| {
            records::advance_cursor(
                c,
                p.as_str(),
                client_id,
                actor_id,
                epoch.as_str(),
                cursor,
                updated_at_ms,
            )
        })
    }

    fn update_client_cursor(
        &self,
        p: Partition<'_>,
        client_id: &str,
        cursor: i64,
        updated_at_ms: i64,
    ) -> Result<bool> {
        self.with_conn(|c| records::update_cursor(c, p.as_str(), client_id, cursor, updated_at_ms))
    }

    fn get_active_client_cursor_floor(
        &self,
        p: Partition<'_>,
        cutoff_ms: i64,
    ) -> Result<Option<i64>> {
        self.with_conn(|c| records::active_floor(c, p.as_str(), cutoff_ms))
    }

    fn read_checkpoints(&self, p: Partition<'_>) -> Result<Vec<StoredCheckpoint>> {
        let names: Vec<String> = self.with_conn(|c| {
            c.rows(
                "SELECT CAST(`name` AS CHAR) FROM `sync_backfill_checkpoints` \
                 WHERE `partition` = ? ORDER BY `name`",
                (p.as_str(),),
            )
        })?;
        self.with_conn(|c| {
            names
                .iter()
                .filter_map(|n| checkpoints::read_one(c, p.as_str(), n).transpose())
                .collect()
        })
    }

    fn read_checkpoint(
        &self,
        p: Partition<'_>,
        name: CheckpointName<'_>,
    ) -> Result<Option<StoredCheckpoint>> {
        self.with_conn(|c| checkpoints::read_one(c, p.as_str(), name.as_str()))
    }

    fn list_pending_checkpoints(&self, version: Checked<i32>) -> Result<Vec<CheckpointKey>> {
        self.with_conn(|c| checkpoints::list_pending(c, version.get()))
    }

    fn list_unfinished_checkpoints(&self, version: Checked<i32>) -> Result<Vec<StoredCheckpoint>> {
        self.with_conn(|c| checkpoints::list_unfinished(c, version.get()))
    }

    fn read_serve_gate(&self, p: Partition<'_>, running: Checked<i32>) -> Result<ServeGate> {
        self.with_conn(|c| reads::serve_gate(c, p.as_str(), running.get()))
    }

    fn declare_checkpoint(
        &self,
        p: Partition<'_>,
        name: CheckpointName<'_>,
        version: Checked<i32>,
        now_ms: i64,
    ) -> Result<StoredCheckpoint> {
        self.with_write(|c| {
            checkpoints::declare(c, p.as_str(), name.as_str(), version.get(), now_ms)
        })
    }

    fn claim_checkpoint(
        &self,
        p: Partition<'_>,
        name: CheckpointName<'_>,
        version: Checked<i32>,
        now_ms: i64,
    ) -> Result<StoredCheckpoint> {
        self.with_write(|c| checkpoints::claim(c, p.as_str(), name.as_str(), version.get(), now_ms))
    }

    fn advance_checkpoint(
        &self,
        p: Partition<'_>,
        name: CheckpointName<'_>,
        owner_epoch: i64,
        watermark: Checked<i64>,
        observed_rows: Checked<i64>,
        now_ms: i64,
    ) -> Result<bool> {
        self.with_write(|c| {
            checkpoints::advance(
                c,
                p.as_str(),
                name.as_str(),
                owner_epoch,
                watermark.get(),
                observed_rows.get(),
                now_ms,
            )
        })
    }

    fn activate_checkpoint(
        &self,
        p: Partition<'_>,
        name: CheckpointName<'_>,
        owner_epoch: i64,
        watermark: Checked<i64>,
        sources: &Tables,
        now_ms: i64,
    ) -> Result<ActivationOutcome> {
        self.with_write(|c| {
            lock_partition(c, p.as_str())?;
            checkpoints::activate(
                c,
                p.as_str(),
                name.as_str(),
                owner_epoch,
                watermark.get(),
                sources.as_slice(),
                now_ms,
            )
        })
    }

    fn source_coverage_seq(&self, p: Partition<'_>, tables: &Tables) -> Result<i64> {
        self.with_conn(|c| checkpoints::coverage_seq(c, p.as_str(), tables.as_slice()))
    }

    fn has_source_changes_above(
        &self,
        p: Partition<'_>,
        tables: &Tables,
        seq: Checked<i64>,
    ) -> Result<Coverage> {
        self.with_conn(|c| checkpoints::changes_above(c, p.as_str(), tables.as_slice(), seq.get()))
    }

    fn list_source_changes(
        &self,
        p: Partition<'_>,
        tables: &Tables,
        after_seq: Checked<i64>,
        limit: Checked<i64>,
    ) -> Result<Vec<SourceChange>> {
        self.with_conn(|c| {
            checkpoints::source_changes(
                c,
                p.as_str(),
                tables.as_slice(),
                after_seq.get(),
                limit.get(),
            )
        })
    }

    fn writer_fence_trigger(&self) -> Result<sync_core::FenceTriggerState> {
        self.with_conn(|c| {
            let tables: Option<i64> = c.first(
                "SELECT COUNT(*) FROM information_schema.TABLES \
                 WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'sync_commits'",
                (),
            )?;
            if tables.unwrap_or(0) == 0 {
                return Ok(sync_core::FenceTriggerState::NoCommitTable);
            }
            Ok(crate::bootstrap::read_trigger(c)?
                .map_or(sync_core::FenceTriggerState::Missing, |t| t.state()))
        })
    }

    fn segment_store(&self) -> Option<&dyn sync_core::SegmentStore> {
        Some(self)
    }

    fn required_writer_version(&self, p: Partition<'_>) -> Result<Option<i32>> {
        self.with_conn(|c| checkpoints::required_writer_version(c, p.as_str()))
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

impl MariadbStorage {
    /// A scope scan with either output: the common one-statement page in
    /// autocommit, a longer scan again inside a read snapshot
    /// (`storage-contract.md` §1 rule 3).
    fn scan<R: ScanOutput>(
        &self,
        p: Partition<'_>,
        t: Table<'_, Handle<Self>>,
        query: Request<'_, RowScanQuery>,
    ) -> Result<Vec<R>> {
        let scan =
            |c: &mut Conn, max| scans::scan_rows(c, t.handle(), p.as_str(), query.get(), max);
        if let Some(rows) = self.with_conn(|c| scan(c, Some(1)))? {
            return Ok(rows);
        }
        self.with_read(|c| scan(c, None))
            .map(Option::unwrap_or_default)
    }
}
