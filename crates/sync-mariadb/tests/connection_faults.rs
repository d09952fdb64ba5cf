//! Faults injected at the `COMMIT` of a push (feature `fault-injection`),
//! each a real server error classified like any other: a failed `COMMIT`
//! is `backend` and a lock-wait one `busy`, and neither stores anything; a
//! connection killed before its `COMMIT` ran, or after it ran, is
//! `outcome_unknown`, and the push's idempotency key then tells which
//! happened. A pool of one connection keeps working after every fault: a
//! killed connection is discarded, a failed one rolled back.

use std::sync::Arc;

use sync_conformance::fixtures::{self, Op, PushOutcome};
use sync_core::fault::{FaultKind, FaultPlan};
use sync_core::{EnsureOptions, ErrorCode, ServerStorage};
use sync_mariadb::scratch::{url_from_env, ScratchDatabase};
use sync_mariadb::{MariadbConfig, MariadbStorage};

fn scratch() -> ScratchDatabase {
    ScratchDatabase::from_env()
        .unwrap_or_else(|e| panic!("cannot reach MariaDB at {} ({e:?})", url_from_env()))
}

/// One pooled connection, so every call reuses the connection a fault hit.
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

fn one_push(storage: &MariadbStorage, ccid: &str) -> sync_core::Result<PushOutcome> {
    let schema = fixtures::fix1().expect("fix1");
    let row = fixtures::task(&schema, &format!("row-{ccid}"), "p1", ccid).expect("row");
    fixtures::push(storage, "acme", "c1", ccid, &[Op::upsert("tasks", row)])
}

/// Pushes `cut` with `kind` injected at its `COMMIT`; the error.
fn push_with_fault_at_commit(storage: &MariadbStorage, kind: FaultKind) -> sync_core::Error {
    let plan = FaultPlan::at_first_commit(kind);
    storage.set_fault_plan(Some(Arc::clone(&plan)));
    let outcome = one_push(storage, "cut");
    storage.set_fault_plan(None);
    assert!(plan.fired(), "{kind:?}: no COMMIT was reached");
    // The push's last statements: the COMMIT the fault struck, then the
    // ROLLBACK a transaction ends with after a failed COMMIT.
    let log = plan.statement_log();
    assert!(
        log.ends_with(&["COMMIT".to_owned(), "ROLLBACK".to_owned()]),
        "{kind:?}: {log:?}"
    );
    outcome.expect_err("the injected fault fails the push")
}

#[test]
fn a_failed_or_busy_commit_stores_nothing_and_the_pool_keeps_working() {
    for (kind, code) in [
        (FaultKind::Fail, ErrorCode::Backend),
        (FaultKind::Busy, ErrorCode::Busy),
    ] {
        let db = scratch();
        let storage = single_connection(&db);
        one_push(&storage, "warm").expect("warm-up push");
        let error = push_with_fault_at_commit(&storage, kind);
        assert_eq!(error.code(), code, "{kind:?}: {error:?}");
        assert_eq!(error.retryable(), kind == FaultKind::Busy, "{kind:?}");
        assert_eq!(
            storage.get_push_result("acme", "c1", "cut").expect("read"),
            None,
            "{kind:?}: nothing of the failed push is stored"
        );
        assert_eq!(storage.get_max_commit_seq("acme").expect("seq"), 1);
        // The same single connection was rolled back and serves again.
        assert_eq!(
            one_push(&storage, "cut").expect("retry"),
            PushOutcome::Applied(2),
            "{kind:?}"
        );
    }
}

#[test]
fn a_connection_killed_at_commit_is_outcome_unknown_and_the_key_tells_what_happened() {
    for (kind, committed) in [
        (FaultKind::ConnectionLost, false),
        (FaultKind::ReplyLost, true),
    ] {
        let db = scratch();
        let storage = single_connection(&db);
        one_push(&storage, "warm").expect("warm-up push");
        let error = push_with_fault_at_commit(&storage, kind);
        assert_eq!(
            error.code(),
            ErrorCode::OutcomeUnknown,
            "{kind:?}: {error:?}"
        );
        assert!(error.retryable(), "{kind:?}");
        assert_eq!(
            storage
                .get_push_result("acme", "c1", "cut")
                .expect("read on a fresh connection")
                .is_some(),
            committed,
            "{kind:?}: whether the COMMIT ran"
        );
        let retried = one_push(&storage, "cut").expect("retry with the same key");
        match retried {
            PushOutcome::Applied(seq) => assert!(!committed && seq == 2, "{kind:?}: {seq}"),
            PushOutcome::Replayed(result) => {
                assert!(committed, "{kind:?}");
                assert_eq!(result.commit_seq, Some(2), "{kind:?}");
            }
            other => panic!("{kind:?}: {other:?}"),
        }
        assert_eq!(
            storage.get_max_commit_seq("acme").expect("seq"),
            2,
            "{kind:?}"
        );
    }
}
