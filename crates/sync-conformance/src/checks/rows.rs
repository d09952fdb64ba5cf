//! §5 Rows and the scope index, C-106…C-119.

use sync_core::{
    AuthoritativeQueryRequest, Capability, ErrorCode, RowValue, ServeContext, SqlValue,
    StoredPushResult, StoredRow, StoredScopes,
};

use crate::check::{expect_code, CheckDef, CheckResult, Failure, Requires};
use crate::context::Ctx;
use crate::fixtures::{decode, doc, fix1, push, scopes, secret, task, task_values, task_with, Op};
use crate::harness::RawFilter;
use crate::properties::BooleanValues;
use crate::registry::check;
use crate::{check, check_eq};

use super::support_rows::{commit_of, full_task, scan_ids, tx_scan_ids, upsert_change, write_rows};

/// Group name.
pub(crate) const GROUP: &str = "rows";

/// The checks of this group.
pub(crate) const CHECKS: &[CheckDef] = &[
    check(
        GROUP,
        "C-106",
        "upsert_row round-trips through tx and pool get_row",
        c106_upsert_round_trip,
    ),
    check(
        GROUP,
        "C-107",
        "one row id in two partitions is two independent rows",
        c107_partitions_independent,
    ),
    check(
        GROUP,
        "C-108",
        "a committed delete_row removes the row, its scope entries and blob refs",
        c108_delete_row,
    )
    .needs(Capability::BlobRefs),
    check(
        GROUP,
        "C-109",
        "delete_row of an absent row is a no-op",
        c109_delete_absent_row,
    ),
    check(
        GROUP,
        "C-110",
        "re-upsert with another scope moves the row between scans",
        c110_rescope_moves_row,
    ),
    check(
        GROUP,
        "C-111",
        "a row with an empty scope map is readable but never scanned",
        c111_empty_scopes,
    ),
    check(
        GROUP,
        "C-112",
        "upsert/delete cycles in one transaction leave exactly the final scopes",
        c112_cycles_in_one_tx,
    ),
    check(
        GROUP,
        "C-113",
        "a re-scope discarded by commit_rejected_push_result keeps the old scopes",
        c113_rejected_rescope,
    ),
    check(
        GROUP,
        "C-114",
        "a corrupt payload on a materialized table is decode_failed and writes nothing",
        c114_corrupt_materialized,
    ),
    check(
        GROUP,
        "C-115",
        "a corrupt payload on non-materialized secrets is decode_failed",
        c115_corrupt_non_materialized,
    ),
    check(
        GROUP,
        "C-116",
        "upsert_row with an empty row id is invalid_row_id",
        c116_empty_row_id,
    ),
    check(
        GROUP,
        "C-117",
        "projection of done reads as the declared boolean values (0/1 or false/true)",
        c117_boolean_projection,
    )
    .needs(Capability::AuthoritativeQuery),
    check(
        GROUP,
        "C-118",
        "json with \\u0000 projects NULL and keeps the payload",
        c118_json_nul_projection,
    )
    .requires(Requires::JsonNulProjectsNull)
    .needs(Capability::AuthoritativeQuery),
    check(
        GROUP,
        "C-119",
        "get_row_scopes returns (server_version, scopes)",
        c119_get_row_scopes,
    )
    .needs(Capability::Admin),
];

fn expect_row(
    storage: &dyn sync_core::ServerStorage,
    partition: &str,
    table: &str,
    id: &str,
) -> CheckResult<StoredRow> {
    storage
        .get_row(partition, table, id)?
        .ok_or_else(|| Failure::new(format!("{table}/{id} in {partition} is missing")))
}

fn c106_upsert_round_trip(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let storage = ctx.ensured(&schema)?;
    let row = StoredRow {
        server_version: 3,
        ..full_task(&schema, "t1", "pA", "round trip", true)?
    };
    let mut tx = storage.begin("p1")?;
    tx.upsert_row("tasks", &row, Some(0))?;
    check_eq!(tx.get_row("tasks", "t1")?, Some(row.clone()), "tx get_row");
    tx.commit()?;
    let stored = expect_row(storage.as_ref(), "p1", "tasks", "t1")?;
    check_eq!(stored.server_version, 3, "server_version");
    check_eq!(stored.payload, row.payload, "payload bytes");
    check_eq!(stored.scopes, row.scopes, "scopes");
    check_eq!(stored.row_id, "t1", "row_id");
    Ok(())
}

fn c107_partitions_independent(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let storage = ctx.ensured(&schema)?;
    for (partition, title) in [("part-a", "title a"), ("part-b", "title b")] {
        push(
            storage.as_ref(),
            partition,
            "client-1",
            "a",
            &[Op::upsert("tasks", task(&schema, "t1", "pA", title)?)],
        )?;
    }
    for (partition, title) in [("part-a", "title a"), ("part-b", "title b")] {
        let row = expect_row(storage.as_ref(), partition, "tasks", "t1")?;
        let values = decode(&schema, "tasks", &row.payload)?;
        check_eq!(
            values.get(2),
            Some(&RowValue::String(title.to_owned())),
            "title in {partition}"
        );
    }
    check_eq!(
        storage.get_row("part-c", "tasks", "t1")?,
        None,
        "row in a third partition"
    );
    Ok(())
}

fn c108_delete_row(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let storage = ctx.ensured(&schema)?;
    let row = task(&schema, "t1", "pA", "with blob")?;
    let mut tx = storage.begin("p1")?;
    tx.lock_partition_for_push()?;
    tx.upsert_row("tasks", &row, Some(0))?;
    tx.set_blob_refs("tasks", "t1", &["blob-1".to_owned()])?;
    tx.append_commit(&commit_of("a", vec![upsert_change("tasks", &row)]))?;
    tx.commit()?;
    check_eq!(
        scan_ids(storage.as_ref(), "p1", "tasks", "project_id", "pA")?,
        ["t1"],
        "scan before the delete"
    );
    check_eq!(
        storage.list_referenced_blob_ids("p1")?,
        ["blob-1"],
        "blob ids before the delete"
    );

    push(
        storage.as_ref(),
        "p1",
        "client-1",
        "b",
        &[Op::delete("tasks", "t1")],
    )?;
    check_eq!(
        storage.get_row("p1", "tasks", "t1")?,
        None,
        "get_row after the delete"
    );
    check_eq!(
        scan_ids(storage.as_ref(), "p1", "tasks", "project_id", "pA")?,
        Vec::<String>::new(),
        "scan after the delete"
    );
    check_eq!(
        storage.list_rows_referencing_blob("p1", "blob-1")?,
        [],
        "rows referencing blob-1"
    );
    check_eq!(
        storage.list_referenced_blob_ids("p1")?,
        Vec::<String>::new(),
        "blob ids after the delete"
    );
    Ok(())
}

fn c109_delete_absent_row(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let storage = ctx.ensured(&schema)?;
    let kept = task(&schema, "t1", "pA", "kept")?;
    push(
        storage.as_ref(),
        "p1",
        "client-1",
        "a",
        &[Op::upsert("tasks", kept.clone())],
    )?;
    let mut tx = storage.begin("p1")?;
    tx.delete_row("tasks", "ghost")?;
    tx.commit()?;
    check_eq!(storage.get_row("p1", "tasks", "ghost")?, None, "absent row");
    check_eq!(
        storage.get_row("p1", "tasks", "t1")?,
        Some(kept),
        "other row"
    );
    check_eq!(
        scan_ids(storage.as_ref(), "p1", "tasks", "project_id", "pA")?,
        ["t1"],
        "scan"
    );
    Ok(())
}

fn c110_rescope_moves_row(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let storage = ctx.ensured(&schema)?;
    push(
        storage.as_ref(),
        "p1",
        "client-1",
        "a",
        &[Op::upsert("tasks", task(&schema, "t1", "pA", "x")?)],
    )?;
    let moved = StoredRow {
        server_version: 2,
        ..task(&schema, "t1", "pB", "x")?
    };
    push(
        storage.as_ref(),
        "p1",
        "client-1",
        "b",
        &[Op::upsert("tasks", moved)],
    )?;
    check_eq!(
        scan_ids(storage.as_ref(), "p1", "tasks", "project_id", "pA")?,
        Vec::<String>::new(),
        "scan of the old scope"
    );
    check_eq!(
        scan_ids(storage.as_ref(), "p1", "tasks", "project_id", "pB")?,
        ["t1"],
        "scan of the new scope"
    );
    Ok(())
}

fn c111_empty_scopes(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let storage = ctx.ensured(&schema)?;
    let row = StoredRow {
        scopes: StoredScopes::new(),
        ..task(&schema, "t1", "pA", "unscoped")?
    };
    write_rows(
        storage.as_ref(),
        "p1",
        "tasks",
        "a",
        std::slice::from_ref(&row),
    )?;
    check_eq!(storage.get_row("p1", "tasks", "t1")?, Some(row), "get_row");
    check_eq!(
        scan_ids(storage.as_ref(), "p1", "tasks", "project_id", "pA")?,
        Vec::<String>::new(),
        "scan by its payload's project"
    );
    let entries = ctx.raw()?.count(
        "sync_row_scopes",
        RawFilter::eq("partition", "p1")
            .and("tbl", "tasks")
            .and("row_id", "t1"),
    )?;
    check_eq!(entries, 0, "sync_row_scopes entries of the row");
    Ok(())
}

fn c112_cycles_in_one_tx(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let storage = ctx.ensured(&schema)?;
    push(
        storage.as_ref(),
        "p1",
        "client-1",
        "a",
        &[
            Op::upsert("tasks", task(&schema, "t2", "pA", "neighbour")?),
            Op::upsert("docs", doc(&schema, "d1", "o1", "pA", Some("doc"))?),
        ],
    )?;
    push(
        storage.as_ref(),
        "other",
        "client-1",
        "a",
        &[Op::upsert("tasks", task(&schema, "t1", "pA", "elsewhere")?)],
    )?;

    let version = |n: i64, project: &str| -> CheckResult<StoredRow> {
        Ok(StoredRow {
            server_version: n,
            ..task(&schema, "t1", project, "cycled")?
        })
    };
    let mut tx = storage.begin("p1")?;
    tx.lock_partition_for_push()?;
    tx.upsert_row("tasks", &version(1, "pA")?, Some(0))?;
    tx.delete_row("tasks", "t1")?;
    tx.upsert_row("tasks", &version(2, "pB")?, Some(1))?;
    tx.upsert_row("tasks", &version(3, "pC")?, Some(2))?;
    tx.delete_row("tasks", "t1")?;
    tx.upsert_row("tasks", &version(4, "pB")?, Some(3))?;
    check_eq!(
        tx_scan_ids(tx.as_mut(), "tasks", "project_id", "pB")?,
        ["t1"],
        "tx scan of the final scope"
    );
    check_eq!(
        tx_scan_ids(tx.as_mut(), "tasks", "project_id", "pC")?,
        Vec::<String>::new(),
        "tx scan of a discarded scope"
    );
    tx.commit()?;

    let expected: [(&str, &str, &str, &str, Vec<&str>); 6] = [
        ("p1", "tasks", "project_id", "pA", vec!["t2"]),
        ("p1", "tasks", "project_id", "pB", vec!["t1"]),
        ("p1", "tasks", "project_id", "pC", vec![]),
        ("p1", "docs", "project_id", "pA", vec!["d1"]),
        ("p1", "docs", "org_id", "o1", vec!["d1"]),
        ("other", "tasks", "project_id", "pA", vec!["t1"]),
    ];
    for (partition, table, variable, value, ids) in expected {
        check_eq!(
            scan_ids(storage.as_ref(), partition, table, variable, value)?,
            ids,
            "scan {partition}/{table} {variable}={value}"
        );
    }
    let row = expect_row(storage.as_ref(), "p1", "tasks", "t1")?;
    check_eq!(
        row.scopes,
        scopes(&[("project_id", "pB")]),
        "final stored scopes"
    );
    check_eq!(row.server_version, 4, "final server_version");
    let entries = ctx.raw()?.count(
        "sync_row_scopes",
        RawFilter::eq("partition", "p1")
            .and("tbl", "tasks")
            .and("row_id", "t1"),
    )?;
    check_eq!(entries, 1, "sync_row_scopes entries of the cycled row");
    Ok(())
}

fn c113_rejected_rescope(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let storage = ctx.ensured(&schema)?;
    push(
        storage.as_ref(),
        "p1",
        "client-1",
        "a",
        &[Op::upsert("tasks", task(&schema, "t1", "pA", "x")?)],
    )?;
    let moved = StoredRow {
        server_version: 2,
        ..task(&schema, "t1", "pB", "x")?
    };
    let mut tx = storage.begin("p1")?;
    tx.lock_partition_for_push()?;
    tx.upsert_row("tasks", &moved, Some(0))?;
    let rejected = StoredPushResult {
        status: sync_core::PushStatus::Rejected,
        commit_seq: None,
        recorded_at_ms: Some(crate::context::NOW),
        cache_identity: None,
        results: Vec::new(),
        actor_id: None,
    };
    tx.commit_rejected_push_result("client-1", "b", &rejected)?;
    check_eq!(
        scan_ids(storage.as_ref(), "p1", "tasks", "project_id", "pA")?,
        ["t1"],
        "scan of the old scope"
    );
    check_eq!(
        scan_ids(storage.as_ref(), "p1", "tasks", "project_id", "pB")?,
        Vec::<String>::new(),
        "scan of the discarded scope"
    );
    let row = expect_row(storage.as_ref(), "p1", "tasks", "t1")?;
    check_eq!(row.scopes, scopes(&[("project_id", "pA")]), "stored scopes");
    check_eq!(row.server_version, 1, "server_version");
    check_eq!(
        storage.get_push_result("p1", "client-1", "b")?,
        Some(rejected),
        "stored rejection"
    );
    Ok(())
}

fn c114_corrupt_materialized(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let storage = ctx.ensured(&schema)?;
    check!(
        schema.table("tasks").is_some_and(|t| t.materialize),
        "FIX1 tasks must be materialized"
    );
    let good = task(&schema, "t1", "pA", "good")?;
    let mut bad = task(&schema, "t2", "pA", "bad")?;
    bad.payload.pop();
    let mut tx = storage.begin("p1")?;
    tx.lock_partition_for_push()?;
    tx.upsert_row("tasks", &good, Some(0))?;
    expect_code(
        tx.upsert_row("tasks", &bad, Some(1)),
        ErrorCode::CodecDecodeFailed,
        "truncated payload",
    )?;
    check_eq!(
        tx.get_row("tasks", "t2")?,
        None,
        "tx get_row of the refused row"
    );
    tx.append_commit(&commit_of("a", vec![upsert_change("tasks", &good)]))?;
    tx.commit()?;
    check_eq!(
        storage.get_row("p1", "tasks", "t1")?,
        Some(good),
        "row written before the refusal"
    );
    check_eq!(storage.get_row("p1", "tasks", "t2")?, None, "refused row");
    check_eq!(
        scan_ids(storage.as_ref(), "p1", "tasks", "project_id", "pA")?,
        ["t1"],
        "scan"
    );
    let raw = ctx.raw()?;
    check_eq!(
        raw.count("tasks", RawFilter::eq("_sync_row_id", "t2"))?,
        0,
        "physical rows of t2"
    );
    check_eq!(
        raw.count("sync_row_scopes", RawFilter::eq("row_id", "t2"))?,
        0,
        "scope entries of t2"
    );
    Ok(())
}

fn c115_corrupt_non_materialized(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let storage = ctx.ensured(&schema)?;
    check!(
        schema.table("secrets").is_some_and(|t| !t.materialize),
        "FIX1 secrets must not be materialized"
    );
    let mut bad = secret(&schema, "s1", "pA", b"ciphertext")?;
    bad.payload.push(0x00);
    let mut tx = storage.begin("p1")?;
    expect_code(
        tx.upsert_row("secrets", &bad, Some(0)),
        ErrorCode::CodecDecodeFailed,
        "payload with a trailing byte",
    )?;
    tx.commit()?;
    check_eq!(storage.get_row("p1", "secrets", "s1")?, None, "refused row");
    Ok(())
}

fn c116_empty_row_id(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let storage = ctx.ensured(&schema)?;
    let row = StoredRow {
        row_id: String::new(),
        ..task(&schema, "t1", "pA", "x")?
    };
    let mut tx = storage.begin("p1")?;
    expect_code(
        tx.upsert_row("tasks", &row, Some(0)),
        ErrorCode::InvalidRowId,
        "empty row id",
    )?;
    tx.rollback()?;
    Ok(())
}

fn select(sql: &str) -> AuthoritativeQueryRequest {
    AuthoritativeQueryRequest {
        sql: sql.to_owned(),
        params: Vec::new(),
        tables: vec!["tasks".to_owned()],
    }
}

fn c117_boolean_projection(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let storage = ctx.ensured(&schema)?;
    let mut done = task_values(&schema, "t1", "pA", "done");
    done[3] = RowValue::Boolean(true);
    push(
        storage.as_ref(),
        "p1",
        "client-1",
        "a",
        &[
            Op::upsert("tasks", task_with(&schema, done)?),
            Op::upsert("tasks", task(&schema, "t2", "pA", "open")?),
        ],
    )?;
    let result = storage.query_authoritative(
        "p1",
        &select("SELECT id, done FROM tasks ORDER BY id"),
        &ServeContext::default(),
    )?;
    let (yes, no) = match ctx.properties().booleans {
        BooleanValues::Booleans => (SqlValue::Bool(true), SqlValue::Bool(false)),
        BooleanValues::Integers => (SqlValue::Integer(1), SqlValue::Integer(0)),
    };
    let expected = vec![
        vec![SqlValue::Text("t1".to_owned()), yes],
        vec![SqlValue::Text("t2".to_owned()), no],
    ];
    check_eq!(
        result.rows,
        expected,
        "rows of SELECT id, done ({})",
        ctx.dialect()
    );
    Ok(())
}

fn c118_json_nul_projection(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let storage = ctx.ensured(&schema)?;
    let with_meta = |id: &str, meta: &str| -> CheckResult<StoredRow> {
        let mut values = task_values(&schema, id, "pA", id);
        values[6] = RowValue::Json(meta.to_owned());
        task_with(&schema, values)
    };
    let nul = with_meta("t1", r#"{"a":"\u0000"}"#)?;
    let plain = with_meta("t2", r#"{"a":1}"#)?;
    push(
        storage.as_ref(),
        "p1",
        "client-1",
        "a",
        &[Op::upsert("tasks", nul.clone()), Op::upsert("tasks", plain)],
    )?;
    let result = storage.query_authoritative(
        "p1",
        &select("SELECT id, meta FROM tasks ORDER BY id"),
        &ServeContext::default(),
    )?;
    let rows: Vec<(Option<&SqlValue>, Option<&SqlValue>)> =
        result.rows.iter().map(|r| (r.first(), r.get(1))).collect();
    check_eq!(rows.len(), 2, "row count");
    check_eq!(
        rows[0],
        (
            Some(&SqlValue::Text("t1".to_owned())),
            Some(&SqlValue::Null)
        ),
        "projection of the \\u0000 json"
    );
    check!(
        matches!(rows[1].1, Some(SqlValue::Text(_))),
        "projection of plain json must be non-NULL text, got {:?}",
        rows[1]
    );
    let stored = expect_row(storage.as_ref(), "p1", "tasks", "t1")?;
    check_eq!(
        stored.payload,
        nul.payload,
        "payload bytes of the \\u0000 row"
    );
    Ok(())
}

fn c119_get_row_scopes(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let storage = ctx.ensured(&schema)?;
    let row = StoredRow {
        server_version: 4,
        ..doc(&schema, "d1", "o1", "pA", None)?
    };
    write_rows(
        storage.as_ref(),
        "p1",
        "docs",
        "a",
        std::slice::from_ref(&row),
    )?;
    check_eq!(
        storage.get_row_scopes("p1", "docs", "d1")?,
        Some((4, scopes(&[("org_id", "o1"), ("project_id", "pA")]))),
        "get_row_scopes of d1"
    );
    check_eq!(
        storage.get_row_scopes("p1", "docs", "missing")?,
        None,
        "missing row"
    );
    expect_code(
        storage.get_row_scopes("p1", "nope", "d1"),
        ErrorCode::UnknownTable,
        "table nope",
    )?;
    Ok(())
}
