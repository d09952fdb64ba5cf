//! `append_commit` deferred to the `COMMIT` message under the push lock:
//! the sequences it returns, the writer fence before and after the lock,
//! literal encoding of every value, and the commits that stay eager.
//!
//! With the `fault-injection` feature the tests also count the statements
//! `append_commit` sends (none when deferred, at least one when eager);
//! without it those path assertions are skipped and the outcomes are still
//! checked.

mod common;

use common::*;
use sync_core::{
    ChangeOp, CommitRecord, ErrorCode, NewChange, NewCommit, PushStatus, ServerStorage,
    StorageTransaction, StoredPushResult,
};
use sync_postgres::PostgresStorage;

/// Counts the statements a storage sends (feature `fault-injection`).
struct Statements {
    #[cfg(feature = "fault-injection")]
    plan: std::sync::Arc<sync_core::fault::FaultPlan>,
}

impl Statements {
    /// Installs a counting plan on `storage` (attached to later checkouts).
    fn install(storage: &PostgresStorage) -> Self {
        #[cfg(feature = "fault-injection")]
        {
            let plan = sync_core::fault::FaultPlan::count_only();
            storage.set_fault_plan(Some(plan.clone()));
            Self { plan }
        }
        #[cfg(not(feature = "fault-injection"))]
        {
            let _ = storage;
            Self {}
        }
    }

    /// Statements sent so far, `None` without the feature.
    fn now(&self) -> Option<u64> {
        #[cfg(feature = "fault-injection")]
        return Some(self.plan.statements());
        #[cfg(not(feature = "fault-injection"))]
        None
    }

    /// Runs `append` and asserts whether it sent a statement.
    fn append(
        &self,
        tx: &mut dyn StorageTransaction,
        commit: &NewCommit,
        deferred: bool,
    ) -> sync_core::Result<i64> {
        let before = self.now();
        let result = tx.append_commit(commit);
        if let (Some(before), Some(after)) = (before, self.now()) {
            assert_eq!(
                after == before,
                deferred,
                "append_commit sent {} statement(s); expected it {}",
                after - before,
                if deferred { "deferred" } else { "eager" }
            );
        }
        result
    }
}

fn commits(storage: &PostgresStorage, partition: &str) -> Vec<CommitRecord> {
    storage.read_commits(partition, 0, 1000).unwrap()
}

/// Asserts that a failed push left nothing behind in `partition`.
fn assert_nothing_persisted(db: &TestDb, storage: &PostgresStorage, partition: &str, seq: i64) {
    assert_eq!(storage.get_max_commit_seq(partition).unwrap(), seq);
    assert_eq!(
        db.count(&format!(
            "SELECT count(*) FROM sync_commits WHERE partition = '{partition}' AND commit_seq > {seq}"
        )),
        0
    );
    assert_eq!(
        db.count(&format!(
            "SELECT count(*) FROM sync_changes WHERE partition = '{partition}' AND commit_seq > {seq}"
        )),
        0
    );
    assert_eq!(storage.get_row(partition, "tasks", "late").unwrap(), None);
    assert_eq!(
        storage.get_push_result(partition, "c", "late").unwrap(),
        None
    );
}

#[test]
fn deferred_appends_return_the_sequences_the_database_stores() {
    let db = TestDb::new();
    let storage = ensured(&db);
    let statements = Statements::install(&storage);
    let schema = fix1();

    // Two pushes in a row, each with its own lock.
    for (n, id) in ["a", "b"].into_iter().enumerate() {
        let row = task_row(&schema, id, "p1", id, 1);
        let mut tx = storage.begin("acme").unwrap();
        tx.lock_partition_for_push().unwrap();
        tx.upsert_row("tasks", &row, Some(0)).unwrap();
        let seq = statements
            .append(
                tx.as_mut(),
                &commit("c", id, vec![upsert_change(&row, "tasks")]),
                true,
            )
            .unwrap();
        assert_eq!(seq, n as i64 + 1);
        tx.put_push_result("c", id, &StoredPushResult::applied(seq))
            .unwrap();
        tx.commit().unwrap();
        assert_eq!(
            storage.get_push_result("acme", "c", id).unwrap(),
            Some(StoredPushResult::applied(seq))
        );
    }

    // Two appends in one transaction, then a read that flushes them.
    let mut tx = storage.begin("acme").unwrap();
    tx.lock_partition_for_push().unwrap();
    let first = statements
        .append(tx.as_mut(), &commit("c", "c1", vec![]), true)
        .unwrap();
    let second = statements
        .append(tx.as_mut(), &commit("c", "c2", vec![]), true)
        .unwrap();
    assert_eq!((first, second), (3, 4));
    assert_eq!(tx.max_commit_seq().unwrap(), 4, "the read flushes both");
    let third = statements
        .append(tx.as_mut(), &commit("c", "c3", vec![]), true)
        .unwrap();
    assert_eq!(third, 5);
    tx.commit().unwrap();

    assert_eq!(storage.get_max_commit_seq("acme").unwrap(), 5);
    let stored: Vec<(i64, String)> = commits(&storage, "acme")
        .into_iter()
        .map(|c| (c.commit_seq, c.client_commit_id))
        .collect();
    assert_eq!(
        stored,
        vec![
            (1, "a".to_owned()),
            (2, "b".to_owned()),
            (3, "c1".to_owned()),
            (4, "c2".to_owned()),
            (5, "c3".to_owned()),
        ]
    );
    assert_eq!(
        storage
            .get_row("acme", "tasks", "b")
            .unwrap()
            .unwrap()
            .row_id,
        "b"
    );
}

#[test]
fn a_fence_declared_after_the_lock_fails_the_flushing_commit_and_persists_nothing() {
    let db = TestDb::new();
    let storage = ensured(&db);
    let statements = Statements::install(&storage);
    let schema = fix1();
    push(&storage, "acme", "c", "first", &[]).unwrap();
    let row = task_row(&schema, "late", "p1", "late", 1);

    let mut tx = storage.begin("acme").unwrap();
    tx.lock_partition_for_push().unwrap();
    tx.upsert_row("tasks", &row, Some(0)).unwrap();
    let seq = statements
        .append(
            tx.as_mut(),
            &commit("c", "late", vec![upsert_change(&row, "tasks")]),
            true,
        )
        .unwrap();
    assert_eq!(seq, 2);
    // Another connection declares a fence above this writer meanwhile.
    db.raw()
        .batch_execute(
            "INSERT INTO sync_writer_fence (partition, required_writer_version) VALUES ('acme', 5)",
        )
        .unwrap();
    tx.put_push_result("c", "late", &StoredPushResult::applied(seq))
        .unwrap();
    assert_eq!(
        tx.commit().unwrap_err().code(),
        ErrorCode::WriterFenceRejected
    );
    assert_nothing_persisted(&db, &storage, "acme", 1);
}

#[test]
fn a_fence_declared_after_the_lock_fails_the_next_statement_and_poisons() {
    let db = TestDb::new();
    let storage = ensured(&db);
    let schema = fix1();
    push(&storage, "acme", "c", "first", &[]).unwrap();
    let row = task_row(&schema, "late", "p1", "late", 1);

    let mut tx = storage.begin("acme").unwrap();
    tx.lock_partition_for_push().unwrap();
    tx.upsert_row("tasks", &row, Some(0)).unwrap();
    assert_eq!(
        tx.append_commit(&commit("c", "late", vec![upsert_change(&row, "tasks")]))
            .unwrap(),
        2
    );
    db.raw()
        .batch_execute("UPDATE sync_schema_meta SET required_writer_version = 5 WHERE id = 1")
        .unwrap();
    // The read flushes the append first: the trigger refuses it there.
    assert_eq!(
        tx.get_row("tasks", "late").unwrap_err().code(),
        ErrorCode::WriterFenceRejected
    );
    assert_eq!(
        tx.put_push_result("c", "late", &StoredPushResult::applied(2))
            .unwrap_err()
            .code(),
        ErrorCode::TransactionAborted
    );
    assert_eq!(
        tx.commit().unwrap_err().code(),
        ErrorCode::TransactionAborted
    );
    assert_nothing_persisted(&db, &storage, "acme", 1);
}

#[test]
fn a_fence_present_at_the_lock_is_reported_by_append_commit_itself() {
    let db = TestDb::new();
    let storage = ensured(&db);
    let statements = Statements::install(&storage);
    let schema = fix1();
    let row = task_row(&schema, "late", "p1", "late", 1);
    push(&storage, "p-fenced", "c", "first", &[]).unwrap();
    push(&storage, "db-fenced", "c", "first", &[]).unwrap();
    db.raw()
        .batch_execute("INSERT INTO sync_writer_fence (partition, required_writer_version) VALUES ('p-fenced', 2)")
        .unwrap();

    let attempt = |partition: &str| {
        let mut tx = storage.begin(partition).unwrap();
        tx.lock_partition_for_push().unwrap();
        tx.upsert_row("tasks", &row, Some(0)).unwrap();
        let error = statements
            .append(
                tx.as_mut(),
                &commit("c", "late", vec![upsert_change(&row, "tasks")]),
                false,
            )
            .unwrap_err();
        assert_eq!(error.code(), ErrorCode::WriterFenceRejected, "{partition}");
        assert_eq!(
            tx.commit_rejected_push_result("c", "late", &StoredPushResult::applied(2))
                .unwrap_err()
                .code(),
            ErrorCode::TransactionAborted
        );
        assert_nothing_persisted(&db, &storage, partition, 1);
    };
    // The partition's own fence.
    attempt("p-fenced");
    // The database-wide fence (the partition has none).
    db.raw()
        .batch_execute("UPDATE sync_schema_meta SET required_writer_version = 2 WHERE id = 1")
        .unwrap();
    attempt("db-fenced");
}

/// Text no literal may mangle: quotes, backslashes, `E'…'` look-alikes,
/// SQL comment and statement separators, non-ASCII.
const HOSTILE: &str = "o'neil \\ \\\\ \"q\" E'\\x00' $1 -- ; /* */ é 日本 🦀 \u{2028}";

fn hostile_commit(ccid: &str) -> NewCommit {
    let hostile_scopes = scopes(&[("project_id", HOSTILE), ("org'\\id", "a\\'b")]);
    NewCommit {
        client_id: format!("client {HOSTILE}"),
        client_commit_id: format!("{ccid} {HOSTILE}"),
        actor_id: format!("actor {HOSTILE}"),
        created_at_ms: -1,
        changes: vec![
            NewChange::upsert(
                "tasks",
                format!("row {HOSTILE}"),
                i64::MAX,
                hostile_scopes.clone(),
                (0..=255u8).collect(),
            ),
            NewChange::upsert("docs", "empty", 1, scopes(&[]), Vec::new()),
            NewChange::delete("tasks", format!("gone {HOSTILE}"), hostile_scopes.clone()),
            NewChange::delete("docs", "gone", scopes(&[("org_id", "\\")])),
            NewChange::upsert(
                "tasks",
                "rowish",
                7,
                hostile_scopes,
                vec![0, b'\'', b'\\', 0],
            ),
        ],
    }
}

/// What the append wrote for one partition, as text, outside the API.
fn raw_rows(db: &TestDb, partition: &str) -> Vec<String> {
    let mut client = db.raw();
    let sql = [
        "SELECT format('%s|%s|%s|%s|%s', commit_seq, client_id, client_commit_id, actor_id, \
           created_at_ms || '/' || writer_version) FROM sync_commits WHERE partition = $1 ORDER BY 1",
        "SELECT format('%s|%s|%s|%s|%s|%s|%s|%s', commit_seq, idx, tbl, row_id, op, row_version, \
           scopes::text, encode(payload, 'hex')) FROM sync_changes WHERE partition = $1 ORDER BY 1",
        "SELECT format('%s|%s|%s|%s', tbl, var, value, commit_seq) FROM sync_change_scopes \
           WHERE partition = $1 ORDER BY 1",
        "SELECT format('%s|%s|%s', tbl, row_id, commit_seq) FROM sync_tombstones \
           WHERE partition = $1 ORDER BY 1",
    ];
    sql.iter()
        .flat_map(|q| {
            client
                .query(*q, &[&partition])
                .unwrap()
                .into_iter()
                .map(|r| r.get::<_, String>(0))
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn a_deferred_append_stores_every_byte_and_hostile_text_exactly() {
    let db = TestDb::new();
    let storage = ensured(&db);
    let statements = Statements::install(&storage);
    let commit = hostile_commit("deferred");

    // Deferred: under the push lock.
    let mut tx = storage.begin("deferred").unwrap();
    tx.lock_partition_for_push().unwrap();
    assert_eq!(statements.append(tx.as_mut(), &commit, true).unwrap(), 1);
    tx.commit().unwrap();
    // Eager: the same commit without the push lock, in another partition.
    let mut tx = storage.begin("eager").unwrap();
    assert_eq!(statements.append(tx.as_mut(), &commit, false).unwrap(), 1);
    tx.commit().unwrap();

    for partition in ["deferred", "eager"] {
        let stored = commits(&storage, partition);
        assert_eq!(stored.len(), 1, "{partition}");
        let record = &stored[0];
        assert_eq!(record.commit_seq, 1);
        assert_eq!(record.client_id, commit.client_id);
        assert_eq!(record.client_commit_id, commit.client_commit_id);
        assert_eq!(record.actor_id, commit.actor_id);
        assert_eq!(record.created_at_ms, commit.created_at_ms);
        assert_eq!(record.writer_version, Some(1));
        assert_eq!(record.changes, commit.changes, "{partition}");
    }
    assert_eq!(
        raw_rows(&db, "deferred"),
        raw_rows(&db, "eager"),
        "the literal statement writes what the prepared one writes"
    );
    assert_eq!(
        db.count("SELECT count(*) FROM sync_tombstones WHERE partition = 'deferred'"),
        2
    );
    let deletes = commits(&storage, "deferred")[0]
        .changes
        .iter()
        .filter(|c| c.op == ChangeOp::Delete)
        .count();
    assert_eq!(deletes, 2);
}

/// One more change than a single append statement carries (`CHANGE_BATCH`).
const OVER_ONE_BATCH: usize = 4097;

#[test]
fn commits_the_literal_form_cannot_carry_are_appended_eagerly() {
    let db = TestDb::new();
    let storage = ensured(&db);
    let statements = Statements::install(&storage);
    let schema = fix1();
    let row = task_row(&schema, "r", "p1", "r", 1);

    let mut tx = storage.begin("acme").unwrap();
    tx.lock_partition_for_push().unwrap();
    // More changes than one statement batch: eager, several statements.
    let many: Vec<NewChange> = (0..OVER_ONE_BATCH)
        .map(|i| {
            let mut change = upsert_change(&row, "tasks");
            change.row_id = format!("r{i}");
            change
        })
        .collect();
    assert_eq!(
        statements
            .append(tx.as_mut(), &commit("c", "many", many), false)
            .unwrap(),
        1
    );
    // A literal statement above the size cap: eager.
    let mut big = upsert_change(&row, "tasks");
    big.payload = Some(vec![0xab; 200 * 1024]);
    assert_eq!(
        statements
            .append(tx.as_mut(), &commit("c", "big", vec![big.clone()]), false)
            .unwrap(),
        2
    );
    // The counter stays known after eager appends: the next one defers.
    assert_eq!(
        statements
            .append(tx.as_mut(), &commit("c", "small", vec![]), true)
            .unwrap(),
        3
    );
    tx.commit().unwrap();
    assert_eq!(storage.get_max_commit_seq("acme").unwrap(), 3);
    let stored = commits(&storage, "acme");
    assert_eq!(
        stored.iter().map(|c| c.changes.len()).collect::<Vec<_>>(),
        vec![OVER_ONE_BATCH, 1, 0]
    );
    assert_eq!(stored[1].changes[0], big);

    // A NUL in a text: eager, and refused by `append_commit` as before.
    let mut tx = storage.begin("acme").unwrap();
    tx.lock_partition_for_push().unwrap();
    let mut nul = commit("c", "nul", vec![]);
    nul.actor_id = "a\0b".into();
    let error = statements.append(tx.as_mut(), &nul, false).unwrap_err();
    assert_eq!(error.code(), ErrorCode::Backend);
    assert_eq!(
        tx.commit().unwrap_err().code(),
        ErrorCode::TransactionAborted
    );
    assert_eq!(storage.get_max_commit_seq("acme").unwrap(), 3);
}

fn rejected() -> StoredPushResult {
    StoredPushResult {
        status: PushStatus::Rejected,
        commit_seq: None,
        recorded_at_ms: Some(NOW),
        cache_identity: None,
        results: vec![],
        actor_id: None,
    }
}

#[test]
fn a_rejection_discards_deferred_appends() {
    let db = TestDb::new();
    let storage = ensured(&db);
    let schema = fix1();
    let row = task_row(&schema, "t1", "p1", "same title", 1);
    push(&storage, "acme", "c", "first", &[row]).unwrap();

    // Still pending when the rejection is finalized.
    let mut tx = storage.begin("acme").unwrap();
    tx.lock_partition_for_push().unwrap();
    assert_eq!(tx.append_commit(&commit("c", "second", vec![])).unwrap(), 2);
    tx.commit_rejected_push_result("c", "second", &rejected())
        .unwrap();
    assert_eq!(storage.get_max_commit_seq("acme").unwrap(), 1);

    // Flushed by a later upsert that violates the unique index, then
    // rolled back to the savepoint with it.
    let mut tx = storage.begin("acme").unwrap();
    tx.lock_partition_for_push().unwrap();
    assert_eq!(tx.append_commit(&commit("c", "third", vec![])).unwrap(), 2);
    let clash = task_row(&schema, "t2", "p1", "same title", 1);
    assert_eq!(
        tx.upsert_row("tasks", &clash, Some(0)).unwrap_err().code(),
        ErrorCode::ConstraintViolation
    );
    tx.commit_rejected_push_result("c", "third", &rejected())
        .unwrap();

    assert_eq!(storage.get_max_commit_seq("acme").unwrap(), 1);
    assert_eq!(commits(&storage, "acme").len(), 1);
    for ccid in ["second", "third"] {
        assert_eq!(
            storage.get_push_result("acme", "c", ccid).unwrap(),
            Some(rejected())
        );
    }
    // The counter moves on from where it was.
    assert_eq!(push(&storage, "acme", "c", "fourth", &[]).unwrap(), 2);
}
