//! The window and scan pages' plans on tables that were never analyzed:
//! every candidate must cost an index probe into `sync_commits` and
//! `sync_changes` (or the application table), whatever the (missing)
//! statistics suggest, and a scan page must stream its candidates from
//! the ordered primary-key ranges instead of collecting and sorting them.

mod common;

use common::*;
use postgres::types::ToSql;
use sync_core::ServerStorage;
use sync_postgres::hot_path_sql::{
    scan_page_sql, window_page_sql, MERGED_SCAN_VALUES, MERGED_WINDOW_VALUES,
};

#[test]
fn window_pages_probe_each_candidate_without_statistics() {
    let db = TestDb::new();
    let storage = ensured(&db);
    let mut raw = db.raw();
    for table in ["sync_commits", "sync_changes", "sync_change_scopes"] {
        raw.batch_execute(&format!(
            "ALTER TABLE {table} SET (autovacuum_enabled = false)"
        ))
        .unwrap();
    }
    let schema = fix1();
    let mut tx = storage.begin("acme").unwrap();
    tx.lock_partition_for_push().unwrap();
    for i in 0..3000 {
        let project = ["p1", "p2", "p3"][i % 3];
        let row = task_row(
            &schema,
            &format!("t{i:04}"),
            project,
            &format!("title {i}"),
            1,
        );
        tx.upsert_row("tasks", &row, None).unwrap();
        tx.append_commit(&commit(
            "c",
            &format!("k{i}"),
            vec![upsert_change(&row, "tasks")],
        ))
        .unwrap();
    }
    tx.commit().unwrap();
    let analyzed = raw
        .query_one(
            "SELECT count(*) FROM pg_stats WHERE schemaname = current_schema() \
             AND tablename IN ('sync_commits', 'sync_changes', 'sync_change_scopes')",
            &[],
        )
        .unwrap()
        .get::<_, i64>(0);
    assert_eq!(analyzed, 0, "setup: the tables must have no statistics");

    for values in [1, 3, MERGED_WINDOW_VALUES + 1] {
        let list: Vec<String> = (0..values).map(|i| format!("p{}", i % 3 + 1)).collect();
        let params: [&(dyn ToSql + Sync); 7] = [
            &"acme",
            &"tasks",
            &"project_id",
            &list,
            &0i64,
            &1_000_000i64,
            &500i64,
        ];
        let plan: Vec<String> = raw
            .query(&format!("EXPLAIN {}", window_page_sql(values)), &params)
            .unwrap()
            .iter()
            .map(|r| r.get::<_, String>(0))
            .collect();
        let text = plan.join("\n");
        for bad in ["Materialize", "Seq Scan", "Hash Join", "Merge Left Join"] {
            assert!(!text.contains(bad), "{values} values: {bad} in\n{text}");
        }
        for table in ["sync_commits", "sync_changes"] {
            assert!(
                plan.iter()
                    .any(|l| l.contains("Index") && l.contains(&format!("on {table} "))),
                "{values} values: no index probe into {table}:\n{text}"
            );
        }
    }
}

#[test]
fn scan_pages_stream_ordered_ranges_without_statistics() {
    let db = TestDb::new();
    let storage = ensured(&db);
    let mut raw = db.raw();
    for table in ["sync_row_scopes", "tasks"] {
        raw.batch_execute(&format!(
            "ALTER TABLE {table} SET (autovacuum_enabled = false)"
        ))
        .unwrap();
    }
    let schema = fix1();
    let mut tx = storage.begin("acme").unwrap();
    tx.lock_partition_for_push().unwrap();
    for i in 0..3000 {
        let project = ["p1", "p2", "p3"][i % 3];
        let row = task_row(
            &schema,
            &format!("t{i:04}"),
            project,
            &format!("title {i}"),
            1,
        );
        tx.upsert_row("tasks", &row, None).unwrap();
    }
    tx.commit().unwrap();
    let analyzed = raw
        .query_one(
            "SELECT count(*) FROM pg_stats WHERE schemaname = current_schema() \
             AND tablename IN ('sync_row_scopes', 'tasks')",
            &[],
        )
        .unwrap()
        .get::<_, i64>(0);
    assert_eq!(analyzed, 0, "setup: the tables must have no statistics");

    for values in [1, 2, 3, 100, MERGED_SCAN_VALUES] {
        let list: Vec<String> = (0..values).map(|i| format!("p{}", i % 3 + 1)).collect();
        let params: [&(dyn ToSql + Sync); 6] =
            [&"acme", &"tasks", &"project_id", &list, &"", &500i64];
        let plan: Vec<String> = raw
            .query(
                &format!("EXPLAIN {}", scan_page_sql("tasks", values)),
                &params,
            )
            .unwrap()
            .iter()
            .map(|r| r.get::<_, String>(0))
            .collect();
        let text = plan.join("\n");
        for bad in ["Materialize", "Seq Scan", "Hash", "Merge Left Join"] {
            assert!(!text.contains(bad), "{values} values: {bad} in\n{text}");
        }
        let sorts = plan.iter().any(|l| {
            let node = l.trim_start().trim_start_matches("->").trim_start();
            // A node line ("Sort  (cost=…"), not a Merge Append's
            // "Sort Key:" detail.
            (node.starts_with("Sort ") || node.starts_with("Incremental Sort "))
                && !node.contains("Key:")
                && !node.contains("Method:")
        });
        assert!(!sorts, "{values} values: a Sort node in\n{text}");
        for table in ["sync_row_scopes", "tasks"] {
            assert!(
                plan.iter()
                    .any(|l| l.contains("Index") && l.contains(&format!("on {table} "))),
                "{values} values: no index read of {table}:\n{text}"
            );
        }
        assert!(
            text.contains("using sync_row_scopes_pkey on sync_row_scopes"),
            "{values} values: the ranges are not read by the primary key:\n{text}"
        );
        assert!(
            !text.contains("sync_row_scopes_by_row"),
            "{values} values: the by-row index in\n{text}"
        );
    }
}

/// Rows of `relation` a plan read (every scan node on it, the rows it
/// returned and those its filter removed, × loops), from `EXPLAIN
/// (ANALYZE, FORMAT JSON)`.
fn entries_read(node: &serde_json::Value, relation: &str) -> f64 {
    let own = if node["Relation Name"] == relation {
        let per_loop = node["Actual Rows"].as_f64().unwrap_or(0.0)
            + node["Rows Removed by Filter"].as_f64().unwrap_or(0.0);
        per_loop * node["Actual Loops"].as_f64().unwrap_or(1.0)
    } else {
        0.0
    };
    own + node["Plans"].as_array().map_or(0.0, |plans| {
        plans.iter().map(|p| entries_read(p, relation)).sum()
    })
}

/// A merged page of `relation`'s ranges over 100 values, each about 2 000
/// entries long, never vacuumed (`seed` inserts them) and analyzed when
/// `analyzed`: for each count of `counts`, custom and generic plans, the
/// entries of `relation` that `EXPLAIN ANALYZE` of the page read must stay
/// within the page plus two per value (the entry that ends each range's
/// part and the one read ahead). `page_sql(values)` is the page; `params`
/// its parameter types; `args(list)` its arguments for the quoted value
/// list, with a page of 500.
fn assert_merged_page_streams(
    relation: &str,
    seed: &str,
    analyzed: bool,
    counts: &[usize],
    page_sql: impl Fn(usize) -> String,
    params: &str,
    args: impl Fn(&str) -> String,
) {
    let db = TestDb::new();
    drop(ensured(&db));
    let mut raw = db.raw();
    let analyze = if analyzed {
        format!("; ANALYZE {relation}")
    } else {
        String::new()
    };
    raw.batch_execute(&format!(
        "ALTER TABLE {relation} SET (autovacuum_enabled = false); {seed}{analyze}"
    ))
    .unwrap();
    let statistics = raw
        .query_one(
            "SELECT count(*) FROM pg_stats WHERE schemaname = current_schema() AND tablename = $1",
            &[&relation],
        )
        .unwrap()
        .get::<_, i64>(0);
    assert_eq!(statistics > 0, analyzed, "setup: statistics of {relation}");
    let page = 500.0;
    let modes = ["force_custom_plan", "force_generic_plan"];
    for (values, mode) in counts
        .iter()
        .flat_map(|&values| modes.map(|mode| (values, mode)))
    {
        raw.batch_execute(&format!("SET plan_cache_mode = {mode}"))
            .unwrap();
        let name = format!("page_{values}_{mode}");
        raw.batch_execute(&format!("PREPARE {name}({params}) AS {}", page_sql(values)))
            .unwrap();
        let list: Vec<String> = (0..values).map(|i| format!("'p{i}'")).collect();
        let explain = format!(
            "EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE {name}({})",
            args(&list.join(", "))
        );
        let text = raw
            .simple_query(&explain)
            .unwrap()
            .into_iter()
            .find_map(|m| match m {
                postgres::SimpleQueryMessage::Row(row) => row.get(0).map(str::to_owned),
                _ => None,
            })
            .unwrap();
        let plan: serde_json::Value = serde_json::from_str(&text).unwrap();
        let read = entries_read(&plan[0]["Plan"], relation);
        let bound = page + 2.0 * values as f64;
        assert!(
            read <= bound,
            "{relation}, {values} values, {mode}, analyzed {analyzed}: {read} entries \
             read for a page (bound {bound})\n{text}"
        );
    }
}

#[test]
fn a_merged_window_page_reads_a_bounded_number_of_entries_on_an_analyzed_index() {
    // A client far behind. Planned for whole ranges, a page sorted every
    // value's range (custom plans) or all ranges at once (generic,
    // parallel): its cost grew with the log. With each range cut at the
    // page, the generic plan of the `lag()` form still sorted values × page
    // entries (50 000 for 100 values, 85 ms a page).
    assert_merged_page_streams(
        "sync_change_scopes",
        "INSERT INTO sync_change_scopes (partition, tbl, var, value, commit_seq) \
         SELECT 'acme', 'tasks', 'project_id', 'p' || (i % 100), i \
         FROM generate_series(1, 200000) AS i",
        true,
        &[2, 100],
        |values| window_page_sql(values).to_owned(),
        "text, text, text, text[], int8, int8, int8",
        |list| format!("'acme', 'tasks', 'project_id', ARRAY[{list}], 1000, 200000, 500"),
    );
}

/// `n` scope entries of `tasks` over 100 values, interleaved in row-id
/// order (as W3's fixture: one row in 100 per list).
fn interleaved_row_scopes(n: u32) -> String {
    format!(
        "INSERT INTO sync_row_scopes (partition, tbl, var, value, row_id) \
         SELECT 'acme', 'tasks', 'project_id', 'p' || (i % 100), 'w1-' || lpad(i::text, 8, '0') \
         FROM generate_series(1, {n}) AS i"
    )
}

#[test]
fn a_merged_scan_page_reads_a_bounded_number_of_entries_on_an_analyzed_index() {
    // The scan page's merged ranges (a sparse filter, or above a walk).
    assert_merged_page_streams(
        "sync_row_scopes",
        &interleaved_row_scopes(200_000),
        true,
        &[1, 2, 100],
        |values| scan_page_sql("\"tasks\"", values),
        "text, text, text, text[], text, int8",
        |list| format!("'acme', 'tasks', 'project_id', ARRAY[{list}], 'w1-00001000', 500"),
    );
}

#[test]
fn a_scan_page_reads_a_bounded_number_of_entries_before_any_analyze() {
    // A bootstrap right after a bulk load: with `row_id > $5` as the
    // cursor, the planner (no statistics, both indexes estimated at one
    // row) took `sync_row_scopes_by_row` by the cursor and filtered out
    // the other 99 values' entries, 50 000 of them for a page of one value
    // (W3's 70 000 rows; on much larger tables the estimates part).
    assert_merged_page_streams(
        "sync_row_scopes",
        &interleaved_row_scopes(70_000),
        false,
        &[1, 2, 100],
        |values| scan_page_sql("\"tasks\"", values),
        "text, text, text, text[], text, int8",
        |list| format!("'acme', 'tasks', 'project_id', ARRAY[{list}], 'w1-00001000', 500"),
    );
}
