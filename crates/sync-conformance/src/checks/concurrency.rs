//! §20 Concurrency, C-301…C-314.
//!
//! Threads synchronise through barriers and channels only. A thread that
//! must block (a lock wait) cannot report that it is blocked, so "X waits for
//! Y" is asserted through what X observes once it proceeds (Y's committed
//! effects, or a flag Y raised just before ending), never through durations.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Barrier, Mutex};
use std::thread;

use serde_json::json;
use sync_core::{
    ActivationOutcome, CheckpointState, CompiledSchema, EnsureOptions, ErrorCode, NewChange,
    NewCommit, PushOperationResult, ServerStorage, StoredPushResult, StoredRow,
};

use crate::check::{expect_code, CheckDef, CheckResult, Failure, Requires};
use crate::checks::support_barrier::{
    checkpoint, commit_rows, commit_writer_version, database_fence, decl, empty_commit,
    fix1_storage, fix2_at, held_migration_lock, join_result, marker_version, partition_fence,
    push_task, tables, CLIENT,
};
use crate::context::{Ctx, NOW};
use crate::fixtures::{compile_json, decode, fix1, fix2_json, push, secret, task, Op};
use crate::harness::{PoolLimits, RawFilter};
use crate::registry::check;
use crate::{check, check_eq};

/// Group name.
pub(crate) const GROUP: &str = "concurrency";

/// The checks of this group.
pub(crate) const CHECKS: &[CheckDef] = &[
    check(
        GROUP,
        "C-301",
        "two threads, 50 pushes each, one partition: seqs 1..100 dense",
        c301_dense_under_contention,
    ),
    check(
        GROUP,
        "C-302",
        "a push lock held in p1 does not block a push to p2",
        c302_partitions_do_not_contend,
    )
    .requires(Requires::PerPartitionLocking),
    check(
        GROUP,
        "C-303",
        "a push to p2 waits for the open transaction in p1, then commits",
        c303_whole_database_writers_serialized,
    )
    .requires(Requires::WholeDatabaseLocking),
    check(
        GROUP,
        "C-304",
        "a second locker of p blocks until the first commits, then sees its writes",
        c304_lock_waits_and_sees_commit,
    ),
    check(
        GROUP,
        "C-305",
        "duplicate delivery by two threads: one applies, the other replays through the tx",
        c305_duplicate_delivery,
    ),
    check(
        GROUP,
        "C-306",
        "8 racing claims obtain epochs 1..8",
        c306_claim_race,
    ),
    check(
        GROUP,
        "C-307",
        "a claim racing an activation: exactly one wins",
        c307_claim_races_activation,
    ),
    check(
        GROUP,
        "C-308",
        "an old writer racing a migration blocks, then is fenced out",
        c308_old_writer_races_migration,
    )
    .requires(Requires::TransactionalDdl),
    check(
        GROUP,
        "C-309",
        "a migration waits for an in-flight old writer and rewrites its row",
        c309_migration_waits_for_old_writer,
    ),
    check(
        GROUP,
        "C-310",
        "declare does not wait for a locked writer; activation below its seq is Stale",
        c310_declare_does_not_wait,
    )
    .requires(Requires::PerPartitionLocking),
    check(
        GROUP,
        "C-311",
        "activation waits for a racing source push and is Stale at the old watermark",
        c311_activation_waits_for_push,
    ),
    check(
        GROUP,
        "C-312",
        "two instances pushing concurrently: dense seqs, no busy",
        c312_two_instances_push,
    ),
    check(
        GROUP,
        "C-313",
        "pool exhaustion: a second begin fails busy (retryable)",
        c313_pool_exhaustion,
    ),
    check(
        GROUP,
        "C-314",
        "concurrent put_push_result for one key: exactly one stored",
        c314_concurrent_put_push_result,
    ),
    check(
        GROUP,
        "C-336",
        "a stale owner's advance racing a claim is refused and never overwrites the new owner's progress",
        c336_stale_advance_races_claim,
    ),
];

/// Joins a scoped thread whose body returns a check result.
fn join_check<T>(handle: thread::ScopedJoinHandle<'_, CheckResult<T>>) -> CheckResult<T> {
    handle
        .join()
        .unwrap_or_else(|_| Err(Failure::new("a check thread panicked")))
}

/// A commit carrying one upsert of `row` into `tasks`.
fn task_commit(ccid: &str, row: &StoredRow) -> NewCommit {
    NewCommit {
        changes: vec![NewChange::upsert(
            "tasks",
            row.row_id.clone(),
            row.server_version,
            row.scopes.clone(),
            row.payload.clone(),
        )],
        ..empty_commit(ccid)
    }
}

fn applied(seq: i64) -> StoredPushResult {
    let mut result = StoredPushResult::applied(seq);
    result.results = vec![PushOperationResult::Applied { op_index: 0 }];
    result
}

fn c301_dense_under_contention(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = fix1_storage(ctx)?;
    let s = storage.as_ref();
    let schema = fix1()?;
    let barrier = Barrier::new(2);
    let clients = ["client-a", "client-b"];
    let per_client: Vec<CheckResult<Vec<(String, i64)>>> = thread::scope(|scope| {
        let handles: Vec<_> = clients
            .iter()
            .map(|client| {
                let (barrier, schema) = (&barrier, &schema);
                scope.spawn(move || -> CheckResult<Vec<(String, i64)>> {
                    barrier.wait();
                    let mut seqs = Vec::new();
                    for i in 0..50 {
                        let ccid = format!("k{i}");
                        let id = format!("{client}-{i}");
                        let row = task(schema, &id, "proj", &id)?;
                        let seq =
                            push(s, "p1", client, &ccid, &[Op::upsert("tasks", row)])?.seq()?;
                        seqs.push((ccid, seq));
                    }
                    Ok(seqs)
                })
            })
            .collect();
        handles.into_iter().map(join_check).collect()
    });
    let mut all = BTreeSet::new();
    for (client, seqs) in clients.iter().zip(per_client) {
        for (ccid, seq) in seqs? {
            check!(all.insert(seq), "commit_seq {seq} allocated twice");
            let stored = s.get_push_result("p1", client, &ccid)?.ok_or_else(|| {
                Failure::new(format!("push result of ({client}, {ccid}) missing"))
            })?;
            check_eq!(
                stored.commit_seq,
                Some(seq),
                "stored commit_seq of ({client}, {ccid})"
            );
        }
    }
    check_eq!(all, (1..=100).collect::<BTreeSet<i64>>(), "allocated seqs");
    check_eq!(s.get_max_commit_seq("p1")?, 100, "max_commit_seq");
    Ok(())
}

fn c302_partitions_do_not_contend(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = fix1_storage(ctx)?;
    let s = storage.as_ref();
    let mut a = s.begin("p1")?;
    a.lock_partition_for_push()?;
    a.append_commit(&empty_commit("a1"))?;
    let b = thread::scope(|scope| join_check(scope.spawn(|| push_task(s, "p2", "b1", "r1"))));
    check_eq!(b?, 1, "seq of B's push to p2 while A is open");
    a.commit()?;
    check_eq!(s.get_max_commit_seq("p1")?, 1, "max_commit_seq of p1");
    check_eq!(s.get_max_commit_seq("p2")?, 1, "max_commit_seq of p2");
    Ok(())
}

fn c303_whole_database_writers_serialized(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = fix1_storage(ctx)?;
    let s = storage.as_ref();
    let mut a = s.begin("p1")?;
    a.lock_partition_for_push()?;
    a.append_commit(&empty_commit("a1"))?;
    let a_ending = AtomicBool::new(false);
    let (started_tx, started_rx) = mpsc::channel::<()>();
    let (b, finished_after_a) = thread::scope(|scope| {
        let handle = scope.spawn(|| {
            let _ = started_tx.send(());
            let seq = push_task(s, "p2", "b1", "r1");
            (seq, a_ending.load(Ordering::SeqCst))
        });
        let _ = started_rx.recv();
        a_ending.store(true, Ordering::SeqCst);
        let committed = a.commit();
        let joined = handle
            .join()
            .unwrap_or_else(|_| (Err(Failure::new("B panicked")), false));
        (committed.map_err(Failure::from).and(joined.0), joined.1)
    });
    check_eq!(b?, 1, "seq of B's push to p2");
    check!(
        finished_after_a,
        "B's push to p2 completed while A's transaction was still open"
    );
    check_eq!(s.get_max_commit_seq("p1")?, 1, "max_commit_seq of p1");
    Ok(())
}

fn c304_lock_waits_and_sees_commit(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = fix1_storage(ctx)?;
    let s = storage.as_ref();
    let row = task(&fix1()?, "r1", "proj", "from A")?;
    let mut a = s.begin("p1")?;
    a.lock_partition_for_push()?;
    a.upsert_row("tasks", &row, Some(0))?;
    let seq = a.append_commit(&task_commit("k1", &row))?;
    a.put_push_result(CLIENT, "k1", &applied(seq))?;
    let a_committing = AtomicBool::new(false);
    let (started_tx, started_rx) = mpsc::channel::<()>();
    let (committed, seen) = thread::scope(|scope| {
        let handle = scope.spawn(|| -> CheckResult<_> {
            let _ = started_tx.send(());
            let mut b = s.begin("p1")?;
            b.lock_partition_for_push()?;
            let after_a = a_committing.load(Ordering::SeqCst);
            let row = b.get_row("tasks", "r1")?;
            let result = b.get_push_result(CLIENT, "k1")?;
            b.rollback()?;
            Ok((after_a, row, result))
        });
        let _ = started_rx.recv();
        a_committing.store(true, Ordering::SeqCst);
        (a.commit(), join_check(handle))
    });
    committed?;
    let (after_a, seen_row, seen_result) = seen?;
    check!(after_a, "B locked p1 while A still held the push lock");
    check_eq!(seen_row, Some(row), "row seen by B");
    check_eq!(seen_result, Some(applied(seq)), "push result seen by B");
    Ok(())
}

#[derive(Debug, PartialEq)]
enum Delivery {
    Applied(i64, StoredPushResult),
    Replayed(StoredPushResult),
}

/// One delivery of `(CLIENT, k1)` that checks for a replay only inside the
/// transaction, after the partition lock.
fn deliver(storage: &dyn ServerStorage, row: &StoredRow) -> CheckResult<Delivery> {
    let mut tx = storage.begin("p1")?;
    tx.lock_partition_for_push()?;
    if let Some(existing) = tx.get_push_result(CLIENT, "k1")? {
        tx.rollback()?;
        return Ok(Delivery::Replayed(existing));
    }
    tx.upsert_row("tasks", row, Some(0))?;
    let seq = tx.append_commit(&task_commit("k1", row))?;
    let result = applied(seq);
    tx.put_push_result(CLIENT, "k1", &result)?;
    tx.commit()?;
    Ok(Delivery::Applied(seq, result))
}

fn c305_duplicate_delivery(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = fix1_storage(ctx)?;
    let s = storage.as_ref();
    let row = task(&fix1()?, "r1", "proj", "once")?;
    let barrier = Barrier::new(2);
    let deliveries: Vec<CheckResult<Delivery>> = thread::scope(|scope| {
        let handles: Vec<_> = (0..2)
            .map(|_| {
                let (barrier, row) = (&barrier, &row);
                scope.spawn(move || {
                    barrier.wait();
                    deliver(s, row)
                })
            })
            .collect();
        handles.into_iter().map(join_check).collect()
    });
    let mut applied_results = Vec::new();
    let mut replayed = Vec::new();
    for delivery in deliveries {
        match delivery? {
            Delivery::Applied(seq, result) => applied_results.push((seq, result)),
            Delivery::Replayed(result) => replayed.push(result),
        }
    }
    check_eq!(applied_results.len(), 1, "number of applying deliveries");
    check_eq!(replayed.len(), 1, "number of replaying deliveries");
    check_eq!(applied_results[0].0, 1, "applied seq");
    check_eq!(
        replayed[0],
        applied_results[0].1,
        "result replayed through the transaction"
    );
    check_eq!(s.get_max_commit_seq("p1")?, 1, "max_commit_seq");
    Ok(())
}

fn c306_claim_race(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = fix1_storage(ctx)?;
    let s = storage.as_ref();
    s.declare_checkpoint("p1", "search_v1", 1, NOW)?;
    let barrier = Barrier::new(8);
    let claims: Vec<sync_core::Result<sync_core::StoredCheckpoint>> = thread::scope(|scope| {
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let barrier = &barrier;
                scope.spawn(move || {
                    barrier.wait();
                    s.claim_checkpoint("p1", "search_v1", 1, NOW)
                })
            })
            .collect();
        handles.into_iter().map(join_result).collect()
    });
    let mut epochs = BTreeSet::new();
    for claim in claims {
        let epoch = claim?.owner_epoch;
        check!(epochs.insert(epoch), "epoch {epoch} handed out twice");
    }
    check_eq!(epochs, (1..=8).collect::<BTreeSet<i64>>(), "claimed epochs");
    check_eq!(
        checkpoint(s, "p1", "search_v1")?.owner_epoch,
        8,
        "stored epoch"
    );
    Ok(())
}

fn c307_claim_races_activation(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = fix1_storage(ctx)?;
    let s = storage.as_ref();
    push_task(s, "p1", "c1", "r1")?;
    s.declare_checkpoint("p1", "search_v1", 1, NOW)?;
    let epoch = s.claim_checkpoint("p1", "search_v1", 1, NOW)?.owner_epoch;
    check_eq!(epoch, 1, "first claim");
    let barrier = Barrier::new(2);
    let sources = tables(&["tasks"]);
    let (claim, activation) = thread::scope(|scope| {
        let claimer = scope.spawn(|| {
            barrier.wait();
            s.claim_checkpoint("p1", "search_v1", 1, NOW)
        });
        let activator = scope.spawn(|| {
            barrier.wait();
            s.activate_checkpoint("p1", "search_v1", 1, 1, &sources, NOW)
        });
        (join_result(claimer), join_result(activator))
    });
    let final_row = checkpoint(s, "p1", "search_v1")?;
    match (claim, activation?) {
        (Err(error), ActivationOutcome::Activated)
            if error.code() == ErrorCode::CheckpointNotDeclared =>
        {
            check_eq!(
                final_row.state,
                CheckpointState::Activated,
                "final state after the activation won"
            );
            check_eq!(
                final_row.owner_epoch,
                1,
                "final epoch after the activation won"
            );
        }
        (Ok(claimed), ActivationOutcome::Stale) => {
            check_eq!(claimed.owner_epoch, 2, "epoch of the winning claim");
            check_eq!(
                final_row.state,
                CheckpointState::Backfilling,
                "final state after the claim won"
            );
            check_eq!(final_row.owner_epoch, 2, "final epoch after the claim won");
        }
        (claim, activation) => {
            return Err(Failure::new(format!(
                "claim {claim:?} with activation {activation:?} is neither allowed outcome"
            )))
        }
    }
    Ok(())
}

/// What the old writer of C-308 observed at each step.
type OldWriterSteps = (
    sync_core::Result<()>,
    sync_core::Result<()>,
    sync_core::Result<()>,
);

fn c308_old_writer_races_migration(ctx: &mut Ctx<'_>) -> CheckResult {
    fix1_storage(ctx)?;
    let raw = ctx.raw()?;
    let row = secret(&fix1()?, "s1", "proj", b"old")?;
    let old = raw.old_writer("p1")?;
    let bumper = ctx.open()?;
    let schema = fix2_at(2)?;
    let (opts, locked_rx, release_tx) = held_migration_lock(EnsureOptions::with_declarations(
        vec![decl("p1", "search_v2", 2)],
    ));
    let (bump, steps) = thread::scope(
        |scope| -> CheckResult<(sync_core::Result<()>, OldWriterSteps)> {
            let bumping = Arc::clone(&bumper);
            let bump = scope.spawn(move || bumping.ensure_schema(&schema, &opts));
            if locked_rx.recv().is_err() {
                return Err(Failure::new(format!(
                    "the bump ended without calling after_migration_lock: {:?}",
                    join_result(bump)
                )));
            }
            let (locking_tx, locking_rx) = mpsc::channel::<()>();
            let payload = row.payload.clone();
            let writer = scope.spawn(move || -> OldWriterSteps {
                let mut old = old;
                let _ = locking_tx.send(());
                let lock = old.lock();
                if lock.is_err() {
                    let skipped =
                        || Err(sync_core::Error::new(ErrorCode::Backend).detail("step", "skipped"));
                    return (lock, skipped(), skipped());
                }
                let upsert = old.upsert_row("secrets", "s1", &payload, r#"{"project_id":"proj"}"#);
                let insert = old.insert_commit(Some(1));
                (lock, upsert, insert)
            });
            let _ = locking_rx.recv();
            let _ = release_tx.send(());
            drop(release_tx);
            let bump = join_result(bump);
            let steps = writer
                .join()
                .map_err(|_| Failure::new("the old writer thread panicked"))?;
            Ok((bump, steps))
        },
    )?;
    bump.map_err(|e| Failure::new(format!("the bump failed: {e:?}")))?;
    let (lock, upsert, insert) = steps;
    lock.map_err(|e| Failure::new(format!("old writer lock: {e:?}")))?;
    upsert.map_err(|e| Failure::new(format!("old writer upsert: {e:?}")))?;
    expect_code(
        insert,
        ErrorCode::WriterFenceRejected,
        "old writer's commit insert after the bump",
    )?;
    check_eq!(
        bumper.get_row("p1", "secrets", "s1")?,
        None,
        "the old writer's row"
    );
    check_eq!(bumper.get_max_commit_seq("p1")?, 0, "max_commit_seq of p1");
    check_eq!(commit_rows(raw.as_ref(), "p1")?, 0, "commit rows of p1");
    check_eq!(marker_version(bumper.as_ref())?, Some(2), "marker");
    check_eq!(
        database_fence(bumper.as_ref())?,
        Some(2),
        "database-wide fence"
    );
    check_eq!(
        partition_fence(raw.as_ref(), "p1")?,
        Some(2),
        "partition fence of p1"
    );
    Ok(())
}

/// `FIX2` with a nullable encrypted `note` appended to the non-materialized
/// `secrets`, so the bump rewrites `secrets` payloads too.
fn fix2_with_secret_note() -> CheckResult<CompiledSchema> {
    let mut value = fix2_json();
    if let Some(columns) = value["tables"][2]["columns"].as_array_mut() {
        columns.push(json!({"name": "note", "type": "bytes", "nullable": true, "encrypted": true}));
    }
    let schema = compile_json(&value)?;
    let secrets = schema
        .table("secrets")
        .ok_or_else(|| Failure::new("fixture table secrets missing"))?;
    check!(
        secrets.columns.len() == 5 && !secrets.materialize,
        "secrets with note must be a non-materialized table of 5 columns"
    );
    Ok(schema)
}

fn c309_migration_waits_for_old_writer(ctx: &mut Ctx<'_>) -> CheckResult {
    fix1_storage(ctx)?;
    let raw = ctx.raw()?;
    let schema = fix2_with_secret_note()?;
    let bumper = ctx.open()?;
    let row = secret(&fix1()?, "s1", "proj", b"old")?;
    let mut old = raw.old_writer("p1")?;
    old.lock()?;
    old.upsert_row("secrets", "s1", &row.payload, r#"{"project_id":"proj"}"#)?;
    old.insert_commit(Some(1))?;
    let locked = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&locked);
    let opts = EnsureOptions {
        after_migration_lock: Some(Arc::new(move || flag.store(true, Ordering::SeqCst))),
        ..EnsureOptions::default()
    };
    let (started_tx, started_rx) = mpsc::channel::<()>();
    let (locked_early, old_commit, bump) = thread::scope(|scope| {
        let bumping = Arc::clone(&bumper);
        let schema = &schema;
        let handle = scope.spawn(move || {
            let _ = started_tx.send(());
            bumping.ensure_schema(schema, &opts)
        });
        let _ = started_rx.recv();
        let locked_early = locked.load(Ordering::SeqCst);
        let old_commit = old.commit();
        (locked_early, old_commit, join_result(handle))
    });
    check!(
        !locked_early,
        "the bump took the migration lock while the old writer was in flight"
    );
    old_commit.map_err(|e| Failure::new(format!("old writer commit: {e:?}")))?;
    bump.map_err(|e| Failure::new(format!("the bump failed: {e:?}")))?;
    check!(
        locked.load(Ordering::SeqCst),
        "the bump never called after_migration_lock"
    );
    check_eq!(bumper.get_max_commit_seq("p1")?, 1, "max_commit_seq of p1");
    check_eq!(
        commit_writer_version(raw.as_ref(), "p1", 1)?,
        Some(1),
        "writer_version of the old commit"
    );
    let stored = bumper
        .get_row("p1", "secrets", "s1")?
        .ok_or_else(|| Failure::new("the old writer's row is missing after the bump"))?;
    let values = decode(&schema, "secrets", &stored.payload)?;
    check_eq!(
        values.len(),
        5,
        "decoded column count under the bumped schema"
    );
    check!(values[4].is_null(), "appended note is not NULL: {values:?}");
    Ok(())
}

fn c310_declare_does_not_wait(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = fix1_storage(ctx)?;
    let s = storage.as_ref();
    push_task(s, "p1", "c1", "r1")?;
    let row = task(&fix1()?, "r2", "proj", "in flight")?;
    let mut tx = s.begin("p1")?;
    tx.lock_partition_for_push()?;
    tx.upsert_row("tasks", &row, Some(0))?;
    let seq = tx.append_commit(&task_commit("c2", &row))?;
    check_eq!(seq, 2, "in-flight seq");
    s.declare_checkpoint("p1", "search_v1", 1, NOW)?;
    tx.commit()?;
    check_eq!(
        s.get_max_commit_seq("p1")?,
        2,
        "max_commit_seq after the writer committed"
    );
    let epoch = s.claim_checkpoint("p1", "search_v1", 1, NOW)?.owner_epoch;
    let outcome = s.activate_checkpoint("p1", "search_v1", epoch, 1, &tables(&["tasks"]), NOW)?;
    check_eq!(
        outcome,
        ActivationOutcome::Stale,
        "activation at 1 below the writer's seq 2"
    );
    Ok(())
}

fn c311_activation_waits_for_push(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = fix1_storage(ctx)?;
    let s = storage.as_ref();
    push_task(s, "p1", "c1", "r1")?;
    s.declare_checkpoint("p1", "search_v1", 1, NOW)?;
    let epoch = s.claim_checkpoint("p1", "search_v1", 1, NOW)?.owner_epoch;
    let row = task(&fix1()?, "r2", "proj", "racing")?;
    let mut tx = s.begin("p1")?;
    tx.lock_partition_for_push()?;
    tx.upsert_row("tasks", &row, Some(0))?;
    tx.append_commit(&task_commit("c2", &row))?;
    let sources = tables(&["tasks"]);
    let (started_tx, started_rx) = mpsc::channel::<()>();
    let (committed, activation) = thread::scope(|scope| {
        let handle = scope.spawn(|| {
            let _ = started_tx.send(());
            s.activate_checkpoint("p1", "search_v1", epoch, 1, &sources, NOW)
        });
        let _ = started_rx.recv();
        (tx.commit(), join_result(handle))
    });
    committed?;
    check_eq!(
        activation?,
        ActivationOutcome::Stale,
        "activation at the old watermark 1"
    );
    check_eq!(
        checkpoint(s, "p1", "search_v1")?.state,
        CheckpointState::Backfilling,
        "state"
    );
    check_eq!(s.get_max_commit_seq("p1")?, 2, "max_commit_seq");
    Ok(())
}

fn c312_two_instances_push(ctx: &mut Ctx<'_>) -> CheckResult {
    let first = fix1_storage(ctx)?;
    let second = fix1_storage(ctx)?;
    let schema = fix1()?;
    let barrier = Barrier::new(2);
    let instances = [("client-a", first.as_ref()), ("client-b", second.as_ref())];
    let results: Vec<CheckResult<Vec<i64>>> = thread::scope(|scope| {
        let handles: Vec<_> = instances
            .iter()
            .map(|&(client, storage)| {
                let (barrier, schema) = (&barrier, &schema);
                scope.spawn(move || -> CheckResult<Vec<i64>> {
                    barrier.wait();
                    let mut seqs = Vec::new();
                    for i in 0..25 {
                        let id = format!("{client}-{i}");
                        let row = task(schema, &id, "proj", &id)?;
                        let outcome = push(
                            storage,
                            "p1",
                            client,
                            &format!("k{i}"),
                            &[Op::upsert("tasks", row)],
                        )
                        .map_err(|e| Failure::new(format!("{client} push {i} failed: {e:?}")))?;
                        seqs.push(outcome.seq()?);
                    }
                    Ok(seqs)
                })
            })
            .collect();
        handles.into_iter().map(join_check).collect()
    });
    let mut all = BTreeSet::new();
    for seqs in results {
        for seq in seqs? {
            check!(all.insert(seq), "commit_seq {seq} allocated twice");
        }
    }
    check_eq!(all, (1..=50).collect::<BTreeSet<i64>>(), "allocated seqs");
    check_eq!(first.get_max_commit_seq("p1")?, 50, "max_commit_seq");
    Ok(())
}

fn c313_pool_exhaustion(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.open_with(PoolLimits {
        size: 1,
        wait_ms: 100,
    })?;
    storage.ensure_schema(&fix1()?, &EnsureOptions::default())?;
    let held = storage.begin("p1")?;
    let error = expect_code(
        storage.begin("p2").map(|_tx| ()),
        ErrorCode::Busy,
        "second begin",
    )?;
    check!(error.retryable(), "busy is not retryable: {error:?}");
    held.rollback()?;
    Ok(())
}

fn c314_concurrent_put_push_result(ctx: &mut Ctx<'_>) -> CheckResult {
    let first = fix1_storage(ctx)?;
    let second = fix1_storage(ctx)?;
    let raw = ctx.raw()?;
    let mut result_a = applied(1);
    result_a.cache_identity = Some("a".to_owned());
    let mut result_b = applied(2);
    result_b.cache_identity = Some("b".to_owned());
    let barrier = Barrier::new(2);
    let writers = [(first.as_ref(), &result_a), (second.as_ref(), &result_b)];
    let puts: Vec<sync_core::Result<()>> = thread::scope(|scope| {
        let handles: Vec<_> = writers
            .iter()
            .map(|&(storage, result)| {
                let barrier = &barrier;
                scope.spawn(move || {
                    barrier.wait();
                    let mut tx = storage.begin("p1")?;
                    tx.put_push_result(CLIENT, "k1", result)?;
                    tx.commit()
                })
            })
            .collect();
        handles.into_iter().map(join_result).collect()
    });
    for put in puts {
        put?;
    }
    let filter = RawFilter::eq("partition", "p1")
        .and("client_id", CLIENT)
        .and("client_commit_id", "k1");
    check_eq!(
        raw.count("sync_push_results", filter)?,
        1,
        "stored push results for the key"
    );
    let seen_first = first.get_push_result("p1", CLIENT, "k1")?;
    let seen_second = second.get_push_result("p1", CLIENT, "k1")?;
    check_eq!(seen_first, seen_second, "records seen by the two readers");
    check!(
        seen_first.as_ref() == Some(&result_a) || seen_first.as_ref() == Some(&result_b),
        "stored record {seen_first:?} is neither written result"
    );
    let mut late = applied(3);
    late.cache_identity = Some("late".to_owned());
    let mut tx = second.begin("p1")?;
    tx.put_push_result(CLIENT, "k1", &late)?;
    tx.commit()?;
    check_eq!(
        first.get_push_result("p1", CLIENT, "k1")?,
        seen_first,
        "record after a later put for the key"
    );
    c314_first_locked_result_wins(&first, &second)
}

/// The push path of C-314: both writers take the push lock, so they store
/// in lock order; each takes a ticket once it holds the lock. The record
/// must be the result of the first ticket — a second put must not
/// overwrite it, whichever writer comes first.
fn c314_first_locked_result_wins(
    first: &Arc<dyn ServerStorage>,
    second: &Arc<dyn ServerStorage>,
) -> CheckResult {
    let mut result_a = applied(4);
    result_a.cache_identity = Some("locked-a".to_owned());
    let mut result_b = applied(5);
    result_b.cache_identity = Some("locked-b".to_owned());
    let barrier = Barrier::new(2);
    let tickets = Mutex::new(Vec::new());
    let writers = [(first.as_ref(), &result_a), (second.as_ref(), &result_b)];
    let puts: Vec<sync_core::Result<()>> = thread::scope(|scope| {
        let handles: Vec<_> = writers
            .iter()
            .map(|&(storage, result)| {
                let (barrier, tickets) = (&barrier, &tickets);
                scope.spawn(move || {
                    barrier.wait();
                    let mut tx = storage.begin("p1")?;
                    tx.lock_partition_for_push()?;
                    tickets
                        .lock()
                        .map_err(|_| sync_core::Error::backend("ticket lock poisoned"))?
                        .push(result.clone());
                    tx.put_push_result(CLIENT, "k2", result)?;
                    tx.commit()
                })
            })
            .collect();
        handles.into_iter().map(join_result).collect()
    });
    for put in puts {
        put?;
    }
    let order = tickets
        .into_inner()
        .map_err(|_| Failure::new("ticket lock poisoned"))?;
    check_eq!(order.len(), 2, "tickets taken under the push lock");
    check_eq!(
        first.get_push_result("p1", CLIENT, "k2")?,
        order.first().cloned(),
        "record of the key put by two push-locked transactions (first locker wins)"
    );
    Ok(())
}

/// Rounds of C-336: the interleaving that exposes an advance deciding on an
/// unlocked read needs the claim queued before the stale advance's write,
/// which threads can make likely but not certain; each round is a new
/// checkpoint.
const C336_ROUNDS: usize = 6;

/// Beyond the checklist (`docs/decisions.md`). Per round, owner 1 holds the
/// checkpoint in an open transaction (its own advance, observed 5); a claim
/// (epoch 2) and a second advance by owner 1 (observed 99) are started on
/// other instances and wait for it; then it commits. Whichever order the
/// two waiters run in, the stale advance may only succeed *before* the
/// claim — and then the claim's returned row carries its 99. After the
/// race, the new owner stores observed 50 and a stale advance must be
/// refused without touching it.
fn c336_stale_advance_races_claim(ctx: &mut Ctx<'_>) -> CheckResult {
    let holder = fix1_storage(ctx)?;
    let claimer = fix1_storage(ctx)?;
    let stale = fix1_storage(ctx)?;
    push_task(holder.as_ref(), "p1", "c1", "r1")?;
    for round in 0..C336_ROUNDS {
        let name = format!("race_{round}");
        holder.declare_checkpoint("p1", &name, 1, NOW)?;
        check_eq!(
            holder.claim_checkpoint("p1", &name, 1, NOW)?.owner_epoch,
            1,
            "round {round}: first claim"
        );
        let mut held = holder.begin("p1")?;
        check!(
            held.advance_checkpoint(&name, 1, 1, 5, NOW)?,
            "round {round}: owner 1's advance in the holding transaction was refused"
        );
        let (claim, advance) = thread::scope(|scope| {
            let (claim_started, claim_ready) = mpsc::channel::<()>();
            let (advance_started, advance_ready) = mpsc::channel::<()>();
            let name = name.as_str();
            let (claimer, stale) = (claimer.as_ref(), stale.as_ref());
            let claiming = scope.spawn(move || {
                let _ = claim_started.send(());
                claimer.claim_checkpoint("p1", name, 1, NOW)
            });
            let _ = claim_ready.recv();
            let advancing = scope.spawn(move || {
                let _ = advance_started.send(());
                stale.advance_checkpoint("p1", name, 1, 1, 99, NOW)
            });
            let _ = advance_ready.recv();
            let committed = held.commit();
            (
                committed.and_then(|()| join_result(claiming)),
                join_result(advancing),
            )
        });
        let claimed = claim.map_err(|e| Failure::new(format!("round {round}: claim: {e:?}")))?;
        check_eq!(
            claimed.owner_epoch,
            2,
            "round {round}: racing claim's epoch"
        );
        match advance {
            Ok(false) => check_eq!(
                claimed.observed_rows,
                5,
                "round {round}: observed_rows returned by the claim (the stale advance was refused)"
            ),
            Ok(true) => check_eq!(
                claimed.observed_rows,
                99,
                "round {round}: the stale advance succeeded, so it must precede the claim; \
                 observed_rows returned by the claim"
            ),
            Err(e) => {
                return Err(Failure::new(format!(
                    "round {round}: the stale advance failed instead of returning false: {e:?}"
                )))
            }
        }
        check_eq!(
            checkpoint(holder.as_ref(), "p1", &name)?.observed_rows,
            claimed.observed_rows,
            "round {round}: stored observed_rows right after the race"
        );
        check!(
            claimer.advance_checkpoint("p1", &name, 2, 1, 50, NOW)?,
            "round {round}: the new owner's advance was refused"
        );
        check_eq!(
            stale.advance_checkpoint("p1", &name, 1, 1, 77, NOW)?,
            false,
            "round {round}: a stale advance after the new owner's"
        );
        let stored = checkpoint(holder.as_ref(), "p1", &name)?;
        check_eq!(
            (stored.owner_epoch, stored.observed_rows),
            (2, 50),
            "round {round}: stored (owner_epoch, observed_rows)"
        );
    }
    Ok(())
}
