//! Dense allocation under concurrent pushes; partitions never contend; a
//! held partition lock blocks (or times out) only pushes of that partition.

mod common;

use std::collections::BTreeSet;
use std::sync::mpsc;
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use common::*;
use sync_core::{CommitMetadataQuery, ErrorCode, ServerStorage};
use sync_postgres::PostgresConfig;

#[test]
fn concurrent_pushes_to_one_partition_get_dense_sequences() {
    let db = TestDb::new();
    let storage = Arc::new(ensured(&db));
    let schema = Arc::new(fix1());
    let threads = 4;
    let per_thread = 25;
    let barrier = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (storage, schema, barrier) = (storage.clone(), schema.clone(), barrier.clone());
            thread::spawn(move || {
                barrier.wait();
                (0..per_thread)
                    .map(|i| {
                        let id = format!("t{t}-{i}");
                        let row = task_row(&schema, &id, "p1", &id, 1);
                        push(
                            storage.as_ref(),
                            "shared",
                            &format!("c{t}"),
                            &format!("cc{i}"),
                            &[row],
                        )
                        .unwrap()
                    })
                    .collect::<Vec<i64>>()
            })
        })
        .collect();
    let mut seqs: Vec<i64> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    seqs.sort_unstable();
    let total = (threads * per_thread) as i64;
    assert_eq!(seqs, (1..=total).collect::<Vec<_>>());
    assert_eq!(storage.get_max_commit_seq("shared").unwrap(), total);
    let meta = storage
        .list_commit_metadata(
            "shared",
            &CommitMetadataQuery {
                after_seq: 0,
                before_seq: None,
                limit: 1000,
                table: None,
            },
        )
        .unwrap();
    let listed: BTreeSet<i64> = meta.iter().map(|m| m.commit_seq).collect();
    assert_eq!(listed, (1..=total).collect());
}

#[test]
fn a_held_partition_lock_does_not_block_other_partitions() {
    let db = TestDb::new();
    let storage = ensured(&db);
    let schema = fix1();
    let mut held = storage.begin("p1").unwrap();
    held.lock_partition_for_push().unwrap();
    held.append_commit(&commit("a", "held", vec![])).unwrap();
    let (done_tx, done_rx) = mpsc::channel();
    thread::scope(|scope| {
        let storage = &storage;
        let schema = &schema;
        scope.spawn(move || {
            let row = task_row(schema, "t1", "x", "other partition", 1);
            let _ = done_tx.send(push(storage, "p2", "b", "free", &[row]));
        });
        let result = done_rx
            .recv_timeout(Duration::from_secs(30))
            .expect("a push to p2 must not wait for p1's lock");
        assert_eq!(result.unwrap(), 1);
        held.commit().unwrap();
    });
    assert_eq!(storage.get_max_commit_seq("p1").unwrap(), 1);
    assert_eq!(storage.get_max_commit_seq("p2").unwrap(), 1);
}

#[test]
fn a_second_push_of_the_same_partition_waits_and_sees_the_first() {
    let db = TestDb::new();
    let storage = ensured(&db);
    let schema = fix1();
    let row = task_row(&schema, "t1", "p1", "first", 1);
    let mut first = storage.begin("acme").unwrap();
    first.lock_partition_for_push().unwrap();
    first.upsert_row("tasks", &row, Some(0)).unwrap();
    let seq = first
        .append_commit(&commit("c", "dup", vec![upsert_change(&row, "tasks")]))
        .unwrap();
    first
        .put_push_result("c", "dup", &sync_core::StoredPushResult::applied(seq))
        .unwrap();
    let (locked_tx, locked_rx) = mpsc::channel();
    thread::scope(|scope| {
        let storage = &storage;
        let waiter = scope.spawn(move || {
            let mut second = storage.begin("acme").unwrap();
            second.lock_partition_for_push().unwrap();
            let _ = locked_tx.send(());
            let replay = second.get_push_result("c", "dup").unwrap();
            let row = second.get_row("tasks", "t1").unwrap();
            second.rollback().unwrap();
            (replay, row)
        });
        assert!(
            locked_rx.recv_timeout(Duration::from_millis(300)).is_err(),
            "the second push took the lock while the first held it"
        );
        first.commit().unwrap();
        let (replay, seen) = waiter.join().unwrap();
        assert_eq!(replay.and_then(|r| r.commit_seq), Some(1));
        assert_eq!(seen, Some(row.clone()));
    });
}

#[test]
fn push_lock_timeout_turns_a_long_wait_into_busy() {
    let db = TestDb::new();
    ensured(&db);
    let storage = db.open_with(PostgresConfig {
        push_lock_timeout_ms: Some(100),
        ..db.config()
    });
    sync_core::ServerStorage::ensure_schema(&storage, &fix1(), &Default::default()).unwrap();
    let mut held = storage.begin("acme").unwrap();
    held.lock_partition_for_push().unwrap();
    let error = thread::scope(|scope| {
        scope
            .spawn(|| {
                let mut second = storage.begin("acme").unwrap();
                let error = second.lock_partition_for_push().unwrap_err();
                assert_eq!(
                    second.max_commit_seq().unwrap_err().code(),
                    ErrorCode::TransactionAborted
                );
                error
            })
            .join()
            .unwrap()
    });
    assert_eq!(error.code(), ErrorCode::Busy);
    assert!(error.retryable());
    // Pool writes that take the partition lock are bounded the same way.
    let epoch = storage
        .touch_partition("acme", NOW, "e1")
        .unwrap()
        .log_epoch;
    thread::scope(|scope| {
        scope
            .spawn(|| {
                let prune = storage.prune_commits_through(
                    "acme",
                    &sync_core::CommitPruneQuery {
                        log_epoch: epoch.clone(),
                        through_seq: 1,
                    },
                );
                assert_eq!(prune.unwrap_err().code(), ErrorCode::Busy);
                let rotate = storage.rotate_partition_log_epoch("acme", "e2", NOW);
                assert_eq!(rotate.unwrap_err().code(), ErrorCode::Busy);
                assert_eq!(
                    storage.set_horizon_seq("acme", 3).unwrap_err().code(),
                    ErrorCode::Busy
                );
            })
            .join()
            .unwrap()
    });
    held.rollback().unwrap();
    storage.set_horizon_seq("acme", 3).unwrap();
    assert_eq!(storage.get_horizon_seq("acme").unwrap(), 3);
}

#[test]
fn pool_exhaustion_is_busy() {
    let db = TestDb::new();
    ensured(&db);
    let storage = db.open_with(PostgresConfig {
        pool_size: 1,
        pool_wait_ms: 100,
        ..db.config()
    });
    let held = storage.begin("acme").unwrap();
    let error = storage.begin("acme").err().expect("second begin must fail");
    assert_eq!(error.code(), ErrorCode::Busy);
    drop(held);
    storage.begin("acme").unwrap().rollback().unwrap();
}
