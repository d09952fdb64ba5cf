//! `EXPLAIN FORMAT=JSON` of the storage's own hot-path statements with
//! representative parameters (after `ANALYZE TABLE`), summarised as a
//! [`PlanSummary`] (`docs/design/mariadb.md` §13): every table node's
//! `key` is an index read (`PRIMARY` as `PRIMARY KEY`), an `access_type`
//! of `ALL` or `index` is a full scan, and a `filesort` or
//! `temporary_table` node collects.
//!
//! The server prints a plan's conditions with the session's identifier
//! quotes without escaping them in the JSON text, so the `EXPLAIN` runs
//! without `ANSI_QUOTES` (a MariaDB defect met here).

use mysql::Value;
use serde_json::Value as Json;
use sync_conformance::{HotPath, PlanSummary};
use sync_core::{Error, ErrorCode, Result};

use crate::dialect::quote_ident as q;
use crate::pool::Conn;

const ANALYZE_SQL: &str = "ANALYZE TABLE `sync_change_scopes`, `sync_commits`, `sync_changes`, \
`sync_row_scopes`, `sync_blob_refs`, `sync_partitions`, `tasks`";

fn statement(path: HotPath) -> (String, Vec<Value>) {
    let p = || Value::from("p1");
    let one = vec![Value::from("proj-1")];
    let three = vec![
        Value::from("proj-1"),
        Value::from("proj-2"),
        Value::from("proj-3"),
    ];
    let head = |values: Vec<Value>| {
        let mut params = vec![p(), Value::from("tasks"), Value::from("project_id")];
        params.extend(values);
        params
    };
    let tasks = q("tasks");
    match path {
        HotPath::WindowCandidates | HotPath::WindowPage | HotPath::WindowPageMulti => {
            let values = if path == HotPath::WindowPageMulti {
                three
            } else {
                one
            };
            let n = values.len();
            let mut params = head(values);
            params.extend([
                Value::Int(0),
                Value::Int(1 << 40),
                Value::Int(64),
                "tasks".into(),
            ]);
            (crate::windows::window_page_sql(n), params)
        }
        HotPath::ScanCandidates
        | HotPath::ScanPage
        | HotPath::ScanPageMulti
        | HotPath::ScanCandidatesMulti => {
            let values = if matches!(path, HotPath::ScanPageMulti | HotPath::ScanCandidatesMulti) {
                three
            } else {
                one
            };
            let n = values.len();
            let params: Vec<Value> = values
                .into_iter()
                .flat_map(|v| {
                    [
                        p(),
                        "tasks".into(),
                        "project_id".into(),
                        v,
                        "".into(),
                        Value::Int(64),
                    ]
                })
                .collect();
            let sql = if n == 1 {
                crate::scans::single_value_page_sql(&tasks)
            } else {
                crate::scans::multi_value_candidates_sql(n)
            };
            (sql, params)
        }
        HotPath::ScanWalk => {
            let mut params = vec![p(), "tasks".into(), "".into(), "project_id".into()];
            params.extend(three);
            params.extend([Value::Int(64), Value::Int(crate::scans::walk_budget(64, 1))]);
            (crate::scans::walk_sql(&tasks, 3), params)
        }
        HotPath::IndexLookup => (
            crate::lookups::index_lookup_sql(
                &tasks,
                "tasks_by_project_title",
                &["project_id".to_owned(), "title".to_owned()],
                &[false, false],
            ),
            vec![
                p(),
                "proj-1".into(),
                "title-1".into(),
                "".into(),
                Value::Int(64),
            ],
        ),
        HotPath::IndexLookupShared => (
            crate::lookups::index_lookup_sql(
                &tasks,
                "tasks_by_title",
                &["title".to_owned()],
                &[false],
            ),
            vec![p(), "title-1".into(), "".into(), Value::Int(64)],
        ),
        HotPath::BlobCandidates => (
            "SELECT DISTINCT `tbl`, `row_id` FROM `sync_blob_refs` \
             WHERE `partition` = ? AND `blob_id` = ? ORDER BY `tbl`, `row_id`"
                .to_owned(),
            vec![p(), "blob-1".into()],
        ),
        HotPath::CoverageProbe => (
            "SELECT 1 FROM `sync_changes` WHERE `partition` = ? AND `commit_seq` > ? \
             AND `tbl` IN (?) LIMIT 1"
                .to_owned(),
            vec![p(), Value::Int(0), "tasks".into()],
        ),
        HotPath::CoverageSeq => (
            "SELECT MAX(`commit_seq`) FROM `sync_changes` WHERE `partition` = ? AND `tbl` IN (?)"
                .to_owned(),
            vec![p(), "tasks".into()],
        ),
        HotPath::ScopeReplacement => (
            "DELETE FROM `sync_row_scopes` WHERE `partition` = ? AND `tbl` = ? AND `row_id` = ?"
                .to_owned(),
            vec![p(), "tasks".into(), "t0001".into()],
        ),
    }
}

/// The plan of `path` on the connection's database.
pub(crate) fn explain(conn: &mut Conn, path: HotPath) -> Result<PlanSummary> {
    conn.rows::<mysql::Row>(ANALYZE_SQL, ())?;
    let (sql, params) = statement(path);
    // Under ANSI_QUOTES the server prints conditions with unescaped `"`
    // inside the JSON strings; the statements quote with backticks only,
    // so they read the same without it for the EXPLAIN.
    conn.run("SET SESSION sql_mode = REPLACE(@@SESSION.sql_mode, 'ANSI_QUOTES', '')")?;
    let text = conn.first::<String>(&format!("EXPLAIN FORMAT=JSON {sql}"), params);
    conn.run(&format!(
        "SET SESSION sql_mode = '{}'",
        crate::session::SQL_MODE
    ))?;
    let text = text?;
    let text = text.ok_or_else(|| Error::new(ErrorCode::Backend).detail("reason", "no_plan"))?;
    let plan: Json = serde_json::from_str(&text)
        .map_err(|_| Error::new(ErrorCode::Backend).detail("reason", "plan_unreadable"))?;
    let mut summary = PlanSummary {
        raw: text,
        ..PlanSummary::default()
    };
    walk(&plan, &aliases(&sql), &mut summary);
    Ok(summary)
}

/// The tables of `sql` by alias (`` `table` AS alias ``): a plan names an
/// aliased table by its alias only, and the summary must name the table.
fn aliases(sql: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut rest = sql;
    while let Some(at) = rest.find("` AS ") {
        let before = &rest[..at];
        let after = &rest[at + "` AS ".len()..];
        rest = after;
        let Some(open) = before.rfind('`') else {
            continue;
        };
        let table = &before[open + 1..];
        let alias: String = after
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if !alias.is_empty() && !table.is_empty() {
            found.push((alias, table.to_owned()));
        }
    }
    found
}

fn walk(node: &Json, aliases: &[(String, String)], summary: &mut PlanSummary) {
    match node {
        Json::Object(map) => {
            for (key, value) in map {
                match key.as_str() {
                    "table" => {
                        if let Some(shown) = value.get("table_name").and_then(Json::as_str) {
                            let name = aliases
                                .iter()
                                .find(|(alias, _)| alias == shown)
                                .map_or(shown, |(_, table)| table.as_str());
                            if let Some(index) = value.get("key").and_then(Json::as_str) {
                                let index = if index == "PRIMARY" {
                                    "PRIMARY KEY"
                                } else {
                                    index
                                };
                                summary
                                    .index_reads
                                    .push((name.to_owned(), index.to_owned()));
                            }
                            let access = value.get("access_type").and_then(Json::as_str);
                            if matches!(access, Some("ALL" | "index")) && !name.starts_with('<') {
                                summary.full_scans.push(name.to_owned());
                            }
                        }
                    }
                    "filesort" | "temporary_table" => summary.collects.push(key.clone()),
                    _ => {}
                }
                walk(value, aliases, summary);
            }
        }
        Json::Array(items) => items.iter().for_each(|item| walk(item, aliases, summary)),
        _ => {}
    }
}
