//! Scope-indexed windows and scans, trusted lookups and partition scans.

mod common;

use common::*;
use sync_core::{
    CommitWindowQuery, ErrorCode, IndexRowScanQuery, NewChange, RowScanQuery, RowValue,
    ScopeFilter, ServerStorage,
};

fn window(storage: &dyn ServerStorage, filter: ScopeFilter, after: i64, limit: i64) -> Vec<i64> {
    storage
        .read_commit_window(
            "p",
            &CommitWindowQuery {
                table: "tasks".into(),
                scope_filter: filter,
                after_seq: after,
                through_seq: i64::MAX,
                limit_changes: limit,
            },
        )
        .unwrap()
        .iter()
        .map(|c| c.commit_seq)
        .collect()
}

#[test]
fn window_pages_across_candidate_pages_and_never_splits_commits() {
    let db = Db::new();
    let storage = db.ready();
    // 200 commits alternating between two projects, then one commit of 5 rows.
    for i in 0..200 {
        let project = if i % 2 == 0 { "p1" } else { "p2" };
        push(
            &storage,
            "p",
            "c",
            &format!("k{i}"),
            &[task_row(&format!("t{i}"), project, &format!("x{i}"))],
        );
    }
    let five: Vec<_> = (0..5)
        .map(|i| task_row(&format!("big{i}"), "p1", &format!("big{i}")))
        .collect();
    let big = push(&storage, "p", "c", "big", &five);
    let all = window(&storage, filter("project_id", &["p1"]), 0, 1_000);
    assert_eq!(all.len(), 101);
    assert_eq!(&all[..3], &[1, 3, 5]);
    let first = window(&storage, filter("project_id", &["p1"]), 0, 70);
    assert_eq!(first, (0..70).map(|i| 1 + 2 * i).collect::<Vec<_>>());
    let both = window(&storage, filter("project_id", &["p1", "p2"]), 0, 150);
    assert_eq!(both, (1..=150).collect::<Vec<_>>());
    let whole = storage
        .read_commit_window(
            "p",
            &CommitWindowQuery {
                table: "tasks".into(),
                scope_filter: filter("project_id", &["p1"]),
                after_seq: big - 1,
                through_seq: big,
                limit_changes: 2,
            },
        )
        .unwrap();
    assert_eq!(whole.len(), 1);
    assert_eq!(whole[0].changes.len(), 5);
    // empty answers
    assert!(window(&storage, ScopeFilter::new(), 0, 10).is_empty());
    assert!(window(&storage, filter("project_id", &[]), 0, 10).is_empty());
    assert!(window(&storage, filter("project_id", &["p1"]), 0, 0).is_empty());
    let err = storage
        .read_commit_window(
            "p",
            &CommitWindowQuery {
                table: "nope".into(),
                scope_filter: ScopeFilter::new(),
                after_seq: 0,
                through_seq: 1,
                limit_changes: 1,
            },
        )
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::UnknownTable);
    assert_eq!(
        storage
            .latest_scoped_change_seq("p", "tasks", &filter("project_id", &["p1", "p2"]))
            .unwrap(),
        big
    );
    assert_eq!(
        storage
            .latest_scoped_change_seq("p", "tasks", &filter("project_id", &["zz"]))
            .unwrap(),
        0
    );
}

#[test]
fn window_applies_the_full_filter_to_each_change() {
    let db = Db::new();
    let storage = db.ready();
    let mut tx = storage.begin("p").unwrap();
    let change = |row: &str, org: &str, project: &str| {
        NewChange::upsert(
            "tasks",
            row,
            1,
            scopes(&[("org_id", org), ("project_id", project)]),
            task_payload(row, project, row),
        )
    };
    tx.append_commit(&commit_of(
        "c",
        "1",
        vec![
            change("a", "o1", "p1"),
            change("b", "o2", "p1"),
            change("c", "o1", "p2"),
        ],
    ))
    .unwrap();
    tx.commit().unwrap();
    let mut both = filter("project_id", &["p1"]);
    both.insert("org_id".into(), vec!["o1".into()]);
    let commits = storage
        .read_commit_window(
            "p",
            &CommitWindowQuery {
                table: "tasks".into(),
                scope_filter: both,
                after_seq: 0,
                through_seq: 10,
                limit_changes: 10,
            },
        )
        .unwrap();
    let ids: Vec<&str> = commits[0]
        .changes
        .iter()
        .map(|c| c.row_id.as_str())
        .collect();
    assert_eq!(ids, ["a"]);
}

#[test]
fn scans_order_bytewise_and_resume() {
    let db = Db::new();
    let storage = db.ready();
    let mut tx = storage.begin("p").unwrap();
    for id in ["B", "a", "é", "Z"] {
        tx.upsert_row("tasks", &task_row(id, "p1", id), None)
            .unwrap();
    }
    tx.upsert_row("tasks", &task_row("other", "p2", "other"), None)
        .unwrap();
    tx.commit().unwrap();
    let scan = |after: Option<&str>, limit: i64| -> Vec<String> {
        storage
            .scan_rows(
                "p",
                &RowScanQuery {
                    table: "tasks".into(),
                    scope_filter: filter("project_id", &["p1"]),
                    after_row_id: after.map(str::to_owned),
                    limit,
                },
            )
            .unwrap()
            .into_iter()
            .map(|r| r.row_id)
            .collect()
    };
    assert_eq!(scan(None, 10), ["B", "Z", "a", "é"]);
    assert_eq!(scan(None, 2), ["B", "Z"]);
    assert_eq!(scan(Some("Z"), 10), ["a", "é"]);
    let err = storage
        .scan_rows(
            "p",
            &RowScanQuery {
                table: "nope".into(),
                scope_filter: ScopeFilter::new(),
                after_row_id: None,
                limit: 1,
            },
        )
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::ScanRequiresScope);
    assert!(!err.to_string().contains("nope"));
    let empty = storage
        .scan_rows(
            "p",
            &RowScanQuery {
                table: "nope".into(),
                scope_filter: filter("project_id", &[]),
                after_row_id: None,
                limit: 1,
            },
        )
        .unwrap();
    assert!(empty.is_empty());
    let partition: Vec<String> = storage
        .scan_partition_rows("p", "tasks", Some("B"), 3)
        .unwrap()
        .into_iter()
        .map(|r| r.row_id)
        .collect();
    assert_eq!(partition, ["Z", "a", "other"]);
    assert_eq!(
        storage
            .scan_partition_rows("p", "tasks", None, 1001)
            .unwrap_err()
            .code(),
        ErrorCode::InvalidLimit
    );
}

#[test]
fn index_lookups_validate_and_match_exactly() {
    let db = Db::new();
    let storage = db.ready();
    let mut tx = storage.begin("p").unwrap();
    for (id, title) in [
        ("r1", "same"),
        ("r2", "other"),
        ("r3", "same"),
        ("r4", "same"),
    ] {
        tx.upsert_row("tasks", &task_row(id, &format!("proj-{id}"), title), None)
            .unwrap();
    }
    tx.commit().unwrap();
    let lookup = |index: &str, values: Vec<RowValue>, after: Option<&str>, limit: i64| {
        storage.scan_rows_by_index(
            "p",
            &IndexRowScanQuery {
                table: "tasks".into(),
                index: index.into(),
                values,
                after_row_id: after.map(str::to_owned),
                limit,
            },
        )
    };
    let ids =
        |rows: Vec<sync_core::StoredRow>| rows.into_iter().map(|r| r.row_id).collect::<Vec<_>>();
    let same = || vec![RowValue::String("same".into())];
    assert_eq!(
        ids(lookup("tasks_by_title", same(), None, 2).unwrap()),
        ["r1", "r3"]
    );
    assert_eq!(
        ids(lookup("tasks_by_title", same(), Some("r3"), 2).unwrap()),
        ["r4"]
    );
    let both = vec![
        RowValue::String("proj-r2".into()),
        RowValue::String("other".into()),
    ];
    assert_eq!(
        ids(lookup("tasks_by_project_title", both, None, 5).unwrap()),
        ["r2"]
    );
    let code = |r: sync_core::Result<Vec<sync_core::StoredRow>>| r.unwrap_err().code();
    assert_eq!(
        code(lookup("tasks_by_project_title", same(), None, 5)),
        ErrorCode::IndexValueCountMismatch
    );
    assert_eq!(
        code(lookup("nope", same(), None, 5)),
        ErrorCode::IndexNotFound
    );
    assert_eq!(
        code(lookup("tasks_by_title", same(), None, 0)),
        ErrorCode::InvalidLimit
    );
    assert_eq!(
        code(lookup(
            "tasks_by_title",
            vec![RowValue::Integer(1)],
            None,
            5
        )),
        ErrorCode::IndexValueTypeMismatch
    );
    assert_eq!(
        code(storage.scan_rows_by_index(
            "p",
            &IndexRowScanQuery {
                table: "secrets".into(),
                index: "x".into(),
                values: vec![],
                after_row_id: None,
                limit: 1,
            },
        )),
        ErrorCode::IndexNotMaterialized
    );
    assert_eq!(
        ids(lookup("tasks_by_title", vec![RowValue::Null], None, 5).unwrap()),
        Vec::<String>::new()
    );
}

#[test]
fn a_scan_reads_on_past_a_full_page_of_candidates_that_do_not_match() {
    let db = Db::new();
    let storage = db.ready();
    let row = |id: &str, org: &str, project: &str| sync_core::StoredRow {
        scopes: scopes(&[("org_id", org), ("project_id", project)]),
        ..task_row(id, project, id)
    };
    // Whichever variable gives the candidates, its first 64 (a full
    // candidate page for a limit of 10) fail the other variable.
    let mut rows: Vec<_> = (0..64)
        .map(|i| row(&format!("a{i:03}"), "o2", "p1"))
        .collect();
    rows.extend((0..64).map(|i| row(&format!("b{i:03}"), "o1", "p2")));
    rows.extend((0..5).map(|i| row(&format!("z{i}"), "o1", "p1")));
    push(&storage, "p", "c", "k", &rows);
    let mut both = filter("project_id", &["p1"]);
    both.insert("org_id".into(), vec!["o1".into()]);
    let found = storage
        .scan_rows(
            "p",
            &RowScanQuery {
                table: "tasks".into(),
                scope_filter: both,
                after_row_id: None,
                limit: 10,
            },
        )
        .unwrap();
    let ids: Vec<&str> = found.iter().map(|r| r.row_id.as_str()).collect();
    assert_eq!(ids, ["z0", "z1", "z2", "z3", "z4"]);
}
