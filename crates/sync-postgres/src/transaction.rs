//! The storage transaction (`storage-contract.md` §5): one pooled connection
//! in an explicit `READ COMMITTED` transaction, bound to one partition.
//!
//! State machine: a method that fails after issuing a statement poisons the
//! transaction (Postgres aborts it anyway); validation errors raised before
//! any statement do not. Poisoned transactions only roll back — or, after a
//! `constraint_violation` under the push lock, finalize the rejection.
//!
//! Round trips: `BEGIN` is deferred to the first statement (it travels in the
//! push lock's message; under `READ COMMITTED` every statement takes its own
//! snapshot, so nothing observable moves), and `put_push_result` is deferred
//! to the `COMMIT` message (or to the next statement, so reads still see
//! it). Under the push lock `append_commit` is deferred the same way: the
//! lock message also reads the partition counter and the effective writer
//! fence, so the transaction knows the sequence the append will allocate
//! (the statement raises if it allocates another) and whether the fence
//! trigger would refuse it (then the append runs at once, so the fence is
//! still reported by `append_commit`). A fence declared by a concurrent
//! transaction after the lock is reported, with the same code and nothing
//! persisted, by the call that flushes the append — the next statement or
//! `commit`. A single-row push is four round trips: lock, idempotency read,
//! row upsert, append + push result + `COMMIT`.
//!
//! Through the prelude it is two: the lock message reads the push result
//! and the rows, and when the prelude asks for deferred violations the row
//! upsert is deferred too (an `EXECUTE` of the table's named upsert with
//! literal arguments, at most one pending at a time). The message that
//! carries it classifies a class-23 error as that upsert's
//! `constraint_violation` with its `op_index`; `commit_push` finalizes the
//! rejection itself when the `COMMIT` message reports it.

use std::sync::Arc;

use postgres::SimpleQueryRow;
use sync_core::front::{
    Checked, CheckedRow, CheckpointName, IndexLookup, Request, RowId, Table, Tables,
    TransactionBackend, TxHandle,
};
use sync_core::{
    writer_fence_allows, ActivationOutcome, AuthoritativeQueryRequest, AuthoritativeQueryResult,
    ClientRecord, Coverage, Error, ErrorCode, NewCommit, NewReaction, PushCommitOutcome,
    PushPrelude, PushPreludeRequest, Result, RowScanQuery, ServeGate, SourceChange,
    StoredCheckpoint, StoredPushResult, StoredRow, StoredScopes,
};

use crate::errors::Site;
use crate::instance::PostgresStorage;
use crate::partition_lock::{self, SAVEPOINT};
use crate::pool::Conn;
use crate::session;
use crate::state::Ensured;
use crate::table_sql::TableSql;
use crate::values::Typed;
use crate::{
    checkpoints, clients, commit_log, coverage, gate, named, prelude, push_results, query,
    reactions, routed_writes, rows, scans,
};

/// A gate read together with the push lock, valid until the next statement.
#[derive(Debug)]
struct PrefetchedGate {
    running: i32,
    gate: ServeGate,
    statements: u64,
}

/// What a transaction method works with.
pub(crate) struct Ctx<'t> {
    pub conn: &'t mut Conn,
    pub partition: &'t str,
}

/// A Postgres storage transaction.
#[derive(Debug)]
pub struct PgTransaction<'s> {
    storage: &'s PostgresStorage,
    conn: Option<Conn>,
    partition: String,
    ensured: Option<Arc<Ensured>>,
    writer_version: i32,
    poison: Option<ErrorCode>,
    /// `BEGIN …` not sent yet (no statement has run).
    pending_begin: Option<String>,
    /// Deferred appends and push-result inserts (parameterless SQL, in
    /// call order), sent before the next statement or with the `COMMIT`.
    pending_writes: Option<String>,
    push_locked: bool,
    /// The partition counter as this transaction will have left it once its
    /// pending writes are flushed: read under the push lock, advanced by
    /// each append. `None` when unknown (no push lock, or after anything
    /// that may move it otherwise); appends are only deferred while known.
    known_seq: Option<i64>,
    /// The effective writer fence read under the push lock refuses this
    /// transaction's writer version: appends then run at once so the
    /// trigger's refusal is reported by `append_commit` itself.
    fence_blocks: bool,
    partition_locked: bool,
    prefetched: Option<PrefetchedGate>,
    /// The prelude asked for deferred violations: a row write may travel
    /// with the statements after it.
    defer_violations: bool,
    /// `Some(op_index)` while the pending writes hold a deferred row write
    /// (at most one): a class-23 error of the message that carries them is
    /// that write's `constraint_violation`.
    deferred_upsert: Option<Option<u32>>,
    /// Where, in `pending_writes`, the first deferred append begins, when
    /// those writes are to be sent with the `COMMIT`: the rejection
    /// savepoint is released there ([`PgTransaction::commit_writes`]).
    /// Cleared when the writes go out with another statement, or a row
    /// write is queued after the append.
    release_before: Option<usize>,
}

impl<'s> PgTransaction<'s> {
    /// Checks out a connection; `BEGIN ISOLATION LEVEL READ COMMITTED` goes
    /// with the first statement.
    pub(crate) fn begin(
        storage: &'s PostgresStorage,
        partition: &str,
        ensured: Option<Arc<Ensured>>,
    ) -> Result<Self> {
        let writer_version = ensured.as_ref().map_or(0, |e| e.version);
        let conn = storage.checkout()?;
        Ok(Self {
            storage,
            conn: Some(conn),
            partition: partition.to_owned(),
            ensured,
            writer_version,
            poison: None,
            pending_begin: Some(storage.push_begin_sql()),
            pending_writes: None,
            push_locked: false,
            known_seq: None,
            fence_blocks: false,
            partition_locked: false,
            prefetched: None,
            defer_violations: false,
            deferred_upsert: None,
            release_before: None,
        })
    }

    /// Runs one method body; an error after a statement poisons the
    /// transaction. When the body is the first to send anything (the
    /// transaction's `BEGIN` travels with it) and the connection is lost
    /// under it, nothing of the transaction can have persisted: the dead
    /// connection is discarded and the body runs again, `BEGIN` and
    /// deferred writes included, on another connection (at most
    /// `lost_retries` times: after a restart every idle one is dead).
    fn run<T>(&mut self, mut f: impl FnMut(&mut Ctx<'_>) -> Result<T>) -> Result<T> {
        let first = self.conn.as_ref().is_some_and(|c| c.statements() == 0);
        let deferred = (
            self.pending_begin.clone(),
            self.pending_writes.clone(),
            self.deferred_upsert,
        );
        let mut attempt = 0;
        loop {
            match self.run_once(&mut f) {
                Err(err)
                    if first
                        && err.is(ErrorCode::ConnectionLost)
                        && attempt < self.storage.lost_retries() =>
                {
                    attempt += 1;
                    if let Some(mut dead) = self.conn.take() {
                        dead.discard();
                    }
                    self.conn = Some(self.storage.checkout()?);
                    (
                        self.pending_begin,
                        self.pending_writes,
                        self.deferred_upsert,
                    ) = deferred.clone();
                    self.poison = None;
                }
                outcome => return outcome,
            }
        }
    }

    fn run_once<T>(&mut self, f: &mut impl FnMut(&mut Ctx<'_>) -> Result<T>) -> Result<T> {
        if self.poison.is_some() {
            return Err(Error::new(ErrorCode::TransactionAborted));
        }
        if self.conn.is_none() {
            return Err(Error::new(ErrorCode::TransactionAborted));
        }
        let site = self.pending_site();
        // More statements follow these writes: the savepoint stays.
        self.release_before = None;
        let deferred: Vec<String> = self
            .pending_begin
            .take()
            .into_iter()
            .chain(self.pending_writes.take())
            .collect();
        let Some(conn) = self.conn.as_mut() else {
            return Err(Error::new(ErrorCode::TransactionAborted));
        };
        if !deferred.is_empty() {
            if let Err(err) = conn.simple_at(&deferred.join("; "), site) {
                self.poison = Some(err.code());
                self.known_seq = None;
                return Err(err);
            }
        }
        let before = conn.statements();
        let mut ctx = Ctx {
            conn,
            partition: &self.partition,
        };
        let result = f(&mut ctx);
        if let Err(err) = &result {
            if ctx.conn.statements() > before {
                self.poison = Some(err.code());
            }
        }
        result
    }

    /// Queues a parameterless write after the earlier ones.
    fn defer(&mut self, sql: String) {
        self.pending_writes = Some(match self.pending_writes.take() {
            Some(earlier) => format!("{earlier}; {sql}"),
            None => sql,
        });
    }

    /// Queues a validated append when the push lock told everything it
    /// needs — the counter it will allocate from and a fence that lets this
    /// writer through — and the commit fits one literal statement; returns
    /// the sequence it allocates. `None`: the caller appends at once.
    fn deferred_append(&mut self, commit: &NewCommit) -> Option<i64> {
        // The push lock sent `BEGIN` and read the counter and the fence.
        if !self.push_locked || self.fence_blocks {
            return None;
        }
        let seq = self.known_seq?.checked_add(1)?;
        // On Citus one plain statement per table, which the coordinator
        // routes whole; elsewhere the one-statement append, prepared.
        let sql = if self.storage.is_citus() {
            routed_writes::routed_append_sql(&self.partition, self.writer_version, commit, seq)?
        } else {
            if !self.conn.as_ref()?.has_named(&named::APPEND) {
                return None;
            }
            let args = commit_log::deferred_append_args(
                &self.partition,
                self.writer_version,
                commit,
                seq,
            )?;
            named::APPEND.execute_sql(&args)
        };
        if self.release_before.is_none() {
            self.release_before = Some(match &self.pending_writes {
                Some(earlier) => earlier.len() + 2,
                None => 0,
            });
        }
        self.defer(sql);
        self.known_seq = Some(seq);
        Some(seq)
    }

    /// The push lock's message with the gate of `running` and the reads of
    /// a prelude `plan` (its per-table statements prepared first, outside
    /// the transaction when `BEGIN` is still pending, like the push's own
    /// named statements); records what the lock read (the counter, the
    /// fence, the prefetched gate) and returns the rows of the plan's reads.
    fn push_lock(
        &mut self,
        running: i32,
        plan: Option<&prelude::Plan>,
    ) -> Result<Vec<Vec<SimpleQueryRow>>> {
        let writer = self.writer_version;
        let timeout = self.storage.config().push_lock_timeout_ms;
        let begin = self.pending_begin.take();
        let reads = plan.map_or(&[][..], |p| p.statements.as_slice());
        let (lock, rows) = self.run(|c| {
            if let Some(plan) = plan {
                prelude::prepare(c.conn, plan)?;
            }
            partition_lock::lock_for_push(
                c.conn,
                begin.as_deref(),
                c.partition,
                running,
                timeout,
                reads,
            )
        })?;
        self.push_locked = true;
        self.partition_locked = true;
        self.known_seq = Some(lock.max_commit_seq);
        self.fence_blocks = !writer_fence_allows(lock.fence, writer);
        self.prefetched = self.conn.as_ref().map(|conn| PrefetchedGate {
            running,
            gate: lock.gate,
            statements: conn.statements(),
        });
        Ok(rows)
    }

    /// The prelude as the single methods read it (no rows).
    fn sequential_prelude(
        &mut self,
        request: &PushPreludeRequest,
        running: Checked<i32>,
    ) -> Result<PushPrelude> {
        self.lock_partition_for_push()?;
        let gate = self.read_serve_gate(running)?;
        let push_result = self.get_push_result(&request.client_id, &request.client_commit_id);
        Ok(PushPrelude {
            gate,
            push_result,
            rows: None,
        })
    }

    fn finish_rollback(&mut self) {
        self.pending_writes = None;
        self.deferred_upsert = None;
        self.release_before = None;
        let begun = self.pending_begin.take().is_none();
        if let Some(mut conn) = self.conn.take() {
            if begun {
                session::rollback(&mut conn);
            }
        }
    }

    fn finalize_rejection(
        &mut self,
        client_id: &str,
        client_commit_id: &str,
        result: &StoredPushResult,
    ) -> Result<()> {
        let Some(conn) = self.conn.as_mut() else {
            return Err(Error::new(ErrorCode::TransactionAborted));
        };
        let partition = self.partition.as_str();
        // Deferred writes are after the savepoint: discarded like the rest
        // (the rollback also undoes appends, so the counter is not known).
        self.pending_writes = None;
        self.deferred_upsert = None;
        self.release_before = None;
        self.known_seq = None;
        conn.simple(&format!(
            "ROLLBACK TO SAVEPOINT {SAVEPOINT}; RELEASE SAVEPOINT {SAVEPOINT}"
        ))?;
        push_results::put(conn, partition, client_id, client_commit_id, result)?;
        session::commit(conn)
    }
}

impl Drop for PgTransaction<'_> {
    fn drop(&mut self) {
        self.finish_rollback();
    }
}

impl TransactionBackend for PgTransaction<'_> {
    type Schema = Ensured;

    fn check_open(&self) -> Result<()> {
        if self.poison.is_some() || self.conn.is_none() {
            return Err(Error::new(ErrorCode::TransactionAborted));
        }
        Ok(())
    }

    fn partition(&self) -> &str {
        &self.partition
    }

    fn writer_version(&self) -> i32 {
        self.writer_version
    }

    fn get_row(&mut self, t: Table<'_, TxHandle<Self>>, row_id: &str) -> Result<Option<StoredRow>> {
        self.run(|c| rows::get_row(c.conn, &t, c.partition, row_id))
    }

    fn get_rows(
        &mut self,
        t: Table<'_, TxHandle<Self>>,
        row_ids: &[String],
    ) -> Result<Vec<Option<StoredRow>>> {
        if row_ids.is_empty() {
            return Ok(Vec::new());
        }
        self.run(|c| rows::get_rows(c.conn, &t, c.partition, row_ids))
    }

    fn get_tombstone_seq(
        &mut self,
        t: Table<'_, TxHandle<Self>>,
        row_id: &str,
    ) -> Result<Option<i64>> {
        self.run(|c| rows::tombstone_seq(c.conn, c.partition, t.name(), row_id))
    }

    fn get_delete_scopes(
        &mut self,
        t: Table<'_, TxHandle<Self>>,
        row_id: &str,
        commit_seq: Checked<i64>,
    ) -> Result<Option<StoredScopes>> {
        let seq = commit_seq.get();
        self.run(|c| rows::delete_scopes(c.conn, c.partition, t.name(), row_id, seq))
    }

    fn get_push_result(
        &mut self,
        client_id: &str,
        client_commit_id: &str,
    ) -> Result<Option<StoredPushResult>> {
        self.run(|c| push_results::get(c.conn, c.partition, client_id, client_commit_id))
    }

    fn scan_rows(
        &mut self,
        t: Table<'_, TxHandle<Self>>,
        q: Request<'_, RowScanQuery>,
    ) -> Result<Vec<StoredRow>> {
        let plan = scans::ScanPlan::checked(t.handle(), q.get());
        self.run(|c| {
            scans::scan_rows(c.conn, c.partition, &q, plan, None).map(Option::unwrap_or_default)
        })
    }

    fn scan_rows_by_index(
        &mut self,
        lookup: IndexLookup<'_, TxHandle<Self>>,
    ) -> Result<Vec<StoredRow>> {
        let plan = scans::IndexPlan::checked(lookup)?;
        let (after, limit) = (lookup.after_row_id(), lookup.limit());
        self.run(|c| scans::scan_rows_by_index(c.conn, c.partition, after, limit, &plan))
    }

    fn scan_partition_rows(
        &mut self,
        t: Table<'_, TxHandle<Self>>,
        after: Option<&str>,
        limit: Checked<i64>,
    ) -> Result<Vec<StoredRow>> {
        self.run(|c| scans::scan_partition_rows(c.conn, &t, c.partition, after, limit.get()))
    }

    fn max_commit_seq(&mut self) -> Result<i64> {
        self.run(|c| commit_log::max_commit_seq(c.conn, c.partition))
    }

    fn query_authoritative(
        &mut self,
        ensured: &Ensured,
        request: &AuthoritativeQueryRequest,
    ) -> Result<AuthoritativeQueryResult> {
        self.run(|c| {
            let prepared = query::prepare(ensured, c.partition, request)?;
            let (columns, rows) = query::run(c.conn, &prepared)?;
            let max_commit_seq = commit_log::max_commit_seq(c.conn, c.partition)?;
            Ok(AuthoritativeQueryResult {
                columns,
                rows,
                max_commit_seq,
            })
        })
    }

    fn lock_partition_for_push(&mut self) -> Result<()> {
        if self.push_locked {
            return self.run(|_| Ok(()));
        }
        let running = self.writer_version;
        self.push_lock(running, None).map(|_| ())
    }

    fn begin_push(
        &mut self,
        request: &PushPreludeRequest,
        running: Checked<i32>,
    ) -> Result<Option<PushPrelude>> {
        let plan = match self.push_locked {
            false => prelude::plan(
                self.ensured.as_deref(),
                &self.partition,
                request,
                self.storage.is_citus(),
            ),
            true => None,
        };
        let Some(plan) = plan else {
            return self.sequential_prelude(request, running).map(Some);
        };
        let segments = self.push_lock(running.get(), Some(&plan))?;
        self.defer_violations = request.deferred_violations;
        let (push_result, rows) = prelude::read(&plan, request, segments)?;
        let gate = self.read_serve_gate(running)?;
        Ok(Some(PushPrelude {
            gate,
            push_result,
            rows: Some(rows),
        }))
    }

    fn commit_rejected_push_result(
        mut self,
        client_id: &str,
        client_commit_id: &str,
        result: &StoredPushResult,
    ) -> Result<()> {
        if !self.push_locked {
            self.finish_rollback();
            return Err(Error::new(ErrorCode::PushLockRequired));
        }
        if self
            .poison
            .is_some_and(|code| code != ErrorCode::ConstraintViolation)
        {
            self.finish_rollback();
            return Err(Error::new(ErrorCode::TransactionAborted));
        }
        let outcome = self.finalize_rejection(client_id, client_commit_id, result);
        match outcome {
            Ok(()) => {
                self.conn = None;
                Ok(())
            }
            Err(err) => {
                self.finish_rollback();
                Err(err)
            }
        }
    }

    fn upsert_row(
        &mut self,
        t: Table<'_, TxHandle<Self>>,
        row: CheckedRow<'_>,
        op_index: Option<u32>,
    ) -> Result<()> {
        let stored = row.row();
        let typed = rows::typed(&t, row)?;
        if self.deferred_upsert_sent(t, stored, &typed, op_index)? {
            return Ok(());
        }
        if self.storage.is_citus() {
            if let Some(statements) = self.routed_upsert(t, stored, &typed) {
                let sql: &TableSql = &t;
                return self.run(|c| {
                    c.conn
                        .ensure_named_text(&sql.row_put_name, &sql.row_put_prepare())?;
                    c.conn
                        .simple_at(&statements, Site::UpsertRow(op_index))
                        .map(|_| ())
                });
            }
        }
        let projection = rows::params(typed);
        self.run(|c| {
            let partition = c.partition;
            rows::upsert_row(
                c.conn,
                t.compiled(),
                &t,
                partition,
                stored,
                &projection,
                op_index,
            )
        })
    }

    fn upsert_rows(
        &mut self,
        t: Table<'_, TxHandle<Self>>,
        rows: Vec<CheckedRow<'_>>,
    ) -> Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        let batch = rows::prepare_batch(&t, rows)?;
        let mut batch = Some(batch);
        self.run(|c| match batch.take() {
            Some(batch) => rows::upsert_rows(c.conn, t.compiled(), &t, c.partition, batch),
            None => Err(Error::new(ErrorCode::TransactionAborted)),
        })
    }

    fn delete_row(&mut self, t: Table<'_, TxHandle<Self>>, row_id: RowId<'_>) -> Result<()> {
        self.run(|c| rows::delete_row(c.conn, t.name(), &t, c.partition, &row_id))
    }

    fn clear_tombstone(&mut self, t: Table<'_, TxHandle<Self>>, row_id: &str) -> Result<()> {
        self.run(|c| rows::clear_tombstone(c.conn, c.partition, t.name(), row_id))
    }

    fn set_blob_refs(
        &mut self,
        t: Table<'_, TxHandle<Self>>,
        row_id: RowId<'_>,
        blob_ids: &[String],
    ) -> Result<()> {
        self.run(|c| rows::set_blob_refs(c.conn, c.partition, t.name(), &row_id, blob_ids))
    }

    fn append_commit(&mut self, commit: Request<'_, NewCommit>) -> Result<i64> {
        let appended = match self.deferred_append(&commit) {
            Some(seq) => Ok(seq),
            None => {
                let writer_version = self.writer_version;
                let appended = self.run(|c| {
                    commit_log::append_commit(c.conn, c.partition, writer_version, &commit)
                });
                self.known_seq = appended.as_ref().ok().copied();
                appended
            }
        };
        if let Ok(seq) = appended {
            if self.storage.config().announce_commits {
                // With the COMMIT, in the same message: no round trip of its
                // own, delivered only if the transaction commits.
                if let Some(sql) = crate::commit_feed::announce_sql(&self.partition, seq) {
                    self.defer(sql);
                }
            }
        }
        appended
    }

    fn enqueue_reactions(&mut self, reactions: &[NewReaction]) -> Result<()> {
        self.run(|c| reactions::enqueue(c.conn, c.partition, reactions))
    }

    fn stage_client_record(&mut self, record: Request<'_, ClientRecord>) -> Result<bool> {
        let prepared = self
            .conn
            .as_ref()
            .is_some_and(|conn| conn.has_named(&named::PUT_CLIENT_RECORD));
        let args = prepared
            .then(|| clients::put_args(&self.partition, &record))
            .flatten();
        match args {
            Some(args) => self.defer(named::PUT_CLIENT_RECORD.execute_sql(&args)),
            None => self.run(|c| clients::put(c.conn, c.partition, &record))?,
        }
        Ok(true)
    }

    fn put_push_result(
        &mut self,
        client_id: &str,
        client_commit_id: &str,
        result: &StoredPushResult,
    ) -> Result<()> {
        let prepared = self
            .conn
            .as_ref()
            .is_some_and(|conn| conn.has_named(&named::PUT_PUSH_RESULT));
        let args = prepared
            .then(|| push_results::put_args(&self.partition, client_id, client_commit_id, result))
            .flatten();
        match args {
            Some(args) => {
                self.defer(named::PUT_PUSH_RESULT.execute_sql(&args));
                Ok(())
            }
            None => self.run(|c| {
                push_results::put(c.conn, c.partition, client_id, client_commit_id, result)
            }),
        }
    }

    fn read_serve_gate(&mut self, running: Checked<i32>) -> Result<ServeGate> {
        let running = running.get();
        let mut prefetched = self.prefetched.take();
        self.run(|c| match prefetched.take() {
            Some(p) if p.running == running && p.statements == c.conn.statements() => Ok(p.gate),
            _ => gate::read(c.conn, c.partition, running),
        })
    }

    fn read_checkpoint(&mut self, name: CheckpointName<'_>) -> Result<Option<StoredCheckpoint>> {
        self.run(|c| checkpoints::read_one(c.conn, c.partition, &name))
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
        self.run(|c| {
            checkpoints::advance(
                c.conn,
                c.partition,
                &name,
                epoch,
                watermark,
                observed,
                now_ms,
            )
        })
    }

    fn activate_checkpoint(
        &mut self,
        name: CheckpointName<'_>,
        epoch: i64,
        watermark: Checked<i64>,
        sources: &Tables,
        now_ms: i64,
    ) -> Result<ActivationOutcome> {
        let locked = self.partition_locked;
        let timeout = self.storage.config().push_lock_timeout_ms;
        let watermark = watermark.get();
        let outcome = self.run(|c| {
            if !locked {
                partition_lock::lock(c.conn, c.partition, timeout)?;
            }
            checkpoints::activate(
                c.conn,
                c.partition,
                &name,
                epoch,
                watermark,
                sources,
                now_ms,
            )
        });
        if outcome.is_ok() {
            self.partition_locked = true;
        }
        outcome
    }

    fn has_source_changes_above(&mut self, tables: &Tables, seq: Checked<i64>) -> Result<Coverage> {
        self.run(|c| coverage::changes_above(c.conn, c.partition, tables, seq.get()))
    }

    fn list_source_changes(
        &mut self,
        tables: &Tables,
        after: Checked<i64>,
        limit: Checked<i64>,
    ) -> Result<Vec<SourceChange>> {
        self.run(|c| {
            coverage::source_changes(c.conn, c.partition, tables, after.get(), limit.get())
        })
    }

    fn commit(mut self) -> Result<()> {
        if self.poison.is_some() {
            self.finish_rollback();
            return Err(Error::new(ErrorCode::TransactionAborted));
        }
        let Some(mut conn) = self.conn.take() else {
            return Err(Error::new(ErrorCode::TransactionAborted));
        };
        match (self.pending_begin.take(), self.pending_writes.take()) {
            // Nothing was ever sent: there is no transaction to commit.
            (Some(_), None) => Ok(()),
            (begin, Some(writes)) => {
                let writes = self.commit_writes(writes);
                let sql: Vec<String> = begin.into_iter().chain([writes]).collect();
                let site = self.pending_site();
                session::commit_after_at(&mut conn, &sql.join("; "), site)
            }
            (None, None) => session::commit(&mut conn),
        }
    }

    fn commit_push(
        mut self,
        client_id: &str,
        client_commit_id: &str,
        rejection: &dyn Fn(u32) -> StoredPushResult,
    ) -> Result<PushCommitOutcome> {
        let Some(op_index) = self.deferred_upsert.filter(|_| self.poison.is_none()) else {
            return self.commit().map(|()| PushCommitOutcome::Committed);
        };
        let (Some(mut conn), Some(writes)) = (self.conn.take(), self.pending_writes.take()) else {
            self.finish_rollback();
            return Err(Error::new(ErrorCode::TransactionAborted));
        };
        self.deferred_upsert = None;
        let writes = self.commit_writes(writes);
        // `BEGIN` went with the push lock: only the writes and `COMMIT`.
        match conn.simple_at(&format!("{writes}; COMMIT"), Site::UpsertRow(op_index)) {
            Ok(_) => Ok(PushCommitOutcome::Committed),
            Err(err) if err.is(ErrorCode::ConstraintViolation) => {
                // The message stopped at the write; nothing after it ran,
                // `COMMIT` included: finalize the rejection on the same
                // transaction, as after a violation reported by the write.
                let op_index = err.op_index_value().unwrap_or(0);
                self.conn = Some(conn);
                self.poison = Some(ErrorCode::ConstraintViolation);
                let result = rejection(op_index);
                match self.finalize_rejection(client_id, client_commit_id, &result) {
                    Ok(()) => {
                        self.conn = None;
                        Ok(PushCommitOutcome::Rejected { op_index })
                    }
                    Err(err) => {
                        self.finish_rollback();
                        Err(err)
                    }
                }
            }
            Err(err) => {
                session::rollback(&mut conn);
                Err(session::lost_at_commit(err))
            }
        }
    }

    fn rollback(mut self) -> Result<()> {
        self.finish_rollback();
        Ok(())
    }
}

impl PgTransaction<'_> {
    /// The pending writes as the `COMMIT` message sends them: with the
    /// rejection savepoint released right before the first deferred append
    /// when no row write follows it. Every row write of the push is then
    /// behind, so the savepoint has done its job, and the append's update
    /// of the counter row runs in the transaction that locked the row
    /// rather than in a subtransaction of it — which would make the row's
    /// `xmax` a MultiXact of the two: one MultiXact per push, with its WAL
    /// record and its share of the MultiXact space. A violation of a row
    /// write earlier in the same message stops the message before the
    /// release, so the savepoint is still there to roll back to.
    fn commit_writes(&mut self, writes: String) -> String {
        match self.release_before.take() {
            Some(at) if writes.is_char_boundary(at) => {
                let (before, after) = writes.split_at(at);
                format!("{before}RELEASE SAVEPOINT {SAVEPOINT}; {after}")
            }
            _ => writes,
        }
    }

    /// How the message that sends the pending writes classifies its errors
    /// (a deferred row write's class-23 error is its violation); the
    /// pending writes are about to be sent.
    fn pending_site(&mut self) -> Site {
        self.deferred_upsert
            .take()
            .map_or(Site::General, Site::UpsertRow)
    }

    /// A row upsert as statements a Citus coordinator routes whole: the
    /// scope replacement as plain statements, then the table's
    /// [`TableSql::row_put`] executed with literal arguments
    /// (`routed_writes`). `None` when a value cannot be a literal or the
    /// arguments are too large: the caller then runs the one-statement
    /// upsert with bound parameters.
    fn routed_upsert(
        &self,
        t: Table<'_, TxHandle<Self>>,
        row: &StoredRow,
        typed: &[Typed],
    ) -> Option<String> {
        let sql: &TableSql = &t;
        let args = rows::deferred_upsert_args(t.compiled(), &self.partition, row, typed)?;
        let scopes = routed_writes::routed_scopes_sql(
            &self.partition,
            &t.compiled().name,
            &row.row_id,
            &row.scopes,
        )?;
        Some(format!(
            "{scopes}; EXECUTE {}({})",
            sql.row_put_name,
            args.join(", ")
        ))
    }

    /// Queues the row write when the push defers its violations, the push
    /// lock is held, the table's named upsert is prepared on this
    /// connection and every value can be a literal; a row write still
    /// pending is sent first (reporting its own violation). `false`: the
    /// caller writes at once.
    fn deferred_upsert_sent(
        &mut self,
        t: Table<'_, TxHandle<Self>>,
        row: &StoredRow,
        typed: &[Typed],
        op_index: Option<u32>,
    ) -> Result<bool> {
        if !self.defer_violations || !self.push_locked || self.poison.is_some() {
            return Ok(false);
        }
        let sql: &TableSql = &t;
        // On Citus the scope replacement travels as plain statements before
        // the row upsert alone (`routed_writes`).
        let routed = self.storage.is_citus();
        let name = if routed {
            &sql.row_put_name
        } else {
            &sql.upsert_name
        };
        if !self
            .conn
            .as_ref()
            .is_some_and(|conn| conn.has_named_text(name))
        {
            return Ok(false);
        }
        let statement = if routed {
            self.routed_upsert(t, row, typed)
        } else {
            rows::deferred_upsert_args(t.compiled(), &self.partition, row, typed)
                .map(|args| format!("EXECUTE {name}({})", args.join(", ")))
        };
        let Some(statement) = statement else {
            return Ok(false);
        };
        if self.deferred_upsert.is_some() {
            self.run(|_| Ok(()))?;
        }
        // A row write after the append may still be rejected: the
        // savepoint must stay.
        self.release_before = None;
        self.defer(statement);
        self.deferred_upsert = Some(op_index);
        Ok(true)
    }
}
