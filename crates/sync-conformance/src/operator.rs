//! Checks of the operator reads the contract adds beyond the checklist
//! (`docs/decisions.md`, "Contract additions"): `read_commits` and
//! `inspect_table_rows`, which work on a storage instance that never ensured
//! a schema. They are not checklist IDs, so they are not in the registry; a
//! dialect's test calls them with its harness, like the reference checks.

use sync_core::{ChangeOp, ErrorCode, NewChange, NewCommit, StoredRow};

use crate::check::{expect_code, CheckResult};
use crate::context::{Ctx, NOW};
use crate::fixtures::{fix1, push, task, Op};
use crate::harness::Harness;
use crate::{check, check_eq};

fn upsert_change(row: &StoredRow) -> NewChange {
    NewChange::upsert(
        "tasks",
        row.row_id.clone(),
        row.server_version,
        row.scopes.clone(),
        row.payload.clone(),
    )
}

/// `read_commits` lists whole commits (every change of every table, empty
/// commits too) oldest first, pages by `after_seq`/`limit`, reads unknown
/// partitions as empty, validates partition, `after_seq` and limit (1..=1000)
/// in that order — on an instance that never ensured a schema.
pub fn check_read_commits(harness: &dyn Harness) -> CheckResult {
    let mut ctx = Ctx::new(harness);
    let schema = fix1()?;
    let writer = ctx.ensured(&schema)?;
    let a = task(&schema, "a", "p", "A")?;
    let b = task(&schema, "b", "p", "B")?;
    push(
        writer.as_ref(),
        "p1",
        "c1",
        "1",
        &[
            Op::upsert("tasks", a.clone()),
            Op::upsert("tasks", b.clone()),
        ],
    )?;
    let mut tx = writer.begin("p1")?;
    tx.lock_partition_for_push()?;
    tx.delete_row("tasks", "a")?;
    tx.append_commit(&NewCommit {
        client_id: "c1".to_owned(),
        client_commit_id: "2".to_owned(),
        actor_id: "actor:c1".to_owned(),
        created_at_ms: NOW,
        changes: vec![NewChange::delete("tasks", "a", a.scopes.clone())],
    })?;
    tx.commit()?;
    push(writer.as_ref(), "p1", "c1", "3", &[])?;

    let operator = ctx.open()?; // never ensured
    let commits = operator.read_commits("p1", 0, 1000)?;
    let seqs: Vec<i64> = commits.iter().map(|c| c.commit_seq).collect();
    check_eq!(seqs, [1, 2, 3], "commit seqs");
    check_eq!(commits[0].writer_version, Some(1), "writer version");
    check_eq!(
        commits[0].changes,
        [upsert_change(&a), upsert_change(&b)],
        "changes of commit 1, in index order"
    );
    check_eq!(commits[1].changes[0].op, ChangeOp::Delete, "op of commit 2");
    check_eq!(commits[1].changes[0].payload, None, "payload of a delete");
    check!(
        commits[2].changes.is_empty(),
        "an empty commit is listed with no changes"
    );
    let page = operator.read_commits("p1", 1, 1)?;
    let page_seqs: Vec<i64> = page.iter().map(|c| c.commit_seq).collect();
    check_eq!(page_seqs, [2], "page after 1, limit 1");
    check!(
        operator.read_commits("other", 0, 10)?.is_empty(),
        "an unknown partition reads as empty"
    );

    expect_code(
        operator.read_commits("", -1, 0),
        ErrorCode::InvalidPartition,
        "empty partition first",
    )?;
    expect_code(
        operator.read_commits("p1", -1, 0),
        ErrorCode::InvalidArgument,
        "negative after_seq",
    )?;
    expect_code(
        operator.read_commits("p1", 0, 0),
        ErrorCode::InvalidLimit,
        "limit 0",
    )?;
    expect_code(
        operator.read_commits("p1", 0, 1001),
        ErrorCode::InvalidLimit,
        "limit 1001",
    )?;
    Ok(())
}

/// `inspect_table_rows` reads a table named in the stored layouts in byte
/// order with an exclusive resume key, refuses other names (internal tables
/// included) and any table of a database without layouts, and validates
/// partition, then limit, then table — on an instance that never ensured.
pub fn check_inspect_table_rows(harness: &dyn Harness) -> CheckResult {
    let mut ctx = Ctx::new(harness);
    let schema = fix1()?;
    let writer = ctx.ensured(&schema)?;
    let ops = ["c", "a", "B", "b"]
        .iter()
        .map(|id| Ok(Op::upsert("tasks", task(&schema, id, "p", id)?)))
        .collect::<CheckResult<Vec<_>>>()?;
    push(writer.as_ref(), "p1", "c1", "1", &ops)?;

    let operator = ctx.open()?; // never ensured
    let listed = operator.inspect_table_rows("p1", "tasks", None, 3)?;
    let ids: Vec<&str> = listed.iter().map(|r| r.row_id.as_str()).collect();
    check_eq!(ids, ["B", "a", "b"], "first page in byte order");
    check_eq!(listed[1], task(&schema, "a", "p", "a")?, "row a read back");
    let rest = operator.inspect_table_rows("p1", "tasks", Some("b"), 3)?;
    let rest_ids: Vec<&str> = rest.iter().map(|r| r.row_id.as_str()).collect();
    check_eq!(rest_ids, ["c"], "page after b");

    expect_code(
        operator.inspect_table_rows("p1", "nope", None, 2),
        ErrorCode::UnknownTable,
        "unknown table",
    )?;
    expect_code(
        operator.inspect_table_rows("p1", "sync_commits", None, 2),
        ErrorCode::UnknownTable,
        "internal table",
    )?;
    expect_code(
        operator.inspect_table_rows("", "tasks", None, 2),
        ErrorCode::InvalidPartition,
        "empty partition",
    )?;
    expect_code(
        operator.inspect_table_rows("p1", "nope", None, 0),
        ErrorCode::InvalidLimit,
        "limit before table",
    )?;

    let mut empty = Ctx::new(harness);
    let fresh = empty.open()?;
    expect_code(
        fresh.inspect_table_rows("p1", "tasks", None, 2),
        ErrorCode::UnknownTable,
        "database without layouts",
    )?;
    Ok(())
}
