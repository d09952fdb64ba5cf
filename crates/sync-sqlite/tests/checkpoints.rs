//! RFC 0007: declare, claim, advance, activate, coverage, fences and the serve gate.

mod common;

use common::*;
use sync_core::{
    ActivationOutcome, CheckpointDeclaration, CheckpointState, CommitPruneQuery, Coverage,
    ErrorCode, ServeContext, ServerStorage,
};

fn tables(names: &[&str]) -> Vec<String> {
    names.iter().map(|s| s.to_string()).collect()
}

/// Clears the database-wide fence (a database never bumped by fence-aware
/// code), with the barrier's guards lifted as only a fixture may.
fn clear_database_fence(raw: &rusqlite::Connection) {
    raw.execute_batch("BEGIN IMMEDIATE").unwrap();
    sync_sqlite::barrier_guards::without_guards(raw, || {
        raw.execute(
            "UPDATE sync_schema_meta SET required_writer_version = NULL",
            [],
        )
        .map_err(sync_core::Error::backend)
    })
    .unwrap();
    raw.execute_batch("COMMIT").unwrap();
}

#[test]
fn declare_claim_advance_activate() {
    let db = Db::new();
    let storage = db.ready();
    clear_database_fence(&db.raw());
    let declared = storage
        .declare_checkpoint("p1", "search_v1", 1, NOW)
        .unwrap();
    assert_eq!(
        (declared.state, declared.owner_epoch, declared.watermark),
        (CheckpointState::Declared, 0, 0)
    );
    assert_eq!(storage.required_writer_version("p1").unwrap(), Some(1));
    assert_eq!(storage.required_writer_version("p2").unwrap(), None);
    let err = storage.declare_checkpoint("p1", "x", 2, NOW).unwrap_err();
    assert_eq!(err.code(), ErrorCode::CheckpointDeclarationInvalid);
    assert_eq!(err.get_detail("reason"), Some("version_not_current"));
    assert_eq!(
        storage
            .declare_checkpoint("p1", &"n".repeat(129), 1, NOW)
            .unwrap_err()
            .code(),
        ErrorCode::InvalidArgument
    );
    // advance refuses a never-claimed row
    assert!(!storage
        .advance_checkpoint("p1", "search_v1", 0, 0, 0, NOW)
        .unwrap());
    let first = storage
        .claim_checkpoint("p1", "search_v1", 1, NOW + 1)
        .unwrap();
    let second = storage
        .claim_checkpoint("p1", "search_v1", 1, NOW + 2)
        .unwrap();
    assert_eq!((first.owner_epoch, second.owner_epoch), (1, 2));
    assert_eq!(second.state, CheckpointState::Backfilling);
    assert_eq!(
        storage
            .claim_checkpoint("p1", "absent", 1, NOW)
            .unwrap_err()
            .code(),
        ErrorCode::CheckpointNotDeclared
    );
    assert_eq!(
        storage
            .claim_checkpoint("p1", "search_v1", 3, NOW)
            .unwrap_err()
            .code(),
        ErrorCode::CheckpointVersionMismatch
    );
    assert_eq!(
        storage
            .claim_checkpoint("p1", "search_v1", 0, NOW)
            .unwrap_err()
            .code(),
        ErrorCode::InvalidArgument
    );
    assert!(!storage
        .advance_checkpoint("p1", "search_v1", 1, 0, 1, NOW)
        .unwrap());
    let declared_here = ServeContext {
        declarations: vec![CheckpointDeclaration::new("p1", "search_v1", 1)],
        expected_log_epoch: None,
    };
    push_as(
        &storage,
        &declared_here,
        "p1",
        "c",
        "1",
        &[task_row("t1", "proj", "one")],
    );
    assert!(storage
        .advance_checkpoint("p1", "search_v1", 2, 1, 10, NOW + 3)
        .unwrap());
    let code = |r: sync_core::Result<bool>| r.unwrap_err().get_detail("reason").map(str::to_owned);
    assert_eq!(
        code(storage.advance_checkpoint("p1", "search_v1", 2, 0, 1, NOW)).as_deref(),
        Some("regression")
    );
    assert_eq!(
        code(storage.advance_checkpoint("p1", "search_v1", 2, 9, 1, NOW)).as_deref(),
        Some("ahead_of_log")
    );
    assert_eq!(
        code(storage.advance_checkpoint("p1", "search_v1", 2, -1, 1, NOW)).as_deref(),
        Some("negative")
    );
    // a source write above the watermark makes activation stale
    let gate_ctx = ServeContext {
        declarations: vec![CheckpointDeclaration::new("p1", "search_v1", 1)],
        expected_log_epoch: None,
    };
    let gate = storage.read_serve_gate("p1", 1).unwrap();
    assert_eq!(gate.pending, ["search_v1"]);
    assert!(sync_core::serve_gate_refusal(&gate, 1, &ServeContext::default()).is_some());
    assert!(sync_core::serve_gate_refusal(&gate, 1, &gate_ctx).is_none());
    let mut tx = storage.begin("p1").unwrap();
    tx.upsert_row("tasks", &task_row("t2", "proj", "two"), None)
        .unwrap();
    tx.append_commit(&commit_of(
        "c",
        "2",
        vec![upsert_change(&task_row("t2", "proj", "two"))],
    ))
    .unwrap();
    tx.commit().unwrap();
    let sources = tables(&["tasks"]);
    assert_eq!(
        storage
            .activate_checkpoint("p1", "search_v1", 2, 1, &sources, NOW)
            .unwrap(),
        ActivationOutcome::Stale
    );
    assert_eq!(
        storage
            .activate_checkpoint("p1", "search_v1", 1, 2, &sources, NOW)
            .unwrap(),
        ActivationOutcome::Stale
    );
    assert_eq!(
        storage
            .activate_checkpoint("p1", "search_v1", 2, 2, &sources, NOW + 4)
            .unwrap(),
        ActivationOutcome::Activated
    );
    let row = storage.read_checkpoint("p1", "search_v1").unwrap().unwrap();
    assert_eq!(
        (
            row.state,
            row.watermark,
            row.observed_rows,
            row.updated_at_ms
        ),
        (CheckpointState::Activated, 2, 10, NOW + 4)
    );
    assert_eq!(
        storage
            .activate_checkpoint("p1", "search_v1", 2, 2, &sources, NOW)
            .unwrap(),
        ActivationOutcome::Stale
    );
    assert_eq!(
        storage
            .claim_checkpoint("p1", "search_v1", 1, NOW)
            .unwrap_err()
            .code(),
        ErrorCode::CheckpointNotDeclared
    );
    assert_eq!(
        storage
            .declare_checkpoint("p1", "search_v1", 1, NOW)
            .unwrap()
            .state,
        CheckpointState::Activated
    );
    assert!(storage.read_serve_gate("p1", 1).unwrap().pending.is_empty());
    assert_eq!(
        storage
            .activate_checkpoint("p1", "absent", 0, 0, &sources, NOW)
            .unwrap_err()
            .code(),
        ErrorCode::CheckpointNotDeclared
    );
    assert_eq!(
        storage
            .activate_checkpoint("p1", "search_v1", 0, 0, &tables(&["nope"]), NOW)
            .unwrap_err()
            .code(),
        ErrorCode::UnknownTable
    );
}

#[test]
fn fence_missing_and_unverifiable_activation() {
    let db = Db::new();
    let storage = db.ready();
    let raw = db.raw();
    clear_database_fence(&raw);
    raw.execute(
        "INSERT INTO sync_backfill_checkpoints (partition, name, schema_version, state, updated_at_ms) VALUES ('p1', 'a', 1, 'declared', 0)",
        [],
    )
    .unwrap();
    assert_eq!(
        storage
            .activate_checkpoint("p1", "a", 0, 0, &[], NOW)
            .unwrap_err()
            .code(),
        ErrorCode::CheckpointFenceMissing
    );
    raw.execute(
        "UPDATE sync_schema_meta SET required_writer_version = 1",
        [],
    )
    .unwrap();
    storage.touch_partition("p1", NOW, "e").unwrap();
    let declared_here = ServeContext {
        declarations: vec![CheckpointDeclaration::new("p1", "a", 1)],
        expected_log_epoch: None,
    };
    push_as(
        &storage,
        &declared_here,
        "p1",
        "c",
        "1",
        &[task_row("t1", "proj", "one")],
    );
    storage
        .prune_commits_through(
            "p1",
            &CommitPruneQuery {
                log_epoch: "e".into(),
                through_seq: 1,
            },
        )
        .unwrap();
    let sources = tables(&["tasks"]);
    assert_eq!(
        storage.has_source_changes_above("p1", &sources, 0).unwrap(),
        Coverage::Unverifiable
    );
    assert_eq!(
        storage.has_source_changes_above("p1", &sources, 1).unwrap(),
        Coverage::Clean
    );
    assert_eq!(
        storage.has_source_changes_above("p1", &[], 0).unwrap(),
        Coverage::Clean
    );
    assert_eq!(
        storage
            .activate_checkpoint("p1", "a", 0, 0, &sources, NOW)
            .unwrap(),
        ActivationOutcome::Unverifiable
    );
    assert_eq!(
        storage.read_checkpoint("p1", "a").unwrap().unwrap().state,
        CheckpointState::Declared
    );
    assert_eq!(
        storage
            .activate_checkpoint("p1", "a", 0, 1, &sources, NOW)
            .unwrap(),
        ActivationOutcome::Activated
    );
}

#[test]
fn coverage_listing_and_transaction_bound_checkpoints() {
    let db = Db::new();
    let storage = db.ready();
    push(
        &storage,
        "p1",
        "c1",
        "1",
        &[task_row("t1", "proj", "one"), task_row("t2", "proj", "two")],
    );
    let mut tx = storage.begin("p1").unwrap();
    let doc = sync_core::NewChange::delete("docs", "d1", scopes(&[("org_id", "o")]));
    tx.append_commit(&commit_of("c2", "2", vec![doc])).unwrap();
    tx.commit().unwrap();
    let tasks = tables(&["tasks", "tasks"]);
    assert_eq!(storage.source_coverage_seq("p1", &tasks).unwrap(), 1);
    assert_eq!(
        storage
            .source_coverage_seq("p1", &tables(&["tasks", "docs"]))
            .unwrap(),
        2
    );
    assert_eq!(storage.source_coverage_seq("p1", &[]).unwrap(), 0);
    assert_eq!(
        storage.has_source_changes_above("p1", &tasks, 1).unwrap(),
        Coverage::Clean
    );
    assert_eq!(
        storage.has_source_changes_above("p1", &tasks, 0).unwrap(),
        Coverage::Changed
    );
    let listed = storage
        .list_source_changes("p1", &tables(&["tasks", "docs"]), 0, 10)
        .unwrap();
    let keys: Vec<(i64, i64, &str)> = listed
        .iter()
        .map(|c| (c.commit_seq, c.idx, c.client_id.as_str()))
        .collect();
    assert_eq!(keys, [(1, 0, "c1"), (1, 1, "c1"), (2, 0, "c2")]);
    assert_eq!(
        storage
            .list_source_changes("p1", &tasks, 0, 1)
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        storage
            .list_source_changes("p1", &tasks, 0, 0)
            .unwrap_err()
            .code(),
        ErrorCode::InvalidLimit
    );
    assert_eq!(
        storage
            .list_source_changes("p1", &tables(&["sync_writer_fence"]), 0, 1)
            .unwrap_err()
            .code(),
        ErrorCode::UnknownTable
    );

    storage.declare_checkpoint("p1", "proj_v1", 1, NOW).unwrap();
    let epoch = storage
        .claim_checkpoint("p1", "proj_v1", 1, NOW)
        .unwrap()
        .owner_epoch;
    // superseded batch: the CAS fails inside the transaction and nothing commits
    let mut tx = storage.begin("p1").unwrap();
    tx.upsert_row("tasks", &task_row("t3", "proj", "three"), None)
        .unwrap();
    assert!(!tx
        .advance_checkpoint("proj_v1", epoch + 1, 2, 3, NOW)
        .unwrap());
    tx.rollback().unwrap();
    assert!(storage.get_row("p1", "tasks", "t3").unwrap().is_none());
    // own commit then activation inside the same transaction
    let mut tx = storage.begin("p1").unwrap();
    let row = task_row("t3", "proj", "three");
    tx.upsert_row("tasks", &row, None).unwrap();
    let seq = tx
        .append_commit(&commit_of("runner", "b1", vec![upsert_change(&row)]))
        .unwrap();
    assert!(tx
        .advance_checkpoint("proj_v1", epoch, seq, 3, NOW)
        .unwrap());
    assert_eq!(
        tx.has_source_changes_above(&tables(&["tasks"]), seq)
            .unwrap(),
        Coverage::Clean
    );
    assert_eq!(
        tx.list_source_changes(&tables(&["tasks"]), 2, 10)
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        tx.activate_checkpoint("proj_v1", epoch, seq, &tables(&["tasks"]), NOW)
            .unwrap(),
        ActivationOutcome::Activated
    );
    assert_eq!(
        tx.read_checkpoint("proj_v1").unwrap().unwrap().state,
        CheckpointState::Activated
    );
    tx.commit().unwrap();
    assert_eq!(storage.read_checkpoints("p1").unwrap().len(), 1);
    assert!(storage.list_pending_checkpoints(1).unwrap().is_empty());
    // an activated checkpoint refuses progress without an error
    let mut tx = storage.begin("p1").unwrap();
    assert!(!tx.advance_checkpoint("proj_v1", epoch, 0, 0, NOW).unwrap());
    tx.rollback().unwrap();
}

#[test]
fn serve_gate_reads_marker_epoch_and_partition_pending() {
    let db = Db::new();
    let storage = db.open();
    let gate = storage.read_serve_gate("A", 0).unwrap();
    assert_eq!(
        (
            gate.stored_schema_version,
            gate.log_epoch,
            gate.pending.len()
        ),
        (0, None, 0)
    );
    storage.ensure_schema(&fix1(), &Default::default()).unwrap();
    storage.touch_partition("A", NOW, "eA").unwrap();
    let other = db.open();
    other.declare_checkpoint("A", "b", 1, NOW).unwrap();
    other.declare_checkpoint("A", "a", 1, NOW).unwrap();
    let gate = storage.read_serve_gate("A", 1).unwrap();
    assert_eq!(gate.stored_schema_version, 1);
    assert_eq!(gate.log_epoch.as_deref(), Some("eA"));
    assert_eq!(gate.pending, ["a", "b"]);
    assert!(storage.read_serve_gate("B", 1).unwrap().pending.is_empty());
    assert!(storage.read_serve_gate("A", 2).unwrap().pending.is_empty());
    let keys = storage.list_pending_checkpoints(1).unwrap();
    assert_eq!(
        keys.iter().map(|k| k.name.as_str()).collect::<Vec<_>>(),
        ["a", "b"]
    );
    assert_eq!(
        storage.read_serve_gate("", 1).unwrap_err().code(),
        ErrorCode::InvalidPartition
    );
    let mut tx = storage.begin("A").unwrap();
    assert_eq!(tx.read_serve_gate(1).unwrap(), gate);
}
