//! `EXPLAIN` of the storage's own hot-path statements (shared SQL text) with
//! representative parameters, summarised as a [`PlanSummary`].

use postgres::types::ToSql;
use postgres::SimpleQueryMessage;
use sync_conformance::{HotPath, PlanSummary};
use sync_core::{codec, CompiledSchema, Error, ErrorCode, Result, RowValue, StoredRow};

use super::raw::PgRaw;
use crate::blobs::BLOB_CANDIDATES_SQL;
use crate::coverage::{COVERAGE_PROBE_SQL, COVERAGE_SEQ_SQL};
use crate::json::scopes_json;
use crate::pool::{col, Conn};
use crate::rows::{params, typed_of};
use crate::table_sql::TableSql;
use crate::values::param_refs;
use crate::window::{window_page_sql, WINDOW_PAGE_SQL};

const ANALYZE_SQL: &str =
    "ANALYZE sync_change_scopes, sync_commits, sync_changes, sync_row_scopes, \
    sync_blob_refs, sync_partitions, tasks";

fn fixture() -> Result<CompiledSchema> {
    sync_conformance::fixtures::fix1()
        .map_err(|f| Error::new(ErrorCode::Backend).detail("reason", f.message))
}

fn sample_row(schema: &CompiledSchema) -> Result<StoredRow> {
    let table = schema
        .table("tasks")
        .ok_or_else(|| Error::unknown_table("tasks"))?;
    let mut values = vec![
        RowValue::String("t0001".into()),
        RowValue::String("proj-1".into()),
        RowValue::String("title-1".into()),
        RowValue::Boolean(false),
    ];
    values.resize(table.columns.len(), RowValue::Null);
    Ok(StoredRow {
        row_id: "t0001".into(),
        server_version: 2,
        scopes: [("project_id".to_owned(), "proj-1".to_owned())].into(),
        payload: codec::encode_row(table, &values)?,
        column_versions: None,
    })
}

/// Explains one hot path inside a transaction with `enable_seqscan = off`
/// (on Citus also on the workers that run it).
pub(crate) fn explain(raw: &PgRaw, path: HotPath) -> Result<PlanSummary> {
    let schema = fixture()?;
    let tasks = schema
        .table("tasks")
        .ok_or_else(|| Error::unknown_table("tasks"))?;
    let sql = TableSql::new(tasks);
    // On Citus the plan that matters is the worker's: the setting must
    // travel with the transaction to the worker connections.
    let begin = if raw.citus() {
        "BEGIN; SET LOCAL citus.propagate_set_commands = 'local'; SET LOCAL enable_seqscan = off"
    } else {
        "BEGIN; SET LOCAL enable_seqscan = off"
    };
    raw.with(|conn| {
        conn.simple(ANALYZE_SQL)?;
        conn.simple(begin)?;
        let plan = plan_text(conn, &schema, &sql, path);
        conn.simple("ROLLBACK")?;
        let text = plan?;
        summarize(conn, &text)
    })
}

/// The values of the `…Multi` hot paths.
fn three_projects() -> Vec<String> {
    vec![
        "proj-1".to_owned(),
        "proj-2".to_owned(),
        "proj-3".to_owned(),
    ]
}

fn plan_text(
    conn: &mut Conn,
    schema: &CompiledSchema,
    sql: &TableSql,
    path: HotPath,
) -> Result<String> {
    let partition = "p1";
    let table = "tasks";
    let variable = "project_id";
    let values = vec!["proj-1".to_owned()];
    let tables = vec!["tasks".to_owned()];
    let (text, params): (String, Vec<Box<dyn ToSql + Sync + Send>>) = match path {
        HotPath::WindowCandidates | HotPath::WindowPage | HotPath::WindowPageMulti => (
            if path == HotPath::WindowPageMulti {
                window_page_sql(3).to_owned()
            } else {
                WINDOW_PAGE_SQL.to_owned()
            },
            vec![
                Box::new(partition),
                Box::new(table),
                Box::new(variable),
                Box::new(if path == HotPath::WindowPageMulti {
                    three_projects()
                } else {
                    values
                }),
                Box::new(0i64),
                Box::new(i64::from(i32::MAX)),
                Box::new(64i64),
            ],
        ),
        HotPath::ScanCandidates
        | HotPath::ScanPage
        | HotPath::ScanCandidatesMulti
        | HotPath::ScanPageMulti => (
            if matches!(path, HotPath::ScanCandidates | HotPath::ScanPage) {
                sql.scan_pages.get(&sql.quoted, 1).to_owned()
            } else {
                sql.scan_pages.get(&sql.quoted, 3).to_owned()
            },
            vec![
                Box::new(partition),
                Box::new(table),
                Box::new(variable),
                Box::new(
                    if matches!(path, HotPath::ScanCandidates | HotPath::ScanPage) {
                        values
                    } else {
                        three_projects()
                    },
                ),
                Box::new(String::new()),
                Box::new(64i64),
            ],
        ),
        HotPath::ScanWalk => (
            sql.scan_walk_gated.clone(),
            vec![
                Box::new(partition),
                Box::new(String::new()),
                Box::new(variable),
                Box::new(three_projects()),
                Box::new(64i64),
            ],
        ),
        HotPath::IndexLookup => {
            let columns = vec![
                ("project_id".to_owned(), sync_core::ColumnType::String),
                ("title".to_owned(), sync_core::ColumnType::String),
            ];
            (
                // `tasks_by_project_title` is unique in FIX1.
                sql.index_lookup_sql(&columns, &[false, false], true),
                vec![
                    Box::new(partition),
                    Box::new(String::new()),
                    Box::new(1000i64),
                    Box::new("proj-1"),
                    Box::new("title-1"),
                ],
            )
        }
        HotPath::IndexLookupShared => (
            sql.index_lookup_sql(
                &[("title".to_owned(), sync_core::ColumnType::String)],
                &[false],
                false,
            ),
            vec![
                Box::new(partition),
                Box::new(String::new()),
                Box::new(1000i64),
                Box::new("title-1"),
            ],
        ),
        HotPath::BlobCandidates => (
            BLOB_CANDIDATES_SQL.to_owned(),
            vec![Box::new(partition), Box::new("blob-1")],
        ),
        HotPath::CoverageProbe => (
            COVERAGE_PROBE_SQL.to_owned(),
            vec![Box::new(partition), Box::new(tables), Box::new(0i64)],
        ),
        HotPath::CoverageSeq => (
            COVERAGE_SEQ_SQL.to_owned(),
            vec![Box::new(partition), Box::new(tables)],
        ),
        HotPath::ScopeReplacement => return scope_replacement_plan(conn, schema, sql),
    };
    run_explain(conn, &text, &param_refs(&params))
}

fn scope_replacement_plan(
    conn: &mut Conn,
    schema: &CompiledSchema,
    sql: &TableSql,
) -> Result<String> {
    let tasks = schema
        .table("tasks")
        .ok_or_else(|| Error::unknown_table("tasks"))?;
    let row = sample_row(schema)?;
    let projection = params(typed_of(tasks, sql, &row)?);
    let vars: Vec<&str> = row.scopes.keys().map(String::as_str).collect();
    let values: Vec<&str> = row.scopes.values().map(String::as_str).collect();
    let scopes = scopes_json(&row.scopes);
    let payload: &[u8] = &row.payload;
    let partition = "p1";
    let mut params: Vec<&(dyn ToSql + Sync)> = vec![
        &partition,
        &row.row_id,
        &tasks.name,
        &vars,
        &values,
        &row.server_version,
        &scopes,
        &payload,
    ];
    params.extend(param_refs(&projection));
    params.push(&row.column_versions);
    run_explain(conn, &sql.upsert, &params)
}

fn run_explain(conn: &mut Conn, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<String> {
    let rows = conn.query(&format!("EXPLAIN {sql}"), params)?;
    let lines = rows
        .iter()
        .map(|r| col::<String>(r, 0))
        .collect::<Result<Vec<_>>>()?;
    Ok(lines.join("\n"))
}

/// Plan nodes that read their whole input before returning a first row
/// (matched as `<name>  (cost=…`, not as a `Sort Key:` detail line).
const COLLECTING_NODES: [&str; 5] = [
    "Sort",
    "Incremental Sort",
    "HashAggregate",
    "Hash",
    "Materialize",
];

/// Parses the node lines of a text plan.
fn summarize(conn: &mut Conn, text: &str) -> Result<PlanSummary> {
    let mut summary = PlanSummary {
        raw: text.to_owned(),
        ..PlanSummary::default()
    };
    for line in text.lines() {
        let node = line.trim_start().trim_start_matches("->").trim_start();
        if let Some(rest) = node
            .strip_prefix("Index Scan Backward using ")
            .or_else(|| node.strip_prefix("Index Scan using "))
            .or_else(|| node.strip_prefix("Index Only Scan Backward using "))
            .or_else(|| node.strip_prefix("Index Only Scan using "))
        {
            if let Some((index, table)) = rest.split_once(" on ") {
                summary
                    .index_reads
                    .push((first_word(table), unquote(index)));
            }
        } else if let Some(rest) = node.strip_prefix("Bitmap Index Scan on ") {
            let index = first_word(rest);
            let table = index_table(conn, &index)?;
            summary.index_reads.push((table, index));
        } else if let Some(rest) = node.strip_prefix("Seq Scan on ") {
            summary.full_scans.push(first_word(rest));
        } else if COLLECTING_NODES
            .iter()
            .any(|n| node.strip_prefix(n).is_some_and(|r| r.starts_with("  (")))
        {
            summary.collects.push(node.to_owned());
        }
    }
    Ok(summary)
}

fn first_word(text: &str) -> String {
    unquote(text.split_whitespace().next().unwrap_or_default())
}

fn unquote(name: &str) -> String {
    let name = name.trim();
    match name.strip_prefix('"').and_then(|n| n.strip_suffix('"')) {
        Some(inner) => inner.replace("\"\"", "\""),
        None => name.to_owned(),
    }
}

/// The table of `index`, read from the catalog. A shard's index
/// (`<index>_<digits>`, on a Citus worker) is looked up by its base name on
/// the coordinator, and its table is named as the shard's would be.
fn index_table(conn: &mut Conn, index: &str) -> Result<String> {
    let base = crate::errors::base_name(index);
    let table = catalog_index_table(conn, index)?;
    if !table.is_empty() || base == index {
        return Ok(table);
    }
    let table = catalog_index_table(conn, base)?;
    let suffix = &index[base.len()..];
    Ok(if table.is_empty() {
        table
    } else {
        format!("{table}{suffix}")
    })
}

fn catalog_index_table(conn: &mut Conn, index: &str) -> Result<String> {
    let messages = conn.simple(&format!(
        "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid \
         WHERE i.indexrelid = to_regclass({})",
        crate::sql::quote_literal(&crate::sql::quote_ident(index)).unwrap_or_default()
    ))?;
    Ok(messages
        .iter()
        .find_map(|m| match m {
            SimpleQueryMessage::Row(row) => row.get(0).map(str::to_owned),
            _ => None,
        })
        .unwrap_or_default())
}
