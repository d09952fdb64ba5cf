//! §4 Commit log and transactions, C-092…C-105.

use sync_core::{
    Capability, ErrorCode, NewChange, NewCommit, ScopeActivityQuery, StorageTransaction,
};

use crate::check::{expect_code, CheckDef, CheckResult, Failure};
use crate::context::{Ctx, NOW};
use crate::fixtures::{fix1, fix1_at, push, task, Op};
use crate::harness::RawFilter;
use crate::registry::check;
use crate::{check, check_eq};

use super::support_rows::{commit_of, upsert_change};

/// Group name.
pub(crate) const GROUP: &str = "commit-log";

/// The checks of this group.
pub(crate) const CHECKS: &[CheckDef] = &[
    check(
        GROUP,
        "C-092",
        "three appends in one partition are 1, 2, 3",
        c092_dense_appends,
    ),
    check(
        GROUP,
        "C-093",
        "first append in two partitions is 1 in both",
        c093_partitions_independent,
    ),
    check(
        GROUP,
        "C-094",
        "a rolled-back append consumes no commit_seq",
        c094_rollback_releases_seq,
    ),
    check(
        GROUP,
        "C-095",
        "an append with no changes consumes a commit_seq",
        c095_empty_commit_consumes_seq,
    ),
    check(
        GROUP,
        "C-096",
        "an append stores writer_version = ensured_version()",
        c096_writer_version_stamped,
    ),
    check(
        GROUP,
        "C-097",
        "a dropped transaction rolls back and frees the writer",
        c097_drop_rolls_back,
    ),
    check(
        GROUP,
        "C-098",
        "pool get_row does not see a same-thread staged upsert",
        c098_pool_reads_committed_only,
    ),
    check(
        GROUP,
        "C-099",
        "a change on an unknown table is unknown_table and does not poison",
        c099_unknown_table_change,
    ),
    check(
        GROUP,
        "C-100",
        "upsert without payload / delete with payload is invalid_change",
        c100_inconsistent_changes,
    ),
    check(
        GROUP,
        "C-101",
        "begin(\"\") is invalid_partition",
        c101_begin_empty_partition,
    ),
    check(
        GROUP,
        "C-102",
        "two changes sharing a scope make one change-scope entry",
        c102_shared_scope_one_entry,
    )
    .needs(Capability::Admin),
    check(
        GROUP,
        "C-103",
        "a delete change leaves a tombstone; clear_tombstone removes it",
        c103_tombstones,
    ),
    check(
        GROUP,
        "C-104",
        "after a poisoning error writes and commit are transaction_aborted",
        c104_poisoned_refuses_work,
    ),
    check(
        GROUP,
        "C-105",
        "rollback of a poisoned transaction is Ok",
        c105_poisoned_rollback_ok,
    ),
];

fn empty_commit(id: &str) -> NewCommit {
    NewCommit {
        client_id: "client-1".to_owned(),
        client_commit_id: id.to_owned(),
        actor_id: "actor-1".to_owned(),
        created_at_ms: NOW,
        changes: Vec::new(),
    }
}

fn append_one(
    storage: &dyn sync_core::ServerStorage,
    partition: &str,
    id: &str,
) -> CheckResult<i64> {
    let mut tx = storage.begin(partition)?;
    tx.lock_partition_for_push()?;
    let seq = tx.append_commit(&empty_commit(id))?;
    tx.commit()?;
    Ok(seq)
}

fn c092_dense_appends(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.ensured(&fix1()?)?;
    let seqs = [
        append_one(storage.as_ref(), "p1", "a")?,
        append_one(storage.as_ref(), "p1", "b")?,
        append_one(storage.as_ref(), "p1", "c")?,
    ];
    check_eq!(seqs, [1, 2, 3], "commit seqs");
    check_eq!(storage.get_max_commit_seq("p1")?, 3, "get_max_commit_seq");
    Ok(())
}

fn c093_partitions_independent(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.ensured(&fix1()?)?;
    check_eq!(
        append_one(storage.as_ref(), "p1", "a")?,
        1,
        "first seq in p1"
    );
    check_eq!(
        append_one(storage.as_ref(), "p2", "a")?,
        1,
        "first seq in p2"
    );
    Ok(())
}

fn c094_rollback_releases_seq(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.ensured(&fix1()?)?;
    let mut tx = storage.begin("p1")?;
    tx.lock_partition_for_push()?;
    check_eq!(tx.append_commit(&empty_commit("a"))?, 1, "staged seq");
    tx.rollback()?;
    check_eq!(storage.get_max_commit_seq("p1")?, 0, "max after rollback");
    check_eq!(append_one(storage.as_ref(), "p1", "b")?, 1, "next append");
    Ok(())
}

/// Poisons `tx` with a unique collision on `tasks_by_project_title`.
fn poison(tx: &mut dyn StorageTransaction, schema: &sync_core::CompiledSchema) -> CheckResult {
    tx.upsert_row("tasks", &task(schema, "t1", "p1", "same")?, Some(0))?;
    expect_code(
        tx.upsert_row("tasks", &task(schema, "t2", "p1", "same")?, Some(1)),
        ErrorCode::ConstraintViolation,
        "unique collision on (project_id, title)",
    )?;
    Ok(())
}

fn c095_empty_commit_consumes_seq(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.ensured(&fix1()?)?;
    let mut tx = storage.begin("p1")?;
    tx.lock_partition_for_push()?;
    check_eq!(
        tx.append_commit(&empty_commit("a"))?,
        1,
        "seq of the empty commit"
    );
    check_eq!(tx.max_commit_seq()?, 1, "tx max_commit_seq");
    tx.commit()?;
    check_eq!(storage.get_max_commit_seq("p1")?, 1, "get_max_commit_seq");
    check_eq!(append_one(storage.as_ref(), "p1", "b")?, 2, "next append");
    Ok(())
}

fn c096_writer_version_stamped(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.ensured(&fix1_at(7)?)?;
    check_eq!(storage.ensured_version(), Some(7), "ensured_version");
    let mut tx = storage.begin("p1")?;
    check_eq!(tx.writer_version(), 7, "tx writer_version");
    tx.lock_partition_for_push()?;
    let seq = tx.append_commit(&empty_commit("a"))?;
    tx.commit()?;
    let stored = ctx.raw()?.read_text(
        "sync_commits",
        "writer_version",
        RawFilter::eq("partition", "p1").and("commit_seq", &seq.to_string()),
    )?;
    check_eq!(
        stored.as_deref(),
        Some("7"),
        "stored sync_commits.writer_version"
    );
    Ok(())
}

fn c097_drop_rolls_back(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let storage = ctx.ensured(&schema)?;
    let row = task(&schema, "t1", "p1", "dropped")?;
    {
        let mut tx = storage.begin("p1")?;
        tx.lock_partition_for_push()?;
        tx.upsert_row("tasks", &row, Some(0))?;
        tx.append_commit(&commit_of("a", vec![upsert_change("tasks", &row)]))?;
        tx.put_push_result("client-1", "a", &sync_core::StoredPushResult::applied(1))?;
        drop(tx);
    }
    check_eq!(
        storage.get_row("p1", "tasks", "t1")?,
        None,
        "row after drop"
    );
    check_eq!(
        storage.get_max_commit_seq("p1")?,
        0,
        "max_commit_seq after drop"
    );
    check_eq!(
        storage.get_push_result("p1", "client-1", "a")?,
        None,
        "push result after drop"
    );
    check_eq!(append_one(storage.as_ref(), "p1", "b")?, 1, "next append");
    Ok(())
}

fn c098_pool_reads_committed_only(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let storage = ctx.ensured(&schema)?;
    let row = task(&schema, "t1", "p1", "staged")?;
    let mut tx = storage.begin("p1")?;
    tx.lock_partition_for_push()?;
    tx.upsert_row("tasks", &row, Some(0))?;
    check_eq!(
        tx.get_row("tasks", "t1")?,
        Some(row.clone()),
        "tx get_row of the staged row"
    );
    check_eq!(
        storage.get_row("p1", "tasks", "t1")?,
        None,
        "pool get_row while staged"
    );
    tx.commit()?;
    check_eq!(
        storage.get_row("p1", "tasks", "t1")?,
        Some(row),
        "pool get_row after commit"
    );
    Ok(())
}

fn c099_unknown_table_change(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let storage = ctx.ensured(&schema)?;
    let row = task(&schema, "t1", "p1", "x")?;
    let mut tx = storage.begin("p1")?;
    tx.lock_partition_for_push()?;
    let bad = commit_of("a", vec![upsert_change("nope", &row)]);
    expect_code(
        tx.append_commit(&bad),
        ErrorCode::UnknownTable,
        "append with table nope",
    )?;
    check_eq!(
        tx.append_commit(&empty_commit("b"))?,
        1,
        "append after the refusal"
    );
    tx.commit()?;
    check_eq!(storage.get_max_commit_seq("p1")?, 1, "get_max_commit_seq");
    Ok(())
}

fn c100_inconsistent_changes(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let storage = ctx.ensured(&schema)?;
    let row = task(&schema, "t1", "p1", "x")?;
    let no_payload = NewChange {
        payload: None,
        ..upsert_change("tasks", &row)
    };
    let delete_with_payload = NewChange {
        payload: Some(row.payload.clone()),
        ..NewChange::delete("tasks", "t1", row.scopes.clone())
    };
    let mut tx = storage.begin("p1")?;
    tx.lock_partition_for_push()?;
    for (what, change) in [
        ("upsert without payload", no_payload),
        ("delete with payload", delete_with_payload),
    ] {
        expect_code(
            tx.append_commit(&commit_of("a", vec![change])),
            ErrorCode::InvalidChange,
            what,
        )?;
    }
    tx.rollback()?;
    check_eq!(storage.get_max_commit_seq("p1")?, 0, "get_max_commit_seq");
    Ok(())
}

fn c101_begin_empty_partition(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.ensured(&fix1()?)?;
    expect_code(
        storage.begin("").map(|_| ()),
        ErrorCode::InvalidPartition,
        "begin(\"\")",
    )?;
    Ok(())
}

fn c102_shared_scope_one_entry(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let storage = ctx.ensured(&schema)?;
    let ops = [
        Op::upsert("tasks", task(&schema, "t1", "pA", "one")?),
        Op::upsert("tasks", task(&schema, "t2", "pA", "two")?),
    ];
    let seq = push(storage.as_ref(), "p1", "client-1", "a", &ops)?.seq()?;
    let entries = ctx.raw()?.count(
        "sync_change_scopes",
        RawFilter::eq("partition", "p1")
            .and("tbl", "tasks")
            .and("var", "project_id")
            .and("value", "pA"),
    )?;
    check_eq!(
        entries,
        1,
        "sync_change_scopes entries for (tasks, project_id, pA)"
    );
    let activity = storage.scope_activity(
        "p1",
        &ScopeActivityQuery {
            variable: "project_id".to_owned(),
            value: "pA".to_owned(),
            limit: 10,
        },
    )?;
    let summary: Vec<(i64, &str, i64)> = activity
        .iter()
        .map(|a| (a.commit_seq, a.table.as_str(), a.change_count))
        .collect();
    check_eq!(
        summary,
        [(seq, "tasks", 2)],
        "scope_activity (commit_seq, table, change_count)"
    );
    Ok(())
}

fn c103_tombstones(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let storage = ctx.ensured(&schema)?;
    push(
        storage.as_ref(),
        "p1",
        "client-1",
        "a",
        &[Op::upsert("tasks", task(&schema, "t1", "p1", "x")?)],
    )?;

    let mut tx = storage.begin("p1")?;
    tx.lock_partition_for_push()?;
    tx.delete_row("tasks", "t1")?;
    let delete = NewChange::delete(
        "tasks",
        "t1",
        crate::fixtures::scopes(&[("project_id", "p1")]),
    );
    let seq = tx.append_commit(&commit_of("b", vec![delete]))?;
    check_eq!(
        tx.get_tombstone_seq("tasks", "t1")?,
        Some(seq),
        "tombstone inside the deleting transaction"
    );
    tx.commit()?;

    let mut tx = storage.begin("p1")?;
    check_eq!(
        tx.get_tombstone_seq("tasks", "t1")?,
        Some(seq),
        "tombstone after commit"
    );
    check_eq!(
        tx.get_tombstone_seq("tasks", "t2")?,
        None,
        "tombstone of a never-deleted row"
    );
    tx.clear_tombstone("tasks", "t1")?;
    check_eq!(
        tx.get_tombstone_seq("tasks", "t1")?,
        None,
        "tombstone after clear_tombstone"
    );
    tx.commit()?;

    let mut tx = storage.begin("p1")?;
    check_eq!(
        tx.get_tombstone_seq("tasks", "t1")?,
        None,
        "tombstone after the clear committed"
    );
    tx.rollback()?;
    Ok(())
}

fn c104_poisoned_refuses_work(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let storage = ctx.ensured(&schema)?;
    let mut tx = storage.begin("p1")?;
    tx.lock_partition_for_push()?;
    poison(tx.as_mut(), &schema)?;
    expect_code(
        tx.upsert_row("tasks", &task(&schema, "t3", "p1", "other")?, Some(2)),
        ErrorCode::TransactionAborted,
        "upsert_row after poison",
    )?;
    expect_code(
        tx.append_commit(&empty_commit("a")),
        ErrorCode::TransactionAborted,
        "append_commit after poison",
    )?;
    expect_code(
        tx.commit(),
        ErrorCode::TransactionAborted,
        "commit after poison",
    )?;
    check_eq!(
        storage.get_row("p1", "tasks", "t1")?,
        None,
        "row staged before the poison"
    );
    check_eq!(storage.get_max_commit_seq("p1")?, 0, "get_max_commit_seq");
    check_eq!(append_one(storage.as_ref(), "p1", "b")?, 1, "next append");
    Ok(())
}

fn c105_poisoned_rollback_ok(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let storage = ctx.ensured(&schema)?;
    let mut tx = storage.begin("p1")?;
    tx.lock_partition_for_push()?;
    poison(tx.as_mut(), &schema)?;
    tx.rollback()
        .map_err(|e| Failure::new(format!("rollback of a poisoned transaction: {e:?}")))?;
    check_eq!(
        storage.get_row("p1", "tasks", "t1")?,
        None,
        "row after rollback"
    );
    check_eq!(append_one(storage.as_ref(), "p1", "b")?, 1, "next append");
    check!(
        storage.get_row("p1", "tasks", "t2")?.is_none(),
        "colliding row must be absent"
    );
    Ok(())
}
