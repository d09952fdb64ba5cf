//! `engine.md` §4.12 idempotency and replay, and the push races of §4.1 /
//! §4.12 with real threads: E-036…E-041.

use std::sync::{Arc, Barrier, Mutex};

use sync_core::{CommitWindowQuery, ErrorCode, PushOperationResult, PushStatus, ServerStorage};
use sync_engine::{PushResult, PushResultStatus};

use super::engine_busy::{BusyPushResults, BusyScans};
use super::engine_doubles::{plan, CommitCheck, HookLog, Planner, RowCheck, TickingClock};
use super::engine_fixture::{note_payload, seed_task, P};
use super::engine_round::{
    build, commit, concurrently, env, expect_applied, expect_conflict, push_req, run, scopes, up,
    Env,
};
use crate::check::{CheckDef, CheckResult, Failure};
use crate::context::{Ctx, NOW};
use crate::harness::RawFilter;
use crate::registry::check;
use crate::{check, check_eq};

use super::engine_entry::GROUP;

/// The checks of this file.
pub(crate) const CHECKS: &[CheckDef] = &[
    check(
        GROUP,
        "E-036",
        "a replayed applied commit is cached with no hook, merge or plan",
        e036_replay_applied,
    ),
    check(
        GROUP,
        "E-037",
        "a replayed conflict keeps the original serverVersion and serverRow",
        e037_replay_conflict,
    ),
    check(
        GROUP,
        "E-038",
        "an unreadable stored result replays as a retryable cache miss; another read error fails the round; a round's commits read their results once, at entry",
        e038_cache_miss,
    ),
    check(
        GROUP,
        "E-039",
        "two concurrent deliveries of one commit run one pipeline",
        e039_concurrent_delivery,
    ),
    check(
        GROUP,
        "E-040",
        "two concurrent versioned updates: one applied, one conflict",
        e040_concurrent_updates,
    ),
    check(
        GROUP,
        "E-041",
        "8 threads x 25 commits: dense seqs, stored results, ordered timestamps",
        e041_parallel_pushes,
    ),
];

fn e036_replay_applied(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    let rows = RowCheck::accept();
    let commits = CommitCheck::new(|_, _| Ok(()));
    let planner = Planner::new(|_| Ok(vec![plan("k1", "notify")]));
    let engine = env.engine_with(|c| {
        c.row_validators.insert("notes".to_owned(), rows.clone());
        c.commit_validator = Some(commits.clone());
        c.reaction_planner = Some(planner.clone());
    })?;
    let pushed = commit(
        "c1",
        vec![up(
            "notes",
            "n1",
            None,
            note_payload(&env.schema, "n1", "p1", None, &[1])?,
        )],
    );
    let first = run(&engine, "alice", push_req("dev-a", vec![pushed.clone()]));
    let seq = expect_applied(first.result(0)?, PushResultStatus::Applied, 1)?;
    let calls = (
        rows.seen().len(),
        commits.calls(),
        planner.calls(),
        env.union.calls.load(std::sync::atomic::Ordering::SeqCst),
    );
    check_eq!(calls, (1, 1, 1, 1), "hook calls of the first delivery");
    let replay = run(&engine, "alice", push_req("dev-a", vec![pushed]));
    let cached = expect_applied(replay.result(0)?, PushResultStatus::Cached, 1)?;
    check_eq!(cached, seq, "cached commitSeq");
    let after = (
        rows.seen().len(),
        commits.calls(),
        planner.calls(),
        env.union.calls.load(std::sync::atomic::Ordering::SeqCst),
    );
    check_eq!(after, calls, "hook calls after the replay");
    check_eq!(env.max_seq()?, seq, "max_commit_seq");
    Ok(())
}

fn e037_replay_conflict(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    seed_task(env.storage.as_ref(), &env.schema, "t1", "p1", 3)?;
    let v3 = env
        .storage
        .get_row(P, "tasks", "t1")?
        .ok_or_else(|| Failure::new("seed"))?;
    let engine = env.engine()?;
    let stale = commit(
        "c1",
        vec![up("tasks", "t1", Some(2), env.task("t1", "p1")?)],
    );
    let first = run(&engine, "alice", push_req("dev-a", vec![stale.clone()]));
    let original = expect_conflict(first.result(0)?, 0)?;
    check_eq!(original, (3, v3.payload.clone()), "original conflict");
    let mut changed = super::engine_fixture::task_vals("t1", "p1", "changed");
    changed[3] = sync_core::RowValue::Boolean(true);
    let update = commit(
        "c2",
        vec![up(
            "tasks",
            "t1",
            None,
            super::engine_fixture::task_payload_values(&env.schema, &changed)?,
        )],
    );
    expect_applied(
        run(&engine, "alice", push_req("dev-a", vec![update])).result(0)?,
        PushResultStatus::Applied,
        1,
    )?;
    let replay = run(&engine, "alice", push_req("dev-a", vec![stale]));
    check_eq!(
        expect_conflict(replay.result(0)?, 0)?,
        original,
        "replayed conflict"
    );
    Ok(())
}

fn e038_cache_miss(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    let engine = env.engine()?;
    let pushed = commit("c1", vec![up("tasks", "t1", None, env.task("t1", "p1")?)]);
    expect_applied(
        run(&engine, "alice", push_req("dev-a", vec![pushed.clone()])).result(0)?,
        PushResultStatus::Applied,
        1,
    )?;
    let raw = ctx.raw()?;
    raw.set_push_result_text(P, "dev-a", "c1", r#"{"status":"maybe"}"#)?;
    let key = RawFilter::eq("partition", P)
        .and("client_id", "dev-a")
        .and("client_commit_id", "c1");
    let before = raw.read_text("sync_push_results", "result", key.clone())?;
    let replay = run(&engine, "alice", push_req("dev-a", vec![pushed]));
    expect_cache_miss(replay.result(0)?, "the replay of an unreadable result")?;
    check_eq!(
        raw.read_text("sync_push_results", "result", key)?,
        before,
        "stored text"
    );
    check_eq!(env.max_seq()?, 1, "max_commit_seq");
    unreadable_under_the_lock(ctx, &env)?;
    other_read_errors_fail_the_round(&env)?;
    the_canonical_rejection_read(&env)?;
    each_result_is_read_once_at_entry(&env)
}

/// P1 of a round's own commits is the read the round entry made
/// (`enter_round`, whose default body reads each through the storage's
/// `get_push_result`): the pipeline does not read it a second time.
fn each_result_is_read_once_at_entry(env: &Env) -> CheckResult {
    let busy = Arc::new(BusyScans::new(env.storage.clone()));
    let storage: Arc<dyn ServerStorage> = busy.clone();
    let engine = build(storage, env.schema.clone(), env.config())?;
    let commits = ["once-1", "once-2"]
        .into_iter()
        .map(|id| Ok(commit(id, vec![up("tasks", id, None, env.task(id, "p1")?)])))
        .collect::<CheckResult<Vec<_>>>()?;
    let round = run(&engine, "alice", push_req("dev-a", commits));
    expect_applied(round.result(0)?, PushResultStatus::Applied, 1)?;
    expect_applied(round.result(1)?, PushResultStatus::Applied, 1)?;
    check_eq!(
        busy.push_result_reads(),
        2,
        "the storage's push-result reads for a round of two commits"
    );
    Ok(())
}

/// A result stored unreadable between P1 (which found none) and P6 is read
/// under the lock as the same cache miss.
fn unreadable_under_the_lock(ctx: &mut Ctx<'_>, env: &Env) -> CheckResult {
    let raw = Mutex::new(ctx.raw()?);
    let log = HookLog::default();
    let hook_log = log.clone();
    let engine = env.engine_with(|c| {
        c.test_hooks.after_p1 = Some(Arc::new(move |_: &str| {
            let written = raw.lock().map_err(|e| e.to_string()).and_then(|raw| {
                raw.set_push_result_text(P, "dev-a", "c2", r#"{"status":"maybe"}"#)
                    .map_err(|e| format!("{e:?}"))
            });
            if let Err(e) = written {
                hook_log.note(format!("storing the unreadable result failed: {e}"));
            }
        }));
    })?;
    let pushed = commit("c2", vec![up("tasks", "t2", None, env.task("t2", "p1")?)]);
    let round = run(&engine, "alice", push_req("dev-a", vec![pushed]));
    log.check_empty()?;
    round.ok()?;
    expect_cache_miss(round.result(0)?, "a result stored unreadable after P1")?;
    check!(
        env.storage.get_row(P, "tasks", "t2")?.is_none(),
        "t2 stored"
    );
    check_eq!(env.max_seq()?, 1, "max_commit_seq after the race");
    Ok(())
}

/// Only an unreadable result is a cache miss: a read that fails otherwise
/// (`busy` at round entry, P1, or under the lock, P6) fails the round.
fn other_read_errors_fail_the_round(env: &Env) -> CheckResult {
    for (at, id) in [
        (BusyPushResults::AtEntry, "t3"),
        (BusyPushResults::InTransaction, "t4"),
    ] {
        let storage: Arc<dyn ServerStorage> =
            Arc::new(BusyScans::new(env.storage.clone()).failing_push_results(at));
        let engine = build(storage, env.schema.clone(), env.config())?;
        let pushed = commit(id, vec![up("tasks", id, None, env.task(id, "p1")?)]);
        run(&engine, "alice", push_req("dev-a", vec![pushed]))
            .expect_error("sync.storage.busy")
            .map_err(|f| Failure::new(format!("a busy push-result read {at:?}: {f}")))?;
        check!(
            env.storage.get_row(P, "tasks", id)?.is_none(),
            "{id} stored after a busy push-result read {at:?}"
        );
    }
    check_eq!(env.max_seq()?, 1, "max_commit_seq after busy reads");
    Ok(())
}

/// After a rejection is stored (R2), the canonical result is read back
/// (R3): an unreadable one is answered as the cache miss, a `busy` read
/// fails the round; the stored rejection stays either way.
fn the_canonical_rejection_read(env: &Env) -> CheckResult {
    for (code, id) in [
        (ErrorCode::IdempotencyCacheMiss, "r1"),
        (ErrorCode::Busy, "r2"),
    ] {
        let storage: Arc<dyn ServerStorage> = Arc::new(
            BusyScans::new(env.storage.clone())
                .failing_push_results(BusyPushResults::AfterRejection(code)),
        );
        let engine = build(storage, env.schema.clone(), env.config())?;
        // An absent row at baseVersion 5: a stored row_missing rejection.
        let pushed = commit(id, vec![up("tasks", id, Some(5), env.task(id, "p1")?)]);
        let round = run(&engine, "alice", push_req("dev-a", vec![pushed]));
        let what = format!("a rejection whose read-back fails with {code}");
        if code == ErrorCode::Busy {
            round
                .expect_error("sync.storage.busy")
                .map_err(|f| Failure::new(format!("{what}: {f}")))?;
        } else {
            round.ok()?;
            expect_cache_miss(round.result(0)?, &what)?;
        }
        let stored = env
            .storage
            .get_push_result(P, "dev-a", id)?
            .ok_or_else(|| Failure::new(format!("{what}: no rejection stored")))?;
        check_eq!(stored.status, PushStatus::Rejected, "{what}: stored status");
    }
    Ok(())
}

fn expect_cache_miss(result: &PushResult, what: &str) -> CheckResult {
    check_eq!(
        (result.status, result.commit_seq),
        (PushResultStatus::Rejected, None),
        "status of {what}"
    );
    match result.results.as_slice() {
        [PushOperationResult::Error {
            op_index: 0,
            code,
            retryable: true,
            ..
        }] if code == "sync.idempotency_cache_miss" => Ok(()),
        other => Err(Failure::new(format!(
            "{what}: expected one retryable cache-miss record, got {other:?}"
        ))),
    }
}

fn e039_concurrent_delivery(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    let barrier = Arc::new(Barrier::new(2));
    let rows = RowCheck::accept();
    let hold = barrier.clone();
    let engine = env.engine_with(|c| {
        c.row_validators.insert("tasks".to_owned(), rows.clone());
        c.test_hooks.after_p1 = Some(Arc::new(move |_: &str| {
            hold.wait();
        }));
    })?;
    let pushed = commit("c1", vec![up("tasks", "t1", None, env.task("t1", "p1")?)]);
    let deliver = || -> CheckResult<PushResult> {
        run(&engine, "alice", push_req("dev-a", vec![pushed.clone()]))
            .result(0)
            .cloned()
    };
    let results = concurrently(vec![Box::new(deliver), Box::new(deliver)])?;
    let mut statuses = Vec::new();
    let mut seqs = Vec::new();
    for result in results {
        statuses.push(result.status.as_str());
        seqs.push(expect_applied(&result, result.status, 1)?);
    }
    statuses.sort_unstable();
    check_eq!(
        statuses,
        ["applied", "cached"],
        "statuses of the two deliveries"
    );
    check_eq!(seqs[0], seqs[1], "commitSeq of both deliveries");
    check_eq!(env.max_seq()?, 1, "max_commit_seq");
    check_eq!(rows.seen().len(), 1, "row validator calls");
    Ok(())
}

fn e040_concurrent_updates(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    seed_task(env.storage.as_ref(), &env.schema, "t1", "p1", 1)?;
    let barrier = Arc::new(Barrier::new(2));
    let hold = barrier.clone();
    let engine = env.engine_with(|c| {
        c.test_hooks.after_p1 = Some(Arc::new(move |_: &str| {
            hold.wait();
        }));
    })?;
    let payload = env.task("t1", "p1")?;
    let update = |client: &'static str| {
        let req = push_req(
            client,
            vec![commit(
                "c1",
                vec![up("tasks", "t1", Some(1), payload.clone())],
            )],
        );
        let engine = &engine;
        move || -> CheckResult<PushResult> { run(engine, "alice", req).result(0).cloned() }
    };
    let results = concurrently(vec![Box::new(update("dev-a")), Box::new(update("dev-b"))])?;
    let (applied, other): (Vec<&PushResult>, Vec<&PushResult>) = results
        .iter()
        .partition(|r| r.status == PushResultStatus::Applied);
    check!(
        applied.len() == 1 && other.len() == 1,
        "expected one applied and one rejected: {results:?}"
    );
    let (version, _) = expect_conflict(other[0], 0)?;
    check_eq!(version, 2, "conflict serverVersion");
    check_eq!(
        env.storage
            .get_row(P, "tasks", "t1")?
            .map(|r| r.server_version),
        Some(2),
        "row version"
    );
    Ok(())
}

fn e041_parallel_pushes(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    let clock = Arc::new(TickingClock::new(NOW));
    let engine = env.engine_with(|c| c.clock = clock.clone())?;
    let mut payloads = Vec::new();
    for t in 0..8 {
        let mut mine = Vec::new();
        for i in 0..25 {
            let id = format!("w{t}-{i:02}");
            mine.push((id.clone(), env.task(&id, "p1")?));
        }
        payloads.push(mine);
    }
    let engine = &engine;
    let jobs: Vec<Box<dyn FnOnce() -> CheckResult<Vec<i64>> + Send + '_>> = payloads
        .iter()
        .enumerate()
        .map(
            |(t, mine)| -> Box<dyn FnOnce() -> CheckResult<Vec<i64>> + Send + '_> {
                Box::new(move || {
                    let client = format!("w{t}");
                    let mut seqs = Vec::new();
                    for (id, payload) in mine {
                        let req = push_req(
                            &client,
                            vec![commit(id, vec![up("tasks", id, None, payload.clone())])],
                        );
                        let round = run(engine, "alice", req);
                        seqs.push(expect_applied(
                            round.result(0)?,
                            PushResultStatus::Applied,
                            1,
                        )?);
                    }
                    Ok(seqs)
                })
            },
        )
        .collect();
    let mut seqs: Vec<i64> = concurrently(jobs)?.into_iter().flatten().collect();
    seqs.sort_unstable();
    check_eq!(seqs, (1..=200).collect::<Vec<i64>>(), "commit seqs");
    for (t, mine) in payloads.iter().enumerate() {
        for (id, _) in mine {
            let stored = env.storage.get_push_result(P, &format!("w{t}"), id)?;
            check!(
                stored.is_some_and(|r| r.status == PushStatus::Applied),
                "result of w{t}/{id} not stored as applied"
            );
        }
    }
    let window = env.storage.read_commit_window(
        P,
        &CommitWindowQuery {
            table: "tasks".to_owned(),
            scope_filter: scopes(&[("project_id", &["p1"])]),
            after_seq: 0,
            through_seq: 200,
            limit_changes: 1000,
        },
    )?;
    check_eq!(window.len(), 200, "commits in the window");
    check!(
        window
            .windows(2)
            .all(|w| w[0].created_at_ms <= w[1].created_at_ms),
        "created_at_ms decreases along commit_seq: {:?}",
        window
            .iter()
            .map(|c| (c.commit_seq, c.created_at_ms))
            .collect::<Vec<_>>()
    );
    Ok(())
}
