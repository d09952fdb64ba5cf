//! The `StorageTransaction` impl (`storage-contract.md` §5): one writer
//! connection under `BEGIN IMMEDIATE`, bound to a partition, with the
//! Open/Poisoned state machine of §5.1. Validation runs before any statement
//! and never poisons; a failed statement always does.

use std::sync::Arc;

use rusqlite::Connection;
use sync_core::{
    validate, ActivationOutcome, AuthoritativeQueryRequest, AuthoritativeQueryResult, ClientRecord,
    Coverage, Error, ErrorCode, IndexRowScanQuery, NewCommit, NewReaction, Result, RowScanQuery,
    ServeGate, SourceChange, StorageTransaction, StoredCheckpoint, StoredPushResult, StoredRow,
};

use crate::pools::exec;
use crate::state::{require_table, Ensured};
use crate::writer::Seat;
use crate::{
    blobs, checkpoints, clients, commit_log, gate, push_results, query, reactions, reads, rows,
};

/// The rejection savepoint taken by `lock_partition_for_push`.
const SAVEPOINT: &str = "SAVEPOINT sync_push_candidate";
const ROLLBACK_TO_SAVEPOINT: &str = "ROLLBACK TO SAVEPOINT sync_push_candidate";
const RELEASE_SAVEPOINT: &str = "RELEASE SAVEPOINT sync_push_candidate";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Open,
    Poisoned(ErrorCode),
}

/// An open SQLite write transaction (the database-wide write lock is held
/// from `begin` until it ends; with group commit, a member of a group ends
/// at its `commit`, which returns once the group's `COMMIT` did). Dropping
/// it rolls back.
#[derive(Debug)]
pub struct SqliteTransaction {
    /// `None` once the transaction ended.
    seat: Option<Seat>,
    ensured: Option<Arc<Ensured>>,
    partition: String,
    writer_version: i32,
    state: State,
    push_locked: bool,
}

impl SqliteTransaction {
    /// Wraps a place on the writer inside an open SQLite transaction.
    pub(crate) fn new(seat: Seat, ensured: Option<Arc<Ensured>>, partition: &str) -> Self {
        Self {
            writer_version: ensured.as_ref().map_or(0, |e| e.version()),
            seat: Some(seat),
            ensured,
            partition: partition.to_owned(),
            state: State::Open,
            push_locked: false,
        }
    }

    fn ensured(&self) -> Option<&Ensured> {
        self.ensured.as_deref()
    }

    /// `transaction_aborted` once poisoned.
    fn check_open(&self) -> Result<()> {
        match self.state {
            State::Open => Ok(()),
            State::Poisoned(_) => Err(Error::new(ErrorCode::TransactionAborted)),
        }
    }

    /// Runs statements; any failure poisons the transaction.
    fn run<T>(&mut self, f: impl FnOnce(&Connection, &str) -> Result<T>) -> Result<T> {
        let Some(seat) = &self.seat else {
            return Err(Error::new(ErrorCode::TransactionAborted));
        };
        let result = f(seat.conn(), &self.partition);
        if let Err(error) = &result {
            self.state = State::Poisoned(error.code());
        }
        result
    }

    /// Ends the transaction with `ROLLBACK` (never fails).
    fn finish_rollback(&mut self) {
        if let Some(seat) = self.seat.take() {
            seat.rollback();
        }
    }

    /// Ends the transaction with `COMMIT` (with group commit: once the
    /// group's `COMMIT` did).
    fn finish_commit(&mut self) -> Result<()> {
        match self.seat.take() {
            Some(seat) => seat.commit(),
            None => Err(Error::new(ErrorCode::TransactionAborted)),
        }
    }

    fn finish_rejection(
        &mut self,
        client_id: &str,
        client_commit_id: &str,
        result: &StoredPushResult,
    ) -> Result<()> {
        let staged = self.seat.as_ref().map(Seat::conn).map_or_else(
            || Err(Error::new(ErrorCode::TransactionAborted)),
            |conn| {
                exec(conn, ROLLBACK_TO_SAVEPOINT)?;
                exec(conn, RELEASE_SAVEPOINT)?;
                push_results::put(conn, &self.partition, client_id, client_commit_id, result)
            },
        );
        if let (Ok(()), Some(seat)) = (&staged, &self.seat) {
            seat.stored_key(&self.partition, client_id, client_commit_id);
        }
        match staged {
            Ok(()) => self.finish_commit(),
            Err(error) => {
                self.finish_rollback();
                Err(error)
            }
        }
    }
}

impl Drop for SqliteTransaction {
    fn drop(&mut self) {
        self.finish_rollback();
    }
}

impl StorageTransaction for SqliteTransaction {
    fn partition(&self) -> &str {
        &self.partition
    }

    fn writer_version(&self) -> i32 {
        self.writer_version
    }

    fn get_row(&mut self, table: &str, row_id: &str) -> Result<Option<StoredRow>> {
        self.check_open()?;
        let table = require_table(self.ensured(), table)?.clone();
        self.run(|conn, p| rows::get(conn, &table, p, row_id))
    }

    fn get_tombstone_seq(&mut self, table: &str, row_id: &str) -> Result<Option<i64>> {
        self.check_open()?;
        require_table(self.ensured(), table)?;
        self.run(|conn, p| rows::tombstone_seq(conn, p, table, row_id))
    }

    fn get_push_result(
        &mut self,
        client_id: &str,
        client_commit_id: &str,
    ) -> Result<Option<StoredPushResult>> {
        self.check_open()?;
        if self
            .seat
            .as_ref()
            .is_some_and(|seat| seat.key_pending(&self.partition, client_id, client_commit_id))
        {
            // An earlier member of this commit group stored this key's
            // result; replaying it before the group's COMMIT could
            // acknowledge a push that then fails. The caller retries.
            return Err(Error::new(ErrorCode::Busy).detail("reason", "pending_in_commit_group"));
        }
        let text =
            self.run(|conn, p| push_results::get_text(conn, p, client_id, client_commit_id))?;
        push_results::parse(text)
    }

    fn scan_rows(&mut self, query: &RowScanQuery) -> Result<Vec<StoredRow>> {
        self.check_open()?;
        let Some(table) = reads::validate_scan(self.ensured(), &self.partition, query)?.cloned()
        else {
            return Ok(Vec::new());
        };
        self.run(|conn, p| reads::scan_rows(conn, &table, p, query))
    }

    fn scan_rows_by_index(&mut self, query: &IndexRowScanQuery) -> Result<Vec<StoredRow>> {
        self.check_open()?;
        let table = reads::validate_index_scan(self.ensured(), &self.partition, query)?.clone();
        self.run(|conn, p| reads::index_scan(conn, &table, p, query))
    }

    fn scan_partition_rows(
        &mut self,
        table: &str,
        after_row_id: Option<&str>,
        limit: i64,
    ) -> Result<Vec<StoredRow>> {
        self.check_open()?;
        let table =
            reads::validate_partition_scan(self.ensured(), &self.partition, table, limit)?.clone();
        self.run(|conn, p| reads::partition_scan(conn, &table, p, after_row_id, limit))
    }

    fn max_commit_seq(&mut self) -> Result<i64> {
        self.check_open()?;
        self.run(commit_log::max_commit_seq)
    }

    fn query_authoritative(
        &mut self,
        request: &AuthoritativeQueryRequest,
    ) -> Result<AuthoritativeQueryResult> {
        self.check_open()?;
        let prepared = query::prepare(self.ensured(), &self.partition, request)?;
        self.run(|conn, p| query::run(conn, p, &prepared))
    }

    fn lock_partition_for_push(&mut self) -> Result<()> {
        self.check_open()?;
        if self.push_locked {
            return Ok(());
        }
        self.run(|conn, _| exec(conn, SAVEPOINT))?;
        self.push_locked = true;
        Ok(())
    }

    fn commit_rejected_push_result(
        mut self: Box<Self>,
        client_id: &str,
        client_commit_id: &str,
        result: &StoredPushResult,
    ) -> Result<()> {
        let refusal = match self.state {
            State::Poisoned(code) if code != ErrorCode::ConstraintViolation => {
                Some(ErrorCode::TransactionAborted)
            }
            _ if !self.push_locked => Some(ErrorCode::PushLockRequired),
            _ => None,
        };
        if let Some(code) = refusal {
            self.finish_rollback();
            return Err(Error::new(code));
        }
        self.finish_rejection(client_id, client_commit_id, result)
    }

    fn upsert_row(&mut self, table: &str, row: &StoredRow, op_index: Option<u32>) -> Result<()> {
        self.check_open()?;
        let table = require_table(self.ensured(), table)?.clone();
        validate::row_id(&row.row_id)?;
        let values = rows::validate_payload(&table, &row.payload)?;
        self.run(|conn, p| rows::upsert(conn, &table, p, row, values.as_deref(), op_index))
    }

    fn delete_row(&mut self, table: &str, row_id: &str) -> Result<()> {
        self.check_open()?;
        let table = require_table(self.ensured(), table)?.clone();
        validate::row_id(row_id)?;
        self.run(|conn, p| rows::delete(conn, &table, p, row_id))
    }

    fn clear_tombstone(&mut self, table: &str, row_id: &str) -> Result<()> {
        self.check_open()?;
        require_table(self.ensured(), table)?;
        self.run(|conn, p| rows::clear_tombstone(conn, p, table, row_id))
    }

    fn set_blob_refs(&mut self, table: &str, row_id: &str, blob_ids: &[String]) -> Result<()> {
        self.check_open()?;
        require_table(self.ensured(), table)?;
        validate::row_id(row_id)?;
        self.run(|conn, p| blobs::set(conn, p, table, row_id, blob_ids))
    }

    fn append_commit(&mut self, commit: &NewCommit) -> Result<i64> {
        self.check_open()?;
        commit_log::validate(self.ensured(), commit)?;
        let writer_version = self.writer_version;
        self.run(|conn, p| commit_log::append(conn, p, writer_version, commit))
    }

    fn enqueue_reactions(&mut self, reactions: &[NewReaction]) -> Result<()> {
        self.check_open()?;
        self.run(|conn, p| reactions::enqueue(conn, p, reactions))
    }

    fn stage_client_record(&mut self, record: &ClientRecord) -> Result<bool> {
        self.check_open()?;
        if record.client_id.is_empty() {
            return Err(Error::invalid_argument("client_id", "empty"));
        }
        self.run(|conn, p| clients::put(conn, p, record))?;
        Ok(true)
    }

    fn put_push_result(
        &mut self,
        client_id: &str,
        client_commit_id: &str,
        result: &StoredPushResult,
    ) -> Result<()> {
        self.check_open()?;
        self.run(|conn, p| push_results::put(conn, p, client_id, client_commit_id, result))?;
        if let Some(seat) = &self.seat {
            seat.stored_key(&self.partition, client_id, client_commit_id);
        }
        Ok(())
    }

    fn read_serve_gate(&mut self, running_schema_version: i32) -> Result<ServeGate> {
        self.check_open()?;
        gate::validate_args(&self.partition, running_schema_version)?;
        self.run(|conn, p| gate::read(conn, p, running_schema_version))
    }

    fn read_checkpoint(&mut self, name: &str) -> Result<Option<StoredCheckpoint>> {
        self.check_open()?;
        checkpoints::validate_key(&self.partition, name)?;
        self.run(|conn, p| checkpoints::read_one(conn, p, name))
    }

    fn advance_checkpoint(
        &mut self,
        name: &str,
        owner_epoch: i64,
        watermark: i64,
        observed_rows: i64,
        now_ms: i64,
    ) -> Result<bool> {
        self.check_open()?;
        checkpoints::validate_advance(&self.partition, name, watermark, observed_rows)?;
        self.run(|conn, p| {
            checkpoints::advance(conn, p, name, owner_epoch, watermark, observed_rows, now_ms)
        })
    }

    fn activate_checkpoint(
        &mut self,
        name: &str,
        owner_epoch: i64,
        watermark: i64,
        sources: &[String],
        now_ms: i64,
    ) -> Result<ActivationOutcome> {
        self.check_open()?;
        let sources = checkpoints::validate_activate(
            self.ensured(),
            &self.partition,
            name,
            watermark,
            sources,
        )?;
        self.run(|conn, p| {
            checkpoints::activate(conn, p, name, owner_epoch, watermark, &sources, now_ms)
        })
    }

    fn has_source_changes_above(&mut self, tables: &[String], seq: i64) -> Result<Coverage> {
        self.check_open()?;
        let tables =
            checkpoints::validate_tables_seq(self.ensured(), &self.partition, tables, "seq", seq)?;
        self.run(|conn, p| checkpoints::changes_above(conn, p, &tables, seq))
    }

    fn list_source_changes(
        &mut self,
        tables: &[String],
        after_seq: i64,
        limit: i64,
    ) -> Result<Vec<SourceChange>> {
        self.check_open()?;
        let tables = checkpoints::validate_tables_seq(
            self.ensured(),
            &self.partition,
            tables,
            "after_seq",
            after_seq,
        )?;
        validate::lookup_limit(limit)?;
        self.run(|conn, p| checkpoints::source_changes(conn, p, &tables, after_seq, limit))
    }

    fn commit(mut self: Box<Self>) -> Result<()> {
        if let Err(error) = self.check_open() {
            self.finish_rollback();
            return Err(error);
        }
        self.finish_commit()
    }

    fn rollback(mut self: Box<Self>) -> Result<()> {
        self.finish_rollback();
        Ok(())
    }
}
