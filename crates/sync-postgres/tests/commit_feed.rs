//! The commit feed (`PostgresConfig::announce_commits`): a listener of one
//! storage instance hears the commits another instance appends to the same
//! schema — only after they commit, only its own schema's — and a listener
//! whose connection is terminated says it is lost.

mod common;

use std::time::{Duration, Instant};

use common::*;
use sync_core::{FeedEvent, ServerStorage};

fn announcing(db: &TestDb) -> sync_postgres::PostgresStorage {
    let storage = db.open_with(sync_postgres::PostgresConfig {
        announce_commits: true,
        ..db.config()
    });
    storage
        .ensure_schema(&fix1(), &sync_core::EnsureOptions::default())
        .expect("ensure FIX1");
    storage
}

/// The next event other than `Idle` within 10 s.
fn next(listener: &mut dyn sync_core::CommitListener) -> FeedEvent {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        match listener.next(Duration::from_millis(200)) {
            FeedEvent::Idle => {}
            event => return event,
        }
    }
    FeedEvent::Idle
}

#[test]
fn a_commit_of_another_instance_is_heard_and_a_rollback_is_not() {
    let db = TestDb::new();
    let (listening, pushing) = (announcing(&db), announcing(&db));
    let mut listener = listening.commit_feed().expect("a feed").listen().unwrap();
    let schema = fix1();

    // Rolled back: never announced.
    let mut tx = pushing.begin("acme").unwrap();
    tx.lock_partition_for_push().unwrap();
    let row = task_row(&schema, "gone", "p1", "gone", 1);
    tx.upsert_row("tasks", &row, Some(0)).unwrap();
    tx.append_commit(&commit("c", "c-0", vec![upsert_change(&row, "tasks")]))
        .unwrap();
    tx.rollback().unwrap();

    let seq = push(
        &pushing,
        "acme",
        "c",
        "c-1",
        &[task_row(&schema, "t1", "p1", "x1", 1)],
    )
    .unwrap();
    match next(listener.as_mut()) {
        FeedEvent::Commit(notice) => {
            assert_eq!(
                (notice.partition.as_str(), notice.commit_seq),
                ("acme", seq)
            );
        }
        other => panic!("{other:?}"),
    }

    // Another schema's commits are not this listener's.
    let other = TestDb::new();
    let elsewhere = announcing(&other);
    push(
        &elsewhere,
        "acme",
        "c",
        "c-9",
        &[task_row(&schema, "t9", "p1", "x9", 1)],
    )
    .unwrap();
    let seq = push(
        &pushing,
        "acme",
        "c",
        "c-2",
        &[task_row(&schema, "t2", "p1", "x2", 1)],
    )
    .unwrap();
    match next(listener.as_mut()) {
        FeedEvent::Commit(notice) => assert_eq!(notice.commit_seq, seq),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_terminated_listener_is_lost_and_a_storage_that_does_not_announce_has_no_feed() {
    let db = TestDb::new();
    assert!(db.open().commit_feed().is_none());
    let storage = announcing(&db);
    let mut listener = storage.commit_feed().expect("a feed").listen().unwrap();
    let name = format!("syncstore commit feed {}", db.schema);
    let terminated: i64 = client()
        .query_one(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
             WHERE application_name = $1",
            &[&name],
        )
        .unwrap()
        .get(0);
    assert_eq!(terminated, 1, "the listener is named for its schema");
    assert_eq!(next(listener.as_mut()), FeedEvent::Lost);
}
