//! Application-table DDL on a live server: the shared planner's statements
//! through the MariaDB dialect create FIX1's tables and declared indexes
//! (prefix lookup indexes, full-value uniqueness indexes), idempotently.

use mysql::prelude::Queryable;
use sync_mariadb::scratch::{url_from_env, ScratchDatabase};
use sync_mariadb::DIALECT;
use sync_schema::{plan_migration, ObservedTables, StoredLayouts};

fn scratch() -> ScratchDatabase {
    ScratchDatabase::from_env()
        .unwrap_or_else(|e| panic!("cannot reach MariaDB at {} ({e:?})", url_from_env()))
}

fn fix1() -> sync_core::CompiledSchema {
    let json = sync_conformance::fixtures::fix1_json().to_string();
    sync_schema::compile(&sync_schema::parse_schema_json(&json).expect("parses")).expect("compiles")
}

type IndexRow = (String, i64, String, Option<i64>, String);

fn statistics(raw: &mut mysql::Conn, table: &str) -> Vec<IndexRow> {
    raw.exec(
        "SELECT CAST(INDEX_NAME AS CHAR), NON_UNIQUE, CAST(COLUMN_NAME AS CHAR), SUB_PART, \
         CAST(INDEX_TYPE AS CHAR) FROM information_schema.STATISTICS \
         WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND INDEX_NAME <> 'PRIMARY' \
         ORDER BY INDEX_NAME, SEQ_IN_INDEX",
        (table,),
    )
    .expect("statistics")
}

#[test]
fn a_fresh_plan_creates_fix1_with_lookup_and_uniqueness_indexes() {
    let schema = fix1();
    let plan = plan_migration(
        &schema,
        &StoredLayouts::new(),
        &ObservedTables::new(),
        DIALECT,
    )
    .expect("plan");
    let db = scratch();
    let mut raw = db.raw().expect("raw");
    for _ in 0..2 {
        for statement in plan.statements() {
            raw.query_drop(&statement.sql)
                .unwrap_or_else(|e| panic!("{}: {e}", &statement.sql));
        }
    }
    let tasks = statistics(&mut raw, "tasks");
    let row = |name: &str, unique: bool, column: &str, sub: Option<i64>, kind: &str| {
        (
            name.to_owned(),
            i64::from(!unique),
            column.to_owned(),
            sub,
            kind.to_owned(),
        )
    };
    assert_eq!(
        tasks,
        vec![
            row(
                "sync_ix_tasks_by_project_title",
                false,
                "_sync_partition",
                None,
                "BTREE"
            ),
            row(
                "sync_ix_tasks_by_project_title",
                false,
                "project_id",
                Some(255),
                "BTREE"
            ),
            row(
                "sync_ix_tasks_by_project_title",
                false,
                "title",
                Some(255),
                "BTREE"
            ),
            row(
                "sync_ix_tasks_by_title",
                false,
                "_sync_partition",
                None,
                "BTREE"
            ),
            row("sync_ix_tasks_by_title", false, "title", Some(255), "BTREE"),
            row(
                "sync_ux_tasks_by_project_title",
                true,
                "_sync_partition",
                None,
                "HASH"
            ),
            row(
                "sync_ux_tasks_by_project_title",
                true,
                "project_id",
                None,
                "HASH"
            ),
            row(
                "sync_ux_tasks_by_project_title",
                true,
                "title",
                None,
                "HASH"
            ),
        ]
    );

    // The uniqueness index holds per partition, on the full values.
    let insert = |raw: &mut mysql::Conn, p: &str, id: &str, title: &str| {
        raw.exec_drop(
            "INSERT INTO `tasks` (`_sync_partition`, `_sync_row_id`, `id`, `project_id`, `title`, \
             `done`, `_sync_server_version`, `_sync_scopes`, `_sync_payload`) \
             VALUES (?, ?, ?, 'proj', ?, FALSE, 1, '{}', '')",
            (p, id, id, title),
        )
    };
    let long = "L".repeat(5000);
    insert(&mut raw, "p1", "r1", &long).expect("first");
    insert(&mut raw, "p1", "r2", &format!("{}M", &long[1..])).expect("differs at the end");
    insert(&mut raw, "p2", "r3", &long).expect("another partition");
    match insert(&mut raw, "p1", "r4", &long) {
        Err(mysql::Error::MySqlError(e)) => assert_eq!((e.code, e.state.as_str()), (1062, "23000")),
        other => panic!("expected a duplicate key, got {other:?}"),
    }

    // Dropping the declared index drops the pair.
    raw.query_drop(DIALECT.drop_index_sql("tasks", "sync_ix_tasks_by_project_title"))
        .expect("drop");
    raw.query_drop(DIALECT.drop_index_sql("tasks", "sync_ix_tasks_by_project_title"))
        .expect("drop again");
    let names: Vec<String> = statistics(&mut raw, "tasks")
        .into_iter()
        .map(|r| r.0)
        .collect();
    assert!(
        names.iter().all(|n| n == "sync_ix_tasks_by_title"),
        "{names:?}"
    );
}
