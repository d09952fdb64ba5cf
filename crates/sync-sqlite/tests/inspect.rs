//! Operator reads that need no ensured schema: `read_commits`,
//! `inspect_table_rows` and `observe_tables`.

mod common;

use common::*;
use sync_core::{ChangeOp, ErrorCode, NewChange, ServerStorage};

#[test]
fn read_commits_returns_whole_commits_oldest_first_without_an_ensured_schema() {
    let db = Db::new();
    let writer = db.ready();
    let a = task_row("a", "p", "A");
    let b = task_row("b", "p", "B");
    push(&writer, "p1", "c1", "1", &[a.clone(), b.clone()]);
    let mut tx = writer.begin("p1").unwrap();
    tx.lock_partition_for_push().unwrap();
    tx.delete_row("tasks", "a").unwrap();
    tx.append_commit(&commit_of(
        "c1",
        "2",
        vec![NewChange::delete("tasks", "a", a.scopes.clone())],
    ))
    .unwrap();
    tx.commit().unwrap();
    push(&writer, "p1", "c1", "3", &[]);

    let operator = db.open(); // never ensured
    let commits = operator.read_commits("p1", 0, 1000).unwrap();
    let seqs: Vec<i64> = commits.iter().map(|c| c.commit_seq).collect();
    assert_eq!(seqs, [1, 2, 3]);
    assert_eq!(commits[0].writer_version, Some(1));
    assert_eq!(
        commits[0].changes,
        [upsert_change(&a), upsert_change(&b)],
        "every change, in index order"
    );
    assert_eq!(commits[1].changes[0].op, ChangeOp::Delete);
    assert_eq!(commits[1].changes[0].payload, None);
    assert!(commits[2].changes.is_empty(), "an empty commit is listed");
    let page = operator.read_commits("p1", 1, 1).unwrap();
    assert_eq!(page.len(), 1);
    assert_eq!(page[0].commit_seq, 2);
    assert!(operator.read_commits("other", 0, 10).unwrap().is_empty());

    let code = |r: sync_core::Result<_>| r.map(|_: Vec<_>| ()).unwrap_err().code();
    assert_eq!(
        code(operator.read_commits("", -1, 0)),
        ErrorCode::InvalidPartition
    );
    assert_eq!(
        code(operator.read_commits("p1", -1, 0)),
        ErrorCode::InvalidArgument
    );
    assert_eq!(
        code(operator.read_commits("p1", 0, 0)),
        ErrorCode::InvalidLimit
    );
    assert_eq!(
        code(operator.read_commits("p1", 0, 1001)),
        ErrorCode::InvalidLimit
    );
}

#[test]
fn inspect_table_rows_reads_tables_of_the_stored_layouts() {
    let db = Db::new();
    let writer = db.ready();
    let rows: Vec<_> = ["c", "a", "b"]
        .iter()
        .map(|id| task_row(id, "p", id))
        .collect();
    push(&writer, "p1", "c1", "1", &rows);

    let operator = db.open(); // never ensured
    let listed = operator.inspect_table_rows("p1", "tasks", None, 2).unwrap();
    let ids: Vec<&str> = listed.iter().map(|r| r.row_id.as_str()).collect();
    assert_eq!(ids, ["a", "b"]);
    assert_eq!(listed[0], task_row("a", "p", "a"));
    let rest = operator
        .inspect_table_rows("p1", "tasks", Some("b"), 2)
        .unwrap();
    assert_eq!(rest.len(), 1);
    assert_eq!(rest[0].row_id, "c");

    let code = |r: sync_core::Result<_>| r.map(|_: Vec<_>| ()).unwrap_err().code();
    assert_eq!(
        code(operator.inspect_table_rows("p1", "nope", None, 2)),
        ErrorCode::UnknownTable
    );
    assert_eq!(
        code(operator.inspect_table_rows("p1", "sync_commits", None, 2)),
        ErrorCode::UnknownTable
    );
    assert_eq!(
        code(operator.inspect_table_rows("", "tasks", None, 2)),
        ErrorCode::InvalidPartition
    );
    assert_eq!(
        code(operator.inspect_table_rows("p1", "nope", None, 0)),
        ErrorCode::InvalidLimit
    );

    let empty = Db::new();
    let fresh = empty.open();
    assert_eq!(
        code(fresh.inspect_table_rows("p1", "tasks", None, 2)),
        ErrorCode::UnknownTable
    );
}

#[test]
fn observe_tables_reports_the_physical_state_read_only() {
    let db = Db::new();
    let storage = db.ready();
    let names = vec!["tasks".to_owned(), "absent".to_owned()];
    let observed = storage.observe_tables(&names).unwrap();
    let tasks = observed.get("tasks").unwrap();
    assert!(tasks.exists);
    assert!(tasks.column("title").is_some());
    assert!(tasks.index("sync_ix_tasks_by_title").is_some());
    assert!(
        observed.get("absent").is_none(),
        "absent tables read as absent"
    );
}
