//! The transaction half of a dialect: [`TransactionBackend`], every method
//! of [`StorageTransaction`](crate::StorageTransaction) with its arguments
//! already checked.

use crate::authoritative::{AuthoritativeQueryRequest, AuthoritativeQueryResult};
use crate::capabilities::Capability;
use crate::checkpoints::{ActivationOutcome, Coverage, StoredCheckpoint};
use crate::clients::ClientRecord;
use crate::error::Result;
use crate::gate::ServeGate;
use crate::push_prelude::{PushCommitOutcome, PushPrelude, PushPreludeRequest};
use crate::push_result::StoredPushResult;
use crate::queries::RowScanQuery;
use crate::reactions::NewReaction;
use crate::rows::{NewCommit, SourceChange, StoredRow};
use crate::scope::StoredScopes;

use super::checked::{
    Checked, CheckedRow, CheckpointName, IndexLookup, Request, RowId, Table, Tables,
};
use super::ensured::EnsuredSchema;

/// The backend's handle of one table, seen from a transaction.
pub type TxHandle<T> = <<T as TransactionBackend>::Schema as EnsuredSchema>::Handle;

/// One open transaction's I/O behind the validating front.
///
/// [`StorageBackend::begin`](super::StorageBackend::begin) returns one; the
/// front wraps it in a [`StorageTransaction`](crate::StorageTransaction)
/// that, on every call, first asks [`check_open`](Self::check_open) (a
/// poisoned transaction refuses everything with
/// `sync.storage.transaction_aborted` before any argument is looked at),
/// then checks the arguments in the order of `storage-contract.md` §5 —
/// errors that never poison — and only then calls the method of the same
/// name here. The poisoning itself is the backend's: a method that fails
/// after issuing a statement must poison the transaction.
pub trait TransactionBackend: Send {
    /// The ensured schema the transaction was begun with.
    type Schema: EnsuredSchema;

    /// `Ok` while the transaction can run statements;
    /// `sync.storage.transaction_aborted` once poisoned or ended.
    fn check_open(&self) -> Result<()>;
    /// The partition this transaction is bound to.
    fn partition(&self) -> &str;
    /// The writer version stamped on appended commits.
    fn writer_version(&self) -> i32;

    // ---- §5.2 reads ------------------------------------------------------

    /// The candidate row.
    fn get_row(
        &mut self,
        table: Table<'_, TxHandle<Self>>,
        row_id: &str,
    ) -> Result<Option<StoredRow>>;
    /// `commit_seq` of the newest retained delete of the row.
    fn get_tombstone_seq(
        &mut self,
        table: Table<'_, TxHandle<Self>>,
        row_id: &str,
    ) -> Result<Option<i64>>;
    /// The scopes of the row's last delete change in `commit_seq` (≥ 0).
    fn get_delete_scopes(
        &mut self,
        table: Table<'_, TxHandle<Self>>,
        row_id: &str,
        commit_seq: Checked<i64>,
    ) -> Result<Option<StoredScopes>>;
    /// The candidate rows of `row_ids` in order; the default reads each.
    fn get_rows(
        &mut self,
        table: Table<'_, TxHandle<Self>>,
        row_ids: &[String],
    ) -> Result<Vec<Option<StoredRow>>> {
        row_ids.iter().map(|id| self.get_row(table, id)).collect()
    }
    /// The push result, on this transaction's connection.
    fn get_push_result(
        &mut self,
        client_id: &str,
        client_commit_id: &str,
    ) -> Result<Option<StoredPushResult>>;
    /// A scope scan over the candidate state; the front refused an empty
    /// filter and answered `[]` already for an empty value list or
    /// `limit ≤ 0`.
    fn scan_rows(
        &mut self,
        table: Table<'_, TxHandle<Self>>,
        query: Request<'_, RowScanQuery>,
    ) -> Result<Vec<StoredRow>>;
    /// An index lookup over the candidate state (capability `IndexScan`).
    fn scan_rows_by_index(
        &mut self,
        lookup: IndexLookup<'_, TxHandle<Self>>,
    ) -> Result<Vec<StoredRow>> {
        let _ = lookup;
        Err(Capability::IndexScan.unsupported())
    }
    /// Keyset scan of one table; `limit` is in 1..=1000.
    fn scan_partition_rows(
        &mut self,
        table: Table<'_, TxHandle<Self>>,
        after_row_id: Option<&str>,
        limit: Checked<i64>,
    ) -> Result<Vec<StoredRow>>;
    /// The partition counter as seen by this transaction.
    fn max_commit_seq(&mut self) -> Result<i64>;
    /// A registered query over the candidate state, against the ensured
    /// `schema` (the front refused `schema_not_ensured`).
    fn query_authoritative(
        &mut self,
        schema: &Self::Schema,
        request: &AuthoritativeQueryRequest,
    ) -> Result<AuthoritativeQueryResult> {
        let _ = (schema, request);
        Err(Capability::AuthoritativeQuery.unsupported())
    }

    // ---- §5.3 locking and rejection finalization -------------------------

    /// Takes the partition push lock and marks the rejection savepoint.
    fn lock_partition_for_push(&mut self) -> Result<()>;
    /// The push prelude in one batch, `Ok(None)` (the default) when the
    /// backend does not batch it: the front then makes the single calls
    /// of [`StorageTransaction::begin_push`](crate::StorageTransaction::begin_push).
    /// `running` is the request's running version, checked (≥ 0).
    fn begin_push(
        &mut self,
        request: &PushPreludeRequest,
        running: Checked<i32>,
    ) -> Result<Option<PushPrelude>> {
        let _ = (request, running);
        Ok(None)
    }
    /// Finalizes a rejection (the backend checks its lock and poison state).
    fn commit_rejected_push_result(
        self,
        client_id: &str,
        client_commit_id: &str,
        result: &StoredPushResult,
    ) -> Result<()>
    where
        Self: Sized;

    // ---- §5.4 writes -----------------------------------------------------

    /// Writes a checked row.
    fn upsert_row(
        &mut self,
        table: Table<'_, TxHandle<Self>>,
        row: CheckedRow<'_>,
        op_index: Option<u32>,
    ) -> Result<()>;
    /// Writes checked rows (a later row with the same id wins); the default
    /// writes each.
    fn upsert_rows(
        &mut self,
        table: Table<'_, TxHandle<Self>>,
        rows: Vec<CheckedRow<'_>>,
    ) -> Result<()> {
        rows.into_iter()
            .try_for_each(|row| self.upsert_row(table, row, None))
    }
    /// Removes a row.
    fn delete_row(&mut self, table: Table<'_, TxHandle<Self>>, row_id: RowId<'_>) -> Result<()>;
    /// Removes the row's tombstone.
    fn clear_tombstone(&mut self, table: Table<'_, TxHandle<Self>>, row_id: &str) -> Result<()>;
    /// Replaces the row's blob references (capability `BlobRefs`).
    fn set_blob_refs(
        &mut self,
        table: Table<'_, TxHandle<Self>>,
        row_id: RowId<'_>,
        blob_ids: &[String],
    ) -> Result<()> {
        let _ = (table, row_id, blob_ids);
        Err(Capability::BlobRefs.unsupported())
    }
    /// Appends a commit whose every change names a known table and is
    /// consistent with its operation.
    fn append_commit(&mut self, commit: Request<'_, NewCommit>) -> Result<i64>;
    /// Enqueues reactions (capability `Reactions`).
    fn enqueue_reactions(&mut self, reactions: &[NewReaction]) -> Result<()> {
        let _ = reactions;
        Err(Capability::Reactions.unsupported())
    }
    /// Stages a record whose `client_id` is non-empty; `false` (the
    /// default) when the backend does not stage records.
    fn stage_client_record(&mut self, record: Request<'_, ClientRecord>) -> Result<bool> {
        let _ = record;
        Ok(false)
    }
    /// Stores a push result if its key is absent.
    fn put_push_result(
        &mut self,
        client_id: &str,
        client_commit_id: &str,
        result: &StoredPushResult,
    ) -> Result<()>;

    // ---- §5.5 RFC 0007 ---------------------------------------------------

    /// The serve gate; `running` ≥ 0.
    fn read_serve_gate(&mut self, running: Checked<i32>) -> Result<ServeGate>;
    /// One checkpoint.
    fn read_checkpoint(&mut self, name: CheckpointName<'_>) -> Result<Option<StoredCheckpoint>>;
    /// Compare-and-set progress; `watermark` and `observed_rows` ≥ 0.
    fn advance_checkpoint(
        &mut self,
        name: CheckpointName<'_>,
        owner_epoch: i64,
        watermark: Checked<i64>,
        observed_rows: Checked<i64>,
        now_ms: i64,
    ) -> Result<bool>;
    /// Activation inside this transaction; `watermark` ≥ 0.
    fn activate_checkpoint(
        &mut self,
        name: CheckpointName<'_>,
        owner_epoch: i64,
        watermark: Checked<i64>,
        sources: &Tables,
        now_ms: i64,
    ) -> Result<ActivationOutcome>;
    /// Coverage of `tables` above `seq` (≥ 0).
    fn has_source_changes_above(&mut self, tables: &Tables, seq: Checked<i64>) -> Result<Coverage>;
    /// Retained changes of `tables` above `after_seq` (≥ 0); `limit` in 1..=1000.
    fn list_source_changes(
        &mut self,
        tables: &Tables,
        after_seq: Checked<i64>,
        limit: Checked<i64>,
    ) -> Result<Vec<SourceChange>>;

    // ---- lifecycle -------------------------------------------------------

    /// Commits (a poisoned transaction rolls back and reports
    /// `transaction_aborted`).
    fn commit(self) -> Result<()>
    where
        Self: Sized;
    /// Commits an applied push begun with deferred violations; the default
    /// is [`commit`](Self::commit).
    fn commit_push(
        self,
        client_id: &str,
        client_commit_id: &str,
        rejection: &dyn Fn(u32) -> StoredPushResult,
    ) -> Result<PushCommitOutcome>
    where
        Self: Sized,
    {
        let _ = (client_id, client_commit_id, rejection);
        self.commit().map(|()| PushCommitOutcome::Committed)
    }
    /// Rolls back; never fails because of poison.
    fn rollback(self) -> Result<()>
    where
        Self: Sized;
}
