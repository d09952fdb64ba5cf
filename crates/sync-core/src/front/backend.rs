//! The pool-level half of a dialect: [`StorageBackend`], every method of
//! [`ServerStorage`](crate::ServerStorage) with its arguments already checked.

use std::sync::Arc;

use crate::checkpoints::{ActivationOutcome, CheckpointKey, Coverage, StoredCheckpoint};
use crate::clients::{ClientCursorInfo, ClientRecord, PartitionRegistryEntry};
use crate::error::{Error, ErrorCode, Result};
use crate::fence::FenceTriggerState;
use crate::gate::ServeGate;
use crate::push_result::StoredPushResult;
use crate::queries::{CommitPruneQuery, CommitPruneResult, CommitWindowQuery, RowScanQuery};
use crate::round_entry::{LogBounds, RoundEntry, RoundEntryRequest};
use crate::rows::{ScannedRow, SourceChange, StoredCommit, StoredRow};
use crate::schema::CompiledSchema;
use crate::scope::ScopeFilter;
use crate::segments::SegmentStore;
use crate::storage::{EnsureOptions, EnsureOutcome, SchemaMarker};

use super::checked::{Checked, CheckpointName, LogEpoch, Partition, Request, Table, Tables};
use super::ensured::EnsuredSchema;
use super::groups::{
    AdminBackend, BlobRefsBackend, IndexScanBackend, QueryBackend, ReactionsBackend,
};
use super::transaction_backend::TransactionBackend;

/// The backend's handle of one table.
pub type Handle<B> = <<B as StorageBackend>::Schema as EnsuredSchema>::Handle;

/// One database's I/O behind the validating front.
///
/// Every type implementing it is a [`ServerStorage`](crate::ServerStorage):
/// the front (a blanket implementation in this crate) checks each argument
/// in the order of `storage-contract.md` §4, answers what the checks alone
/// decide (an empty scan, a zero count), and only then calls the method of
/// the same name here with the checked values. The optional groups are
/// traits of their own ([`super::groups`]): a backend implements a group
/// and returns itself from its accessor ([`reactions`](Self::reactions),
/// …); the front derives the storage's capabilities from the accessors and
/// answers `sync.storage.capability_unsupported` for a group without one.
///
/// The checks the front has made are in the argument types: a
/// [`Partition`] is non-empty, a [`Table`] is in the ensured schema, a
/// [`Checked`] number is in its range, a [`Request`] passed its method's
/// checks. A method's docs say what the front checked beyond the types.
pub trait StorageBackend: Send + Sync {
    /// What `ensure_schema` records (the front resolves table names in it).
    type Schema: EnsuredSchema + 'static;
    /// An open transaction.
    type Transaction<'s>: TransactionBackend<Schema = Self::Schema> + 's
    where
        Self: 's;

    /// The schema last ensured on this instance, `None` before the first
    /// successful `ensure_schema`.
    fn ensured(&self) -> Option<Arc<Self::Schema>>;

    // ---- §4.1 schema lifecycle -------------------------------------------

    /// `ensure_schema` (`schema-and-migrations.md` §9), reporting what it
    /// did. The front checked every declaration against `schema.version`.
    fn ensure_schema(
        &self,
        schema: &CompiledSchema,
        opts: Request<'_, EnsureOptions>,
    ) -> Result<EnsureOutcome>;
    /// The stored schema marker, `None` on a database never bumped.
    fn read_schema_marker(&self) -> Result<Option<SchemaMarker>>;

    // ---- §4.2 partition registry -----------------------------------------

    /// Registers a partition or refreshes its activity.
    fn touch_partition(
        &self,
        partition: Partition<'_>,
        authenticated_at_ms: i64,
        initial_log_epoch: LogEpoch<'_>,
    ) -> Result<PartitionRegistryEntry>;
    /// The round entry; the front checked the partition, the initial log
    /// epoch and the running version (≥ 0). The default calls the single
    /// methods in the order of
    /// [`ServerStorage::enter_round`](crate::ServerStorage::enter_round).
    fn enter_round(&self, request: Request<'_, RoundEntryRequest>) -> Result<RoundEntry> {
        let request = request.get();
        let partition = Partition::new(&request.partition);
        let registry = self.touch_partition(
            partition,
            request.authenticated_at_ms,
            LogEpoch::new(&request.initial_log_epoch),
        )?;
        let gate = self.read_serve_gate(partition, Checked::new(request.running_schema_version))?;
        let client_record = self.get_client_record(partition, &request.client_id)?;
        let push_results = request
            .client_commit_ids
            .iter()
            .map(|id| self.get_push_result(partition, &request.client_id, id))
            .collect();
        let log_bounds = if request.log_bounds {
            Some(LogBounds {
                max_commit_seq: self.get_max_commit_seq(partition)?,
                horizon_seq: self.get_horizon_seq(partition)?,
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
    /// Replaces the log epoch and deletes the partition's client records.
    fn rotate_partition_log_epoch(
        &self,
        partition: Partition<'_>,
        log_epoch: LogEpoch<'_>,
        authenticated_at_ms: i64,
    ) -> Result<PartitionRegistryEntry>;
    /// The registry epoch.
    fn get_partition_log_epoch(&self, partition: Partition<'_>) -> Result<Option<String>>;
    /// Every registry entry, byte-ordered.
    fn list_partition_registry(&self) -> Result<Vec<PartitionRegistryEntry>>;
    /// The registered partition names, byte-ordered.
    fn list_partitions(&self) -> Result<Vec<String>>;

    // ---- §4.3 transactions -----------------------------------------------

    /// Opens a transaction bound to `partition`, begun with `ensured` (what
    /// [`ensured`](Self::ensured) returned: its version is the writer version).
    fn begin(
        &self,
        partition: Partition<'_>,
        ensured: Option<Arc<Self::Schema>>,
    ) -> Result<Self::Transaction<'_>>;

    // ---- §4.4 commit log, horizon, pruning -------------------------------

    /// The allocated commit counter.
    fn get_max_commit_seq(&self, partition: Partition<'_>) -> Result<i64>;
    /// The horizon.
    fn get_horizon_seq(&self, partition: Partition<'_>) -> Result<i64>;
    /// Raises the horizon monotonically; `seq` is in `0..=2^53−1`.
    fn set_horizon_seq(&self, partition: Partition<'_>, seq: Checked<i64>) -> Result<()>;
    /// Epoch-fenced pruning; the front checked the cursor and the epoch
    /// (`invalid_prune_cursor`), not the head (checked under the lock).
    fn prune_commits_through(
        &self,
        partition: Partition<'_>,
        query: Request<'_, CommitPruneQuery>,
    ) -> Result<CommitPruneResult>;
    /// Newest retained `commit_seq` created strictly before the bound.
    fn get_commit_seq_before(
        &self,
        partition: Partition<'_>,
        created_before_ms: i64,
    ) -> Result<i64>;

    // ---- §4.5–§4.7 reads -------------------------------------------------

    /// The committed current row.
    fn get_row(
        &self,
        partition: Partition<'_>,
        table: Table<'_, Handle<Self>>,
        row_id: &str,
    ) -> Result<Option<StoredRow>>;
    /// The stored push result of a commit key.
    fn get_push_result(
        &self,
        partition: Partition<'_>,
        client_id: &str,
        client_commit_id: &str,
    ) -> Result<Option<StoredPushResult>>;
    /// A commit window of `table`; the front answered `[]` already when the
    /// candidate variable has no values, `limit_changes ≤ 0` or
    /// `through_seq ≤ after_seq`.
    fn read_commit_window(
        &self,
        partition: Partition<'_>,
        table: Table<'_, Handle<Self>>,
        query: Request<'_, CommitWindowQuery>,
    ) -> Result<Vec<StoredCommit>>;
    /// The newest scoped change of `table`; the front answered 0 already
    /// when the candidate variable has no values.
    fn latest_scoped_change_seq(
        &self,
        partition: Partition<'_>,
        table: Table<'_, Handle<Self>>,
        filter: Request<'_, ScopeFilter>,
    ) -> Result<i64>;
    /// A scope scan of `table`; the front refused an empty filter and
    /// answered `[]` already for an empty value list or `limit ≤ 0`.
    fn scan_rows(
        &self,
        partition: Partition<'_>,
        table: Table<'_, Handle<Self>>,
        query: Request<'_, RowScanQuery>,
    ) -> Result<Vec<StoredRow>>;
    /// [`Self::scan_rows`] without scopes and column versions
    /// (`ServerStorage::scan_row_payloads`), after the same checks; the
    /// default projects `scan_rows`.
    fn scan_row_payloads(
        &self,
        partition: Partition<'_>,
        table: Table<'_, Handle<Self>>,
        query: Request<'_, RowScanQuery>,
    ) -> Result<Vec<ScannedRow>> {
        Ok(self
            .scan_rows(partition, table, query)?
            .into_iter()
            .map(ScannedRow::from)
            .collect())
    }

    // ---- §4.8 trusted lookups and partition scans ------------------------

    /// Keyset scan of one table; `limit` is in 1..=1000.
    fn scan_partition_rows(
        &self,
        partition: Partition<'_>,
        table: Table<'_, Handle<Self>>,
        after_row_id: Option<&str>,
        limit: Checked<i64>,
    ) -> Result<Vec<StoredRow>>;

    // ---- §4.9 clients and cursors ----------------------------------------

    /// One client record.
    fn get_client_record(
        &self,
        partition: Partition<'_>,
        client_id: &str,
    ) -> Result<Option<ClientRecord>>;
    /// Inserts or replaces a record whose `client_id` is non-empty (see
    /// [`ServerStorage::put_client_record`](crate::ServerStorage::put_client_record)
    /// for what a refresh may skip).
    fn put_client_record(
        &self,
        partition: Partition<'_>,
        record: Request<'_, ClientRecord>,
    ) -> Result<()>;
    /// Cursor summaries ordered by client id.
    fn list_client_cursors(&self, partition: Partition<'_>) -> Result<Vec<ClientCursorInfo>>;
    /// Actor- and epoch-guarded monotonic cursor update.
    fn advance_client_cursor(
        &self,
        partition: Partition<'_>,
        client_id: &str,
        actor_id: &str,
        log_epoch: LogEpoch<'_>,
        cursor: i64,
        updated_at_ms: i64,
    ) -> Result<bool>;
    /// Unguarded monotonic cursor update.
    fn update_client_cursor(
        &self,
        partition: Partition<'_>,
        client_id: &str,
        cursor: i64,
        updated_at_ms: i64,
    ) -> Result<bool>;
    /// Minimum cursor of records updated at or after `cutoff_ms`.
    fn get_active_client_cursor_floor(
        &self,
        partition: Partition<'_>,
        cutoff_ms: i64,
    ) -> Result<Option<i64>>;

    // ---- §4.14 RFC 0007 --------------------------------------------------

    /// Every checkpoint of the partition, ordered by name.
    fn read_checkpoints(&self, partition: Partition<'_>) -> Result<Vec<StoredCheckpoint>>;
    /// One checkpoint.
    fn read_checkpoint(
        &self,
        partition: Partition<'_>,
        name: CheckpointName<'_>,
    ) -> Result<Option<StoredCheckpoint>>;
    /// Non-activated checkpoints at `schema_version` (≥ 1).
    fn list_pending_checkpoints(&self, schema_version: Checked<i32>) -> Result<Vec<CheckpointKey>>;
    /// Non-activated checkpoints below `schema_version` (≥ 1).
    fn list_unfinished_checkpoints(
        &self,
        schema_version: Checked<i32>,
    ) -> Result<Vec<StoredCheckpoint>>;
    /// The serve-gate token; `running_schema_version` ≥ 0.
    fn read_serve_gate(
        &self,
        partition: Partition<'_>,
        running_schema_version: Checked<i32>,
    ) -> Result<ServeGate>;
    /// Declares a checkpoint; `schema_version` ≥ 1.
    fn declare_checkpoint(
        &self,
        partition: Partition<'_>,
        name: CheckpointName<'_>,
        schema_version: Checked<i32>,
        now_ms: i64,
    ) -> Result<StoredCheckpoint>;
    /// Claims a checkpoint; `schema_version` ≥ 1.
    fn claim_checkpoint(
        &self,
        partition: Partition<'_>,
        name: CheckpointName<'_>,
        schema_version: Checked<i32>,
        now_ms: i64,
    ) -> Result<StoredCheckpoint>;
    /// Compare-and-set progress; `watermark` and `observed_rows` ≥ 0.
    fn advance_checkpoint(
        &self,
        partition: Partition<'_>,
        name: CheckpointName<'_>,
        owner_epoch: i64,
        watermark: Checked<i64>,
        observed_rows: Checked<i64>,
        now_ms: i64,
    ) -> Result<bool>;
    /// Activation under the partition write lock; `watermark` ≥ 0.
    fn activate_checkpoint(
        &self,
        partition: Partition<'_>,
        name: CheckpointName<'_>,
        owner_epoch: i64,
        watermark: Checked<i64>,
        sources: &Tables,
        now_ms: i64,
    ) -> Result<ActivationOutcome>;
    /// Highest retained `commit_seq` among changes of `tables`.
    fn source_coverage_seq(&self, partition: Partition<'_>, tables: &Tables) -> Result<i64>;
    /// Coverage of `tables` above `seq` (≥ 0).
    fn has_source_changes_above(
        &self,
        partition: Partition<'_>,
        tables: &Tables,
        seq: Checked<i64>,
    ) -> Result<Coverage>;
    /// Retained changes of `tables` above `after_seq` (≥ 0); `limit` in 1..=1000.
    fn list_source_changes(
        &self,
        partition: Partition<'_>,
        tables: &Tables,
        after_seq: Checked<i64>,
        limit: Checked<i64>,
    ) -> Result<Vec<SourceChange>>;
    /// The effective writer fence of the partition.
    fn required_writer_version(&self, partition: Partition<'_>) -> Result<Option<i32>>;
    /// The state of the fence trigger (an operator read; the default says
    /// the storage cannot tell).
    fn writer_fence_trigger(&self) -> Result<FenceTriggerState> {
        Err(Error::new(ErrorCode::CapabilityUnsupported)
            .detail("capability", "writer_fence_trigger"))
    }
    /// The store of bootstrap segments in this storage's database, if any.
    fn segment_store(&self) -> Option<&dyn SegmentStore> {
        None
    }
    /// Where this process hears of other processes' commits, if anywhere
    /// (`ServerStorage::commit_feed`).
    fn commit_feed(&self) -> Option<std::sync::Arc<dyn crate::CommitFeed>> {
        None
    }

    // ---- the optional groups (`groups`) ------------------------------------

    /// §4.8 index lookups, if this storage implements them.
    fn index_scan(&self) -> Option<&dyn IndexScanBackend<Self::Schema>> {
        None
    }
    /// §4.10 reactions, if this storage implements them.
    fn reactions(&self) -> Option<&dyn ReactionsBackend> {
        None
    }
    /// §4.11 the blob reference index, if this storage implements it.
    fn blob_refs(&self) -> Option<&dyn BlobRefsBackend> {
        None
    }
    /// §4.12 the admin read surface, if this storage implements it.
    fn admin(&self) -> Option<&dyn AdminBackend<Self::Schema>> {
        None
    }
    /// §4.13 registered queries, if this storage implements them.
    fn authoritative_query(&self) -> Option<&dyn QueryBackend<Self::Schema>> {
        None
    }
}
