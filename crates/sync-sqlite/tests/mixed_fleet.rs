//! Sharing a SQLite database with the reference at the RFC 0007 release
//! (`tables.md` §4.2a): its storage installs its partition-only fence
//! trigger with `CREATE TRIGGER IF NOT EXISTS sync_commits_writer_fence` on
//! every start. Started after our open it leaves our trigger standing;
//! started before, our open replaces its trigger with ours. Either way the
//! database-wide fence keeps an old writer out of a partition created after
//! a bump.

mod common;

use common::*;
use sync_core::{CheckpointDeclaration, EnsureOptions, FenceTriggerState, ServerStorage};
use sync_sqlite::harness::REFERENCE_0_23_SQLITE_TRIGGER;
use sync_sqlite::hot_path_sql::{FENCE_TRIGGER_NAME, FENCE_TRIGGER_SQL};

/// What a reference 0.23 start runs on an existing database.
fn replay_reference_start(db: &Db) {
    db.raw()
        .execute_batch(REFERENCE_0_23_SQLITE_TRIGGER)
        .unwrap();
}

fn stored_trigger(db: &Db) -> String {
    db.raw()
        .query_row(
            "SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = ?1",
            [FENCE_TRIGGER_NAME],
            |row| row.get(0),
        )
        .unwrap()
}

fn raw_insert(db: &Db, partition: &str, seq: i64, version: Option<i32>) -> rusqlite::Result<usize> {
    db.raw().execute(
        "INSERT INTO sync_commits (partition, commit_seq, client_id, client_commit_id, actor_id, \
           created_at_ms, writer_version) VALUES (?1, ?2, 'raw', 'raw', 'raw', 0, ?3)",
        rusqlite::params![partition, seq, version],
    )
}

fn assert_fenced(db: &Db, partition: &str, seq: i64, version: Option<i32>) {
    let error = raw_insert(db, partition, seq, version)
        .expect_err("an old writer's insert must be refused");
    assert!(
        error
            .to_string()
            .contains("sync.storage.writer_fence_rejected"),
        "{partition} / {version:?}: {error}"
    );
}

fn bump_to_v2(db: &Db) -> sync_sqlite::SqliteStorage {
    let storage = db.open();
    storage
        .ensure_schema(
            &fix2(),
            &EnsureOptions::with_declarations(vec![CheckpointDeclaration::new("p1", "c", 2)]),
        )
        .unwrap();
    storage
}

#[test]
fn a_reference_start_after_our_open_leaves_our_trigger_standing() {
    let db = Db::new();
    db.ready();
    replay_reference_start(&db);
    assert_eq!(stored_trigger(&db), FENCE_TRIGGER_SQL);

    let bumped = bump_to_v2(&db);
    replay_reference_start(&db); // a reference process restarting after the bump
    assert_eq!(stored_trigger(&db), FENCE_TRIGGER_SQL);
    assert_eq!(
        bumped.writer_fence_trigger().unwrap(),
        FenceTriggerState::Enforced
    );
    for version in [None, Some(1)] {
        assert_fenced(&db, "created-after-bump", 1, version);
        assert_fenced(&db, "p1", 1, version);
    }
    raw_insert(&db, "created-after-bump", 1, Some(2)).expect("a v2 writer inserts");
}

#[test]
fn our_open_replaces_a_trigger_the_reference_installed_first() {
    let db = Db::new();
    {
        let conn = db.raw();
        conn.execute_batch(
            "CREATE TABLE sync_commits (partition TEXT NOT NULL, commit_seq INTEGER NOT NULL, \
               client_id TEXT NOT NULL, client_commit_id TEXT NOT NULL, actor_id TEXT NOT NULL, \
               created_at_ms INTEGER NOT NULL, writer_version INTEGER, \
               PRIMARY KEY (partition, commit_seq)); \
             CREATE TABLE sync_writer_fence (partition TEXT PRIMARY KEY, \
               required_writer_version INTEGER NOT NULL);",
        )
        .unwrap();
    }
    replay_reference_start(&db);
    let reader = db.ready();
    assert_eq!(stored_trigger(&db), FENCE_TRIGGER_SQL);
    assert_eq!(
        reader.writer_fence_trigger().unwrap(),
        FenceTriggerState::Enforced
    );
    bump_to_v2(&db);
    for version in [None, Some(1)] {
        assert_fenced(&db, "created-after-bump", 1, version);
    }
}

#[test]
fn a_dropped_or_foreign_trigger_is_reported_as_not_enforced() {
    let db = Db::new();
    let storage = db.ready();
    db.raw()
        .execute_batch(&format!("DROP TRIGGER {FENCE_TRIGGER_NAME}"))
        .unwrap();
    assert_eq!(
        storage.writer_fence_trigger().unwrap(),
        FenceTriggerState::Missing
    );
    replay_reference_start(&db);
    assert_eq!(
        storage.writer_fence_trigger().unwrap(),
        FenceTriggerState::Foreign
    );
    db.open();
    assert_eq!(
        storage.writer_fence_trigger().unwrap(),
        FenceTriggerState::Enforced
    );
}
