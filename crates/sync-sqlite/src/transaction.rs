//! The SQLite transaction behind the validating front
//! (`storage-contract.md` §5): one writer connection under
//! `BEGIN IMMEDIATE`, bound to a partition, with the Open/Poisoned state
//! machine of §5.1. The front checks every argument before any statement;
//! a failed statement always poisons.

use rusqlite::Connection;
use sync_core::front::{
    Checked, CheckedRow, CheckpointName, IndexLookup, Request, RowId, Table, Tables,
    TransactionBackend, TxHandle,
};
use sync_core::{
    ActivationOutcome, AuthoritativeQueryRequest, AuthoritativeQueryResult, ClientRecord, Coverage,
    Error, ErrorCode, NewCommit, NewReaction, Result, RowScanQuery, ServeGate, SourceChange,
    StoredCheckpoint, StoredPushResult, StoredRow, StoredScopes,
};

use crate::pools::exec;
use crate::state::Ensured;
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
    partition: String,
    writer_version: i32,
    state: State,
    push_locked: bool,
}

impl SqliteTransaction {
    /// Wraps a place on the writer inside an open SQLite transaction of
    /// a writer at `writer_version`.
    pub(crate) fn new(seat: Seat, writer_version: i32, partition: &str) -> Self {
        Self {
            writer_version,
            seat: Some(seat),
            partition: partition.to_owned(),
            state: State::Open,
            push_locked: false,
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

impl TransactionBackend for SqliteTransaction {
    type Schema = Ensured;

    fn check_open(&self) -> Result<()> {
        match self.state {
            State::Open => Ok(()),
            State::Poisoned(_) => Err(Error::new(ErrorCode::TransactionAborted)),
        }
    }

    fn partition(&self) -> &str {
        &self.partition
    }

    fn writer_version(&self) -> i32 {
        self.writer_version
    }

    fn get_row(&mut self, t: Table<'_, TxHandle<Self>>, row_id: &str) -> Result<Option<StoredRow>> {
        self.run(|conn, p| rows::get(conn, &t, p, row_id))
    }

    fn get_tombstone_seq(
        &mut self,
        t: Table<'_, TxHandle<Self>>,
        row_id: &str,
    ) -> Result<Option<i64>> {
        self.run(|conn, p| rows::tombstone_seq(conn, p, t.name(), row_id))
    }

    fn get_delete_scopes(
        &mut self,
        t: Table<'_, TxHandle<Self>>,
        row_id: &str,
        commit_seq: Checked<i64>,
    ) -> Result<Option<StoredScopes>> {
        self.run(|conn, p| rows::delete_scopes(conn, p, t.name(), row_id, commit_seq.get()))
    }

    fn get_push_result(
        &mut self,
        client_id: &str,
        client_commit_id: &str,
    ) -> Result<Option<StoredPushResult>> {
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

    fn scan_rows(
        &mut self,
        t: Table<'_, TxHandle<Self>>,
        query: Request<'_, RowScanQuery>,
    ) -> Result<Vec<StoredRow>> {
        self.run(|conn, p| reads::scan_rows(conn, &t, p, &query))
    }

    fn scan_rows_by_index(
        &mut self,
        lookup: IndexLookup<'_, TxHandle<Self>>,
    ) -> Result<Vec<StoredRow>> {
        self.run(|conn, p| reads::index_scan(conn, p, lookup))
    }

    fn scan_partition_rows(
        &mut self,
        t: Table<'_, TxHandle<Self>>,
        after: Option<&str>,
        limit: Checked<i64>,
    ) -> Result<Vec<StoredRow>> {
        self.run(|conn, p| reads::partition_scan(conn, &t, p, after, limit.get()))
    }

    fn max_commit_seq(&mut self) -> Result<i64> {
        self.run(commit_log::max_commit_seq)
    }

    fn query_authoritative(
        &mut self,
        ensured: &Ensured,
        request: &AuthoritativeQueryRequest,
    ) -> Result<AuthoritativeQueryResult> {
        let prepared = query::prepare(ensured, &self.partition, request)?;
        self.run(|conn, p| query::run(conn, p, &prepared))
    }

    fn lock_partition_for_push(&mut self) -> Result<()> {
        if self.push_locked {
            return Ok(());
        }
        self.run(|conn, _| exec(conn, SAVEPOINT))?;
        self.push_locked = true;
        Ok(())
    }

    fn commit_rejected_push_result(
        mut self,
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

    fn upsert_row(
        &mut self,
        t: Table<'_, TxHandle<Self>>,
        row: CheckedRow<'_>,
        op_index: Option<u32>,
    ) -> Result<()> {
        self.run(|conn, p| rows::upsert(conn, &t, p, &row, row.projection(), op_index))
    }

    fn delete_row(&mut self, t: Table<'_, TxHandle<Self>>, row_id: RowId<'_>) -> Result<()> {
        self.run(|conn, p| rows::delete(conn, &t, p, &row_id))
    }

    fn clear_tombstone(&mut self, t: Table<'_, TxHandle<Self>>, row_id: &str) -> Result<()> {
        self.run(|conn, p| rows::clear_tombstone(conn, p, t.name(), row_id))
    }

    fn set_blob_refs(
        &mut self,
        t: Table<'_, TxHandle<Self>>,
        row_id: RowId<'_>,
        blob_ids: &[String],
    ) -> Result<()> {
        self.run(|conn, p| blobs::set(conn, p, t.name(), &row_id, blob_ids))
    }

    fn append_commit(&mut self, commit: Request<'_, NewCommit>) -> Result<i64> {
        let writer_version = self.writer_version;
        self.run(|conn, p| commit_log::append(conn, p, writer_version, &commit))
    }

    fn enqueue_reactions(&mut self, reactions: &[NewReaction]) -> Result<()> {
        self.run(|conn, p| reactions::enqueue(conn, p, reactions))
    }

    fn stage_client_record(&mut self, record: Request<'_, ClientRecord>) -> Result<bool> {
        self.run(|conn, p| clients::put(conn, p, &record))?;
        Ok(true)
    }

    fn put_push_result(
        &mut self,
        client_id: &str,
        client_commit_id: &str,
        result: &StoredPushResult,
    ) -> Result<()> {
        self.run(|conn, p| push_results::put(conn, p, client_id, client_commit_id, result))?;
        if let Some(seat) = &self.seat {
            seat.stored_key(&self.partition, client_id, client_commit_id);
        }
        Ok(())
    }

    fn read_serve_gate(&mut self, running: Checked<i32>) -> Result<ServeGate> {
        self.run(|conn, p| gate::read(conn, p, running.get()))
    }

    fn read_checkpoint(&mut self, name: CheckpointName<'_>) -> Result<Option<StoredCheckpoint>> {
        self.run(|conn, p| checkpoints::read_one(conn, p, &name))
    }

    fn advance_checkpoint(
        &mut self,
        name: CheckpointName<'_>,
        epoch: i64,
        watermark: Checked<i64>,
        observed: Checked<i64>,
        now_ms: i64,
    ) -> Result<bool> {
        let (watermark, observed) = (watermark.get(), observed.get());
        self.run(|conn, p| checkpoints::advance(conn, p, &name, epoch, watermark, observed, now_ms))
    }

    fn activate_checkpoint(
        &mut self,
        name: CheckpointName<'_>,
        epoch: i64,
        watermark: Checked<i64>,
        sources: &Tables,
        now_ms: i64,
    ) -> Result<ActivationOutcome> {
        self.run(|conn, p| {
            checkpoints::activate(conn, p, &name, epoch, watermark.get(), sources, now_ms)
        })
    }

    fn has_source_changes_above(&mut self, tables: &Tables, seq: Checked<i64>) -> Result<Coverage> {
        self.run(|conn, p| checkpoints::changes_above(conn, p, tables, seq.get()))
    }

    fn list_source_changes(
        &mut self,
        tables: &Tables,
        after: Checked<i64>,
        limit: Checked<i64>,
    ) -> Result<Vec<SourceChange>> {
        self.run(|conn, p| checkpoints::source_changes(conn, p, tables, after.get(), limit.get()))
    }

    fn commit(mut self) -> Result<()> {
        if let Err(error) = self.check_open() {
            self.finish_rollback();
            return Err(error);
        }
        self.finish_commit()
    }

    fn rollback(mut self) -> Result<()> {
        self.finish_rollback();
        Ok(())
    }
}
