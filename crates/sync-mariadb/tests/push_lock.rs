//! The partition push lock, one statement (the meta row's share lock and
//! the partition row's insert-or-update): two transactions on one
//! partition serialize — the second is still in its lock statement (the
//! server's process list shows it) when the first commits, and its first
//! read after the lock sees the first's commit — whether the partition row
//! existed or the first push created it, and also on a database without a
//! schema (no meta row); transactions on different partitions, new or
//! existing, do not wait for each other.

use mysql::prelude::Queryable;
use sync_conformance::fixtures::{self, Op, PushOutcome};
use sync_core::{
    EnsureOptions, NewChange, NewCommit, Result, ServerStorage, StorageTransaction,
    StoredPushResult,
};
use sync_mariadb::scratch::{url_from_env, ScratchDatabase};
use sync_mariadb::{MariadbConfig, MariadbStorage};

fn scratch() -> ScratchDatabase {
    ScratchDatabase::from_env()
        .unwrap_or_else(|e| panic!("cannot reach MariaDB at {} ({e:?})", url_from_env()))
}

/// A storage whose lock waits end after a second (`busy`), so that a
/// lock that should not be waited for fails the test quickly.
fn open(db: &ScratchDatabase, ensure: bool) -> MariadbStorage {
    let config = MariadbConfig {
        push_lock_timeout_ms: Some(1_000),
        ..MariadbConfig::default()
    };
    let storage = MariadbStorage::connect_to(db.url().clone(), config).expect("connect");
    if ensure {
        storage
            .ensure_schema(&fixtures::fix1().expect("fix1"), &EnsureOptions::default())
            .expect("ensure");
    }
    storage
}

/// How many times [`wait_for_lock_statement`] looks (one round trip each).
const WAIT_POLLS: u32 = 100_000;

/// Returns once another session of the database is in the middle of the
/// partition lock's statement. The test holds that lock, so the session
/// waits there; a statement that did not wait would return at once (and
/// the read after it would miss the first push's commit).
fn wait_for_lock_statement(db: &ScratchDatabase) {
    let mut side = db.raw().expect("side connection");
    for _ in 0..WAIT_POLLS {
        let running: Option<i64> = side
            .exec_first(
                "SELECT COUNT(*) FROM information_schema.PROCESSLIST \
                 WHERE DB = ? AND ID <> CONNECTION_ID() \
                 AND INFO LIKE 'INSERT INTO `sync_partitions`%'",
                (db.url().database(),),
            )
            .expect("PROCESSLIST");
        if running.unwrap_or(0) > 0 {
            return;
        }
    }
    panic!("no session of the database ran the partition lock's statement");
}

/// Stages one single-row commit in a locked transaction; its sequence.
fn stage_commit(tx: &mut dyn StorageTransaction, ccid: &str) -> Result<i64> {
    let schema = fixtures::fix1().expect("fix1");
    let row = fixtures::task(&schema, &format!("row-{ccid}"), "p1", ccid).expect("row");
    tx.upsert_row("tasks", &row, Some(0))?;
    let seq = tx.append_commit(&NewCommit {
        client_id: "c1".to_owned(),
        client_commit_id: ccid.to_owned(),
        actor_id: "actor:c1".to_owned(),
        created_at_ms: 1_700_000_000_000,
        changes: vec![NewChange::upsert(
            "tasks",
            row.row_id.clone(),
            row.server_version,
            row.scopes.clone(),
            row.payload.clone(),
        )],
    })?;
    tx.put_push_result("c1", ccid, &StoredPushResult::applied(seq))?;
    Ok(seq)
}

/// A push on another thread: lock, the counter it then reads, its commit.
fn locked_push(storage: &MariadbStorage, partition: &str, ccid: &str) -> Result<(i64, i64)> {
    let mut tx = storage.begin(partition)?;
    tx.lock_partition_for_push()?;
    let seen = tx.max_commit_seq()?;
    let seq = stage_commit(tx.as_mut(), ccid)?;
    tx.commit()?;
    Ok((seen, seq))
}

#[test]
fn two_pushes_to_one_partition_serialize() {
    for existing in [false, true] {
        let db = scratch();
        let storage = open(&db, true);
        if existing {
            let schema = fixtures::fix1().expect("fix1");
            let row = fixtures::task(&schema, "seed", "p1", "seed").expect("row");
            let seeded =
                fixtures::push(&storage, "acme", "c0", "seed", &[Op::upsert("tasks", row)]);
            assert_eq!(seeded.expect("seed"), PushOutcome::Applied(1));
        }
        let before = i64::from(existing);
        let mut first = storage.begin("acme").expect("begin");
        first.lock_partition_for_push().expect("lock");
        let first_seq = stage_commit(first.as_mut(), "first").expect("first");
        assert_eq!(first_seq, before + 1);
        let (seen, second_seq) = std::thread::scope(|s| {
            let second = s.spawn(|| locked_push(&storage, "acme", "second"));
            // The second transaction waits for the lock the first holds.
            wait_for_lock_statement(&db);
            first.commit().expect("first commit");
            second.join().expect("second thread").expect("second push")
        });
        assert_eq!(
            seen, first_seq,
            "existing {existing}: the second push read the first's commit right after its lock"
        );
        assert_eq!(second_seq, first_seq + 1, "existing {existing}");
        assert_eq!(storage.get_max_commit_seq("acme").expect("seq"), second_seq);
    }
}

#[test]
fn the_lock_serializes_on_a_database_without_a_schema() {
    let db = scratch();
    let storage = open(&db, false);
    let mut first = storage.begin("acme").expect("begin");
    first.lock_partition_for_push().expect("lock");
    std::thread::scope(|s| {
        let second = s.spawn(|| -> Result<()> {
            let mut tx = storage.begin("acme")?;
            tx.lock_partition_for_push()?;
            tx.rollback()
        });
        wait_for_lock_statement(&db);
        first.commit().expect("first commit");
        second.join().expect("second thread").expect("second lock");
    });
    assert_eq!(storage.get_max_commit_seq("acme").expect("seq"), 0);
}

#[test]
fn pushes_to_different_partitions_do_not_wait_for_each_other() {
    for existing in [false, true] {
        let db = scratch();
        let storage = open(&db, true);
        if existing {
            for partition in ["p-a", "p-b"] {
                let schema = fixtures::fix1().expect("fix1");
                let row = fixtures::task(&schema, "seed", "p1", "seed").expect("row");
                let seeded = fixtures::push(
                    &storage,
                    partition,
                    "c0",
                    "seed",
                    &[Op::upsert("tasks", row)],
                );
                assert_eq!(seeded.expect("seed"), PushOutcome::Applied(1));
            }
        }
        let before = i64::from(existing);
        // One thread: a wait would end in `busy` after the one-second lock
        // wait instead of a hang.
        let mut a = storage.begin("p-a").expect("begin a");
        a.lock_partition_for_push().expect("lock a");
        let a_seq = stage_commit(a.as_mut(), "a").expect("a");
        let mut b = storage.begin("p-b").expect("begin b");
        b.lock_partition_for_push()
            .expect("the other partition's lock is not held");
        let b_seq = stage_commit(b.as_mut(), "b").expect("b");
        b.commit().expect("b commits while a is open");
        a.commit().expect("a commit");
        assert_eq!(
            (a_seq, b_seq),
            (before + 1, before + 1),
            "existing {existing}"
        );
    }
}
