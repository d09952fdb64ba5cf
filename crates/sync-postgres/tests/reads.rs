//! Scope-indexed reads: window paging, whole commits, byte ordering.

mod common;

use common::*;
use sync_core::{
    CommitWindowQuery, IndexRowScanQuery, NewChange, RowScanQuery, RowValue, ServerStorage,
};

fn window(storage: &dyn ServerStorage, values: &[&str], after: i64, limit: i64) -> Vec<i64> {
    storage
        .read_commit_window(
            "acme",
            &CommitWindowQuery {
                table: "tasks".into(),
                scope_filter: filter("project_id", values),
                after_seq: after,
                through_seq: 1_000_000,
                limit_changes: limit,
            },
        )
        .unwrap()
        .iter()
        .map(|c| c.commit_seq)
        .collect()
}

#[test]
fn window_pages_across_candidate_pages_and_never_splits_a_commit() {
    let db = TestDb::new();
    let storage = ensured(&db);
    let schema = fix1();
    // 200 commits alternating p1 / p2, one change each.
    let mut tx = storage.begin("acme").unwrap();
    tx.lock_partition_for_push().unwrap();
    for i in 0..200 {
        let project = if i % 2 == 0 { "p1" } else { "p2" };
        let row = task_row(
            &schema,
            &format!("t{i:03}"),
            project,
            &format!("title {i}"),
            1,
        );
        tx.append_commit(&commit(
            "c",
            &format!("cc{i}"),
            vec![upsert_change(&row, "tasks")],
        ))
        .unwrap();
    }
    // One commit with five p1 changes.
    let big: Vec<NewChange> = (0..5)
        .map(|i| {
            upsert_change(
                &task_row(&schema, &format!("big{i}"), "p1", "big", 1),
                "tasks",
            )
        })
        .collect();
    tx.append_commit(&commit("c", "big", big)).unwrap();
    tx.commit().unwrap();

    let p1: Vec<i64> = (1..=200).filter(|s| s % 2 == 1).collect();
    let first = window(&storage, &["p1"], 0, 70);
    assert_eq!(
        first,
        p1[..70].to_vec(),
        "oldest first, exactly the first 70 matching commits"
    );
    let rest = window(&storage, &["p1"], *first.last().unwrap(), 1000);
    assert_eq!(
        rest.len(),
        31,
        "the remaining 30 single-change commits and the big one"
    );
    assert_eq!(
        window(&storage, &["p1", "p2"], 0, 150),
        (1..=150).collect::<Vec<_>>()
    );
    let whole = storage
        .read_commit_window(
            "acme",
            &CommitWindowQuery {
                table: "tasks".into(),
                scope_filter: filter("project_id", &["p1"]),
                after_seq: 200,
                through_seq: 201,
                limit_changes: 2,
            },
        )
        .unwrap();
    assert_eq!(whole.len(), 1);
    assert_eq!(
        whole[0].changes.len(),
        5,
        "a commit larger than the limit is returned whole"
    );
    assert!(window(&storage, &[], 0, 10).is_empty());
    assert!(window(&storage, &["p1"], 0, 0).is_empty());
    assert_eq!(
        storage
            .latest_scoped_change_seq("acme", "tasks", &filter("project_id", &["p2"]))
            .unwrap(),
        200
    );
    assert_eq!(
        storage
            .latest_scoped_change_seq("acme", "tasks", &filter("project_id", &["p1", "p2"]))
            .unwrap(),
        201
    );
    assert_eq!(
        storage
            .latest_scoped_change_seq("acme", "tasks", &filter("project_id", &["zz"]))
            .unwrap(),
        0
    );
}

#[test]
fn row_ids_are_ordered_byte_wise() {
    let db = TestDb::new();
    let storage = ensured(&db);
    let schema = fix1();
    let rows: Vec<_> = ["a", "é", "Z", "B"]
        .iter()
        .map(|id| task_row(&schema, id, "p1", &format!("title {id}"), 1))
        .collect();
    push(&storage, "acme", "c", "cc", &rows).unwrap();
    let expected = vec!["B", "Z", "a", "é"];
    let scanned: Vec<String> = storage
        .scan_rows(
            "acme",
            &RowScanQuery {
                table: "tasks".into(),
                scope_filter: filter("project_id", &["p1"]),
                after_row_id: None,
                limit: 10,
            },
        )
        .unwrap()
        .into_iter()
        .map(|r| r.row_id)
        .collect();
    assert_eq!(scanned, expected);
    let resumed: Vec<String> = storage
        .scan_rows(
            "acme",
            &RowScanQuery {
                table: "tasks".into(),
                scope_filter: filter("project_id", &["p1"]),
                after_row_id: Some("Z".into()),
                limit: 1,
            },
        )
        .unwrap()
        .into_iter()
        .map(|r| r.row_id)
        .collect();
    assert_eq!(resumed, vec!["a"]);
    let keyset: Vec<String> = storage
        .scan_partition_rows("acme", "tasks", None, 10)
        .unwrap()
        .into_iter()
        .map(|r| r.row_id)
        .collect();
    assert_eq!(keyset, expected);
    let indexed: Vec<String> = storage
        .scan_rows_by_index(
            "acme",
            &IndexRowScanQuery {
                table: "tasks".into(),
                index: "tasks_by_project_title".into(),
                values: vec![
                    RowValue::String("p1".into()),
                    RowValue::String("title é".into()),
                ],
                after_row_id: None,
                limit: 10,
            },
        )
        .unwrap()
        .into_iter()
        .map(|r| r.row_id)
        .collect();
    assert_eq!(indexed, vec!["é"]);
}

#[test]
fn staged_writes_move_rows_between_scopes_inside_the_transaction() {
    let db = TestDb::new();
    let storage = ensured(&db);
    let schema = fix1();
    push(
        &storage,
        "acme",
        "c",
        "1",
        &[
            task_row(&schema, "r1", "p1", "one", 1),
            task_row(&schema, "r2", "p1", "two", 1),
        ],
    )
    .unwrap();
    let mut tx = storage.begin("acme").unwrap();
    tx.delete_row("tasks", "r1").unwrap();
    tx.upsert_row("tasks", &task_row(&schema, "r2", "p2", "two", 2), None)
        .unwrap();
    tx.upsert_row("tasks", &task_row(&schema, "r3", "p1", "three", 1), None)
        .unwrap();
    let ids = |tx: &mut Box<dyn sync_core::StorageTransaction + '_>, p: &str| -> Vec<String> {
        tx.scan_rows(&RowScanQuery {
            table: "tasks".into(),
            scope_filter: filter("project_id", &[p]),
            after_row_id: None,
            limit: 10,
        })
        .unwrap()
        .into_iter()
        .map(|r| r.row_id)
        .collect()
    };
    assert_eq!(ids(&mut tx, "p1"), vec!["r3"]);
    assert_eq!(ids(&mut tx, "p2"), vec!["r2"]);
    tx.commit().unwrap();
    assert_eq!(db.count("SELECT count(*) FROM sync_row_scopes"), 2);
}

#[test]
fn a_scan_that_needs_several_candidate_pages_reads_one_snapshot() {
    let db = TestDb::new();
    let storage = ensured(&db);
    let schema = fix1();
    let docs = schema.table("docs").unwrap();
    let rows: Vec<sync_core::StoredRow> = (0..200)
        .map(|i| {
            let project = if i % 2 == 0 { "pa" } else { "pb" };
            let values = vec![
                RowValue::String(format!("d{i:03}")),
                RowValue::String("o1".into()),
                RowValue::String(project.into()),
                RowValue::Null,
            ];
            sync_core::StoredRow {
                row_id: format!("d{i:03}"),
                server_version: 1,
                scopes: scopes(&[("org_id", "o1"), ("project_id", project)]),
                payload: sync_core::codec::encode_row(docs, &values).unwrap(),
                column_versions: None,
            }
        })
        .collect();
    let mut tx = storage.begin("acme").unwrap();
    for row in &rows {
        tx.upsert_row("docs", row, None).unwrap();
    }
    tx.commit().unwrap();
    let mut both = filter("org_id", &["o1"]);
    both.insert("project_id".into(), vec!["pa".into()]);
    let page = |after: Option<String>| -> Vec<String> {
        storage
            .scan_rows(
                "acme",
                &RowScanQuery {
                    table: "docs".into(),
                    scope_filter: both.clone(),
                    after_row_id: after,
                    limit: 70,
                },
            )
            .unwrap()
            .into_iter()
            .map(|r| r.row_id)
            .collect()
    };
    let first = page(None);
    let expected: Vec<String> = (0..200).step_by(2).map(|i| format!("d{i:03}")).collect();
    assert_eq!(first, expected[..70].to_vec());
    let second = page(first.last().cloned());
    assert_eq!(second, expected[70..].to_vec());
}
