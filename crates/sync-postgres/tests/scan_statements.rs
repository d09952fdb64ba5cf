//! Which statements a scope scan through the pool sends (feature
//! `fault-injection`, whose counting plan logs every statement): a scan
//! that fits one statement runs in autocommit; one that needs more runs
//! again inside one `REPEATABLE READ READ ONLY` snapshot, so its pages
//! never mix two states of the table; a dense filter of a few values is
//! read by walking the table, statement after statement, not by merging
//! the values' index ranges; and one that turns sparse is walked while at
//! least one row in four matches (the probe's own rule), then merged.

mod common;

use std::sync::Arc;

use common::*;
use sync_core::fault::FaultPlan;
use sync_core::{RowScanQuery, RowValue, ServerStorage, StoredRow};
use sync_postgres::PostgresStorage;

const SNAPSHOT: &str = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY";

/// Runs `op` under a counting plan; its result and the statement log.
fn logged<T>(storage: &PostgresStorage, op: impl FnOnce() -> T) -> (T, Vec<String>) {
    let counter = FaultPlan::count_only();
    storage.set_fault_plan(Some(Arc::clone(&counter)));
    let value = op();
    storage.set_fault_plan(None);
    (value, counter.statement_log())
}

/// A walk of the table after its first, gated statement.
fn is_walk(sql: &str) -> bool {
    sql.contains("LIMIT (SELECT $5::int8)")
}

/// A merge of the values' ranges of the scope index (the log keeps the
/// head and the tail of each statement).
fn is_merge(sql: &str) -> bool {
    sql.starts_with("SELECT c.row_id")
}

/// Docs `d0000`… of org `o1`, the project of each chosen by `project`.
fn load_docs(storage: &PostgresStorage, count: usize, project: impl Fn(usize) -> &'static str) {
    load_docs_in(storage, count, |i| ("o1", project(i)));
}

/// Docs `d0000`… in the org and project `scope` chooses for each.
fn load_docs_in(
    storage: &PostgresStorage,
    count: usize,
    scope: impl Fn(usize) -> (&'static str, &'static str),
) {
    let schema = fix1();
    let docs = schema.table("docs").unwrap();
    let mut tx = storage.begin("acme").unwrap();
    for i in 0..count {
        let id = format!("d{i:04}");
        let (org, project) = scope(i);
        let values = vec![
            RowValue::String(id.clone()),
            RowValue::String(org.into()),
            RowValue::String(project.into()),
            RowValue::Null,
        ];
        let row = StoredRow {
            row_id: id,
            server_version: 1,
            scopes: scopes(&[("org_id", org), ("project_id", project)]),
            payload: sync_core::codec::encode_row(docs, &values).unwrap(),
            column_versions: None,
        };
        tx.upsert_row("docs", &row, None).unwrap();
    }
    tx.commit().unwrap();
}

/// The filter `project_id ∈ values`, and `org_id = o1` too when `with_org`
/// (then `org_id`, the first variable, picks the candidates and the
/// project is tested on each).
fn scan(
    storage: &PostgresStorage,
    values: &[&str],
    with_org: bool,
    after: Option<String>,
    limit: i64,
) -> Vec<String> {
    let mut scope_filter = filter("project_id", values);
    if with_org {
        scope_filter.insert("org_id".into(), vec!["o1".into()]);
    }
    storage
        .scan_rows(
            "acme",
            &RowScanQuery {
                table: "docs".into(),
                scope_filter,
                after_row_id: after,
                limit,
            },
        )
        .unwrap()
        .into_iter()
        .map(|r| r.row_id)
        .collect()
}

#[test]
fn a_scan_of_one_statement_runs_in_autocommit_and_a_longer_one_in_one_snapshot() {
    let db = TestDb::new();
    let storage = ensured(&db);
    // One doc in five is in `pa`: a page of 70 of them needs several pages
    // of the org's candidates; four in five are in `pb`: a page of 10 needs
    // one.
    load_docs(&storage, 1_000, |i| if i % 5 == 0 { "pa" } else { "pb" });
    let expected: Vec<String> = (0..1_000).step_by(5).map(|i| format!("d{i:04}")).collect();

    let (short, log) = logged(&storage, || scan(&storage, &["pb"], true, None, 10));
    assert_eq!(short.len(), 10);
    assert!(!log.iter().any(|s| s == SNAPSHOT), "{log:#?}");

    let (long, log) = logged(&storage, || scan(&storage, &["pa"], true, None, 70));
    assert_eq!(long, expected[..70].to_vec());
    let begin = log.iter().position(|s| s == SNAPSHOT);
    assert!(
        begin.is_some(),
        "no snapshot for a scan of several statements: {log:#?}"
    );
}

#[test]
fn a_dense_filter_of_two_values_is_walked_page_after_page_in_one_snapshot() {
    let db = TestDb::new();
    let storage = ensured(&db);
    // The first 64 docs all match (the probe finds the filter dense and
    // sizes the first walk to the page), then one in two: the first walk
    // falls short of the page and the scan walks on.
    let project = |i: usize| match (i < 64, i % 2) {
        (true, _) | (false, 0) => {
            if i % 3 == 0 {
                "pa"
            } else {
                "pb"
            }
        }
        _ => "pc",
    };
    load_docs(&storage, 2_000, project);
    let expected: Vec<String> = (0..2_000)
        .filter(|&i| project(i) != "pc")
        .map(|i| format!("d{i:04}"))
        .collect();

    let (first, log) = logged(&storage, || scan(&storage, &["pa", "pb"], false, None, 300));
    assert_eq!(first, expected[..300].to_vec());
    let begin = log
        .iter()
        .position(|s| s == SNAPSHOT)
        .unwrap_or_else(|| panic!("no snapshot: {log:#?}"));
    let walks = log[begin..].iter().filter(|s| is_walk(s)).count();
    assert!(walks >= 1, "no further walk inside the snapshot: {log:#?}");
    assert!(
        !log.iter().any(|s| is_merge(s)),
        "a dense filter merged index ranges: {log:#?}"
    );

    let rest = scan(&storage, &["pa", "pb"], false, first.last().cloned(), 2_000);
    assert_eq!(rest, expected[300..].to_vec());
}

#[test]
fn a_filter_that_turns_sparse_is_walked_while_one_row_in_four_matches_then_merged() {
    let db = TestDb::new();
    let storage = ensured(&db);
    // The first 64 docs match (the probe finds the filter dense), then 11 of
    // the next 236: the first walk of 300 rows finds exactly one in four,
    // dense by the probe's own rule, and walks on; the next walk finds one
    // in fifty and hands the rest to the merge of the values' ranges.
    let matches = |i: usize| i < 64 || (i < 300 && (i - 64) % 22 == 0) || (i >= 300 && i % 50 == 0);
    let project = |i: usize| match (matches(i), i % 2) {
        (true, 0) => "pa",
        (true, _) => "pb",
        (false, _) => "pc",
    };
    load_docs(&storage, 3_000, project);
    let expected: Vec<String> = (0..3_000)
        .filter(|&i| matches(i))
        .map(|i| format!("d{i:04}"))
        .collect();
    assert_eq!((0..300).filter(|&i| matches(i)).count(), 75);

    let (all, log) = logged(&storage, || scan(&storage, &["pa", "pb"], false, None, 300));
    assert_eq!(all, expected);
    let begin = log
        .iter()
        .position(|s| s == SNAPSHOT)
        .unwrap_or_else(|| panic!("no snapshot: {log:#?}"));
    let snapshot = &log[begin..];
    let merge = snapshot
        .iter()
        .position(|s| is_merge(s))
        .unwrap_or_else(|| panic!("a sparse rest was never merged: {log:#?}"));
    let walks = snapshot[..merge].iter().filter(|s| is_walk(s)).count();
    assert_eq!(walks, 1, "walks before the merge: {log:#?}");
}

#[test]
fn a_walk_whose_rows_fail_another_variable_walks_on_until_the_page_is_full() {
    let db = TestDb::new();
    let storage = ensured(&db);
    // Every doc is in org o1 or o2 (the walked variable: dense), one in a
    // hundred in project `pz`, none of them among the first walk's rows.
    load_docs_in(&storage, 1_000, |i| {
        let org = if i % 2 == 0 { "o1" } else { "o2" };
        (org, if i % 100 == 77 { "pz" } else { "pa" })
    });
    let mut both = filter("org_id", &["o1", "o2"]);
    both.insert("project_id".into(), vec!["pz".into()]);
    let rows: Vec<String> = storage
        .scan_rows(
            "acme",
            &RowScanQuery {
                table: "docs".into(),
                scope_filter: both,
                after_row_id: None,
                limit: 5,
            },
        )
        .unwrap()
        .into_iter()
        .map(|r| r.row_id)
        .collect();
    assert_eq!(rows, ["d0077", "d0177", "d0277", "d0377", "d0477"]);
}
