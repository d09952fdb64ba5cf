//! The optional capability groups: reactions, blob references, the admin
//! surface and registered queries.

mod common;

use common::*;
use sync_core::{
    AuthoritativeQueryRequest, CheckpointDeclaration, CommitMetadataQuery, ErrorCode, NewReaction,
    ReactionClaimQuery, ReactionFailure, ReactionFailureUpdate, ReactionListQuery,
    ReactionPruneQuery, ReactionStatus, ScopeActivityQuery, ServeContext, ServerStorage, SqlValue,
};

fn reaction(key: &str, created: i64) -> NewReaction {
    NewReaction {
        idempotency_key: key.into(),
        kind: "email".into(),
        version: 1,
        payload: serde_json::json!({"to": "a@b"}),
        source_client_id: "c".into(),
        source_client_commit_id: "1".into(),
        source_commit_seq: 1,
        created_at_ms: created,
        max_attempts: 5,
    }
}

fn claim(storage: &dyn ServerStorage, owner: &str, now: i64, limit: i64) -> Vec<String> {
    storage
        .claim_reactions(
            "p",
            &ReactionClaimQuery {
                lease_owner: owner.into(),
                kinds: vec!["email".into()],
                now_ms: now,
                lease_duration_ms: 100,
                limit,
            },
        )
        .unwrap()
        .into_iter()
        .map(|r| r.idempotency_key)
        .collect()
}

#[test]
fn reactions_lifecycle() {
    let db = Db::new();
    let storage = db.ready();
    let mut tx = storage.begin("p").unwrap();
    tx.enqueue_reactions(&[reaction("k2", NOW + 1), reaction("k1", NOW)])
        .unwrap();
    tx.commit().unwrap();
    let mut tx = storage.begin("p").unwrap();
    assert_eq!(
        tx.enqueue_reactions(&[reaction("k1", NOW)])
            .unwrap_err()
            .code(),
        ErrorCode::DuplicateReaction
    );
    assert_eq!(
        tx.commit().unwrap_err().code(),
        ErrorCode::TransactionAborted
    );
    let stored = storage.get_reaction("p", "k1").unwrap().unwrap();
    assert_eq!(
        (stored.status, stored.attempts, stored.available_at_ms),
        (ReactionStatus::Pending, 0, NOW)
    );
    assert_eq!(stored.payload, serde_json::json!({"to": "a@b"}));
    assert!(claim(&storage, "w", NOW, 0).is_empty());
    assert_eq!(claim(&storage, "w1", NOW + 1, 10), ["k1", "k2"]);
    assert!(claim(&storage, "w2", NOW + 100, 10).is_empty());
    assert!(storage
        .extend_reaction_lease("p", "k1", "w1", NOW + 300)
        .unwrap());
    assert_eq!(claim(&storage, "w2", NOW + 101, 10), ["k2"]);
    assert!(!storage.complete_reaction("p", "k2", "w1", NOW).unwrap());
    assert!(storage
        .complete_reaction("p", "k2", "w2", NOW + 102)
        .unwrap());
    let failure = ReactionFailure {
        code: "smtp".into(),
        at_ms: NOW + 5,
        details: None,
    };
    assert!(storage
        .fail_reaction(
            "p",
            "k1",
            &ReactionFailureUpdate {
                lease_owner: "w1".into(),
                failure: failure.clone(),
                retry_at_ms: None
            }
        )
        .unwrap());
    let dead = storage.get_reaction("p", "k1").unwrap().unwrap();
    assert_eq!(
        (dead.status, dead.attempts, dead.last_failure),
        (ReactionStatus::DeadLetter, 1, Some(failure))
    );
    assert!(!storage.retry_reaction("p", "k2", NOW).unwrap());
    assert!(storage.retry_reaction("p", "k1", NOW + 7).unwrap());
    let retried = storage.get_reaction("p", "k1").unwrap().unwrap();
    assert_eq!(
        (retried.status, retried.attempts, retried.available_at_ms),
        (ReactionStatus::Pending, 0, NOW + 7)
    );
    let listed: Vec<String> = storage
        .list_reactions(
            "p",
            &ReactionListQuery {
                statuses: vec![],
                kinds: vec![],
                limit: 10,
            },
        )
        .unwrap()
        .into_iter()
        .map(|r| r.idempotency_key)
        .collect();
    assert_eq!(listed, ["k2", "k1"]);
    let completed = storage
        .list_reactions(
            "p",
            &ReactionListQuery {
                statuses: vec![ReactionStatus::Completed],
                kinds: vec!["email".into()],
                limit: 10,
            },
        )
        .unwrap();
    assert_eq!(completed.len(), 1);
    let pruned = storage
        .prune_reactions(
            "p",
            &ReactionPruneQuery {
                completed_before_ms: NOW + 103,
                dead_letter_before_ms: NOW + 103,
                limit: 10,
            },
        )
        .unwrap();
    assert_eq!((pruned.completed, pruned.dead_letter), (1, 0));
}

#[test]
fn blob_references_and_admin_views() {
    let db = Db::new();
    let storage = db.ready();
    push(
        &storage,
        "p",
        "c",
        "1",
        &[task_row("t1", "p1", "one"), task_row("t2", "p2", "two")],
    );
    let mut tx = storage.begin("p").unwrap();
    tx.set_blob_refs("tasks", "t2", &["b1".into(), "b1".into()])
        .unwrap();
    tx.set_blob_refs("tasks", "t1", &["b1".into(), "b0".into()])
        .unwrap();
    tx.commit().unwrap();
    let rows = storage.list_rows_referencing_blob("p", "b1").unwrap();
    assert_eq!(
        rows.iter().map(|r| r.row_id.as_str()).collect::<Vec<_>>(),
        ["t1", "t2"]
    );
    assert_eq!(rows[1].scopes, scopes(&[("project_id", "p2")]));
    assert_eq!(storage.list_referenced_blob_ids("p").unwrap(), ["b0", "b1"]);
    let mut tx = storage.begin("p").unwrap();
    tx.set_blob_refs("tasks", "t1", &[]).unwrap();
    tx.delete_row("tasks", "t2").unwrap();
    tx.commit().unwrap();
    assert!(storage.list_referenced_blob_ids("p").unwrap().is_empty());

    let meta = storage
        .list_commit_metadata(
            "p",
            &CommitMetadataQuery {
                after_seq: 0,
                before_seq: None,
                limit: 10,
                table: Some("tasks".into()),
            },
        )
        .unwrap();
    assert_eq!(
        (meta.len(), meta[0].change_count, meta[0].tables.clone()),
        (1, 2, vec!["tasks".to_string()])
    );
    assert!(storage
        .list_commit_metadata(
            "p",
            &CommitMetadataQuery {
                after_seq: 0,
                before_seq: None,
                limit: 10,
                table: Some("docs".into())
            }
        )
        .unwrap()
        .is_empty());
    let activity = storage
        .scope_activity(
            "p",
            &ScopeActivityQuery {
                variable: "project_id".into(),
                value: "p1".into(),
                limit: 10,
            },
        )
        .unwrap();
    assert_eq!(
        (
            activity.len(),
            activity[0].commit_seq,
            activity[0].change_count
        ),
        (1, 1, 2)
    );
    assert_eq!(
        storage
            .get_row_scopes("p", "tasks", "t1")
            .unwrap()
            .unwrap()
            .0,
        1
    );
    assert!(storage
        .get_row_scopes("p", "tasks", "zz")
        .unwrap()
        .is_none());
    assert_eq!(
        storage
            .get_row_scopes("p", "nope", "t1")
            .unwrap_err()
            .code(),
        ErrorCode::UnknownTable
    );
}

#[test]
fn registered_queries_read_one_partition_behind_the_gate() {
    let db = Db::new();
    let unready = db.open();
    let request = AuthoritativeQueryRequest {
        sql: "SELECT id, done, title FROM TASKS WHERE project_id = ? ORDER BY id".into(),
        params: vec![SqlValue::Text("proj".into())],
        tables: vec!["tasks".into()],
    };
    assert_eq!(
        unready
            .query_authoritative("part-1", &request, &ServeContext::default())
            .unwrap_err()
            .code(),
        ErrorCode::SchemaNotEnsured
    );
    let storage = db.ready();
    push(
        &storage,
        "part-1",
        "c",
        "1",
        &[task_row("t1", "proj", "one")],
    );
    push(
        &storage,
        "part-2",
        "c",
        "1",
        &[task_row("t9", "proj", "nine")],
    );
    let result = storage
        .query_authoritative("part-1", &request, &ServeContext::default())
        .unwrap();
    assert_eq!(result.columns, ["id", "done", "title"]);
    assert_eq!(
        result.rows,
        [vec![
            SqlValue::Text("t1".into()),
            SqlValue::Integer(0),
            SqlValue::Text("one".into())
        ]]
    );
    assert_eq!(result.max_commit_seq, 1);
    let bad = AuthoritativeQueryRequest {
        sql: "SELECT 1; SELECT 2".into(),
        ..request.clone()
    };
    let err = storage
        .query_authoritative("part-1", &bad, &ServeContext::default())
        .unwrap_err();
    assert_eq!(
        (err.code(), err.get_detail("reason")),
        (ErrorCode::QueryRejected, Some("multiple_statements"))
    );
    storage
        .declare_checkpoint("part-1", "q_v1", 1, NOW)
        .unwrap();
    let err = storage
        .query_authoritative("part-1", &request, &ServeContext::default())
        .unwrap_err();
    assert_eq!(
        (err.code(), err.get_detail("reason")),
        (ErrorCode::SchemaNotReady, Some("checkpoint_pending"))
    );
    let declared = ServeContext {
        declarations: vec![CheckpointDeclaration::new("part-1", "q_v1", 1)],
        expected_log_epoch: None,
    };
    storage
        .query_authoritative("part-1", &request, &declared)
        .unwrap();
    // the transaction-bound variant sees staged rows
    let mut tx = storage.begin("part-1").unwrap();
    tx.upsert_row("tasks", &task_row("t2", "proj", "two"), None)
        .unwrap();
    let staged = tx.query_authoritative(&request).unwrap();
    assert_eq!(staged.rows.len(), 2);
    tx.rollback().unwrap();
}
