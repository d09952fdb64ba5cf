//! Push rules of wire version 3 (`docs/design/wire-v3.md` §4, §5, §8.3):
//! sparse rows, per-column conflicts with `conflictColumns`, delete
//! precedence with `sync.row_deleted`, immutable scope columns, column
//! versions, and one server answering versions 2 and 3 on the same rows —
//! E-100…E-118, E-120 (beyond the checklist).
//!
//! `tasks` (EFIX) has nine columns: `id` (key, 0), `project_id` (scope,
//! 1), `title` (2), `done` (3), `priority` (4), `score` (5), `meta` (6),
//! `thumb` (7), `attachment` (8, blob_ref); `notes` has a `union` crdt
//! column `doc` (3).

use sync_core::column_versions::ColumnVersions;
use sync_core::{codec, CommitPruneQuery, CompiledTable, PushOperationResult, RowValue};
use sync_engine::{Operation, PushResult, PushResultStatus, SyncRequest};

use super::engine_fixture::{decode, note_payload, task_vals, P};
use super::engine_push::commit_at;
use super::engine_round::{
    commit, del, env, expect_applied, expect_conflict, expect_rejected, push_req, rejected_record,
    run, up, Env, EPOCH,
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
        "E-100",
        "v3: disjoint sparse edits of one row by two clients without baseVersion both land; the row holds both",
        e100_disjoint_unversioned,
    ),
    check(
        GROUP,
        "E-101",
        "v3: disjoint sparse edits with the same baseVersion both land",
        e101_disjoint_versioned,
    ),
    check(
        GROUP,
        "E-102",
        "v3: the same column at the same baseVersion conflicts on exactly that column, with the full serverRow and the current serverVersion",
        e102_same_column_conflict,
    ),
    check(
        GROUP,
        "E-103",
        "v3: baseVersion 0 on an existing row conflicts on every present non-key non-crdt column",
        e103_lost_insert_race,
    ),
    check(
        GROUP,
        "E-104",
        "v3: a baseVersion above the row's or negative is invalid_request; no version past 2^53 - 1 is written",
        e104_base_version_range,
    ),
    check(
        GROUP,
        "E-105",
        "v3: a changed scope column is invalid_request and rolls the commit back; an equal one applies with the scopes unchanged",
        e105_scope_immutable,
    ),
    check(
        GROUP,
        "E-106",
        "v3: a partial payload on an absent row is row_missing, with baseVersion 0 too; a full one at a baseVersion above 0 too",
        e106_partial_insert,
    ),
    check(
        GROUP,
        "E-107",
        "v3: after a delete an unversioned sparse or full upsert is row_deleted and the row stays absent; baseVersion 0 re-creates at 1 and clears the tombstone",
        e107_row_deleted,
    ),
    check(
        GROUP,
        "E-108",
        "v3: a tombstone pruned past the horizon no longer refuses the insert",
        e108_pruned_tombstone,
    ),
    check(
        GROUP,
        "E-109",
        "v3: row_deleted and row_missing go to an actor outside the row's scopes as forbidden, a partial payload judged by the deleted row's scopes",
        e109_deleted_row_disclosure,
    ),
    check(
        GROUP,
        "E-110",
        "v3: a crdt-only sparse update with a stale baseVersion merges beside a concurrent edit; an absent crdt column is not merged; a full row's is",
        e110_crdt_columns,
    ),
    check(
        GROUP,
        "E-111",
        "v3: the row validator and the commit validator see the merged full row and the stored row",
        e111_validators_see_the_merged_row,
    ),
    check(
        GROUP,
        "E-112",
        "v3: the stored payload and the emitted change are the full merged row; a full sparse insert is stored as its bytes after the presence bitmap",
        e112_full_rows_stored,
    ),
    check(
        GROUP,
        "E-113",
        "v3: column versions after inserts, sparse, full and v2 writes, read back through storage",
        e113_column_versions,
    ),
    check(
        GROUP,
        "E-114",
        "v3: stale or malformed stored column versions read as every column changed: a versioned write below the row's version conflicts; malformed ones are counted",
        e114_untrusted_column_versions,
    ),
    check(
        GROUP,
        "E-115",
        "v3: each sparse decode check P1–P6 rejects its commit with invalid_request and its message; the batch continues",
        e115_sparse_decode_checks,
    ),
    check(
        GROUP,
        "E-116",
        "v2 and v3 writes on the same rows: each version's stale versioned write conflicts after the other's write",
        e116_mixed_versions,
    ),
    check(
        GROUP,
        "E-117",
        "v2 rules unchanged beside v3: scope columns kept silently, an unversioned upsert re-creates a row a v3 client deleted",
        e117_v2_rules_unchanged,
    ),
    check(
        GROUP,
        "E-118",
        "a conflict stored at v2 and replayed at v3 names every non-key non-crdt column; a v3 conflict replayed at v3 keeps its bitmap and at v2 drops it; applied replays are identical",
        e118_replay_across_versions,
    ),
    check(
        GROUP,
        "E-120",
        "v3: blob existence is checked over the merged row, an absent blob_ref column included; references follow the merged row",
        e120_blobs_of_the_merged_row,
    ),
];

const TITLE: usize = 2;
const DONE: usize = 3;
const PRIORITY: usize = 4;
const ATTACHMENT: usize = 8;

/// A request at wire version 3.
fn v3(mut req: SyncRequest) -> SyncRequest {
    req.wire_version = 3;
    req
}

/// A v3 push request of `client`.
fn push3(client: &str, commits: Vec<sync_engine::PushCommit>) -> SyncRequest {
    v3(push_req(client, commits))
}

fn table<'e>(env: &'e Env, name: &str) -> CheckResult<&'e CompiledTable> {
    env.schema
        .table(name)
        .ok_or_else(|| Failure::new(format!("EFIX table {name} missing")))
}

/// A sparse payload of `table` with `present` (the key among them).
fn sparse(env: &Env, name: &str, present: &[(usize, RowValue)]) -> CheckResult<Vec<u8>> {
    let table = table(env, name)?;
    let mut slots = vec![None; table.columns.len()];
    for (i, value) in present {
        if let Some(slot) = slots.get_mut(*i) {
            *slot = Some(value.clone());
        }
    }
    codec::encode_sparse(&table.columns, table.primary_key_index, &slots)
        .map_err(|e| Failure::new(format!("sparse payload does not encode: {e:?}")))
}

/// A sparse `tasks` payload of `id` with `present` beside the key.
fn task_sparse(env: &Env, id: &str, present: &[(usize, RowValue)]) -> CheckResult<Vec<u8>> {
    let mut all = vec![(0, RowValue::String(id.to_owned()))];
    all.extend(present.iter().cloned());
    sparse(env, "tasks", &all)
}

/// A sparse `tasks` payload presenting every column.
fn task_full(env: &Env, values: &[RowValue]) -> CheckResult<Vec<u8>> {
    let all: Vec<(usize, RowValue)> = values.iter().cloned().enumerate().collect();
    sparse(env, "tasks", &all)
}

fn text(s: &str) -> RowValue {
    RowValue::String(s.to_owned())
}

/// Inserts `tasks/id` in `project` at v3 (a full sparse row).
fn insert3(env: &Env, engine: &sync_engine::Engine, id: &str, project: &str) -> CheckResult<i64> {
    let payload = task_full(env, &task_vals(id, project, &format!("title {id}")))?;
    let actor = if project == "p1" { "alice" } else { "bob" };
    let req = push3(
        &format!("seeder-{actor}"),
        vec![commit(
            &format!("seed-{id}"),
            vec![up("tasks", id, None, payload)],
        )],
    );
    expect_applied(
        run(engine, actor, req).result(0)?,
        PushResultStatus::Applied,
        1,
    )
}

/// One v3 commit of one upsert by `actor`; its result.
fn upsert3(
    engine: &sync_engine::Engine,
    actor: &str,
    ccid: &str,
    id: &str,
    base: Option<i64>,
    payload: Vec<u8>,
) -> CheckResult<PushResult> {
    let req = push3(
        &format!("dev-{actor}"),
        vec![commit(ccid, vec![up("tasks", id, base, payload)])],
    );
    Ok(run(engine, actor, req).result(0)?.clone())
}

/// The stored values and version of `tasks/id`.
fn stored(env: &Env, id: &str) -> CheckResult<(Vec<RowValue>, i64, Option<Vec<u8>>)> {
    stored_in(env, "tasks", id)
}

/// The stored values, version and column versions of `table/id`.
fn stored_in(
    env: &Env,
    table: &str,
    id: &str,
) -> CheckResult<(Vec<RowValue>, i64, Option<Vec<u8>>)> {
    let row = env
        .storage
        .get_row(P, table, id)?
        .ok_or_else(|| Failure::new(format!("{table}/{id} missing")))?;
    Ok((
        decode(&env.schema, table, &row.payload)?,
        row.server_version,
        row.column_versions,
    ))
}

/// The conflict record of a rejected result: version, row, bitmap.
fn conflict_of(r: &PushResult) -> CheckResult<(i64, Vec<u8>, Option<Vec<u8>>)> {
    match rejected_record(r)? {
        PushOperationResult::Conflict {
            code,
            server_version,
            server_row,
            conflict_columns,
            ..
        } if code == "sync.version_conflict" => Ok((
            *server_version,
            server_row.clone(),
            conflict_columns.clone(),
        )),
        other => Err(Failure::new(format!("expected a conflict, got {other:?}"))),
    }
}

/// A bitmap of nine columns with `marked` set.
fn bitmap9(marked: &[usize]) -> Vec<u8> {
    let mut out = vec![0u8; 2];
    for &i in marked {
        out[i / 8] |= 1 << (i % 8);
    }
    out
}

/// The message of a rejected result's error record with `code`.
fn rejected_message(r: &PushResult, code: &str) -> CheckResult<String> {
    match rejected_record(r)? {
        PushOperationResult::Error {
            code: c, message, ..
        } if c == code => Ok(message.clone()),
        other => Err(Failure::new(format!(
            "expected error {code}, got {other:?}"
        ))),
    }
}

fn tombstone_of(env: &Env, id: &str) -> CheckResult<Option<i64>> {
    let mut tx = env.storage.begin(P)?;
    let seq = tx.get_tombstone_seq("tasks", id)?;
    tx.rollback()?;
    Ok(seq)
}

fn delete3(engine: &sync_engine::Engine, actor: &str, ccid: &str, id: &str) -> CheckResult<i64> {
    let req = push3(
        &format!("dev-{actor}"),
        vec![commit(ccid, vec![del("tasks", id)])],
    );
    expect_applied(
        run(engine, actor, req).result(0)?,
        PushResultStatus::Applied,
        1,
    )
}

fn e100_disjoint_unversioned(ctx: &mut Ctx<'_>) -> CheckResult {
    disjoint_edits(ctx, None)
}

fn e101_disjoint_versioned(ctx: &mut Ctx<'_>) -> CheckResult {
    disjoint_edits(ctx, Some(1))
}

/// Two sparse edits of different columns of `t1`, both with `base`: both
/// land, and the row holds both at version 3, its other columns untouched.
fn disjoint_edits(ctx: &mut Ctx<'_>, base: Option<i64>) -> CheckResult {
    let env = env(ctx)?;
    let engine = env.engine()?;
    insert3(&env, &engine, "t1", "p1")?;
    let edits = [
        ("a1", TITLE, text("from a")),
        ("b1", PRIORITY, RowValue::Integer(7)),
    ];
    for (commit, column, value) in edits {
        let pushed = upsert3(
            &engine,
            "alice",
            commit,
            "t1",
            base,
            task_sparse(&env, "t1", &[(column, value)])?,
        )?;
        expect_applied(&pushed, PushResultStatus::Applied, 1)?;
    }
    let (values, version, _) = stored(&env, "t1")?;
    check_eq!(version, 3, "row version after two edits");
    check_eq!(values[TITLE], text("from a"), "title");
    check_eq!(values[PRIORITY], RowValue::Integer(7), "priority");
    check_eq!(values[1], text("p1"), "project_id untouched");
    Ok(())
}

fn e102_same_column_conflict(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    let engine = env.engine()?;
    insert3(&env, &engine, "t1", "p1")?;
    let a = upsert3(
        &engine,
        "alice",
        "a1",
        "t1",
        Some(1),
        task_sparse(&env, "t1", &[(TITLE, text("from a"))])?,
    )?;
    expect_applied(&a, PushResultStatus::Applied, 1)?;
    let row = env
        .storage
        .get_row(P, "tasks", "t1")?
        .ok_or_else(|| Failure::new("t1 missing"))?;
    let before = env.max_seq()?;
    let b = upsert3(
        &engine,
        "alice",
        "b1",
        "t1",
        Some(1),
        task_sparse(
            &env,
            "t1",
            &[(TITLE, text("from b")), (PRIORITY, RowValue::Integer(3))],
        )?,
    )?;
    let (version, server_row, columns) = conflict_of(&b)?;
    check_eq!(version, 2, "serverVersion");
    check_eq!(server_row, row.payload, "serverRow (the stored full row)");
    check_eq!(columns, Some(bitmap9(&[TITLE])), "conflictColumns");
    check_eq!(env.max_seq()?, before, "nothing appended");
    let persisted = env
        .storage
        .get_push_result(P, "dev-alice", "b1")?
        .ok_or_else(|| Failure::new("conflict not persisted"))?;
    check_eq!(
        persisted.results,
        b.results,
        "stored records (with conflictColumns)"
    );
    Ok(())
}

fn e103_lost_insert_race(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    let engine = env.engine()?;
    insert3(&env, &engine, "t1", "p1")?;
    let r = upsert3(
        &engine,
        "alice",
        "a1",
        "t1",
        Some(0),
        task_sparse(
            &env,
            "t1",
            &[(TITLE, text("x")), (PRIORITY, RowValue::Integer(1))],
        )?,
    )?;
    let (version, _, columns) = conflict_of(&r)?;
    check_eq!(version, 1, "serverVersion");
    check_eq!(
        columns,
        Some(bitmap9(&[TITLE, PRIORITY])),
        "conflictColumns (the key never marked)"
    );
    // A full row at baseVersion 0: every column but the key.
    let full = task_full(&env, &task_vals("t1", "p1", "y"))?;
    let (_, _, columns) = conflict_of(&upsert3(&engine, "alice", "a2", "t1", Some(0), full)?)?;
    check_eq!(
        columns,
        Some(bitmap9(&[1, 2, 3, 4, 5, 6, 7, 8])),
        "conflictColumns of a full row"
    );
    Ok(())
}

fn e104_base_version_range(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    let engine = env.engine()?;
    insert3(&env, &engine, "t1", "p1")?;
    let title = task_sparse(&env, "t1", &[(TITLE, text("x"))])?;
    for (ccid, base) in [("a1", 2), ("a2", -1), ("a3", -(1 << 53) + 1)] {
        let r = upsert3(&engine, "alice", ccid, "t1", Some(base), title.clone())?;
        expect_rejected(&r, 0, "sync.invalid_request")?;
    }
    // On an absent row, a negative baseVersion too.
    let full = task_full(&env, &task_vals("t9", "p1", "nine"))?;
    expect_rejected(
        &upsert3(&engine, "alice", "a4", "t9", Some(-1), full)?,
        0,
        "sync.invalid_request",
    )?;
    let (_, version, _) = stored(&env, "t1")?;
    check_eq!(version, 1, "row version");
    // The row's own version ends at 2^53 - 1 too (a sparse update).
    super::engine_push::versions_end_at_the_safe_limit(&env, 3, &|id| {
        task_sparse(&env, id, &[(TITLE, text("at the limit"))])
    })
}

fn e105_scope_immutable(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    let engine = env.engine()?;
    insert3(&env, &engine, "t1", "p1")?;
    let before = env.max_seq()?;
    let req = push3(
        "dev-a",
        vec![commit(
            "a1",
            vec![
                up(
                    "tasks",
                    "t1",
                    None,
                    task_sparse(&env, "t1", &[(TITLE, text("moved"))])?,
                ),
                up(
                    "tasks",
                    "t1",
                    None,
                    task_sparse(&env, "t1", &[(1, text("p2"))])?,
                ),
            ],
        )],
    );
    let round = run(&engine, "root", req);
    expect_rejected(round.result(0)?, 1, "sync.invalid_request")?;
    let (values, version, _) = stored(&env, "t1")?;
    check_eq!(
        (version, values[TITLE].clone()),
        (1, text("title t1")),
        "row after the rollback"
    );
    check_eq!(env.max_seq()?, before, "nothing appended");
    // The same value is no change.
    let same = task_sparse(&env, "t1", &[(1, text("p1")), (TITLE, text("kept"))])?;
    let r = upsert3(&engine, "alice", "a2", "t1", None, same)?;
    let seq = expect_applied(&r, PushResultStatus::Applied, 1)?;
    let row = env
        .storage
        .get_row(P, "tasks", "t1")?
        .ok_or_else(|| Failure::new("t1 missing"))?;
    check_eq!(
        row.scopes,
        crate::fixtures::scopes(&[("project_id", "p1")]),
        "stored scopes"
    );
    let changes = commit_at(&env, seq)?.changes;
    check_eq!(changes.len(), 1, "changes");
    check_eq!(changes[0].scopes, row.scopes, "change scopes");
    Ok(())
}

fn e106_partial_insert(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    let engine = env.engine()?;
    // Every column but `attachment` (nullable): still partial.
    let mut present: Vec<(usize, RowValue)> = task_vals("t1", "p1", "one")
        .into_iter()
        .enumerate()
        .collect();
    present.truncate(ATTACHMENT);
    let partial = sparse(&env, "tasks", &present)?;
    for (ccid, base) in [("a1", None), ("a2", Some(0))] {
        let r = upsert3(&engine, "alice", ccid, "t1", base, partial.clone())?;
        expect_rejected(&r, 0, "sync.row_missing")?;
    }
    // A full row naming a version the absent row never had is row_missing
    // as well.
    let full = task_full(&env, &task_vals("t1", "p1", "one"))?;
    let r = upsert3(&engine, "alice", "a3", "t1", Some(5), full)?;
    expect_rejected(&r, 0, "sync.row_missing")?;
    check!(
        env.storage.get_row(P, "tasks", "t1")?.is_none(),
        "t1 was created"
    );
    Ok(())
}

fn e107_row_deleted(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    let engine = env.engine()?;
    insert3(&env, &engine, "t1", "p1")?;
    let seq = delete3(&engine, "alice", "d1", "t1")?;
    check_eq!(tombstone_of(&env, "t1")?, Some(seq), "tombstone");
    let partial = task_sparse(&env, "t1", &[(TITLE, text("late"))])?;
    let full = task_full(&env, &task_vals("t1", "p1", "late"))?;
    for (ccid, payload) in [("a1", partial), ("a2", full.clone())] {
        let r = upsert3(&engine, "alice", ccid, "t1", None, payload)?;
        expect_rejected(&r, 0, "sync.row_deleted")?;
    }
    check!(
        env.storage.get_row(P, "tasks", "t1")?.is_none(),
        "t1 was re-created"
    );
    let r = upsert3(&engine, "alice", "a3", "t1", Some(0), full)?;
    expect_applied(&r, PushResultStatus::Applied, 1)?;
    let (values, version, _) = stored(&env, "t1")?;
    check_eq!(
        (version, values[TITLE].clone()),
        (1, text("late")),
        "re-created row"
    );
    check_eq!(
        tombstone_of(&env, "t1")?,
        None,
        "tombstone after the re-creation"
    );
    Ok(())
}

fn e108_pruned_tombstone(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    let engine = env.engine()?;
    insert3(&env, &engine, "t1", "p1")?;
    let seq = delete3(&engine, "alice", "d1", "t1")?;
    let query = CommitPruneQuery {
        log_epoch: EPOCH.to_owned(),
        through_seq: seq,
    };
    env.storage.prune_commits_through(P, &query)?;
    check_eq!(tombstone_of(&env, "t1")?, None, "tombstone after pruning");
    let partial = task_sparse(&env, "t1", &[(TITLE, text("late"))])?;
    expect_rejected(
        &upsert3(&engine, "alice", "a1", "t1", None, partial)?,
        0,
        "sync.row_missing",
    )?;
    let full = task_full(&env, &task_vals("t1", "p1", "late"))?;
    let r = upsert3(&engine, "alice", "a2", "t1", None, full)?;
    expect_applied(&r, PushResultStatus::Applied, 1)?;
    check_eq!(stored(&env, "t1")?.1, 1, "re-created version");
    Ok(())
}

fn e109_deleted_row_disclosure(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    let engine = env.engine()?;
    insert3(&env, &engine, "t2", "p2")?;
    delete3(&engine, "bob", "d1", "t2")?;
    // Alice, outside p2: the full row carries p2, the partial one is
    // judged by the deleted row's scopes.
    let full = task_full(&env, &task_vals("t2", "p2", "late"))?;
    let partial = task_sparse(&env, "t2", &[(TITLE, text("late"))])?;
    for (ccid, payload) in [("a1", full), ("a2", partial.clone())] {
        let r = upsert3(&engine, "alice", ccid, "t2", None, payload)?;
        expect_rejected(&r, 0, "sync.forbidden")?;
    }
    // A versioned partial write (row_missing otherwise) as well.
    expect_rejected(
        &upsert3(&engine, "alice", "a3", "t2", Some(4), partial.clone())?,
        0,
        "sync.forbidden",
    )?;
    // Bob, inside p2, learns that it was deleted.
    expect_rejected(
        &upsert3(&engine, "bob", "b1", "t2", None, partial.clone())?,
        0,
        "sync.row_deleted",
    )?;
    expect_rejected(
        &upsert3(&engine, "bob", "b2", "t2", Some(4), partial)?,
        0,
        "sync.row_missing",
    )?;
    // A full row in alice's own project for a row bob deleted in p2: the
    // payload's scopes authorize, and the tombstone refuses.
    let mine = task_full(&env, &task_vals("t2", "p1", "mine"))?;
    expect_rejected(
        &upsert3(&engine, "alice", "a4", "t2", None, mine)?,
        0,
        "sync.row_deleted",
    )?;
    Ok(())
}

fn e110_crdt_columns(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    let engine = env.engine()?;
    let note = |present: &[(usize, RowValue)]| -> CheckResult<Vec<u8>> {
        let mut all = vec![(0, text("n1"))];
        all.extend(present.iter().cloned());
        sparse(&env, "notes", &all)
    };
    let full = note(&[
        (1, text("p1")),
        (2, text("first")),
        (3, RowValue::Crdt(vec![1])),
    ])?;
    let one = |ccid: &str, base: Option<i64>, payload: Vec<u8>| -> CheckResult<PushResult> {
        let req = push3(
            "dev-a",
            vec![commit(ccid, vec![up("notes", "n1", base, payload)])],
        );
        Ok(run(&engine, "alice", req).result(0)?.clone())
    };
    expect_applied(&one("c1", None, full)?, PushResultStatus::Applied, 1)?;
    // A concurrent title edit at 1, then a crdt-only edit at 1: no
    // conflict (crdt columns merge), both land.
    expect_applied(
        &one("c2", Some(1), note(&[(2, text("second"))])?)?,
        PushResultStatus::Applied,
        1,
    )?;
    let calls = env.union.calls.load(std::sync::atomic::Ordering::SeqCst);
    expect_applied(
        &one("c3", Some(1), note(&[(3, RowValue::Crdt(vec![2]))])?)?,
        PushResultStatus::Applied,
        1,
    )?;
    check!(
        env.union.calls.load(std::sync::atomic::Ordering::SeqCst) > calls,
        "the present crdt column was not merged"
    );
    let (values, version, _) = stored_in(&env, "notes", "n1")?;
    check_eq!(
        (values[2].clone(), values[3].clone(), version),
        (text("second"), RowValue::Crdt(vec![1, 2]), 3),
        "(title, doc, version)"
    );
    // A title-only edit leaves the crdt column unmerged and unchanged.
    let calls = env.union.calls.load(std::sync::atomic::Ordering::SeqCst);
    expect_applied(
        &one("c4", None, note(&[(2, text("third"))])?)?,
        PushResultStatus::Applied,
        1,
    )?;
    check_eq!(
        env.union.calls.load(std::sync::atomic::Ordering::SeqCst),
        calls,
        "merges for an update without the crdt column"
    );
    check_eq!(
        stored_in(&env, "notes", "n1")?.0[3],
        RowValue::Crdt(vec![1, 2]),
        "doc after a title-only edit"
    );
    // A full row merges its crdt column as well: the stored bytes are the
    // merged row's, not the pushed ones.
    let full_again = note(&[
        (1, text("p1")),
        (2, text("fourth")),
        (3, RowValue::Crdt(vec![3])),
    ])?;
    expect_applied(&one("c5", None, full_again)?, PushResultStatus::Applied, 1)?;
    let (values, _, _) = stored_in(&env, "notes", "n1")?;
    check_eq!(
        (values[2].clone(), values[3].clone()),
        (text("fourth"), RowValue::Crdt(vec![1, 2, 3])),
        "(title, doc) after a full row"
    );
    Ok(())
}

fn e112_full_rows_stored(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    let engine = env.engine()?;
    let values = task_vals("t1", "p1", "one");
    let pushed = task_full(&env, &values)?;
    let r = upsert3(&engine, "alice", "a1", "t1", None, pushed.clone())?;
    let seq = expect_applied(&r, PushResultStatus::Applied, 1)?;
    let tasks = table(&env, "tasks")?;
    let suffix = codec::full_payload_of_sparse(tasks.columns.len(), &pushed)
        .ok_or_else(|| Failure::new("not a full sparse row"))?;
    let row = env
        .storage
        .get_row(P, "tasks", "t1")?
        .ok_or_else(|| Failure::new("t1 missing"))?;
    check_eq!(
        row.payload.as_slice(),
        suffix,
        "stored payload of a full sparse insert"
    );
    check_eq!(
        row.payload,
        codec::encode_row(tasks, &values)?,
        "the full-row encoding of the values"
    );
    check_eq!(
        commit_at(&env, seq)?.changes[0].payload.as_deref(),
        Some(suffix),
        "change payload of the insert"
    );
    let r = upsert3(
        &engine,
        "alice",
        "a2",
        "t1",
        None,
        task_sparse(&env, "t1", &[(TITLE, text("two"))])?,
    )?;
    let seq = expect_applied(&r, PushResultStatus::Applied, 1)?;
    let mut merged = values.clone();
    merged[TITLE] = text("two");
    let full = codec::encode_row(tasks, &merged)?;
    let row = env
        .storage
        .get_row(P, "tasks", "t1")?
        .ok_or_else(|| Failure::new("t1 missing"))?;
    check_eq!(row.payload, full, "stored payload of a sparse update");
    check_eq!(
        commit_at(&env, seq)?.changes[0].payload.clone(),
        Some(full),
        "change payload of the sparse update"
    );
    Ok(())
}

/// The column versions of `tasks/id` as read by the engine's reader.
fn versions_of(env: &Env, id: &str) -> CheckResult<(Vec<i64>, bool)> {
    let (_, version, stored) = stored(env, id)?;
    let read = ColumnVersions::read(stored.as_deref(), 9, 0, version);
    Ok((read.versions().to_vec(), stored.is_none()))
}

fn e113_column_versions(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    let engine = env.engine()?;
    insert3(&env, &engine, "t1", "p1")?;
    check_eq!(
        versions_of(&env, "t1")?,
        (vec![1; 9], true),
        "after the insert (NULL)"
    );
    let title = task_sparse(&env, "t1", &[(TITLE, text("two"))])?;
    expect_applied(
        &upsert3(&engine, "alice", "a1", "t1", None, title)?,
        PushResultStatus::Applied,
        1,
    )?;
    check_eq!(
        versions_of(&env, "t1")?,
        (vec![2, 1, 2, 1, 1, 1, 1, 1, 1], false),
        "after a sparse update of title"
    );
    let full = task_full(&env, &task_vals("t1", "p1", "three"))?;
    expect_applied(
        &upsert3(&engine, "alice", "a2", "t1", None, full)?,
        PushResultStatus::Applied,
        1,
    )?;
    check_eq!(
        versions_of(&env, "t1")?,
        (vec![3; 9], true),
        "after a full v3 update (NULL)"
    );
    let done = task_sparse(&env, "t1", &[(DONE, RowValue::Boolean(true))])?;
    expect_applied(
        &upsert3(&engine, "alice", "a3", "t1", None, done)?,
        PushResultStatus::Applied,
        1,
    )?;
    check_eq!(
        versions_of(&env, "t1")?,
        (vec![4, 3, 3, 4, 3, 3, 3, 3, 3], false),
        "after a sparse update of done"
    );
    // A v2 full-row write moves every column.
    let req = push_req(
        "dev-v2",
        vec![commit(
            "b1",
            vec![up("tasks", "t1", None, env.task("t1", "p1")?)],
        )],
    );
    expect_applied(
        run(&engine, "alice", req).result(0)?,
        PushResultStatus::Applied,
        1,
    )?;
    check_eq!(
        versions_of(&env, "t1")?,
        (vec![5; 9], true),
        "after a v2 write (NULL)"
    );
    Ok(())
}

fn e114_untrusted_column_versions(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    let engine = env.engine()?;
    // Stored at 5 with bytes saying title at 3 (stale: newest below 5) and
    // with malformed bytes: both read as every column at 5.
    for (id, bytes) in [("t1", vec![2u8, 3]), ("t2", vec![0x81])] {
        let mut row = super::engine_fixture::task_row(&env.schema, id, "p1", 5)?;
        row.column_versions = Some(bytes);
        super::engine_fixture::seed(
            env.storage.as_ref(),
            P,
            &format!("seed-{id}"),
            &[crate::fixtures::Op::upsert("tasks", row)],
        )?;
        let priority = task_sparse(&env, id, &[(PRIORITY, RowValue::Integer(1))])?;
        let unreadable = engine.column_versions_unreadable();
        let r = upsert3(&engine, "alice", &format!("a-{id}"), id, Some(4), priority)?;
        // Only malformed bytes are counted; stale ones are a known writer.
        check_eq!(
            engine.column_versions_unreadable() - unreadable,
            u64::from(id == "t2"),
            "unreadable column versions counted for {id}"
        );
        let (version, _, columns) = conflict_of(&r)?;
        check_eq!(
            (version, columns),
            (5, Some(bitmap9(&[PRIORITY]))),
            "conflict of {id}"
        );
        // At the row's version the write applies.
        let priority = task_sparse(&env, id, &[(PRIORITY, RowValue::Integer(1))])?;
        let r = upsert3(&engine, "alice", &format!("b-{id}"), id, Some(5), priority)?;
        expect_applied(&r, PushResultStatus::Applied, 1)?;
    }
    Ok(())
}

fn e115_sparse_decode_checks(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    let engine = env.engine()?;
    insert3(&env, &engine, "t1", "p1")?;
    // key + title: presence [0b101, 0], nulls [0], "t1", "x".
    let base = task_sparse(&env, "t1", &[(TITLE, text("x"))])?;
    let key_only = task_sparse(&env, "t1", &[])?;
    let mut p1 = base.clone();
    p1[1] |= 0b10;
    let mut p2 = base.clone();
    p2[0] &= !1;
    let mut p3 = base.clone();
    p3[2] |= 0b100;
    let mut p4 = vec![0b101, 0, 0b10];
    p4.extend_from_slice(key_only.get(3..).unwrap_or_default());
    let mut p5 = task_sparse(&env, "t1", &[(DONE, RowValue::Boolean(false))])?;
    if let Some(last) = p5.last_mut() {
        *last = 2;
    }
    let mut p6 = base.clone();
    p6.push(0);
    // Cut short: inside the null bitmap (its length follows from the
    // present columns: one byte for two, two for all nine) is P3; after
    // it, in the values, P5.
    let cut = |payload: &[u8], len: usize| payload.get(..len).unwrap_or_default().to_vec();
    let full = task_full(&env, &task_vals("t1", "p1", "x"))?;
    let cases = [
        (p1, "sparse row: presence padding bit set"),
        (vec![0b1], "sparse row: presence padding bit set"),
        (p2, "sparse row: primary key absent"),
        (p3, "sparse row: null padding bit set"),
        (p4, "sparse row: null in a non-nullable column"),
        (p5, "payload does not decode"),
        (p6, "payload does not decode"),
        (cut(&base, 2), "sparse row: null padding bit set"),
        (cut(&base, 3), "payload does not decode"),
        (cut(&full, 3), "sparse row: null padding bit set"),
        (cut(&full, 4), "payload does not decode"),
    ];
    let mut commits: Vec<_> = cases
        .iter()
        .enumerate()
        .map(|(n, (payload, _))| {
            commit(
                &format!("bad-{n}"),
                vec![up("tasks", "t1", None, payload.clone())],
            )
        })
        .collect();
    commits.push(commit("good", vec![up("tasks", "t1", None, base)]));
    let round = run(&engine, "alice", push3("dev-a", commits));
    for (n, (_, message)) in cases.iter().enumerate() {
        let r = round.result(n)?;
        check_eq!(
            rejected_message(r, "sync.invalid_request")?.as_str(),
            *message,
            "message of case {n}"
        );
    }
    expect_applied(round.result(cases.len())?, PushResultStatus::Applied, 1)?;
    Ok(())
}

fn e116_mixed_versions(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    let engine = env.engine()?;
    let v2 = |ccid: &str, base: Option<i64>, title: &str| -> CheckResult<PushResult> {
        let payload = super::engine_fixture::task_payload(&env.schema, "t1", "p1", title)?;
        let req = push_req(
            "dev-v2",
            vec![commit(ccid, vec![up("tasks", "t1", base, payload)])],
        );
        Ok(run(&engine, "alice", req).result(0)?.clone())
    };
    expect_applied(&v2("a1", None, "one")?, PushResultStatus::Applied, 1)?;
    expect_applied(&v2("a2", Some(1), "two")?, PushResultStatus::Applied, 1)?;
    // The v2 write moved every column: a v3 write at 1 conflicts on
    // whatever it presents.
    let title = task_sparse(&env, "t1", &[(TITLE, text("v3"))])?;
    let (_, _, columns) = conflict_of(&upsert3(&engine, "alice", "b1", "t1", Some(1), title)?)?;
    check_eq!(
        columns,
        Some(bitmap9(&[TITLE])),
        "conflict of a v3 title write"
    );
    let priority = task_sparse(&env, "t1", &[(PRIORITY, RowValue::Integer(2))])?;
    let (_, _, columns) = conflict_of(&upsert3(&engine, "alice", "b2", "t1", Some(1), priority)?)?;
    check_eq!(
        columns,
        Some(bitmap9(&[PRIORITY])),
        "conflict of a v3 priority write"
    );
    // A v3 sparse write, then a stale v2 write conflicts on the row.
    let title = task_sparse(&env, "t1", &[(TITLE, text("v3"))])?;
    expect_applied(
        &upsert3(&engine, "alice", "b3", "t1", Some(2), title)?,
        PushResultStatus::Applied,
        1,
    )?;
    let r = v2("a3", Some(2), "stale")?;
    let (version, _) = expect_conflict(&r, 0)?;
    check_eq!(version, 3, "serverVersion of the v2 conflict");
    check!(
        matches!(
            rejected_record(&r)?,
            PushOperationResult::Conflict {
                conflict_columns: None,
                ..
            }
        ),
        "a v2 conflict carries conflictColumns: {r:?}"
    );
    // Both read the merged row.
    let (values, _, _) = stored(&env, "t1")?;
    check_eq!(values[TITLE], text("v3"), "title");
    Ok(())
}

fn e117_v2_rules_unchanged(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    let engine = env.engine()?;
    insert3(&env, &engine, "t1", "p1")?;
    // A v2 update that changes the scope column keeps the stored one.
    let moved = super::engine_fixture::task_payload(&env.schema, "t1", "p2", "moved")?;
    let req = push_req(
        "dev-root",
        vec![commit("a1", vec![up("tasks", "t1", None, moved)])],
    );
    expect_applied(
        run(&engine, "root", req).result(0)?,
        PushResultStatus::Applied,
        1,
    )?;
    let (values, _, _) = stored(&env, "t1")?;
    check_eq!(
        (values[1].clone(), values[TITLE].clone()),
        (text("p1"), text("moved")),
        "(project_id, title)"
    );
    // A v3 delete, then a v2 unversioned upsert re-creates (LastWriteWins).
    delete3(&engine, "alice", "d1", "t1")?;
    let req = env.insert_req("dev-v2", "a2", "t1", "p1")?;
    expect_applied(
        run(&engine, "alice", req).result(0)?,
        PushResultStatus::Applied,
        1,
    )?;
    check_eq!(stored(&env, "t1")?.1, 1, "re-created version");
    // Under DeleteWins a v2 client gets row_missing, v3 row_deleted.
    let strict = env.engine_with(|c| c.delete_policy = sync_engine::DeletePolicy::DeleteWins)?;
    delete3(&strict, "alice", "d2", "t1")?;
    let req = env.insert_req("dev-v2", "a3", "t1", "p1")?;
    expect_rejected(run(&strict, "alice", req).result(0)?, 0, "sync.row_missing")?;
    let full = task_full(&env, &task_vals("t1", "p1", "late"))?;
    expect_rejected(
        &upsert3(&strict, "alice", "b1", "t1", None, full)?,
        0,
        "sync.row_deleted",
    )?;
    Ok(())
}

fn e118_replay_across_versions(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    let engine = env.engine()?;
    super::engine_fixture::seed_task(env.storage.as_ref(), &env.schema, "t1", "p1", 3)?;
    let v2_stale =
        || -> CheckResult<Operation> { Ok(up("tasks", "t1", Some(2), env.task("t1", "p1")?)) };
    let v2_req = |ccid: &str, op: Operation| push_req("dev-a", vec![commit(ccid, vec![op])]);
    // A conflict answered at v2, replayed at v3.
    let first = run(&engine, "alice", v2_req("c1", v2_stale()?))
        .result(0)?
        .clone();
    expect_conflict(&first, 0)?;
    let replay = run(&engine, "alice", v3(v2_req("c1", v2_stale()?)))
        .result(0)?
        .clone();
    let (version, row, columns) = conflict_of(&replay)?;
    let (first_version, first_row, first_columns) = conflict_of(&first)?;
    check_eq!(
        (version, row),
        (first_version, first_row),
        "(serverVersion, serverRow) replayed"
    );
    check_eq!(first_columns, None, "conflictColumns at v2");
    check_eq!(
        columns,
        Some(bitmap9(&[1, 2, 3, 4, 5, 6, 7, 8])),
        "synthesized conflictColumns"
    );
    // On a table with a crdt column the synthesized bitmap leaves it out
    // (notes: id, project_id, title, doc).
    let note = |doc: &[u8]| note_payload(&env.schema, "n1", "p1", None, doc);
    let seeded = run(
        &engine,
        "alice",
        v2_req("n-c1", up("notes", "n1", None, note(&[1])?)),
    )
    .result(0)?
    .clone();
    expect_applied(&seeded, PushResultStatus::Applied, 1)?;
    let stale_note = || -> CheckResult<Operation> { Ok(up("notes", "n1", Some(0), note(&[2])?)) };
    expect_conflict(
        run(&engine, "alice", v2_req("n-c2", stale_note()?)).result(0)?,
        0,
    )?;
    let note_replay = run(&engine, "alice", v3(v2_req("n-c2", stale_note()?)))
        .result(0)?
        .clone();
    check_eq!(
        conflict_of(&note_replay)?.2,
        Some(vec![0b0000_0110]),
        "synthesized conflictColumns of a table with a crdt column (project_id, title)"
    );
    // A v3 conflict keeps its own bitmap when replayed at v3 and drops it
    // at v2.
    let title = task_sparse(&env, "t1", &[(TITLE, text("x"))])?;
    let v3_first = upsert3(&engine, "alice", "c2", "t1", Some(0), title.clone())?;
    check_eq!(
        conflict_of(&v3_first)?.2,
        Some(bitmap9(&[TITLE])),
        "v3 conflictColumns"
    );
    let v3_again = upsert3(&engine, "alice", "c2", "t1", Some(0), title.clone())?;
    check_eq!(
        conflict_of(&v3_again)?.2,
        Some(bitmap9(&[TITLE])),
        "v3 conflictColumns replayed at v3"
    );
    let req = push_req(
        "dev-alice",
        vec![commit("c2", vec![up("tasks", "t1", Some(0), title)])],
    );
    let down = run(&engine, "alice", req).result(0)?.clone();
    check_eq!(
        conflict_of(&down)?.2,
        None,
        "conflictColumns replayed at v2"
    );
    // An applied commit replays identically in both versions.
    let applied = run(
        &engine,
        "alice",
        v2_req("c3", up("tasks", "t1", None, env.task("t1", "p1")?)),
    )
    .result(0)?
    .clone();
    let seq = expect_applied(&applied, PushResultStatus::Applied, 1)?;
    let again = run(
        &engine,
        "alice",
        v3(v2_req("c3", up("tasks", "t1", None, env.task("t1", "p1")?))),
    )
    .result(0)?
    .clone();
    check_eq!(
        expect_applied(&again, PushResultStatus::Cached, 1)?,
        seq,
        "cached commitSeq"
    );
    Ok(())
}

fn e120_blobs_of_the_merged_row(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    let engine = env.engine()?;
    let blob = |b: &str| RowValue::BlobRef(serde_json::json!({ "blobId": b }).to_string());
    let mut values = task_vals("t1", "p1", "one");
    values[ATTACHMENT] = blob("b1");
    expect_applied(
        &upsert3(
            &engine,
            "alice",
            "a1",
            "t1",
            None,
            task_full(&env, &values)?,
        )?,
        PushResultStatus::Applied,
        1,
    )?;
    // The stored row references b1; a title edit keeps it and the check
    // passes over the merged row.
    let calls = env.blobs.calls.load(std::sync::atomic::Ordering::SeqCst);
    let title = task_sparse(&env, "t1", &[(TITLE, text("two"))])?;
    expect_applied(
        &upsert3(&engine, "alice", "a2", "t1", None, title)?,
        PushResultStatus::Applied,
        1,
    )?;
    check!(
        env.blobs.calls.load(std::sync::atomic::Ordering::SeqCst) > calls,
        "the absent blob_ref column was not checked"
    );
    check_eq!(
        env.storage.list_rows_referencing_blob(P, "b1")?.len(),
        1,
        "rows referencing b1 after an edit without the blob_ref column"
    );
    // A missing blob in a present column is refused.
    let missing = task_sparse(&env, "t1", &[(ATTACHMENT, blob("nope"))])?;
    expect_rejected(
        &upsert3(&engine, "alice", "a3", "t1", None, missing)?,
        0,
        "blob.not_found",
    )?;
    Ok(())
}

fn e111_validators_see_the_merged_row(ctx: &mut Ctx<'_>) -> CheckResult {
    use std::sync::{Arc, Mutex};

    use super::engine_doubles::{CommitCheck, RowCheck};
    type Seen = Option<(
        Option<sync_engine::RowValues>,
        Option<sync_engine::RowValues>,
    )>;

    let env = env(ctx)?;
    let rows = RowCheck::accept();
    let evidence: Arc<Mutex<Seen>> = Arc::new(Mutex::new(None));
    let log = evidence.clone();
    let commits = CommitCheck::new(move |input, _| {
        if let (Ok(mut log), Some(op)) = (log.lock(), input.operations.first()) {
            *log = Some((op.row.clone(), op.stored.clone()));
        }
        Ok(())
    });
    let engine = env.engine_with(|c| {
        c.row_validators.insert("tasks".to_owned(), rows.clone());
        c.commit_validator = Some(commits.clone());
    })?;
    insert3(&env, &engine, "t1", "p1")?;
    let title = task_sparse(&env, "t1", &[(TITLE, text("two"))])?;
    expect_applied(
        &upsert3(&engine, "alice", "a1", "t1", None, title)?,
        PushResultStatus::Applied,
        1,
    )?;
    let named = |values: Vec<RowValue>| -> CheckResult<sync_engine::RowValues> {
        let tasks = table(&env, "tasks")?;
        Ok(tasks
            .columns
            .iter()
            .map(|c| c.name.clone())
            .zip(values)
            .collect())
    };
    let before = named(task_vals("t1", "p1", "title t1"))?;
    let mut after_values = task_vals("t1", "p1", "title t1");
    after_values[TITLE] = text("two");
    let after = named(after_values)?;
    let seen = rows.seen();
    let last = seen
        .last()
        .ok_or_else(|| Failure::new("the row validator was not called"))?;
    check_eq!(last.row.as_ref(), Some(&after), "row validator's row");
    check_eq!(
        last.stored.as_ref(),
        Some(&before),
        "row validator's stored row"
    );
    let seen = evidence.lock().map(|e| e.clone()).unwrap_or_default();
    check_eq!(
        seen,
        Some((Some(after), Some(before))),
        "commit validator's evidence (row, stored)"
    );
    Ok(())
}
