//! WAL checkpoints off the push path: the writer never checkpoints
//! (`wal_autocheckpoint = 0`), a background thread with its own connection
//! runs `PASSIVE` checkpoints every `every_commits` commits and `TRUNCATE`
//! when the WAL stays above its bound, and it stops with the storage.
//! `run_wal_checkpoint` queues a pass behind the ones already asked for and
//! waits for its report: the tests synchronise on it, never on time.

mod common;

use common::*;
use sync_core::{EnsureOptions, ServerStorage};
use sync_sqlite::{SqliteConfig, SqliteStorage, Synchronous, WalCheckpoints};

fn open(db: &Db, wal: Option<WalCheckpoints>) -> SqliteStorage {
    let storage = db.open_with(SqliteConfig {
        wal_checkpoints: wal,
        // The tests count pages, not syncs.
        synchronous: Synchronous::Normal,
        ..SqliteConfig::with_clock(db.clock.clone())
    });
    storage
        .ensure_schema(&fix1(), &EnsureOptions::default())
        .unwrap();
    storage
}

fn wal_bytes(db: &Db) -> u64 {
    let mut wal = db.path().into_os_string();
    wal.push("-wal");
    std::fs::metadata(wal).map_or(0, |m| m.len())
}

fn page_size(db: &Db) -> u64 {
    db.raw()
        .query_row("PRAGMA page_size", [], |row| row.get(0))
        .unwrap()
}

#[test]
fn background_checkpoints_are_opt_in() {
    assert_eq!(SqliteConfig::default().wal_checkpoints, None);
    let db = Db::new();
    let storage = db.ready();
    push_many(&storage, 0, 3);
    assert_eq!(storage.run_wal_checkpoint().unwrap(), None);
    drop(storage);
    let storage = open(&db, Some(WalCheckpoints::default()));
    push_many(&storage, 3, 3);
    let report = storage.run_wal_checkpoint().unwrap().unwrap();
    assert_eq!(report.checkpointed_pages, report.wal_pages);
}

#[test]
fn no_commit_checkpoints_the_wal_itself() {
    let db = Db::new();
    // A checkpointer that is never asked for a pass on its own.
    let storage = open(
        &db,
        Some(WalCheckpoints {
            every_commits: u64::MAX,
            truncate_above_pages: u64::MAX,
        }),
    );
    push_many(&storage, 0, 300);
    let report = storage.run_wal_checkpoint().unwrap().unwrap();
    assert_eq!(report.passes, 1, "no pass ran on its own");
    // SQLite's automatic checkpoint (1 000 pages) would have copied the
    // WAL back long before: no commit did.
    assert!(report.wal_pages > 1_000, "{report:?}");
    assert_eq!(report.checkpointed_pages, report.wal_pages, "{report:?}");
    assert!(!report.truncated);
    // After the pass the next writer restarts the WAL from its beginning.
    push_many(&storage, 300, 1);
    let next = storage.run_wal_checkpoint().unwrap().unwrap();
    assert!(next.wal_pages < report.wal_pages, "{next:?}");
}

#[test]
fn the_wal_stays_bounded_under_a_stream_of_pushes() {
    let db = Db::new();
    let bound = 200;
    let storage = open(
        &db,
        Some(WalCheckpoints {
            every_commits: 10,
            truncate_above_pages: bound,
        }),
    );
    let page = page_size(&db);
    let mut barriers = 0;
    for round in 0..8 {
        push_many(&storage, round * 50, 50);
        let report = storage.run_wal_checkpoint().unwrap().unwrap();
        barriers += 1;
        assert!(
            report.passes > barriers,
            "passes ran on their own: {report:?}"
        );
        assert_eq!(report.checkpointed_pages, report.wal_pages, "{report:?}");
        assert!(
            wal_bytes(&db) <= bound * page,
            "wal {} bytes after {report:?}",
            wal_bytes(&db)
        );
    }
    assert_eq!(storage.get_max_commit_seq("p").unwrap(), 400);
}

#[test]
fn a_wal_above_the_bound_is_truncated() {
    let db = Db::new();
    let storage = open(
        &db,
        Some(WalCheckpoints {
            every_commits: u64::MAX,
            truncate_above_pages: 100,
        }),
    );
    push_many(&storage, 0, 50);
    assert!(wal_bytes(&db) > 100 * page_size(&db));
    let report = storage.run_wal_checkpoint().unwrap().unwrap();
    assert!(report.truncated, "{report:?}");
    assert_eq!(wal_bytes(&db), 0);
    // Everything is still there.
    assert_eq!(storage.get_max_commit_seq("p").unwrap(), 50);
    assert!(storage.get_row("p", "tasks", "t49").unwrap().is_some());
}

/// Open file descriptors of this process on `path` (and its `-wal`/`-shm`).
fn open_descriptors(path: &std::path::Path) -> usize {
    let Ok(entries) = std::fs::read_dir("/proc/self/fd") else {
        panic!("/proc/self/fd is needed to count open files");
    };
    let path = path.to_string_lossy().into_owned();
    entries
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|target| target.to_string_lossy().starts_with(&path))
        .count()
}

#[test]
fn the_checkpointer_stops_with_the_storage() {
    let db = Db::new();
    let storage = open(&db, Some(WalCheckpoints::default()));
    push_many(&storage, 0, 5);
    storage.run_wal_checkpoint().unwrap().unwrap();
    assert!(open_descriptors(&db.path()) > 0);
    drop(storage);
    assert_eq!(
        open_descriptors(&db.path()),
        0,
        "every connection, the checkpointer's included, is closed"
    );
}

#[test]
fn without_background_checkpoints_there_is_nothing_to_run() {
    let db = Db::new();
    let storage = open(&db, None);
    push_many(&storage, 0, 3);
    assert_eq!(storage.run_wal_checkpoint().unwrap(), None);
}
