//! The MariaDB transaction behind the validating front
//! (`storage-contract.md` §5, `docs/design/mariadb.md` §8.3): one pooled
//! connection at `READ COMMITTED`, bound to a partition. A failed
//! statement does not abort a MariaDB transaction, so the Open/Poisoned
//! state machine is the crate's: after any failure only `rollback` (and,
//! after `constraint_violation`, `commit_rejected_push_result`) is accepted.

use std::marker::PhantomData;
use std::sync::Arc;

use sync_core::front::{
    Checked, CheckedRow, CheckpointName, Request, RowId, Table, Tables, TransactionBackend,
    TxHandle,
};
use sync_core::{
    ActivationOutcome, ClientRecord, Coverage, Error, ErrorCode, NewCommit, PushPrelude,
    PushPreludeRequest, Result, RowScanQuery, ServeGate, SourceChange, StoredCheckpoint,
    StoredPushResult, StoredRow, StoredScopes,
};

use crate::ensured::Ensured;
use crate::instance::MariadbStorage;
use crate::pool::{Conn, Pooled};
use crate::prelude::KnownScopes;
use crate::session::lost_at_commit;
use crate::{checkpoints, commit_log, prelude, push_lock, reads, records, rows, scans};

const SAVEPOINT: &str = "SAVEPOINT sync_push_candidate";
const ROLLBACK_TO_SAVEPOINT: &str = "ROLLBACK TO SAVEPOINT sync_push_candidate";
const RELEASE_SAVEPOINT: &str = "RELEASE SAVEPOINT sync_push_candidate";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Open,
    Poisoned(ErrorCode),
}

/// An open write transaction. Dropping it rolls back.
#[derive(Debug)]
pub struct MariadbTransaction<'s> {
    /// `None` once the transaction ended.
    conn: Option<Pooled>,
    partition: String,
    /// The schema the transaction was begun with (the push prelude's
    /// tables).
    ensured: Option<Arc<Ensured>>,
    writer_version: i32,
    state: State,
    push_locked: bool,
    /// The stored scopes of the rows the prelude read, until this
    /// transaction writes them (`prelude::KnownScopes`).
    known_scopes: KnownScopes,
    storage: PhantomData<&'s MariadbStorage>,
}

/// Opens a transaction on a pooled connection, at the session's `READ
/// COMMITTED` (set once per connection, `session::ISOLATION`).
pub(crate) fn begin<'s>(
    storage: &'s MariadbStorage,
    partition: &str,
    ensured: Option<Arc<Ensured>>,
) -> Result<MariadbTransaction<'s>> {
    let writer_version = ensured.as_ref().map_or(0, |e| e.version());
    let mut conn = storage.conn()?;
    if let Err(error) = conn.run("START TRANSACTION") {
        conn.rollback();
        return Err(error);
    }
    Ok(MariadbTransaction {
        conn: Some(conn),
        partition: partition.to_owned(),
        ensured,
        writer_version,
        state: State::Open,
        push_locked: false,
        known_scopes: KnownScopes::new(),
        storage: PhantomData,
    })
}

impl MariadbTransaction<'_> {
    /// What the prelude read of a row's scopes, taken out: once the row is
    /// written, what the prelude read no longer holds.
    fn forget_scopes(&mut self, table: &str, row_id: &str) -> Option<Option<String>> {
        if self.known_scopes.is_empty() {
            return None;
        }
        self.known_scopes
            .remove(&(table.to_owned(), row_id.to_owned()))
    }

    /// Runs statements; any failure poisons the transaction.
    fn run<T>(&mut self, f: impl FnOnce(&mut Conn, &str) -> Result<T>) -> Result<T> {
        let Some(conn) = self.conn.as_mut() else {
            return Err(Error::new(ErrorCode::TransactionAborted));
        };
        let result = f(conn, &self.partition);
        if let Err(error) = &result {
            self.state = State::Poisoned(error.code());
        }
        result
    }

    fn finish_rollback(&mut self) {
        if let Some(mut conn) = self.conn.take() {
            conn.rollback();
        }
    }

    fn finish_commit(&mut self) -> Result<()> {
        let Some(mut conn) = self.conn.take() else {
            return Err(Error::new(ErrorCode::TransactionAborted));
        };
        match conn.run("COMMIT") {
            Ok(()) => Ok(()),
            Err(error) => {
                conn.rollback();
                Err(lost_at_commit(error))
            }
        }
    }
}

impl Drop for MariadbTransaction<'_> {
    fn drop(&mut self) {
        self.finish_rollback();
    }
}

impl TransactionBackend for MariadbTransaction<'_> {
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
        self.run(|conn, p| rows::get(conn, t.handle(), p, row_id))
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
        let text =
            self.run(|conn, p| records::push_result_text(conn, p, client_id, client_commit_id))?;
        records::parse_push_result(text)
    }

    fn scan_rows(
        &mut self,
        t: Table<'_, TxHandle<Self>>,
        query: Request<'_, RowScanQuery>,
    ) -> Result<Vec<StoredRow>> {
        self.run(|conn, p| scans::scan_rows(conn, t.handle(), p, query.get(), None))
            .map(Option::unwrap_or_default)
    }

    fn scan_rows_by_index(
        &mut self,
        lookup: sync_core::front::IndexLookup<'_, TxHandle<Self>>,
    ) -> Result<Vec<StoredRow>> {
        self.run(|conn, p| crate::lookups::index_scan(conn, p, lookup))
    }

    fn scan_partition_rows(
        &mut self,
        t: Table<'_, TxHandle<Self>>,
        after: Option<&str>,
        limit: Checked<i64>,
    ) -> Result<Vec<StoredRow>> {
        self.run(|conn, p| rows::partition_scan(conn, t.handle(), p, after, limit.get()))
    }

    fn max_commit_seq(&mut self) -> Result<i64> {
        self.run(commit_log::max_commit_seq)
    }

    fn query_authoritative(
        &mut self,
        ensured: &Ensured,
        request: &sync_core::AuthoritativeQueryRequest,
    ) -> Result<sync_core::AuthoritativeQueryResult> {
        let prepared = crate::query::prepare(ensured, &self.partition, request)?;
        self.run(|conn, p| crate::query::run(conn, p, &prepared))
    }

    /// The partition write lock (`push_lock`: the meta row in share mode,
    /// the partition row created if absent and locked, one statement),
    /// then the rejection savepoint.
    fn lock_partition_for_push(&mut self) -> Result<()> {
        if self.push_locked {
            return Ok(());
        }
        self.run(|conn, p| {
            push_lock::lock_partition(conn, p)?;
            conn.run(SAVEPOINT)
        })?;
        self.push_locked = true;
        Ok(())
    }

    /// The lock and the savepoint, then the gate, the push result and the
    /// candidate rows in one statement (`prelude`); `None` when a
    /// requested table is not in the ensured schema (the single calls then
    /// report it).
    fn begin_push(
        &mut self,
        request: &PushPreludeRequest,
        running: Checked<i32>,
    ) -> Result<Option<PushPrelude>> {
        let running = running.get();
        let Some(plan) = prelude::plan(self.ensured.as_ref(), &self.partition, request, running)
        else {
            return Ok(None);
        };
        self.lock_partition_for_push()?;
        let (prelude, scopes) =
            self.run(|conn, p| prelude::read(conn, plan, p, request, running))?;
        self.known_scopes = scopes;
        Ok(Some(prelude))
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
        let partition = self.partition.clone();
        let staged = match self.conn.as_mut() {
            None => Err(Error::new(ErrorCode::TransactionAborted)),
            Some(conn) => conn
                .run(ROLLBACK_TO_SAVEPOINT)
                .and_then(|()| conn.run(RELEASE_SAVEPOINT))
                .and_then(|()| {
                    records::put_push_result(conn, &partition, client_id, client_commit_id, result)
                }),
        };
        match staged {
            Ok(()) => self.finish_commit(),
            Err(error) => {
                self.finish_rollback();
                Err(error)
            }
        }
    }

    /// The row write; a row the prelude read needs no scopes read first.
    fn upsert_row(
        &mut self,
        t: Table<'_, TxHandle<Self>>,
        row: CheckedRow<'_>,
        op_index: Option<u32>,
    ) -> Result<()> {
        let known = self.forget_scopes(t.name(), &row.row().row_id);
        self.run(|conn, p| {
            rows::upsert(
                conn,
                t.handle(),
                p,
                row.row(),
                row.projection(),
                op_index,
                known,
            )
        })
    }

    fn delete_row(&mut self, t: Table<'_, TxHandle<Self>>, row_id: RowId<'_>) -> Result<()> {
        self.forget_scopes(t.name(), row_id.as_str());
        self.run(|conn, p| rows::delete(conn, t.handle(), p, row_id.as_str()))
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
        self.run(|conn, p| {
            crate::admin::set_blob_refs(conn, p, t.name(), row_id.as_str(), blob_ids)
        })
    }

    fn append_commit(&mut self, commit: Request<'_, NewCommit>) -> Result<i64> {
        let writer_version = self.writer_version;
        self.run(|conn, p| commit_log::append(conn, p, writer_version, commit.get()))
    }

    fn enqueue_reactions(&mut self, reactions: &[sync_core::NewReaction]) -> Result<()> {
        self.run(|conn, p| crate::reactions::enqueue(conn, p, reactions))
    }

    fn stage_client_record(&mut self, record: Request<'_, ClientRecord>) -> Result<bool> {
        self.run(|conn, p| records::put_client(conn, p, record.get()))?;
        Ok(true)
    }

    fn put_push_result(
        &mut self,
        client_id: &str,
        client_commit_id: &str,
        result: &StoredPushResult,
    ) -> Result<()> {
        self.run(|conn, p| records::put_push_result(conn, p, client_id, client_commit_id, result))
    }

    fn read_serve_gate(&mut self, running: Checked<i32>) -> Result<ServeGate> {
        self.run(|conn, p| reads::serve_gate(conn, p, running.get()))
    }

    fn read_checkpoint(&mut self, name: CheckpointName<'_>) -> Result<Option<StoredCheckpoint>> {
        self.run(|conn, p| checkpoints::read_one(conn, p, name.as_str()))
    }

    fn advance_checkpoint(
        &mut self,
        name: CheckpointName<'_>,
        owner_epoch: i64,
        watermark: Checked<i64>,
        observed_rows: Checked<i64>,
        now_ms: i64,
    ) -> Result<bool> {
        self.run(|conn, p| {
            checkpoints::advance(
                conn,
                p,
                name.as_str(),
                owner_epoch,
                watermark.get(),
                observed_rows.get(),
                now_ms,
            )
        })
    }

    fn activate_checkpoint(
        &mut self,
        name: CheckpointName<'_>,
        owner_epoch: i64,
        watermark: Checked<i64>,
        sources: &Tables,
        now_ms: i64,
    ) -> Result<ActivationOutcome> {
        self.run(|conn, p| {
            checkpoints::activate(
                conn,
                p,
                name.as_str(),
                owner_epoch,
                watermark.get(),
                sources.as_slice(),
                now_ms,
            )
        })
    }

    fn has_source_changes_above(&mut self, tables: &Tables, seq: Checked<i64>) -> Result<Coverage> {
        self.run(|conn, p| checkpoints::changes_above(conn, p, tables.as_slice(), seq.get()))
    }

    fn list_source_changes(
        &mut self,
        tables: &Tables,
        after_seq: Checked<i64>,
        limit: Checked<i64>,
    ) -> Result<Vec<SourceChange>> {
        self.run(|conn, p| {
            checkpoints::source_changes(conn, p, tables.as_slice(), after_seq.get(), limit.get())
        })
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
