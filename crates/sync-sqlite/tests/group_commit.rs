//! Group commit on the writer (`GroupCommit::ON`): transactions queued for
//! the writer while another one runs share its SQLite transaction as
//! savepoints and one `COMMIT`. Every guarantee holds per transaction: a
//! member's `commit` returns after the shared `COMMIT`; a member that rolls
//! back or is rejected undoes only its own writes; a failed `COMMIT` (or a
//! shared transaction lost mid-group) fails every member with
//! `group_commit_failed` and persists nothing; a pool-level writer (a bump)
//! never joins and waits for the open group.
//!
//! Groups are formed deterministically: the test holds a transaction open,
//! waits (`await_queued_writers`) until the others queue behind it, then
//! commits. The statement log of a counting fault plan shows how many
//! `COMMIT`s ran.

mod common;

use std::sync::mpsc;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use common::*;
use sync_core::fault::{FaultKind, FaultPlan};
use sync_core::{
    EnsureOptions, Error, ErrorCode, PushOperationResult, PushStatus, ServerStorage,
    StorageTransaction, StoredPushResult,
};
use sync_sqlite::{GroupCommit, SqliteConfig, SqliteStorage};

/// Grouping without a time bound: which transactions share a `COMMIT` then
/// depends only on who is queued, never on how fast the machine is.
const UNTIMED: GroupCommit = GroupCommit {
    max_members: 64,
    max_wait_ms: 3_600_000,
};

fn grouped(db: &Db) -> SqliteStorage {
    let storage = db.open_with(SqliteConfig {
        group_commit: UNTIMED,
        ..SqliteConfig::with_clock(db.clock.clone())
    });
    storage
        .ensure_schema(&fix1(), &EnsureOptions::default())
        .unwrap();
    storage
}

/// A push up to (not including) its commit.
fn staged<'s>(
    storage: &'s dyn ServerStorage,
    client: &str,
    ccid: &str,
    title: &str,
) -> Result<(Box<dyn StorageTransaction + 's>, i64), Error> {
    let row = task_row(&format!("row-{client}-{ccid}"), "proj", title);
    let mut tx = storage.begin("p")?;
    tx.lock_partition_for_push()?;
    tx.upsert_row("tasks", &row, Some(0))?;
    let seq = tx.append_commit(&commit_of(client, ccid, vec![upsert_change(&row)]))?;
    tx.put_push_result(client, ccid, &StoredPushResult::applied(seq))?;
    Ok((tx, seq))
}

/// A whole push; the commit's outcome and the allocated seq.
fn push_result(storage: &dyn ServerStorage, client: &str, ccid: &str) -> Result<i64, Error> {
    let (tx, seq) = staged(storage, client, ccid, &format!("title-{client}-{ccid}"))?;
    tx.commit().map(|()| seq)
}

fn commits_in(plan: &FaultPlan) -> usize {
    plan.statement_log()
        .iter()
        .filter(|s| s.as_str() == "COMMIT")
        .count()
}

fn members_in(plan: &FaultPlan) -> usize {
    plan.statement_log()
        .iter()
        .filter(|s| s.as_str() == "SAVEPOINT sync_group_member")
        .count()
}

#[test]
fn queued_pushes_share_one_commit_with_dense_seqs() {
    let db = Db::new();
    let storage = grouped(&db);
    let plan = FaultPlan::count_only();
    storage.set_fault_plan(Some(plan.clone())).unwrap();
    let (leader, first) = staged(&storage, "a", "1", "a").unwrap();
    let seqs = thread::scope(|scope| {
        let others: Vec<_> = ["b", "c", "d"]
            .into_iter()
            .map(|client| {
                let storage = &storage;
                scope.spawn(move || push_result(storage, client, "1"))
            })
            .collect();
        storage.await_queued_writers(3, 0).unwrap();
        leader.commit().unwrap();
        let mut seqs: Vec<i64> = others
            .into_iter()
            .map(|h| h.join().unwrap().unwrap())
            .collect();
        seqs.push(first);
        seqs.sort_unstable();
        seqs
    });
    assert_eq!(seqs, [1, 2, 3, 4]);
    assert_eq!(commits_in(&plan), 1, "{:?}", plan.statement_log());
    assert_eq!(members_in(&plan), 3);
    storage.set_fault_plan(None).unwrap();
    for client in ["a", "b", "c", "d"] {
        let stored = storage.get_push_result("p", client, "1").unwrap().unwrap();
        assert_eq!(
            storage
                .get_row("p", "tasks", &format!("row-{client}-1"))
                .unwrap()
                .map(|r| r.row_id),
            Some(format!("row-{client}-1"))
        );
        assert!(stored.commit_seq.is_some());
    }
    assert_eq!(storage.get_max_commit_seq("p").unwrap(), 4);
    // Afterwards a lone push commits alone, as ever.
    assert_eq!(push_result(&storage, "e", "1").unwrap(), 5);
}

#[test]
fn a_member_that_rolls_back_undoes_only_its_own_writes() {
    let db = Db::new();
    let storage = grouped(&db);
    let plan = FaultPlan::count_only();
    storage.set_fault_plan(Some(plan.clone())).unwrap();
    let (leader, _) = staged(&storage, "a", "1", "a").unwrap();
    let (joined_tx, joined_rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    thread::scope(|scope| {
        let storage = &storage;
        let quitter = scope.spawn(move || {
            let (tx, seq) = staged(storage, "b", "1", "b").unwrap();
            joined_tx.send(seq).unwrap();
            go_rx.recv().unwrap();
            tx.rollback().unwrap();
        });
        storage.await_queued_writers(1, 0).unwrap();
        let commit = scope.spawn(move || leader.commit());
        // b runs inside the group and saw a's append.
        assert_eq!(joined_rx.recv().unwrap(), 2);
        let later = scope.spawn(move || push_result(storage, "c", "1"));
        storage.await_queued_writers(1, 0).unwrap();
        go_tx.send(()).unwrap();
        quitter.join().unwrap();
        assert_eq!(
            later.join().unwrap().unwrap(),
            2,
            "b's seq is reused: dense"
        );
        commit.join().unwrap().unwrap();
    });
    assert_eq!(commits_in(&plan), 1, "{:?}", plan.statement_log());
    storage.set_fault_plan(None).unwrap();
    assert!(storage.get_push_result("p", "b", "1").unwrap().is_none());
    assert!(storage.get_row("p", "tasks", "row-b-1").unwrap().is_none());
    assert!(storage.get_row("p", "tasks", "row-a-1").unwrap().is_some());
    assert!(storage.get_row("p", "tasks", "row-c-1").unwrap().is_some());
    assert_eq!(storage.get_max_commit_seq("p").unwrap(), 2);
}

#[test]
fn a_member_with_a_constraint_violation_is_rejected_alone() {
    let db = Db::new();
    let storage = grouped(&db);
    let plan = FaultPlan::count_only();
    storage.set_fault_plan(Some(plan.clone())).unwrap();
    let (leader, _) = staged(&storage, "a", "1", "same").unwrap();
    let rejection = StoredPushResult {
        status: PushStatus::Rejected,
        commit_seq: None,
        recorded_at_ms: Some(NOW),
        cache_identity: Some("b".into()),
        results: vec![PushOperationResult::Error {
            op_index: 1,
            code: "sync.constraint_violation".into(),
            message: "no".into(),
            retryable: false,
            details: None,
        }],
        actor_id: None,
    };
    thread::scope(|scope| {
        let storage = &storage;
        let rejection = &rejection;
        let violator = scope.spawn(move || {
            let mut tx = storage.begin("p").unwrap();
            tx.lock_partition_for_push().unwrap();
            tx.upsert_row("tasks", &task_row("row-b-ok", "proj", "fine"), Some(0))
                .unwrap();
            // The title a's uncommitted row holds: a is before b.
            let error = tx
                .upsert_row("tasks", &task_row("row-b-dup", "proj", "same"), Some(1))
                .unwrap_err();
            assert_eq!(error.code(), ErrorCode::ConstraintViolation);
            tx.commit_rejected_push_result("b", "1", rejection)
        });
        let other = scope.spawn(move || push_result(storage, "c", "1"));
        storage.await_queued_writers(2, 0).unwrap();
        leader.commit().unwrap();
        violator.join().unwrap().unwrap();
        assert_eq!(other.join().unwrap().unwrap(), 2);
    });
    assert_eq!(commits_in(&plan), 1, "{:?}", plan.statement_log());
    storage.set_fault_plan(None).unwrap();
    assert_eq!(
        storage.get_push_result("p", "b", "1").unwrap(),
        Some(rejection)
    );
    assert!(storage.get_row("p", "tasks", "row-b-ok").unwrap().is_none());
    assert!(storage.get_row("p", "tasks", "row-a-1").unwrap().is_some());
    assert!(storage.get_row("p", "tasks", "row-c-1").unwrap().is_some());
    assert_eq!(storage.get_max_commit_seq("p").unwrap(), 2);
}

fn assert_group_failed(result: Result<i64, Error>, what: &str) {
    let error = result.expect_err(what);
    assert_eq!(
        error.code(),
        ErrorCode::GroupCommitFailed,
        "{what}: {error:?}"
    );
    assert!(error.retryable());
}

fn assert_nothing_persisted(storage: &SqliteStorage, clients: &[&str]) {
    assert_eq!(storage.get_max_commit_seq("p").unwrap(), 0);
    for client in clients {
        assert!(storage.get_push_result("p", client, "1").unwrap().is_none());
        assert!(storage
            .get_row("p", "tasks", &format!("row-{client}-1"))
            .unwrap()
            .is_none());
    }
}

#[test]
fn a_failed_group_commit_fails_every_member_and_persists_nothing() {
    for kind in [FaultKind::Fail, FaultKind::Busy, FaultKind::ConnectionLost] {
        let db = Db::new();
        let storage = grouped(&db);
        let (leader, first) = staged(&storage, "a", "1", "a").unwrap();
        thread::scope(|scope| {
            let storage = &storage;
            let others: Vec<_> = ["b", "c"]
                .into_iter()
                .map(|client| scope.spawn(move || push_result(storage, client, "1")))
                .collect();
            storage.await_queued_writers(2, 0).unwrap();
            storage
                .set_fault_plan(Some(FaultPlan::at_statement("COMMIT", kind)))
                .unwrap();
            assert_group_failed(leader.commit().map(|()| first), "leader");
            for other in others {
                assert_group_failed(other.join().unwrap(), "member");
            }
        });
        storage.set_fault_plan(None).unwrap();
        assert_nothing_persisted(&storage, &["a", "b", "c"]);
        // The writer is usable again; the same pushes can be retried.
        assert_eq!(push_result(&storage, "a", "1").unwrap(), 1);
    }
}

#[test]
fn a_shared_transaction_lost_mid_group_fails_the_members_before_it() {
    let db = Db::new();
    let storage = grouped(&db);
    let (leader, first) = staged(&storage, "a", "1", "a").unwrap();
    let (joined_tx, joined_rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    thread::scope(|scope| {
        let storage = &storage;
        let victim = scope.spawn(move || {
            let mut tx = storage.begin("p").unwrap();
            tx.lock_partition_for_push().unwrap();
            joined_tx.send(()).unwrap();
            go_rx.recv().unwrap();
            // The injected loss rolls the whole SQLite transaction back,
            // as SQLite does itself after an I/O error or a full disk.
            let error = tx
                .upsert_row("tasks", &task_row("row-b-1", "proj", "b"), Some(0))
                .unwrap_err();
            assert_eq!(error.code(), ErrorCode::Backend);
            tx.rollback().unwrap();
        });
        storage.await_queued_writers(1, 0).unwrap();
        let commit = scope.spawn(move || leader.commit().map(|()| first));
        joined_rx.recv().unwrap();
        storage
            .set_fault_plan(Some(FaultPlan::at(1, FaultKind::ConnectionLost)))
            .unwrap();
        go_tx.send(()).unwrap();
        victim.join().unwrap();
        assert_group_failed(commit.join().unwrap(), "leader");
    });
    storage.set_fault_plan(None).unwrap();
    assert_nothing_persisted(&storage, &["a", "b"]);
    assert_eq!(push_result(&storage, "c", "1").unwrap(), 1);
}

#[test]
fn a_bump_waits_for_the_open_group_and_takes_the_writer_alone() {
    let db = Db::new();
    let storage = Arc::new(grouped(&db));
    let plan = FaultPlan::count_only();
    storage.set_fault_plan(Some(plan.clone())).unwrap();
    let (leader, _) = staged(storage.as_ref(), "a", "1", "a").unwrap();
    let (joined_tx, joined_rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    thread::scope(|scope| {
        let s = storage.as_ref();
        let member = scope.spawn(move || {
            let (tx, seq) = staged(s, "b", "1", "b").unwrap();
            joined_tx.send(tx.writer_version()).unwrap();
            go_rx.recv().unwrap();
            tx.commit().map(|()| seq)
        });
        s.await_queued_writers(1, 0).unwrap();
        let commit = scope.spawn(move || leader.commit());
        assert_eq!(joined_rx.recv().unwrap(), 1);
        let bump = scope.spawn(move || s.ensure_schema(&fix2(), &EnsureOptions::default()));
        s.await_queued_writers(0, 1).unwrap();
        // Another push queued now must not join the group: the bump waits.
        let late = scope.spawn(move || push_result(s, "c", "1"));
        s.await_queued_writers(1, 1).unwrap();
        go_tx.send(()).unwrap();
        assert_eq!(member.join().unwrap().unwrap(), 2);
        commit.join().unwrap().unwrap();
        bump.join().unwrap().unwrap();
        // c ran alone before the bump (seq 3), or after it and was fenced
        // out with the version it began under.
        match late.join().unwrap() {
            Ok(seq) => assert_eq!(seq, 3),
            Err(e) => assert_eq!(e.code(), ErrorCode::WriterFenceRejected, "{e:?}"),
        }
    });
    let log = plan.statement_log();
    assert_eq!(members_in(&plan), 1, "only b joined a group: {log:?}");
    storage.set_fault_plan(None).unwrap();
    assert_eq!(storage.ensured_version(), Some(2));
    assert_eq!(
        storage
            .read_schema_marker()
            .unwrap()
            .unwrap()
            .schema_version,
        2
    );
    assert!(storage.get_push_result("p", "a", "1").unwrap().is_some());
    assert!(storage.get_push_result("p", "b", "1").unwrap().is_some());
}

#[test]
fn group_commit_is_off_by_default() {
    assert_eq!(SqliteConfig::default().group_commit, GroupCommit::OFF);
    assert!(!GroupCommit::OFF.enabled());
    assert!(GroupCommit::ON.enabled());
    let db = Db::new();
    let storage = db.ready();
    let plan = FaultPlan::count_only();
    storage.set_fault_plan(Some(plan.clone())).unwrap();
    let (leader, _) = staged(&storage, "a", "1", "a").unwrap();
    thread::scope(|scope| {
        let s = &storage;
        let other = scope.spawn(move || push_result(s, "b", "1"));
        storage.await_queued_writers(1, 0).unwrap();
        leader.commit().unwrap();
        assert_eq!(other.join().unwrap().unwrap(), 2);
    });
    assert_eq!(commits_in(&plan), 2);
    assert_eq!(members_in(&plan), 0);
}

/// Sixteen pushers and a pool-level writer contend for the writer, without
/// and with grouping (groups of at most four, so that the pool-level writer
/// gets turns between them): every call succeeds and every push is
/// counted. Callers are woken one at a time, each kind on its own condition
/// variable. The writer wait is an hour, so a caller whose wake-up was lost
/// cannot be rescued by its deadline: it stays asleep, and the test fails
/// when the callers have not all finished after [`HANG`] (a healthy run
/// takes about a second).
#[test]
fn every_waiting_caller_gets_its_turn_under_contention() {
    const PUSHERS: usize = 16;
    const EACH: usize = 20;
    const HANG: Duration = Duration::from_secs(120);
    let bounded = GroupCommit {
        max_members: 4,
        max_wait_ms: 3_600_000,
    };
    for group_commit in [GroupCommit::OFF, bounded] {
        let db = Db::new();
        let storage = Arc::new(db.open_with(SqliteConfig {
            group_commit,
            writer_wait_ms: 3_600_000,
            synchronous: sync_sqlite::Synchronous::Normal,
            ..SqliteConfig::with_clock(db.clock.clone())
        }));
        storage
            .ensure_schema(&fix1(), &EnsureOptions::default())
            .unwrap();
        let (done, finished) = mpsc::channel();
        for t in 0..PUSHERS {
            let (s, done) = (Arc::clone(&storage), done.clone());
            thread::spawn(move || {
                let outcome = (0..EACH).try_for_each(|i| {
                    push_result(s.as_ref(), &format!("c{t}"), &i.to_string()).map(drop)
                });
                let _ = done.send((format!("pusher {t}"), outcome));
            });
        }
        let (s, alone_done) = (Arc::clone(&storage), done.clone());
        thread::spawn(move || {
            let outcome = (0..EACH)
                .try_for_each(|i| s.declare_checkpoint("p", &format!("cp{i}"), 1, 0).map(drop));
            let _ = alone_done.send(("the pool-level writer".to_owned(), outcome));
        });
        let until = Instant::now() + HANG;
        for _ in 0..=PUSHERS {
            let left = until.saturating_duration_since(Instant::now());
            let (who, outcome) = finished.recv_timeout(left).unwrap_or_else(|_| {
                panic!("{group_commit:?}: a caller still waits for the writer after {HANG:?}")
            });
            outcome.unwrap_or_else(|e| panic!("{group_commit:?}: {who}: {e}"));
        }
        assert_eq!(
            storage.get_max_commit_seq("p").unwrap(),
            (PUSHERS * EACH) as i64,
            "{group_commit:?}"
        );
    }
}

#[test]
fn a_duplicate_inside_the_group_is_not_replayed_before_the_commit() {
    for fail in [false, true] {
        let db = Db::new();
        let storage = grouped(&db);
        let (leader, first) = staged(&storage, "a", "1", "a").unwrap();
        let duplicate = thread::scope(|scope| {
            let s = &storage;
            let duplicate = scope.spawn(move || {
                let mut tx = s.begin("p").unwrap();
                tx.lock_partition_for_push().unwrap();
                let read = tx.get_push_result("a", "1");
                tx.rollback().unwrap();
                read
            });
            storage.await_queued_writers(1, 0).unwrap();
            if fail {
                storage
                    .set_fault_plan(Some(FaultPlan::at_statement("COMMIT", FaultKind::Fail)))
                    .unwrap();
            }
            let committed = leader.commit();
            assert_eq!(committed.is_ok(), !fail, "{committed:?}");
            duplicate.join().unwrap()
        });
        // The stored result is visible inside the group before its COMMIT:
        // answering the duplicate with it could acknowledge a push whose
        // group then fails. The duplicate is refused, retryably.
        let error = duplicate.unwrap_err();
        assert_eq!(error.code(), ErrorCode::Busy, "{error:?}");
        assert_eq!(error.get_detail("reason"), Some("pending_in_commit_group"));
        storage.set_fault_plan(None).unwrap();
        let stored = storage.get_push_result("p", "a", "1").unwrap();
        assert_eq!(stored.is_some(), !fail);
        if !fail {
            assert_eq!(stored.unwrap().commit_seq, Some(first));
        }
    }
}

/// One two-member group (a staged and holding the writer, b queued behind
/// it) under `plan`: each push's outcome.
fn two_member_group(
    storage: &SqliteStorage,
    plan: Arc<FaultPlan>,
) -> (Result<i64, Error>, Result<i64, Error>) {
    storage.set_fault_plan(Some(plan)).unwrap();
    let outcomes = match staged(storage, "a", "1", "a") {
        Err(error) => (Err(error), push_result(storage, "b", "1")),
        Ok((leader, first)) => thread::scope(|scope| {
            let b = scope.spawn(move || push_result(storage, "b", "1"));
            storage.await_queued_writers(1, 0).unwrap();
            let a = leader.commit().map(|()| first);
            (a, b.join().unwrap())
        }),
    };
    storage.set_fault_plan(None).unwrap();
    outcomes
}

#[test]
fn a_fault_at_any_statement_of_a_group_loses_no_acknowledged_push() {
    let db = Db::new();
    let storage = grouped(&db);
    let dry = FaultPlan::count_only();
    let (a, b) = two_member_group(&storage, dry.clone());
    assert_eq!((a.unwrap(), b.unwrap()), (1, 2));
    assert_eq!(commits_in(&dry), 1, "{:?}", dry.statement_log());
    let statements = dry.statements();
    let mut faults = 0;
    for n in 1..=statements {
        for kind in [FaultKind::Fail, FaultKind::Busy, FaultKind::ConnectionLost] {
            let db = Db::new();
            let storage = grouped(&db);
            let plan = FaultPlan::at(n, kind);
            let (a, b) = two_member_group(&storage, plan.clone());
            assert!(plan.fired(), "statement {n} {kind:?}");
            faults += 1;
            let what = format!(
                "statement {n} ({}) {kind:?}",
                dry.statement_log()[n as usize - 1]
            );
            let mut acknowledged = Vec::new();
            for (client, outcome) in [("a", a), ("b", b)] {
                let stored = storage.get_push_result("p", client, "1").unwrap();
                let row = storage
                    .get_row("p", "tasks", &format!("row-{client}-1"))
                    .unwrap();
                match outcome {
                    Ok(seq) => {
                        assert_eq!(stored.and_then(|r| r.commit_seq), Some(seq), "{what}");
                        assert!(row.is_some(), "{what}: {client}'s row");
                        acknowledged.push(seq);
                    }
                    Err(error) => {
                        assert!(
                            error.code().as_str().starts_with("sync.storage."),
                            "{what}: {error:?}"
                        );
                        assert_eq!(stored, None, "{what}: {client} failed but is stored");
                        assert_eq!(row, None, "{what}: {client}'s row");
                    }
                }
            }
            acknowledged.sort_unstable();
            let dense: Vec<i64> = (1..=acknowledged.len() as i64).collect();
            assert_eq!(acknowledged, dense, "{what}");
            assert_eq!(
                storage.get_max_commit_seq("p").unwrap(),
                acknowledged.len() as i64,
                "{what}"
            );
            // The writer is usable again.
            assert!(push_result(&storage, "c", "1").is_ok(), "{what}");
        }
    }
    println!("group fault sweep: {statements} statements, {faults} faults injected");
}
