//! The plans of the walks on a live server (`SYNCSTORE_MARIADB_URL`): a
//! walk bounded by `LIMIT … ROWS EXAMINED` is only right when it reads in
//! key order and streams, so that rows it returns before stopping are a
//! prefix of the answer. A plan that sorts or collects would make the
//! returned rows depend on what was read before the budget ran out.

use mysql::Value;

use crate::instance::MariadbStorage;
use crate::pool::Conn;
use crate::scratch::{url_from_env, ScratchDatabase};
use crate::{scans, windows, MariadbConfig};

const APP_TABLE: &str = "CREATE TABLE `tasks` (\
    `_sync_partition` VARBINARY(255) NOT NULL, `_sync_row_id` VARBINARY(1024) NOT NULL, \
    `_sync_server_version` BIGINT NOT NULL, `_sync_scopes` LONGTEXT NOT NULL, \
    `_sync_payload` LONGBLOB NOT NULL, PRIMARY KEY (`_sync_partition`, `_sync_row_id`)) \
    ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin";

/// Two thousand rows and commits of partition `p1` in ten lists.
const FILL: [&str; 4] = [
    "INSERT INTO `tasks` SELECT 'p1', LPAD(seq, 6, '0'), 1, \
     CONCAT('{\"list_id\":\"l', seq % 10, '\"}'), 'x' FROM seq_1_to_2000",
    "INSERT INTO `sync_row_scopes` SELECT 'p1', 'tasks', 'list_id', CONCAT('l', seq % 10), \
     LPAD(seq, 6, '0') FROM seq_1_to_2000",
    "INSERT INTO `sync_commits` (`partition`, `commit_seq`, `client_id`, `client_commit_id`, \
     `actor_id`, `created_at_ms`) SELECT 'p1', seq, 'c', CONCAT('cc', seq), 'a', 0 \
     FROM seq_1_to_2000",
    "INSERT INTO `sync_changes` SELECT 'p1', seq, 0, 'tasks', LPAD(seq, 6, '0'), 1, 1, \
     CONCAT('{\"list_id\":\"l', seq % 10, '\"}'), 'x' FROM seq_1_to_2000",
];

fn explain(conn: &mut Conn, sql: &str, params: Vec<Value>) -> String {
    let plan: Option<String> = conn
        .first(&format!("EXPLAIN FORMAT=JSON {sql}"), params)
        .expect("explain");
    plan.expect("a plan")
}

fn assert_streams(plan: &str, key: &str) {
    assert!(
        !plan.contains("filesort") && !plan.contains("temporary_table"),
        "the walk collects its input:\n{plan}"
    );
    assert!(
        plan.contains(&format!("\"key\": \"{key}\"")),
        "the walk does not read {key}:\n{plan}"
    );
}

#[test]
fn both_walks_read_in_key_order_without_sorting() {
    let db = ScratchDatabase::from_env()
        .unwrap_or_else(|e| panic!("cannot reach MariaDB at {} ({e:?})", url_from_env()));
    let storage =
        MariadbStorage::connect_to(db.url().clone(), MariadbConfig::default()).expect("connect");
    storage.ensure_base_tables().expect("bootstrap");
    let mut conn = storage.conn().expect("conn");
    conn.run(APP_TABLE).expect("app table");
    for fill in FILL {
        conn.run(fill).expect("fill");
    }
    conn.run("ANALYZE TABLE `tasks`, `sync_row_scopes`, `sync_commits`, `sync_changes`")
        .expect("analyze");
    let lists = ["l1", "l2", "l3"].map(Value::from);

    let mut params: Vec<Value> = vec!["p1".into(), "tasks".into(), "".into(), "list_id".into()];
    params.extend(lists.clone());
    params.extend([Value::Int(500), Value::Int(scans::walk_budget(500, 1))]);
    let plan = explain(&mut conn, &scans::walk_sql("`tasks`", 3), params);
    assert_streams(&plan, "sync_row_scopes_by_row");

    let mut params: Vec<Value> = vec![
        "p1".into(),
        Value::Int(0),
        Value::Int(2000),
        "tasks".into(),
        "$.list_id".into(),
    ];
    params.extend(lists);
    params.extend([
        Value::Int(500),
        Value::Int(500 * windows::WALK_ROWS_PER_CHANGE),
    ]);
    let plan = explain(&mut conn, &windows::walk_sql(3), params);
    assert_streams(&plan, "PRIMARY");
}
