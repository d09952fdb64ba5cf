//! The front of the transaction methods: [`FrontTransaction`] makes any
//! [`TransactionBackend`] a [`StorageTransaction`] whose methods refuse a
//! poisoned transaction first, then check their arguments in the order of
//! `storage-contract.md` §5, then call the backend with the checked values.

use std::fmt;
use std::sync::Arc;

use crate::authoritative::{AuthoritativeQueryRequest, AuthoritativeQueryResult};
use crate::checkpoints::{ActivationOutcome, Coverage, StoredCheckpoint};
use crate::clients::ClientRecord;
use crate::error::{Error, ErrorCode, Result};
use crate::gate::ServeGate;
use crate::push_prelude::{PushCommitOutcome, PushPrelude, PushPreludeRequest};
use crate::push_result::StoredPushResult;
use crate::queries::{IndexRowScanQuery, RowScanQuery};
use crate::reactions::NewReaction;
use crate::rows::{NewCommit, SourceChange, StoredRow};
use crate::scope::StoredScopes;
use crate::transaction::StorageTransaction;

use super::checked::Request;
use super::checks;
use super::transaction_backend::TransactionBackend;

/// A backend transaction behind the front, with the ensured schema it was
/// begun with (the front resolves table names in it).
pub struct FrontTransaction<T: TransactionBackend> {
    inner: T,
    ensured: Option<Arc<T::Schema>>,
}

impl<T: TransactionBackend + fmt::Debug> fmt::Debug for FrontTransaction<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FrontTransaction")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<T: TransactionBackend> FrontTransaction<T> {
    /// Wraps `inner`, begun with `ensured`.
    pub(crate) fn new(inner: T, ensured: Option<Arc<T::Schema>>) -> Self {
        Self { inner, ensured }
    }
}

impl<T: TransactionBackend> StorageTransaction for FrontTransaction<T> {
    fn partition(&self) -> &str {
        self.inner.partition()
    }

    fn writer_version(&self) -> i32 {
        self.inner.writer_version()
    }

    fn get_row(&mut self, table: &str, row_id: &str) -> Result<Option<StoredRow>> {
        self.inner.check_open()?;
        let table = checks::table(self.ensured.as_deref(), table)?;
        self.inner.get_row(table, row_id)
    }

    fn get_tombstone_seq(&mut self, table: &str, row_id: &str) -> Result<Option<i64>> {
        self.inner.check_open()?;
        let table = checks::table(self.ensured.as_deref(), table)?;
        self.inner.get_tombstone_seq(table, row_id)
    }

    fn get_delete_scopes(
        &mut self,
        table: &str,
        row_id: &str,
        commit_seq: i64,
    ) -> Result<Option<StoredScopes>> {
        self.inner.check_open()?;
        let table = checks::table(self.ensured.as_deref(), table)?;
        let commit_seq = checks::non_negative("commit_seq", commit_seq)?;
        self.inner.get_delete_scopes(table, row_id, commit_seq)
    }

    fn get_rows(&mut self, table: &str, row_ids: &[String]) -> Result<Vec<Option<StoredRow>>> {
        self.inner.check_open()?;
        let table = checks::table(self.ensured.as_deref(), table)?;
        self.inner.get_rows(table, row_ids)
    }

    fn get_push_result(
        &mut self,
        client_id: &str,
        client_commit_id: &str,
    ) -> Result<Option<StoredPushResult>> {
        self.inner.check_open()?;
        self.inner.get_push_result(client_id, client_commit_id)
    }

    fn scan_rows(&mut self, query: &RowScanQuery) -> Result<Vec<StoredRow>> {
        self.inner.check_open()?;
        if query.scope_filter.is_empty() {
            return Err(Error::new(ErrorCode::ScanRequiresScope));
        }
        if checks::candidate_values(&query.scope_filter).is_none() {
            return Ok(Vec::new());
        }
        let table = checks::table(self.ensured.as_deref(), &query.table)?;
        if query.limit <= 0 {
            return Ok(Vec::new());
        }
        self.inner.scan_rows(table, Request::new(query))
    }

    fn scan_rows_by_index(&mut self, query: &IndexRowScanQuery) -> Result<Vec<StoredRow>> {
        self.inner.check_open()?;
        let lookup = checks::index_lookup(self.ensured.as_deref(), query)?;
        self.inner.scan_rows_by_index(lookup)
    }

    fn scan_partition_rows(
        &mut self,
        table: &str,
        after_row_id: Option<&str>,
        limit: i64,
    ) -> Result<Vec<StoredRow>> {
        self.inner.check_open()?;
        let table = checks::table(self.ensured.as_deref(), table)?;
        let limit = checks::limit(limit)?;
        self.inner.scan_partition_rows(table, after_row_id, limit)
    }

    fn max_commit_seq(&mut self) -> Result<i64> {
        self.inner.check_open()?;
        self.inner.max_commit_seq()
    }

    fn query_authoritative(
        &mut self,
        request: &AuthoritativeQueryRequest,
    ) -> Result<AuthoritativeQueryResult> {
        self.inner.check_open()?;
        let Some(ensured) = self.ensured.as_deref() else {
            return Err(Error::new(ErrorCode::SchemaNotEnsured));
        };
        self.inner.query_authoritative(ensured, request)
    }

    fn lock_partition_for_push(&mut self) -> Result<()> {
        self.inner.check_open()?;
        self.inner.lock_partition_for_push()
    }

    fn begin_push(&mut self, request: &PushPreludeRequest) -> Result<PushPrelude> {
        self.inner.check_open()?;
        let running = checks::running_version(request.running_schema_version)?;
        if let Some(prelude) = self.inner.begin_push(request, running)? {
            return Ok(prelude);
        }
        crate::push_prelude::single_calls(self, request)
    }

    fn commit_rejected_push_result(
        self: Box<Self>,
        client_id: &str,
        client_commit_id: &str,
        result: &StoredPushResult,
    ) -> Result<()> {
        self.inner
            .commit_rejected_push_result(client_id, client_commit_id, result)
    }

    fn upsert_row(&mut self, table: &str, row: &StoredRow, op_index: Option<u32>) -> Result<()> {
        self.inner.check_open()?;
        let table = checks::table(self.ensured.as_deref(), table)?;
        let row = checks::row(table, row)?;
        self.inner.upsert_row(table, row, op_index)
    }

    fn upsert_rows(&mut self, table: &str, rows: &[StoredRow]) -> Result<()> {
        self.inner.check_open()?;
        let table = checks::table(self.ensured.as_deref(), table)?;
        let rows = rows
            .iter()
            .map(|row| checks::row(table, row))
            .collect::<Result<Vec<_>>>()?;
        self.inner.upsert_rows(table, rows)
    }

    fn delete_row(&mut self, table: &str, row_id: &str) -> Result<()> {
        self.inner.check_open()?;
        let table = checks::table(self.ensured.as_deref(), table)?;
        let row_id = checks::row_id(row_id)?;
        self.inner.delete_row(table, row_id)
    }

    fn clear_tombstone(&mut self, table: &str, row_id: &str) -> Result<()> {
        self.inner.check_open()?;
        let table = checks::table(self.ensured.as_deref(), table)?;
        self.inner.clear_tombstone(table, row_id)
    }

    fn set_blob_refs(&mut self, table: &str, row_id: &str, blob_ids: &[String]) -> Result<()> {
        self.inner.check_open()?;
        let table = checks::table(self.ensured.as_deref(), table)?;
        let row_id = checks::row_id(row_id)?;
        self.inner.set_blob_refs(table, row_id, blob_ids)
    }

    fn append_commit(&mut self, commit: &NewCommit) -> Result<i64> {
        self.inner.check_open()?;
        checks::commit(self.ensured.as_deref(), commit)?;
        self.inner.append_commit(Request::new(commit))
    }

    fn enqueue_reactions(&mut self, reactions: &[NewReaction]) -> Result<()> {
        self.inner.check_open()?;
        self.inner.enqueue_reactions(reactions)
    }

    fn stage_client_record(&mut self, record: &ClientRecord) -> Result<bool> {
        self.inner.check_open()?;
        if record.client_id.is_empty() {
            return Err(Error::invalid_argument("client_id", "empty"));
        }
        self.inner.stage_client_record(Request::new(record))
    }

    fn put_push_result(
        &mut self,
        client_id: &str,
        client_commit_id: &str,
        result: &StoredPushResult,
    ) -> Result<()> {
        self.inner.check_open()?;
        self.inner
            .put_push_result(client_id, client_commit_id, result)
    }

    fn read_serve_gate(&mut self, running_schema_version: i32) -> Result<ServeGate> {
        self.inner.check_open()?;
        let running = checks::running_version(running_schema_version)?;
        self.inner.read_serve_gate(running)
    }

    fn read_checkpoint(&mut self, name: &str) -> Result<Option<StoredCheckpoint>> {
        self.inner.check_open()?;
        let name = checks::name(name)?;
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
        self.inner.check_open()?;
        let name = checks::name(name)?;
        let watermark = checks::watermark(watermark)?;
        let observed = checks::non_negative("observed_rows", observed_rows)?;
        self.inner
            .advance_checkpoint(name, owner_epoch, watermark, observed, now_ms)
    }

    fn activate_checkpoint(
        &mut self,
        name: &str,
        owner_epoch: i64,
        watermark: i64,
        sources: &[String],
        now_ms: i64,
    ) -> Result<ActivationOutcome> {
        self.inner.check_open()?;
        let name = checks::name(name)?;
        let watermark = checks::watermark(watermark)?;
        let sources = checks::tables(self.ensured.as_deref(), sources)?;
        self.inner
            .activate_checkpoint(name, owner_epoch, watermark, &sources, now_ms)
    }

    fn has_source_changes_above(&mut self, tables: &[String], seq: i64) -> Result<Coverage> {
        self.inner.check_open()?;
        let seq = checks::non_negative("seq", seq)?;
        let tables = checks::tables(self.ensured.as_deref(), tables)?;
        self.inner.has_source_changes_above(&tables, seq)
    }

    fn list_source_changes(
        &mut self,
        tables: &[String],
        after_seq: i64,
        limit: i64,
    ) -> Result<Vec<SourceChange>> {
        self.inner.check_open()?;
        let after_seq = checks::non_negative("after_seq", after_seq)?;
        let tables = checks::tables(self.ensured.as_deref(), tables)?;
        let limit = checks::limit(limit)?;
        self.inner.list_source_changes(&tables, after_seq, limit)
    }

    fn commit(self: Box<Self>) -> Result<()> {
        self.inner.commit()
    }

    fn commit_push(
        self: Box<Self>,
        client_id: &str,
        client_commit_id: &str,
        rejection: &dyn Fn(u32) -> StoredPushResult,
    ) -> Result<PushCommitOutcome> {
        self.inner
            .commit_push(client_id, client_commit_id, rejection)
    }

    fn rollback(self: Box<Self>) -> Result<()> {
        self.inner.rollback()
    }
}
