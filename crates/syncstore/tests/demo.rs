//! The demo, run as a newcomer would: default temporary SQLite, an explicit
//! file, JSON summary, and Postgres (a fresh schema it creates itself).

mod common;

use common::{pg_url, syncstore, Db};
use serde_json::Value;

const STEPS: usize = 9;

fn check_summary(summary: &Value, rows: u64) {
    assert_eq!(summary["ok"], true);
    assert_eq!(summary["rows"], rows);
    let steps = summary["steps"].as_array().expect("steps");
    assert_eq!(steps.len(), STEPS);
    for (i, step) in steps.iter().enumerate() {
        assert_eq!(step["step"], i + 1);
        assert!(step["title"].as_str().is_some_and(|t| !t.is_empty()));
        assert!(
            !step["checks"].as_array().unwrap().is_empty(),
            "step {} checks something",
            i + 1
        );
    }
    assert_eq!(steps[6]["facts"]["outcome"], "activated");
    assert_eq!(steps[8]["facts"]["mismatched"], 0);
}

#[test]
fn the_demo_tells_the_whole_story_on_a_temporary_sqlite_file() {
    let run = syncstore(&["demo", "--rows", "60"]);
    assert_eq!(
        run.code, 0,
        "stdout:\n{}\nstderr:\n{}",
        run.stdout, run.stderr
    );
    let out = &run.stdout;
    assert!(
        out.contains("Database: a new SQLite file in a new temporary directory: "),
        "{out}"
    );
    for n in 1..=STEPS {
        assert!(
            out.contains(&format!("\n{n}. ")),
            "step {n} is told:\n{out}"
        );
    }
    for claim in [
        "sync.storage.writer_fence_rejected",
        "checkpoint_pending",
        "sync.storage.checkpoint_incomplete",
        "the runner activated the checkpoint",
        "D starts without declarations",
        "rows have search_text = lower(title)",
    ] {
        assert!(out.contains(claim), "the demo shows `{claim}`:\n{out}");
    }
    assert!(!out.contains('✗'), "{out}");
    assert!(
        out.contains(&format!("All {STEPS} steps behaved as told")),
        "{out}"
    );

    // The printed database can be inspected afterwards.
    let url = out
        .lines()
        .find_map(|l| l.strip_prefix("Look inside: syncstore --db '"))
        .and_then(|l| l.split('\'').next())
        .expect("the demo prints how to look inside");
    let status = syncstore(&["--db", url, "status", "--json"]).ok_json();
    assert_eq!(status["schema_version"], 2);
    assert_eq!(
        status["partitions"][0]["checkpoints"][0]["state"],
        "activated"
    );
    if let Some(path) = url.strip_prefix("sqlite:") {
        if let Some(dir) = std::path::Path::new(path).parent() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

#[test]
fn the_demo_summarizes_in_json_on_a_named_file() {
    let db = Db::sqlite();
    let run = db.run(&["demo", "--rows", "25", "--json"]);
    let summary = run.ok_json();
    check_summary(&summary, 25);
    assert_eq!(summary["database"], db.url());
    // A second run refuses the now used file.
    let again = db.run(&["demo", "--rows", "25", "--json"]);
    let details = again.json_error("sync.cli.database_not_empty");
    assert!(details["path"].is_string());
}

#[test]
fn the_demo_runs_on_postgres_in_a_fresh_schema() {
    let server = pg_url();
    let run = syncstore(&["--db", &server, "demo", "--rows", "40", "--json"]);
    let summary = run.ok_json();
    check_summary(&summary, 40);
    let url = summary["database"].as_str().expect("database URL");
    let schema = url
        .split("schema=")
        .nth(1)
        .expect("the demo names its schema")
        .to_owned();
    assert!(schema.starts_with("syncstore_demo_"), "{schema}");
    let status = syncstore(&["--db", url, "status", "--json"]).ok_json();
    assert_eq!(status["schema_version"], 2);
    let mut client =
        postgres::Client::connect(&server, postgres::NoTls).expect("Postgres is reachable");
    client
        .batch_execute(&format!("DROP SCHEMA \"{schema}\" CASCADE"))
        .expect("drop the demo schema");
}

#[test]
fn the_demo_runs_on_a_fresh_mariadb_database_and_only_a_fresh_one() {
    let db = Db::mariadb();
    let url = db.url();
    // Inspection of a database without the storage tables creates nothing.
    let details = db.json_error(&["status"], "sync.storage.not_a_sync_database");
    assert_eq!(details["reason"], "no_tables", "{details}");
    let Db::Mariadb { scratch, .. } = &db else {
        unreachable!()
    };
    let mut raw = scratch.raw().expect("a plain connection");
    let tables: Vec<String> = mysql::prelude::Queryable::query(
        &mut raw,
        "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE()",
    )
    .expect("the catalog reads");
    assert!(tables.is_empty(), "status created {tables:?}");
    let summary = syncstore(&["--db", &url, "demo", "--rows", "40", "--json"]).ok_json();
    check_summary(&summary, 40);
    assert_eq!(summary["database"], url.as_str());
    let status = db.json(&["status"]);
    assert_eq!(status["schema_version"], 2);
    // A second demo on the same database is refused: it is not fresh.
    let again = syncstore(&["--db", &url, "demo", "--json"]);
    let details = again.json_error("sync.cli.database_not_empty");
    assert_eq!(details["database"], url.as_str(), "{details}");
}
