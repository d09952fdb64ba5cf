//! Regression (reliability work): a scope filter with more values than
//! SQLite accepts parameters (32 766) failed with `sync.storage.backend`
//! ("variable number must be between ?1 and ?32766"); above
//! `MAX_BOUND_VALUES` the candidate queries now bind the values as one JSON
//! array and answer like Postgres does.

mod common;

use common::*;
use sync_core::{CommitWindowQuery, RowScanQuery, ServerStorage};

#[test]
fn scope_filters_beyond_the_parameter_limit_are_answered() {
    let db = Db::new();
    let storage = db.ready();
    push(&storage, "p", "c", "k1", &[task_row("t1", "p1", "one")]);
    push(&storage, "p", "c", "k2", &[task_row("t2", "p-last", "two")]);
    push(
        &storage,
        "p",
        "c",
        "k3",
        &[task_row("t3", "other", "three")],
    );
    for count in [30_000, 30_001, 40_000, 100_000] {
        let mut values: Vec<String> = (0..count).map(|i| format!("x{i}'")).collect();
        values[0] = "p1".into();
        values[count - 1] = "p-last".into();
        let filter = [("project_id".to_owned(), values)].into();
        let window = storage
            .read_commit_window(
                "p",
                &CommitWindowQuery {
                    table: "tasks".into(),
                    scope_filter: filter,
                    after_seq: 0,
                    through_seq: i64::MAX,
                    limit_changes: 100,
                },
            )
            .unwrap();
        assert_eq!(
            window.iter().map(|c| c.commit_seq).collect::<Vec<_>>(),
            [1, 2],
            "{count} values"
        );
        let mut values: Vec<String> = (0..count).map(|i| format!("x{i}'")).collect();
        values[count / 2] = "p-last".into();
        let rows = storage
            .scan_rows(
                "p",
                &RowScanQuery {
                    table: "tasks".into(),
                    scope_filter: [("project_id".to_owned(), values)].into(),
                    after_row_id: None,
                    limit: 100,
                },
            )
            .unwrap();
        assert_eq!(
            rows.iter().map(|r| r.row_id.as_str()).collect::<Vec<_>>(),
            ["t2"],
            "{count} values"
        );
    }
}
