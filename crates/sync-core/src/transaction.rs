//! The `StorageTransaction` trait (`storage-contract.md` §5).
//!
//! A transaction is bound to one partition, used by one thread at a time
//! (`&mut self`), and rolled back when dropped without `commit`/`rollback`.
//! A method that fails after issuing a statement poisons it: afterwards only
//! `rollback` (and, after a constraint violation under the push lock,
//! `commit_rejected_push_result`) are allowed.

use crate::authoritative::{AuthoritativeQueryRequest, AuthoritativeQueryResult};
use crate::capabilities::Capability;
use crate::checkpoints::{ActivationOutcome, Coverage, StoredCheckpoint};
use crate::clients::ClientRecord;
use crate::error::Result;
use crate::gate::ServeGate;
use crate::push_prelude::{PushCommitOutcome, PushPrelude, PushPreludeRequest};
use crate::push_result::StoredPushResult;
use crate::queries::{IndexRowScanQuery, RowScanQuery};
use crate::reactions::NewReaction;
use crate::rows::{NewCommit, SourceChange, StoredRow};
use crate::scope::StoredScopes;

/// One open storage transaction bound to a partition.
pub trait StorageTransaction: Send {
    // ---- §5.2 reads ------------------------------------------------------

    /// The partition this transaction is bound to.
    fn partition(&self) -> &str;
    /// The writer version stamped on appended commits (0 before `ensure_schema`).
    fn writer_version(&self) -> i32;
    /// The candidate row (staged writes included).
    fn get_row(&mut self, table: &str, row_id: &str) -> Result<Option<StoredRow>>;
    /// `commit_seq` of the newest retained delete of the row.
    fn get_tombstone_seq(&mut self, table: &str, row_id: &str) -> Result<Option<i64>>;
    /// The stored scopes of the row's delete change in commit `commit_seq`
    /// (the commit a tombstone names), `None` when that commit holds no
    /// delete of the row (pruned, or a tombstone written without one).
    /// When the commit deleted the row more than once, the last delete.
    fn get_delete_scopes(
        &mut self,
        table: &str,
        row_id: &str,
        commit_seq: i64,
    ) -> Result<Option<StoredScopes>>;
    /// The candidate rows of `row_ids`, in the same order (`None` = absent).
    ///
    /// Batch form of [`get_row`](Self::get_row) for set-based backfills: the
    /// default calls `get_row` for each id; a dialect may override it with
    /// one statement. Same errors as `get_row`.
    fn get_rows(&mut self, table: &str, row_ids: &[String]) -> Result<Vec<Option<StoredRow>>> {
        row_ids
            .iter()
            .map(|row_id| self.get_row(table, row_id))
            .collect()
    }
    /// The push result, on this transaction's connection.
    fn get_push_result(
        &mut self,
        client_id: &str,
        client_commit_id: &str,
    ) -> Result<Option<StoredPushResult>>;
    /// Scope-filtered scan over the candidate state.
    fn scan_rows(&mut self, query: &RowScanQuery) -> Result<Vec<StoredRow>>;
    /// Index lookup over the candidate state (capability `IndexScan`).
    fn scan_rows_by_index(&mut self, query: &IndexRowScanQuery) -> Result<Vec<StoredRow>> {
        let _ = query;
        Err(Capability::IndexScan.unsupported())
    }
    /// Keyset scan of one table over the candidate state.
    fn scan_partition_rows(
        &mut self,
        table: &str,
        after_row_id: Option<&str>,
        limit: i64,
    ) -> Result<Vec<StoredRow>>;
    /// The partition counter as seen by this transaction.
    fn max_commit_seq(&mut self) -> Result<i64>;
    /// A registered query over the candidate state (capability `AuthoritativeQuery`).
    fn query_authoritative(
        &mut self,
        request: &AuthoritativeQueryRequest,
    ) -> Result<AuthoritativeQueryResult> {
        let _ = request;
        Err(Capability::AuthoritativeQuery.unsupported())
    }

    // ---- §5.3 locking and rejection finalization -------------------------

    /// Takes the partition push lock and marks the rejection savepoint. Idempotent.
    fn lock_partition_for_push(&mut self) -> Result<()>;
    /// The push prelude: [`lock_partition_for_push`](Self::lock_partition_for_push),
    /// then, under the lock, [`read_serve_gate`](Self::read_serve_gate) of
    /// `running_schema_version`, [`get_push_result`](Self::get_push_result)
    /// of the key and — optionally — the candidate rows the push names.
    ///
    /// Batch form for dialects that pay per round trip: a dialect may serve
    /// all of it in one. The lock and the gate fail the call as the single
    /// methods do; the push-result read's own error is returned inside the
    /// prelude, so the caller still checks the gate first. The default
    /// calls the single methods in that order, then
    /// [`get_rows`](Self::get_rows) per table, so a dialect needs nothing
    /// to support it; a row read's error fails the call.
    fn begin_push(&mut self, request: &PushPreludeRequest) -> Result<PushPrelude> {
        crate::push_prelude::single_calls(self, request)
    }
    /// Discards every staged write after the lock, stores `result` (first
    /// writer wins) and commits.
    fn commit_rejected_push_result(
        self: Box<Self>,
        client_id: &str,
        client_commit_id: &str,
        result: &StoredPushResult,
    ) -> Result<()>;

    // ---- §5.4 writes -----------------------------------------------------

    /// Inserts or replaces a row, its projection and its scope-index entries.
    fn upsert_row(&mut self, table: &str, row: &StoredRow, op_index: Option<u32>) -> Result<()>;
    /// Batch form of [`upsert_row`](Self::upsert_row) for set-based
    /// backfills: the effect of `upsert_row(table, row, None)` for each row in
    /// order (a later row with the same id wins). Validation errors are those
    /// of `upsert_row`; a constraint violation is `constraint_violation` with
    /// `op_index = None` and poisons the transaction as `upsert_row` does.
    /// After any error, which of the rows were written is unspecified: the
    /// caller rolls back. The default calls `upsert_row` for each row; a
    /// dialect may override it with one statement.
    fn upsert_rows(&mut self, table: &str, rows: &[StoredRow]) -> Result<()> {
        for row in rows {
            self.upsert_row(table, row, None)?;
        }
        Ok(())
    }
    /// Removes a row, its scope-index entries and blob references.
    fn delete_row(&mut self, table: &str, row_id: &str) -> Result<()>;
    /// Removes the row's tombstone.
    fn clear_tombstone(&mut self, table: &str, row_id: &str) -> Result<()>;
    /// Replaces the row's blob reference set (capability `BlobRefs`).
    fn set_blob_refs(&mut self, table: &str, row_id: &str, blob_ids: &[String]) -> Result<()> {
        let _ = (table, row_id, blob_ids);
        Err(Capability::BlobRefs.unsupported())
    }
    /// Allocates the next dense `commit_seq` and appends the commit.
    fn append_commit(&mut self, commit: &NewCommit) -> Result<i64>;
    /// Enqueues reactions in this transaction (capability `Reactions`).
    fn enqueue_reactions(&mut self, reactions: &[NewReaction]) -> Result<()> {
        let _ = reactions;
        Err(Capability::Reactions.unsupported())
    }
    /// Stages the round's client record (`engine.md` §5.8) in this push
    /// transaction, written by its `commit` as
    /// [`ServerStorage::put_client_record`](crate::ServerStorage::put_client_record)
    /// would write it, and discarded by a rollback. Returns `false` when
    /// the dialect does not stage records (the default): the caller then
    /// writes the record itself after the commit. The engine stages the
    /// record in the last push of a round without a pull, so such a round
    /// commits once instead of twice.
    fn stage_client_record(&mut self, record: &ClientRecord) -> Result<bool> {
        let _ = record;
        Ok(false)
    }
    /// Stores a push result if its key is absent (first writer wins).
    fn put_push_result(
        &mut self,
        client_id: &str,
        client_commit_id: &str,
        result: &StoredPushResult,
    ) -> Result<()>;

    // ---- §5.5 RFC 0007 ---------------------------------------------------

    /// The serve gate on this transaction's connection.
    fn read_serve_gate(&mut self, running_schema_version: i32) -> Result<ServeGate>;
    /// One checkpoint, read-your-own-writes.
    fn read_checkpoint(&mut self, name: &str) -> Result<Option<StoredCheckpoint>>;
    /// Compare-and-set progress inside this transaction.
    fn advance_checkpoint(
        &mut self,
        name: &str,
        owner_epoch: i64,
        watermark: i64,
        observed_rows: i64,
        now_ms: i64,
    ) -> Result<bool>;
    /// Activation inside this transaction (sees its own staged commits).
    fn activate_checkpoint(
        &mut self,
        name: &str,
        owner_epoch: i64,
        watermark: i64,
        sources: &[String],
        now_ms: i64,
    ) -> Result<ActivationOutcome>;
    /// Coverage probe, read-your-own-writes.
    fn has_source_changes_above(&mut self, tables: &[String], seq: i64) -> Result<Coverage>;
    /// Catch-up listing, read-your-own-writes.
    fn list_source_changes(
        &mut self,
        tables: &[String],
        after_seq: i64,
        limit: i64,
    ) -> Result<Vec<SourceChange>>;

    // ---- lifecycle -------------------------------------------------------

    /// Commits every staged write atomically (a poisoned transaction rolls back
    /// and reports `transaction_aborted`).
    fn commit(self: Box<Self>) -> Result<()>;
    /// Commits an applied push begun with
    /// [`PushPreludeRequest::deferred_violations`]. When a row write the
    /// dialect sent with the commit violates a constraint, nothing of the
    /// push's writes persists: the dialect stores `rejection(op_index)` as
    /// the push result of `client_id`/`client_commit_id` (first writer
    /// wins, as [`commit_rejected_push_result`](Self::commit_rejected_push_result)),
    /// commits that and returns [`PushCommitOutcome::Rejected`]. Any other
    /// failure is reported as [`commit`](Self::commit) reports it.
    ///
    /// The default body is `commit`: a dialect that defers no write has
    /// reported every violation from the write itself.
    fn commit_push(
        self: Box<Self>,
        client_id: &str,
        client_commit_id: &str,
        rejection: &dyn Fn(u32) -> StoredPushResult,
    ) -> Result<PushCommitOutcome> {
        let _ = (client_id, client_commit_id, rejection);
        self.commit().map(|()| PushCommitOutcome::Committed)
    }
    /// Rolls back; never fails because of poison.
    fn rollback(self: Box<Self>) -> Result<()>;
}
