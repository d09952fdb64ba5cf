//! `prune` (epoch-fenced, monotonic) and the command line's own error
//! paths: bad URLs, unreachable databases, usage errors, the default URL.

mod common;

use common::{pg_url, seed_todos, syncstore, syncstore_in, todos_schema, write_file, Db};
use serde_json::json;

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

on_both!(prune_is_epoch_fenced_and_monotonic);

fn prune_is_epoch_fenced_and_monotonic(db: Db) {
    let _app = seed_todos(&db, "acme", 30, 1);
    let pruned = db.json(&["prune", "--partition", "acme", "--through", "10"]);
    assert_eq!(pruned, json!({"horizon_seq": 10, "deleted_commits": 10}));
    let first = db.json(&["commits", "--partition", "acme", "--limit", "1"]);
    assert_eq!(first["commits"][0]["commit_seq"], 11);
    let lower = db.json(&["prune", "--partition", "acme", "--through", "5"]);
    assert_eq!(
        lower,
        json!({"horizon_seq": 10, "deleted_commits": 0}),
        "the horizon never goes back"
    );
    let status = db.json(&["status"]);
    assert_eq!(status["partitions"][0]["horizon_seq"], 10);
    assert_eq!(status["partitions"][0]["max_commit_seq"], 30);

    let text = db.run(&["prune", "--partition", "acme", "--through", "12"]);
    assert_eq!(text.code, 0, "{}", text.stderr);
    assert_eq!(
        text.stdout,
        "partition acme: horizon 12 (was 10), 2 commits deleted\n"
    );

    let details = db.json_error(
        &["prune", "--partition", "nope", "--through", "1"],
        "sync.storage.partition_unregistered",
    );
    assert_eq!(details, json!({"partition": "nope"}));
    db.run(&["prune", "--partition", "nope", "--through", "1"])
        .text_error("sync.storage.partition_unregistered");
    db.json_error(
        &["prune", "--partition", "acme", "--through", "-1"],
        "sync.storage.invalid_prune_cursor",
    );
}

#[test]
fn bad_urls_are_coded() {
    for url in [
        "oracle://localhost/x",
        "mariadb://localhost",
        "mysql://u@h:notaport/db",
        "syncstore.db",
        "sqlite:",
        "postgres://u@h:notaport/db",
    ] {
        let run = syncstore(&["--db", url, "status", "--json"]);
        let details = run.json_error("sync.cli.invalid_url");
        assert!(details["reason"].is_string(), "{details}");
        syncstore(&["--db", url, "status"]).text_error("sync.cli.invalid_url");
    }
}

#[test]
fn an_unopenable_sqlite_file_is_unreachable() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("no/such/dir/x.db").display());
    let details = syncstore(&["--db", &url, "status", "--json"]).json_error("sync.cli.unreachable");
    assert!(details["reason"].is_string(), "{details}");
    // Inspection (read-only opening) says why, as writing commands do.
    assert_eq!(details["cause"], "directory_missing", "{details}");
    syncstore(&["--db", &url, "status"]).text_error("sync.cli.unreachable");
}

#[test]
fn an_unreachable_mariadb_server_is_coded() {
    // Port 1 on the loopback refuses connections immediately.
    let url = "mariadb://root@127.0.0.1:1/test";
    let details = syncstore(&["--db", url, "status", "--json"]).json_error("sync.cli.unreachable");
    assert!(details["reason"].is_string(), "{details}");
    syncstore(&["--db", url, "status"]).text_error("sync.cli.unreachable");
}

#[test]
fn an_unreachable_postgres_server_is_coded() {
    // Port 1 on the loopback refuses connections immediately.
    let url = "postgres://postgres@127.0.0.1:1/test";
    let details = syncstore(&["--db", url, "status", "--json"]).json_error("sync.cli.unreachable");
    assert!(details["reason"].is_string(), "{details}");
    assert_eq!(details["cause"], "unreachable", "{details}");
    assert_eq!(details["storage_code"], "sync.storage.backend", "{details}");
    let details = syncstore(&[
        "--db",
        &format!("{url}?schema=x"),
        "prune",
        "--partition",
        "acme",
        "--through",
        "1",
        "--json",
    ])
    .json_error("sync.cli.unreachable");
    assert_eq!(details["cause"], "unreachable", "{details}");
    let with_schema = format!("{url}?schema=x");
    syncstore(&["--db", &with_schema, "status"]).text_error("sync.cli.unreachable");
}

#[test]
fn a_postgres_url_may_carry_the_schema_in_options() {
    let db = Db::postgres();
    let Db::Postgres { server, schema } = &db else {
        unreachable!()
    };
    let separator = if server.contains('?') { '&' } else { '?' };
    let url = format!("{server}{separator}options=-csearch_path%3D{schema}");
    let _app = seed_todos(&db, "acme", 2, 2);
    let status = syncstore(&["--db", &url, "status", "--json"]).ok_json();
    assert_eq!(status["schema_version"], 1);
    assert_eq!(status["partitions"][0]["partition"], "acme");
    assert!(!pg_url().is_empty());
}

#[test]
fn usage_errors_exit_2() {
    for args in [
        vec!["frobnicate"],
        vec!["migrate"],
        vec!["rows", "--partition", "acme"],
        vec!["prune", "--partition", "acme", "--through", "x"],
        vec!["migrate", "--schema", "s.json", "--declare", "no-colon"],
        vec!["demo", "--rows", "0"],
    ] {
        let run = syncstore(&args);
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert!(run.stdout.is_empty(), "{args:?}");
    }
    assert_eq!(syncstore(&["--help"]).code, 0);
}

#[test]
fn the_database_url_defaults_to_the_environment_then_a_local_file() {
    let dir = tempfile::tempdir().unwrap();
    let run = syncstore_in(Some(dir.path()), &["status", "--json"], &[]);
    let details = run.json_error("sync.storage.not_a_sync_database");
    assert_eq!(details["reason"], "no_file");
    assert!(
        !dir.path().join("syncstore.db").exists(),
        "inspection never creates the default sqlite:syncstore.db"
    );
    let v1 = write_file(&dir, "v1.json", &todos_schema(1, false, ""));
    syncstore_in(
        Some(dir.path()),
        &["migrate", "--schema", &v1, "--json"],
        &[],
    )
    .ok_json();
    assert!(
        dir.path().join("syncstore.db").exists(),
        "the default is sqlite:syncstore.db"
    );

    let other = dir.path().join("from-env.db");
    let env_url = format!("sqlite:{}", other.display());
    let run = syncstore_in(
        Some(dir.path()),
        &["migrate", "--schema", &v1, "--json"],
        &[("SYNCSTORE_DATABASE_URL", &env_url)],
    );
    run.ok_json();
    assert!(
        other.exists(),
        "SYNCSTORE_DATABASE_URL wins over the default"
    );

    let run = syncstore_in(
        Some(dir.path()),
        &["--db", "oracle://x", "status"],
        &[("SYNCSTORE_DATABASE_URL", &env_url)],
    );
    run.text_error("sync.cli.invalid_url");
}

#[test]
fn json_output_is_one_document_and_logs_go_to_stderr() {
    let db = Db::sqlite();
    let _app = seed_todos(&db, "acme", 2, 2);
    let run = db.run(&["-vv", "status", "--json"]);
    assert_eq!(run.code, 0);
    run.json();
    assert!(!run.stdout.contains("DEBUG"), "logs never reach stdout");
}
