//! Query plans of the hot paths (`dialects.md` §7.1), on a populated database.

mod common;

use common::*;
use sync_core::ServerStorage;
use sync_sqlite::hot_path_sql as hot;

fn populated() -> Db {
    let db = Db::new();
    let storage = db.ready();
    for batch in 0..10 {
        let mut tx = storage.begin("p1").unwrap();
        for i in 0..50 {
            let n = batch * 50 + i;
            let row = task_row(
                &format!("t{n:04}"),
                &format!("proj{}", n % 20),
                &format!("title {n}"),
            );
            tx.upsert_row("tasks", &row, None).unwrap();
            tx.set_blob_refs("tasks", &row.row_id, &[format!("blob-{}", n % 20)])
                .unwrap();
            tx.append_commit(&commit_of("c", &format!("k{n}"), vec![upsert_change(&row)]))
                .unwrap();
        }
        tx.commit().unwrap();
    }
    db.raw().execute_batch("ANALYZE").unwrap();
    db
}

fn assert_no_scan(lines: &[String], tables: &[&str]) {
    for line in lines {
        for table in tables {
            assert!(
                !line.starts_with(&format!("SCAN {table}")),
                "full scan of {table}: {lines:?}"
            );
        }
    }
}

#[test]
fn hot_paths_use_their_indexes() {
    let db = populated();
    let conn = db.raw();
    let all = [
        "sync_change_scopes",
        "sync_row_scopes",
        "sync_changes",
        "sync_commits",
        "tasks",
        "sync_blob_refs",
    ];

    // One value and more than MERGED_WINDOW_VALUES: the `IN` form; in
    // between: one primary-key range per value, merged.
    for values in [
        1,
        2,
        hot::MERGED_WINDOW_VALUES,
        hot::MERGED_WINDOW_VALUES + 1,
    ] {
        let window = plan(&conn, &hot::window_candidates_sql(values));
        assert!(
            window
                .iter()
                .any(|l| l.starts_with("SEARCH sync_change_scopes USING PRIMARY KEY")),
            "{values} values: {window:?}"
        );
        let merged = window.iter().any(|l| l.starts_with("MERGE (UNION)"));
        assert_eq!(
            merged,
            (2..=hot::MERGED_WINDOW_VALUES).contains(&values),
            "{values} values: {window:?}"
        );
        assert_no_scan(&plan(&conn, &hot::window_page_sql(values)), &all);
    }

    // Scan candidates: one ordered primary-key range for one value, merged
    // ranges for 2…MERGED_SCAN_VALUES; neither collects entries into a
    // temporary B-tree (that page cost grows with the table).
    for values in 1..=hot::MERGED_SCAN_VALUES + 1 {
        let scan = plan(&conn, &hot::scan_candidates_sql("\"tasks\"", values));
        assert!(
            scan.iter()
                .any(|l| l.starts_with("SEARCH sync_row_scopes USING PRIMARY KEY")),
            "{values} values: {scan:?}"
        );
        let merged = scan.iter().any(|l| l.starts_with("MERGE (UNION)"));
        assert_eq!(
            merged,
            (2..=hot::MERGED_SCAN_VALUES).contains(&values),
            "{values} values: {scan:?}"
        );
        let collects = scan.iter().any(|l| l.starts_with("USE TEMP B-TREE"));
        assert_eq!(
            collects,
            values > hot::MERGED_SCAN_VALUES,
            "{values} values: {scan:?}"
        );
        assert_no_scan(&scan, &all);
    }
    assert_no_scan(&plan(&conn, &hot::scan_page_sql("\"tasks\"", 3)), &all);

    let delete = plan(&conn, hot::DELETE_ROW_SCOPES_EXACT);
    assert!(
        delete
            .iter()
            .any(|l| l.starts_with("SEARCH sync_row_scopes USING PRIMARY KEY")),
        "{delete:?}"
    );
    assert_no_scan(&delete, &["sync_row_scopes"]);

    for sql in [hot::coverage_probe_sql(2), hot::coverage_seq_sql(1)] {
        let coverage = plan(&conn, &sql);
        assert!(
            coverage
                .iter()
                .any(|l| l.contains("INDEX sync_changes_by_table")),
            "{coverage:?}"
        );
    }

    let lookup = plan(
        &conn,
        &hot::index_lookup_sql(
            "\"tasks\"",
            &["project_id".into(), "title".into()],
            &[false, false],
        ),
    );
    assert!(
        lookup
            .iter()
            .any(|l| l.contains("INDEX sync_ix_tasks_by_project_title")),
        "{lookup:?}"
    );

    let blobs = plan(&conn, hot::BLOB_CANDIDATES);
    assert!(
        blobs.iter().any(|l| l.contains("sync_blob_refs_by_blob")),
        "{blobs:?}"
    );

    let gate = plan(&conn, hot::SERVE_GATE);
    assert_no_scan(
        &gate,
        &["sync_backfill_checkpoints", "sync_partition_registry"],
    );
    drop(conn);
    let storage = db.open();
    assert_eq!(storage.get_max_commit_seq("p1").unwrap(), 500);
}
