//! §10 Horizon and pruning, C-170…C-186, and C-335 (amended 2026-12:
//! no prune beyond the head of the log).

use std::sync::mpsc::{self, TryRecvError};
use std::sync::Barrier;
use std::thread;

use sync_core::limits::MAX_SAFE_INTEGER;
use sync_core::{
    prune_commit_log, ClientRecord, Clock, CommitPruneQuery, CommitPruneResult, ErrorCode,
    RetentionPolicy, ServerStorage,
};

use crate::check::{expect_code, CheckDef, CheckResult, Failure, Requires};
use crate::checks::support_pdata::{
    append, append_empty, commit_at, joined, project, seqs, touch, upsert_change, window, EPOCH, P,
};
use crate::context::{Ctx, NOW};
use crate::fixtures::{fix1, push, task, Op};
use crate::harness::RawFilter;
use crate::registry::check;
use crate::{check, check_eq};

/// Group name.
pub(crate) const GROUP: &str = "pruning";

/// The checks of this group.
pub(crate) const CHECKS: &[CheckDef] = &[
    check(
        GROUP,
        "C-170",
        "the horizon defaults to 0",
        c170_horizon_default,
    ),
    check(
        GROUP,
        "C-171",
        "set_horizon_seq is monotonic",
        c171_horizon_monotonic,
    ),
    check(
        GROUP,
        "C-172",
        "set_horizon_seq(-1) is invalid_argument",
        c172_negative_horizon,
    ),
    check(
        GROUP,
        "C-173",
        "prune through 2 of 5 commits reports {0, 2, 2} and keeps 3..5",
        c173_prune_through_two,
    ),
    check(
        GROUP,
        "C-174",
        "a prune below the horizon reports {4, 4, 0}",
        c174_prune_below_horizon,
    ),
    check(
        GROUP,
        "C-175",
        "empty epoch, through -1 and through 2^53 are invalid_prune_cursor",
        c175_invalid_prune_cursor,
    ),
    check(
        GROUP,
        "C-176",
        "pruning an unregistered partition is prune_epoch_mismatch",
        c176_unregistered_partition,
    ),
    check(
        GROUP,
        "C-177",
        "a prune with the pre-rotation epoch is refused; the new epoch prunes",
        c177_rotation_fences_prune,
    ),
    check(
        GROUP,
        "C-178",
        "concurrent prunes through 4 and 2 never regress the horizon",
        c178_concurrent_prunes,
    ),
    check(
        GROUP,
        "C-179",
        "a prune removes tombstones at or below the horizon only",
        c179_prune_tombstones,
    ),
    check(
        GROUP,
        "C-180",
        "a prune keeps rows, push results, clients, reactions, checkpoints and fences",
        c180_prune_keeps_state,
    ),
    check(
        GROUP,
        "C-181",
        "get_commit_seq_before is strict",
        c181_commit_seq_before,
    ),
    check(
        GROUP,
        "C-182",
        "prune_commit_log holds the horizon at an active cursor",
        c182_retention_active_cursor,
    ),
    check(
        GROUP,
        "C-183",
        "prune_commit_log retains min_retained_commits",
        c183_retention_min_retained,
    ),
    check(
        GROUP,
        "C-184",
        "prune_commit_log ignores inactive cursors",
        c184_retention_inactive_cursor,
    ),
    check(
        GROUP,
        "C-185",
        "prune_commit_log on an unregistered partition is partition_unregistered",
        c185_retention_unregistered,
    ),
    check(
        GROUP,
        "C-186",
        "a prune waits for a transaction holding the partition push lock",
        c186_prune_waits_for_push_lock,
    )
    .requires(Requires::PerPartitionLocking),
    check(
        GROUP,
        "C-335",
        "prune through max_commit_seq + 1 is invalid_prune_cursor (beyond_head); horizon and log unchanged",
        c335_prune_beyond_head,
    ),
];

const DAY_MS: i64 = 24 * 60 * 60 * 1000;

fn prune_query(log_epoch: &str, through_seq: i64) -> CommitPruneQuery {
    CommitPruneQuery {
        log_epoch: log_epoch.to_owned(),
        through_seq,
    }
}

fn prune(storage: &dyn ServerStorage, through_seq: i64) -> CheckResult<CommitPruneResult> {
    Ok(storage.prune_commits_through(P, &prune_query(EPOCH, through_seq))?)
}

fn result(previous_horizon_seq: i64, horizon_seq: i64, removed_commits: i64) -> CommitPruneResult {
    CommitPruneResult {
        previous_horizon_seq,
        horizon_seq,
        removed_commits,
    }
}

/// Registers `P` and appends `count` empty commits.
fn registered_with_commits(storage: &dyn ServerStorage, count: usize) -> CheckResult {
    touch(storage, P)?;
    append_empty(storage, P, count)?;
    Ok(())
}

/// Registers `P`, appends five one-task commits in project `p1`.
fn registered_with_task_commits(storage: &dyn ServerStorage) -> CheckResult {
    let schema = fix1()?;
    touch(storage, P)?;
    for n in 1..=5 {
        let row = task(&schema, &format!("r{n}"), "p1", &format!("title {n}"))?;
        append(
            storage,
            P,
            &commit_at(&format!("c-{n}"), NOW, vec![upsert_change("tasks", &row)]),
        )?;
    }
    Ok(())
}

fn client(client_id: &str, cursor: i64, updated_at_ms: i64) -> ClientRecord {
    ClientRecord {
        client_id: client_id.to_owned(),
        actor_id: "actor-1".to_owned(),
        wire_version: 2,
        cursor,
        updated_at_ms,
        subscriptions: Vec::new(),
    }
}

fn policy(min_retained_commits: i64) -> RetentionPolicy {
    RetentionPolicy {
        active_window_ms: 14 * DAY_MS,
        age_force_ms: 30 * DAY_MS,
        min_retained_commits,
    }
}

fn c170_horizon_default(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.ensured(&fix1()?)?;
    check_eq!(
        storage.get_horizon_seq(P)?,
        0,
        "horizon of an unknown partition"
    );
    append_empty(storage.as_ref(), P, 1)?;
    check_eq!(storage.get_horizon_seq(P)?, 0, "horizon after a commit");
    Ok(())
}

fn c171_horizon_monotonic(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.ensured(&fix1()?)?;
    storage.set_horizon_seq(P, 2)?;
    check_eq!(storage.get_horizon_seq(P)?, 2, "horizon after set 2");
    storage.set_horizon_seq(P, 1)?;
    check_eq!(storage.get_horizon_seq(P)?, 2, "horizon after set 1");
    Ok(())
}

fn c172_negative_horizon(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.ensured(&fix1()?)?;
    expect_code(
        storage.set_horizon_seq(P, -1),
        ErrorCode::InvalidArgument,
        "set_horizon_seq(-1)",
    )?;
    check_eq!(
        storage.get_horizon_seq(P)?,
        0,
        "horizon after the refused set"
    );
    Ok(())
}

fn c173_prune_through_two(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.ensured(&fix1()?)?;
    registered_with_task_commits(storage.as_ref())?;
    check_eq!(
        prune(storage.as_ref(), 2)?,
        result(0, 2, 2),
        "prune through 2"
    );
    let commits = storage.read_commit_window(P, &window("tasks", project("p1"), 0, 100))?;
    check_eq!(seqs(&commits), [3, 4, 5], "window after the prune");
    Ok(())
}

fn c174_prune_below_horizon(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.ensured(&fix1()?)?;
    registered_with_commits(storage.as_ref(), 5)?;
    check_eq!(
        prune(storage.as_ref(), 4)?,
        result(0, 4, 4),
        "prune through 4"
    );
    check_eq!(
        prune(storage.as_ref(), 2)?,
        result(4, 4, 0),
        "prune through 2 at horizon 4"
    );
    check_eq!(storage.get_horizon_seq(P)?, 4, "horizon");
    Ok(())
}

fn c175_invalid_prune_cursor(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.ensured(&fix1()?)?;
    registered_with_commits(storage.as_ref(), 2)?;
    let cases = [
        ("empty epoch", prune_query("", 1)),
        ("through -1", prune_query(EPOCH, -1)),
        ("through 2^53", prune_query(EPOCH, MAX_SAFE_INTEGER + 1)),
    ];
    for (what, query) in cases {
        expect_code(
            storage.prune_commits_through(P, &query),
            ErrorCode::InvalidPruneCursor,
            what,
        )?;
    }
    check_eq!(
        storage.get_horizon_seq(P)?,
        0,
        "horizon after refused prunes"
    );
    Ok(())
}

fn c176_unregistered_partition(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.ensured(&fix1()?)?;
    append_empty(storage.as_ref(), P, 2)?;
    expect_code(
        storage.prune_commits_through(P, &prune_query(EPOCH, 1)),
        ErrorCode::PruneEpochMismatch,
        "prune of an unregistered partition",
    )?;
    check_eq!(
        storage.get_horizon_seq(P)?,
        0,
        "horizon after the refused prune"
    );
    Ok(())
}

fn c177_rotation_fences_prune(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.ensured(&fix1()?)?;
    registered_with_commits(storage.as_ref(), 5)?;
    check_eq!(
        prune(storage.as_ref(), 4)?,
        result(0, 4, 4),
        "prune through 4"
    );
    storage.rotate_partition_log_epoch(P, "epoch-2", NOW + 1)?;
    expect_code(
        storage.prune_commits_through(P, &prune_query(EPOCH, 5)),
        ErrorCode::PruneEpochMismatch,
        "prune with the old epoch",
    )?;
    check_eq!(
        storage.get_horizon_seq(P)?,
        4,
        "horizon after the refused prune"
    );
    check_eq!(
        storage.prune_commits_through(P, &prune_query("epoch-2", 5))?,
        result(4, 5, 1),
        "prune with the new epoch through 5"
    );
    Ok(())
}

fn c178_concurrent_prunes(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let first = ctx.ensured(&schema)?;
    let second = ctx.ensured(&schema)?;
    registered_with_commits(first.as_ref(), 5)?;
    let barrier = Barrier::new(2);
    let (a, b) = thread::scope(|s| {
        let a = s.spawn(|| {
            barrier.wait();
            first.prune_commits_through(P, &prune_query(EPOCH, 4))
        });
        let b = s.spawn(|| {
            barrier.wait();
            second.prune_commits_through(P, &prune_query(EPOCH, 2))
        });
        (a.join(), b.join())
    });
    let (a, b) = (joined(a)??, joined(b)??);
    check_eq!(
        a.removed_commits + b.removed_commits,
        4,
        "commits removed in total ({a:?}, {b:?})"
    );
    for r in [a, b] {
        check!(
            r.horizon_seq >= r.previous_horizon_seq,
            "horizon regressed in {r:?}"
        );
    }
    check_eq!(first.get_horizon_seq(P)?, 4, "final horizon");
    Ok(())
}

fn c179_prune_tombstones(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let storage = ctx.ensured(&schema)?;
    touch(storage.as_ref(), P)?;
    let mut upserts = Vec::new();
    for n in 1..=3 {
        upserts.push(Op::upsert(
            "tasks",
            task(&schema, &format!("r{n}"), "p1", &format!("t{n}"))?,
        ));
    }
    check_eq!(
        push(storage.as_ref(), P, "client-1", "c-0", &upserts)?.seq()?,
        1,
        "upsert commit"
    );
    // Tombstones at 2 (below the horizon), 3 (at it) and 4 (above it).
    for n in 1..=3 {
        push(
            storage.as_ref(),
            P,
            "client-1",
            &format!("c-{n}"),
            &[Op::delete("tasks", &format!("r{n}"))],
        )?
        .seq()?;
    }
    check_eq!(prune(storage.as_ref(), 3)?.horizon_seq, 3, "horizon");
    let mut tx = storage.begin(P)?;
    let tombstones = [
        tx.get_tombstone_seq("tasks", "r1")?,
        tx.get_tombstone_seq("tasks", "r2")?,
        tx.get_tombstone_seq("tasks", "r3")?,
    ];
    tx.rollback()?;
    check_eq!(
        tombstones,
        [None, None, Some(4)],
        "tombstones of r1 (2), r2 (3), r3 (4) after pruning through 3"
    );
    Ok(())
}

fn c180_prune_keeps_state(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let storage = ctx.ensured(&schema)?;
    touch(storage.as_ref(), P)?;
    for n in 1..=3 {
        let row = task(&schema, &format!("r{n}"), "p1", &format!("t{n}"))?;
        push(
            storage.as_ref(),
            P,
            "client-1",
            &format!("c-{n}"),
            &[Op::upsert("tasks", row)],
        )?
        .seq()?;
    }
    storage.put_client_record(P, &client("client-1", 3, NOW))?;
    let reactions = storage.capabilities().reactions;
    if reactions {
        let mut tx = storage.begin(P)?;
        tx.lock_partition_for_push()?;
        let seq = tx.append_commit(&commit_at("c-4", NOW, Vec::new()))?;
        tx.enqueue_reactions(&[sync_core::NewReaction {
            idempotency_key: "reaction-1".to_owned(),
            kind: "email".to_owned(),
            version: 1,
            payload: serde_json::json!({}),
            source_client_id: "client-1".to_owned(),
            source_client_commit_id: "c-4".to_owned(),
            source_commit_seq: seq,
            created_at_ms: NOW,
            max_attempts: 3,
        }])?;
        tx.commit()?;
    }
    storage.declare_checkpoint(P, "search_v1", 1, NOW)?;
    let fence = storage.required_writer_version(P)?;
    let raw = ctx.raw()?;
    let mut tables = vec![
        ("tasks", "_sync_partition"),
        ("sync_row_scopes", "partition"),
        ("sync_push_results", "partition"),
        ("sync_clients", "partition"),
        ("sync_backfill_checkpoints", "partition"),
        ("sync_writer_fence", "partition"),
    ];
    if reactions {
        tables.push(("sync_reactions", "partition"));
    }
    let count_all = |raw: &dyn crate::RawAccess| -> CheckResult<Vec<i64>> {
        tables
            .iter()
            .map(|(table, column)| Ok(raw.count(table, RawFilter::eq(column, P))?))
            .collect()
    };
    let before = count_all(raw.as_ref())?;
    for ((table, _), count) in tables.iter().zip(&before) {
        check!(*count > 0, "fixture wrote no {table} rows");
    }
    let max = storage.get_max_commit_seq(P)?;
    check_eq!(
        prune(storage.as_ref(), max)?.removed_commits,
        max,
        "commits removed"
    );
    check_eq!(
        count_all(raw.as_ref())?,
        before,
        "row counts of {tables:?} after the prune"
    );
    check_eq!(
        storage.required_writer_version(P)?,
        fence,
        "effective fence after the prune"
    );
    check!(
        storage.get_row(P, "tasks", "r1")?.is_some(),
        "row r1 gone after the prune"
    );
    Ok(())
}

fn c181_commit_seq_before(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.ensured(&fix1()?)?;
    for (n, at) in [NOW, NOW + 100, NOW + 200].into_iter().enumerate() {
        append(
            storage.as_ref(),
            P,
            &commit_at(&format!("c-{n}"), at, Vec::new()),
        )?;
    }
    check_eq!(
        storage.get_commit_seq_before(P, NOW + 150)?,
        2,
        "before NOW+150"
    );
    check_eq!(storage.get_commit_seq_before(P, NOW)?, 0, "before NOW");
    check_eq!(
        storage.get_commit_seq_before(P, NOW + 100)?,
        1,
        "before NOW+100"
    );
    Ok(())
}

fn c182_retention_active_cursor(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.ensured(&fix1()?)?;
    registered_with_commits(storage.as_ref(), 5)?;
    storage.put_client_record(P, &client("client-1", 2, NOW))?;
    ctx.clock.advance(DAY_MS);
    let now = ctx.clock.now_ms();
    let pruned = prune_commit_log(storage.as_ref(), P, now, &policy(0))?;
    check_eq!(pruned.horizon_seq, 2, "horizon");
    check_eq!(storage.get_horizon_seq(P)?, 2, "stored horizon");
    Ok(())
}

fn c183_retention_min_retained(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.ensured(&fix1()?)?;
    registered_with_commits(storage.as_ref(), 5)?;
    ctx.clock.advance(DAY_MS);
    let now = ctx.clock.now_ms();
    let pruned = prune_commit_log(storage.as_ref(), P, now, &policy(3))?;
    check_eq!(pruned.horizon_seq, 2, "horizon");
    check_eq!(pruned.removed_commits, 2, "removed commits");
    Ok(())
}

fn c184_retention_inactive_cursor(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.ensured(&fix1()?)?;
    registered_with_commits(storage.as_ref(), 5)?;
    storage.put_client_record(P, &client("client-1", 1, NOW))?;
    ctx.clock.advance(15 * DAY_MS);
    let now = ctx.clock.now_ms();
    let pruned = prune_commit_log(storage.as_ref(), P, now, &policy(1))?;
    check_eq!(pruned.horizon_seq, 4, "horizon (5 commits - min 1)");
    Ok(())
}

fn c185_retention_unregistered(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.ensured(&fix1()?)?;
    append_empty(storage.as_ref(), P, 2)?;
    let now = ctx.clock.now_ms();
    expect_code(
        prune_commit_log(storage.as_ref(), P, now, &policy(0)),
        ErrorCode::PartitionUnregistered,
        "prune_commit_log of an unregistered partition",
    )?;
    Ok(())
}

fn c186_prune_waits_for_push_lock(ctx: &mut Ctx<'_>) -> CheckResult {
    /// Round trips the holder makes (each followed by a `try_recv`) after the
    /// pruning thread has started and before the holder commits.
    const HOLDER_ROUND_TRIPS: usize = 20;
    let schema = fix1()?;
    let holder = ctx.ensured(&schema)?;
    let pruner = ctx.ensured(&schema)?;
    registered_with_commits(holder.as_ref(), 5)?;
    // Warm the pruner's pool so its prune reaches the database as soon as it starts.
    check_eq!(pruner.get_horizon_seq(P)?, 0, "horizon before the prune");
    let (started_sender, started) = mpsc::channel();
    let (done_sender, done) = mpsc::channel();
    let query = prune_query(EPOCH, 6);
    thread::scope(|s| -> CheckResult {
        // The transaction lives inside the scope closure, so an early return
        // drops (rolls back) it before the scope joins the pruning thread.
        let mut tx = holder.begin(P)?;
        tx.lock_partition_for_push()?;
        let own = tx.append_commit(&commit_at("held", NOW, Vec::new()))?;
        check_eq!(own, 6, "seq appended under the held lock");
        let (pruner_ref, query_ref) = (&pruner, &query);
        s.spawn(move || {
            let _ = started_sender.send(());
            let _ = done_sender.send(pruner_ref.prune_commits_through(P, query_ref));
        });
        started
            .recv()
            .map_err(|_| Failure::new("pruning thread did not start"))?;
        for _ in 0..HOLDER_ROUND_TRIPS {
            tx.max_commit_seq()?;
            match done.try_recv() {
                Err(TryRecvError::Empty) => {}
                other => {
                    return Err(Failure::new(format!(
                        "prune completed while the push lock was held: {other:?}"
                    )))
                }
            }
        }
        tx.commit()?;
        let pruned = done
            .recv()
            .map_err(|_| Failure::new("pruning thread ended without a result"))??;
        // A prune that ran before the holder committed could not see commit 6.
        check_eq!(
            pruned,
            result(0, 6, 6),
            "prune after the holder committed (must see the holder's commit 6)"
        );
        Ok(())
    })
}

fn c335_prune_beyond_head(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.ensured(&fix1()?)?;
    registered_with_commits(storage.as_ref(), 3)?;
    check_eq!(
        prune(storage.as_ref(), 1)?,
        result(0, 1, 1),
        "prune through 1"
    );
    let head = storage.get_max_commit_seq(P)?;
    let refused = expect_code(
        storage.prune_commits_through(P, &prune_query(EPOCH, head + 1)),
        ErrorCode::InvalidPruneCursor,
        "prune through max_commit_seq + 1",
    )?;
    check_eq!(
        refused.details().get("reason").map(String::as_str),
        Some("beyond_head"),
        "details.reason"
    );
    check_eq!(
        storage.get_horizon_seq(P)?,
        1,
        "horizon after the refused prune"
    );
    check_eq!(
        storage.get_max_commit_seq(P)?,
        head,
        "head after the refused prune"
    );
    let retained = storage.read_commits(P, 0, 100)?;
    check_eq!(
        retained.iter().map(|c| c.commit_seq).collect::<Vec<_>>(),
        [2, 3],
        "log after the refused prune"
    );
    check_eq!(
        prune(storage.as_ref(), head)?,
        result(1, head, 2),
        "prune through the head itself"
    );
    Ok(())
}
