//! Client records without an fsync per pull (`docs/decisions.md`, "Client
//! records without an fsync per pull"): refreshing the same actor's record
//! commits at `client_record_synchronous` (default `NORMAL`), a new record
//! or another actor's at the writer's level, and the writer is always back
//! at its own level afterwards — also when the lowered write or the restore
//! fails, so no later push goes without its `fsync`.

mod common;

use common::*;
use sync_core::fault::{FaultKind, FaultPlan};
use sync_core::{ClientRecord, EnsureOptions, ServerStorage};
use sync_sqlite::{SqliteConfig, SqliteStorage, Synchronous};

const LOWER: &str = "PRAGMA synchronous = NORMAL";
const RESTORE: &str = "PRAGMA synchronous = FULL";

fn record(actor: &str, cursor: i64) -> ClientRecord {
    ClientRecord {
        client_id: "c".to_owned(),
        actor_id: actor.to_owned(),
        wire_version: 2,
        cursor,
        updated_at_ms: NOW + cursor,
        subscriptions: Vec::new(),
    }
}

fn ready(db: &Db, config: SqliteConfig) -> SqliteStorage {
    let storage = db.open_with(config);
    storage
        .ensure_schema(&fix1(), &EnsureOptions::default())
        .unwrap();
    storage.touch_partition("p", NOW, "epoch-1").unwrap();
    storage
}

/// The statements of `write` that change `PRAGMA synchronous`, in order.
fn level_changes(storage: &SqliteStorage, write: impl FnOnce()) -> Vec<String> {
    let plan = FaultPlan::count_only();
    storage.set_fault_plan(Some(plan.clone())).unwrap();
    write();
    storage.set_fault_plan(None).unwrap();
    plan.statement_log()
        .into_iter()
        .filter(|sql| sql.starts_with("PRAGMA synchronous"))
        .collect()
}

#[test]
fn a_refresh_of_the_same_actor_is_lowered_and_a_new_record_is_not() {
    let db = Db::new();
    let storage = ready(&db, SqliteConfig::default());
    assert_eq!(
        SqliteConfig::default().client_record_synchronous,
        Synchronous::Normal
    );

    // The first record binds the client to its actor: the writer's level.
    let first = level_changes(&storage, || {
        storage.put_client_record("p", &record("alice", 1)).unwrap()
    });
    assert_eq!(first, vec![LOWER, RESTORE], "tried as a refresh first");
    // A refresh of alice's record, and an acknowledgement: lowered, restored.
    let refresh = level_changes(&storage, || {
        storage.put_client_record("p", &record("alice", 5)).unwrap()
    });
    assert_eq!(refresh, vec![LOWER, RESTORE]);
    let ack = level_changes(&storage, || {
        assert!(storage
            .advance_client_cursor("p", "c", "alice", "epoch-1", 7, NOW + 7)
            .unwrap())
    });
    assert_eq!(ack, vec![LOWER, RESTORE]);
    let stored = storage.get_client_record("p", "c").unwrap().unwrap();
    assert_eq!((stored.actor_id.as_str(), stored.cursor), ("alice", 7));

    // Another actor's record (after a rotation, say) is not a refresh: it
    // is written by the full upsert, at the writer's level.
    storage.put_client_record("p", &record("bob", 2)).unwrap();
    let stored = storage.get_client_record("p", "c").unwrap().unwrap();
    assert_eq!((stored.actor_id.as_str(), stored.cursor), ("bob", 2));
    assert_eq!(storage.synchronous().unwrap(), Synchronous::Full);
}

#[test]
fn nothing_is_lowered_when_asked_for_full_records_or_a_normal_writer() {
    for config in [
        SqliteConfig {
            client_record_synchronous: Synchronous::Full,
            ..SqliteConfig::default()
        },
        SqliteConfig {
            synchronous: Synchronous::Normal,
            ..SqliteConfig::default()
        },
    ] {
        let db = Db::new();
        let expected = config.synchronous;
        let storage = ready(&db, config);
        storage.put_client_record("p", &record("alice", 1)).unwrap();
        let changes = level_changes(&storage, || {
            storage.put_client_record("p", &record("alice", 5)).unwrap()
        });
        assert!(changes.is_empty(), "{changes:?}");
        assert_eq!(storage.synchronous().unwrap(), expected);
    }
}

#[test]
fn a_failed_refresh_leaves_the_writer_at_its_level() {
    let db = Db::new();
    let storage = ready(&db, SqliteConfig::default());
    storage.put_client_record("p", &record("alice", 1)).unwrap();
    let update = FaultPlan::count_only();
    storage.set_fault_plan(Some(update.clone())).unwrap();
    storage.put_client_record("p", &record("alice", 2)).unwrap();
    let refresh = update
        .statement_log()
        .into_iter()
        .find(|sql| sql.starts_with("UPDATE sync_clients"))
        .unwrap();
    storage
        .set_fault_plan(Some(FaultPlan::at_statement(&refresh, FaultKind::Fail)))
        .unwrap();
    let error = storage
        .put_client_record("p", &record("alice", 3))
        .unwrap_err();
    assert_eq!(error.code().as_str(), "sync.storage.backend");
    storage.set_fault_plan(None).unwrap();
    assert_eq!(storage.synchronous().unwrap(), Synchronous::Full);
    assert_eq!(
        storage.get_client_record("p", "c").unwrap().unwrap().cursor,
        2,
        "nothing half-written"
    );
}

#[test]
fn a_failed_restore_discards_the_lowered_connection() {
    let db = Db::new();
    let storage = ready(&db, SqliteConfig::default());
    storage.put_client_record("p", &record("alice", 1)).unwrap();
    storage
        .set_fault_plan(Some(FaultPlan::at_statement(RESTORE, FaultKind::Fail)))
        .unwrap();
    // The refresh itself committed; the restore failed, and says so.
    let error = storage
        .put_client_record("p", &record("alice", 4))
        .unwrap_err();
    assert_eq!(error.code().as_str(), "sync.storage.backend");
    storage.set_fault_plan(None).unwrap();
    // The connection left at NORMAL was not handed out again: the writer
    // in use now is a new one at the configured level, and a push is durable.
    assert_eq!(storage.synchronous().unwrap(), Synchronous::Full);
    push(&storage, "p", "c2", "k1", &[task_row("t1", "p1", "one")]);
    assert_eq!(storage.synchronous().unwrap(), Synchronous::Full);
}
