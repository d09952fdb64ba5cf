//! The `-wal` and `-shm` beside a database file: a database is never
//! created where they stand without their file (they hold the acknowledged
//! commits of a database moved away), and a read-only inspection of a
//! closed database creates neither.

mod common;

use std::path::{Path, PathBuf};

use common::*;
use sync_core::{ErrorCode, ServerStorage};
use sync_sqlite::{SqliteConfig, SqliteStorage};

fn beside(file: &Path, suffix: &str) -> PathBuf {
    let mut name = file.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// The companion files standing beside `file`.
fn companions(file: &Path) -> Vec<String> {
    ["-wal", "-shm", "-journal"]
        .into_iter()
        .filter(|suffix| beside(file, suffix).exists())
        .map(str::to_owned)
        .collect()
}

/// The live file renamed away, the process gone without closing (its
/// connections are leaked, as a kill leaves them), a restart at the same
/// path: refused, nothing created, the `-wal` untouched; moved back, the
/// acknowledged commit is there.
#[test]
fn a_stranded_wal_is_never_replaced_by_a_new_database() {
    let db = Db::new();
    let storage = db.ready();
    push(&storage, "acme", "c1", "cc1", &[task_row("t1", "p1", "a")]);
    let moved = db.dir.path().join("moved.db");
    std::fs::rename(db.path(), &moved).expect("rename the live file away");
    std::mem::forget(storage);
    let wal = beside(&db.path(), "-wal");
    let wal_before = std::fs::read(&wal).expect("the -wal stays at the old path");

    let error = SqliteStorage::open(db.path(), SqliteConfig::default())
        .expect_err("a database must not be created beside a stranded -wal");
    assert_eq!(error.code(), ErrorCode::StrandedJournal, "{error:?}");
    assert_eq!(error.code().as_str(), "sync.storage.stranded_journal");
    assert_eq!(
        error.get_detail("path"),
        Some(db.path().display().to_string().as_str())
    );
    let found = error.get_detail("found").unwrap_or_default();
    assert!(found.contains("sync.db-wal"), "{found}");
    assert!(error.message().contains("move them back"), "{error}");
    let read_only = SqliteStorage::open_read_only(db.path(), SqliteConfig::default())
        .expect_err("nor opened for inspection");
    assert_eq!(read_only.code(), ErrorCode::StrandedJournal);

    assert!(!db.path().exists(), "no database was created");
    assert_eq!(std::fs::read(&wal).expect("the -wal is kept"), wal_before);

    std::fs::rename(&moved, db.path()).expect("move the file back");
    let reopened = db.open();
    assert_eq!(reopened.get_max_commit_seq("acme").unwrap(), 1);
}

#[test]
fn a_lone_shm_is_stranded_too_and_a_missing_file_alone_is_created() {
    let db = Db::new();
    std::fs::write(beside(&db.path(), "-shm"), b"").unwrap();
    let error = SqliteStorage::open(db.path(), SqliteConfig::default()).unwrap_err();
    assert_eq!(error.code(), ErrorCode::StrandedJournal);
    assert!(!db.path().exists());
    std::fs::remove_file(beside(&db.path(), "-shm")).unwrap();
    db.ready();
    assert!(db.path().exists());
}

#[test]
fn inspecting_a_closed_database_leaves_no_file_behind() {
    let db = Db::new();
    let storage = db.ready();
    push(&storage, "acme", "c1", "cc1", &[task_row("t1", "p1", "a")]);
    drop(storage);
    assert_eq!(companions(&db.path()), Vec::<String>::new(), "closed");

    let inspect = SqliteStorage::open_read_only(db.path(), SqliteConfig::default()).unwrap();
    assert_eq!(inspect.get_max_commit_seq("acme").unwrap(), 1);
    assert!(inspect
        .get_push_result("acme", "c1", "cc1")
        .unwrap()
        .is_some());
    assert_eq!(
        companions(&db.path()),
        Vec::<String>::new(),
        "while inspecting"
    );
    drop(inspect);
    assert_eq!(companions(&db.path()), Vec::<String>::new(), "afterwards");
}

/// A writer that opens the file after an inspection did makes the
/// inspection's reads refuse (they could be inconsistent); an inspection
/// opened beside a live writer reads through its WAL and sees each commit.
#[test]
fn an_inspection_sees_a_live_writer_consistently() {
    let db = Db::new();
    drop(db.ready());
    let early = SqliteStorage::open_read_only(db.path(), SqliteConfig::default()).unwrap();
    assert_eq!(early.get_max_commit_seq("acme").unwrap(), 0);

    let writer = db.ready();
    push(&writer, "acme", "c1", "cc1", &[task_row("t1", "p1", "a")]);
    let error = early.get_max_commit_seq("acme").unwrap_err();
    assert_eq!(error.code(), ErrorCode::Busy, "{error:?}");
    assert_eq!(error.get_detail("reason"), Some("writer_opened"));

    let live = SqliteStorage::open_read_only(db.path(), SqliteConfig::default()).unwrap();
    assert_eq!(live.get_max_commit_seq("acme").unwrap(), 1);
    push(&writer, "acme", "c1", "cc2", &[task_row("t2", "p1", "b")]);
    assert_eq!(live.get_max_commit_seq("acme").unwrap(), 2);
    assert!(live.get_push_result("acme", "c1", "cc2").unwrap().is_some());
}
