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
    }
}
