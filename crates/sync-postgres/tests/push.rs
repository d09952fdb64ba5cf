//! The push sequence, rejection finalization and the transaction state machine.

mod common;

use common::*;
use sync_core::{
    ErrorCode, NewReaction, PushOperationResult, PushStatus, RowScanQuery, ServerStorage,
    StoredPushResult,
};

#[test]
fn full_push_sequence_is_visible_after_commit_only() {
    let db = TestDb::new();
    let storage = ensured(&db);
    let schema = fix1();
    let row = task_row(&schema, "t1", "p1", "hello", 1);
    assert!(storage
        .get_push_result("acme", "c1", "cc1")
        .unwrap()
        .is_none());
    let mut tx = storage.begin("acme").unwrap();
    assert_eq!(tx.writer_version(), 1);
    tx.lock_partition_for_push().unwrap();
    tx.lock_partition_for_push().unwrap();
    let gate = tx.read_serve_gate(1).unwrap();
    assert_eq!(
        (
            gate.stored_schema_version,
            gate.log_epoch.clone(),
            gate.pending.len()
        ),
        (1, None, 0)
    );
    assert!(tx.get_push_result("c1", "cc1").unwrap().is_none());
    tx.upsert_row("tasks", &row, Some(0)).unwrap();
    assert_eq!(tx.get_row("tasks", "t1").unwrap().as_ref(), Some(&row));
    assert_eq!(
        storage.get_row("acme", "tasks", "t1").unwrap(),
        None,
        "pool reads see committed state only"
    );
    let seq = tx
        .append_commit(&commit("c1", "cc1", vec![upsert_change(&row, "tasks")]))
        .unwrap();
    assert_eq!(seq, 1);
    assert_eq!(tx.max_commit_seq().unwrap(), 1);
    tx.put_push_result("c1", "cc1", &StoredPushResult::applied(seq))
        .unwrap();
    tx.commit().unwrap();

    assert_eq!(
        storage.get_row("acme", "tasks", "t1").unwrap(),
        Some(row.clone())
    );
    assert_eq!(storage.get_max_commit_seq("acme").unwrap(), 1);
    assert_eq!(
        storage.get_push_result("acme", "c1", "cc1").unwrap(),
        Some(StoredPushResult::applied(1))
    );
    let scanned = storage
        .scan_rows(
            "acme",
            &RowScanQuery {
                table: "tasks".into(),
                scope_filter: filter("project_id", &["p1"]),
                after_row_id: None,
                limit: 10,
            },
        )
        .unwrap();
    assert_eq!(scanned, vec![row]);
    // A replay finds the stored result.
    assert_eq!(push(&storage, "acme", "c1", "cc1", &[]).unwrap(), 1);
    assert_eq!(storage.get_max_commit_seq("acme").unwrap(), 1);
}

#[test]
fn constraint_violation_is_finalized_as_a_rejection() {
    let db = TestDb::new();
    let storage = ensured(&db);
    let schema = fix1();
    push(
        &storage,
        "acme",
        "c1",
        "cc1",
        &[task_row(&schema, "t1", "p1", "same title", 1)],
    )
    .unwrap();

    let mut tx = storage.begin("acme").unwrap();
    tx.lock_partition_for_push().unwrap();
    tx.upsert_row("tasks", &task_row(&schema, "t9", "p1", "fine", 1), Some(0))
        .unwrap();
    let error = tx
        .upsert_row(
            "tasks",
            &task_row(&schema, "t2", "p1", "same title", 1),
            Some(2),
        )
        .unwrap_err();
    assert_eq!(error.code(), ErrorCode::ConstraintViolation);
    assert_eq!(error.op_index_value(), Some(2));
    let aborted = tx.get_row("tasks", "t1").unwrap_err();
    assert_eq!(aborted.code(), ErrorCode::TransactionAborted);
    let rejected = StoredPushResult {
        status: PushStatus::Rejected,
        commit_seq: None,
        recorded_at_ms: Some(NOW),
        cache_identity: Some("id".into()),
        results: vec![PushOperationResult::Error {
            op_index: 2,
            code: "sync.constraint_violation".into(),
            message: "unique".into(),
            retryable: false,
            details: None,
        }],
        actor_id: None,
    };
    tx.commit_rejected_push_result("c2", "cc2", &rejected)
        .unwrap();
    assert_eq!(
        storage.get_push_result("acme", "c2", "cc2").unwrap(),
        Some(rejected)
    );
    assert_eq!(storage.get_row("acme", "tasks", "t2").unwrap(), None);
    assert_eq!(
        storage.get_row("acme", "tasks", "t9").unwrap(),
        None,
        "writes after the lock are discarded"
    );
    assert_eq!(storage.get_max_commit_seq("acme").unwrap(), 1);
}

#[test]
fn validation_errors_do_not_poison_but_statement_errors_do() {
    let db = TestDb::new();
    let storage = ensured(&db);
    let schema = fix1();
    let mut tx = storage.begin("acme").unwrap();
    tx.lock_partition_for_push().unwrap();
    let row = task_row(&schema, "t1", "p1", "a", 1);
    assert_eq!(
        tx.upsert_row("nope", &row, None).unwrap_err().code(),
        ErrorCode::UnknownTable
    );
    let mut empty_id = row.clone();
    empty_id.row_id.clear();
    assert_eq!(
        tx.upsert_row("tasks", &empty_id, None).unwrap_err().code(),
        ErrorCode::InvalidRowId
    );
    let mut truncated = row.clone();
    truncated.payload.pop();
    assert_eq!(
        tx.upsert_row("tasks", &truncated, None).unwrap_err().code(),
        ErrorCode::CodecDecodeFailed
    );
    assert_eq!(
        tx.upsert_row("secrets", &truncated, None)
            .unwrap_err()
            .code(),
        ErrorCode::CodecDecodeFailed
    );
    let bad = sync_core::NewChange {
        payload: None,
        ..upsert_change(&row, "tasks")
    };
    assert_eq!(
        tx.append_commit(&commit("c", "x", vec![bad]))
            .unwrap_err()
            .code(),
        ErrorCode::InvalidChange
    );
    tx.upsert_row("tasks", &row, None).unwrap();
    let reaction = NewReaction {
        idempotency_key: "k".into(),
        kind: "mail".into(),
        version: 1,
        payload: serde_json::json!({"to": "x"}),
        source_client_id: "c".into(),
        source_client_commit_id: "cc".into(),
        source_commit_seq: 1,
        created_at_ms: NOW,
        max_attempts: 3,
    };
    tx.enqueue_reactions(std::slice::from_ref(&reaction))
        .unwrap();
    assert_eq!(
        tx.enqueue_reactions(&[reaction]).unwrap_err().code(),
        ErrorCode::DuplicateReaction
    );
    assert_eq!(
        tx.append_commit(&commit("c", "x", vec![]))
            .unwrap_err()
            .code(),
        ErrorCode::TransactionAborted
    );
    let finalize = StoredPushResult::applied(1);
    assert_eq!(
        tx.commit().unwrap_err().code(),
        ErrorCode::TransactionAborted
    );
    assert_eq!(storage.get_row("acme", "tasks", "t1").unwrap(), None);

    let mut tx = storage.begin("acme").unwrap();
    tx.upsert_row("tasks", &row, None).unwrap();
    assert_eq!(
        tx.commit_rejected_push_result("c", "cc", &finalize)
            .unwrap_err()
            .code(),
        ErrorCode::PushLockRequired
    );
    assert_eq!(storage.get_row("acme", "tasks", "t1").unwrap(), None);
    assert_eq!(storage.get_push_result("acme", "c", "cc").unwrap(), None);

    // Dropping a transaction rolls it back; the pool stays usable.
    {
        let mut tx = storage.begin("acme").unwrap();
        tx.upsert_row("tasks", &row, None).unwrap();
    }
    assert_eq!(storage.get_row("acme", "tasks", "t1").unwrap(), None);
    let mut tx = storage.begin("acme").unwrap();
    tx.upsert_row("tasks", &row, None).unwrap();
    tx.rollback().unwrap();
    push(&storage, "acme", "c", "ok", std::slice::from_ref(&row)).unwrap();
    assert_eq!(storage.get_row("acme", "tasks", "t1").unwrap(), Some(row));
}

#[test]
fn double_encoded_json_columns_are_read_as_their_document() {
    let db = TestDb::new();
    let storage = ensured(&db);
    let schema = fix1();
    push(
        &storage,
        "acme",
        "c1",
        "cc1",
        &[task_row(&schema, "t1", "p1", "a", 1)],
    )
    .unwrap();
    let mut raw = db.raw();
    raw.batch_execute(
        "UPDATE tasks SET \"_sync_scopes\" = to_jsonb('{\"project_id\":\"p1\"}'::text); \
         UPDATE sync_changes SET scopes = to_jsonb(scopes::text); \
         INSERT INTO sync_push_results VALUES ('acme', 'c9', 'cc9', to_jsonb('{\"status\":\"applied\",\"commitSeq\":7,\"results\":[]}'::text))",
    )
    .unwrap();
    let row = storage.get_row("acme", "tasks", "t1").unwrap().unwrap();
    assert_eq!(row.scopes, scopes(&[("project_id", "p1")]));
    let window = storage
        .read_commit_window(
            "acme",
            &sync_core::CommitWindowQuery {
                table: "tasks".into(),
                scope_filter: filter("project_id", &["p1"]),
                after_seq: 0,
                through_seq: 10,
                limit_changes: 10,
            },
        )
        .unwrap();
    assert_eq!(window[0].changes[0].scopes, scopes(&[("project_id", "p1")]));
    assert_eq!(
        storage.get_push_result("acme", "c9", "cc9").unwrap(),
        Some(StoredPushResult::applied(7))
    );
}

#[test]
fn commits_larger_than_one_statement_batch_are_written_whole() {
    let db = TestDb::new();
    let storage = ensured(&db);
    let schema = fix1();
    let changes: Vec<sync_core::NewChange> = (0..5000)
        .map(|i| {
            let row = task_row(&schema, &format!("t{i:05}"), &format!("p{}", i % 3), "x", 1);
            if i % 10 == 9 {
                sync_core::NewChange::delete("tasks", row.row_id, row.scopes)
            } else {
                upsert_change(&row, "tasks")
            }
        })
        .collect();
    let mut tx = storage.begin("acme").unwrap();
    tx.lock_partition_for_push().unwrap();
    assert_eq!(tx.append_commit(&commit("c", "huge", changes)).unwrap(), 1);
    tx.commit().unwrap();
    assert_eq!(db.count("SELECT count(*) FROM sync_changes"), 5000);
    assert_eq!(db.count("SELECT max(idx)::int8 FROM sync_changes"), 4999);
    assert_eq!(db.count("SELECT count(*) FROM sync_change_scopes"), 3);
    assert_eq!(db.count("SELECT count(*) FROM sync_tombstones"), 500);
    let meta = storage
        .list_commit_metadata(
            "acme",
            &sync_core::CommitMetadataQuery {
                after_seq: 0,
                before_seq: None,
                limit: 10,
                table: None,
            },
        )
        .unwrap();
    assert_eq!((meta.len(), meta[0].change_count), (1, 5000));
}
