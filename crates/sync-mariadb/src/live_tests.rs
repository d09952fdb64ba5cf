//! Classification of real server errors (`SYNCSTORE_MARIADB_URL`): the
//! shapes `errors.rs` recognises, as the server sends them.

use mysql::prelude::Queryable;
use sync_core::ErrorCode;

use crate::config::MariadbConfig;
use crate::errors::Site;
use crate::instance::MariadbStorage;
use crate::scratch::{url_from_env, ScratchDatabase};

fn scratch() -> ScratchDatabase {
    ScratchDatabase::from_env()
        .unwrap_or_else(|e| panic!("cannot reach MariaDB at {} ({e:?})", url_from_env()))
}

fn storage(db: &ScratchDatabase, config: MariadbConfig) -> MariadbStorage {
    let storage = MariadbStorage::connect_to(db.url().clone(), config).expect("connect");
    storage.ensure_base_tables().expect("bootstrap");
    storage
}

#[test]
fn a_duplicate_key_is_a_constraint_violation_only_in_upsert_row() {
    let db = scratch();
    let storage = storage(&db, MariadbConfig::default());
    let mut conn = storage.conn().expect("conn");
    let insert = "INSERT INTO `sync_tombstones` VALUES ('p1', 't', 'r1', 1)";
    conn.exec(insert, ()).expect("first");
    let err = conn
        .exec_at(insert, (), Site::UpsertRow(Some(4)))
        .expect_err("duplicate");
    assert_eq!(err.code(), ErrorCode::ConstraintViolation);
    assert_eq!(err.op_index_value(), Some(4));
    let err = conn.exec(insert, ()).expect_err("duplicate");
    assert_eq!(err.code(), ErrorCode::Backend);
    let reaction = "INSERT INTO `sync_reactions` (`partition`, `idempotency_key`, `type`, \
        `version`, `payload`, `source_client_id`, `source_client_commit_id`, \
        `source_commit_seq`, `created_at_ms`, `available_at_ms`, `status`, `attempts`, \
        `max_attempts`) VALUES ('p1', 'k1', 'x', 1, '{}', 'c', 'cc', 1, 0, 0, 'pending', 0, 3)";
    conn.exec(reaction, ()).expect("first reaction");
    let err = conn
        .exec_at(reaction, (), Site::EnqueueReactions)
        .expect_err("duplicate reaction");
    assert_eq!(err.code(), ErrorCode::DuplicateReaction);
    let null = conn
        .exec_at(
            "INSERT INTO `sync_tombstones` VALUES ('p1', 't', 'r2', NULL)",
            (),
            Site::UpsertRow(None),
        )
        .expect_err("null");
    assert_eq!(null.code(), ErrorCode::ConstraintViolation);
    let check = conn
        .exec_at(
            "INSERT INTO `sync_writer_fence` VALUES ('p1', 0)",
            (),
            Site::UpsertRow(None),
        )
        .expect_err("check");
    assert_eq!(check.code(), ErrorCode::ConstraintViolation);
}

#[test]
fn the_fence_rejection_is_recognised() {
    let db = scratch();
    let storage = storage(&db, MariadbConfig::default());
    let mut conn = storage.conn().expect("conn");
    conn.exec("INSERT INTO `sync_writer_fence` VALUES ('p1', 3)", ())
        .expect("fence");
    let err = conn
        .exec_at(
            "INSERT INTO `sync_commits` (`partition`, `commit_seq`, `client_id`, \
             `client_commit_id`, `actor_id`, `created_at_ms`, `writer_version`) \
             VALUES ('p1', 1, 'c', 'cc', 'a', 0, 2)",
            (),
            Site::UpsertRow(Some(0)),
        )
        .expect_err("fenced");
    assert_eq!(err.code(), ErrorCode::WriterFenceRejected);
}

#[test]
fn a_row_lock_wait_timeout_is_busy_and_keeps_the_connection() {
    let db = scratch();
    let storage = storage(
        &db,
        MariadbConfig {
            push_lock_timeout_ms: Some(1),
            ..MariadbConfig::default()
        },
    );
    let mut holder = db.raw().expect("raw");
    holder
        .query_drop("INSERT INTO `sync_partitions` (`partition`) VALUES ('p1')")
        .expect("row");
    holder.query_drop("START TRANSACTION").expect("begin");
    holder
        .query_drop("SELECT * FROM `sync_partitions` WHERE `partition` = 'p1' FOR UPDATE")
        .expect("lock");
    let mut conn = storage.conn().expect("conn");
    conn.run("START TRANSACTION").expect("begin");
    let err = conn
        .exec(
            "SELECT * FROM `sync_partitions` WHERE `partition` = ? FOR UPDATE",
            ("p1",),
        )
        .expect_err("waits one second, then times out");
    assert_eq!(err.code(), ErrorCode::Busy);
    assert!(!conn.is_broken());
    conn.rollback();
    holder.query_drop("ROLLBACK").expect("release");
}

#[test]
fn a_checkout_waits_the_configured_pool_wait() {
    let db = scratch();
    let storage = storage(
        &db,
        MariadbConfig {
            pool_size: 1,
            pool_wait_ms: 1_500,
            ..MariadbConfig::default()
        },
    );
    let held = storage.conn().expect("the one connection");
    let started = std::time::Instant::now();
    let err = storage.conn().expect_err("no second connection");
    let waited = started.elapsed();
    assert_eq!(err.code(), ErrorCode::Busy);
    // Not the pool's own timeout, which only bounds its reconnect backoff.
    assert!(
        waited >= std::time::Duration::from_millis(1_500),
        "the checkout gave up after {waited:?}"
    );
    drop(held);
    storage.conn().expect("the connection is free again");
}
