//! Epoch-fenced, monotonic pruning of the commit log.

mod common;

use common::*;
use sync_core::{CommitPruneQuery, ErrorCode, NewChange, ServerStorage};

#[test]
fn prune_is_epoch_fenced_monotonic_and_keeps_later_tombstones() {
    let db = TestDb::new();
    let storage = ensured(&db);
    let schema = fix1();
    let epoch = storage
        .touch_partition("acme", NOW, "e1")
        .unwrap()
        .log_epoch;
    for i in 1..=5 {
        let row = task_row(&schema, &format!("t{i}"), "p1", &format!("title {i}"), 1);
        let mut tx = storage.begin("acme").unwrap();
        tx.lock_partition_for_push().unwrap();
        let changes = vec![NewChange::delete(
            "tasks",
            row.row_id.clone(),
            row.scopes.clone(),
        )];
        tx.append_commit(&commit("c", &format!("cc{i}"), changes))
            .unwrap();
        tx.commit().unwrap();
    }
    let result = storage
        .prune_commits_through(
            "acme",
            &CommitPruneQuery {
                log_epoch: epoch.clone(),
                through_seq: 2,
            },
        )
        .unwrap();
    assert_eq!(
        (
            result.previous_horizon_seq,
            result.horizon_seq,
            result.removed_commits
        ),
        (0, 2, 2)
    );
    assert_eq!(storage.get_horizon_seq("acme").unwrap(), 2);
    assert_eq!(storage.get_max_commit_seq("acme").unwrap(), 5);
    assert_eq!(db.count("SELECT count(*) FROM sync_tombstones"), 3);
    assert_eq!(db.count("SELECT count(*) FROM sync_change_scopes"), 3);
    let mut tx = storage.begin("acme").unwrap();
    assert_eq!(tx.get_tombstone_seq("tasks", "t1").unwrap(), None);
    assert_eq!(tx.get_tombstone_seq("tasks", "t4").unwrap(), Some(4));
    tx.rollback().unwrap();

    let lower = storage
        .prune_commits_through(
            "acme",
            &CommitPruneQuery {
                log_epoch: epoch.clone(),
                through_seq: 1,
            },
        )
        .unwrap();
    assert_eq!(
        (
            lower.previous_horizon_seq,
            lower.horizon_seq,
            lower.removed_commits
        ),
        (2, 2, 0)
    );
    storage.set_horizon_seq("acme", 1).unwrap();
    assert_eq!(storage.get_horizon_seq("acme").unwrap(), 2);
    assert_eq!(
        storage.set_horizon_seq("acme", -1).unwrap_err().code(),
        ErrorCode::InvalidArgument
    );

    storage
        .rotate_partition_log_epoch("acme", "e2", NOW + 1)
        .unwrap();
    let stale = storage
        .prune_commits_through(
            "acme",
            &CommitPruneQuery {
                log_epoch: epoch,
                through_seq: 5,
            },
        )
        .unwrap_err();
    assert_eq!(stale.code(), ErrorCode::PruneEpochMismatch);
    assert_eq!(storage.get_horizon_seq("acme").unwrap(), 2);
    let all = storage
        .prune_commits_through(
            "acme",
            &CommitPruneQuery {
                log_epoch: "e2".into(),
                through_seq: 5,
            },
        )
        .unwrap();
    assert_eq!(
        (
            all.previous_horizon_seq,
            all.horizon_seq,
            all.removed_commits
        ),
        (2, 5, 3)
    );
    assert_eq!(
        storage
            .prune_commits_through(
                "nobody",
                &CommitPruneQuery {
                    log_epoch: "e".into(),
                    through_seq: 1
                }
            )
            .unwrap_err()
            .code(),
        ErrorCode::PruneEpochMismatch
    );
    assert_eq!(
        storage
            .prune_commits_through(
                "acme",
                &CommitPruneQuery {
                    log_epoch: String::new(),
                    through_seq: 1
                }
            )
            .unwrap_err()
            .code(),
        ErrorCode::InvalidPruneCursor
    );
}
