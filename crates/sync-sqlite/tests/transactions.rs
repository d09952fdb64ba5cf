//! The push path, dense allocation, isolation of pool reads, poisoning and
//! rejection finalization.

mod common;

use common::*;
use sync_core::{
    ChangeOp, ErrorCode, NewChange, PushOperationResult, PushStatus, RowScanQuery, ServerStorage,
    StoredPushResult,
};

fn rejected(code: &str) -> StoredPushResult {
    StoredPushResult {
        status: PushStatus::Rejected,
        commit_seq: None,
        recorded_at_ms: Some(NOW),
        cache_identity: Some("c".into()),
        results: vec![PushOperationResult::Error {
            op_index: 0,
            code: code.into(),
            message: "no".into(),
            retryable: false,
            details: None,
        }],
        actor_id: None,
    }
}

#[test]
fn full_push_sequence_allocates_dense_seqs_per_partition() {
    let db = Db::new();
    let storage = db.ready();
    for i in 1..=3 {
        let seq = push(
            &storage,
            "p1",
            "c1",
            &format!("cc{i}"),
            &[task_row(&format!("t{i}"), "p", &format!("x{i}"))],
        );
        assert_eq!(seq, i);
    }
    assert_eq!(
        push(&storage, "p2", "c1", "cc1", &[task_row("t1", "p", "x")]),
        1
    );
    assert_eq!(storage.get_max_commit_seq("p1").unwrap(), 3);
    assert_eq!(storage.get_max_commit_seq("p2").unwrap(), 1);
    assert_eq!(storage.get_max_commit_seq("nope").unwrap(), 0);
    let result = storage.get_push_result("p1", "c1", "cc2").unwrap().unwrap();
    assert_eq!(result, StoredPushResult::applied(2));
    let row = storage.get_row("p1", "tasks", "t1").unwrap().unwrap();
    assert_eq!(row, task_row("t1", "p", "x1"));
}

#[test]
fn rollback_and_drop_release_the_number() {
    let db = Db::new();
    let storage = db.ready();
    let mut tx = storage.begin("p").unwrap();
    assert_eq!(tx.append_commit(&commit_of("c", "1", vec![])).unwrap(), 1);
    tx.rollback().unwrap();
    {
        let mut tx = storage.begin("p").unwrap();
        tx.upsert_row("tasks", &task_row("t1", "p", "x"), None)
            .unwrap();
        assert_eq!(tx.append_commit(&commit_of("c", "1", vec![])).unwrap(), 1);
    }
    assert_eq!(storage.get_max_commit_seq("p").unwrap(), 0);
    assert!(storage.get_row("p", "tasks", "t1").unwrap().is_none());
    let mut tx = storage.begin("p").unwrap();
    assert_eq!(tx.append_commit(&commit_of("c", "1", vec![])).unwrap(), 1);
    assert_eq!(tx.max_commit_seq().unwrap(), 1);
    tx.commit().unwrap();
    assert_eq!(storage.get_max_commit_seq("p").unwrap(), 1);
}

#[test]
fn pool_reads_do_not_see_staged_writes() {
    let db = Db::new();
    let storage = db.ready();
    let mut tx = storage.begin("p").unwrap();
    tx.upsert_row("tasks", &task_row("t1", "p1", "x"), None)
        .unwrap();
    assert!(tx.get_row("tasks", "t1").unwrap().is_some());
    assert!(storage.get_row("p", "tasks", "t1").unwrap().is_none());
    let scan = RowScanQuery {
        table: "tasks".into(),
        scope_filter: filter("project_id", &["p1"]),
        after_row_id: None,
        limit: 10,
    };
    assert!(storage.scan_rows("p", &scan).unwrap().is_empty());
    assert_eq!(tx.scan_rows(&scan).unwrap().len(), 1);
    tx.commit().unwrap();
    assert_eq!(storage.scan_rows("p", &scan).unwrap().len(), 1);
}

#[test]
fn validation_errors_do_not_poison_but_statement_errors_do() {
    let db = Db::new();
    let storage = db.ready();
    let mut tx = storage.begin("p").unwrap();
    let err = tx
        .append_commit(&commit_of(
            "c",
            "1",
            vec![NewChange::delete("nope", "r", scopes(&[]))],
        ))
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::UnknownTable);
    let mut bad = upsert_change(&task_row("t", "p", "x"));
    bad.payload = None;
    assert_eq!(
        tx.append_commit(&commit_of("c", "1", vec![bad]))
            .unwrap_err()
            .code(),
        ErrorCode::InvalidChange
    );
    let mut corrupt = task_row("t", "p", "x");
    corrupt.payload.pop();
    let err = tx.upsert_row("tasks", &corrupt, None).unwrap_err();
    assert_eq!(err.code(), ErrorCode::CodecDecodeFailed);
    assert_eq!(err.get_detail("reason"), Some("truncated"));
    let mut empty_id = task_row("t", "p", "x");
    empty_id.row_id.clear();
    assert_eq!(
        tx.upsert_row("tasks", &empty_id, None).unwrap_err().code(),
        ErrorCode::InvalidRowId
    );
    // still open
    tx.upsert_row("tasks", &task_row("t1", "p", "x"), None)
        .unwrap();
    tx.commit().unwrap();
    assert!(storage.get_row("p", "tasks", "t1").unwrap().is_some());
    assert_eq!(
        storage.begin("").err().unwrap().code(),
        ErrorCode::InvalidPartition
    );
}

#[test]
fn unique_collision_poisons_and_is_finalized_as_rejection() {
    let db = Db::new();
    let storage = db.ready();
    push(&storage, "p", "c", "1", &[task_row("t1", "proj", "same")]);
    let mut tx = storage.begin("p").unwrap();
    tx.lock_partition_for_push().unwrap();
    tx.upsert_row("tasks", &task_row("t9", "proj", "other"), Some(0))
        .unwrap();
    let err = tx
        .upsert_row("tasks", &task_row("t2", "proj", "same"), Some(2))
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::ConstraintViolation);
    assert_eq!(err.op_index_value(), Some(2));
    assert_eq!(
        tx.upsert_row("tasks", &task_row("t3", "proj", "z"), None)
            .unwrap_err()
            .code(),
        ErrorCode::TransactionAborted
    );
    assert_eq!(
        tx.append_commit(&commit_of("c", "2", vec![]))
            .unwrap_err()
            .code(),
        ErrorCode::TransactionAborted
    );
    tx.commit_rejected_push_result("c", "2", &rejected("sync.constraint_violation"))
        .unwrap();
    assert_eq!(
        storage.get_push_result("p", "c", "2").unwrap().unwrap(),
        rejected("sync.constraint_violation")
    );
    assert!(storage.get_row("p", "tasks", "t9").unwrap().is_none());
    assert!(storage.get_row("p", "tasks", "t2").unwrap().is_none());
    assert_eq!(storage.get_max_commit_seq("p").unwrap(), 1);
    // the storage stays usable
    push(&storage, "p", "c", "3", &[task_row("t4", "proj", "four")]);
}

#[test]
fn poisoned_commit_rolls_back_and_reports_aborted() {
    let db = Db::new();
    let storage = db.ready();
    push(&storage, "p", "c", "1", &[task_row("t1", "proj", "same")]);
    let mut tx = storage.begin("p").unwrap();
    tx.upsert_row("tasks", &task_row("t5", "proj", "five"), None)
        .unwrap();
    tx.upsert_row("tasks", &task_row("t2", "proj", "same"), None)
        .unwrap_err();
    assert_eq!(
        tx.commit().unwrap_err().code(),
        ErrorCode::TransactionAborted
    );
    assert!(storage.get_row("p", "tasks", "t5").unwrap().is_none());
    let mut tx = storage.begin("p").unwrap();
    tx.upsert_row("tasks", &task_row("t2", "proj", "same"), None)
        .unwrap_err();
    tx.rollback().unwrap();
    storage.begin("p").unwrap().commit().unwrap();
}

#[test]
fn rejection_requires_the_push_lock() {
    let db = Db::new();
    let storage = db.ready();
    let mut tx = storage.begin("p").unwrap();
    tx.upsert_row("tasks", &task_row("t1", "proj", "x"), None)
        .unwrap();
    let err = tx
        .commit_rejected_push_result("c", "1", &rejected("x"))
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::PushLockRequired);
    assert!(storage.get_row("p", "tasks", "t1").unwrap().is_none());
    assert!(storage.get_push_result("p", "c", "1").unwrap().is_none());
    storage.begin("p").unwrap().rollback().unwrap();
}

#[test]
fn rejection_discards_writes_after_the_lock_only() {
    let db = Db::new();
    let storage = db.ready();
    push(&storage, "p", "c", "0", &[task_row("t1", "old", "x")]);
    let mut tx = storage.begin("p").unwrap();
    tx.lock_partition_for_push().unwrap();
    tx.lock_partition_for_push().unwrap();
    let mut moved = task_row("t1", "new", "x");
    moved.server_version = 2;
    tx.upsert_row("tasks", &moved, Some(0)).unwrap();
    tx.commit_rejected_push_result("c", "1", &rejected("x"))
        .unwrap();
    let scan = |project: &str| {
        storage
            .scan_rows(
                "p",
                &RowScanQuery {
                    table: "tasks".into(),
                    scope_filter: filter("project_id", &[project]),
                    after_row_id: None,
                    limit: 10,
                },
            )
            .unwrap()
    };
    assert_eq!(scan("old").len(), 1);
    assert!(scan("new").is_empty());
    // first writer wins
    let mut tx = storage.begin("p").unwrap();
    tx.put_push_result("c", "1", &StoredPushResult::applied(9))
        .unwrap();
    tx.commit().unwrap();
    assert_eq!(
        storage
            .get_push_result("p", "c", "1")
            .unwrap()
            .unwrap()
            .status,
        PushStatus::Rejected
    );
}

#[test]
fn fence_trigger_rejects_null_and_low_writer_versions() {
    let db = Db::new();
    let storage = db.ready();
    let raw = db.raw();
    let insert = |seq: i64, version: Option<i32>| {
        raw.execute(
            "INSERT INTO sync_commits (partition, commit_seq, client_id, client_commit_id, actor_id, created_at_ms, writer_version) \
             VALUES ('raw', ?1, 'c', ?1, 'a', 0, ?2)",
            (seq, version),
        )
    };
    assert!(insert(1, Some(1)).is_ok());
    for (seq, version) in [(2, None), (3, Some(0))] {
        let err = insert(seq, version).unwrap_err();
        let rusqlite::Error::SqliteFailure(e, Some(message)) = err else {
            panic!("{err:?}")
        };
        assert_eq!(e.extended_code, rusqlite::ffi::SQLITE_CONSTRAINT_TRIGGER);
        assert_eq!(message, "sync.storage.writer_fence_rejected");
    }
    // An instance that never ensured writes version 0: fenced, inside a push with staged rows.
    let unaware = db.open();
    let mut tx = unaware.begin("p").unwrap();
    assert_eq!(tx.writer_version(), 0);
    tx.lock_partition_for_push().unwrap();
    let err = tx.append_commit(&commit_of("c", "1", vec![])).unwrap_err();
    assert_eq!(err.code(), ErrorCode::WriterFenceRejected);
    assert_eq!(
        tx.commit_rejected_push_result("c", "1", &rejected("x"))
            .unwrap_err()
            .code(),
        ErrorCode::TransactionAborted
    );
    assert!(storage.get_push_result("p", "c", "1").unwrap().is_none());
    assert_eq!(storage.get_max_commit_seq("p").unwrap(), 0);
    // a fence rejection inside the row write path classifies as the fence too
    let mut tx = storage.begin("p").unwrap();
    assert_eq!(tx.append_commit(&commit_of("c", "1", vec![])).unwrap(), 1);
    tx.commit().unwrap();
}

#[test]
fn deletes_write_tombstones_and_commits_keep_change_order() {
    let db = Db::new();
    let storage = db.ready();
    push(&storage, "p", "c", "1", &[task_row("t1", "proj", "x")]);
    let mut tx = storage.begin("p").unwrap();
    tx.delete_row("tasks", "t1").unwrap();
    tx.delete_row("tasks", "absent").unwrap();
    let seq = tx
        .append_commit(&commit_of(
            "c",
            "2",
            vec![NewChange::delete(
                "tasks",
                "t1",
                scopes(&[("project_id", "proj")]),
            )],
        ))
        .unwrap();
    assert_eq!(tx.get_tombstone_seq("tasks", "t1").unwrap(), Some(seq));
    tx.commit().unwrap();
    assert!(storage.get_row("p", "tasks", "t1").unwrap().is_none());
    let mut tx = storage.begin("p").unwrap();
    assert_eq!(tx.get_tombstone_seq("tasks", "t1").unwrap(), Some(2));
    tx.clear_tombstone("tasks", "t1").unwrap();
    assert_eq!(tx.get_tombstone_seq("tasks", "t1").unwrap(), None);
    tx.commit().unwrap();
    let window = storage
        .read_commit_window(
            "p",
            &sync_core::CommitWindowQuery {
                table: "tasks".into(),
                scope_filter: filter("project_id", &["proj"]),
                after_seq: 0,
                through_seq: 10,
                limit_changes: 10,
            },
        )
        .unwrap();
    assert_eq!(window.len(), 2);
    assert_eq!(window[1].changes[0].op, ChangeOp::Delete);
    assert_eq!(window[1].changes[0].payload, None);
}

#[test]
fn busy_writer_times_out_with_busy() {
    let db = Db::new();
    let storage = db.open_with(sync_sqlite::SqliteConfig {
        writer_wait_ms: 50,
        busy_timeout_ms: 50,
        ..sync_sqlite::SqliteConfig::default()
    });
    let _held = storage.begin("p").unwrap();
    let err = storage.begin("p").err().unwrap();
    assert_eq!(err.code(), ErrorCode::Busy);
    assert!(err.retryable());
    // another process holding the write lock: BEGIN IMMEDIATE waits busy_timeout
    drop(_held);
    let raw = db.raw();
    raw.execute_batch("BEGIN IMMEDIATE").unwrap();
    assert_eq!(storage.begin("p").err().unwrap().code(), ErrorCode::Busy);
    raw.execute_batch("ROLLBACK").unwrap();
    storage.begin("p").unwrap().commit().unwrap();
}

#[test]
fn nan_floats_never_fail_a_write() {
    let db = Db::new();
    let storage = db.open();
    let schema = compile(
        r#"{"version":1,"tables":[{"name":"m","primaryKey":"id","columns":[
            {"name":"id","type":"string"},{"name":"v","type":"float"}],"scopes":["k:{id}"]}]}"#,
    );
    storage.ensure_schema(&schema, &Default::default()).unwrap();
    let payload = sync_core::codec::encode_row(
        schema.table("m").unwrap(),
        &[
            sync_core::RowValue::String("a".into()),
            sync_core::RowValue::Float(f64::NAN),
        ],
    )
    .unwrap();
    let row = sync_core::StoredRow {
        row_id: "a".into(),
        server_version: 1,
        scopes: scopes(&[("id", "a")]),
        payload: payload.clone(),
        column_versions: None,
    };
    let mut tx = storage.begin("p").unwrap();
    tx.upsert_row("m", &row, Some(0)).unwrap();
    tx.commit().unwrap();
    assert_eq!(
        storage.get_row("p", "m", "a").unwrap().unwrap().payload,
        payload
    );
    let stored: String = db
        .raw()
        .query_row("SELECT v FROM m", [], |r| r.get(0))
        .unwrap();
    assert_eq!(stored, "NaN");
}

#[test]
fn checkpoint_errors_poison_and_cache_misses_do_not() {
    let db = Db::new();
    let storage = db.ready();
    db.raw()
        .execute(
            "INSERT INTO sync_push_results (partition, client_id, client_commit_id, result) VALUES ('p', 'c', 'bad', 'not json')",
            [],
        )
        .unwrap();
    let err = storage.get_push_result("p", "c", "bad").unwrap_err();
    assert_eq!(err.code(), ErrorCode::IdempotencyCacheMiss);
    assert!(err.retryable());
    storage.declare_checkpoint("p", "cp", 1, NOW).unwrap();
    let epoch = storage
        .claim_checkpoint("p", "cp", 1, NOW)
        .unwrap()
        .owner_epoch;
    let mut tx = storage.begin("p").unwrap();
    assert_eq!(
        tx.get_push_result("c", "bad").unwrap_err().code(),
        ErrorCode::IdempotencyCacheMiss
    );
    // validation (negative watermark) does not poison
    assert_eq!(
        tx.advance_checkpoint("cp", epoch, -1, 0, NOW)
            .unwrap_err()
            .code(),
        ErrorCode::CheckpointWatermarkInvalid
    );
    // a watermark ahead of the log is found by a statement: poisoned
    let err = tx.advance_checkpoint("cp", epoch, 5, 0, NOW).unwrap_err();
    assert_eq!(err.get_detail("reason"), Some("ahead_of_log"));
    assert_eq!(
        tx.max_commit_seq().unwrap_err().code(),
        ErrorCode::TransactionAborted
    );
    tx.rollback().unwrap();
}

#[test]
fn in_memory_databases_are_refused() {
    for path in ["", ":memory:", "file::memory:?cache=shared"] {
        let err = sync_sqlite::SqliteStorage::open(path, sync_sqlite::SqliteConfig::default())
            .unwrap_err();
        assert_eq!(err.code(), ErrorCode::InvalidArgument, "{path}");
    }
}
