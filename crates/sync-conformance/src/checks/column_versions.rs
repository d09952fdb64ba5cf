//! Column versions and tombstones in storage (wire version 3,
//! `docs/design/wire-v3.md` §3.1–§3.5), C-366…C-369, C-371…C-373, C-375
//! (beyond the checklist).
//!
//! Every application table has a nullable bytes column
//! `_sync_column_versions`; storage writes it with the row and returns it
//! byte-identical from `get_row`, opaque to it. A table written before the
//! column existed gets it at the same schema version, with no row
//! rewritten.

use sync_core::{EnsureOutcome, ErrorCode, NewChange, ServerStorage, StoredRow};

use crate::check::{expect_code, expect_detail, CheckDef, CheckResult, Failure};
use crate::context::Ctx;
use crate::fixtures::{fix1, push, task, Op};
use crate::registry::check;
use crate::{check, check_eq};

use super::support_lifecycle::{fix1_variant, no_opts, push_column, seed_tasks, TASKS};

/// Group name.
pub(crate) const GROUP: &str = "column-versions";

/// The checks of this group.
pub(crate) const CHECKS: &[CheckDef] = &[
    check(
        GROUP,
        "C-366",
        "a fresh application table has _sync_column_versions: the dialect's bytes type, nullable, last",
        c366_fresh_column,
    ),
    check(
        GROUP,
        "C-367",
        "upsert_row then get_row returns the column versions byte-identical; None stays None; an update replaces them",
        c367_round_trip,
    ),
    check(
        GROUP,
        "C-368",
        "a table without _sync_column_versions opens at the same version: the column is added, rows unchanged and NULL, the marker unchanged, a second open changes nothing",
        c368_legacy_upgrade,
    ),
    check(
        GROUP,
        "C-369",
        "_sync_column_versions of another type is physical_layout_mismatch (reason type, expected, actual); nothing written",
        c369_wrong_type,
    ),
    check(
        GROUP,
        "C-371",
        "a schema bump that re-encodes payloads leaves column versions untouched",
        c371_bump_keeps_versions,
    ),
    check(
        GROUP,
        "C-372",
        "get_delete_scopes returns the scopes of the row's delete change in the tombstone's commit while it is retained, None for a commit without that delete and after pruning past it; the front checks its arguments",
        c372_delete_scopes,
    ),
    check(
        GROUP,
        "C-373",
        "the front refuses empty or oversized column versions (invalid_argument), before any write",
        c373_front_bounds,
    ),
    check(
        GROUP,
        "C-375",
        "a commit that deletes a row and writes it again leaves no tombstone of it; one that writes then deletes leaves one, across append batches too",
        c375_tombstone_of_the_last_change,
    ),
];

const PARTITION: &str = "p1";
const COLUMN: &str = "_sync_column_versions";

/// Writes `row` (with a commit) in one push transaction.
fn write(storage: &dyn ServerStorage, row: &StoredRow, key: &str) -> CheckResult {
    let mut tx = storage.begin(PARTITION)?;
    tx.lock_partition_for_push()?;
    tx.upsert_row("tasks", row, Some(0))?;
    tx.append_commit(&super::support_lifecycle::one_change_commit(
        key, "tasks", row,
    ))?;
    tx.commit()?;
    Ok(())
}

fn stored(storage: &dyn ServerStorage, id: &str) -> CheckResult<StoredRow> {
    storage
        .get_row(PARTITION, "tasks", id)?
        .ok_or_else(|| Failure::new(format!("row {id} missing")))
}

fn c366_fresh_column(ctx: &mut Ctx<'_>) -> CheckResult {
    ctx.ensured(&fix1()?)?;
    let bytes = sync_schema::INTERNAL_COLUMNS
        .iter()
        .find(|c| c.name == COLUMN)
        .map(|c| c.sql_type(ctx.sql_dialect()))
        .ok_or_else(|| Failure::new("no _sync_column_versions among the internal columns"))?;
    let raw = ctx.raw()?;
    for table in ["tasks", "secrets"] {
        let columns = raw.list_columns(table)?;
        let last = columns
            .last()
            .ok_or_else(|| Failure::new(format!("{table} has no columns")))?;
        check_eq!(last.0.as_str(), COLUMN, "last column of {table}");
        check!(
            ctx.sql_dialect().type_matches(bytes, &last.1),
            "{table}.{COLUMN} is {:?}, expected the dialect's {bytes}",
            last.1
        );
        check!(!last.2, "{table}.{COLUMN} is NOT NULL");
    }
    Ok(())
}

fn c367_round_trip(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let storage = ctx.ensured(&schema)?;
    let plain = task(&schema, "t1", "proj-1", "a")?;
    write(storage.as_ref(), &plain, "k1")?;
    check_eq!(
        stored(storage.as_ref(), "t1")?.column_versions,
        None,
        "column versions of a row written without them"
    );
    // Bytes no reader of ours would accept (storage never reads them),
    // including a zero byte and the highest byte.
    let versions = vec![1, 0x80, 0x01, 0, 0xff];
    let mut with = plain.clone();
    with.server_version = 2;
    with.column_versions = Some(versions.clone());
    write(storage.as_ref(), &with, "k2")?;
    check_eq!(
        stored(storage.as_ref(), "t1")?.column_versions,
        Some(versions),
        "column versions after an update that writes them"
    );
    // Through the push transaction's own read, too.
    let mut tx = storage.begin(PARTITION)?;
    let read = tx.get_row("tasks", "t1")?;
    let batch = tx.get_rows("tasks", &["t1".to_owned()])?;
    tx.rollback()?;
    check_eq!(
        batch
            .into_iter()
            .flatten()
            .next()
            .and_then(|r| r.column_versions),
        Some(vec![1, 0x80, 0x01, 0, 0xff]),
        "column versions read by get_rows"
    );
    check_eq!(
        read.and_then(|r| r.column_versions),
        Some(vec![1, 0x80, 0x01, 0, 0xff]),
        "column versions read inside a transaction"
    );
    let mut cleared = with.clone();
    cleared.server_version = 3;
    cleared.column_versions = None;
    write(storage.as_ref(), &cleared, "k3")?;
    check_eq!(
        stored(storage.as_ref(), "t1")?.column_versions,
        None,
        "column versions after an update that clears them"
    );
    Ok(())
}

fn c368_legacy_upgrade(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let storage = ctx.ensured(&schema)?;
    let rows: Vec<StoredRow> = (0..3)
        .map(|i| task(&schema, &format!("t{i}"), "proj-1", &format!("title {i}")))
        .collect::<CheckResult<_>>()?;
    seed_tasks(storage.as_ref(), PARTITION, &rows)?;
    drop(storage);
    ctx.raw()?.drop_column("tasks", COLUMN)?;
    let marker = ctx.open()?.read_schema_marker()?;

    let reopened = ctx.open()?;
    let outcome = reopened.ensure_schema_outcome(&schema, &no_opts())?;
    check_eq!(
        outcome,
        EnsureOutcome::Upgraded,
        "outcome of the upgrading open"
    );
    let columns = ctx.raw()?.list_columns("tasks")?;
    check!(
        columns.iter().any(|c| c.0 == COLUMN && !c.2),
        "{COLUMN} not added, or added NOT NULL: {columns:?}"
    );
    for row in &rows {
        let found = stored(reopened.as_ref(), &row.row_id)?;
        check_eq!(found.payload, row.payload, "payload of {}", row.row_id);
        check_eq!(
            found.column_versions,
            None,
            "column versions of {}",
            row.row_id
        );
    }
    check_eq!(
        reopened.read_schema_marker()?,
        marker,
        "schema marker after the upgrade"
    );
    let again = ctx.open()?.ensure_schema_outcome(&schema, &no_opts())?;
    check_eq!(again, EnsureOutcome::Verified, "outcome of the next open");
    Ok(())
}

fn c369_wrong_type(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    drop(ctx.ensured(&schema)?);
    let raw = ctx.raw()?;
    raw.drop_column("tasks", COLUMN)?;
    // A text column under the name: neither the legacy shape (the column
    // exists) nor the designed one.
    raw.add_column("tasks", COLUMN, false)?;
    let before = raw.list_columns("tasks")?;
    let storage = ctx.open()?;
    let error = expect_code(
        storage.ensure_schema(&schema, &no_opts()),
        ErrorCode::PhysicalLayoutMismatch,
        "ensure over a text _sync_column_versions",
    )?;
    expect_detail(&error, "reason", "type")?;
    expect_detail(&error, "column", COLUMN)?;
    check!(
        error.get_detail("expected").is_some() && error.get_detail("actual").is_some(),
        "type mismatch without expected/actual: {error:?}"
    );
    check_eq!(
        ctx.raw()?.list_columns("tasks")?,
        before,
        "tasks columns after the refused open"
    );
    Ok(())
}

fn c371_bump_keeps_versions(ctx: &mut Ctx<'_>) -> CheckResult {
    let v1 = fix1()?;
    let storage = ctx.ensured(&v1)?;
    let mut row = task(&v1, "t1", "proj-1", "a")?;
    row.column_versions = Some(vec![1, 7, 2, 5]);
    row.server_version = 7;
    write(storage.as_ref(), &row, "k1")?;
    drop(storage);
    // Version 2 appends a nullable column to tasks: every payload is
    // re-encoded.
    let v2 = fix1_variant(2, |s| {
        push_column(
            s,
            TASKS,
            serde_json::json!({"name": "extra", "type": "string", "nullable": true}),
        )
    })?;
    let bumped = ctx.ensured(&v2)?;
    let found = stored(bumped.as_ref(), "t1")?;
    check!(
        found.payload != row.payload,
        "the bump did not re-encode the payload"
    );
    check_eq!(
        found.column_versions,
        Some(vec![1, 7, 2, 5]),
        "column versions after the bump"
    );
    check_eq!(found.server_version, 7, "server_version after the bump");
    Ok(())
}

fn c373_front_bounds(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let storage = ctx.ensured(&schema)?;
    let width = schema.table("tasks").map_or(0, |t| t.columns.len());
    for (bytes, reason) in [(Vec::new(), "empty"), (vec![1; width * 20 + 1], "too_long")] {
        let mut row = task(&schema, "t1", "proj-1", "a")?;
        row.column_versions = Some(bytes);
        let mut tx = storage.begin(PARTITION)?;
        tx.lock_partition_for_push()?;
        let error = expect_code(
            tx.upsert_row("tasks", &row, Some(0)),
            ErrorCode::InvalidArgument,
            "upsert_row with bad column versions",
        )?;
        expect_detail(&error, "argument", "column_versions")?;
        expect_detail(&error, "reason", reason)?;
        tx.rollback()?;
    }
    // The longest allowed is written.
    let mut row = task(&schema, "t1", "proj-1", "a")?;
    row.column_versions = Some(vec![1; width * 20]);
    write(storage.as_ref(), &row, "k1")?;
    check_eq!(
        stored(storage.as_ref(), "t1")?
            .column_versions
            .map(|v| v.len()),
        Some(width * 20),
        "length of the longest column versions"
    );
    Ok(())
}

fn c375_tombstone_of_the_last_change(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let storage = ctx.ensured(&schema)?;
    let row = |id: &str| task(&schema, id, "proj-1", "a");
    let upsert = |r: &StoredRow| super::support_rows::upsert_change("tasks", r);
    let delete = |r: &StoredRow| NewChange::delete("tasks", r.row_id.clone(), r.scopes.clone());
    let (revived, gone) = (row("revived")?, row("gone")?);
    // Deleted then written again / written then deleted, in one commit;
    // the revived row's two changes are far enough apart that a dialect
    // appending a large commit in several statements sees them in
    // different ones.
    let mut changes = vec![delete(&revived), upsert(&gone)];
    for i in 0..5000 {
        changes.push(upsert(&row(&format!("filler-{i}"))?));
    }
    changes.push(upsert(&revived));
    changes.push(delete(&gone));
    let mut tx = storage.begin(PARTITION)?;
    tx.lock_partition_for_push()?;
    let seq = tx.append_commit(&super::support_rows::commit_of("k1", changes))?;
    check_eq!(
        tx.get_tombstone_seq("tasks", "revived")?,
        None,
        "tombstone of a row deleted then written again"
    );
    check_eq!(
        tx.get_tombstone_seq("tasks", "gone")?,
        Some(seq),
        "tombstone of a row written then deleted"
    );
    tx.commit()?;
    // A later commit that deletes the revived row leaves its tombstone.
    let mut tx = storage.begin(PARTITION)?;
    tx.lock_partition_for_push()?;
    let later = tx.append_commit(&super::support_rows::commit_of(
        "k2",
        vec![delete(&revived)],
    ))?;
    check_eq!(
        tx.get_tombstone_seq("tasks", "revived")?,
        Some(later),
        "tombstone of a later delete"
    );
    tx.commit()?;
    Ok(())
}

fn c372_delete_scopes(ctx: &mut Ctx<'_>) -> CheckResult {
    use super::support_pdata::{touch, EPOCH, P};
    let schema = fix1()?;
    let storage = ctx.ensured(&schema)?;
    touch(storage.as_ref(), P)?;
    let (one, two) = (
        task(&schema, "t1", "proj-1", "a")?,
        task(&schema, "t2", "proj-2", "b")?,
    );
    push(
        storage.as_ref(),
        P,
        "c",
        "k1",
        &[Op::upsert("tasks", one), Op::upsert("tasks", two)],
    )?;
    // One commit deletes both rows; another deletes nothing of t1.
    let deleted = push(
        storage.as_ref(),
        P,
        "c",
        "k2",
        &[Op::delete("tasks", "t1"), Op::delete("tasks", "t2")],
    )?
    .seq()?;
    let other = push(
        storage.as_ref(),
        P,
        "c",
        "k3",
        &[Op::upsert("tasks", task(&schema, "t3", "proj-1", "c")?)],
    )?
    .seq()?;
    let scopes = |project: &str| crate::fixtures::scopes(&[("project_id", project)]);
    let mut tx = storage.begin(P)?;
    let tombstone = tx.get_tombstone_seq("tasks", "t1")?;
    check_eq!(tombstone, Some(deleted), "tombstone of t1");
    check_eq!(
        tx.get_delete_scopes("tasks", "t1", deleted)?,
        Some(scopes("proj-1")),
        "scopes of t1's delete"
    );
    check_eq!(
        tx.get_delete_scopes("tasks", "t2", deleted)?,
        Some(scopes("proj-2")),
        "scopes of t2's delete, in the same commit"
    );
    check_eq!(
        tx.get_delete_scopes("tasks", "t1", other)?,
        None,
        "a commit that did not delete t1"
    );
    check_eq!(
        tx.get_delete_scopes("tasks", "t3", other)?,
        None,
        "a commit that wrote t3 without deleting it"
    );
    check_eq!(
        tx.get_delete_scopes("secrets", "t1", deleted)?,
        None,
        "the same row id in another table"
    );
    // The front's checks: an unknown table, a negative sequence.
    expect_code(
        tx.get_delete_scopes("nope", "t1", deleted),
        ErrorCode::UnknownTable,
        "get_delete_scopes of an unknown table",
    )?;
    let error = expect_code(
        tx.get_delete_scopes("tasks", "t1", -1),
        ErrorCode::InvalidArgument,
        "get_delete_scopes at a negative sequence",
    )?;
    expect_detail(&error, "argument", "commit_seq")?;
    tx.rollback()?;
    // Pruned past the delete: the tombstone and the change are gone.
    let query = sync_core::CommitPruneQuery {
        log_epoch: EPOCH.to_owned(),
        through_seq: deleted,
    };
    storage.prune_commits_through(P, &query)?;
    let mut tx = storage.begin(P)?;
    check_eq!(
        tx.get_tombstone_seq("tasks", "t1")?,
        None,
        "tombstone of t1 after pruning"
    );
    check_eq!(
        tx.get_delete_scopes("tasks", "t1", deleted)?,
        None,
        "scopes of t1's delete after pruning"
    );
    tx.rollback()?;
    Ok(())
}
