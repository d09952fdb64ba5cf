//! `backfill` on SQLite and Postgres: the derived-column and derived-table
//! projectors run to activation and open the gate; outcomes in text and
//! JSON; refusals before any work.

mod common;

use common::{all_rows, seed_todos, todos_schema, write_file, Db, TODO_SEARCH_TABLE};
use serde_json::{json, Value};

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
    a_derived_column_is_backfilled_and_activated,
    a_derived_table_is_backfilled,
    backfill_refusals_come_first,
    an_undeclared_name_is_refused_unless_declared_new,
);

fn a_derived_column_is_backfilled_and_activated(db: Db) {
    let _app = seed_todos(&db, "acme", 45, 4);
    let dir = db.scratch();
    let v2 = write_file(&dir, "v2.json", &todos_schema(2, true, ""));
    db.json(&["migrate", "--schema", &v2, "--declare", "acme:search_v2"]);
    let args = [
        "backfill",
        "--partition",
        "acme",
        "--name",
        "search_v2",
        "--schema",
        &v2,
        "--projector",
        "derived-column",
        "--table",
        "todos",
        "--column",
        "search_text",
        "--from",
        "title",
        "--transform",
        "lower",
        "--batch-size",
        "10",
    ];
    let outcome = db.json(&args);
    assert_eq!(
        common::keys(&outcome),
        [
            "elapsed_ms",
            "name",
            "observed_rows",
            "outcome",
            "owner_epoch",
            "partition",
            "schema_version",
            "watermark"
        ]
    );
    assert_eq!(outcome["outcome"], "activated");
    assert_eq!(outcome["partition"], "acme");
    assert_eq!(outcome["name"], "search_v2");
    assert_eq!(outcome["schema_version"], 2);
    assert_eq!(outcome["owner_epoch"], 1);
    assert_eq!(outcome["observed_rows"], 45);

    let rows = all_rows(&db, "acme", "todos", 1000);
    assert_eq!(rows.len(), 45);
    for row in &rows {
        let title = row["values"]["title"].as_str().unwrap();
        assert_eq!(
            row["values"]["search_text"],
            json!(title.to_lowercase()),
            "{row}"
        );
        assert_eq!(
            row["server_version"], 2,
            "the backfill wrote each row once: {row}"
        );
    }
    let status = db.json(&["status"]);
    assert_eq!(
        status["partitions"][0]["gate"],
        json!({"serve": true, "reason": null})
    );
    assert_eq!(
        status["partitions"][0]["checkpoints"][0]["state"],
        "activated"
    );
    // Undeclared v2 code can start now.
    assert_eq!(
        db.json(&["migrate", "--schema", &v2])["plan"]["action"],
        "verify"
    );

    let again = db.json(&args);
    assert_eq!(again["outcome"], "already_activated");
    assert_eq!(again["watermark"], Value::Null);
    let text = db.run(&args);
    assert_eq!(text.code, 0, "{}", text.stderr);
    assert!(
        text.stdout
            .contains("backfill acme:search_v2 at schema version 2: already_activated"),
        "{}",
        text.stdout
    );
}

fn a_derived_table_is_backfilled(db: Db) {
    let _app = seed_todos(&db, "acme", 12, 5);
    let dir = db.scratch();
    let v2 = write_file(&dir, "v2.json", &todos_schema(2, false, TODO_SEARCH_TABLE));
    db.json(&[
        "migrate",
        "--schema",
        &v2,
        "--declare",
        "acme:todo_search_v2",
    ]);
    let run = db.run(&[
        "backfill",
        "--partition",
        "acme",
        "--name",
        "todo_search_v2",
        "--schema",
        &v2,
        "--projector",
        "derived-table",
        "--source",
        "todos",
        "--target",
        "todo_search",
        "--map",
        "terms=title:upper",
    ]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains(": activated (owner epoch 1"),
        "{}",
        run.stdout
    );
    let projected = all_rows(&db, "acme", "todo_search", 5);
    assert_eq!(projected.len(), 12);
    for row in &projected {
        let n: u32 = row["row_id"].as_str().unwrap()[2..].parse().unwrap();
        assert_eq!(
            row["values"],
            json!({"id": format!("t-{n:04}"), "list_id": format!("list-{}", n % 3),
                   "terms": format!("BUY MILK NR {n}")})
        );
        assert_eq!(row["scopes"], json!({"list_id": format!("list-{}", n % 3)}));
    }
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

fn backfill_refusals_come_first(db: Db) {
    let _app = seed_todos(&db, "acme", 3, 3);
    let dir = db.scratch();
    let v1 = write_file(&dir, "v1.json", &todos_schema(1, false, ""));
    let v2 = write_file(&dir, "v2.json", &todos_schema(2, true, ""));
    let column = |schema: &str, partition: &str, column: &str, from: &str| -> Vec<String> {
        [
            "backfill",
            "--partition",
            partition,
            "--name",
            "search_v2",
            "--schema",
            schema,
            "--projector",
            "derived-column",
            "--table",
            "todos",
            "--column",
            column,
            "--from",
            from,
            "--declare-new",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };

    // The database is at v1: a v2 backfill must not migrate it.
    let args = column(&v2, "acme", "search_text", "title");
    let details = db.json_error(&strs(&args), "sync.cli.schema_mismatch");
    assert_eq!(details, json!({"stored": "1", "schema": "2"}));
    assert_eq!(db.json(&["status"])["schema_version"], 1);

    db.json(&["migrate", "--schema", &v2]);
    db.json_error(
        &strs(&column(&v1, "acme", "search_text", "title")),
        "sync.cli.schema_mismatch",
    );
    db.json_error(
        &strs(&column(&v2, "nope", "search_text", "title")),
        "sync.cli.unknown_partition",
    );
    let details = db.json_error(
        &strs(&column(&v2, "acme", "search_text", "nope")),
        "sync.cli.invalid_projector",
    );
    assert_eq!(details["option"], "--from");
    assert_eq!(details["reason"], "unknown_column");
    let details = db.json_error(
        &strs(&column(&v2, "acme", "search_text", "done")),
        "sync.cli.invalid_projector",
    );
    assert_eq!(details["reason"], "type_mismatch");
    db.run(&strs(&column(&v2, "acme", "title", "list_id")))
        .text_error("sync.storage.invalid_argument");
    assert_eq!(
        db.json(&["checkpoints"]),
        json!({"checkpoints": []}),
        "refusals declare nothing"
    );

    // Usage errors exit 2.
    let usage = db.run(&[
        "backfill",
        "--partition",
        "acme",
        "--name",
        "x",
        "--schema",
        &v2,
        "--projector",
        "derived-column",
    ]);
    assert_eq!(usage.code, 2, "{}", usage.stderr);
    let foreign = db.run(&[
        "backfill",
        "--partition",
        "acme",
        "--name",
        "x",
        "--schema",
        &v2,
        "--projector",
        "derived-table",
        "--source",
        "todos",
        "--target",
        "todos",
        "--table",
        "todos",
    ]);
    assert_eq!(foreign.code, 2, "{}", foreign.stderr);
    assert!(
        foreign.stderr.contains("--table does not apply"),
        "{}",
        foreign.stderr
    );
}

/// A typo in `--name` must not declare a bogus checkpoint (which would close
/// the partition to every process that does not declare it): the name is
/// refused with the partition's declared checkpoints, nothing is declared,
/// and `--declare-new` is the explicit way to declare one.
fn an_undeclared_name_is_refused_unless_declared_new(db: Db) {
    let _app = seed_todos(&db, "acme", 6, 3);
    let dir = db.scratch();
    let v2 = write_file(&dir, "v2.json", &todos_schema(2, true, ""));
    db.json(&["migrate", "--schema", &v2, "--declare", "acme:search_v2"]);
    let args = |name: &'static str| -> Vec<String> {
        [
            "backfill",
            "--partition",
            "acme",
            "--name",
            name,
            "--schema",
            &v2,
            "--projector",
            "derived-column",
            "--table",
            "todos",
            "--column",
            "search_text",
            "--from",
            "title",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    let before = db.json(&["checkpoints"]);
    let details = db.json_error(&strs(&args("serach_v2")), "sync.cli.checkpoint_undeclared");
    assert_eq!(
        details,
        json!({"partition": "acme", "name": "serach_v2", "declared": "search_v2@2",
               "hint": "check the name, or pass --declare-new"})
    );
    db.run(&strs(&args("serach_v2")))
        .text_error("sync.cli.checkpoint_undeclared");
    assert_eq!(
        db.json(&["checkpoints"]),
        before,
        "the typo declared nothing"
    );
    assert_eq!(
        db.json(&["status"])["partitions"][0]["gate"],
        json!({"serve": false, "reason": "checkpoint_pending"}),
        "only the real checkpoint holds the gate"
    );

    // The declared name runs.
    assert_eq!(db.json(&strs(&args("search_v2")))["outcome"], "activated");
    // A new name with --declare-new is declared by the runner and activated.
    let mut new = args("search_v2b");
    new.push("--declare-new".to_owned());
    assert_eq!(db.json(&strs(&new))["outcome"], "activated");
    let names: Vec<Value> = db.json(&["checkpoints"])["checkpoints"]
        .as_array()
        .expect("checkpoints")
        .iter()
        .map(|c| c["name"].clone())
        .collect();
    assert_eq!(names, [json!("search_v2"), json!("search_v2b")]);
}
