//! `engine.md` §4.2–§4.5 push apply: the conflict matrix, versions,
//! deletes and tombstones, scope immutability, row identity — E-017…E-035.

use sync_core::{ChangeOp, CommitRecord, PushOperationResult, PushStatus, RowValue};
use sync_engine::{DeletePolicy, PushResultStatus, SyncRequest, MAX_SAFE_INTEGER};

use super::engine_fixture::{counter_payload, decode, seed_task, task_payload_blob, task_vals, P};
use super::engine_round::{
    commit, del, env, expect_applied, expect_conflict, expect_rejected, push_req, run, up, Env,
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
        "E-017",
        "an update at the stored baseVersion is applied at v+1; no version past 2^53 - 1 is written",
        e017_versioned_update,
    ),
    check(
        GROUP,
        "E-018",
        "a stale baseVersion is a persisted conflict with the stored row",
        e018_stale_conflict,
    ),
    check(
        GROUP,
        "E-019",
        "baseVersion 0 on an existing row is a conflict",
        e019_lost_insert_race,
    ),
    check(
        GROUP,
        "E-020",
        "baseVersion 0 on a foreign row is forbidden without serverRow",
        e020_foreign_row_forbidden,
    ),
    check(
        GROUP,
        "E-021",
        "an absent row with baseVersion 5 is row_missing / forbidden",
        e021_row_missing,
    ),
    check(
        GROUP,
        "E-022",
        "an update without baseVersion is last-write-wins",
        e022_last_write_wins,
    ),
    check(
        GROUP,
        "E-023",
        "deleting an absent row appends an empty commit",
        e023_delete_absent,
    ),
    check(
        GROUP,
        "E-024",
        "deleting a foreign row is forbidden",
        e024_delete_foreign,
    ),
    check(
        GROUP,
        "E-025",
        "a delete emits the stored scopes, a tombstone and clears blob refs",
        e025_delete_change,
    ),
    check(
        GROUP,
        "E-026",
        "a delete ignores baseVersion",
        e026_delete_ignores_version,
    ),
    check(
        GROUP,
        "E-027",
        "after a delete an unversioned upsert re-creates at v1",
        e027_recreate_after_delete,
    ),
    check(
        GROUP,
        "E-028",
        "DeleteWins: unversioned upsert after delete is row_missing; baseVersion 0 re-creates",
        e028_delete_wins,
    ),
    check(
        GROUP,
        "E-029",
        "scope columns are immutable on update",
        e029_scope_immutable,
    ),
    check(
        GROUP,
        "E-030",
        "row id mismatch, undecodable payload, unknown table are persisted errors",
        e030_invalid_operations,
    ),
    check(
        GROUP,
        "E-031",
        "a conflict at op 2 rolls back ops 0 and 1",
        e031_rejection_is_atomic,
    ),
    check(
        GROUP,
        "E-032",
        "a rejected commit does not stop the next one",
        e032_batch_continues,
    ),
    check(
        GROUP,
        "E-033",
        "a repeated clientCommitId in one request is replayed as cached",
        e033_repeat_in_request,
    ),
    check(
        GROUP,
        "E-034",
        "two operations on one row in one commit see each other",
        e034_read_your_writes,
    ),
    check(
        GROUP,
        "E-035",
        "an integer key must render exactly as the rowId",
        e035_integer_row_id,
    ),
];

/// The commit record at `seq`.
pub(crate) fn commit_at(env: &Env, seq: i64) -> CheckResult<CommitRecord> {
    env.storage
        .read_commits(P, seq - 1, 1)?
        .into_iter()
        .find(|c| c.commit_seq == seq)
        .ok_or_else(|| Failure::new(format!("commit {seq} not found")))
}

/// The tombstone seq of `table/id`, read through a transaction.
fn tombstone_of(env: &Env, table: &str, id: &str) -> CheckResult<Option<i64>> {
    let mut tx = env.storage.begin(P)?;
    let seq = tx.get_tombstone_seq(table, id)?;
    tx.rollback()?;
    Ok(seq)
}

/// The stored version of `table/id`.
pub(crate) fn version_of(env: &Env, table: &str, id: &str) -> CheckResult<Option<i64>> {
    Ok(env.storage.get_row(P, table, id)?.map(|r| r.server_version))
}

fn e017_versioned_update(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    seed_task(env.storage.as_ref(), &env.schema, "t1", "p1", 1)?;
    let engine = env.engine()?;
    let req = push_req(
        "dev-a",
        vec![commit(
            "c1",
            vec![up("tasks", "t1", Some(1), env.task("t1", "p1")?)],
        )],
    );
    let round = run(&engine, "alice", req);
    let seq = expect_applied(round.result(0)?, PushResultStatus::Applied, 1)?;
    check_eq!(version_of(&env, "tasks", "t1")?, Some(2), "row version");
    let change = commit_at(&env, seq)?.changes;
    check_eq!(change.len(), 1, "changes");
    check_eq!(change[0].row_version, Some(2), "change rowVersion");
    versions_end_at_the_safe_limit(&env, 2, &|id| env.task(id, "p1"))
}

/// An update may write `server_version` 2^53 − 1 and no higher: from a
/// row at 2^53 − 2 an unversioned update (`payload(id)`, pushed at `wire`)
/// is applied at 2^53 − 1; the next fails the round (an internal failure)
/// and leaves the row, the log and the push results as they were.
pub(crate) fn versions_end_at_the_safe_limit(
    env: &Env,
    wire: u16,
    payload: &dyn Fn(&str) -> CheckResult<Vec<u8>>,
) -> CheckResult {
    let id = format!("safe{wire}");
    seed_task(
        env.storage.as_ref(),
        &env.schema,
        &id,
        "p1",
        MAX_SAFE_INTEGER - 1,
    )?;
    let engine = env.engine()?;
    let update = |ccid: &str| -> CheckResult<SyncRequest> {
        let mut req = push_req(
            "dev-a",
            vec![commit(ccid, vec![up("tasks", &id, None, payload(&id)?)])],
        );
        req.wire_version = wire;
        Ok(req)
    };
    let last = format!("last{wire}");
    let seq = expect_applied(
        run(&engine, "alice", update(&last)?).result(0)?,
        PushResultStatus::Applied,
        1,
    )
    .map_err(|f| Failure::new(format!("wire {wire}, an update to 2^53 - 1: {f}")))?;
    check_eq!(
        version_of(env, "tasks", &id)?,
        Some(MAX_SAFE_INTEGER),
        "wire {wire}: row version after an update from 2^53 - 2"
    );
    check_eq!(
        commit_at(env, seq)?
            .changes
            .first()
            .and_then(|c| c.row_version),
        Some(MAX_SAFE_INTEGER),
        "wire {wire}: change rowVersion"
    );
    let past = format!("past{wire}");
    run(&engine, "alice", update(&past)?)
        .expect_internal()
        .map_err(|f| Failure::new(format!("wire {wire}, an update past 2^53 - 1: {f}")))?;
    check_eq!(
        version_of(env, "tasks", &id)?,
        Some(MAX_SAFE_INTEGER),
        "wire {wire}: row version after an update past the limit"
    );
    check_eq!(env.max_seq()?, seq, "wire {wire}: max_commit_seq");
    check!(
        env.storage.get_push_result(P, "dev-a", &past)?.is_none(),
        "wire {wire}: a result was stored for an update past the limit"
    );
    Ok(())
}

fn e018_stale_conflict(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    seed_task(env.storage.as_ref(), &env.schema, "t1", "p1", 3)?;
    let stored = env
        .storage
        .get_row(P, "tasks", "t1")?
        .ok_or_else(|| Failure::new("seed"))?;
    let before = env.max_seq()?;
    let engine = env.engine()?;
    let pushed = env.task("t1", "p1")?;
    let req = push_req(
        "dev-a",
        vec![commit("c1", vec![up("tasks", "t1", Some(2), pushed)])],
    );
    let round = run(&engine, "alice", req);
    let result = round.result(0)?;
    let (version, row) = expect_conflict(result, 0)?;
    check_eq!(version, 3, "serverVersion");
    check_eq!(row, stored.payload, "serverRow");
    check_eq!(env.max_seq()?, before, "max_commit_seq");
    let persisted = env
        .storage
        .get_push_result(P, "dev-a", "c1")?
        .ok_or_else(|| Failure::new("conflict not persisted"))?;
    check_eq!(persisted.status, PushStatus::Rejected, "stored status");
    check_eq!(persisted.results, result.results, "stored records");
    Ok(())
}

fn e019_lost_insert_race(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    seed_task(env.storage.as_ref(), &env.schema, "t1", "p1", 1)?;
    let stored = env
        .storage
        .get_row(P, "tasks", "t1")?
        .ok_or_else(|| Failure::new("seed"))?;
    let engine = env.engine()?;
    let req = push_req(
        "dev-a",
        vec![commit(
            "c1",
            vec![up("tasks", "t1", Some(0), env.task("t1", "p1")?)],
        )],
    );
    let (version, row) = expect_conflict(run(&engine, "alice", req).result(0)?, 0)?;
    check_eq!(
        (version, row),
        (1, stored.payload),
        "(serverVersion, serverRow)"
    );
    Ok(())
}

fn e020_foreign_row_forbidden(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    seed_task(env.storage.as_ref(), &env.schema, "t2", "p2", 1)?;
    let engine = env.engine()?;
    let req = push_req(
        "dev-a",
        vec![commit(
            "c1",
            vec![up("tasks", "t2", Some(0), env.task("t2", "p1")?)],
        )],
    );
    let round = run(&engine, "alice", req);
    expect_rejected(round.result(0)?, 0, "sync.forbidden")?;
    let persisted = env
        .storage
        .get_push_result(P, "dev-a", "c1")?
        .ok_or_else(|| Failure::new("result not persisted"))?;
    check!(
        persisted
            .results
            .iter()
            .all(|r| !matches!(r, PushOperationResult::Conflict { .. })),
        "stored result discloses a row: {persisted:?}"
    );
    Ok(())
}

fn e021_row_missing(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    let engine = env.engine()?;
    let req = push_req(
        "dev-a",
        vec![
            commit(
                "c1",
                vec![up("tasks", "t9", Some(5), env.task("t9", "p1")?)],
            ),
            commit(
                "c2",
                vec![up("tasks", "t9", Some(5), env.task("t9", "p2")?)],
            ),
        ],
    );
    let round = run(&engine, "alice", req);
    expect_rejected(round.result(0)?, 0, "sync.row_missing")?;
    expect_rejected(round.result(1)?, 0, "sync.forbidden")?;
    Ok(())
}

fn e022_last_write_wins(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    seed_task(env.storage.as_ref(), &env.schema, "t1", "p1", 3)?;
    let engine = env.engine()?;
    let req = env.insert_req("dev-a", "c1", "t1", "p1")?;
    expect_applied(
        run(&engine, "alice", req).result(0)?,
        PushResultStatus::Applied,
        1,
    )?;
    check_eq!(version_of(&env, "tasks", "t1")?, Some(4), "row version");
    Ok(())
}

fn e023_delete_absent(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    seed_task(env.storage.as_ref(), &env.schema, "t1", "p1", 1)?;
    let before = env.max_seq()?;
    let engine = env.engine()?;
    let req = push_req("dev-b", vec![commit("c1", vec![del("tasks", "zz")])]);
    let seq = expect_applied(
        run(&engine, "bob", req).result(0)?,
        PushResultStatus::Applied,
        1,
    )?;
    check_eq!(seq, before + 1, "commitSeq");
    check_eq!(env.max_seq()?, before + 1, "max_commit_seq");
    check_eq!(
        commit_at(&env, seq)?.changes.len(),
        0,
        "changes of the appended commit"
    );
    Ok(())
}

fn e024_delete_foreign(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    seed_task(env.storage.as_ref(), &env.schema, "t2", "p2", 1)?;
    let engine = env.engine()?;
    let req = push_req("dev-a", vec![commit("c1", vec![del("tasks", "t2")])]);
    expect_rejected(run(&engine, "alice", req).result(0)?, 0, "sync.forbidden")?;
    check!(
        env.storage.get_row(P, "tasks", "t2")?.is_some(),
        "t2 was deleted"
    );
    Ok(())
}

fn e025_delete_change(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    let engine = env.engine()?;
    let insert = push_req(
        "dev-a",
        vec![commit(
            "c1",
            vec![up(
                "tasks",
                "t1",
                None,
                task_payload_blob(&env.schema, "t1", "p1", Some("b1"))?,
            )],
        )],
    );
    expect_applied(
        run(&engine, "alice", insert).result(0)?,
        PushResultStatus::Applied,
        1,
    )?;
    let refs = env.storage.list_rows_referencing_blob(P, "b1")?;
    check_eq!(refs.len(), 1, "rows referencing b1 after the insert");
    let req = push_req("dev-a", vec![commit("c2", vec![del("tasks", "t1")])]);
    let seq = expect_applied(
        run(&engine, "alice", req).result(0)?,
        PushResultStatus::Applied,
        1,
    )?;
    let changes = commit_at(&env, seq)?.changes;
    check_eq!(changes.len(), 1, "changes");
    let change = &changes[0];
    check_eq!(change.op, ChangeOp::Delete, "change op");
    check_eq!(change.row_version, None, "delete rowVersion");
    check_eq!(change.payload, None, "delete row");
    check_eq!(
        change.scopes,
        crate::fixtures::scopes(&[("project_id", "p1")]),
        "delete scopes"
    );
    check!(
        env.storage.get_row(P, "tasks", "t1")?.is_none(),
        "t1 still present"
    );
    let tombstone = tombstone_of(&env, "tasks", "t1")?;
    check_eq!(tombstone, Some(seq), "tombstone seq");
    check_eq!(
        env.storage.list_rows_referencing_blob(P, "b1")?.len(),
        0,
        "rows referencing b1"
    );
    Ok(())
}

fn e026_delete_ignores_version(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    seed_task(env.storage.as_ref(), &env.schema, "t1", "p1", 1)?;
    let engine = env.engine()?;
    let mut op = del("tasks", "t1");
    op.base_version = Some(99);
    let req = push_req("dev-a", vec![commit("c1", vec![op])]);
    expect_applied(
        run(&engine, "alice", req).result(0)?,
        PushResultStatus::Applied,
        1,
    )?;
    check!(
        env.storage.get_row(P, "tasks", "t1")?.is_none(),
        "t1 still present"
    );
    Ok(())
}

fn e027_recreate_after_delete(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    seed_task(env.storage.as_ref(), &env.schema, "t1", "p1", 3)?;
    let engine = env.engine()?;
    let req = push_req(
        "dev-a",
        vec![
            commit("c1", vec![del("tasks", "t1")]),
            commit("c2", vec![up("tasks", "t1", None, env.task("t1", "p1")?)]),
        ],
    );
    let round = run(&engine, "alice", req);
    expect_applied(round.result(0)?, PushResultStatus::Applied, 1)?;
    expect_applied(round.result(1)?, PushResultStatus::Applied, 1)?;
    check_eq!(
        version_of(&env, "tasks", "t1")?,
        Some(1),
        "re-created version"
    );
    Ok(())
}

fn e028_delete_wins(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    seed_task(env.storage.as_ref(), &env.schema, "t1", "p1", 3)?;
    let engine = env.engine_with(|c| c.delete_policy = DeletePolicy::DeleteWins)?;
    let req = push_req(
        "dev-a",
        vec![
            commit("c1", vec![del("tasks", "t1")]),
            commit("c2", vec![up("tasks", "t1", None, env.task("t1", "p1")?)]),
            commit(
                "c3",
                vec![up("tasks", "t1", Some(0), env.task("t1", "p1")?)],
            ),
        ],
    );
    let round = run(&engine, "alice", req);
    expect_applied(round.result(0)?, PushResultStatus::Applied, 1)?;
    expect_rejected(round.result(1)?, 0, "sync.row_missing")?;
    expect_applied(round.result(2)?, PushResultStatus::Applied, 1)?;
    check_eq!(
        version_of(&env, "tasks", "t1")?,
        Some(1),
        "re-created version"
    );
    let tombstone = tombstone_of(&env, "tasks", "t1")?;
    check_eq!(tombstone, None, "tombstone after the explicit re-create");
    Ok(())
}

fn e029_scope_immutable(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    seed_task(env.storage.as_ref(), &env.schema, "t1", "p1", 1)?;
    let engine = env.engine()?;
    let pushed = env.task("t1", "p2")?;
    let req = push_req(
        "dev-a",
        vec![commit(
            "c1",
            vec![up("tasks", "t1", Some(1), pushed.clone())],
        )],
    );
    let seq = expect_applied(
        run(&engine, "alice", req).result(0)?,
        PushResultStatus::Applied,
        1,
    )?;
    let row = env
        .storage
        .get_row(P, "tasks", "t1")?
        .ok_or_else(|| Failure::new("t1 gone"))?;
    let p1 = crate::fixtures::scopes(&[("project_id", "p1")]);
    check_eq!(row.scopes, p1, "stored scopes");
    check!(
        row.payload != pushed,
        "stored payload equals the pushed bytes (scope not stripped)"
    );
    check_eq!(
        decode(&env.schema, "tasks", &row.payload)?[1],
        RowValue::String("p1".to_owned()),
        "stored project_id"
    );
    let change = commit_at(&env, seq)?.changes;
    check_eq!(change[0].scopes, p1, "change scopes");
    check_eq!(
        change[0].payload.as_deref(),
        Some(row.payload.as_slice()),
        "change row"
    );
    Ok(())
}

fn e030_invalid_operations(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    let engine = env.engine()?;
    let good = |id: &str| -> CheckResult<_> { Ok(up("tasks", id, None, env.task(id, "p1")?)) };
    let mut truncated = env.task("t3", "p1")?;
    truncated.truncate(truncated.len() / 2);
    let req = push_req(
        "dev-a",
        vec![
            commit(
                "c1",
                vec![good("a1")?, up("tasks", "t2", None, env.task("t1", "p1")?)],
            ),
            commit("c2", vec![good("a2")?, up("tasks", "t3", None, truncated)]),
            commit(
                "c3",
                vec![good("a3")?, up("nope", "t4", None, env.task("t4", "p1")?)],
            ),
        ],
    );
    let round = run(&engine, "alice", req);
    let codes = [
        "sync.invalid_request",
        "sync.invalid_request",
        "sync.unknown_table",
    ];
    for (i, code) in codes.into_iter().enumerate() {
        let result = round.result(i)?;
        expect_rejected(result, 1, code)?;
        let ccid = &result.client_commit_id;
        let persisted = env
            .storage
            .get_push_result(P, "dev-a", ccid)?
            .ok_or_else(|| Failure::new(format!("{ccid} not persisted")))?;
        check_eq!(
            persisted.results,
            result.results,
            "stored records of {ccid}"
        );
    }
    check_eq!(env.max_seq()?, 0, "max_commit_seq");
    Ok(())
}

fn e031_rejection_is_atomic(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    seed_task(env.storage.as_ref(), &env.schema, "c", "p1", 3)?;
    let before = env.max_seq()?;
    let planner = super::engine_doubles::Planner::new(|_| {
        Ok(vec![super::engine_doubles::plan("k", "notify")])
    });
    let engine = env.engine_with(|c| c.reaction_planner = Some(planner.clone()))?;
    let req = push_req(
        "dev-a",
        vec![commit(
            "c1",
            vec![
                up("tasks", "a", None, env.task("a", "p1")?),
                up("tasks", "b", None, env.task("b", "p1")?),
                up("tasks", "c", Some(1), env.task("c", "p1")?),
            ],
        )],
    );
    let (version, _) = expect_conflict(run(&engine, "alice", req).result(0)?, 2)?;
    check_eq!(version, 3, "serverVersion");
    check!(
        env.storage.get_row(P, "tasks", "a")?.is_none(),
        "a was kept"
    );
    check!(
        env.storage.get_row(P, "tasks", "b")?.is_none(),
        "b was kept"
    );
    check_eq!(env.max_seq()?, before, "max_commit_seq");
    check_eq!(planner.calls(), 0, "planner calls");
    check!(
        super::engine_validators::reactions(&env)?.is_empty(),
        "reactions were enqueued"
    );
    Ok(())
}

fn e032_batch_continues(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    seed_task(env.storage.as_ref(), &env.schema, "t1", "p1", 3)?;
    let engine = env.engine()?;
    let req = push_req(
        "dev-a",
        vec![
            commit(
                "c1",
                vec![up("tasks", "t1", Some(1), env.task("t1", "p1")?)],
            ),
            commit("c2", vec![up("tasks", "t2", None, env.task("t2", "p1")?)]),
        ],
    );
    let round = run(&engine, "alice", req);
    check_eq!(round.results().len(), 2, "push results");
    expect_conflict(round.result(0)?, 0)?;
    expect_applied(round.result(1)?, PushResultStatus::Applied, 1)?;
    check_eq!(round.result(0)?.client_commit_id, "c1", "first result");
    Ok(())
}

fn e033_repeat_in_request(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    let engine = env.engine()?;
    let pushed = commit("c1", vec![up("tasks", "t1", None, env.task("t1", "p1")?)]);
    let round = run(
        &engine,
        "alice",
        push_req("dev-a", vec![pushed.clone(), pushed]),
    );
    let first = expect_applied(round.result(0)?, PushResultStatus::Applied, 1)?;
    let second = expect_applied(round.result(1)?, PushResultStatus::Cached, 1)?;
    check_eq!(second, first, "cached commitSeq");
    check_eq!(env.max_seq()?, first, "max_commit_seq");
    Ok(())
}

fn e034_read_your_writes(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    let engine = env.engine()?;
    let mut second = task_vals("x", "p1", "second");
    second[3] = RowValue::Boolean(true);
    let req = push_req(
        "dev-a",
        vec![commit(
            "c1",
            vec![
                up("tasks", "x", None, env.task("x", "p1")?),
                up(
                    "tasks",
                    "x",
                    Some(1),
                    super::engine_fixture::task_payload_values(&env.schema, &second)?,
                ),
            ],
        )],
    );
    let seq = expect_applied(
        run(&engine, "alice", req).result(0)?,
        PushResultStatus::Applied,
        2,
    )?;
    check_eq!(version_of(&env, "tasks", "x")?, Some(2), "row version");
    let versions: Vec<Option<i64>> = commit_at(&env, seq)?
        .changes
        .iter()
        .map(|c| c.row_version)
        .collect();
    check_eq!(versions, [Some(1), Some(2)], "change rowVersions");
    Ok(())
}

fn e035_integer_row_id(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    let engine = env.engine()?;
    let payload = counter_payload(&env.schema, 42, "p1", 7)?;
    let req = push_req(
        "dev-a",
        vec![
            commit("c1", vec![up("counters", "42", None, payload.clone())]),
            commit("c2", vec![up("counters", "042", None, payload)]),
        ],
    );
    let round = run(&engine, "alice", req);
    expect_applied(round.result(0)?, PushResultStatus::Applied, 1)?;
    expect_rejected(round.result(1)?, 0, "sync.invalid_request")?;
    check!(
        env.storage.get_row(P, "counters", "042")?.is_none(),
        "row 042 stored"
    );
    Ok(())
}
