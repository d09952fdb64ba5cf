//! The database file under a live storage: unlinked or renamed, it is
//! refused (the retryable `sync.storage.unavailable`, `cause = moved`)
//! before anything is acknowledged, by writers and readers alike, and no empty file replaces
//! it; read-only, missing-directory and corrupt files say so in
//! `details.cause` at open / ensure time.

mod common;

use common::*;
use sync_core::{
    EnsureOptions, Error, ErrorCode, ServerStorage, StorageTransaction, StoredPushResult,
};
use sync_sqlite::{SqliteConfig, SqliteStorage};

/// A moved file clears without a restart (the file put back): the
/// retryable `unavailable`; every other cause here is `backend`.
fn assert_cause(result: Result<impl std::fmt::Debug, Error>, cause: &str, what: &str) {
    let error = result.expect_err(what);
    let (code, retryable) = if cause == "moved" {
        (ErrorCode::Unavailable, true)
    } else {
        (ErrorCode::Backend, false)
    };
    assert_eq!(error.code(), code, "{what}: {error:?}");
    assert_eq!(error.retryable(), retryable, "{what}: {error:?}");
    assert_eq!(error.get_detail("cause"), Some(cause), "{what}: {error:?}");
}

/// A push that stops before its commit, returning the open transaction.
fn staged_push<'s>(storage: &'s SqliteStorage, ccid: &str) -> Box<dyn StorageTransaction + 's> {
    let row = task_row(&format!("row-{ccid}"), "p1", "x");
    let mut tx = storage.begin("acme").expect("begin");
    tx.lock_partition_for_push().expect("lock");
    tx.upsert_row("tasks", &row, Some(0)).expect("upsert");
    let seq = tx
        .append_commit(&commit_of("c1", ccid, vec![upsert_change(&row)]))
        .expect("append");
    tx.put_push_result("c1", ccid, &StoredPushResult::applied(seq))
        .expect("put result");
    tx
}

#[test]
fn an_unlinked_database_file_refuses_writes_and_reads_and_is_not_recreated() {
    let db = Db::new();
    let storage = db.ready();
    push(&storage, "acme", "c1", "cc1", &[task_row("t1", "p1", "a")]);
    // A transaction open when the file goes: its commit is refused.
    let tx = staged_push(&storage, "cc2");
    std::fs::remove_file(db.path()).expect("unlink");
    assert_cause(tx.commit(), "moved", "commit after unlink");
    assert_cause(
        storage.begin("acme").map(drop),
        "moved",
        "begin after unlink",
    );
    assert_cause(
        storage.get_max_commit_seq("acme"),
        "moved",
        "read after unlink",
    );
    assert_cause(
        storage.touch_partition("acme", NOW, "e1"),
        "moved",
        "pool write after unlink",
    );
    assert!(
        !db.path().exists(),
        "no empty file replaced the unlinked one"
    );
}

#[test]
fn a_renamed_database_file_acknowledges_nothing_while_it_is_away() {
    let db = Db::new();
    let storage = db.ready();
    push(&storage, "acme", "c1", "cc1", &[task_row("t1", "p1", "a")]);
    let away = db.dir.path().join("moved.db");
    let tx = staged_push(&storage, "cc2");
    std::fs::rename(db.path(), &away).expect("rename");
    assert_cause(tx.commit(), "moved", "commit while renamed");
    assert_cause(
        storage.begin("acme").map(drop),
        "moved",
        "begin while renamed",
    );
    std::fs::rename(&away, db.path()).expect("rename back");
    // Back in place: nothing of the refused commit is there, and pushes
    // resume.
    assert_eq!(storage.get_max_commit_seq("acme").unwrap(), 1);
    assert!(storage
        .get_push_result("acme", "c1", "cc2")
        .unwrap()
        .is_none());
    assert_eq!(
        push(&storage, "acme", "c1", "cc3", &[task_row("t3", "p1", "c")]),
        2
    );
    // The refused push retried under its own commit id applies once.
    staged_push(&storage, "cc2").commit().expect("retry of cc2");
    assert_eq!(storage.get_max_commit_seq("acme").unwrap(), 3);
    assert_eq!(
        storage
            .get_push_result("acme", "c1", "cc2")
            .unwrap()
            .and_then(|r| r.commit_seq),
        Some(3)
    );
}

#[test]
fn a_database_opened_read_only_says_so_at_ensure_time() {
    let db = Db::new();
    drop(db.ready());
    let uri = format!("file:{}?mode=ro", db.path().display());
    let storage = SqliteStorage::open(&uri, SqliteConfig::with_clock(db.clock.clone()))
        .expect("a read-only database opens");
    assert_cause(
        storage.ensure_schema(&fix1(), &EnsureOptions::default()),
        "read_only",
        "ensure on a read-only database",
    );
    assert_cause(
        storage.begin("acme").map(drop),
        "read_only",
        "begin on a read-only database",
    );
}

#[test]
fn a_missing_directory_says_so_at_open() {
    let db = Db::new();
    let path = db.dir.path().join("no-such-dir").join("sync.db");
    assert_cause(
        SqliteStorage::open(&path, SqliteConfig::with_clock(db.clock.clone())),
        "directory_missing",
        "open in a missing directory",
    );
}

#[test]
fn a_corrupt_file_says_so_at_open() {
    let db = Db::new();
    std::fs::write(db.path(), vec![0x5a_u8; 8192]).expect("write garbage");
    assert_cause(
        SqliteStorage::open(db.path(), SqliteConfig::with_clock(db.clock.clone())),
        "corrupt",
        "open a file that is no database",
    );
}

#[test]
fn read_only_opening_says_why_a_file_cannot_be_opened() {
    let dir = tempfile::tempdir().expect("temporary directory");
    assert_cause(
        SqliteStorage::open_read_only(dir.path().join("no/such/dir/x.db"), SqliteConfig::default()),
        "directory_missing",
        "read-only open in a missing directory",
    );
    let garbage = dir.path().join("garbage.db");
    std::fs::write(&garbage, vec![b'x'; 4096]).expect("write a non-database");
    assert_cause(
        SqliteStorage::open_read_only(&garbage, SqliteConfig::default()),
        "corrupt",
        "read-only open of a file that is not a database",
    );
}
