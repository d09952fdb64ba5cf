//! The plans the server keeps for the by-id lookups of a round: the round
//! entry and the row reads by id. After five executions of a prepared
//! statement the server may switch to one generic plan per connection,
//! made perhaps while the tables are empty; that plan must still probe the
//! primary key, and the statements must let the server switch (a statement
//! that is planned anew on every execution pays its planning every round).

mod common;

use common::*;
use postgres::types::ToSql;
use postgres::Client;
use sync_postgres::hot_path_sql::{entry_read_sql, rows_by_ids_sql, scan_page_sql};

/// `EXPLAIN` of the prepared statement `name` run with `args`.
fn explain(raw: &mut Client, name: &str, args: &str) -> String {
    raw.query(&format!("EXPLAIN EXECUTE {name}({args})"), &[])
        .unwrap()
        .iter()
        .map(|r| r.get::<_, String>(0))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Executes `name` eight times, then returns how often the server used a
/// generic plan.
fn generic_plans_after_eight(raw: &mut Client, name: &str, args: &str) -> i64 {
    for _ in 0..8 {
        raw.batch_execute(&format!("EXECUTE {name}({args})"))
            .unwrap();
    }
    raw.query_one(
        "SELECT generic_plans FROM pg_prepared_statements WHERE name = $1",
        &[&name as &(dyn ToSql + Sync)],
    )
    .unwrap()
    .get(0)
}

/// A fresh schema with the fixture's (empty) tables, and a connection on
/// which the row read of `tasks` is prepared as `rows_by_id`.
fn with_rows_by_id() -> (TestDb, Client) {
    let db = TestDb::new();
    drop(ensured(&db));
    let mut raw = db.raw();
    raw.batch_execute(&format!(
        "PREPARE rows_by_id(text, text[]) AS {}",
        rows_by_ids_sql("\"tasks\"")
    ))
    .unwrap();
    (db, raw)
}

#[test]
fn rows_by_id_probe_the_primary_key_in_a_generic_plan_on_an_empty_table() {
    // `tasks` has unique and plain secondary indexes that start with the
    // partition column: on an empty table, without statistics, a lookup by
    // `= id` costs the same through them as through the primary key.
    let (_db, mut raw) = with_rows_by_id();
    raw.batch_execute("SET plan_cache_mode = force_generic_plan")
        .unwrap();
    let plan = explain(&mut raw, "rows_by_id", "'acme', ARRAY['t1', 't2']");
    assert!(plan.contains("tasks_pkey"), "{plan}");
    for bad in ["sync_ix_", "Seq Scan", "Hash Join"] {
        assert!(!plan.contains(bad), "{bad} in\n{plan}");
    }
}

#[test]
fn the_round_lookups_settle_on_a_generic_plan() {
    let (_db, mut raw) = with_rows_by_id();
    for (name, bounds) in [("entry", false), ("entry_bounds", true)] {
        raw.batch_execute(&format!(
            "PREPARE {name}(text, int4, text, text[]) AS {}",
            entry_read_sql(bounds)
        ))
        .unwrap();
    }
    for (name, args) in [
        ("rows_by_id", "'acme', ARRAY['t1']"),
        ("entry", "'acme', 1, 'c1', ARRAY['k1']"),
        ("entry_bounds", "'acme', 1, 'c1', ARRAY['k1']"),
    ] {
        let generic = generic_plans_after_eight(&mut raw, name, args);
        assert!(generic > 0, "{name}: planned anew on every execution");
    }
}

#[test]
fn merged_scan_pages_settle_on_a_generic_plan_on_an_analyzed_index() {
    let (_db, mut raw) = with_rows_by_id();
    // 200 000 scope entries over 100 values, analyzed: with statistics a
    // custom plan sees the page size and each value's frequency.
    raw.batch_execute(
        "INSERT INTO sync_row_scopes (partition, tbl, var, value, row_id) \
         SELECT 'acme', 'tasks', 'project_id', 'p' || (i % 100), lpad(i::text, 7, '0') \
         FROM generate_series(1, 200000) AS i; \
         ANALYZE sync_row_scopes",
    )
    .unwrap();
    for values in [2, 100] {
        raw.batch_execute(&format!(
            "PREPARE scan_{values}(text, text, text, text[], text, int8) AS {}",
            scan_page_sql("\"tasks\"", values)
        ))
        .unwrap();
        let list: Vec<String> = (0..values).map(|i| format!("'p{i}'")).collect();
        let args = format!(
            "'acme', 'tasks', 'project_id', ARRAY[{}], '', 500",
            list.join(", ")
        );
        let generic = generic_plans_after_eight(&mut raw, &format!("scan_{values}"), &args);
        // A 100-value page planned anew costs milliseconds of planning on a
        // large table (the page's own `LIMIT` made the generic plan look
        // dearer than each custom one).
        assert!(
            generic > 0,
            "{values} values: planned anew on every execution"
        );
    }
}
