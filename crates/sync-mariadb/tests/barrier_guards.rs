//! The migration barrier's guard triggers on a live server
//! (`docs/design/mariadb.md` §7.1): installed and repaired by the next
//! `ensure_schema`, and refusing every statement form a writer that is not
//! the storage could use — `INSERT … ON DUPLICATE KEY UPDATE` and `REPLACE`
//! as well as `UPDATE` and `DELETE` — while the writes the protocol makes
//! still pass, including the storage's insert-if-absent over an activated
//! checkpoint.

use mysql::prelude::Queryable;
use sync_conformance::fixtures;
use sync_core::{CheckpointState, EnsureOptions, ServerStorage};
use sync_mariadb::barrier_guards::GUARDS;
use sync_mariadb::scratch::{url_from_env, DmlAccount, ScratchDatabase};
use sync_mariadb::{MariadbConfig, MariadbStorage};

const NOW: i64 = 1_700_000_000_000;

fn scratch() -> ScratchDatabase {
    ScratchDatabase::from_env()
        .unwrap_or_else(|e| panic!("cannot reach MariaDB at {} ({e:?})", url_from_env()))
}

fn connect(db: &ScratchDatabase) -> MariadbStorage {
    MariadbStorage::connect_to(db.url().clone(), MariadbConfig::default()).expect("connect")
}

/// `(name, body)` of every guard trigger in the database.
fn installed(raw: &mut mysql::Conn) -> Vec<(String, String)> {
    raw.query(
        "SELECT CAST(TRIGGER_NAME AS CHAR), CAST(ACTION_STATEMENT AS CHAR) \
         FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = DATABASE() \
         AND TRIGGER_NAME LIKE 'sync%guard%' ORDER BY TRIGGER_NAME",
    )
    .expect("triggers")
}

fn expected() -> Vec<(String, String)> {
    let mut guards: Vec<(String, String)> = GUARDS
        .iter()
        .map(|g| (g.name.to_owned(), g.body.to_owned()))
        .collect();
    guards.sort();
    guards
}

#[test]
fn missing_and_altered_guards_are_restored_by_the_next_ensure_schema() {
    let db = scratch();
    let mut raw = db.raw().expect("raw");
    let schema = fixtures::fix1().expect("fix1");
    let first = connect(&db);
    assert_eq!(
        installed(&mut raw),
        expected(),
        "installed by the bootstrap"
    );
    assert!(
        !first.ensure_base_tables().expect("warm bootstrap"),
        "a complete catalog runs no DDL"
    );

    // A database from before the guards (none of them), and one guard whose
    // body was changed behind the storage's back.
    for guard in GUARDS {
        raw.query_drop(guard.drop_sql()).expect("drop guard");
    }
    let meta_update = GUARDS
        .iter()
        .find(|g| g.name == "sync_schema_meta_guard_update")
        .expect("meta guard");
    raw.query_drop(format!(
        "CREATE TRIGGER `{}` BEFORE UPDATE ON `sync_schema_meta` FOR EACH ROW BEGIN END",
        meta_update.name
    ))
    .expect("altered guard");
    assert_eq!(installed(&mut raw).len(), 1);

    // The instance connected before the guards went away restores them on
    // its next (first) ensure_schema.
    first
        .ensure_schema(&schema, &EnsureOptions::default())
        .expect("ensure");
    assert_eq!(installed(&mut raw), expected(), "restored by ensure_schema");
    let refused = raw.query_drop("UPDATE `sync_schema_meta` SET `required_writer_version` = NULL");
    assert!(
        matches!(&refused, Err(mysql::Error::MySqlError(e))
            if e.code == 1644 && e.message == "sync.storage.barrier_write_refused"),
        "the restored guard refuses clearing the fence: {refused:?}"
    );
}

/// Expects `sql` to be refused by a guard.
fn expect_refused(conn: &mut mysql::Conn, sql: &str) {
    match conn.query_drop(sql) {
        Err(mysql::Error::MySqlError(e))
            if e.code == 1644
                && e.state == "45000"
                && e.message == "sync.storage.barrier_write_refused" => {}
        other => panic!("{sql}: expected the guard's refusal, got {other:?}"),
    }
}

#[test]
fn a_dml_only_account_is_refused_by_every_statement_form_and_keeps_the_protocols_writes() {
    let db = scratch();
    let storage = connect(&db);
    let schema = fixtures::fix1().expect("fix1");
    storage
        .ensure_schema(&schema, &EnsureOptions::default())
        .expect("ensure");
    storage
        .declare_checkpoint("p1", "declared_v1", 1, NOW)
        .expect("declare");
    storage
        .declare_checkpoint("p1", "claimed_v1", 1, NOW)
        .expect("declare");
    let claimed = storage
        .claim_checkpoint("p1", "claimed_v1", 1, NOW)
        .expect("claim");
    let account = DmlAccount::create(db.url()).expect("dml account");
    let mut conn = account.raw().expect("connect as the dml account");
    // The control: a raise is a write the protocol allows any writer.
    conn.query_drop("UPDATE `sync_writer_fence` SET `required_writer_version` = 3")
        .expect("a raise");

    for sql in [
        // The fences, lowered through an insert that updates or replaces.
        "INSERT INTO `sync_writer_fence` VALUES ('p1', 1) \
         ON DUPLICATE KEY UPDATE `required_writer_version` = 1",
        "REPLACE INTO `sync_writer_fence` VALUES ('p1', 1)",
        "UPDATE `sync_writer_fence` SET `partition` = 'p9' WHERE `partition` = 'p1'",
        "INSERT INTO `sync_schema_meta` (`id`, `schema_version`, `layouts`) VALUES (1, 1, '{}') \
         ON DUPLICATE KEY UPDATE `required_writer_version` = NULL",
        "REPLACE INTO `sync_schema_meta` (`id`, `schema_version`, `layouts`) VALUES (1, 1, '{}')",
        // Checkpoints reset, replaced, moved, or their epoch lowered.
        "REPLACE INTO `sync_backfill_checkpoints` (`partition`, `name`, `schema_version`, `state`, \
         `updated_at_ms`) VALUES ('p1', 'claimed_v1', 1, 'declared', 0)",
        "UPDATE `sync_backfill_checkpoints` SET `owner_epoch` = 0 WHERE `name` = 'claimed_v1'",
        "UPDATE `sync_backfill_checkpoints` SET `name` = 'moved' WHERE `name` = 'declared_v1'",
        "INSERT INTO `sync_backfill_checkpoints` (`partition`, `name`, `schema_version`, `state`, \
         `updated_at_ms`) VALUES ('p1', 'declared_v1', 1, 'declared', 0) \
         ON DUPLICATE KEY UPDATE `state` = 'activated'",
        "INSERT INTO `sync_backfill_checkpoints` (`partition`, `name`, `schema_version`, `state`, \
         `owner_epoch`, `updated_at_ms`) VALUES ('p1', 'forged', 1, 'backfilling', 5, 0)",
    ] {
        expect_refused(&mut conn, sql);
    }
    assert_eq!(
        storage.required_writer_version("p1").expect("fence"),
        Some(3)
    );
    assert_eq!(
        storage.read_checkpoint("p1", "claimed_v1").expect("read"),
        Some(claimed.clone())
    );

    // What else the protocol lets any writer do still passes: declare,
    // claim.
    conn.query_drop(
        "INSERT INTO `sync_backfill_checkpoints` (`partition`, `name`, `schema_version`, `state`, \
         `updated_at_ms`) VALUES ('p2', 'fresh', 1, 'declared', 0) \
         ON DUPLICATE KEY UPDATE `partition` = `partition`",
    )
    .expect("a declaration");
    conn.query_drop(
        "UPDATE `sync_backfill_checkpoints` SET `owner_epoch` = `owner_epoch` + 1, \
         `state` = 'backfilling' WHERE `name` = 'fresh'",
    )
    .expect("a claim");
    drop(conn);
    account.remove().expect("drop the account");

    // The storage activates, and may then declare the activated checkpoint
    // again: its insert-if-absent updates nothing, which the guard lets pass.
    storage
        .activate_checkpoint("p1", "declared_v1", 0, 0, &[], NOW)
        .expect("activation by the storage");
    let again = storage
        .declare_checkpoint("p1", "declared_v1", 1, NOW + 1)
        .expect("declaring an activated checkpoint again");
    assert_eq!(again.state, CheckpointState::Activated);
}
