//! Hooks in the push pipeline, paging and windows, against SQLite.

mod support;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use serde_json::json;
use sync_core::{ErrorCode, PushOperationResult, RejectionDetails, RowValue, ServerStorage};
use sync_engine::{
    BlobExistence, BlobStoreError, CandidateReader, CandidateScan, CommandWrite, CommitInput,
    CommitValidator, CrdtMerger, MergeError, Operation, PlanError, PullHeader, PushResultStatus,
    ReactionPlan, ReactionPlanner, Rejection, RequestContext, ResponseItem, RowValidator,
    ValidateContext, ValidateOperation, ValidationFailure,
};

use support::{commit, fixture, fixture_with, push_results, rejected_code, sub};

struct TitleLimit;

impl RowValidator for TitleLimit {
    fn validate(
        &self,
        op: &ValidateOperation,
        _: &ValidateContext,
    ) -> Result<(), ValidationFailure> {
        let long = matches!(op.row.as_ref().and_then(|r| r.get("title")),
            Some(RowValue::String(t)) if t.len() > 5);
        if long {
            let details = RejectionDetails {
                field_paths: Some(vec!["title".into()]),
                reason: Some("too_long".into()),
                ..Default::default()
            };
            let r = Rejection::new("task.too_long", "title too long", Some(details), None)
                .map_err(|e| ValidationFailure::Failed(Box::new(e)))?;
            return Err(r.into());
        }
        Ok(())
    }
}

#[test]
fn row_validator_rejection_is_persisted_with_details() {
    let f = fixture_with(|c| {
        c.row_validators
            .insert("tasks".into(), Arc::new(TitleLimit));
    });
    let c = commit(
        "k1",
        vec![
            Operation::upsert("tasks", "t1", None, f.task("t1", "p1", "ok")),
            Operation::upsert("tasks", "t2", None, f.task("t2", "p1", "much too long")),
        ],
    );
    let result = f.push("alice", c.clone());
    assert_eq!(result.status, PushResultStatus::Rejected);
    match &result.results[..] {
        [PushOperationResult::Error {
            op_index: 1,
            code,
            retryable: false,
            details: Some(d),
            ..
        }] => {
            assert_eq!(code, "task.too_long");
            assert_eq!(d.reason.as_deref(), Some("too_long"));
        }
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(f.storage.get_row("P", "tasks", "t1").expect("read"), None);
    assert_eq!(
        f.push("alice", c),
        result,
        "replay returns identical details"
    );
}

/// Rejects a commit that leaves more than one task in a project, reading
/// the staged state.
struct OneTaskPerProject {
    seen: Mutex<Vec<usize>>,
}

impl CommitValidator for OneTaskPerProject {
    fn validate(
        &self,
        input: &CommitInput,
        read: &mut dyn CandidateReader,
    ) -> Result<(), ValidationFailure> {
        let rows = read
            .scan_rows(&CandidateScan {
                table: "tasks".into(),
                scope_filter: [("project_id".to_owned(), vec!["p1".to_owned()])].into(),
                after_row_id: None,
                limit: None,
            })
            .map_err(|e| ValidationFailure::Failed(Box::new(e)))?;
        self.seen.lock().expect("lock").push(rows.len());
        if rows.len() > 1 {
            let r = Rejection::new("project.full", "one task only", None, Some(1))
                .map_err(|e| ValidationFailure::Failed(Box::new(e)))?;
            return Err(r.into());
        }
        let _ = input;
        Ok(())
    }
}

#[test]
fn commit_validator_sees_staged_rows() {
    let validator = Arc::new(OneTaskPerProject {
        seen: Mutex::new(vec![]),
    });
    let v = validator.clone();
    let f = fixture_with(move |c| c.commit_validator = Some(v));
    let result = f.push(
        "alice",
        commit(
            "k1",
            vec![
                Operation::upsert("tasks", "t1", None, f.task("t1", "p1", "a")),
                Operation::upsert("tasks", "t2", None, f.task("t2", "p1", "b")),
            ],
        ),
    );
    assert_eq!(rejected_code(&result), (1, "project.full".into()));
    assert_eq!(*validator.seen.lock().expect("lock"), vec![2]);
    assert_eq!(f.storage.get_max_commit_seq("P").expect("max"), 0);
}

#[test]
fn unique_violation_is_a_persisted_constraint_rejection() {
    let f = fixture();
    let result = f.push(
        "alice",
        commit(
            "k1",
            vec![
                Operation::upsert("tasks", "t1", None, f.task("t1", "p1", "same")),
                Operation::upsert("tasks", "t2", None, f.task("t2", "p1", "same")),
            ],
        ),
    );
    assert_eq!(
        rejected_code(&result),
        (1, "sync.constraint_violation".into())
    );
    assert!(f
        .storage
        .get_push_result("P", "alice-c", "k1")
        .expect("read")
        .is_some());
    assert_eq!(f.storage.get_row("P", "tasks", "t1").expect("read"), None);
}

struct Union;

impl CrdtMerger for Union {
    fn merge(&self, stored: Option<&[u8]>, incoming: &[u8]) -> Result<Vec<u8>, MergeError> {
        let set: BTreeSet<u8> = stored
            .unwrap_or_default()
            .iter()
            .chain(incoming)
            .copied()
            .collect();
        Ok(set.into_iter().collect())
    }
}

#[test]
fn crdt_columns_merge_and_unregistered_types_fail() {
    let f = fixture_with(|c| c.mergers.register("union", Arc::new(Union)));
    f.push(
        "alice",
        commit(
            "k1",
            vec![Operation::upsert(
                "notes",
                "n1",
                None,
                f.note("n1", "p1", &[1, 3]),
            )],
        ),
    );
    let r = f.push(
        "alice",
        commit(
            "k2",
            vec![Operation::upsert(
                "notes",
                "n1",
                None,
                f.note("n1", "p1", &[2, 3]),
            )],
        ),
    );
    assert_eq!(r.status, PushResultStatus::Applied);
    let row = f
        .storage
        .get_row("P", "notes", "n1")
        .expect("read")
        .expect("row");
    assert_eq!(row.server_version, 2);
    assert_eq!(
        f.decode("notes", &row.payload)[2],
        RowValue::Crdt(vec![1, 2, 3])
    );

    let bare = fixture();
    let r = bare.push(
        "alice",
        commit(
            "k1",
            vec![Operation::upsert(
                "notes",
                "n1",
                None,
                bare.note("n1", "p1", &[1]),
            )],
        ),
    );
    assert_eq!(rejected_code(&r), (0, "sync.crdt_merge_failed".into()));
}

struct Holds(&'static str);

impl BlobExistence for Holds {
    fn exists(&self, _: &str, blob_id: &str) -> Result<bool, BlobStoreError> {
        Ok(blob_id == self.0)
    }
}

#[test]
fn blob_references_are_checked_and_indexed() {
    let f = fixture_with(|c| c.blobs = Some(Arc::new(Holds("b1"))));
    let missing = f.push(
        "alice",
        commit(
            "k1",
            vec![Operation::upsert(
                "tasks",
                "t1",
                None,
                f.task_with("t1", "p1", "a", Some("b9")),
            )],
        ),
    );
    assert_eq!(rejected_code(&missing), (0, "blob.not_found".into()));
    let ok = f.push(
        "alice",
        commit(
            "k2",
            vec![Operation::upsert(
                "tasks",
                "t1",
                None,
                f.task_with("t1", "p1", "a", Some("b1")),
            )],
        ),
    );
    assert_eq!(ok.status, PushResultStatus::Applied);
    let refs = f
        .storage
        .list_rows_referencing_blob("P", "b1")
        .expect("refs");
    assert_eq!(refs.len(), 1);
    f.push(
        "alice",
        commit(
            "k3",
            vec![Operation::upsert(
                "tasks",
                "t1",
                None,
                f.task("t1", "p1", "a"),
            )],
        ),
    );
    assert!(f
        .storage
        .list_rows_referencing_blob("P", "b1")
        .expect("refs")
        .is_empty());
}

struct TwoReactions;

impl ReactionPlanner for TwoReactions {
    fn plan(
        &self,
        _: &CommitInput,
        _: &mut dyn CandidateReader,
    ) -> Result<Vec<ReactionPlan>, PlanError> {
        Ok(["a", "b"]
            .iter()
            .map(|k| ReactionPlan {
                key: (*k).into(),
                kind: "notify".into(),
                version: 1,
                payload: json!({"k": k}),
                max_attempts: None,
            })
            .collect())
    }
}

#[test]
fn planned_reactions_are_enqueued_with_the_commit() {
    let f = fixture_with(|c| c.reaction_planner = Some(Arc::new(TwoReactions)));
    let r = f.push(
        "alice",
        commit(
            "k1",
            vec![Operation::upsert(
                "tasks",
                "t1",
                None,
                f.task("t1", "p1", "a"),
            )],
        ),
    );
    assert_eq!(r.commit_seq, Some(1));
    let key = json!(["P", "alice-c", "k1", "a"]).to_string();
    let stored = f
        .storage
        .get_reaction("P", &key)
        .expect("read")
        .expect("reaction");
    assert_eq!(stored.source_commit_seq, 1);
}

#[test]
fn deletes_reach_incremental_pulls_with_scopes() {
    let f = fixture();
    f.push(
        "alice",
        commit(
            "k1",
            vec![Operation::upsert(
                "tasks",
                "t1",
                None,
                f.task("t1", "p1", "a"),
            )],
        ),
    );
    f.push(
        "alice",
        commit("k2", vec![Operation::delete("tasks", "t1")]),
    );
    let items = f.round(
        "alice",
        &f.request("c", vec![], vec![sub("tasks", "p1", 1)]),
    );
    let change = items
        .iter()
        .find_map(|i| match i {
            ResponseItem::Commit(c) => Some(c.changes[0].clone()),
            _ => None,
        })
        .expect("a commit");
    assert_eq!(change.op, sync_engine::OpKind::Delete);
    assert_eq!((change.row_version, change.row), (None, None));
    assert_eq!(change.scopes["project_id"], "p1");
}

#[test]
fn bootstrap_pages_resume_from_the_token() {
    let f = fixture();
    let ops = (0..25)
        .map(|i| {
            let id = format!("t{i:02}");
            Operation::upsert("tasks", id.clone(), None, f.task(&id, "p1", &id))
        })
        .collect();
    f.push("alice", commit("k1", ops));
    let mut req = f.request("c", vec![], vec![sub("tasks", "p1", -1)]);
    req.pull = Some(PullHeader {
        limit_snapshot_rows: 10,
        max_snapshot_pages: 2,
        ..PullHeader::default()
    });
    let items = f.round("alice", &req);
    let pages: Vec<_> = items
        .iter()
        .filter_map(|i| match i {
            ResponseItem::BootstrapPage(p) => Some(p.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(pages.len(), 2);
    assert_eq!(pages[1].rows.last().map(|r| r.row_id.as_str()), Some("t19"));
    let end = items
        .iter()
        .find_map(|i| match i {
            ResponseItem::SubEnd(e) => Some(e.clone()),
            _ => None,
        })
        .expect("sub end");
    assert_eq!(end.next_cursor, 1);
    assert_eq!(
        end.bootstrap_state.as_deref(),
        Some(r#"{"asOfCommitSeq":1,"tables":["tasks"],"tableIndex":0,"rowCursor":"t19"}"#)
    );
    req.subscriptions[0].cursor = end.next_cursor;
    req.subscriptions[0].bootstrap_state = end.bootstrap_state;
    let items = f.round("alice", &req);
    let rows: Vec<_> = items
        .iter()
        .filter_map(|i| match i {
            ResponseItem::BootstrapPage(p) => Some(p.rows.len()),
            _ => None,
        })
        .collect();
    assert_eq!(rows, vec![5]);
    assert!(items
        .iter()
        .any(|i| matches!(i, ResponseItem::SubEnd(e) if e.bootstrap_state.is_none())));
}

#[test]
fn windows_never_split_commits_and_cursor_follows_delivery() {
    let f = fixture();
    for i in 0..4 {
        let id = format!("t{i}");
        f.push(
            "alice",
            commit(
                &format!("k{i}"),
                vec![Operation::upsert(
                    "tasks",
                    id.clone(),
                    None,
                    f.task(&id, "p1", &id),
                )],
            ),
        );
    }
    let mut req = f.request("c", vec![], vec![sub("tasks", "p1", 0)]);
    req.pull = Some(PullHeader {
        limit_commits: 3,
        ..PullHeader::default()
    });
    let items = f.round("alice", &req);
    let seqs: Vec<_> = items
        .iter()
        .filter_map(|i| match i {
            ResponseItem::Commit(c) => Some(c.commit_seq),
            _ => None,
        })
        .collect();
    assert_eq!(seqs, vec![1, 2, 3]);
    assert!(items
        .iter()
        .any(|i| matches!(i, ResponseItem::SubEnd(e) if e.next_cursor == 3)));
}

#[test]
fn entry_errors_are_request_level_before_any_item() {
    let f = fixture();
    let mut req = f.request(
        "c",
        vec![],
        vec![sub("tasks", "p1", -1), sub("tasks", "p1", -1)],
    );
    let err = f.handle("alice", &req).expect_err("duplicate ids");
    assert_eq!(
        err.wire().map(|w| w.code.as_str()),
        Some("sync.invalid_subscription")
    );
    req.subscriptions.truncate(1);
    req.subscriptions[0].table = "nope".into();
    let err = f.handle("alice", &req).expect_err("unknown table");
    assert_eq!(
        err.wire().map(|w| (w.code.as_str(), w.http_status)),
        Some(("sync.unknown_table", 400))
    );
    f.round(
        "alice",
        &f.request("shared", vec![], vec![sub("tasks", "p1", -1)]),
    );
    let err = f
        .handle(
            "bob",
            &f.request("shared", vec![], vec![sub("tasks", "p2", -1)]),
        )
        .expect_err("foreign client");
    assert_eq!(
        err.wire().map(|w| w.code.as_str()),
        Some("sync.invalid_client_id")
    );
}

#[test]
fn commands_build_under_the_lock_and_replay_without_the_builder() {
    let f = fixture();
    f.push(
        "alice",
        commit(
            "k1",
            vec![Operation::upsert(
                "tasks",
                "t1",
                None,
                f.task("t1", "p1", "a"),
            )],
        ),
    );
    let ctx = RequestContext::new("P", "alice");
    let mut calls = 0;
    let run = |calls: &mut i32| {
        f.engine
            .apply_command(&ctx, "dev", "copy", "r1", |reader| {
                *calls += 1;
                let source = reader
                    .get_row("tasks", "t1")
                    .map_err(|_| sync_engine::WireError::new("operation.execution_failed", "read"))?
                    .expect("t1");
                let mut row = source.values.clone();
                row.insert("id".into(), RowValue::String("t2".into()));
                row.insert("title".into(), RowValue::String("copy".into()));
                Ok(vec![CommandWrite::Upsert {
                    table: "tasks".into(),
                    row,
                    base_version: None,
                }])
            })
            .expect("command")
    };
    let first = run(&mut calls);
    assert_eq!(first.result.status, PushResultStatus::Applied);
    let cid = json!(["remote-command", "alice", "dev"]).to_string();
    assert!(f
        .storage
        .get_push_result("P", &cid, r#"["copy","r1"]"#)
        .expect("read")
        .is_some());
    let again = run(&mut calls);
    assert_eq!(again.result.status, PushResultStatus::Cached);
    assert_eq!(calls, 1);
    assert!(f
        .storage
        .get_row("P", "tasks", "t2")
        .expect("read")
        .is_some());
}

#[test]
fn acknowledge_and_prune_wrap_storage() {
    let f = fixture();
    f.push(
        "alice",
        commit(
            "k1",
            vec![Operation::upsert(
                "tasks",
                "t1",
                None,
                f.task("t1", "p1", "a"),
            )],
        ),
    );
    f.round(
        "alice",
        &f.request("c", vec![], vec![sub("tasks", "p1", -1)]),
    );
    let ctx = RequestContext::new("P", "alice");
    let epoch = f.epoch().expect("epoch");
    assert!(f.engine.acknowledge(&ctx, "c", &epoch, 1).expect("ack"));
    assert!(!f
        .engine
        .acknowledge(&RequestContext::new("P", "bob"), "c", &epoch, 1)
        .expect("ack"));
    let err = f.engine.prune("Q", support::NOW).expect_err("unregistered");
    assert_eq!(err.code(), ErrorCode::PartitionUnregistered);
    assert!(f.engine.prune("P", support::NOW).is_ok());
    let _ = push_results(&[]);
}
