//! `syncstore distribute` and `demo --distribute` (docs/scale-out.md).
//!
//! The refusals on SQLite and plain Postgres run everywhere. The tests on a
//! Citus coordinator are `#[ignore]`d with their reason: run them with
//! `SYNCSTORE_CITUS_URL=postgres://…/db cargo test -p syncstore --test
//! distribute -- --ignored`; without the variable they fail loudly.

mod common;

use common::{syncstore, todos_schema, write_file, App, Db};
use serde_json::Value;
use sync_core::RowValue;

const CITUS_REASON: &str =
    "needs a Citus coordinator: set SYNCSTORE_CITUS_URL and run with --ignored (docs/scale-out.md)";

/// A migrated v1 database and the schema directory.
fn migrated(db: &Db) -> tempfile::TempDir {
    let dir = db.scratch();
    let v1 = write_file(&dir, "v1.json", &todos_schema(1, false, ""));
    db.json(&["migrate", "--schema", &v1]);
    dir
}

#[test]
fn distribute_refuses_sqlite() {
    let db = Db::sqlite();
    let _dir = migrated(&db);
    let details = db.json_error(&["distribute"], "sync.storage.not_distributable");
    assert_eq!(details["reason"], "not_postgres", "{details:#}");
}

#[test]
fn distribute_refuses_plain_postgres_and_changes_nothing() {
    let db = Db::postgres();
    let _dir = migrated(&db);
    let details = db.json_error(
        &["distribute", "--shard-count", "4"],
        "sync.storage.not_distributable",
    );
    assert_eq!(details["reason"], "citus_missing", "{details:#}");
    let status = db.json(&["status"]);
    assert_eq!(status["schema_version"], 1);
    assert!(status.get("citus").is_none(), "{status:#}");
    assert!(!db.run(&["status"]).stdout.contains("citus"));
}

#[test]
fn a_zero_shard_count_is_a_usage_error() {
    let run = syncstore(&[
        "--db",
        "sqlite:unused.db",
        "distribute",
        "--shard-count",
        "0",
    ]);
    assert_eq!(run.code, 2, "{run:?}");
}

// ---- on a Citus coordinator ----------------------------------------------

fn citus_url() -> String {
    std::env::var("SYNCSTORE_CITUS_URL")
        .ok()
        .filter(|url| !url.is_empty())
        .unwrap_or_else(|| panic!("{CITUS_REASON}"))
}

/// A fresh schema on the coordinator, created with `setup` first.
fn citus_db(setup: &str) -> Db {
    let server = citus_url();
    let schema = format!(
        "syncstore_citus_{:x}_{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() & 0xffff_ffff)
    );
    let mut client = postgres::Client::connect(&server, postgres::NoTls)
        .unwrap_or_else(|e| panic!("cannot reach the Citus coordinator at {server}: {e}"));
    client
        .batch_execute(&format!("{setup}CREATE SCHEMA \"{schema}\""))
        .expect("create the schema");
    Db::Postgres { server, schema }
}

/// `(table, distribution method, colocation id)` of the schema's tables in
/// the Citus metadata.
fn layout(db: &Db) -> Vec<(String, String, i32)> {
    let Db::Postgres { server, schema } = db else {
        panic!("a Postgres database")
    };
    let mut client = postgres::Client::connect(server, postgres::NoTls).expect("coordinator");
    client
        .query(
            "SELECT c.relname::text, d.partmethod::text, d.colocationid \
             FROM pg_dist_partition d JOIN pg_class c ON c.oid = d.logicalrelid \
             JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 \
             ORDER BY c.relname::text COLLATE \"C\"",
            &[schema],
        )
        .expect("read pg_dist_partition")
        .iter()
        .map(|row| (row.get(0), row.get(1), row.get(2)))
        .collect()
}

fn method_of<'a>(layout: &'a [(String, String, i32)], table: &str) -> Option<&'a str> {
    layout
        .iter()
        .find(|(t, _, _)| t == table)
        .map(|(_, m, _)| m.as_str())
}

#[test]
#[ignore = "needs a Citus coordinator: set SYNCSTORE_CITUS_URL and run with --ignored (docs/scale-out.md)"]
fn distribute_by_partition_is_colocated_idempotent_and_kept_by_migrations() {
    let db = citus_db("");
    let dir = migrated(&db);
    let local = db.json(&["status"]);
    assert_eq!(
        local["citus"],
        serde_json::json!({"placement": "coordinator", "distributed": false}),
        "{local:#}"
    );
    let text = db.run(&["status"]);
    assert!(
        text.stdout
            .contains("citus: warning: the storage's tables are local to the coordinator"),
        "{}",
        text.stdout
    );
    let report = db.json(&["distribute", "--shard-count", "4"]);
    assert_eq!(report["already_distributed"], false, "{report:#}");
    let distributed: Vec<(String, String)> = report["distributed"]
        .as_array()
        .expect("distributed")
        .iter()
        .map(|d| {
            (
                d["table"].as_str().unwrap_or_default().to_owned(),
                d["column"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    assert!(distributed.contains(&("sync_partitions".into(), "partition".into())));
    assert!(distributed.contains(&("sync_commits".into(), "partition".into())));
    assert!(distributed.contains(&("todos".into(), "_sync_partition".into())));
    assert_eq!(report["reference"], serde_json::json!(["sync_schema_meta"]));
    let before = layout(&db);
    assert_eq!(method_of(&before, "sync_schema_meta"), Some("n"));
    let anchor = before
        .iter()
        .find(|(t, _, _)| t == "sync_partitions")
        .map(|(_, _, c)| *c)
        .expect("sync_partitions is distributed");
    for (table, method, colocation) in &before {
        if table != "sync_schema_meta" {
            assert_eq!(method, "h", "{table}");
            assert_eq!(*colocation, anchor, "{table} is colocated");
        }
    }

    let again = db.json(&["distribute"]);
    assert_eq!(again["already_distributed"], true, "{again:#}");
    assert_eq!(again["distributed"], serde_json::json!([]));
    assert_eq!(layout(&db), before);

    // Writes work, and a bump distributes the table it creates.
    let mut app = App::start(&db, &todos_schema(1, false, ""), "acme");
    let row = |id: &str| {
        vec![
            RowValue::String(id.into()),
            RowValue::String("l1".into()),
            RowValue::String("milk".into()),
            RowValue::Boolean(false),
        ]
    };
    app.push("acme", "todos", &[row("t1")], &[]);
    let v2 = write_file(
        &dir,
        "v2.json",
        &todos_schema(2, true, common::TODO_SEARCH_TABLE),
    );
    db.json(&["migrate", "--schema", &v2]);
    let after = layout(&db);
    let search = after
        .iter()
        .find(|(t, _, _)| t == "todo_search")
        .expect("the new table is distributed");
    assert_eq!((search.1.as_str(), search.2), ("h", anchor));
    let status = db.json(&["status"]);
    assert_eq!(status["schema_version"], 2);
    assert_eq!(
        status["citus"],
        serde_json::json!({"placement": "by_partition", "distributed": true}),
        "{status:#}"
    );
    let text = db.run(&["status"]);
    assert!(
        text.stdout.contains("citus: distributed by partition\n"),
        "{}",
        text.stdout
    );
    let rows = db.json(&["rows", "--partition", "acme", "--table", "todos"]);
    assert_eq!(rows["rows"].as_array().map(Vec::len), Some(1), "{rows:#}");
}

#[test]
#[ignore = "needs a Citus coordinator: set SYNCSTORE_CITUS_URL and run with --ignored (docs/scale-out.md)"]
fn distribute_refuses_a_schema_with_data_and_a_distributed_schema() {
    let db = citus_db("");
    let _dir = migrated(&db);
    App::start(&db, &todos_schema(1, false, ""), "acme");
    let details = db.json_error(&["distribute"], "sync.storage.not_distributable");
    assert_eq!(details["reason"], "not_empty", "{details:#}");
    assert!(details["table"].is_string(), "{details:#}");
    assert_eq!(layout(&db), Vec::new(), "nothing was distributed");

    let sharded = citus_db("SET citus.enable_schema_based_sharding = on; ");
    let _dir = migrated(&sharded);
    let details = sharded.json_error(&["distribute"], "sync.storage.not_distributable");
    assert_eq!(details["reason"], "distributed_schema", "{details:#}");
    let status = sharded.json(&["status"]);
    assert_eq!(
        status["citus"],
        serde_json::json!({"placement": "distributed_schema", "distributed": true}),
        "{status:#}"
    );
}

fn demo_on(db: &Db, extra: &[&str]) -> Value {
    let mut args = vec!["demo", "--rows", "40"];
    args.extend_from_slice(extra);
    let summary = db.json(&args);
    assert_eq!(summary["ok"], true, "{summary:#}");
    summary
}

#[test]
#[ignore = "needs a Citus coordinator: set SYNCSTORE_CITUS_URL and run with --ignored (docs/scale-out.md)"]
fn the_demo_passes_on_citus_in_both_layouts() {
    let rows = citus_db("");
    let summary = demo_on(&rows, &["--distribute", "--shard-count", "4"]);
    assert_eq!(summary["steps"].as_array().map(Vec::len), Some(9));
    assert_eq!(method_of(&layout(&rows), "todos"), Some("h"));

    let schemas = citus_db("SET citus.enable_schema_based_sharding = on; ");
    let summary = demo_on(&schemas, &[]);
    assert_eq!(summary["steps"].as_array().map(Vec::len), Some(9));
    // A table of a distributed schema is a single-shard table (method `n`).
    assert_eq!(method_of(&layout(&schemas), "todos"), Some("n"));
}
