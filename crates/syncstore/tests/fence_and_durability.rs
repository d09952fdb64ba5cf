//! `status` reports a writer fence only when the database enforces it, and
//! shows the SQLite durability setting in force (`sqlite:PATH?synchronous=`).

mod common;

use common::{seed_todos, todos_schema, write_file, Db};
use serde_json::json;

fn pg_raw(db: &Db) -> postgres::Client {
    let Db::Postgres { server, schema } = db else {
        unreachable!("a Postgres database")
    };
    let mut client = postgres::Client::connect(server, postgres::NoTls).expect("connect");
    client
        .batch_execute(&format!("SET search_path TO \"{schema}\""))
        .expect("search_path");
    client
}

#[test]
fn status_refuses_to_report_a_fence_the_database_does_not_enforce() {
    let db = Db::postgres();
    let _app = seed_todos(&db, "acme", 2, 1);
    assert_eq!(db.json(&["status"])["partitions"][0]["writer_fence"], 1);

    // Our trigger re-created under its own name, running our function, but
    // never firing on a commit insert.
    let redefined = |definition: &str| {
        format!(
            "DROP TRIGGER sync_commits_effective_writer_fence ON sync_commits; \
             CREATE TRIGGER sync_commits_effective_writer_fence {definition} \
             EXECUTE FUNCTION sync_writer_fence_check()"
        )
    };
    for (statement, expected) in [
        (
            "ALTER TABLE sync_commits DISABLE TRIGGER sync_commits_effective_writer_fence"
                .to_owned(),
            json!({ "cause": "trigger_disabled" }),
        ),
        (
            "DROP TRIGGER sync_commits_effective_writer_fence ON sync_commits".to_owned(),
            json!({ "cause": "trigger_missing" }),
        ),
        (
            redefined("BEFORE INSERT ON sync_commits FOR EACH ROW WHEN (false)"),
            json!({ "cause": "trigger_tampered", "difference": "condition" }),
        ),
        (
            redefined("BEFORE UPDATE ON sync_commits FOR EACH ROW"),
            json!({ "cause": "trigger_tampered", "difference": "events" }),
        ),
        (
            redefined("AFTER INSERT ON sync_commits FOR EACH ROW"),
            json!({ "cause": "trigger_tampered", "difference": "timing" }),
        ),
        (
            redefined("BEFORE INSERT ON sync_commits FOR EACH STATEMENT"),
            json!({ "cause": "trigger_tampered", "difference": "level" }),
        ),
    ] {
        pg_raw(&db).batch_execute(&statement).unwrap();
        let details = db.json_error(&["status"], "sync.cli.fence_not_enforced");
        assert_eq!(details, expected, "{statement}");
        let cause = expected["cause"].as_str().unwrap_or_default();
        let text = db.run(&["status"]);
        text.text_error("sync.cli.fence_not_enforced");
        assert!(text.stderr.contains(cause), "{}", text.stderr);
        assert!(!text.stderr.contains("writer fence 1"), "{}", text.stderr);

        // `migrate` at the stored version re-installs it.
        let dir = db.scratch();
        let v1 = write_file(&dir, "v1.json", &todos_schema(1, false, ""));
        db.json(&["migrate", "--schema", &v1]);
        assert_eq!(db.json(&["status"])["partitions"][0]["writer_fence"], 1);
    }
}

#[test]
fn status_shows_the_sqlite_synchronous_setting_in_force() {
    let db = Db::sqlite();
    let _app = seed_todos(&db, "acme", 1, 1);
    assert_eq!(db.json(&["status"])["synchronous"], "FULL");
    let text = db.run(&["status"]);
    assert!(
        text.stdout.contains("durability: synchronous=FULL"),
        "{}",
        text.stdout
    );

    let normal = format!("{}?synchronous=normal", db.url());
    let run = common::syncstore(&["--db", &normal, "status", "--json"]);
    assert_eq!(run.ok_json()["synchronous"], "NORMAL");

    let bad = format!("{}?synchronous=off", db.url());
    let details =
        common::syncstore(&["--db", &bad, "status", "--json"]).json_error("sync.cli.invalid_url");
    assert_eq!(details["reason"], "bad_synchronous");
}

#[test]
fn a_page_size_applies_to_a_new_sqlite_file_and_status_reads_it_back() {
    let db = Db::sqlite();
    let small = format!("{}?page_size=1024", db.url());
    let dir = db.scratch();
    let v1 = write_file(&dir, "v1.json", &todos_schema(1, false, ""));
    common::syncstore(&["--db", &small, "migrate", "--schema", &v1, "--json"]).ok_json();
    assert_eq!(db.json(&["status"])["page_size"], 1024);
    let text = db.run(&["status"]);
    assert!(
        text.stdout.contains("file: page_size=1024"),
        "{}",
        text.stdout
    );

    // An existing file keeps the size it was created with.
    let other = format!("{}?page_size=8192", db.url());
    let run = common::syncstore(&["--db", &other, "status", "--json"]);
    assert_eq!(run.ok_json()["page_size"], 1024);

    let bad = format!("{}?page_size=1000", db.url());
    let details =
        common::syncstore(&["--db", &bad, "status", "--json"]).json_error("sync.cli.invalid_url");
    assert_eq!(details["reason"], "bad_page_size");

    let pg = Db::postgres();
    let _app = seed_todos(&pg, "acme", 1, 1);
    assert_eq!(pg.json(&["status"])["page_size"], serde_json::Value::Null);
}
