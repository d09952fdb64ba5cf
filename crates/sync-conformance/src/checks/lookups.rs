//! §9 Trusted lookups and partition scans, C-157…C-169.

use serde_json::json;
use sync_core::{Capability, CompiledSchema, Error, ErrorCode, RowValue};

use crate::check::{
    expect_code, expect_detail, expect_message_free_of, CheckDef, CheckResult, Failure,
};
use crate::checks::support_lifecycle::{ensure_fails_with_reason, no_opts};
use crate::checks::support_pdata::{ids, index_scan, strings, text, write_rows, P};
use crate::context::Ctx;
use crate::fixtures::{compile_json, doc, fix1, fix1_json, grant, scopes, secret, task};
use crate::registry::check;
use crate::{check, check_eq};

/// Group name.
pub(crate) const GROUP: &str = "lookups";

/// The checks of this group.
pub(crate) const CHECKS: &[CheckDef] = &[
    check(GROUP, "C-157", "scan_rows_by_index is exact, byte-ordered and resumable", c157_index_scan_exact_ordered)
        .needs(Capability::IndexScan),
    check(GROUP, "C-158", "a lookup through grants_by_device returns rows with their own stored scopes", c158_lookup_returns_stored_scopes)
        .needs(Capability::IndexScan),
    check(GROUP, "C-159", "a compound index needs both values; one value is index_value_count_mismatch", c159_compound_index_values)
        .needs(Capability::IndexScan),
    check(GROUP, "C-160", "an unknown index is index_not_found", c160_unknown_index)
        .needs(Capability::IndexScan),
    check(GROUP, "C-161", "zero values are index_value_count_mismatch", c161_zero_values)
        .needs(Capability::IndexScan),
    check(GROUP, "C-162", "limit 0 and 1001 are invalid_limit", c162_invalid_limits)
        .needs(Capability::IndexScan),
    check(GROUP, "C-163", "an index lookup on non-materialized secrets is index_not_materialized", c163_not_materialized)
        .needs(Capability::IndexScan),
    check(GROUP, "C-164", "validation order: unknown table before limit, limit before index", c164_validation_precedence)
        .needs(Capability::IndexScan),
    check(GROUP, "C-165", "a string value for the boolean done is index_value_type_mismatch", c165_value_type_mismatch)
        .needs(Capability::IndexScan),
    check(GROUP, "C-166", "a NULL value matches rows whose column is SQL NULL", c166_null_matches_null)
        .needs(Capability::IndexScan),
    check(GROUP, "C-167", "transaction scan_rows_by_index sees staged upserts, moves and deletes", c167_tx_index_scan_staged)
        .needs(Capability::IndexScan),
    check(GROUP, "C-168", "lookup error messages name no table and no value", c168_messages_leak_nothing)
        .needs(Capability::IndexScan),
    check(GROUP, "C-169", "scan_partition_rows: every row in byte order, resumable, works on secrets, limit 1001 rejected", c169_scan_partition_rows),
    check(GROUP, "C-352", "same version, a non-unique index in the default shape opens and answers; another column list is index_definition", c352_default_index_shape)
        .needs(Capability::IndexScan),
];

/// `FIX1` with an extra declared index `tasks_by_done(done)`.
fn fix1_with_done_index() -> CheckResult<CompiledSchema> {
    let mut value = fix1_json();
    if let Some(indexes) = value["tables"][0]["indexes"].as_array_mut() {
        indexes.push(json!({"name": "tasks_by_done", "columns": ["done"]}));
    }
    compile_json(&value)
}

fn c157_index_scan_exact_ordered(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let storage = ctx.ensured(&schema)?;
    let rows = [
        task(&schema, "r4", "p4", "t")?,
        task(&schema, "r2", "p2", "tt")?,
        task(&schema, "r3", "p3", "t")?,
        task(&schema, "r1", "p1", "t")?,
        task(&schema, "r5", "p5", "T")?,
    ];
    write_rows(storage.as_ref(), P, "tasks", &rows)?;
    let first = storage.scan_rows_by_index(
        P,
        &index_scan("tasks", "tasks_by_title", vec![text("t")], None, 2),
    )?;
    check_eq!(ids(&first), strings(&["r1", "r3"]), "first page");
    let next = storage.scan_rows_by_index(
        P,
        &index_scan("tasks", "tasks_by_title", vec![text("t")], Some("r3"), 2),
    )?;
    check_eq!(ids(&next), strings(&["r4"]), "page after r3");
    Ok(())
}

fn c158_lookup_returns_stored_scopes(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let storage = ctx.ensured(&schema)?;
    let rows = [
        grant(&schema, "g2", "u2", "k1")?,
        grant(&schema, "g1", "u1", "k1")?,
        grant(&schema, "g3", "u1", "k2")?,
    ];
    write_rows(storage.as_ref(), P, "device_key_grants", &rows)?;
    let found = storage.scan_rows_by_index(
        P,
        &index_scan(
            "device_key_grants",
            "grants_by_device",
            vec![text("k1")],
            None,
            10,
        ),
    )?;
    check_eq!(ids(&found), strings(&["g1", "g2"]), "rows of device k1");
    check_eq!(
        found[0].scopes,
        scopes(&[("user_id", "u1")]),
        "scopes of g1"
    );
    check_eq!(
        found[1].scopes,
        scopes(&[("user_id", "u2")]),
        "scopes of g2"
    );
    check_eq!(found[1].payload, rows[0].payload, "payload of g2");
    check!(
        found.iter().all(|r| !r.scopes.contains_key("device_key")),
        "device_key appears as a scope variable: {found:?}"
    );
    Ok(())
}

fn c159_compound_index_values(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let storage = ctx.ensured(&schema)?;
    write_rows(
        storage.as_ref(),
        P,
        "tasks",
        &[
            task(&schema, "r1", "p1", "t")?,
            task(&schema, "r2", "p2", "t")?,
        ],
    )?;
    let both = storage.scan_rows_by_index(
        P,
        &index_scan(
            "tasks",
            "tasks_by_project_title",
            vec![text("p1"), text("t")],
            None,
            10,
        ),
    )?;
    check_eq!(ids(&both), strings(&["r1"]), "lookup with both values");
    expect_code(
        storage.scan_rows_by_index(
            P,
            &index_scan(
                "tasks",
                "tasks_by_project_title",
                vec![text("p1")],
                None,
                10,
            ),
        ),
        ErrorCode::IndexValueCountMismatch,
        "lookup with one of two values",
    )?;
    Ok(())
}

fn c160_unknown_index(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.ensured(&fix1()?)?;
    expect_code(
        storage.scan_rows_by_index(
            P,
            &index_scan("tasks", "nope_index", vec![text("t")], None, 10),
        ),
        ErrorCode::IndexNotFound,
        "lookup through an undeclared index",
    )?;
    Ok(())
}

fn c161_zero_values(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.ensured(&fix1()?)?;
    expect_code(
        storage.scan_rows_by_index(
            P,
            &index_scan("tasks", "tasks_by_title", Vec::new(), None, 10),
        ),
        ErrorCode::IndexValueCountMismatch,
        "lookup with zero values",
    )?;
    Ok(())
}

fn c162_invalid_limits(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.ensured(&fix1()?)?;
    for limit in [0, 1001] {
        expect_code(
            storage.scan_rows_by_index(
                P,
                &index_scan("tasks", "tasks_by_title", vec![text("t")], None, limit),
            ),
            ErrorCode::InvalidLimit,
            &format!("lookup with limit {limit}"),
        )?;
    }
    Ok(())
}

fn c163_not_materialized(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.ensured(&fix1()?)?;
    expect_code(
        storage.scan_rows_by_index(
            P,
            &index_scan("secrets", "secrets_by_body", vec![text("x")], None, 10),
        ),
        ErrorCode::IndexNotMaterialized,
        "lookup on secrets",
    )?;
    Ok(())
}

fn c164_validation_precedence(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.ensured(&fix1()?)?;
    expect_code(
        storage.scan_rows_by_index(
            P,
            &index_scan("nope_table", "tasks_by_title", vec![text("t")], None, 0),
        ),
        ErrorCode::UnknownTable,
        "unknown table with limit 0",
    )?;
    expect_code(
        storage.scan_rows_by_index(
            P,
            &index_scan("tasks", "nope_index", vec![text("t")], None, 0),
        ),
        ErrorCode::InvalidLimit,
        "limit 0 with an unknown index",
    )?;
    Ok(())
}

fn c165_value_type_mismatch(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.ensured(&fix1_with_done_index()?)?;
    expect_code(
        storage.scan_rows_by_index(
            P,
            &index_scan("tasks", "tasks_by_done", vec![text("true")], None, 10),
        ),
        ErrorCode::IndexValueTypeMismatch,
        "string value for boolean done",
    )?;
    Ok(())
}

fn c166_null_matches_null(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let storage = ctx.ensured(&schema)?;
    let rows = [
        doc(&schema, "d3", "o1", "p1", None)?,
        doc(&schema, "d2", "o1", "p1", Some("x"))?,
        doc(&schema, "d1", "o1", "p1", None)?,
    ];
    write_rows(storage.as_ref(), P, "docs", &rows)?;
    let found = storage.scan_rows_by_index(
        P,
        &index_scan("docs", "docs_by_body", vec![RowValue::Null], None, 10),
    )?;
    check_eq!(ids(&found), strings(&["d1", "d3"]), "rows with body NULL");
    Ok(())
}

fn c167_tx_index_scan_staged(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let storage = ctx.ensured(&schema)?;
    write_rows(
        storage.as_ref(),
        P,
        "tasks",
        &[
            task(&schema, "r1", "p1", "t")?,
            task(&schema, "r2", "p2", "t")?,
            task(&schema, "r4", "p4", "u")?,
        ],
    )?;
    let mut tx = storage.begin(P)?;
    tx.delete_row("tasks", "r1")?;
    tx.upsert_row("tasks", &task(&schema, "r2", "p2", "moved")?, None)?;
    tx.upsert_row("tasks", &task(&schema, "r3", "p3", "t")?, None)?;
    let found = tx.scan_rows_by_index(&index_scan(
        "tasks",
        "tasks_by_title",
        vec![text("t")],
        None,
        10,
    ))?;
    tx.rollback()?;
    check_eq!(
        ids(&found),
        strings(&["r3"]),
        "transaction lookup of title t"
    );
    Ok(())
}

fn c168_messages_leak_nothing(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.ensured(&fix1_with_done_index()?)?;
    let lookup = |table: &str, index: &str, values: Vec<RowValue>, limit: i64| {
        storage.scan_rows_by_index(P, &index_scan(table, index, values, None, limit))
    };
    let cases: Vec<(ErrorCode, sync_core::Result<_>)> = vec![
        (
            ErrorCode::IndexValueCountMismatch,
            lookup(
                "tasks",
                "tasks_by_project_title",
                vec![text("value-one")],
                10,
            ),
        ),
        (
            ErrorCode::IndexNotFound,
            lookup("tasks", "nope_index", vec![text("value-two")], 10),
        ),
        (
            ErrorCode::IndexValueCountMismatch,
            lookup("tasks", "tasks_by_title", Vec::new(), 10),
        ),
        (
            ErrorCode::InvalidLimit,
            lookup("tasks", "tasks_by_title", vec![text("value-three")], 0),
        ),
        (
            ErrorCode::InvalidLimit,
            lookup("tasks", "tasks_by_title", vec![text("value-three")], 1001),
        ),
        (
            ErrorCode::IndexNotMaterialized,
            lookup("secrets", "secrets_by_body", vec![text("value-four")], 10),
        ),
        (
            ErrorCode::UnknownTable,
            lookup("nope_table", "tasks_by_title", vec![text("value-five")], 0),
        ),
        (
            ErrorCode::IndexValueTypeMismatch,
            lookup("tasks", "tasks_by_done", vec![text("value-six")], 10),
        ),
    ];
    let needles = [
        "tasks",
        "secrets",
        "nope_table",
        "nope_index",
        "value-one",
        "value-two",
        "value-three",
        "value-four",
        "value-five",
        "value-six",
    ];
    for (code, result) in cases {
        let error: Error = expect_code(result, code, "lookup error")?;
        expect_message_free_of(&error, &needles)?;
    }
    Ok(())
}

fn c169_scan_partition_rows(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let storage = ctx.ensured(&schema)?;
    write_rows(
        storage.as_ref(),
        P,
        "tasks",
        &[
            task(&schema, "b", "p1", "t1")?,
            task(&schema, "é", "p2", "t2")?,
            task(&schema, "a", "p3", "t3")?,
            task(&schema, "C", "p1", "t4")?,
        ],
    )?;
    write_rows(
        storage.as_ref(),
        "part-2",
        "tasks",
        &[task(&schema, "a0", "p1", "t")?],
    )?;
    write_rows(
        storage.as_ref(),
        P,
        "secrets",
        &[
            secret(&schema, "s2", "p1", b"two")?,
            secret(&schema, "s1", "p2", b"one")?,
        ],
    )?;
    let all = storage.scan_partition_rows(P, "tasks", None, 10)?;
    check_eq!(
        ids(&all),
        strings(&["C", "a", "b", "é"]),
        "every tasks row of the partition"
    );
    let first = storage.scan_partition_rows(P, "tasks", None, 2)?;
    check_eq!(ids(&first), strings(&["C", "a"]), "first page of 2");
    let next = storage.scan_partition_rows(P, "tasks", Some("a"), 2)?;
    check_eq!(ids(&next), strings(&["b", "é"]), "page after a");
    let secrets = storage.scan_partition_rows(P, "secrets", None, 10)?;
    check_eq!(ids(&secrets), strings(&["s1", "s2"]), "secrets rows");
    expect_code(
        storage.scan_partition_rows(P, "tasks", None, 1001),
        ErrorCode::InvalidLimit,
        "scan_partition_rows with limit 1001",
    )?;
    Ok(())
}

/// A dialect may end its non-unique declared indexes with its own key suffix
/// (`SqlDialect::declared_index_columns`, `docs/decisions.md`, "Index
/// lookups in row-id order"); a database created with the default shape —
/// `_sync_partition` then the declared columns, by an earlier version or by
/// the reference — must still open at its version and answer lookups, and
/// any other column list is still refused, naming the dialect's shape.
fn c352_default_index_shape(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let storage = ctx.ensured(&schema)?;
    let rows = [
        task(&schema, "r3", "p3", "t")?,
        task(&schema, "r2", "p2", "other")?,
        task(&schema, "r1", "p1", "t")?,
    ];
    write_rows(storage.as_ref(), P, "tasks", &rows)?;
    drop(storage);
    let raw = ctx.raw()?;
    raw.drop_index("sync_ix_tasks_by_title")?;
    raw.create_index(
        "sync_ix_tasks_by_title",
        "tasks",
        &["_sync_partition", "title"],
        false,
    )?;
    let reopened = ctx.open()?;
    reopened.ensure_schema(&schema, &no_opts())?;
    let found = reopened.scan_rows_by_index(
        P,
        &index_scan("tasks", "tasks_by_title", vec![text("t")], None, 10),
    )?;
    check_eq!(
        ids(&found),
        strings(&["r1", "r3"]),
        "lookup through the default shape"
    );
    drop(reopened);

    raw.drop_index("sync_ix_tasks_by_title")?;
    raw.create_index(
        "sync_ix_tasks_by_title",
        "tasks",
        &["_sync_partition", "title", "project_id"],
        false,
    )?;
    let error = ensure_fails_with_reason(
        ctx,
        &schema,
        ErrorCode::PhysicalLayoutMismatch,
        "index_definition",
        "same-version ensure with another column list",
    )?;
    let declared = schema
        .table("tasks")
        .and_then(|t| t.index("tasks_by_title"))
        .ok_or_else(|| Failure::new("FIX1 declares tasks_by_title"))?;
    let expected: Vec<String> = ctx
        .sql_dialect()
        .declared_index_columns(declared)
        .iter()
        .map(|c| ctx.sql_dialect().quote_ident(c))
        .collect();
    expect_detail(&error, "expected", &format!("({})", expected.join(", ")))
}
