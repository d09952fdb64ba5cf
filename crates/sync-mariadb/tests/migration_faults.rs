//! Faults injected inside a migration (feature `fault-injection`). The
//! first `ensure_schema` of a database is a fence transaction (the meta
//! row's `migrating_to`, the journal), the DDL statements each followed by
//! the journal's next step, and a finishing transaction. A connection lost
//! inside the fence transaction leaves nothing: `connection_lost`. One
//! lost at its `COMMIT` or after it leaves the migration open (or done):
//! the error is then `outcome_unknown`, never `connection_lost`, which
//! says that nothing changed; and the next `ensure_schema` rolls the open
//! migration forward. A bootstrap's DDL statement commits by itself: a
//! connection lost at one is `outcome_unknown` as well.

use std::sync::Arc;

use mysql::prelude::Queryable;
use sync_conformance::fixtures;
use sync_core::fault::{FaultKind, FaultPlan};
use sync_core::{EnsureOptions, ErrorCode, ServerStorage};
use sync_mariadb::scratch::{url_from_env, ScratchDatabase};
use sync_mariadb::{MariadbConfig, MariadbStorage};

fn scratch() -> ScratchDatabase {
    ScratchDatabase::from_env()
        .unwrap_or_else(|e| panic!("cannot reach MariaDB at {} ({e:?})", url_from_env()))
}

fn open(db: &ScratchDatabase) -> MariadbStorage {
    MariadbStorage::connect_to(db.url().clone(), MariadbConfig::default()).expect("connect")
}

fn ensure(storage: &MariadbStorage) -> sync_core::Result<()> {
    storage.ensure_schema(&fixtures::fix1().expect("fix1"), &EnsureOptions::default())
}

/// `ensure` on a fresh database under `plan`; the database and the outcome.
fn ensure_under(plan: &Arc<FaultPlan>) -> (ScratchDatabase, sync_core::Result<()>) {
    let db = scratch();
    let storage = open(&db);
    storage.set_fault_plan(Some(Arc::clone(plan)));
    let outcome = ensure(&storage);
    storage.set_fault_plan(None);
    (db, outcome)
}

/// The meta row's `migrating_to` (`None` without a row).
fn migrating_to(db: &ScratchDatabase) -> Option<i32> {
    let mut raw = db.raw().expect("raw");
    let row: Option<Option<i32>> = raw
        .query_first("SELECT `migrating_to` FROM `sync_schema_meta` WHERE `id` = 1")
        .expect("meta row");
    row.flatten()
}

/// The 1-based position of the first statement of `log` from `from` on
/// that starts with `prefix`.
fn position(log: &[String], from: usize, prefix: &str) -> usize {
    log.iter()
        .enumerate()
        .skip(from.saturating_sub(1))
        .find(|(_, sql)| sql.starts_with(prefix))
        .map(|(i, _)| i + 1)
        .unwrap_or_else(|| panic!("no {prefix:?} from statement {from} on: {log:?}"))
}

#[test]
fn a_connection_lost_after_the_fence_is_outcome_unknown_and_rolled_forward() {
    let counter = FaultPlan::count_only();
    let (_, outcome) = ensure_under(&counter);
    outcome.expect("the fault-free ensure");
    let log = counter.statement_log();
    let journal = position(&log, 1, "INSERT INTO `sync_migration_journal`");
    let fence_commit = position(&log, journal, "COMMIT");
    let first_ddl = position(&log, fence_commit, "CREATE TABLE");
    let finish_commit = log.len();
    assert_eq!(log[finish_commit - 1], "COMMIT", "{log:?}");

    // Inside the fence transaction: nothing persisted.
    let plan = FaultPlan::at(journal as u64, FaultKind::ConnectionLost);
    let (db, outcome) = ensure_under(&plan);
    let error = outcome.expect_err("the fault fails the ensure");
    assert_eq!(error.code(), ErrorCode::ConnectionLost, "{error:?}");
    assert_eq!(migrating_to(&db), None, "nothing of the fence is stored");

    for (k, kind) in [
        (fence_commit, FaultKind::ReplyLost),
        (first_ddl, FaultKind::ConnectionLost),
        (first_ddl, FaultKind::ReplyLost),
        (finish_commit, FaultKind::ConnectionLost),
    ] {
        let what = format!("{kind:?} at statement {k} ({})", log[k - 1]);
        let plan = FaultPlan::at(k as u64, kind);
        let (db, outcome) = ensure_under(&plan);
        assert!(plan.fired(), "{what}: not reached");
        let error = outcome.expect_err("the fault fails the ensure");
        assert_eq!(error.code(), ErrorCode::OutcomeUnknown, "{what}: {error:?}");
        assert!(error.retryable(), "{what}");
        assert_eq!(migrating_to(&db), Some(1), "{what}: the migration is open");
        ensure(&open(&db)).unwrap_or_else(|e| panic!("{what}: roll forward: {e:?}"));
        assert_eq!(migrating_to(&db), None, "{what}: rolled forward");
        let marker = open(&db).read_schema_marker().expect("marker");
        assert_eq!(marker.map(|m| m.schema_version), Some(1), "{what}");
    }
}

#[test]
fn a_connection_lost_while_rolling_forward_is_outcome_unknown() {
    // A migration left open before its first DDL statement ran.
    let counter = FaultPlan::count_only();
    let (_, outcome) = ensure_under(&counter);
    outcome.expect("the fault-free ensure");
    let first_ddl = position(&counter.statement_log(), 1, "CREATE TABLE");
    let (db, outcome) = ensure_under(&FaultPlan::at(first_ddl as u64, FaultKind::Fail));
    let error = outcome.expect_err("the fault fails the ensure");
    assert_eq!(error.code(), ErrorCode::Backend, "{error:?}");
    assert_eq!(migrating_to(&db), Some(1), "the migration is open");

    // The next process rolls it forward and loses its connection at the
    // finishing COMMIT, after the DDL it ran.
    let rolling = open(&db);
    let plan = FaultPlan::at_first_commit(FaultKind::ConnectionLost);
    rolling.set_fault_plan(Some(Arc::clone(&plan)));
    let outcome = ensure(&rolling);
    rolling.set_fault_plan(None);
    assert!(plan.fired(), "no COMMIT was reached");
    let error = outcome.expect_err("the fault fails the roll-forward");
    assert_eq!(error.code(), ErrorCode::OutcomeUnknown, "{error:?}");
    assert_eq!(migrating_to(&db), Some(1), "still open");

    ensure(&open(&db)).expect("a third process rolls it forward");
    assert_eq!(migrating_to(&db), None, "rolled forward");
}

/// `ensure_base_tables` under `plan` on a database that lost a table and a
/// trigger after its first bootstrap (at connect).
fn bootstrap_under(plan: &Arc<FaultPlan>) -> (ScratchDatabase, sync_core::Result<bool>) {
    let db = scratch();
    let storage = open(&db);
    let mut raw = db.raw().expect("raw");
    raw.query_drop("DROP TABLE `sync_tombstones`")
        .expect("drop a table");
    let trigger: String = raw
        .query_first(
            "SELECT `TRIGGER_NAME` FROM `information_schema`.`TRIGGERS` \
             WHERE `TRIGGER_SCHEMA` = DATABASE() ORDER BY `TRIGGER_NAME` LIMIT 1",
        )
        .expect("catalog")
        .expect("a trigger");
    raw.query_drop(format!("DROP TRIGGER `{trigger}`"))
        .expect("drop a trigger");
    storage.set_fault_plan(Some(Arc::clone(plan)));
    let outcome = storage.ensure_base_tables();
    storage.set_fault_plan(None);
    (db, outcome)
}

#[test]
fn a_connection_lost_at_a_bootstrap_statement_is_outcome_unknown() {
    let counter = FaultPlan::count_only();
    let (_, outcome) = bootstrap_under(&counter);
    assert!(outcome.expect("the fault-free bootstrap"), "it ran DDL");
    let log = counter.statement_log();
    let first = position(&log, 1, "CREATE TABLE");
    let trigger = position(&log, first, "CREATE OR REPLACE TRIGGER");
    for at in [first, trigger] {
        // The statement runs, then its connection is lost: it is done,
        // which `connection_lost` would deny.
        let (db, outcome) = bootstrap_under(&FaultPlan::at(at as u64, FaultKind::ReplyLost));
        let error = outcome.expect_err("the fault fails the bootstrap");
        assert_eq!(
            error.code(),
            ErrorCode::OutcomeUnknown,
            "statement {at}: {error:?}"
        );
        // The next instance's bootstrap (at connect) creates the rest.
        let again = open(&db);
        assert!(
            !again.ensure_base_tables().expect("complete"),
            "nothing is missing after the next bootstrap"
        );
    }
}
