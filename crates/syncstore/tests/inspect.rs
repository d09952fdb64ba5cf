//! `status`, `checkpoints`, `rows` and `commits` on SQLite and Postgres:
//! the pinned JSON shapes, the value encoding, paging, text output, and
//! unknown partitions and tables.

mod common;

use common::{all_commits, all_rows, keys, seed_todos, todos_schema, write_file, App, Db};
use serde_json::{json, Value};
use sync_core::RowValue;

macro_rules! on_both {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[test]
            fn sqlite() {
                super::$name(super::Db::sqlite());
            }
            #[test]
            fn postgres() {
                super::$name(super::Db::postgres());
            }
            #[test]
            fn mariadb() {
                super::$name(super::Db::mariadb());
            }
        }
    )*};
}

on_both!(
    status_has_the_pinned_shape,
    checkpoints_list_rows_as_in_status,
    rows_encode_every_value_kind,
    rows_and_commits_page_with_next,
    commits_have_the_pinned_shape,
    unknown_partitions_and_tables_are_refused,
);

const KINDS_SCHEMA: &str = r#"{"version": 1, "tables": [{"name": "kinds", "primaryKey": "id",
  "columns": [{"name": "id", "type": "string"}, {"name": "org", "type": "string"},
              {"name": "n", "type": "integer"}, {"name": "f", "type": "float"},
              {"name": "b", "type": "boolean"}, {"name": "j", "type": "json", "nullable": true},
              {"name": "raw", "type": "bytes", "nullable": true},
              {"name": "att", "type": "blob_ref", "nullable": true},
              {"name": "missing", "type": "string", "nullable": true}],
  "scopes": ["org:{org}"]}]}"#;

fn kinds_row() -> Vec<RowValue> {
    vec![
        RowValue::String("k1".into()),
        RowValue::String("o1".into()),
        RowValue::Integer(-42),
        RowValue::Float(1.5),
        RowValue::Boolean(true),
        RowValue::Json(r#"{"b":2, "a":[1,2]}"#.into()),
        RowValue::Bytes(vec![0x00, 0xab, 0xff]),
        RowValue::BlobRef(r#"{"blobId":"blob-1","size":3}"#.into()),
        RowValue::Null,
    ]
}

fn kinds_values() -> Value {
    json!({
        "id": "k1", "org": "o1", "n": -42, "f": 1.5, "b": true,
        "j": "{\"b\":2, \"a\":[1,2]}", "raw": "00abff",
        "att": "{\"blobId\":\"blob-1\",\"size\":3}", "missing": null,
    })
}

fn status_has_the_pinned_shape(db: Db) {
    let details = db.json_error(&["status"], "sync.storage.not_a_sync_database");
    assert!(details["reason"].is_string(), "{details}");
    db.run(&["status"])
        .text_error("sync.storage.not_a_sync_database");
    // An application process bootstraps the storage tables.
    db.storage().list_partitions().expect("bootstrap");
    let empty = db.json(&["status"]);
    let (synchronous, page_size) = match db {
        Db::Sqlite { .. } => (json!("FULL"), json!(4096)),
        Db::Postgres { .. } | Db::Mariadb { .. } => (Value::Null, Value::Null),
    };
    assert_eq!(
        empty,
        json!({"schema_version": null, "required_writer_version": null, "tables": [], "partitions": [],
               "synchronous": synchronous, "page_size": page_size})
    );
    let _app = seed_todos(&db, "acme", 5, 5);
    let status = db.json(&["status"]);
    assert_eq!(
        keys(&status),
        [
            "page_size",
            "partitions",
            "required_writer_version",
            "schema_version",
            "synchronous",
            "tables"
        ]
    );
    assert_eq!(status["schema_version"], 1);
    assert_eq!(status["required_writer_version"], 1);
    assert_eq!(
        status["tables"],
        json!([{"name": "todos", "materialized": true, "columns": [
            {"name": "id", "type": "string", "nullable": false},
            {"name": "list_id", "type": "string", "nullable": false},
            {"name": "title", "type": "string", "nullable": false},
            {"name": "done", "type": "boolean", "nullable": false},
        ]}])
    );
    assert_eq!(
        status["partitions"],
        json!([{
            "partition": "acme", "max_commit_seq": 1, "horizon_seq": 0, "log_epoch": "acme-epoch",
            "writer_fence": 1, "gate": {"serve": true, "reason": null}, "checkpoints": [],
        }])
    );
    let one = db.json(&["status", "--partition", "acme"]);
    assert_eq!(one["partitions"], status["partitions"]);

    let text = db.run(&["status"]);
    assert_eq!(text.code, 0, "{}", text.stderr);
    assert!(text.stdout.contains("schema version 1"), "{}", text.stdout);
    assert!(
        text.stdout.contains("partition acme: max_commit_seq 1"),
        "{}",
        text.stdout
    );
    assert!(text.stdout.contains("gate serves"), "{}", text.stdout);
}

fn checkpoints_list_rows_as_in_status(db: Db) {
    let _app = seed_todos(&db, "acme", 3, 3);
    let dir = db.scratch();
    let v2 = write_file(&dir, "v2.json", &todos_schema(2, true, ""));
    db.json(&[
        "migrate",
        "--schema",
        &v2,
        "--declare",
        "acme:search_v2",
        "--declare",
        "globex:search_v2",
        "--new-partition",
    ]);
    let listed = db.json(&["checkpoints"]);
    let row = |partition: &str| {
        json!({"partition": partition, "name": "search_v2", "schema_version": 2, "state": "declared",
               "watermark": 0, "owner_epoch": 0, "observed_rows": 0})
    };
    assert_eq!(listed, json!({"checkpoints": [row("acme"), row("globex")]}));
    let only = db.json(&["checkpoints", "--partition", "globex"]);
    assert_eq!(only, json!({"checkpoints": [row("globex")]}));

    let status = db.json(&["status"]);
    let acme = &status["partitions"][0];
    assert_eq!(acme["partition"], "acme");
    assert_eq!(acme["writer_fence"], 2);
    assert_eq!(
        acme["gate"],
        json!({"serve": false, "reason": "checkpoint_pending"})
    );
    let mut expected = row("acme");
    expected.as_object_mut().unwrap().remove("partition");
    assert_eq!(acme["checkpoints"], json!([expected]));
    // globex has only its checkpoint: listed through the pending list.
    assert_eq!(status["partitions"][1]["partition"], "globex");

    let text = db.run(&["checkpoints"]);
    assert!(
        text.stdout
            .contains("acme: search_v2 (schema v2): declared"),
        "{}",
        text.stdout
    );
}

fn rows_encode_every_value_kind(db: Db) {
    let mut app = App::start(&db, KINDS_SCHEMA, "p1");
    app.push("p1", "kinds", &[kinds_row()], &[]);
    let page = db.json(&["rows", "--partition", "p1", "--table", "kinds"]);
    assert_eq!(
        page,
        json!({"rows": [{"row_id": "k1", "server_version": 1, "scopes": {"org": "o1"}, "values": kinds_values()}],
               "next": null})
    );
    let row = &page["rows"][0];
    assert_eq!(keys(row), ["row_id", "scopes", "server_version", "values"]);
    let columns: Vec<&String> = row["values"].as_object().unwrap().keys().collect();
    assert_eq!(
        columns,
        ["id", "org", "n", "f", "b", "j", "raw", "att", "missing"],
        "layout order"
    );
}

fn rows_and_commits_page_with_next(db: Db) {
    let _app = seed_todos(&db, "acme", 7, 2);
    let first = db.json(&[
        "rows",
        "--partition",
        "acme",
        "--table",
        "todos",
        "--limit",
        "3",
    ]);
    assert_eq!(first["rows"].as_array().unwrap().len(), 3);
    assert_eq!(first["next"], "t-0002");
    let last = db.json(&[
        "rows",
        "--partition",
        "acme",
        "--table",
        "todos",
        "--after",
        "t-0005",
        "--limit",
        "1",
    ]);
    assert_eq!(last["rows"][0]["row_id"], "t-0006");
    assert_eq!(last["next"], Value::Null, "the last row has no next");
    let ids: Vec<Value> = all_rows(&db, "acme", "todos", 2)
        .iter()
        .map(|r| r["row_id"].clone())
        .collect();
    assert_eq!(
        ids,
        (0..7)
            .map(|n| json!(format!("t-{n:04}")))
            .collect::<Vec<_>>()
    );

    let page = db.json(&["commits", "--partition", "acme", "--limit", "3"]);
    assert_eq!(page["next"], 3);
    let seqs: Vec<Value> = all_commits(&db, "acme", 3)
        .iter()
        .map(|c| c["commit_seq"].clone())
        .collect();
    assert_eq!(seqs, [json!(1), json!(2), json!(3), json!(4)]);
    let tail = db.json(&["commits", "--partition", "acme", "--after", "4"]);
    assert_eq!(tail, json!({"commits": [], "next": null}));

    let bad = db.json_error(
        &[
            "rows",
            "--partition",
            "acme",
            "--table",
            "todos",
            "--limit",
            "0",
        ],
        "sync.storage.invalid_limit",
    );
    assert!(bad.is_object());
    db.json_error(
        &["commits", "--partition", "acme", "--limit", "1001"],
        "sync.storage.invalid_limit",
    );
}

fn commits_have_the_pinned_shape(db: Db) {
    let mut app = App::start(&db, KINDS_SCHEMA, "p1");
    app.push("p1", "kinds", &[kinds_row()], &[]);
    app.push("p1", "kinds", &[], &["k1"]);
    let page = db.json(&["commits", "--partition", "p1"]);
    let commits = page["commits"].as_array().unwrap();
    assert_eq!(commits.len(), 2);
    assert_eq!(
        commits[0],
        json!({
            "commit_seq": 1, "client_id": "test-client", "client_commit_id": "commit-1",
            "actor_id": "user:test", "created_at_ms": 1_700_000_000_001_i64, "writer_version": 1,
            "changes": [{"table": "kinds", "row_id": "k1", "op": "upsert", "row_version": 1,
                         "scopes": {"org": "o1"}, "values": kinds_values()}],
        })
    );
    assert_eq!(
        commits[1]["changes"],
        json!([{"table": "kinds", "row_id": "k1", "op": "delete", "row_version": null,
                "scopes": {"org": "o1"}, "values": null}])
    );
    assert_eq!(page["next"], Value::Null);

    let text = db.run(&["commits", "--partition", "p1"]);
    assert_eq!(text.code, 0);
    assert!(
        text.stdout.contains("#1 test-client commit-1 by user:test"),
        "{}",
        text.stdout
    );
    assert!(text.stdout.contains("delete kinds k1"), "{}", text.stdout);
}

fn unknown_partitions_and_tables_are_refused(db: Db) {
    let _app = seed_todos(&db, "acme", 2, 2);
    for args in [
        vec!["rows", "--partition", "nope", "--table", "todos"],
        vec!["commits", "--partition", "nope"],
        vec!["status", "--partition", "nope"],
        vec!["checkpoints", "--partition", "nope"],
    ] {
        let details = db.json_error(&args, "sync.cli.unknown_partition");
        assert_eq!(details, json!({"partition": "nope"}));
        db.run(&args).text_error("sync.cli.unknown_partition");
    }
    let details = db.json_error(
        &["rows", "--partition", "acme", "--table", "nope"],
        "sync.storage.unknown_table",
    );
    assert_eq!(details["table"], "nope");
    db.run(&["rows", "--partition", "acme", "--table", "sync_commits"])
        .text_error("sync.storage.unknown_table");
    db.json_error(
        &["rows", "--partition", "", "--table", "todos"],
        "sync.storage.invalid_partition",
    );
}
