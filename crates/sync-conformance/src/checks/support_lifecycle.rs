//! Helpers shared by the schema-lifecycle, bad-input and plans groups:
//! fixture schema variants, bulk row seeding, index lookups and the
//! "new instance ensures and fails" pattern.

use serde_json::{json, Value};
use sync_core::{
    CompiledSchema, EnsureOptions, Error, ErrorCode, NewChange, NewCommit, ServerStorage, StoredRow,
};

use crate::check::{expect_code, expect_detail, CheckResult, Failure};
use crate::context::{Ctx, NOW};
use crate::fixtures::{compile_json, fix1_json, task};
use crate::harness::RawIndex;

/// Position of `tasks` in the fixture JSON.
pub(crate) const TASKS: usize = 0;
/// Position of `docs` in the fixture JSON.
pub(crate) const DOCS: usize = 1;
/// Position of `secrets` in the fixture JSON.
pub(crate) const SECRETS: usize = 2;

/// The six internal columns of an application table in physical order
/// when no projection column exists (the checklist's five, then the
/// nullable `_sync_column_versions` of `docs/design/wire-v3.md` §3.1).
pub(crate) const INTERNAL_ONLY: [&str; 6] = [
    "_sync_partition",
    "_sync_row_id",
    "_sync_server_version",
    "_sync_scopes",
    "_sync_payload",
    "_sync_column_versions",
];

/// `FIX1` at `version`, edited by `edit` before compiling.
pub(crate) fn fix1_variant(
    version: i32,
    edit: impl FnOnce(&mut Value),
) -> CheckResult<CompiledSchema> {
    let mut value = fix1_json();
    value["version"] = json!(version);
    edit(&mut value);
    compile_json(&value)
}

/// Appends a column definition to one fixture table of a schema JSON.
pub(crate) fn push_column(schema: &mut Value, table: usize, column: Value) {
    if let Some(columns) = schema["tables"][table]["columns"].as_array_mut() {
        columns.push(column);
    }
}

/// The default ensure options (no declarations, no hooks).
pub(crate) fn no_opts() -> EnsureOptions {
    EnsureOptions::default()
}

/// Opens a new instance, runs `ensure_schema(schema)` on it and expects
/// `code`; returns the error for detail assertions.
pub(crate) fn ensure_fails(
    ctx: &mut Ctx<'_>,
    schema: &CompiledSchema,
    code: ErrorCode,
    what: &str,
) -> CheckResult<Error> {
    let storage = ctx.open()?;
    expect_code(storage.ensure_schema(schema, &no_opts()), code, what)
}

/// Like [`ensure_fails`] and additionally expects `details.reason`.
pub(crate) fn ensure_fails_with_reason(
    ctx: &mut Ctx<'_>,
    schema: &CompiledSchema,
    code: ErrorCode,
    reason: &str,
    what: &str,
) -> CheckResult<Error> {
    let error = ensure_fails(ctx, schema, code, what)?;
    expect_detail(&error, "reason", reason)?;
    Ok(error)
}

/// Expects that `error` carries no `details[key]`.
pub(crate) fn expect_no_detail(error: &Error, key: &str) -> CheckResult {
    match error.get_detail(key) {
        None => Ok(()),
        Some(value) => Err(Failure::new(format!(
            "{}: expected no details.{key}, got {value:?} in {error:?}",
            error.code()
        ))),
    }
}

/// The introspected index of that name, if any.
pub(crate) fn find_index<'a>(indexes: &'a [RawIndex], name: &str) -> Option<&'a RawIndex> {
    indexes.iter().find(|(n, _, _)| n == name)
}

/// Owned-or-not index names of a table, for failure messages.
pub(crate) fn index_names(indexes: &[RawIndex]) -> Vec<&str> {
    indexes.iter().map(|(n, _, _)| n.as_str()).collect()
}

/// Column names of an introspected table, in physical order.
pub(crate) fn column_names(columns: &[crate::harness::RawColumn]) -> Vec<&str> {
    columns.iter().map(|(n, _, _)| n.as_str()).collect()
}

/// The id of the `n`-th seeded row (`t0000`, `t0001`, …; byte order = numeric order).
pub(crate) fn seeded_id(n: usize) -> String {
    format!("t{n:04}")
}

/// The `tasks` rows [`seed_tasks`] writes: ids from [`seeded_id`], projects
/// `proj-0`…`proj-{projects-1}` round-robin, unique titles.
pub(crate) fn seeded_rows(
    schema: &CompiledSchema,
    count: usize,
    projects: usize,
) -> CheckResult<Vec<StoredRow>> {
    (0..count)
        .map(|n| {
            task(
                schema,
                &seeded_id(n),
                &format!("proj-{}", n % projects.max(1)),
                &format!("title-{n}"),
            )
        })
        .collect()
}

/// Writes `rows` into `tasks` of `partition`: one transaction per 250 rows,
/// each row upserted and logged as its own one-change commit.
pub(crate) fn seed_tasks(
    storage: &dyn ServerStorage,
    partition: &str,
    rows: &[StoredRow],
) -> CheckResult {
    for (batch, chunk) in rows.chunks(250).enumerate() {
        let mut tx = storage.begin(partition)?;
        tx.lock_partition_for_push()?;
        for (offset, row) in chunk.iter().enumerate() {
            tx.upsert_row("tasks", row, Some(0))?;
            tx.append_commit(&one_change_commit(
                &format!("seed-{batch}-{offset}"),
                "tasks",
                row,
            ))?;
        }
        tx.commit()?;
    }
    Ok(())
}

/// A commit carrying one upsert change of `row` in `table`.
pub(crate) fn one_change_commit(client_commit_id: &str, table: &str, row: &StoredRow) -> NewCommit {
    NewCommit {
        client_id: "seeder".to_owned(),
        client_commit_id: client_commit_id.to_owned(),
        actor_id: "actor:seeder".to_owned(),
        created_at_ms: NOW,
        changes: vec![NewChange::upsert(
            table,
            row.row_id.clone(),
            row.server_version,
            row.scopes.clone(),
            row.payload.clone(),
        )],
    }
}

/// Every row of `table` in `partition`, read through keyset pages of 1 000.
pub(crate) fn all_rows(
    storage: &dyn ServerStorage,
    partition: &str,
    table: &str,
) -> CheckResult<Vec<StoredRow>> {
    let mut rows: Vec<StoredRow> = Vec::new();
    loop {
        let after = rows.last().map(|r| r.row_id.clone());
        let page = storage.scan_partition_rows(partition, table, after.as_deref(), 1000)?;
        let short = page.len() < 1000;
        rows.extend(page);
        if short {
            return Ok(rows);
        }
    }
}
