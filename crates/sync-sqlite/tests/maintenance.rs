//! Horizon and pruning, the partition registry and client records.

mod common;

use common::*;
use sync_core::{
    ClientRecord, ClientSubscription, CommitPruneQuery, CommitWindowQuery, ErrorCode, NewChange,
    ServerStorage,
};

fn prune(
    storage: &dyn ServerStorage,
    epoch: &str,
    through: i64,
) -> sync_core::Result<sync_core::CommitPruneResult> {
    storage.prune_commits_through(
        "p",
        &CommitPruneQuery {
            log_epoch: epoch.into(),
            through_seq: through,
        },
    )
}

#[test]
fn prune_is_epoch_fenced_monotonic_and_keeps_state() {
    let db = Db::new();
    let storage = db.ready();
    assert_eq!(storage.get_horizon_seq("p").unwrap(), 0);
    assert_eq!(
        prune(&storage, "e1", 2).unwrap_err().code(),
        ErrorCode::PruneEpochMismatch
    );
    storage.touch_partition("p", NOW, "e1").unwrap();
    for i in 1..=5 {
        let mut tx = storage.begin("p").unwrap();
        let change = if i == 2 {
            NewChange::delete("tasks", "gone", scopes(&[("project_id", "p1")]))
        } else {
            upsert_change(&task_row(&format!("t{i}"), "p1", &format!("x{i}")))
        };
        tx.append_commit(&commit_of("c", &format!("{i}"), vec![change]))
            .unwrap();
        tx.put_push_result(
            "c",
            &format!("{i}"),
            &sync_core::StoredPushResult::applied(i),
        )
        .unwrap();
        tx.commit().unwrap();
    }
    let result = prune(&storage, "e1", 2).unwrap();
    assert_eq!(
        (
            result.previous_horizon_seq,
            result.horizon_seq,
            result.removed_commits
        ),
        (0, 2, 2)
    );
    let seqs: Vec<i64> = storage
        .read_commit_window(
            "p",
            &CommitWindowQuery {
                table: "tasks".into(),
                scope_filter: filter("project_id", &["p1"]),
                after_seq: 0,
                through_seq: 10,
                limit_changes: 10,
            },
        )
        .unwrap()
        .iter()
        .map(|c| c.commit_seq)
        .collect();
    assert_eq!(seqs, [3, 4, 5]);
    let mut tx = storage.begin("p").unwrap();
    assert_eq!(tx.get_tombstone_seq("tasks", "gone").unwrap(), None);
    tx.rollback().unwrap();
    storage.set_horizon_seq("p", 4).unwrap();
    let result = prune(&storage, "e1", 2).unwrap();
    assert_eq!(
        (
            result.previous_horizon_seq,
            result.horizon_seq,
            result.removed_commits
        ),
        (4, 4, 2)
    );
    storage.set_horizon_seq("p", 1).unwrap();
    assert_eq!(storage.get_horizon_seq("p").unwrap(), 4);
    assert_eq!(storage.get_max_commit_seq("p").unwrap(), 5);
    assert!(storage.get_push_result("p", "c", "1").unwrap().is_some());
    for bad in [
        ("", 1),
        ("e1", -1),
        ("e1", sync_core::limits::MAX_SAFE_INTEGER + 1),
    ] {
        assert_eq!(
            prune(&storage, bad.0, bad.1).unwrap_err().code(),
            ErrorCode::InvalidPruneCursor
        );
    }
    assert_eq!(
        storage.set_horizon_seq("p", -1).unwrap_err().code(),
        ErrorCode::InvalidArgument
    );
    storage
        .rotate_partition_log_epoch("p", "e2", NOW + 1)
        .unwrap();
    assert_eq!(
        prune(&storage, "e1", 5).unwrap_err().code(),
        ErrorCode::PruneEpochMismatch
    );
    let result = prune(&storage, "e2", 5).unwrap();
    assert_eq!(
        (
            result.previous_horizon_seq,
            result.horizon_seq,
            result.removed_commits
        ),
        (4, 5, 1)
    );
    assert_eq!(storage.get_commit_seq_before("p", NOW + 1).unwrap(), 0);
}

#[test]
fn commit_seq_before_is_strict() {
    let db = Db::new();
    let storage = db.ready();
    for (i, at) in [NOW, NOW + 100, NOW + 200].into_iter().enumerate() {
        let mut tx = storage.begin("p").unwrap();
        let mut commit = commit_of("c", &i.to_string(), vec![]);
        commit.created_at_ms = at;
        tx.append_commit(&commit).unwrap();
        tx.commit().unwrap();
    }
    assert_eq!(storage.get_commit_seq_before("p", NOW + 150).unwrap(), 2);
    assert_eq!(storage.get_commit_seq_before("p", NOW).unwrap(), 0);
    assert_eq!(storage.get_commit_seq_before("p", NOW + 100).unwrap(), 1);
}

#[test]
fn registry_touch_and_rotation() {
    let db = Db::new();
    let storage = db.open();
    assert!(storage.list_partitions().unwrap().is_empty());
    storage.touch_partition("b", NOW, "eb").unwrap();
    let first = storage.touch_partition("a", NOW, "e1").unwrap();
    assert!(!first.epoch_required);
    let second = storage.touch_partition("a", NOW + 5, "other").unwrap();
    assert_eq!(
        (second.log_epoch.as_str(), second.last_authenticated_at_ms),
        ("e1", NOW + 5)
    );
    assert_eq!(storage.list_partitions().unwrap(), ["a", "b"]);
    assert_eq!(
        storage.touch_partition("a", NOW, "").unwrap_err().code(),
        ErrorCode::InvalidLogEpoch
    );
    let record = ClientRecord {
        client_id: "c1".into(),
        actor_id: "u".into(),
        wire_version: 2,
        cursor: 3,
        updated_at_ms: NOW,
        subscriptions: vec![ClientSubscription {
            id: "s".into(),
            table: "tasks".into(),
            scopes: filter("project_id", &["p1"]),
        }],
    };
    storage.put_client_record("a", &record).unwrap();
    storage.put_client_record("b", &record).unwrap();
    let rotated = storage
        .rotate_partition_log_epoch("a", "e2", NOW + 9)
        .unwrap();
    assert!(rotated.epoch_required);
    assert_eq!(rotated.log_epoch, "e2");
    assert!(storage.get_client_record("a", "c1").unwrap().is_none());
    assert_eq!(storage.get_client_record("b", "c1").unwrap(), Some(record));
    assert_eq!(
        storage.get_partition_log_epoch("a").unwrap().as_deref(),
        Some("e2")
    );
    assert_eq!(
        storage.list_partition_registry().unwrap()[0].last_authenticated_at_ms,
        NOW + 9
    );
}

#[test]
fn client_cursors_are_guarded_and_monotonic() {
    let db = Db::new();
    let storage = db.open();
    storage.touch_partition("p", NOW, "e1").unwrap();
    let record = |id: &str, cursor: i64, at: i64| ClientRecord {
        client_id: id.into(),
        actor_id: "u".into(),
        wire_version: 1,
        cursor,
        updated_at_ms: at,
        subscriptions: vec![],
    };
    storage
        .put_client_record("p", &record("b", 5, NOW))
        .unwrap();
    storage
        .put_client_record("p", &record("a", -1, NOW - 100))
        .unwrap();
    assert!(storage
        .advance_client_cursor("p", "b", "u", "e1", 3, NOW + 1)
        .unwrap());
    let b = storage.get_client_record("p", "b").unwrap().unwrap();
    assert_eq!((b.cursor, b.updated_at_ms), (5, NOW + 1));
    assert!(!storage
        .advance_client_cursor("p", "b", "x", "e1", 9, NOW)
        .unwrap());
    assert!(!storage
        .advance_client_cursor("p", "b", "u", "e0", 9, NOW)
        .unwrap());
    assert!(!storage
        .advance_client_cursor("p", "zz", "u", "e1", 9, NOW)
        .unwrap());
    assert!(!storage.update_client_cursor("p", "zz", 9, NOW).unwrap());
    assert!(storage.update_client_cursor("p", "b", 8, NOW).unwrap());
    let cursors: Vec<(String, i64)> = storage
        .list_client_cursors("p")
        .unwrap()
        .into_iter()
        .map(|c| (c.client_id, c.cursor))
        .collect();
    assert_eq!(cursors, [("a".to_string(), -1), ("b".to_string(), 8)]);
    assert_eq!(
        storage
            .get_active_client_cursor_floor("p", NOW - 100)
            .unwrap(),
        Some(-1)
    );
    assert_eq!(
        storage
            .get_active_client_cursor_floor("p", NOW - 99)
            .unwrap(),
        Some(8)
    );
    assert_eq!(
        storage
            .get_active_client_cursor_floor("p", NOW + 2)
            .unwrap(),
        None
    );
    let listed: Vec<String> = storage
        .list_client_records("p")
        .unwrap()
        .into_iter()
        .map(|r| r.client_id)
        .collect();
    assert_eq!(listed, ["b", "a"]);
    assert_eq!(
        storage
            .put_client_record("p", &record("", 1, 1))
            .unwrap_err()
            .code(),
        ErrorCode::InvalidArgument
    );
}
