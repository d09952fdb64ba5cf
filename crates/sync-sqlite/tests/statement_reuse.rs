//! Hot-path statements are prepared once: executing a cached statement
//! again with new values does not prepare it again.
//!
//! SQLite (3.50, as bundled) expires a statement whose `LIMIT` is a bare
//! parameter every time that parameter is bound, so each execution paid a
//! full re-prepare (about a sixth of a window page's time). The dialect writes
//! `LIMIT CAST(?n AS INTEGER)` instead (`docs/decisions.md`, "Bound limits on
//! SQLite"). The first test runs the read statements with two sets of values
//! and reads SQLite's own re-prepare counter; the second keeps a bare
//! `LIMIT ?n` out of every statement of the crate.

mod common;

use common::*;
use rusqlite::types::Value;
use rusqlite::{params_from_iter, Connection, StatementStatus};
use sync_core::ServerStorage;
use sync_sqlite::hot_path_sql::{
    index_lookup_sql, scan_page_sql, stable_plans, window_page_sql, MERGED_SCAN_VALUES,
    MERGED_WINDOW_VALUES,
};

/// Forty commits, one task each, alternating between projects p1 and p2.
fn seeded() -> Db {
    let db = Db::new();
    let storage = db.ready();
    storage.touch_partition("p", NOW, "epoch-1").unwrap();
    for i in 0..40 {
        let project = if i % 2 == 0 { "p1" } else { "p2" };
        push(
            &storage,
            "p",
            "c",
            &format!("k{i}"),
            &[task_row(
                &format!("t{i:02}"),
                project,
                &format!("title {i}"),
            )],
        );
    }
    db
}

fn text(s: &str) -> Value {
    Value::Text(s.to_owned())
}

/// Runs `sql` once per parameter set, returning the row counts and how
/// often SQLite prepared the statement again.
fn run_twice(conn: &Connection, sql: &str, sets: [Vec<Value>; 2]) -> (Vec<usize>, i32) {
    let mut stmt = conn.prepare(sql).unwrap();
    let counts = sets
        .into_iter()
        .map(|params| {
            stmt.query_map(params_from_iter(params), |_| Ok(()))
                .unwrap()
                .count()
        })
        .collect();
    (counts, stmt.get_status(StatementStatus::RePrepare))
}

/// Scope values: `p1`, `p2`, then values nothing carries, `n` in all.
fn values(n: usize) -> Vec<Value> {
    (0..n)
        .map(|i| match i {
            0 => text("p1"),
            1 => text("p2"),
            _ => text(&format!("none-{i}")),
        })
        .collect()
}

#[test]
fn read_statements_run_again_without_being_prepared_again() {
    let db = seeded();
    let conn = db.raw();
    assert_reads_are_not_prepared_again(&conn);
}

#[test]
fn after_analyze_read_statements_run_again_without_being_prepared_again() {
    // `ANALYZE` writes `sqlite_stat4`; a plan that then looked at a bound
    // value was prepared again each time the value changed (every page of
    // a scan: its cursor), unless the connection runs as the storage's do.
    let db = seeded();
    let conn = db.raw();
    conn.execute_batch("ANALYZE").unwrap();
    let stat4: i64 = conn
        .query_row("SELECT count(*) FROM sqlite_stat4", [], |r| r.get(0))
        .unwrap();
    assert!(stat4 > 0, "setup: ANALYZE wrote no sqlite_stat4 samples");
    stable_plans(&conn).unwrap();
    assert_reads_are_not_prepared_again(&conn);
}

/// Every read statement of the dialect, run twice with other values: never
/// prepared again.
fn assert_reads_are_not_prepared_again(conn: &Connection) {
    // One value (one range), two (merged ranges) and past the merge bound
    // (`IN`), for the window page and the scan page.
    for n in [1, 2, MERGED_WINDOW_VALUES + 1] {
        let set = |after: i64, limit: i64| {
            let mut params = vec![
                text("p"),
                text("tasks"),
                text("project_id"),
                Value::Integer(after),
                Value::Integer(1_000),
                Value::Integer(limit),
            ];
            params.extend(values(n));
            params
        };
        let (counts, reprepared) = run_twice(conn, &window_page_sql(n), [set(0, 3), set(10, 5)]);
        assert_eq!(reprepared, 0, "window page, {n} values: {counts:?}");
        // The cut still holds: the page stops at the bound limit.
        assert_eq!(counts, vec![3, 5], "window page, {n} values");
    }
    for n in [1, 2, MERGED_SCAN_VALUES + 1] {
        let set = |after: &str, limit: i64| {
            let mut params = vec![
                text("p"),
                text("tasks"),
                text("project_id"),
                text(after),
                Value::Integer(limit),
            ];
            params.extend(values(n));
            params
        };
        let (counts, reprepared) = run_twice(
            conn,
            &scan_page_sql("\"tasks\"", n),
            [set("", 4), set("t10", 6)],
        );
        assert_eq!(reprepared, 0, "scan page, {n} values: {counts:?}");
        assert!(
            counts.iter().all(|&c| c > 0),
            "scan page, {n} values: {counts:?}"
        );
    }
    let lookup = index_lookup_sql("\"tasks\"", &["title".to_owned()], &[false]);
    let set =
        |after: &str, title: &str| vec![text("p"), text(after), Value::Integer(10), text(title)];
    let (counts, reprepared) = run_twice(conn, &lookup, [set("", "title 3"), set("", "title 4")]);
    assert_eq!(reprepared, 0, "index lookup: {counts:?}");
    assert_eq!(counts, vec![1, 1], "index lookup");
}

#[test]
fn no_statement_of_the_dialect_limits_by_a_bare_parameter() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut offenders = Vec::new();
    let mut dirs = vec![src];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let code = std::fs::read_to_string(&path).unwrap();
            for (no, line) in code.lines().enumerate() {
                let bare = line
                    .match_indices("LIMIT ?")
                    .any(|(at, _)| line[at + 7..].starts_with(|c: char| c.is_ascii_digit()));
                if bare && !line.trim_start().starts_with("//") {
                    offenders.push(format!("{}:{}: {}", path.display(), no + 1, line.trim()));
                }
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "write `LIMIT CAST(?n AS INTEGER)`:\n{}",
        offenders.join("\n")
    );
}
