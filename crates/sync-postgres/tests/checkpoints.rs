//! RFC 0007 checkpoints: declare, claim, advance, activate (pool and transaction).

mod common;

use common::*;
use sync_core::{
    ActivationOutcome, CheckpointDeclaration, CheckpointState, Coverage, ErrorCode, ServeContext,
    ServerStorage,
};

#[test]
fn checkpoint_lifecycle_and_coverage() {
    let db = TestDb::new();
    let storage = ensured(&db);
    let schema = fix1();
    let tasks = vec!["tasks".to_owned()];
    let declared = storage
        .declare_checkpoint("acme", "search_v1", 1, NOW)
        .unwrap();
    assert_eq!(
        (declared.state, declared.owner_epoch, declared.watermark),
        (CheckpointState::Declared, 0, 0)
    );
    assert_eq!(
        storage
            .declare_checkpoint("acme", "other", 2, NOW)
            .unwrap_err()
            .code(),
        ErrorCode::CheckpointDeclarationInvalid
    );
    assert_eq!(
        storage.read_serve_gate("acme", 1).unwrap().pending,
        vec!["search_v1".to_owned()]
    );
    assert!(storage
        .read_serve_gate("other", 1)
        .unwrap()
        .pending
        .is_empty());

    let first = storage
        .claim_checkpoint("acme", "search_v1", 1, NOW)
        .unwrap();
    let second = storage
        .claim_checkpoint("acme", "search_v1", 1, NOW)
        .unwrap();
    assert_eq!((first.owner_epoch, second.owner_epoch), (1, 2));
    assert_eq!(
        storage
            .claim_checkpoint("acme", "absent", 1, NOW)
            .unwrap_err()
            .code(),
        ErrorCode::CheckpointNotDeclared
    );
    assert!(
        !storage
            .advance_checkpoint("acme", "search_v1", 1, 0, 10, NOW)
            .unwrap(),
        "superseded owner"
    );

    let ctx = ServeContext {
        declarations: vec![CheckpointDeclaration::new("acme", "search_v1", 1)],
        expected_log_epoch: None,
    };
    assert_eq!(
        push(&storage, "acme", "c", "0", &[])
            .unwrap_err()
            .get_detail("reason"),
        Some("checkpoint_pending"),
        "an undeclared process may not serve the partition"
    );
    push_with(
        &storage,
        &ctx,
        "acme",
        "c",
        "1",
        &[task_row(&schema, "t1", "p1", "a", 1)],
    )
    .unwrap();
    assert!(storage
        .advance_checkpoint("acme", "search_v1", 2, 1, 1, NOW + 1)
        .unwrap());
    assert_eq!(
        storage
            .advance_checkpoint("acme", "search_v1", 2, 0, 1, NOW)
            .unwrap_err()
            .code(),
        ErrorCode::CheckpointWatermarkInvalid
    );
    assert_eq!(
        storage
            .advance_checkpoint("acme", "search_v1", 2, 9, 1, NOW)
            .unwrap_err()
            .get_detail("reason"),
        Some("ahead_of_log")
    );
    assert_eq!(storage.source_coverage_seq("acme", &tasks).unwrap(), 1);
    assert_eq!(
        storage.has_source_changes_above("acme", &tasks, 0).unwrap(),
        Coverage::Changed
    );
    assert_eq!(
        storage.has_source_changes_above("acme", &tasks, 1).unwrap(),
        Coverage::Clean
    );

    // A source write after the watermark makes activation stale.
    push_with(
        &storage,
        &ctx,
        "acme",
        "c",
        "2",
        &[task_row(&schema, "t2", "p1", "b", 1)],
    )
    .unwrap();
    assert_eq!(
        storage
            .activate_checkpoint("acme", "search_v1", 2, 1, &tasks, NOW)
            .unwrap(),
        ActivationOutcome::Stale
    );
    // Inside a push transaction: seal at the transaction's own commit.
    let mut tx = storage.begin("acme").unwrap();
    tx.lock_partition_for_push().unwrap();
    let row = task_row(&schema, "t3", "p1", "c", 1);
    tx.upsert_row("tasks", &row, None).unwrap();
    let seq = tx
        .append_commit(&commit("c", "3", vec![upsert_change(&row, "tasks")]))
        .unwrap();
    assert!(tx.advance_checkpoint("search_v1", 2, seq, 3, NOW).unwrap());
    assert_eq!(
        tx.activate_checkpoint("search_v1", 2, seq, &tasks, NOW)
            .unwrap(),
        ActivationOutcome::Activated
    );
    tx.commit().unwrap();
    let stored = storage
        .read_checkpoint("acme", "search_v1")
        .unwrap()
        .unwrap();
    assert_eq!(
        (stored.state, stored.watermark, stored.observed_rows),
        (CheckpointState::Activated, 3, 3)
    );
    assert!(storage.list_pending_checkpoints(1).unwrap().is_empty());
    assert_eq!(
        storage
            .activate_checkpoint("acme", "search_v1", 2, 3, &tasks, NOW)
            .unwrap(),
        ActivationOutcome::Stale
    );
    assert_eq!(storage.required_writer_version("acme").unwrap(), Some(1));
    assert_eq!(
        storage
            .activate_checkpoint("acme", "nope", 0, 0, &["nope".to_owned()], NOW)
            .unwrap_err()
            .code(),
        ErrorCode::UnknownTable
    );
}
