//! §1 Schema lifecycle (`ensure_schema`), C-001…C-040.

use std::sync::mpsc;
use std::sync::{Arc, Barrier};
use std::time::Duration;

use serde_json::{json, Value};
use sync_core::{
    ClientRecord, Clock, CommitMetadataQuery, CompiledSchema, ErrorCode, RowScanQuery,
    ServerStorage,
};

use crate::check::{expect_code, expect_detail, CheckDef, CheckResult, Failure, Requires};
use crate::checks::support_lifecycle::{
    all_rows, column_names, ensure_fails, ensure_fails_with_reason, expect_no_detail, find_index,
    fix1_variant, index_names, no_opts, push_column, seed_tasks, seeded_rows, DOCS, INTERNAL_ONLY,
    SECRETS, TASKS,
};
use crate::context::{Ctx, NOW};
use crate::fixtures::{
    decode, doc, fix1, fix1_at, fix1_json, fix2, push, secret, task, task_values, Op,
};
use crate::harness::RawFilter;
use crate::registry::check;
use crate::{check, check_eq};

/// Group name.
pub(crate) const GROUP: &str = "schema-lifecycle";

/// The checks of this group.
pub(crate) const CHECKS: &[CheckDef] = &[
    check(
        GROUP,
        "C-001",
        "fresh ensure writes marker 1, exact layouts, database fence 1",
        c001_fresh_ensure,
    ),
    check(
        GROUP,
        "C-002",
        "fresh ensure creates every table, tasks columns in order, partition-leading indexes",
        c002_fresh_tables,
    ),
    check(
        GROUP,
        "C-003",
        "non-materialized secrets has only the five internal columns and no owned index",
        c003_secrets_internal_only,
    ),
    check(
        GROUP,
        "C-004",
        "before ensure: ensured_version None, transaction writer version 0",
        c004_before_ensure,
    ),
    check(
        GROUP,
        "C-005",
        "memoized ensure on the same instance reads nothing",
        c005_memo_fast_path,
    ),
    check(
        GROUP,
        "C-006",
        "new instance over unparsable layouts fails layouts_corrupt (not_json)",
        c006_new_instance_reads_layouts,
    ),
    check(
        GROUP,
        "C-007",
        "same instance, same version, new declared index: missing_index",
        c007_same_instance_new_index,
    ),
    check(
        GROUP,
        "C-008",
        "same-version restart keeps an operator index and the marker",
        c008_operator_index_tolerated,
    ),
    check(
        GROUP,
        "C-009",
        "older code against a v5 database: schema_newer_than_code",
        c009_schema_newer_than_code,
    ),
    check(
        GROUP,
        "C-010",
        "bump FIX1 to FIX2 adds assignee, re-encodes the row, raises the database fence",
        c010_bump_appends_column,
    ),
    check(
        GROUP,
        "C-011",
        "bump re-encodes rows of every partition",
        c011_bump_all_partitions,
    ),
    check(
        GROUP,
        "C-012",
        "bump re-encodes 1 201 rows (keyset paging beyond 500)",
        c012_bump_pages_beyond_500,
    ),
    check(
        GROUP,
        "C-013",
        "bump rebuilds owned indexes",
        c013_bump_rebuilds_indexes,
    ),
    check(
        GROUP,
        "C-014",
        "bump keeps operator indexes and drops legacy bare declared names",
        c014_bump_keeps_operator_index,
    ),
    check(
        GROUP,
        "C-015",
        "bump redefines an index in place (unique, new columns)",
        c015_bump_redefines_index,
    ),
    check(
        GROUP,
        "C-016",
        "bump moves an index name from docs to tasks",
        c016_bump_moves_index_name,
    ),
    check(
        GROUP,
        "C-017",
        "retiring docs drops the table and its index entries, keeps its history",
        c017_retire_table,
    )
    .needs(sync_core::Capability::Admin),
    check(
        GROUP,
        "C-018",
        "re-adding a retired table name creates a fresh empty table",
        c018_readd_retired_table,
    ),
    check(
        GROUP,
        "C-019",
        "materialize false to true adds and back-fills projections in every partition",
        c019_materialize_on,
    ),
    check(
        GROUP,
        "C-020",
        "materialize true to false drops projections and owned indexes",
        c020_materialize_off,
    ),
    check(
        GROUP,
        "C-021",
        "bump appending a non-nullable column is refused and rolled back",
        c021_refuse_not_nullable,
    ),
    check(
        GROUP,
        "C-022",
        "bump changing a column type is refused (column_changed)",
        c022_refuse_type_change,
    ),
    check(
        GROUP,
        "C-023",
        "bump removing the last column is refused (column_removed)",
        c023_refuse_column_removed,
    ),
    check(
        GROUP,
        "C-024",
        "same version over layouts {} is a stored layout mismatch at the first column",
        c024_same_version_empty_layouts,
    ),
    check(
        GROUP,
        "C-025",
        "bump over layouts {} succeeds without rewriting",
        c025_bump_empty_layouts,
    ),
    check(
        GROUP,
        "C-026",
        "same version with an extra stored table: stored_layout_mismatch (table only)",
        c026_extra_stored_table,
    ),
    check(
        GROUP,
        "C-027",
        "same version, dropped projection column: missing_column",
        c027_missing_projection_column,
    ),
    check(
        GROUP,
        "C-028",
        "same version, dropped table: missing_table",
        c028_missing_table,
    ),
    check(
        GROUP,
        "C-029",
        "same version, table without _sync_scopes: missing_column",
        c029_missing_internal_column,
    ),
    check(
        GROUP,
        "C-030",
        "same version, dropped owned index: missing_index",
        c030_missing_index,
    ),
    check(
        GROUP,
        "C-031",
        "same version, unique index recreated non-unique: index_definition",
        c031_index_definition,
    ),
    check(
        GROUP,
        "C-032",
        "same version, NOT NULL extra column on a non-materialized table: nullability",
        c032_not_null_extra_column,
    ),
    check(
        GROUP,
        "C-033",
        "explicit non-C key collation refused; default collation upgraded to C",
        c033_key_collation,
    )
    .requires(Requires::KeyCollationControl),
    check(
        GROUP,
        "C-034",
        "legacy sync_clients without wire_version reads back wire_version 1",
        c034_legacy_wire_version,
    ),
    check(
        GROUP,
        "C-035",
        "legacy sync_commits without writer_version gets a nullable column and the trigger",
        c035_legacy_writer_version,
    ),
    check(
        GROUP,
        "C-036",
        "an outdated fence trigger definition is replaced at open",
        c036_outdated_trigger_replaced,
    )
    .requires(Requires::OutdatedTriggerInstall),
    check(
        GROUP,
        "C-037",
        "warm ensure issues no DDL while a push holds the partition lock",
        c037_warm_ensure_no_ddl,
    )
    .requires(Requires::PerPartitionLocking),
    check(
        GROUP,
        "C-038",
        "two instances bump concurrently; rows rewritten exactly once",
        c038_concurrent_bumps,
    )
    .requires(Requires::TransactionalDdl),
    check(
        GROUP,
        "C-039",
        "ensure_ready with a failing compile: schema_not_ready (schema_compile)",
        c039_ensure_ready_compile,
    ),
    check(
        GROUP,
        "C-040",
        "ensure_ready with a refused migration: schema_not_ready (storage_migration)",
        c040_ensure_ready_migration,
    ),
    check(
        GROUP,
        "C-338",
        "same version, stored nullability differs from the configured one (both ways): stored_layout_mismatch",
        c338_same_version_nullability,
    ),
];

/// Application columns of `tasks` in `FIX1`, codec order.
const TASKS_COLUMNS: [&str; 9] = [
    "id",
    "project_id",
    "title",
    "done",
    "priority",
    "score",
    "meta",
    "thumb",
    "attachment",
];

fn row_filter(partition: &str, row_id: &str) -> RawFilter {
    RawFilter::eq("_sync_partition", partition).and("_sync_row_id", row_id)
}

/// Fails unless the stored payload of `row_id` decodes under `FIX2` to the
/// `FIX1` values of the row followed by a NULL `assignee`.
fn expect_fix2_row(
    storage: &dyn ServerStorage,
    partition: &str,
    row_id: &str,
    project: &str,
    title: &str,
) -> CheckResult {
    let schema = fix2()?;
    let row = storage
        .get_row(partition, "tasks", row_id)?
        .ok_or_else(|| Failure::new(format!("row {partition}/{row_id} vanished in the bump")))?;
    let values = decode(&schema, "tasks", &row.payload)?;
    check_eq!(
        values,
        task_values(&schema, row_id, project, title),
        "decoded row {partition}/{row_id} under FIX2"
    );
    Ok(())
}

// ---- fresh database ---------------------------------------------------------

fn c001_fresh_ensure(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let storage = ctx.open()?;
    storage.ensure_schema(&schema, &no_opts())?;
    let marker = storage
        .read_schema_marker()?
        .ok_or_else(|| Failure::new("no schema marker after a fresh ensure"))?;
    check_eq!(marker.schema_version, 1, "marker schema_version");
    let expected = sync_schema::layouts_json(&schema);
    check_eq!(marker.layouts, expected, "marker layouts text");
    let raw = ctx.raw()?;
    check_eq!(
        raw.read_text("sync_schema_meta", "layouts", RawFilter::all())?,
        Some(expected),
        "stored sync_schema_meta.layouts"
    );
    check_eq!(
        storage.required_writer_version("p1")?,
        Some(1),
        "required_writer_version(p1)"
    );
    check_eq!(
        storage.required_writer_version("never-seen")?,
        Some(1),
        "required_writer_version(never-seen)"
    );
    check_eq!(storage.ensured_version(), Some(1), "ensured_version");
    Ok(())
}

fn c002_fresh_tables(ctx: &mut Ctx<'_>) -> CheckResult {
    ctx.ensured(&fix1()?)?;
    let raw = ctx.raw()?;
    for table in ["tasks", "docs", "secrets", "device_key_grants"] {
        check!(
            raw.table_exists(table)?,
            "table {table} missing after a fresh ensure"
        );
    }
    let columns = raw.list_columns("tasks")?;
    let mut expected = vec!["_sync_partition", "_sync_row_id"];
    expected.extend(TASKS_COLUMNS);
    expected.extend([
        "_sync_server_version",
        "_sync_scopes",
        "_sync_payload",
        "_sync_column_versions",
    ]);
    check_eq!(
        column_names(&columns),
        expected,
        "tasks columns in physical order"
    );
    let indexes = raw.list_indexes("tasks")?;
    let dialect = ctx.sql_dialect();
    for (name, declared, unique) in [
        ("tasks_by_title", vec!["title"], false),
        ("tasks_by_project_title", vec!["project_id", "title"], true),
    ] {
        let physical = format!("sync_ix_{name}");
        let (_, _, cols) = find_index(&indexes, &physical).ok_or_else(|| {
            Failure::new(format!(
                "index {physical} missing; have {:?}",
                index_names(&indexes)
            ))
        })?;
        let leading: Vec<String> = std::iter::once("_sync_partition")
            .chain(declared.iter().copied())
            .map(str::to_owned)
            .collect();
        check!(
            cols.starts_with(&leading),
            "columns of {physical}: {cols:?} do not start with {leading:?}"
        );
        // What follows the declared columns is the dialect's own suffix
        // (`SqlDialect::declared_index_columns`), e.g. a trailing row id.
        let want = dialect.declared_index_columns(&sync_core::IndexDef {
            name: name.to_owned(),
            columns: declared.iter().map(|c| (*c).to_owned()).collect(),
            unique,
        });
        check_eq!(cols, &want, "columns of {physical}");
    }
    Ok(())
}

fn c003_secrets_internal_only(ctx: &mut Ctx<'_>) -> CheckResult {
    ctx.ensured(&fix1()?)?;
    let raw = ctx.raw()?;
    check_eq!(
        column_names(&raw.list_columns("secrets")?),
        INTERNAL_ONLY,
        "secrets columns"
    );
    let indexes = raw.list_indexes("secrets")?;
    check!(
        !indexes.iter().any(|(n, _, _)| n.starts_with("sync_ix_")),
        "secrets has owned indexes {:?}",
        index_names(&indexes)
    );
    Ok(())
}

fn c004_before_ensure(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.open()?;
    check_eq!(
        storage.ensured_version(),
        None,
        "ensured_version before ensure_schema"
    );
    let tx = storage.begin("p1")?;
    check_eq!(
        tx.writer_version(),
        0,
        "writer_version of a transaction before ensure_schema"
    );
    tx.rollback()?;
    Ok(())
}

// ---- memo and same-version verification ------------------------------------

fn c005_memo_fast_path(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let storage = ctx.ensured(&schema)?;
    ctx.raw()?.set_layouts_text(Some("not json"))?;
    storage
        .ensure_schema(&schema, &no_opts())
        .map_err(|e| Failure::new(format!("memoized ensure read the database: {e:?}")))?;
    check_eq!(
        storage.ensured_version(),
        Some(1),
        "ensured_version after the memoized ensure"
    );
    Ok(())
}

fn c006_new_instance_reads_layouts(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let first = ctx.ensured(&schema)?;
    ctx.raw()?.set_layouts_text(Some("not json"))?;
    first.ensure_schema(&schema, &no_opts())?;
    ensure_fails_with_reason(
        ctx,
        &schema,
        ErrorCode::LayoutsCorrupt,
        "not_json",
        "new instance over `not json`",
    )?;
    Ok(())
}

fn c007_same_instance_new_index(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.ensured(&fix1()?)?;
    let with_index = fix1_variant(1, |s| {
        if let Some(indexes) = s["tables"][TASKS]["indexes"].as_array_mut() {
            indexes.push(json!({"name": "tasks_by_done", "columns": ["done"]}));
        }
    })?;
    let error = expect_code(
        storage.ensure_schema(&with_index, &no_opts()),
        ErrorCode::PhysicalLayoutMismatch,
        "same instance, FIX1 plus a declared index",
    )?;
    expect_detail(&error, "reason", "missing_index")?;
    expect_detail(&error, "table", "tasks")?;
    Ok(())
}

fn c008_operator_index_tolerated(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let first = ctx.ensured(&schema)?;
    let before = first.read_schema_marker()?;
    let raw = ctx.raw()?;
    raw.create_index("ops_tasks_done", "tasks", &["done"], false)?;
    let second = ctx.ensured(&schema)?;
    check!(
        find_index(&raw.list_indexes("tasks")?, "ops_tasks_done").is_some(),
        "operator index ops_tasks_done was dropped by a same-version ensure"
    );
    check_eq!(
        second.read_schema_marker()?,
        before,
        "marker after the same-version restart"
    );
    Ok(())
}

fn c009_schema_newer_than_code(ctx: &mut Ctx<'_>) -> CheckResult {
    ctx.ensured(&fix1_at(5)?)?;
    let error = ensure_fails(
        ctx,
        &fix1()?,
        ErrorCode::SchemaNewerThanCode,
        "v1 code against a v5 database",
    )?;
    expect_detail(&error, "stored", "5")?;
    expect_detail(&error, "configured", "1")?;
    Ok(())
}

// ---- bumps: rewrites ---------------------------------------------------------

fn c010_bump_appends_column(ctx: &mut Ctx<'_>) -> CheckResult {
    let v1 = fix1()?;
    let old = ctx.ensured(&v1)?;
    push(
        old.as_ref(),
        "p1",
        "c1",
        "cc1",
        &[Op::upsert("tasks", task(&v1, "t1", "proj-1", "first")?)],
    )?
    .seq()?;
    let new = ctx.ensured(&fix2()?)?;
    let raw = ctx.raw()?;
    let columns = raw.list_columns("tasks")?;
    check!(
        column_names(&columns).contains(&"assignee"),
        "assignee column missing after the bump: {:?}",
        column_names(&columns)
    );
    let marker = new
        .read_schema_marker()?
        .ok_or_else(|| Failure::new("no marker after the bump"))?;
    check_eq!(marker.schema_version, 2, "marker after the bump");
    check_eq!(
        marker.required_writer_version,
        Some(2),
        "database-wide writer fence after the bump"
    );
    expect_fix2_row(new.as_ref(), "p1", "t1", "proj-1", "first")?;
    check_eq!(
        raw.count("tasks", row_filter("p1", "t1"))?,
        1,
        "stored rows of t1"
    );
    check_eq!(
        raw.read_text("tasks", "assignee", row_filter("p1", "t1"))?,
        None,
        "projection assignee of t1"
    );
    Ok(())
}

fn c011_bump_all_partitions(ctx: &mut Ctx<'_>) -> CheckResult {
    let v1 = fix1()?;
    let old = ctx.ensured(&v1)?;
    push(
        old.as_ref(),
        "part-a",
        "c1",
        "cc1",
        &[Op::upsert("tasks", task(&v1, "ta", "proj-a", "in a")?)],
    )?
    .seq()?;
    push(
        old.as_ref(),
        "part-b",
        "c1",
        "cc1",
        &[Op::upsert("tasks", task(&v1, "tb", "proj-b", "in b")?)],
    )?
    .seq()?;
    let new = ctx.ensured(&fix2()?)?;
    expect_fix2_row(new.as_ref(), "part-a", "ta", "proj-a", "in a")?;
    expect_fix2_row(new.as_ref(), "part-b", "tb", "proj-b", "in b")?;
    Ok(())
}

fn c012_bump_pages_beyond_500(ctx: &mut Ctx<'_>) -> CheckResult {
    const ROWS: usize = 1201;
    let v1 = fix1()?;
    let old = ctx.ensured(&v1)?;
    seed_tasks(old.as_ref(), "p1", &seeded_rows(&v1, ROWS, 20)?)?;
    let v2 = fix2()?;
    let new = ctx.ensured(&v2)?;
    let rows = all_rows(new.as_ref(), "p1", "tasks")?;
    check_eq!(rows.len(), ROWS, "rows after the bump");
    let expected = seeded_rows(&v2, ROWS, 20)?;
    for (row, want) in rows.iter().zip(&expected) {
        check_eq!(row.row_id, want.row_id, "row order after the bump");
        check!(
            row.payload == want.payload,
            "row {} is not re-encoded under FIX2 (decodes as {:?})",
            row.row_id,
            decode(&v2, "tasks", &row.payload)
        );
    }
    Ok(())
}

// ---- bumps: indexes ----------------------------------------------------------

fn c013_bump_rebuilds_indexes(ctx: &mut Ctx<'_>) -> CheckResult {
    ctx.ensured(&fix1()?)?;
    ctx.ensured(&fix2()?)?;
    let indexes = ctx.raw()?.list_indexes("tasks")?;
    let names = index_names(&indexes);
    check!(
        names.contains(&"sync_ix_tasks_by_assignee"),
        "sync_ix_tasks_by_assignee missing: {names:?}"
    );
    check!(
        !names.contains(&"sync_ix_tasks_by_project_title"),
        "sync_ix_tasks_by_project_title kept: {names:?}"
    );
    check!(
        names.contains(&"sync_ix_tasks_by_title"),
        "sync_ix_tasks_by_title missing: {names:?}"
    );
    Ok(())
}

fn c014_bump_keeps_operator_index(ctx: &mut Ctx<'_>) -> CheckResult {
    ctx.ensured(&fix1()?)?;
    let raw = ctx.raw()?;
    raw.create_index("ops_tasks_tuning", "tasks", &["done", "title"], false)?;
    raw.create_index("tasks_by_title", "tasks", &["title"], false)?;
    ctx.ensured(&fix2()?)?;
    let indexes = raw.list_indexes("tasks")?;
    let names = index_names(&indexes);
    check!(
        names.contains(&"ops_tasks_tuning"),
        "operator index ops_tasks_tuning dropped: {names:?}"
    );
    check!(
        !names.contains(&"tasks_by_title"),
        "legacy bare tasks_by_title kept: {names:?}"
    );
    check!(
        names.contains(&"sync_ix_tasks_by_title"),
        "sync_ix_tasks_by_title missing: {names:?}"
    );
    Ok(())
}

fn c015_bump_redefines_index(ctx: &mut Ctx<'_>) -> CheckResult {
    ctx.ensured(&fix1()?)?;
    let v2 = fix1_variant(2, |s| {
        s["tables"][TASKS]["indexes"][0] =
            json!({"name": "tasks_by_title", "columns": ["project_id", "title"], "unique": true});
    })?;
    ctx.ensured(&v2)?;
    let indexes = ctx.raw()?.list_indexes("tasks")?;
    let matching: Vec<_> = indexes
        .iter()
        .filter(|(n, _, _)| n == "sync_ix_tasks_by_title")
        .collect();
    check_eq!(matching.len(), 1, "indexes named sync_ix_tasks_by_title");
    let (_, unique, columns) = matching[0];
    check!(
        *unique,
        "sync_ix_tasks_by_title is not unique after the redefinition"
    );
    check_eq!(
        columns,
        &["_sync_partition", "project_id", "title"],
        "columns of sync_ix_tasks_by_title"
    );
    Ok(())
}

fn c016_bump_moves_index_name(ctx: &mut Ctx<'_>) -> CheckResult {
    ctx.ensured(&fix1()?)?;
    let v2 = fix1_variant(2, |s| {
        s["tables"][DOCS]["indexes"] = json!([]);
        if let Some(indexes) = s["tables"][TASKS]["indexes"].as_array_mut() {
            indexes.push(json!({"name": "docs_by_body", "columns": ["title"]}));
        }
    })?;
    ctx.ensured(&v2)?;
    let raw = ctx.raw()?;
    let on_tasks = raw.list_indexes("tasks")?;
    let on_docs = raw.list_indexes("docs")?;
    let count = |list: &[crate::harness::RawIndex]| {
        list.iter()
            .filter(|(n, _, _)| n == "sync_ix_docs_by_body")
            .count()
    };
    check_eq!(count(&on_tasks), 1, "sync_ix_docs_by_body on tasks");
    check_eq!(count(&on_docs), 0, "sync_ix_docs_by_body on docs");
    Ok(())
}

// ---- bumps: retire and materialization ------------------------------------

/// `FIX1` without `docs`.
fn without_docs(version: i32) -> CheckResult<CompiledSchema> {
    fix1_variant(version, |s| {
        if let Some(tables) = s["tables"].as_array_mut() {
            tables.remove(DOCS);
        }
    })
}

fn docs_counts(raw: &dyn crate::harness::RawAccess) -> CheckResult<[i64; 3]> {
    Ok([
        raw.count("sync_row_scopes", RawFilter::eq("tbl", "docs"))?,
        raw.count("sync_blob_refs", RawFilter::eq("tbl", "docs"))?,
        raw.count("sync_tombstones", RawFilter::eq("tbl", "docs"))?,
    ])
}

fn c017_retire_table(ctx: &mut Ctx<'_>) -> CheckResult {
    let v1 = fix1()?;
    let old = ctx.ensured(&v1)?;
    push(
        old.as_ref(),
        "p1",
        "c1",
        "cc1",
        &[
            Op::upsert("docs", doc(&v1, "d1", "org-1", "proj-1", Some("kept"))?),
            Op::upsert("docs", doc(&v1, "d2", "org-1", "proj-1", None)?),
        ],
    )?
    .seq()?;
    push(old.as_ref(), "p1", "c1", "cc2", &[Op::delete("docs", "d2")])?.seq()?;
    push(
        old.as_ref(),
        "p1",
        "c1",
        "cc3",
        &[Op::upsert("tasks", task(&v1, "t1", "proj-1", "x")?)],
    )?
    .seq()?;
    let blob_refs = old.capabilities().blob_refs;
    if blob_refs {
        let mut tx = old.begin("p1")?;
        tx.set_blob_refs("docs", "d1", &["blob-1".to_owned()])?;
        tx.commit()?;
    }
    let raw = ctx.raw()?;
    let before = docs_counts(raw.as_ref())?;
    check!(
        before[0] > 0 && before[2] > 0 && (!blob_refs || before[1] > 0),
        "setup: docs index entries missing before the bump (scopes, blob refs, tombstones) = {before:?}"
    );
    let new = ctx.ensured(&without_docs(2)?)?;
    check!(
        !raw.table_exists("docs")?,
        "docs still exists after being retired"
    );
    check_eq!(
        docs_counts(raw.as_ref())?,
        [0, 0, 0],
        "docs rows in sync_row_scopes, sync_blob_refs, sync_tombstones"
    );
    let query = |table: Option<&str>| CommitMetadataQuery {
        after_seq: 0,
        before_seq: None,
        limit: 100,
        table: table.map(str::to_owned),
    };
    let all: Vec<i64> = new
        .list_commit_metadata("p1", &query(None))?
        .iter()
        .map(|c| c.commit_seq)
        .collect();
    check_eq!(all, [3, 2, 1], "list_commit_metadata after retiring docs");
    let docs: Vec<i64> = new
        .list_commit_metadata("p1", &query(Some("docs")))?
        .iter()
        .map(|c| c.commit_seq)
        .collect();
    check_eq!(
        docs,
        [2, 1],
        "list_commit_metadata(table = docs) after retiring docs"
    );
    Ok(())
}

fn c018_readd_retired_table(ctx: &mut Ctx<'_>) -> CheckResult {
    let v1 = fix1()?;
    let old = ctx.ensured(&v1)?;
    push(
        old.as_ref(),
        "p1",
        "c1",
        "cc1",
        &[Op::upsert("docs", doc(&v1, "d1", "org-1", "proj-1", None)?)],
    )?
    .seq()?;
    ctx.ensured(&without_docs(2)?)?;
    let v3 = ctx.ensured(&fix1_at(3)?)?;
    let raw = ctx.raw()?;
    check!(
        raw.table_exists("docs")?,
        "docs missing after being re-added at v3"
    );
    check_eq!(
        raw.count("docs", RawFilter::all())?,
        0,
        "rows of the re-added docs table"
    );
    let rows = v3.scan_rows(
        "p1",
        &RowScanQuery {
            table: "docs".to_owned(),
            scope_filter: [("org_id".to_owned(), vec!["org-1".to_owned()])]
                .into_iter()
                .collect(),
            after_row_id: None,
            limit: 10,
        },
    )?;
    check!(
        rows.is_empty(),
        "scan_rows over the re-added docs returned {rows:?}"
    );
    Ok(())
}

fn c019_materialize_on(ctx: &mut Ctx<'_>) -> CheckResult {
    let v1 = fix1()?;
    let old = ctx.ensured(&v1)?;
    let seeded = [
        ("part-a", "s1", "proj-a"),
        ("part-a", "s2", "proj-b"),
        ("part-b", "s3", "proj-c"),
    ];
    for (partition, id, project) in seeded {
        push(
            old.as_ref(),
            partition,
            "c1",
            id,
            &[Op::upsert("secrets", secret(&v1, id, project, b"cipher")?)],
        )?
        .seq()?;
    }
    ctx.ensured(&fix1_variant(2, |s| {
        s["tables"][SECRETS]["materialize"] = json!(true)
    })?)?;
    let raw = ctx.raw()?;
    let columns = raw.list_columns("secrets")?;
    for column in ["id", "project_id", "body", "attrs"] {
        check!(
            column_names(&columns).contains(&column),
            "projection column {column} missing: {:?}",
            column_names(&columns)
        );
    }
    for (partition, id, project) in seeded {
        check_eq!(
            raw.read_text("secrets", "id", row_filter(partition, id))?
                .as_deref(),
            Some(id),
            "back-filled id of {partition}/{id}"
        );
        check_eq!(
            raw.read_text("secrets", "project_id", row_filter(partition, id))?
                .as_deref(),
            Some(project),
            "back-filled project_id of {partition}/{id}"
        );
    }
    Ok(())
}

fn c020_materialize_off(ctx: &mut Ctx<'_>) -> CheckResult {
    let v1 = fix1()?;
    let old = ctx.ensured(&v1)?;
    push(
        old.as_ref(),
        "p1",
        "c1",
        "cc1",
        &[Op::upsert(
            "docs",
            doc(&v1, "d1", "org-1", "proj-1", Some("b"))?,
        )],
    )?
    .seq()?;
    let v2 = fix1_variant(2, |s| s["tables"][DOCS]["materialize"] = json!(false))?;
    let new = ctx.ensured(&v2)?;
    let raw = ctx.raw()?;
    check_eq!(
        column_names(&raw.list_columns("docs")?),
        INTERNAL_ONLY,
        "docs columns after materialize off"
    );
    let indexes = raw.list_indexes("docs")?;
    check!(
        !indexes
            .iter()
            .any(|(n, _, _)| n.starts_with("sync_ix_") || n == "docs_by_body"),
        "owned docs indexes kept: {:?}",
        index_names(&indexes)
    );
    let row = doc(&v2, "d2", "org-1", "proj-1", Some("new"))?;
    push(
        new.as_ref(),
        "p1",
        "c1",
        "cc2",
        &[Op::upsert("docs", row.clone())],
    )?
    .seq()?;
    let stored = new.get_row("p1", "docs", "d2")?;
    check_eq!(
        stored.map(|r| r.payload),
        Some(row.payload),
        "payload of the new docs row"
    );
    Ok(())
}

// ---- bumps: refusals ---------------------------------------------------------

/// Ensures `FIX1`, then expects a new instance's bump to `v2` to be refused
/// with `reason` on `tasks.column`, leaving marker 1.
fn expect_refused_bump(
    ctx: &mut Ctx<'_>,
    v2: &CompiledSchema,
    reason: &str,
    column: &str,
) -> CheckResult {
    let first = ctx.ensured(&fix1()?)?;
    let error =
        ensure_fails_with_reason(ctx, v2, ErrorCode::MigrationRefused, reason, "refused bump")?;
    expect_detail(&error, "table", "tasks")?;
    expect_detail(&error, "column", column)?;
    let marker = first
        .read_schema_marker()?
        .ok_or_else(|| Failure::new("marker vanished after a refused bump"))?;
    check_eq!(marker.schema_version, 1, "marker after a refused bump");
    Ok(())
}

fn c021_refuse_not_nullable(ctx: &mut Ctx<'_>) -> CheckResult {
    let v2 = fix1_variant(2, |s| {
        push_column(s, TASKS, json!({"name": "assignee", "type": "string"}))
    })?;
    expect_refused_bump(ctx, &v2, "column_not_nullable", "assignee")?;
    let columns = ctx.raw()?.list_columns("tasks")?;
    check!(
        !column_names(&columns).contains(&"assignee"),
        "assignee exists after the refused bump"
    );
    Ok(())
}

fn c022_refuse_type_change(ctx: &mut Ctx<'_>) -> CheckResult {
    let v2 = fix1_variant(2, |s| {
        s["tables"][TASKS]["columns"][4]["type"] = json!("string")
    })?;
    expect_refused_bump(ctx, &v2, "column_changed", "priority")
}

fn c023_refuse_column_removed(ctx: &mut Ctx<'_>) -> CheckResult {
    let v2 = fix1_variant(2, |s| {
        if let Some(columns) = s["tables"][TASKS]["columns"].as_array_mut() {
            columns.pop();
        }
    })?;
    expect_refused_bump(ctx, &v2, "column_removed", "attachment")
}

// ---- stored layouts ----------------------------------------------------------

fn c024_same_version_empty_layouts(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    ctx.ensured(&schema)?;
    ctx.raw()?.set_layouts_text(Some("{}"))?;
    let error = ensure_fails(
        ctx,
        &schema,
        ErrorCode::StoredLayoutMismatch,
        "same version over layouts {}",
    )?;
    expect_detail(&error, "table", "tasks")?;
    expect_detail(&error, "column", "id")?;
    Ok(())
}

fn c025_bump_empty_layouts(ctx: &mut Ctx<'_>) -> CheckResult {
    let v1 = fix1()?;
    let old = ctx.ensured(&v1)?;
    let row = task(&v1, "t1", "proj-1", "kept")?;
    push(
        old.as_ref(),
        "p1",
        "c1",
        "cc1",
        &[Op::upsert("tasks", row.clone())],
    )?
    .seq()?;
    ctx.raw()?.set_layouts_text(Some("{}"))?;
    let new = ctx.ensured(&fix2()?)?;
    let marker = new
        .read_schema_marker()?
        .ok_or_else(|| Failure::new("no marker after the bump"))?;
    check_eq!(
        marker.schema_version,
        2,
        "marker after a bump over layouts {{}}"
    );
    let stored = new.get_row("p1", "tasks", "t1")?.map(|r| r.payload);
    check_eq!(
        stored,
        Some(row.payload),
        "payload of t1 (no rewrite without stored layouts)"
    );
    Ok(())
}

fn c026_extra_stored_table(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    ctx.ensured(&schema)?;
    let layouts = sync_schema::layouts_json(&schema);
    let body = layouts
        .strip_suffix('}')
        .ok_or_else(|| Failure::new(format!("layouts_json is not an object: {layouts}")))?;
    let extended =
        format!("{body},\"ghosts\":[{{\"name\":\"id\",\"type\":\"string\",\"nullable\":false}}]}}");
    ctx.raw()?.set_layouts_text(Some(&extended))?;
    let error = ensure_fails(
        ctx,
        &schema,
        ErrorCode::StoredLayoutMismatch,
        "stored layouts with an extra table",
    )?;
    expect_detail(&error, "table", "ghosts")?;
    expect_no_detail(&error, "column")
}

// ---- physical checks -------------------------------------------------------

/// Ensures `FIX1`, lets `tamper` change the database, then expects a new
/// instance's same-version ensure to fail with `physical_layout_mismatch`.
fn expect_physical(
    ctx: &mut Ctx<'_>,
    tamper: impl FnOnce(&dyn crate::harness::RawAccess) -> sync_core::Result<()>,
    reason: &str,
    table: &str,
) -> CheckResult<sync_core::Error> {
    let schema = fix1()?;
    ctx.ensured(&schema)?;
    tamper(ctx.raw()?.as_ref())?;
    let error = ensure_fails_with_reason(
        ctx,
        &schema,
        ErrorCode::PhysicalLayoutMismatch,
        reason,
        "same-version ensure",
    )?;
    expect_detail(&error, "table", table)?;
    Ok(error)
}

fn c027_missing_projection_column(ctx: &mut Ctx<'_>) -> CheckResult {
    let error = expect_physical(
        ctx,
        |raw| raw.drop_column("tasks", "priority"),
        "missing_column",
        "tasks",
    )?;
    expect_detail(&error, "column", "priority")
}

fn c028_missing_table(ctx: &mut Ctx<'_>) -> CheckResult {
    expect_physical(
        ctx,
        |raw| raw.drop_table("device_key_grants"),
        "missing_table",
        "device_key_grants",
    )?;
    Ok(())
}

fn c029_missing_internal_column(ctx: &mut Ctx<'_>) -> CheckResult {
    let error = expect_physical(
        ctx,
        |raw| raw.rebuild_table_without_column("tasks", "_sync_scopes"),
        "missing_column",
        "tasks",
    )?;
    expect_detail(&error, "column", "_sync_scopes")
}

fn c030_missing_index(ctx: &mut Ctx<'_>) -> CheckResult {
    expect_physical(
        ctx,
        |raw| raw.drop_index("sync_ix_tasks_by_title"),
        "missing_index",
        "tasks",
    )?;
    Ok(())
}

fn c031_index_definition(ctx: &mut Ctx<'_>) -> CheckResult {
    expect_physical(
        ctx,
        |raw| {
            raw.drop_index("sync_ix_tasks_by_project_title")?;
            raw.create_index(
                "sync_ix_tasks_by_project_title",
                "tasks",
                &["_sync_partition", "project_id", "title"],
                false,
            )
        },
        "index_definition",
        "tasks",
    )?;
    Ok(())
}

fn c032_not_null_extra_column(ctx: &mut Ctx<'_>) -> CheckResult {
    let error = expect_physical(
        ctx,
        |raw| raw.add_column("secrets", "extra_note", true),
        "nullability",
        "secrets",
    )?;
    expect_detail(&error, "column", "extra_note")
}

fn c033_key_collation(ctx: &mut Ctx<'_>) -> CheckResult {
    let error = expect_physical(
        ctx,
        |raw| raw.set_key_collation("tasks", "_sync_row_id", Some("POSIX")),
        "collation",
        "tasks",
    )?;
    expect_detail(&error, "column", "_sync_row_id")?;

    // A fresh database whose key column carries the default collation (legacy shape).
    let harness = ctx.harness();
    let db = ctx.extra_db()?;
    let clock: Arc<dyn Clock> = ctx.clock.clone();
    let schema = fix1()?;
    harness
        .open(&db, clock.clone())?
        .ensure_schema(&schema, &no_opts())?;
    let raw = harness.raw(&db)?;
    raw.set_key_collation("tasks", "_sync_row_id", None)?;
    check_eq!(
        raw.column_collation("tasks", "_sync_row_id")?,
        None,
        "setup: _sync_row_id collation after the rebuild with the default"
    );
    let upgraded = harness.open(&db, clock)?;
    upgraded.ensure_schema(&schema, &no_opts()).map_err(|e| {
        Failure::new(format!(
            "ensure over a default-collation key column (legacy shape): {e:?}"
        ))
    })?;
    check_eq!(
        raw.column_collation("tasks", "_sync_row_id")?.as_deref(),
        Some("C"),
        "_sync_row_id collation after the legacy upgrade"
    );
    Ok(())
}

// ---- legacy internal tables ------------------------------------------------

fn c034_legacy_wire_version(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let first = ctx.ensured(&schema)?;
    first.put_client_record(
        "p1",
        &ClientRecord {
            client_id: "c1".to_owned(),
            actor_id: "actor-1".to_owned(),
            wire_version: 2,
            cursor: 7,
            updated_at_ms: NOW,
            subscriptions: Vec::new(),
        },
    )?;
    ctx.raw()?
        .legacy_drop_column("sync_clients", "wire_version")?;
    let upgraded = ctx.ensured(&schema)?;
    let record = upgraded
        .get_client_record("p1", "c1")?
        .ok_or_else(|| Failure::new("legacy client record vanished"))?;
    check_eq!(record.wire_version, 1, "wire_version of the legacy record");
    check_eq!(record.cursor, 7, "cursor of the legacy record");
    Ok(())
}

fn c035_legacy_writer_version(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let first = ctx.ensured(&schema)?;
    push(first.as_ref(), "p1", "c1", "cc1", &[])?.seq()?;
    let raw = ctx.raw()?;
    raw.legacy_drop_column("sync_commits", "writer_version")?;
    check_eq!(
        raw.fence_trigger_definition()?,
        None,
        "setup: fence trigger after the legacy drop"
    );
    ctx.ensured(&schema)?;
    let columns = raw.list_columns("sync_commits")?;
    let (_, _, not_null) = columns
        .iter()
        .find(|(n, _, _)| n == "writer_version")
        .ok_or_else(|| {
            Failure::new(format!(
                "writer_version not re-added: {:?}",
                column_names(&columns)
            ))
        })?;
    check!(!*not_null, "re-added writer_version is NOT NULL");
    let old = RawFilter::eq("partition", "p1").and("commit_seq", "1");
    check_eq!(
        raw.count("sync_commits", old.clone())?,
        1,
        "legacy commit rows"
    );
    check_eq!(
        raw.read_text("sync_commits", "writer_version", old)?,
        None,
        "writer_version of the legacy commit"
    );
    check!(
        raw.fence_trigger_definition()?.is_some(),
        "fence trigger not installed"
    );
    expect_code(
        raw.insert_commit("p1", 2, None),
        ErrorCode::WriterFenceRejected,
        "raw insert with NULL writer version under fence 1",
    )?;
    Ok(())
}

fn c036_outdated_trigger_replaced(ctx: &mut Ctx<'_>) -> CheckResult {
    ctx.open()?;
    let raw = ctx.raw()?;
    let current = raw
        .fence_trigger_definition()?
        .ok_or_else(|| Failure::new("no fence trigger after open"))?;
    raw.install_outdated_fence_trigger()?;
    check!(
        raw.fence_trigger_definition()?.as_deref() != Some(current.as_str()),
        "setup: the outdated trigger definition equals the current one"
    );
    ctx.open()?;
    check_eq!(
        raw.fence_trigger_definition()?,
        Some(current),
        "trigger definition after reopening"
    );
    Ok(())
}

// ---- concurrency -----------------------------------------------------------

fn c037_warm_ensure_no_ddl(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let pusher = ctx.ensured(&schema)?;
    let warm = ctx.open()?;
    let mut tx = pusher.begin("p1")?;
    tx.lock_partition_for_push()?;
    let row = task(&schema, "t1", "proj-1", "held")?;
    tx.upsert_row("tasks", &row, Some(0))?;
    tx.append_commit(&crate::checks::support_lifecycle::one_change_commit(
        "held", "tasks", &row,
    ))?;
    let (sender, receiver) = mpsc::channel();
    let outcome = std::thread::scope(|scope| {
        let warm = &warm;
        let schema = &schema;
        scope.spawn(move || {
            let _ = sender.send(warm.ensure_schema(schema, &no_opts()));
        });
        match receiver.recv_timeout(Duration::from_secs(30)) {
            Ok(result) => Ok((result, tx.commit())),
            Err(_) => {
                // Hang guard: release the push so the ensure thread can end.
                let _ = tx.rollback();
                Err(Failure::new(
                    "warm ensure_schema did not complete within 30 s while a push held the partition lock",
                ))
            }
        }
    });
    let (ensured, committed) = outcome?;
    ensured.map_err(|e| Failure::new(format!("warm ensure_schema failed: {e:?}")))?;
    committed.map_err(|e| Failure::new(format!("the held push failed to commit: {e:?}")))?;
    check_eq!(
        warm.ensured_version(),
        Some(1),
        "ensured_version of the warm instance"
    );
    check_eq!(
        pusher.get_max_commit_seq("p1")?,
        1,
        "max_commit_seq after the held push"
    );
    Ok(())
}

fn c038_concurrent_bumps(ctx: &mut Ctx<'_>) -> CheckResult {
    const ROWS: usize = 600;
    let v1 = fix1()?;
    let old = ctx.ensured(&v1)?;
    seed_tasks(old.as_ref(), "part-a", &seeded_rows(&v1, ROWS, 10)?)?;
    seed_tasks(old.as_ref(), "part-b", &seeded_rows(&v1, 5, 10)?)?;
    let v2 = fix2()?;
    let bumpers = [ctx.open()?, ctx.open()?];
    let barrier = Barrier::new(bumpers.len());
    let results: Vec<CheckResult<sync_core::Result<()>>> = std::thread::scope(|scope| {
        let handles: Vec<_> = bumpers
            .iter()
            .map(|storage| {
                let (barrier, v2) = (&barrier, &v2);
                scope.spawn(move || {
                    barrier.wait();
                    storage.ensure_schema(v2, &no_opts())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().map_err(|_| Failure::new("bump thread panicked")))
            .collect()
    });
    for (n, result) in results.into_iter().enumerate() {
        result?.map_err(|e| Failure::new(format!("concurrent bump {n} failed: {e:?}")))?;
    }
    let marker = old
        .read_schema_marker()?
        .ok_or_else(|| Failure::new("no marker after the concurrent bumps"))?;
    check_eq!(
        marker.schema_version,
        2,
        "marker after the concurrent bumps"
    );
    for (partition, count) in [("part-a", ROWS), ("part-b", 5)] {
        let expected = seeded_rows(&v2, count, 10)?;
        let rows = all_rows(bumpers[0].as_ref(), partition, "tasks")?;
        check_eq!(rows.len(), count, "rows in {partition}");
        for (row, want) in rows.iter().zip(&expected) {
            check!(
                row.payload == want.payload,
                "{partition}/{} is not rewritten exactly once (decodes as {:?})",
                row.row_id,
                decode(&v2, "tasks", &row.payload)
            );
        }
    }
    Ok(())
}

// ---- readiness wrapper -----------------------------------------------------

fn expect_not_ready(
    result: sync_core::Result<CompiledSchema>,
    phase: &str,
    cause: &str,
) -> CheckResult {
    let error = expect_code(
        result.map(|s| s.version),
        ErrorCode::SchemaNotReady,
        "ensure_ready",
    )?;
    expect_detail(&error, "phase", phase)?;
    expect_detail(&error, "cause", cause)
}

fn parse(value: &Value) -> CheckResult<sync_schema::SchemaInput> {
    sync_schema::parse_schema_value(value)
        .map_err(|e| Failure::new(format!("fixture input does not parse: {e:?}")))
}

fn c039_ensure_ready_compile(ctx: &mut Ctx<'_>) -> CheckResult {
    let mut value = fix1_json();
    value["tables"][DOCS]["name"] = json!("sync_changes");
    let input = parse(&value)?;
    let storage = ctx.open()?;
    expect_not_ready(
        sync_schema::ensure_ready(&input, storage.as_ref(), &no_opts()),
        "schema_compile",
        "schema.invalid_identifier",
    )
}

fn c040_ensure_ready_migration(ctx: &mut Ctx<'_>) -> CheckResult {
    ctx.ensured(&fix1()?)?;
    let mut value = fix1_json();
    value["version"] = json!(2);
    push_column(
        &mut value,
        TASKS,
        json!({"name": "assignee", "type": "string"}),
    );
    let input = parse(&value)?;
    let storage = ctx.open()?;
    expect_not_ready(
        sync_schema::ensure_ready(&input, storage.as_ref(), &no_opts()),
        "storage_migration",
        "sync.storage.migration_refused",
    )
}

/// Beyond the checklist (`docs/decisions.md`): comparison B (§6.4) covers
/// nullability too. The stored layouts say `nullable: true` for the
/// configured non-null `title`, then `nullable: false` for the configured
/// nullable `priority`; each is refused at the same version, and the
/// unchanged layouts are accepted again in between.
fn c338_same_version_nullability(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    ctx.ensured(&schema)?;
    let layouts = sync_schema::layouts_json(&schema);
    let cases = [("title", "string", false), ("priority", "integer", true)];
    for (column, column_type, configured) in cases {
        let entry = |nullable: bool| {
            format!("{{\"name\":\"{column}\",\"type\":\"{column_type}\",\"nullable\":{nullable}}}")
        };
        check!(
            layouts.matches(&entry(configured)).count() == 1,
            "layouts_json has no single entry {} in {layouts}",
            entry(configured)
        );
        let flipped = layouts.replacen(&entry(configured), &entry(!configured), 1);
        ctx.raw()?.set_layouts_text(Some(&flipped))?;
        let what = format!(
            "same version with {column} stored nullable {} (configured {configured})",
            !configured
        );
        let error = ensure_fails(ctx, &schema, ErrorCode::StoredLayoutMismatch, &what)?;
        expect_detail(&error, "table", "tasks")?;
        expect_detail(&error, "column", column)?;
        ctx.raw()?.set_layouts_text(Some(&layouts))?;
        ctx.ensured(&schema)?;
    }
    Ok(())
}
