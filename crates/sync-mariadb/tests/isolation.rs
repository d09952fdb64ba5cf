//! `READ COMMITTED` is set once per pooled session, when the connection is
//! set up, instead of before every transaction: the session reports it,
//! and a transaction begun with a bare `START TRANSACTION` behaves so — its
//! second read sees what another session committed after its first —
//! also right after a multi-statement pool read asked `REPEATABLE READ`
//! for its own transaction on the same connection, and after such a read
//! failed to start its transaction (the connection, which would keep the
//! request for its next transaction, is discarded).

use mysql::prelude::Queryable;
use sync_conformance::fixtures::{self, Op, PushOutcome};
use sync_core::{EnsureOptions, ServerStorage, StoredPushResult};
use sync_mariadb::scratch::{url_from_env, ScratchDatabase};
use sync_mariadb::{MariadbConfig, MariadbStorage};

fn scratch() -> ScratchDatabase {
    ScratchDatabase::from_env()
        .unwrap_or_else(|e| panic!("cannot reach MariaDB at {} ({e:?})", url_from_env()))
}

/// One pooled connection, so every call reuses the same session.
fn single_connection(db: &ScratchDatabase) -> MariadbStorage {
    let config = MariadbConfig {
        pool_size: 1,
        ..MariadbConfig::default()
    };
    let storage = MariadbStorage::connect_to(db.url().clone(), config).expect("connect");
    storage
        .ensure_schema(&fixtures::fix1().expect("fix1"), &EnsureOptions::default())
        .expect("ensure");
    storage
}

fn push(storage: &MariadbStorage, ccid: &str) -> PushOutcome {
    let schema = fixtures::fix1().expect("fix1");
    let row = fixtures::task(&schema, &format!("row-{ccid}"), "p1", ccid).expect("row");
    fixtures::push(storage, "acme", "c1", ccid, &[Op::upsert("tasks", row)]).expect("push")
}

/// Whether a push transaction sees, in its second read, a push result
/// another session committed after its first read: at `READ COMMITTED`
/// each statement reads the newest commits, at `REPEATABLE READ` the
/// first read fixes the snapshot.
fn reads_newer_commits(storage: &MariadbStorage, db: &ScratchDatabase, ccid: &str) -> bool {
    let mut tx = storage.begin("acme").expect("begin");
    assert_eq!(tx.get_push_result("c9", ccid).expect("first read"), None);
    db.raw()
        .expect("side connection")
        .exec_drop(
            "INSERT INTO `sync_push_results` (`partition`, `client_id`, `client_commit_id`, \
             `result`) VALUES ('acme', 'c9', ?, ?)",
            (ccid, StoredPushResult::applied(1).to_json()),
        )
        .expect("a commit of another session");
    let seen = tx.get_push_result("c9", ccid).expect("second read");
    tx.rollback().expect("rollback");
    seen.is_some()
}

#[test]
fn the_session_is_set_up_at_read_committed() {
    let db = scratch();
    let storage = single_connection(&db);
    assert_eq!(storage.session_facts().isolation, "READ-COMMITTED");
}

#[test]
fn push_transactions_run_at_read_committed_also_after_a_snapshot_read() {
    let db = scratch();
    let storage = single_connection(&db);
    assert_eq!(push(&storage, "k1"), PushOutcome::Applied(1));
    assert!(reads_newer_commits(&storage, &db, "x1"));

    // A multi-statement pool read: its own transaction at REPEATABLE READ,
    // on the pool's one connection.
    let commits = storage.read_commits("acme", 0, 10).expect("read commits");
    assert_eq!(commits.len(), 1);
    assert!(
        reads_newer_commits(&storage, &db, "x2"),
        "the snapshot read's level applied to its own transaction only"
    );
    assert_eq!(push(&storage, "k2"), PushOutcome::Applied(2));
}

#[cfg(feature = "fault-injection")]
#[test]
fn a_snapshot_read_that_fails_to_start_leaves_no_level_behind() {
    use std::sync::Arc;
    use sync_core::fault::{FaultKind, FaultPlan};

    let db = scratch();
    let storage = single_connection(&db);
    assert_eq!(push(&storage, "k1"), PushOutcome::Applied(1));
    let plan = FaultPlan::at_statement(
        "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY",
        FaultKind::Fail,
    );
    storage.set_fault_plan(Some(Arc::clone(&plan)));
    let failed = storage.read_commits("acme", 0, 10);
    storage.set_fault_plan(None);
    assert!(plan.fired(), "{:?}", plan.statement_log());
    assert!(failed.is_err(), "{failed:?}");
    assert!(
        reads_newer_commits(&storage, &db, "x1"),
        "the next transaction of the pool's one connection"
    );
    assert_eq!(push(&storage, "k2"), PushOutcome::Applied(2));
}
