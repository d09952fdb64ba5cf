//! Connections against a live server (`SYNCSTORE_MARIADB_URL`, default
//! `mysql://root@127.0.0.1:3306/test`): session set-up, refusals with
//! their causes, the base DDL and the fence trigger. An unreachable server
//! fails these tests; it never skips them.

use mysql::prelude::Queryable;
use sync_core::{BackendCause, ErrorCode};
use sync_mariadb::scratch::{url_from_env, ScratchDatabase};
use sync_mariadb::{
    MariadbConfig, MariadbStorage, MariadbUrl, FENCE_TRIGGER_BODY, FENCE_TRIGGER_NAME, SQL_MODE,
};

fn scratch() -> ScratchDatabase {
    ScratchDatabase::from_env().unwrap_or_else(|e| {
        panic!(
            "cannot reach MariaDB at {} ({e:?}); start one (`service mariadb start`) or set \
             SYNCSTORE_MARIADB_URL",
            url_from_env()
        )
    })
}

fn open(db: &ScratchDatabase) -> MariadbStorage {
    MariadbStorage::connect_to(db.url().clone(), MariadbConfig::default()).expect("connect")
}

#[test]
fn every_connection_has_the_designed_session() {
    let db = scratch();
    let storage = open(&db);
    let facts = storage.session_facts();
    let mut modes: Vec<&str> = facts.sql_mode.split(',').collect();
    modes.sort_unstable();
    let mut expected: Vec<&str> = SQL_MODE.split(',').collect();
    expected.sort_unstable();
    assert_eq!(modes, expected);
    assert_eq!(facts.charset, "utf8mb4");
    assert_eq!(facts.collation, "utf8mb4_nopad_bin");
    assert!(facts.version.contains("MariaDB"), "{}", facts.version);
    assert_eq!(storage.database(), db.url().database());
}

#[test]
fn refusals_carry_their_cause() {
    let db = scratch();
    let base = db.url();

    let missing = base.with_database("sync_scratch_does_not_exist");
    let err =
        MariadbStorage::connect_to(missing, MariadbConfig::default()).expect_err("no database");
    assert_eq!(err.code(), ErrorCode::Backend);
    assert_eq!(err.cause(), Some(BackendCause::DatabaseMissing));

    let err = MariadbStorage::connect(
        &format!(
            "mariadb://sync_no_such_user:wrong@127.0.0.1:3306/{}",
            base.database()
        ),
        MariadbConfig::default(),
    )
    .expect_err("bad credentials");
    assert_eq!(err.cause(), Some(BackendCause::AuthFailed));

    // Port 9 (discard) is closed on the test machine.
    let err = MariadbStorage::connect("mariadb://root@127.0.0.1:9/test", MariadbConfig::default())
        .expect_err("unreachable");
    assert_eq!(err.code(), ErrorCode::Backend);
    assert_eq!(err.cause(), Some(BackendCause::Unreachable));

    let err = MariadbStorage::connect("mariadb://root@127.0.0.1:3306", MariadbConfig::default())
        .expect_err("no database in the URL");
    assert_eq!(err.code(), ErrorCode::InvalidArgument);
}

#[test]
fn the_base_ddl_is_created_once_and_then_left_alone() {
    let db = scratch();
    let storage = open(&db);
    // `connect` created everything; nothing is left to do.
    assert!(
        !storage.ensure_base_tables().expect("again"),
        "nothing to do"
    );

    let mut raw = db.raw().expect("raw");
    let tables: Vec<String> = raw
        .query(
            "SELECT CAST(TABLE_NAME AS CHAR) FROM information_schema.TABLES \
             WHERE TABLE_SCHEMA = DATABASE() ORDER BY TABLE_NAME",
        )
        .expect("tables");
    assert_eq!(tables.len(), 16, "{tables:?}");
    assert!(tables.contains(&"sync_commits".to_owned()));
    assert!(tables.contains(&"_syncstore_segments".to_owned()));

    let collations: Vec<String> = raw
        .query(
            "SELECT DISTINCT CAST(TABLE_COLLATION AS CHAR) FROM information_schema.TABLES \
             WHERE TABLE_SCHEMA = DATABASE()",
        )
        .expect("collations");
    assert_eq!(collations, vec!["utf8mb4_nopad_bin".to_owned()]);

    let body: Option<String> = raw
        .exec_first(
            "SELECT CAST(ACTION_STATEMENT AS CHAR) FROM information_schema.TRIGGERS \
             WHERE TRIGGER_SCHEMA = DATABASE() AND TRIGGER_NAME = ?",
            (FENCE_TRIGGER_NAME,),
        )
        .expect("trigger");
    assert_eq!(body.as_deref(), Some(FENCE_TRIGGER_BODY));
}

#[test]
fn a_missing_table_and_a_redefined_trigger_are_repaired() {
    let db = scratch();
    let storage = open(&db);
    storage.ensure_base_tables().expect("bootstrap");
    let mut raw = db.raw().expect("raw");
    raw.query_drop("DROP TABLE `sync_tombstones`")
        .expect("drop");
    raw.query_drop(
        "CREATE OR REPLACE TRIGGER `sync_commits_writer_fence` BEFORE INSERT ON `sync_commits` \
         FOR EACH ROW BEGIN END",
    )
    .expect("tamper");
    assert!(storage.ensure_base_tables().expect("repair"));
    let count: Option<i64> = raw
        .query_first(
            "SELECT COUNT(*) FROM information_schema.TABLES \
             WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'sync_tombstones'",
        )
        .expect("count");
    assert_eq!(count, Some(1));
    assert!(!storage.ensure_base_tables().expect("settled"));
}

#[test]
fn the_fence_trigger_refuses_old_writers() {
    let db = scratch();
    open(&db).ensure_base_tables().expect("bootstrap");
    let mut raw = db.raw().expect("raw");
    let insert = |raw: &mut mysql::Conn, partition: &str, seq: i64, version: Option<i32>| {
        raw.exec_drop(
            "INSERT INTO `sync_commits` (`partition`, `commit_seq`, `client_id`, \
             `client_commit_id`, `actor_id`, `created_at_ms`, `writer_version`) \
             VALUES (?, ?, 'c', ?, 'a', 0, ?)",
            (partition, seq, format!("cc{seq}"), version),
        )
    };
    // No meta row, no fence row: inert.
    insert(&mut raw, "p1", 1, None).expect("no fence");
    raw.query_drop(
        "INSERT INTO `sync_schema_meta` (`id`, `schema_version`, `required_writer_version`) \
         VALUES (1, 1, 2)",
    )
    .expect("database fence");
    insert(&mut raw, "p1", 2, Some(2)).expect("at the fence");
    for (seq, version) in [(3, Some(1)), (4, None)] {
        match insert(&mut raw, "p1", seq, version) {
            Err(mysql::Error::MySqlError(e)) => {
                assert_eq!((e.code, e.state.as_str()), (1644, "45000"));
                assert_eq!(e.message, "sync.storage.writer_fence_rejected");
            }
            other => panic!("expected the fence, got {other:?}"),
        }
    }
    raw.query_drop("INSERT INTO `sync_writer_fence` VALUES ('p2', 5)")
        .expect("partition fence");
    assert!(insert(&mut raw, "p2", 1, Some(4)).is_err());
    insert(&mut raw, "p3", 1, Some(4)).expect("another partition");
}

#[test]
fn a_url_names_its_database() {
    let url = MariadbUrl::parse(&url_from_env()).expect("the test URL parses");
    assert!(!url.database().is_empty());
}

#[test]
fn application_tables_get_the_designed_types_and_fit_the_key_budget() {
    use sync_mariadb::DIALECT;
    let schema = sync_schema::compile(
        &sync_schema::parse_schema_json(
            r#"{"version": 1, "tables": [{"name": "tasks", "primaryKey": "id", "materialize": true,
                "columns": [
                  {"name": "id", "type": "string"},
                  {"name": "title", "type": "string", "nullable": true},
                  {"name": "done", "type": "boolean", "nullable": true},
                  {"name": "priority", "type": "integer", "nullable": true},
                  {"name": "score", "type": "float", "nullable": true},
                  {"name": "meta", "type": "json", "nullable": true},
                  {"name": "thumb", "type": "bytes", "nullable": true}],
                "scopes": ["user:{id}"]}]}"#,
        )
        .expect("parses"),
    )
    .expect("compiles");
    let table = &schema.tables[0];
    let db = scratch();
    let mut raw = db.raw().expect("raw");
    raw.query_drop(DIALECT.create_table_sql(table))
        .expect("create");
    raw.query_drop(DIALECT.create_table_sql(table))
        .expect("idempotent");
    let columns: Vec<(String, String, Option<String>)> = raw
        .query(
            "SELECT CAST(COLUMN_NAME AS CHAR), CAST(COLUMN_TYPE AS CHAR), \
             CAST(COLLATION_NAME AS CHAR) FROM information_schema.COLUMNS \
             WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'tasks' ORDER BY ORDINAL_POSITION",
        )
        .expect("columns");
    let observed = |name: &str| {
        columns
            .iter()
            .find(|(n, _, _)| n == name)
            .unwrap_or_else(|| panic!("column {name} in {columns:?}"))
            .clone()
    };
    for column in &table.columns {
        let (_, column_type, collation) = observed(&column.name);
        assert!(
            DIALECT.type_matches(DIALECT.sql_type(column.column_type), &column_type),
            "{} is {column_type}",
            column.name
        );
        if column_type == "longtext" {
            assert_eq!(collation.as_deref(), Some("utf8mb4_nopad_bin"));
        }
    }
    assert_eq!(observed("_sync_partition").1, "varbinary(255)");
    assert_eq!(observed("_sync_row_id").1, "varbinary(1024)");
    assert_eq!(observed("_sync_payload").1, "longblob");
}

#[test]
fn the_trigger_state_is_read_and_a_redefinition_repaired_on_open() {
    use sync_core::{FenceTriggerState, ServerStorage, TriggerDifference};
    let db = scratch();
    let storage = open(&db);
    assert_eq!(
        storage.writer_fence_trigger().expect("state"),
        FenceTriggerState::Enforced
    );
    let mut raw = db.raw().expect("raw");
    raw.query_drop("DROP TRIGGER `sync_commits_writer_fence`")
        .expect("drop");
    assert_eq!(
        storage.writer_fence_trigger().expect("state"),
        FenceTriggerState::Missing
    );
    raw.query_drop(format!(
        "CREATE TRIGGER `sync_commits_writer_fence` BEFORE UPDATE ON `sync_commits` \
         FOR EACH ROW\n{FENCE_TRIGGER_BODY}"
    ))
    .expect("tamper");
    assert_eq!(
        storage.writer_fence_trigger().expect("state"),
        FenceTriggerState::Tampered(TriggerDifference::Events)
    );
    let reopened = open(&db);
    assert_eq!(
        reopened.writer_fence_trigger().expect("state"),
        FenceTriggerState::Enforced
    );
}
