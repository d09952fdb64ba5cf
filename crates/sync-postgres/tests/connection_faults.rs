//! Faults of the connection itself, injected at one statement (feature
//! `fault-injection`): a failed `ROLLBACK` never returns a connection to
//! the pool with its prepared-statement bookkeeping out of step with the
//! server; a connection lost before anything ran is retried on a fresh
//! connection; a connection lost at `COMMIT` is `outcome_unknown`, and a
//! retry under the same idempotency key returns the stored result.

mod common;

use std::sync::Arc;

use common::*;
use sync_core::fault::{FaultKind, FaultPlan};
use sync_core::{ErrorCode, ServerStorage};
use sync_postgres::PostgresStorage;

/// One pooled connection, so every call reuses the connection a fault hit.
fn single_connection(db: &TestDb) -> PostgresStorage {
    let storage = db.open_with(sync_postgres::PostgresConfig {
        pool_size: 1,
        ..db.config()
    });
    storage
        .ensure_schema(&fix1(), &Default::default())
        .expect("ensure");
    storage
}

/// Runs `op` under a counting plan and returns the statement log.
fn statements_of(storage: &PostgresStorage, op: impl FnOnce(&PostgresStorage)) -> Vec<String> {
    let counter = FaultPlan::count_only();
    storage.set_fault_plan(Some(Arc::clone(&counter)));
    op(storage);
    storage.set_fault_plan(None);
    counter.statement_log()
}

/// The 1-based position of the first statement `matches` accepts.
fn position(log: &[String], matches: impl Fn(&str) -> bool) -> u64 {
    let index = log
        .iter()
        .position(|s| matches(s))
        .unwrap_or_else(|| panic!("statement not found in {log:?}"));
    index as u64 + 1
}

/// Locks the partition for a push, then rolls back.
fn lock_and_roll_back(storage: &PostgresStorage) {
    let mut tx = storage.begin("acme").expect("begin");
    tx.lock_partition_for_push().expect("lock");
    tx.rollback().expect("rollback never fails");
}

#[test]
fn a_failed_rollback_never_returns_a_poisoned_connection_to_the_pool() {
    for kind in [FaultKind::Fail, FaultKind::Busy] {
        let db = TestDb::new();
        let storage = single_connection(&db);
        let schema = fix1();
        // The connection has prepared the push's named statements.
        push(
            &storage,
            "acme",
            "c1",
            "cc1",
            &[task_row(&schema, "t1", "p1", "a", 1)],
        )
        .expect("first push");
        let log = statements_of(&storage, lock_and_roll_back);
        let k = position(&log, |s| s.trim() == "ROLLBACK");
        let plan = FaultPlan::at(k, kind);
        storage.set_fault_plan(Some(Arc::clone(&plan)));
        lock_and_roll_back(&storage);
        storage.set_fault_plan(None);
        assert!(plan.fired(), "{kind:?}: the ROLLBACK was not reached");
        // The same pool (one connection) keeps working.
        for n in 2..=3 {
            let row = task_row(&schema, &format!("t{n}"), "p1", &format!("b{n}"), 1);
            let seq = push(&storage, "acme", "c1", &format!("cc{n}"), &[row])
                .unwrap_or_else(|e| panic!("{kind:?}: push {n} after the failed ROLLBACK: {e:?}"));
            assert_eq!(seq, n as i64, "{kind:?}");
        }
        assert_eq!(storage.get_max_commit_seq("acme").unwrap(), 3, "{kind:?}");
    }
}

fn one_push(storage: &PostgresStorage, ccid: &str) -> sync_core::Result<i64> {
    let row = task_row(&fix1(), &format!("row-{ccid}"), "p1", ccid, 1);
    push(storage, "acme", "c1", ccid, &[row])
}

#[test]
fn a_connection_lost_at_commit_is_outcome_unknown_and_the_same_key_tells_what_happened() {
    for kind in [FaultKind::ReplyLost, FaultKind::ConnectionLost] {
        let db = TestDb::new();
        let storage = single_connection(&db);
        one_push(&storage, "warm").expect("warm-up push");
        let log = statements_of(&storage, |s| {
            one_push(s, "dry").expect("dry push");
        });
        let k = position(&log, |s| s.trim_end().ends_with("COMMIT"));
        let plan = FaultPlan::at(k, kind);
        storage.set_fault_plan(Some(Arc::clone(&plan)));
        let error = one_push(&storage, "cut").expect_err("the commit's reply is lost");
        storage.set_fault_plan(None);
        assert!(plan.fired());
        assert_eq!(
            error.code(),
            ErrorCode::OutcomeUnknown,
            "{kind:?}: {error:?}"
        );
        assert!(error.retryable());
        // The retry under the same key: stored result, or a first commit.
        let seq = one_push(&storage, "cut").expect("retry with the same key");
        assert_eq!(seq, 3, "{kind:?}");
        assert_eq!(
            storage.get_max_commit_seq("acme").unwrap(),
            3,
            "{kind:?}: one commit"
        );
        let again = one_push(&storage, "cut").expect("a second retry");
        assert_eq!(again, 3, "{kind:?}: the stored result");
    }
}

#[test]
fn a_connection_lost_at_the_first_statement_is_retried_on_a_fresh_connection() {
    let db = TestDb::new();
    let storage = single_connection(&db);
    one_push(&storage, "warm").expect("warm-up push");
    for kind in [FaultKind::ConnectionLost, FaultKind::ReplyLost] {
        let plan = FaultPlan::at(1, kind);
        storage.set_fault_plan(Some(Arc::clone(&plan)));
        let seq = one_push(&storage, &format!("first-{}", kind.as_str()));
        storage.set_fault_plan(None);
        assert!(plan.fired());
        seq.unwrap_or_else(|e| panic!("{kind:?} at the push's first statement: {e:?}"));
        let plan = FaultPlan::at(1, kind);
        storage.set_fault_plan(Some(Arc::clone(&plan)));
        let max = storage.get_max_commit_seq("acme");
        storage.set_fault_plan(None);
        assert!(plan.fired());
        max.unwrap_or_else(|e| panic!("{kind:?} at a pool read: {e:?}"));
    }
    assert_eq!(storage.get_max_commit_seq("acme").unwrap(), 3);
}

#[test]
fn a_connection_lost_inside_a_transaction_is_connection_lost_and_persists_nothing() {
    let db = TestDb::new();
    let storage = single_connection(&db);
    one_push(&storage, "warm").expect("warm-up push");
    // Statement 2 of a push: the row upsert after the lock.
    let plan = FaultPlan::at(2, FaultKind::ConnectionLost);
    storage.set_fault_plan(Some(Arc::clone(&plan)));
    let error = one_push(&storage, "mid").expect_err("lost mid-transaction");
    storage.set_fault_plan(None);
    assert!(plan.fired());
    assert_eq!(error.code(), ErrorCode::ConnectionLost, "{error:?}");
    assert!(error.retryable());
    assert_eq!(error.get_detail("cause"), Some("unreachable"));
    assert_eq!(storage.get_max_commit_seq("acme").unwrap(), 1);
    assert_eq!(one_push(&storage, "mid").expect("retry"), 2);
}
