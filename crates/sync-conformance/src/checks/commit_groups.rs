//! Commit groups, C-340…C-345 (beyond the checklist; `docs/decisions.md`,
//! "Group commit on SQLite").
//!
//! Pushes queued behind an open push transaction. On SQLite with group
//! commit on they run as savepoints inside the holder's transaction and
//! share one `COMMIT`; on Postgres they are plainly concurrent pushes (the
//! harness's [`WriterProbe::await_queued`](crate::WriterProbe) returns at
//! once there). Either way every guarantee holds per push: each push is
//! acknowledged with its own dense `commit_seq` and push result, or failed
//! with nothing of it stored; a push that rolls back or is rejected
//! changes nothing but its own result; a bump never interleaves with a push.
//! Threads synchronise through barriers and channels only.

use std::sync::mpsc;
use std::sync::Arc;
use std::thread;

use sync_core::fault::{FaultKind, FaultPlan};
use sync_core::{
    Clock, CompiledSchema, EnsureOptions, Error, ErrorCode, NewChange, NewCommit,
    PushOperationResult, PushStatus, ServerStorage, StorageTransaction, StoredPushResult,
};

use crate::check::{CheckDef, CheckResult, Failure};
use crate::context::{Ctx, NOW};
use crate::fixtures::{fix1, fix2, task};
use crate::harness::WriterProbe;
use crate::registry::check;
use crate::{check, check_eq};

/// Group name.
pub(crate) const GROUP: &str = "commit_groups";

/// The checks of this group.
pub(crate) const CHECKS: &[CheckDef] = &[
    check(
        GROUP,
        "C-340",
        "a push queued behind an open push rolls back: only its own writes are undone, seqs stay dense",
        c340_member_rolls_back,
    ),
    check(
        GROUP,
        "C-341",
        "a queued push hitting a constraint violation is rejected alone; the others commit",
        c341_member_violates_constraint,
    ),
    check(
        GROUP,
        "C-342",
        "an injected COMMIT failure among queued pushes: each is acknowledged and stored, or failed with nothing stored",
        c342_commit_fails,
    ),
    check(
        GROUP,
        "C-343",
        "a bump arriving while queued pushes run waits for them and never joins them",
        c343_bump_while_grouped,
    ),
    check(
        GROUP,
        "C-344",
        "pushes queued behind an open push are each acknowledged with their own dense seq and result",
        c344_queued_pushes_commit,
    ),
    check(
        GROUP,
        "C-345",
        "a duplicate queued behind its original is never answered with a result that is not committed",
        c345_duplicate_never_replays_uncommitted,
    ),
];

const PARTITION: &str = "p1";

/// A grouped storage, its probe and the schema ensured on it.
type Grouped = (Arc<dyn ServerStorage>, Box<dyn WriterProbe>, CompiledSchema);

/// A storage for these checks with FIX1 ensured.
fn grouped(ctx: &mut Ctx<'_>) -> CheckResult<Grouped> {
    let schema = fix1()?;
    let clock: Arc<dyn Clock> = ctx.clock.clone();
    let harness = ctx.harness();
    let grouped = harness
        .open_grouped(ctx.db()?, clock)
        .map_err(|e| Failure::new(format!("open_grouped failed: {e:?}")))?;
    grouped
        .storage
        .ensure_schema(&schema, &EnsureOptions::default())?;
    Ok((grouped.storage, grouped.probe, schema))
}

fn applied(seq: i64) -> StoredPushResult {
    let mut result = StoredPushResult::applied(seq);
    result.results = vec![PushOperationResult::Applied { op_index: 0 }];
    result
}

fn row_id(client: &str) -> String {
    format!("row-{client}")
}

/// A push of one task row up to (not including) its commit.
fn staged<'s>(
    storage: &'s dyn ServerStorage,
    schema: &CompiledSchema,
    client: &str,
    title: &str,
) -> CheckResult<sync_core::Result<(Box<dyn StorageTransaction + 's>, i64)>> {
    let row = task(schema, &row_id(client), "pA", title)?;
    Ok((|| {
        let mut tx = storage.begin(PARTITION)?;
        tx.lock_partition_for_push()?;
        tx.upsert_row("tasks", &row, Some(0))?;
        let seq = tx.append_commit(&NewCommit {
            client_id: client.to_owned(),
            client_commit_id: "cc-1".to_owned(),
            actor_id: format!("actor:{client}"),
            created_at_ms: NOW,
            changes: vec![NewChange::upsert(
                "tasks",
                row.row_id.clone(),
                row.server_version,
                row.scopes.clone(),
                row.payload.clone(),
            )],
        })?;
        tx.put_push_result(client, "cc-1", &applied(seq))?;
        Ok((tx, seq))
    })())
}

/// A whole push of one task row: its seq, or the error that failed it.
fn push_one(
    storage: &dyn ServerStorage,
    schema: &CompiledSchema,
    client: &str,
) -> CheckResult<sync_core::Result<i64>> {
    Ok(staged(storage, schema, client, &format!("title-{client}"))?
        .and_then(|(tx, seq)| tx.commit().map(|()| seq)))
}

/// Joins a scoped thread whose body returns a check result.
fn join<T>(handle: thread::ScopedJoinHandle<'_, CheckResult<T>>) -> CheckResult<T> {
    handle
        .join()
        .unwrap_or_else(|_| Err(Failure::new("a check thread panicked")))
}

fn recv<T>(receiver: &mpsc::Receiver<T>, what: &str) -> CheckResult<T> {
    receiver
        .recv()
        .map_err(|_| Failure::new(format!("{what}: the sending thread ended early")))
}

/// The push of `client` is stored: its result with `seq` and its row.
fn expect_stored(storage: &dyn ServerStorage, client: &str, seq: i64) -> CheckResult {
    check_eq!(
        storage.get_push_result(PARTITION, client, "cc-1")?,
        Some(applied(seq)),
        "push result of {client}"
    );
    check!(
        storage
            .get_row(PARTITION, "tasks", &row_id(client))?
            .is_some(),
        "the row of {client} must be stored"
    );
    Ok(())
}

/// Nothing of the push of `client` is stored.
fn expect_absent(storage: &dyn ServerStorage, client: &str) -> CheckResult {
    check_eq!(
        storage.get_push_result(PARTITION, client, "cc-1")?,
        None,
        "push result of {client}"
    );
    check_eq!(
        storage.get_row(PARTITION, "tasks", &row_id(client))?,
        None,
        "row of {client}"
    );
    Ok(())
}

fn c344_queued_pushes_commit(ctx: &mut Ctx<'_>) -> CheckResult {
    let (storage, probe, schema) = grouped(ctx)?;
    let s = storage.as_ref();
    let (leader, first) = staged(s, &schema, "client-a", "a")??;
    let clients = ["client-b", "client-c", "client-d"];
    let outcomes = thread::scope(|scope| -> CheckResult<Vec<i64>> {
        let schema = &schema;
        let handles: Vec<_> = clients
            .iter()
            .map(|client| scope.spawn(move || push_one(s, schema, client)))
            .collect();
        probe.await_queued(clients.len(), 0)?;
        leader.commit()?;
        handles
            .into_iter()
            .map(|h| join(h)?.map_err(Failure::from))
            .collect()
    })?;
    let mut seqs = outcomes.clone();
    seqs.push(first);
    seqs.sort_unstable();
    check_eq!(seqs, vec![1, 2, 3, 4], "the seqs of four pushes");
    expect_stored(s, "client-a", first)?;
    for (client, seq) in clients.iter().zip(outcomes) {
        expect_stored(s, client, seq)?;
    }
    check_eq!(s.get_max_commit_seq(PARTITION)?, 4, "max_commit_seq");
    Ok(())
}

fn c340_member_rolls_back(ctx: &mut Ctx<'_>) -> CheckResult {
    let (storage, probe, schema) = grouped(ctx)?;
    let s = storage.as_ref();
    let (leader, first) = staged(s, &schema, "client-a", "a")??;
    check_eq!(first, 1, "first seq");
    let (joined_tx, joined_rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    thread::scope(|scope| -> CheckResult {
        let schema = &schema;
        let quitter = scope.spawn(move || -> CheckResult {
            let (tx, seq) = staged(s, schema, "client-b", "b")??;
            let _ = joined_tx.send(seq);
            recv(&go_rx, "go")?;
            tx.rollback()?;
            Ok(())
        });
        probe.await_queued(1, 0)?;
        let commit = scope.spawn(move || leader.commit().map_err(Failure::from));
        // b runs after a: it sees a's append.
        check_eq!(recv(&joined_rx, "b staged")?, 2, "seq allocated to b");
        let later = scope.spawn(move || push_one(s, schema, "client-c"));
        probe.await_queued(1, 0)?;
        let _ = go_tx.send(());
        join(quitter)?;
        check_eq!(join(later)??, 2, "c reuses the seq b rolled back");
        join(commit)?;
        Ok(())
    })?;
    expect_stored(s, "client-a", 1)?;
    expect_stored(s, "client-c", 2)?;
    expect_absent(s, "client-b")?;
    check_eq!(s.get_max_commit_seq(PARTITION)?, 2, "max_commit_seq");
    Ok(())
}

fn c341_member_violates_constraint(ctx: &mut Ctx<'_>) -> CheckResult {
    let (storage, probe, schema) = grouped(ctx)?;
    let s = storage.as_ref();
    let (leader, _) = staged(s, &schema, "client-a", "same")??;
    let rejection = StoredPushResult {
        status: PushStatus::Rejected,
        commit_seq: None,
        recorded_at_ms: Some(NOW),
        cache_identity: None,
        results: vec![PushOperationResult::Error {
            op_index: 1,
            code: "sync.constraint_violation".to_owned(),
            message: "unique".to_owned(),
            retryable: false,
            details: None,
        }],
        actor_id: None,
    };
    let ok_row = task(&schema, "row-b-ok", "pA", "fine")?;
    let dup_row = task(&schema, "row-b-dup", "pA", "same")?;
    thread::scope(|scope| -> CheckResult {
        let (schema, rejection) = (&schema, &rejection);
        let (ok_row, dup_row) = (&ok_row, &dup_row);
        let violator = scope.spawn(move || -> CheckResult {
            let mut tx = s.begin(PARTITION)?;
            tx.lock_partition_for_push()?;
            tx.upsert_row("tasks", ok_row, Some(0))?;
            // The title a's row holds; a is before b.
            let error = tx.upsert_row("tasks", dup_row, Some(1));
            check!(
                matches!(&error, Err(e) if e.code() == ErrorCode::ConstraintViolation),
                "b's duplicate title: expected constraint_violation, got {error:?}"
            );
            tx.commit_rejected_push_result("client-b", "cc-1", rejection)?;
            Ok(())
        });
        let other = scope.spawn(move || push_one(s, schema, "client-c"));
        probe.await_queued(2, 0)?;
        leader.commit()?;
        join(violator)?;
        check_eq!(join(other)??, 2, "c's seq");
        Ok(())
    })?;
    check_eq!(
        s.get_push_result(PARTITION, "client-b", "cc-1")?,
        Some(rejection),
        "b's stored rejection"
    );
    check_eq!(
        s.get_row(PARTITION, "tasks", "row-b-ok")?,
        None,
        "b's staged row"
    );
    expect_stored(s, "client-a", 1)?;
    expect_stored(s, "client-c", 2)?;
    check_eq!(s.get_max_commit_seq(PARTITION)?, 2, "max_commit_seq");
    Ok(())
}

fn c342_commit_fails(ctx: &mut Ctx<'_>) -> CheckResult {
    let (storage, probe, schema) = grouped(ctx)?;
    let s = storage.as_ref();
    let clients = ["client-a", "client-b", "client-c"];
    let (leader, first) = staged(s, &schema, clients[0], "a")??;
    probe.set_fault_plan(Some(FaultPlan::at_first_commit(FaultKind::Fail)))?;
    let outcomes = thread::scope(|scope| -> CheckResult<Vec<sync_core::Result<i64>>> {
        let schema = &schema;
        let handles: Vec<_> = clients[1..]
            .iter()
            .map(|client| scope.spawn(move || push_one(s, schema, client)))
            .collect();
        probe.await_queued(2, 0)?;
        let mut outcomes = vec![leader.commit().map(|()| first)];
        for handle in handles {
            outcomes.push(join(handle)?);
        }
        Ok(outcomes)
    })?;
    probe.set_fault_plan(None)?;
    let mut acknowledged = Vec::new();
    let mut failed = Vec::new();
    for (client, outcome) in clients.iter().zip(outcomes) {
        match outcome {
            Ok(seq) => {
                expect_stored(s, client, seq)?;
                acknowledged.push(seq);
            }
            Err(error) => {
                check!(
                    error.code().as_str().starts_with("sync.storage."),
                    "{client}: a storage error code, got {error:?}"
                );
                expect_absent(s, client)?;
                failed.push(*client);
            }
        }
    }
    check!(
        !failed.is_empty(),
        "the injected COMMIT failure failed no push"
    );
    acknowledged.sort_unstable();
    let dense: Vec<i64> = (1..=acknowledged.len() as i64).collect();
    check_eq!(acknowledged, dense, "the acknowledged seqs");
    // Nothing of a failed push stays behind: retried, each commits.
    for client in &failed {
        let seq = push_one(s, &schema, client)?.map_err(|e: Error| {
            Failure::new(format!("{client}: retry after the failure: {e:?}"))
        })?;
        expect_stored(s, client, seq)?;
    }
    check_eq!(s.get_max_commit_seq(PARTITION)?, 3, "max_commit_seq");
    Ok(())
}

fn c343_bump_while_grouped(ctx: &mut Ctx<'_>) -> CheckResult {
    let (storage, probe, schema) = grouped(ctx)?;
    let s = storage.as_ref();
    let v2 = fix2()?;
    let (leader, _) = staged(s, &schema, "client-a", "a")??;
    let (joined_tx, joined_rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    thread::scope(|scope| -> CheckResult {
        let (schema, v2) = (&schema, &v2);
        let member = scope.spawn(move || -> CheckResult<i64> {
            let (tx, seq) = staged(s, schema, "client-b", "b")??;
            let _ = joined_tx.send(tx.writer_version());
            recv(&go_rx, "go")?;
            tx.commit()?;
            Ok(seq)
        });
        probe.await_queued(1, 0)?;
        let commit = scope.spawn(move || leader.commit().map_err(Failure::from));
        check_eq!(recv(&joined_rx, "b staged")?, 1, "b's writer version");
        let bump = scope.spawn(move || {
            s.ensure_schema(v2, &EnsureOptions::default())
                .map_err(Failure::from)
        });
        probe.await_queued(0, 1)?;
        let _ = go_tx.send(());
        check_eq!(join(member)?, 2, "b's seq");
        join(commit)?;
        join(bump)?;
        Ok(())
    })?;
    expect_stored(s, "client-a", 1)?;
    expect_stored(s, "client-b", 2)?;
    check_eq!(
        s.ensured_version(),
        Some(2),
        "ensured version after the bump"
    );
    check_eq!(
        s.read_schema_marker()?.map(|m| m.schema_version),
        Some(2),
        "stored version"
    );
    let (tx, seq) = staged(s, &v2, "client-c", "c")??;
    check_eq!(tx.writer_version(), 2, "a push after the bump");
    tx.commit()?;
    check_eq!(seq, 3, "c's seq");
    Ok(())
}

fn c345_duplicate_never_replays_uncommitted(ctx: &mut Ctx<'_>) -> CheckResult {
    for fail in [false, true] {
        let (storage, probe, schema) = grouped(ctx)?;
        let s = storage.as_ref();
        let (original, seq) = staged(s, &schema, "client-a", "a")??;
        if fail {
            probe.set_fault_plan(Some(FaultPlan::at_first_commit(FaultKind::Fail)))?;
        }
        let (committed, read) = thread::scope(|scope| -> CheckResult<_> {
            let duplicate = scope.spawn(move || -> CheckResult<_> {
                let mut tx = s.begin(PARTITION)?;
                tx.lock_partition_for_push()?;
                let read = tx.get_push_result("client-a", "cc-1");
                tx.rollback()?;
                Ok(read)
            });
            probe.await_queued(1, 0)?;
            let committed = original.commit();
            Ok((committed, join(duplicate)?))
        })?;
        probe.set_fault_plan(None)?;
        let stored = s.get_push_result(PARTITION, "client-a", "cc-1")?;
        check_eq!(
            stored.is_some(),
            committed.is_ok(),
            "(fail = {fail}) the original is stored iff its commit succeeded: {committed:?}"
        );
        match read {
            // A replay is the committed result, never an uncommitted one.
            Ok(Some(result)) => check_eq!(
                Some(result),
                stored.clone(),
                "(fail = {fail}) the duplicate's replay"
            ),
            Ok(None) => check!(
                stored.is_none(),
                "(fail = {fail}) the duplicate missed a committed original"
            ),
            Err(error) => check!(
                error.retryable(),
                "(fail = {fail}) the duplicate's refusal must be retryable: {error:?}"
            ),
        }
        if let Some(stored) = stored {
            check_eq!(stored, applied(seq), "(fail = {fail}) the stored original");
        }
        // A fresh database for the next pass.
        drop(probe);
        drop(storage);
        ctx.reset_db();
    }
    Ok(())
}
