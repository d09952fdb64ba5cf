//! `engine.md` §4.6–§4.9: validators, checked rejections, the candidate
//! reader, constraint violations, reactions, CRDT merging and blob
//! references — E-042…E-056.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use sync_core::{
    ErrorCode, ReactionListQuery, ReactionStatus, RejectionDetails, RowValue, ScopeFilter,
    StoredReaction,
};
use sync_engine::{
    CandidateReader, CandidateScan, MergerRegistry, OpKind, PushResultStatus, Rejection,
    ValidationFailure,
};

use super::engine_doubles::{boxed, plan, CommitCheck, Planner, RowCheck, Union};
use super::engine_fixture::{decode, note_payload, task_payload, task_payload_blob, P};
use super::engine_round::{
    commit, del, env, expect_applied, expect_conflict, expect_rejected, push_req, run, scopes, up,
    Env,
};
use crate::check::{CheckDef, CheckResult, Failure};
use crate::context::Ctx;
use crate::registry::check;
use crate::{check, check_eq};

use super::engine_entry::GROUP;

/// The checks of this file.
pub(crate) const CHECKS: &[CheckDef] = &[
    check(
        GROUP,
        "E-042",
        "a row validator rejection is persisted with its details and replayed",
        e042_row_rejection,
    ),
    check(
        GROUP,
        "E-043",
        "a failing row validator is constraint_violation",
        e043_row_validator_failed,
    ),
    check(
        GROUP,
        "E-044",
        "Rejection::new refuses reserved codes and oversized details",
        e044_checked_rejection,
    ),
    check(
        GROUP,
        "E-045",
        "the row validator sees stripped scopes, merged crdt and the stored row",
        e045_row_validator_inputs,
    ),
    check(
        GROUP,
        "E-046",
        "the commit validator reads staged state; its index is checked",
        e046_commit_validator,
    ),
    check(
        GROUP,
        "E-047",
        "a reader error swallowed into Failed is constraint_violation",
        e047_reader_error_failed,
    ),
    check(
        GROUP,
        "E-048",
        "a poisoning reader error (busy, connection_lost, backend) fails the round even if the hook swallows it",
        e048_reader_busy,
    ),
    check(
        GROUP,
        "E-049",
        "a unique violation at op 1 is a persisted constraint_violation; a busy row write fails the round",
        e049_unique_violation,
    ),
    check(
        GROUP,
        "E-050",
        "planned reactions are enqueued with the commit, once",
        e050_reactions_enqueued,
    ),
    check(
        GROUP,
        "E-051",
        "an invalid reaction plan fails the round without persisting",
        e051_invalid_plan,
    ),
    check(
        GROUP,
        "E-052",
        "concurrent crdt pushes converge in either order",
        e052_crdt_converges,
    ),
    check(
        GROUP,
        "E-053",
        "a missing or failing merger is crdt_merge_failed",
        e053_merger_missing_or_failing,
    ),
    check(
        GROUP,
        "E-054",
        "a stale update of a crdt row conflicts with the merged state",
        e054_crdt_conflict,
    ),
    check(
        GROUP,
        "E-055",
        "blob existence and the reference index follow the attachment",
        e055_blob_refs,
    ),
    check(
        GROUP,
        "E-056",
        "without a blob store a non-NULL attachment is blob.not_found",
        e056_no_blob_store,
    ),
    check(
        GROUP,
        "E-083",
        "a violation reported after its write (by a later write or a validator's read) rejects the operation it names",
        e083_late_violation,
    ),
];

/// Every reaction of `P`.
pub(crate) fn reactions(env: &Env) -> CheckResult<Vec<StoredReaction>> {
    Ok(env.storage.list_reactions(
        P,
        &ReactionListQuery {
            statuses: Vec::new(),
            kinds: Vec::new(),
            limit: 1000,
        },
    )?)
}

fn rejection(
    code: &str,
    details: Option<RejectionDetails>,
    op_index: Option<u32>,
) -> CheckResult<Rejection> {
    Rejection::new(code, "rejected by the host", details, op_index)
        .map_err(|e| Failure::new(format!("Rejection::new({code}) refused: {e:?}")))
}

/// Scans `tasks` through the reader and notes the error code it returned, if any.
fn scan_noting(read: &mut dyn CandidateReader, filter: ScopeFilter, seen: &Mutex<Option<String>>) {
    let scan = read.scan_rows(&CandidateScan {
        table: "tasks".to_owned(),
        scope_filter: filter,
        after_row_id: None,
        limit: None,
    });
    if let (Err(e), Ok(mut seen)) = (&scan, seen.lock()) {
        *seen = Some(e.code().as_str().to_owned());
    }
}

fn title_details() -> RejectionDetails {
    RejectionDetails {
        field_paths: Some(vec!["title".to_owned()]),
        ..RejectionDetails::default()
    }
}

fn e042_row_rejection(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    let too_long = rejection("task.too_long", Some(title_details()), None)?;
    let validator = RowCheck::new(move |_| Err(ValidationFailure::Reject(too_long.clone())));
    let engine = env.engine_with(|c| {
        c.row_validators
            .insert("tasks".to_owned(), validator.clone());
    })?;
    let pushed = commit("c1", vec![up("tasks", "t1", None, env.task("t1", "p1")?)]);
    let round = run(&engine, "alice", push_req("dev-a", vec![pushed.clone()]));
    let (retryable, details) = expect_rejected(round.result(0)?, 0, "task.too_long")?;
    check!(!retryable, "host rejection marked retryable");
    check_eq!(details, Some(title_details()), "details");
    let stored = env
        .storage
        .get_push_result(P, "dev-a", "c1")?
        .ok_or_else(|| Failure::new("rejection not stored"))?;
    check_eq!(stored.results, round.result(0)?.results, "stored records");
    let replay = run(&engine, "alice", push_req("dev-a", vec![pushed]));
    check_eq!(
        replay.result(0)?.results,
        round.result(0)?.results,
        "replayed records"
    );
    check_eq!(validator.seen().len(), 1, "validator calls");
    Ok(())
}

fn e043_row_validator_failed(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    let validator = RowCheck::new(|_| Err(ValidationFailure::Failed(boxed("lookup.timeout"))));
    let engine = env.engine_with(|c| {
        c.row_validators
            .insert("tasks".to_owned(), validator.clone());
    })?;
    let req = env.insert_req("dev-a", "c1", "t1", "p1")?;
    expect_rejected(
        run(&engine, "alice", req).result(0)?,
        0,
        "sync.constraint_violation",
    )?;
    check!(
        env.storage.get_row(P, "tasks", "t1")?.is_none(),
        "t1 stored"
    );
    Ok(())
}

fn e044_checked_rejection(ctx: &mut Ctx<'_>) -> CheckResult {
    check!(
        Rejection::new("sync.x", "m", None, None).is_err(),
        "reserved code accepted"
    );
    let many = RejectionDetails {
        field_paths: Some((0..33).map(|i| format!("f{i}")).collect()),
        ..RejectionDetails::default()
    };
    check!(
        Rejection::new("task.bad", "m", Some(many), None).is_err(),
        "33 field paths accepted"
    );
    let env = env(ctx)?;
    let validator = RowCheck::new(|_| match Rejection::new("sync.x", "m", None, None) {
        Ok(r) => Err(ValidationFailure::Reject(r)),
        Err(e) => Err(ValidationFailure::Failed(Box::new(e))),
    });
    let engine = env.engine_with(|c| {
        c.row_validators
            .insert("tasks".to_owned(), validator.clone());
    })?;
    let req = env.insert_req("dev-a", "c1", "t1", "p1")?;
    expect_rejected(
        run(&engine, "alice", req).result(0)?,
        0,
        "sync.constraint_violation",
    )?;
    Ok(())
}

fn e045_row_validator_inputs(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    let validator = RowCheck::accept();
    let engine = env.engine_with(|c| {
        c.row_validators
            .insert("notes".to_owned(), validator.clone());
    })?;
    let insert = note_payload(&env.schema, "n1", "p1", Some("a"), &[1])?;
    let update = note_payload(&env.schema, "n1", "p2", Some("b"), &[2])?;
    let req = push_req(
        "dev-a",
        vec![
            commit("c1", vec![up("notes", "n1", None, insert)]),
            commit("c2", vec![up("notes", "n1", Some(1), update)]),
            commit("c3", vec![del("notes", "n1")]),
            commit("c4", vec![del("notes", "n9")]),
        ],
    );
    let round = run(&engine, "alice", req);
    for i in 0..4 {
        expect_applied(round.result(i)?, PushResultStatus::Applied, 1)?;
    }
    let seen = validator.seen();
    check_eq!(
        seen.len(),
        3,
        "validator calls (the absent-row delete is not validated)"
    );
    let value = |row: &Option<sync_engine::RowValues>, col: &str| {
        row.as_ref().and_then(|r| r.get(col).cloned())
    };
    let upd = &seen[1];
    check_eq!(upd.op, OpKind::Upsert, "update op");
    check_eq!(
        value(&upd.row, "project_id"),
        Some(RowValue::String("p1".to_owned())),
        "update row project_id (stripped)"
    );
    check_eq!(
        value(&upd.row, "doc"),
        Some(RowValue::Crdt(vec![1, 2])),
        "update row doc (merged)"
    );
    check_eq!(
        value(&upd.row, "title"),
        Some(RowValue::String("b".to_owned())),
        "update row title"
    );
    check_eq!(
        value(&upd.stored, "doc"),
        Some(RowValue::Crdt(vec![1])),
        "update stored doc"
    );
    check_eq!(
        value(&upd.stored, "title"),
        Some(RowValue::String("a".to_owned())),
        "update stored title"
    );
    let gone = &seen[2];
    check_eq!(gone.op, OpKind::Delete, "delete op");
    check!(gone.row.is_none(), "delete row is not None: {gone:?}");
    check_eq!(
        value(&gone.stored, "doc"),
        Some(RowValue::Crdt(vec![1, 2])),
        "delete stored doc"
    );
    Ok(())
}

fn e046_commit_validator(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let index = Arc::new(Mutex::new(1u32));
    let (log, at) = (seen.clone(), index.clone());
    let validator = CommitCheck::new(move |input, read| {
        let a = read
            .get_row("tasks", "a")
            .map_err(|e| ValidationFailure::Failed(Box::new(e)))?;
        let rows = read
            .scan_rows(&CandidateScan {
                table: "tasks".to_owned(),
                scope_filter: scopes(&[("project_id", &["p1"])]),
                after_row_id: None,
                limit: None,
            })
            .map_err(|e| ValidationFailure::Failed(Box::new(e)))?;
        if let Ok(mut log) = log.lock() {
            log.push(format!(
                "get a: {:?}; scan: {:?}; ops {}",
                a.map(|r| r.server_version),
                rows.iter().map(|r| r.row_id.clone()).collect::<Vec<_>>(),
                input.operations.len()
            ));
        }
        let i = at.lock().map(|i| *i).unwrap_or(0);
        Err(ValidationFailure::Reject(
            Rejection::new("commit.bad", "no", None, Some(i))
                .map_err(|e| ValidationFailure::Failed(Box::new(e)))?,
        ))
    });
    let engine = env.engine_with(|c| c.commit_validator = Some(validator.clone()))?;
    let ops = || -> CheckResult<_> {
        Ok(vec![
            up("tasks", "a", None, env.task("a", "p1")?),
            up("tasks", "b", None, env.task("b", "p1")?),
        ])
    };
    let first = run(
        &engine,
        "alice",
        push_req("dev-a", vec![commit("c1", ops()?)]),
    );
    expect_rejected(first.result(0)?, 1, "commit.bad")?;
    check_eq!(
        seen.lock().map(|s| s.clone()).unwrap_or_default(),
        vec!["get a: Some(1); scan: [\"a\", \"b\"]; ops 2".to_owned()],
        "what the validator read"
    );
    check!(
        env.storage.get_row(P, "tasks", "a")?.is_none(),
        "a stored after the rejection"
    );
    // An index past the last operation (the first such is the operation
    // count, 2) names none.
    for (past, ccid) in [(2, "c2"), (5, "c3")] {
        if let Ok(mut i) = index.lock() {
            *i = past;
        }
        let round = run(
            &engine,
            "alice",
            push_req("dev-a", vec![commit(ccid, ops()?)]),
        );
        expect_rejected(round.result(0)?, 0, "sync.constraint_violation")
            .map_err(|f| Failure::new(format!("a rejection naming operation {past}: {f}")))?;
    }
    Ok(())
}

fn e047_reader_error_failed(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    let seen = Arc::new(Mutex::new(None::<String>));
    let log = seen.clone();
    let validator = CommitCheck::new(move |_, read| {
        scan_noting(read, scopes(&[]), &log);
        Err(ValidationFailure::Failed(boxed("scan failed")))
    });
    let engine = env.engine_with(|c| c.commit_validator = Some(validator.clone()))?;
    let req = env.insert_req("dev-a", "c1", "t1", "p1")?;
    expect_rejected(
        run(&engine, "alice", req).result(0)?,
        0,
        "sync.constraint_violation",
    )?;
    check_eq!(
        seen.lock()
            .map(|s| s.clone())
            .unwrap_or_default()
            .as_deref(),
        Some("sync.storage.scan_requires_scope"),
        "reader error seen by the validator"
    );
    Ok(())
}

fn e048_reader_busy(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    // Every error after which the transaction is unusable poisons it,
    // whether retryable (`busy`, `connection_lost`) or not (`backend`).
    for (n, code) in [
        ErrorCode::Busy,
        ErrorCode::ConnectionLost,
        ErrorCode::Backend,
    ]
    .into_iter()
    .enumerate()
    {
        let storage: Arc<dyn sync_core::ServerStorage> = Arc::new(
            super::engine_busy::BusyScans::new(env.storage.clone()).failing_scans_with(code),
        );
        let swallowed = Arc::new(Mutex::new(None::<String>));
        let log = swallowed.clone();
        let validator = CommitCheck::new(move |_, read| {
            scan_noting(read, scopes(&[("project_id", &["p1"])]), &log);
            Ok(())
        });
        let mut config = env.config();
        config.commit_validator = Some(validator.clone());
        let engine = super::engine_round::build(storage, env.schema.clone(), config)?;
        let (ccid, row) = (format!("c{n}"), format!("t{n}"));
        let req = env.insert_req("dev-a", &ccid, &row, "p1")?;
        let round = run(&engine, "alice", req);
        if code.retryable() {
            round.expect_error(code.as_str())?;
        } else {
            round.expect_internal()?;
        }
        check_eq!(
            swallowed
                .lock()
                .map(|s| s.clone())
                .unwrap_or_default()
                .as_deref(),
            Some(code.as_str()),
            "reader error seen by the validator"
        );
        check!(
            env.storage.get_push_result(P, "dev-a", &ccid)?.is_none(),
            "a result was stored after a swallowed {}",
            code.as_str()
        );
        check!(
            env.storage.get_row(P, "tasks", &row)?.is_none(),
            "{row} stored after a swallowed {}",
            code.as_str()
        );
    }
    Ok(())
}

fn e049_unique_violation(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    let engine = env.engine()?;
    let seed = commit("c0", vec![up("tasks", "u1", None, env.task("u1", "p1")?)]);
    expect_applied(
        run(&engine, "alice", push_req("dev-a", vec![seed])).result(0)?,
        PushResultStatus::Applied,
        1,
    )?;
    let pushed = commit(
        "c1",
        vec![
            up("tasks", "a", None, env.task("a", "p1")?),
            up(
                "tasks",
                "u2",
                None,
                task_payload(&env.schema, "u2", "p1", "title u1")?,
            ),
        ],
    );
    let round = run(&engine, "alice", push_req("dev-a", vec![pushed.clone()]));
    expect_rejected(round.result(0)?, 1, "sync.constraint_violation")?;
    let stored = env
        .storage
        .get_push_result(P, "dev-a", "c1")?
        .ok_or_else(|| Failure::new("rejection not stored"))?;
    check_eq!(stored.results, round.result(0)?.results, "stored records");
    check!(env.storage.get_row(P, "tasks", "a")?.is_none(), "a stored");
    let replay = run(&engine, "alice", push_req("dev-a", vec![pushed]));
    check_eq!(replay.result(0)?, round.result(0)?, "replayed result");
    busy_row_write_fails_the_round(&env)
}

/// Only a violation is answered as one: a row write that fails with
/// `busy` fails the round, retryable, and stores nothing.
fn busy_row_write_fails_the_round(env: &Env) -> CheckResult {
    let before = env.max_seq()?;
    let storage: Arc<dyn sync_core::ServerStorage> =
        Arc::new(super::engine_busy::BusyScans::new(env.storage.clone()).failing_row_writes());
    let engine = super::engine_round::build(storage, env.schema.clone(), env.config())?;
    let req = env.insert_req("dev-a", "c2", "b1", "p1")?;
    let round = run(&engine, "alice", req);
    let error = round
        .expect_error("sync.storage.busy")
        .map_err(|f| Failure::new(format!("a busy row write: {f}")))?;
    check!(
        error.retryable,
        "a busy row write is not retryable: {error:?}"
    );
    check!(
        env.storage.get_push_result(P, "dev-a", "c2")?.is_none(),
        "a result was stored after a busy row write"
    );
    check!(
        env.storage.get_row(P, "tasks", "b1")?.is_none(),
        "b1 stored after a busy row write"
    );
    check_eq!(
        env.max_seq()?,
        before,
        "max_commit_seq after a busy row write"
    );
    Ok(())
}

/// A dialect may send a row write with later statements
/// (`PushPreludeRequest::deferred_violations`): its violation then comes
/// from the next write or from a validator's read, naming the operation
/// of the write (`docs/decisions.md`, *The push prelude*).
fn e083_late_violation(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let log = seen.clone();
    let validator = CommitCheck::new(move |input, read| {
        // Reads the row the commit's first operation wrote (the seed
        // commit c0 aside).
        let first = input
            .operations
            .first()
            .filter(|_| input.client_commit_id != "c0");
        if let Some(first) = first {
            let outcome = match read.get_row(&first.table, &first.row_id) {
                Ok(row) => format!("read {}", row.is_some()),
                Err(e) => e.code().as_str().to_owned(),
            };
            if let Ok(mut log) = log.lock() {
                log.push(outcome);
            }
        }
        Ok(())
    });
    let engine = env.engine_with(|c| c.commit_validator = Some(validator.clone()))?;
    let seed = commit("c0", vec![up("tasks", "u1", None, env.task("u1", "p1")?)]);
    expect_applied(
        run(&engine, "alice", push_req("dev-a", vec![seed])).result(0)?,
        PushResultStatus::Applied,
        1,
    )?;
    let colliding = || task_payload(&env.schema, "u2", "p1", "title u1");
    // The first operation collides and a second one writes after it.
    let pushed = commit(
        "c1",
        vec![
            up("tasks", "u2", None, colliding()?),
            up("tasks", "a", None, env.task("a", "p1")?),
        ],
    );
    let round = run(&engine, "alice", push_req("dev-a", vec![pushed]));
    expect_rejected(round.result(0)?, 0, "sync.constraint_violation")?;
    // The only operation collides; the validator reads after it.
    let pushed = commit("c2", vec![up("tasks", "u2", None, colliding()?)]);
    let round = run(&engine, "alice", push_req("dev-a", vec![pushed]));
    expect_rejected(round.result(0)?, 0, "sync.constraint_violation")?;
    // The second operation collides; the validator reads after it: the
    // rejection names the second, whichever call reported it.
    let pushed = commit(
        "c3",
        vec![
            up("tasks", "a", None, env.task("a", "p1")?),
            up("tasks", "u2", None, colliding()?),
        ],
    );
    let round = run(&engine, "alice", push_req("dev-a", vec![pushed]));
    expect_rejected(round.result(0)?, 1, "sync.constraint_violation")?;
    for id in ["u2", "a"] {
        check!(
            env.storage.get_row(P, "tasks", id)?.is_none(),
            "row {id} of a rejected commit stored"
        );
    }
    check_eq!(env.storage.get_max_commit_seq(P)?, 1, "the counter");
    // A validator that ran saw the violation, never the colliding row.
    let seen = seen.lock().map(|s| s.clone()).unwrap_or_default();
    check!(
        seen.iter()
            .all(|s| s == "sync.storage.constraint_violation"),
        "what the validator's reads returned: {seen:?}"
    );
    Ok(())
}

fn e050_reactions_enqueued(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    super::engine_fixture::seed_task(env.storage.as_ref(), &env.schema, "t9", "p1", 3)?;
    let planner = Planner::new(|_| Ok(vec![plan("k1", "notify"), plan("k2", "mail.send")]));
    let engine = env.engine_with(|c| c.reaction_planner = Some(planner.clone()))?;
    let pushed = commit("c1", vec![up("tasks", "t1", None, env.task("t1", "p1")?)]);
    let round = run(&engine, "alice", push_req("dev-a", vec![pushed.clone()]));
    let seq = expect_applied(round.result(0)?, PushResultStatus::Applied, 1)?;
    let mut got = reactions(&env)?;
    got.sort_by(|a, b| a.idempotency_key.cmp(&b.idempotency_key));
    let keys: Vec<&str> = got.iter().map(|r| r.idempotency_key.as_str()).collect();
    check_eq!(
        keys,
        [r#"["P","dev-a","c1","k1"]"#, r#"["P","dev-a","c1","k2"]"#],
        "reaction keys"
    );
    for r in &got {
        check_eq!(
            (r.status, r.source_commit_seq),
            (ReactionStatus::Pending, seq),
            "reaction status and source seq"
        );
    }
    let more = push_req(
        "dev-a",
        vec![
            pushed,
            commit(
                "c2",
                vec![up("tasks", "t9", Some(1), env.task("t9", "p1")?)],
            ),
        ],
    );
    let round = run(&engine, "alice", more);
    expect_applied(round.result(0)?, PushResultStatus::Cached, 1)?;
    expect_conflict(round.result(1)?, 0)?;
    check_eq!(
        reactions(&env)?.len(),
        2,
        "reactions after a replay and a rejection"
    );
    Ok(())
}

fn e051_invalid_plan(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    let plans: [(&str, Vec<sync_engine::ReactionPlan>); 3] = [
        (
            "101 records",
            (0..101).map(|i| plan(&format!("k{i}"), "notify")).collect(),
        ),
        (
            "duplicate keys",
            vec![plan("k", "notify"), plan("k", "notify")],
        ),
        ("type 1x", vec![plan("k", "1x")]),
    ];
    for (i, (what, plans)) in plans.into_iter().enumerate() {
        let planner = Planner::new(move |_| Ok(plans.clone()));
        let engine = env.engine_with(|c| c.reaction_planner = Some(planner.clone()))?;
        let ccid = format!("c{i}");
        let req = push_req(
            "dev-a",
            vec![commit(
                &ccid,
                vec![up("tasks", "t1", None, env.task("t1", "p1")?)],
            )],
        );
        run(&engine, "alice", req)
            .expect_internal()
            .map_err(|f| Failure::new(format!("{what}: {f}")))?;
        check!(
            env.storage.get_push_result(P, "dev-a", &ccid)?.is_none(),
            "{what}: result stored"
        );
        check!(
            env.storage.get_row(P, "tasks", "t1")?.is_none(),
            "{what}: row stored"
        );
    }
    check_eq!(env.max_seq()?, 0, "max_commit_seq");
    Ok(())
}

fn doc_of(env: &Env, id: &str) -> CheckResult<(i64, RowValue)> {
    let row = env
        .storage
        .get_row(P, "notes", id)?
        .ok_or_else(|| Failure::new(format!("{id} missing")))?;
    let values = decode(&env.schema, "notes", &row.payload)?;
    Ok((row.server_version, values[3].clone()))
}

fn e052_crdt_converges(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    let engine = env.engine()?;
    for (id, first, second) in [("n1", [1u8, 3], [2u8, 3]), ("n2", [2, 3], [1, 3])] {
        for (client, bytes) in [("dev-a", first), ("dev-b", second)] {
            let payload = note_payload(&env.schema, id, "p1", None, &bytes)?;
            let req = push_req(
                client,
                vec![commit(
                    &format!("{id}-{client}"),
                    vec![up("notes", id, None, payload)],
                )],
            );
            expect_applied(
                run(&engine, "alice", req).result(0)?,
                PushResultStatus::Applied,
                1,
            )?;
        }
        check_eq!(
            doc_of(&env, id)?,
            (2, RowValue::Crdt(vec![1, 2, 3])),
            "{id} (version, doc)"
        );
    }
    Ok(())
}

fn e053_merger_missing_or_failing(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    let seed = env.engine()?;
    let insert = commit(
        "c0",
        vec![up(
            "notes",
            "n1",
            None,
            note_payload(&env.schema, "n1", "p1", None, &[1])?,
        )],
    );
    expect_applied(
        run(&seed, "alice", push_req("dev-a", vec![insert])).result(0)?,
        PushResultStatus::Applied,
        1,
    )?;
    let before = env.storage.get_row(P, "notes", "n1")?;
    let failing = Arc::new(Union {
        failing: true,
        ..Union::default()
    });
    let missing = env.engine_with(|c| c.mergers = MergerRegistry::new())?;
    let broken = env.engine_with(|c| c.mergers.register("union", failing.clone()))?;
    for (ccid, engine) in [("c1", &missing), ("c2", &broken)] {
        let payload = note_payload(&env.schema, "n1", "p1", None, &[2])?;
        let req = push_req(
            "dev-a",
            vec![commit(ccid, vec![up("notes", "n1", None, payload)])],
        );
        expect_rejected(
            run(engine, "alice", req).result(0)?,
            0,
            "sync.crdt_merge_failed",
        )?;
        check_eq!(
            env.storage.get_row(P, "notes", "n1")?,
            before,
            "n1 after {ccid}"
        );
    }
    check_eq!(
        failing.calls.load(Ordering::SeqCst),
        1,
        "failing merger calls"
    );
    Ok(())
}

fn e054_crdt_conflict(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    let engine = env.engine()?;
    let note = |doc: &[u8]| note_payload(&env.schema, "n1", "p1", None, doc);
    let req = push_req(
        "dev-a",
        vec![
            commit("c1", vec![up("notes", "n1", None, note(&[1])?)]),
            commit("c2", vec![up("notes", "n1", None, note(&[2])?)]),
        ],
    );
    let round = run(&engine, "alice", req);
    expect_applied(round.result(1)?, PushResultStatus::Applied, 1)?;
    let merges = env.union.calls.load(Ordering::SeqCst);
    let stale = push_req(
        "dev-a",
        vec![commit("c3", vec![up("notes", "n1", Some(1), note(&[9])?)])],
    );
    let (version, row) = expect_conflict(run(&engine, "alice", stale).result(0)?, 0)?;
    check_eq!(version, 2, "serverVersion");
    check_eq!(
        decode(&env.schema, "notes", &row)?[3],
        RowValue::Crdt(vec![1, 2]),
        "serverRow doc"
    );
    check_eq!(
        doc_of(&env, "n1")?,
        (2, RowValue::Crdt(vec![1, 2])),
        "stored (version, doc)"
    );
    check_eq!(
        env.union.calls.load(Ordering::SeqCst),
        merges,
        "merges by the conflicting push"
    );
    Ok(())
}

fn e055_blob_refs(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    let engine = env.engine()?;
    let with = |blob: Option<&str>| task_payload_blob(&env.schema, "t1", "p1", blob);
    let missing = run(
        &engine,
        "alice",
        push_req(
            "dev-a",
            vec![commit(
                "c1",
                vec![up("tasks", "t1", None, with(Some("b9"))?)],
            )],
        ),
    );
    expect_rejected(missing.result(0)?, 0, "blob.not_found")?;
    check!(
        env.storage.get_row(P, "tasks", "t1")?.is_none(),
        "t1 stored with a missing blob"
    );
    let present = run(
        &engine,
        "alice",
        push_req(
            "dev-a",
            vec![commit(
                "c2",
                vec![up("tasks", "t1", None, with(Some("b1"))?)],
            )],
        ),
    );
    expect_applied(present.result(0)?, PushResultStatus::Applied, 1)?;
    let refs: Vec<(String, String)> = env
        .storage
        .list_rows_referencing_blob(P, "b1")?
        .into_iter()
        .map(|r| (r.table, r.row_id))
        .collect();
    check_eq!(
        refs,
        [("tasks".to_owned(), "t1".to_owned())],
        "rows referencing b1"
    );
    let cleared = run(
        &engine,
        "alice",
        push_req(
            "dev-a",
            vec![commit("c3", vec![up("tasks", "t1", None, with(None)?)])],
        ),
    );
    expect_applied(cleared.result(0)?, PushResultStatus::Applied, 1)?;
    check_eq!(
        env.storage.list_rows_referencing_blob(P, "b1")?.len(),
        0,
        "rows referencing b1 after NULL"
    );
    Ok(())
}

fn e056_no_blob_store(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    let engine = env.engine_with(|c| c.blobs = None)?;
    let payload = task_payload_blob(&env.schema, "t1", "p1", Some("b1"))?;
    let req = push_req(
        "dev-a",
        vec![commit("c1", vec![up("tasks", "t1", None, payload)])],
    );
    expect_rejected(run(&engine, "alice", req).result(0)?, 0, "blob.not_found")?;
    check!(
        env.storage.get_row(P, "tasks", "t1")?.is_none(),
        "t1 stored"
    );
    Ok(())
}
