//! `SqliteConfig::page_size`: the page size of a file the storage creates.
//! A new file takes it, an existing file keeps its own, a size SQLite does
//! not accept is refused before any file is touched, and smaller pages
//! write fewer WAL bytes per push (the reason to offer it).

mod common;

use common::*;
use sync_core::{EnsureOptions, ErrorCode, ServerStorage};
use sync_sqlite::{SqliteConfig, SqliteStorage, Synchronous};

fn config(db: &Db, page_size: Option<u32>) -> SqliteConfig {
    SqliteConfig {
        page_size,
        // The tests count WAL bytes, not syncs.
        synchronous: Synchronous::Normal,
        ..SqliteConfig::with_clock(db.clock.clone())
    }
}

fn ready(db: &Db, page_size: Option<u32>) -> SqliteStorage {
    let storage = db.open_with(config(db, page_size));
    storage
        .ensure_schema(&fix1(), &EnsureOptions::default())
        .unwrap();
    storage
}

fn page_size(db: &Db) -> i64 {
    db.raw()
        .query_row("PRAGMA page_size", [], |row| row.get(0))
        .unwrap()
}

fn task_count(db: &Db) -> i64 {
    db.raw()
        .query_row("SELECT count(*) FROM tasks", [], |row| row.get(0))
        .unwrap()
}

fn wal_bytes(db: &Db) -> u64 {
    let mut wal = db.path().into_os_string();
    wal.push("-wal");
    std::fs::metadata(wal).map_or(0, |m| m.len())
}

#[test]
fn a_new_file_takes_the_configured_page_size() {
    let db = Db::new();
    let storage = ready(&db, Some(512));
    push_many(&storage, 0, 3);
    assert_eq!(page_size(&db), 512);
    let mode: String = db
        .raw()
        .query_row("PRAGMA journal_mode", [], |row| row.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    assert_eq!(task_count(&db), 3);
}

#[test]
fn the_default_is_sqlites_own_page_size() {
    assert_eq!(SqliteConfig::default().page_size, None);
    let db = Db::new();
    let _storage = ready(&db, None);
    assert_eq!(page_size(&db), 4_096);
}

#[test]
fn an_existing_file_keeps_the_page_size_it_was_created_with() {
    let db = Db::new();
    let storage = ready(&db, None);
    push_many(&storage, 0, 2);
    drop(storage);
    let storage = ready(&db, Some(512));
    assert_eq!(page_size(&db), 4_096);
    push(
        &storage,
        "p",
        "c",
        "k-later",
        &[task_row("later", "proj", "later")],
    );
    assert_eq!(task_count(&db), 3);
}

#[test]
fn a_page_size_sqlite_does_not_accept_is_refused_before_any_file_is_touched() {
    for size in [0, 256, 1_000, 131_072] {
        let db = Db::new();
        let error = SqliteStorage::open(db.path(), config(&db, Some(size))).unwrap_err();
        assert_eq!(error.code(), ErrorCode::InvalidArgument, "{size}");
        assert_eq!(error.get_detail("argument"), Some("page_size"), "{size}");
        assert_eq!(
            error.get_detail("page_size"),
            Some(size.to_string().as_str())
        );
        assert!(!db.path().exists(), "{size}: a file was created");
    }
}

#[test]
fn smaller_pages_write_fewer_wal_bytes_per_push() {
    let pushes = 20;
    let mut per_push = Vec::new();
    for size in [Some(512), None] {
        let db = Db::new();
        let storage = ready(&db, size);
        let before = wal_bytes(&db);
        push_many(&storage, 0, pushes);
        per_push.push((wal_bytes(&db) - before) / pushes as u64);
    }
    let (small, default) = (per_push[0], per_push[1]);
    // A push logs one page of every B-tree it touches: about 58 KB at
    // 4 096 bytes a page, 12 KB at 512 (`docs/benchmarks.md`).
    assert!(
        small * 2 < default,
        "WAL bytes per push: {small} at 512-byte pages, {default} at the default"
    );
}
