//! `migrate` on SQLite and Postgres: fresh database, bump with
//! declarations, `--dry-run` changing nothing, same-version verification,
//! refusals, and schema-file errors.

mod common;

use common::{all_rows, seed_todos, syncstore_in, todos_schema, write_file, Db};
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
    a_fresh_database_is_created,
    a_dry_run_prints_the_bump_and_changes_nothing,
    a_bump_installs_declarations_and_fences,
    the_same_version_verifies_and_declares_online,
    refused_migrations_change_nothing,
    schema_file_errors_keep_their_codes,
    a_bump_that_rewrites_rows_logs_its_progress_off_a_terminal,
    hostile_arguments_are_coded_and_create_nothing,
    a_table_left_out_keeps_its_rows_unless_retired_by_name,
    a_changed_primary_key_or_scope_is_refused_while_rows_exist,
);

fn statements(plan: &Value, key: &str) -> Vec<String> {
    plan[key]
        .as_array()
        .unwrap_or_else(|| panic!("plan.{key} is not an array: {plan:#}"))
        .iter()
        .map(|s| s["sql"].as_str().unwrap_or_default().to_owned())
        .collect()
}

fn a_fresh_database_is_created(db: Db) {
    let dir = db.scratch();
    let v1 = write_file(&dir, "v1.json", &todos_schema(1, false, ""));
    let dry = db.json(&["migrate", "--schema", &v1, "--dry-run"]);
    assert_eq!(dry["from_version"], Value::Null);
    assert_eq!(dry["to_version"], 1);
    assert_eq!(dry["applied"], false);
    assert_eq!(dry["plan"]["action"], "create");
    assert!(
        statements(&dry["plan"], "creates")
            .iter()
            .any(|s| s.starts_with("CREATE TABLE")),
        "{dry:#}"
    );
    assert_eq!(
        db.json(&["status"])["schema_version"],
        Value::Null,
        "the dry run created nothing"
    );

    let applied = db.json(&["migrate", "--schema", &v1]);
    assert_eq!(
        keys_of(&applied),
        [
            "applied",
            "declared_online",
            "from_version",
            "plan",
            "to_version"
        ]
    );
    assert_eq!(applied["applied"], true);
    assert_eq!(
        applied["plan"], dry["plan"],
        "the applied plan is the previewed one"
    );
    assert_eq!(db.json(&["status"])["schema_version"], 1);

    let text = db.run(&["migrate", "--schema", &v1]);
    assert_eq!(text.code, 0, "{}", text.stderr);
    assert!(
        text.stdout.starts_with(
            "schema version 1 → 1 (verify): already there, nothing migrated by this run"
        ),
        "{}",
        text.stdout
    );
}

fn keys_of(value: &Value) -> Vec<String> {
    common::keys(value)
}

/// `ADD COLUMN` of `search_text`, quoted as the database's dialect quotes.
fn add_search_text(db: &Db) -> String {
    match db {
        Db::Mariadb { .. } => "ADD COLUMN IF NOT EXISTS `search_text`".to_owned(),
        Db::Sqlite { .. } | Db::Postgres { .. } => "ADD COLUMN \"search_text\"".to_owned(),
    }
}

fn a_dry_run_prints_the_bump_and_changes_nothing(db: Db) {
    let _app = seed_todos(&db, "acme", 4, 4);
    let dir = db.scratch();
    let v2 = write_file(&dir, "v2.json", &todos_schema(2, true, ""));
    let before = db.json(&["status"]);
    let dry = db.json(&[
        "migrate",
        "--schema",
        &v2,
        "--declare",
        "acme:search_v2",
        "--dry-run",
    ]);
    assert_eq!(dry["from_version"], 1);
    assert_eq!(dry["to_version"], 2);
    assert_eq!(dry["applied"], false);
    let plan = &dry["plan"];
    assert_eq!(plan["action"], "bump");
    assert_eq!(plan["schemaVersion"], 2);
    assert!(
        statements(plan, "creates")
            .iter()
            .any(|s| s.contains(&add_search_text(&db))),
        "{plan:#}"
    );
    assert!(
        statements(plan, "drops")
            .iter()
            .any(|s| s.contains("sync_ix_todos_by_list")),
        "{plan:#}"
    );
    let rewrite = plan["rewrites"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["table"] == "todos")
        .unwrap();
    assert_eq!(rewrite["migrate"], true, "{plan:#}");
    assert_eq!(
        plan["declarations"],
        json!([{"partition": "acme", "name": "search_v2", "schemaVersion": 2}])
    );
    assert_eq!(db.json(&["status"]), before, "a dry run changes nothing");
    assert_eq!(db.json(&["checkpoints"]), json!({"checkpoints": []}));

    let text = db.run(&["migrate", "--schema", &v2, "--dry-run"]);
    assert_eq!(text.code, 0, "{}", text.stderr);
    assert!(
        text.stdout.contains("dry run, nothing changed"),
        "{}",
        text.stdout
    );
    assert!(
        text.stdout.contains(&add_search_text(&db)),
        "{}",
        text.stdout
    );
}

fn a_bump_installs_declarations_and_fences(db: Db) {
    let _app = seed_todos(&db, "acme", 4, 2);
    let dir = db.scratch();
    let v2 = write_file(&dir, "v2.json", &todos_schema(2, true, ""));
    let applied = db.json(&["migrate", "--schema", &v2, "--declare", "acme:search_v2"]);
    assert_eq!(applied["applied"], true);
    let status = db.json(&["status"]);
    assert_eq!(status["schema_version"], 2);
    assert_eq!(status["required_writer_version"], 2);
    assert_eq!(
        status["partitions"][0]["gate"],
        json!({"serve": false, "reason": "checkpoint_pending"})
    );
    assert_eq!(
        status["partitions"][0]["checkpoints"][0]["state"],
        "declared"
    );
    // Rows were re-encoded: search_text is present and NULL.
    let rows = db.json(&["rows", "--partition", "acme", "--table", "todos"]);
    assert_eq!(rows["rows"][0]["values"]["search_text"], Value::Null);
    assert!(rows["rows"][0]["values"]
        .as_object()
        .unwrap()
        .contains_key("search_text"));
    // History keeps its v1 encoding and decodes under the v1 prefix.
    let commits = db.json(&["commits", "--partition", "acme", "--limit", "1"]);
    let values = commits["commits"][0]["changes"][0]["values"]
        .as_object()
        .unwrap();
    assert!(!values.contains_key("search_text"), "{commits:#}");
    assert_eq!(values["title"], "Buy MILK Nr 0");

    // `migrate` at v2 without the declaration verifies: it runs as an
    // operator process knowing every pending checkpoint (serving processes
    // keep the startup check, see the conformance suite).
    let verified = db.json(&["migrate", "--schema", &v2]);
    assert_eq!(verified["applied"], false);
    assert_eq!(
        db.json(&["checkpoints"])["checkpoints"][0]["state"],
        "declared"
    );
    // With it, it can (same version: verification).
    let again = db.json(&["migrate", "--schema", &v2, "--declare", "acme:search_v2"]);
    assert_eq!(again["plan"]["action"], "verify");
}

fn the_same_version_verifies_and_declares_online(db: Db) {
    let _app = seed_todos(&db, "acme", 2, 2);
    let dir = db.scratch();
    let v1 = write_file(&dir, "v1.json", &todos_schema(1, false, ""));
    let verified = db.json(&["migrate", "--schema", &v1, "--declare", "acme:reindex_v1"]);
    assert_eq!(verified["from_version"], 1);
    assert_eq!(verified["plan"]["action"], "verify");
    assert_eq!(
        verified["plan"]["legacyUpgrade"],
        json!({"dialect": verified["plan"]["dialect"], "columnAdditions": [], "collations": [], "indexDrops": [], "indexCreates": []})
    );
    let checkpoints = db.json(&["checkpoints"]);
    assert_eq!(checkpoints["checkpoints"][0]["name"], "reindex_v1");
    assert_eq!(checkpoints["checkpoints"][0]["state"], "declared");
    // Declaring again is idempotent.
    db.json(&["migrate", "--schema", &v1, "--declare", "acme:reindex_v1"]);
    assert_eq!(db.json(&["checkpoints"]), checkpoints);
}

fn refused_migrations_change_nothing(db: Db) {
    let _app = seed_todos(&db, "acme", 3, 3);
    let dir = db.scratch();
    let removed =
        todos_schema(2, false, "").replace(r#", {"name": "done", "type": "boolean"}"#, "");
    assert!(!removed.contains("\"done\""));
    let v2_removed = write_file(&dir, "removed.json", &removed);
    let before = db.json(&["status"]);
    let details = db.json_error(
        &["migrate", "--schema", &v2_removed],
        "sync.storage.migration_refused",
    );
    assert_eq!(details["reason"], "column_removed");
    assert_eq!(details["table"], "todos");
    db.run(&["migrate", "--schema", &v2_removed])
        .text_error("sync.storage.migration_refused");
    db.json_error(
        &["migrate", "--schema", &v2_removed, "--dry-run"],
        "sync.storage.migration_refused",
    );
    assert_eq!(
        db.json(&["status"]),
        before,
        "a refused migration changes nothing"
    );

    let not_nullable = todos_schema(2, false, "").replace(
        r#"{"name": "done", "type": "boolean"}"#,
        r#"{"name": "done", "type": "boolean"}, {"name": "due", "type": "integer"}"#,
    );
    let path = write_file(&dir, "not_nullable.json", &not_nullable);
    let details = db.json_error(
        &["migrate", "--schema", &path],
        "sync.storage.migration_refused",
    );
    assert_eq!(details["reason"], "column_not_nullable");

    let same_version_changed = write_file(&dir, "changed.json", &todos_schema(1, true, ""));
    db.json_error(
        &["migrate", "--schema", &same_version_changed],
        "sync.storage.stored_layout_mismatch",
    );

    let v2 = write_file(&dir, "v2.json", &todos_schema(2, true, ""));
    db.json(&["migrate", "--schema", &v2]);
    let v1 = write_file(&dir, "v1.json", &todos_schema(1, false, ""));
    let details = db.json_error(
        &["migrate", "--schema", &v1],
        "sync.storage.schema_newer_than_code",
    );
    assert_eq!(details, json!({"stored": "2", "configured": "1"}));
    assert_eq!(db.json(&["status"])["schema_version"], 2);
}

fn schema_file_errors_keep_their_codes(db: Db) {
    let dir = db.scratch();
    let missing = dir.path().join("missing.json").display().to_string();
    let details = db.json_error(&["migrate", "--schema", &missing], "sync.cli.schema_file");
    assert_eq!(details["path"], missing);
    db.run(&["migrate", "--schema", &missing])
        .text_error("sync.cli.schema_file");

    let not_json = write_file(&dir, "bad.json", "{\"version\": 1, \"tables\": [");
    db.json_error(
        &["migrate", "--schema", &not_json],
        "schema.malformed_input",
    );
    let unknown_member = write_file(
        &dir,
        "member.json",
        r#"{"version": 1, "tables": [], "extra": 1}"#,
    );
    db.run(&["migrate", "--schema", &unknown_member])
        .text_error("schema.malformed_input");
    let bad_identifier = write_file(
        &dir,
        "ident.json",
        &todos_schema(1, false, "").replace("\"name\": \"todos\"", "\"name\": \"sync_todos\""),
    );
    let details = db.json_error(
        &["migrate", "--schema", &bad_identifier],
        "schema.invalid_identifier",
    );
    assert_eq!(details["failure"], "reserved-prefix");
    // Nothing was migrated (Postgres has not even bootstrapped: status then
    // answers not_a_sync_database, whose document has no schema_version).
    let status = db.run(&["status", "--json"]).json();
    assert_eq!(status["schema_version"], Value::Null, "{status:#}");
}

/// 1 200 rows re-encoded by the bump to v2 (three keyset pages of 500):
/// with `-v`, stderr not a terminal and `SYNCSTORE_PROGRESS_SECS=0` (a line
/// per update instead of every 5 seconds), every page logs a progress line
/// naming rows rewritten of the rows counted, percent and rate; a run that
/// rewrites nothing logs none.
fn a_bump_that_rewrites_rows_logs_its_progress_off_a_terminal(db: Db) {
    let app = seed_todos(&db, "acme", 1200, 400);
    drop(app);
    let dir = db.scratch();
    let v2 = write_file(&dir, "v2.json", &todos_schema(2, true, ""));
    let url = db.url();
    let run = syncstore_in(
        None,
        &["--db", &url, "-v", "migrate", "--schema", &v2],
        &[("SYNCSTORE_PROGRESS_SECS", "0")],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let lines: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.contains("migrate v2 rewrites: "))
        .collect();
    for expected in [
        "migrate v2 rewrites: 0/1200 rows (0%), ",
        "migrate v2 rewrites: 500/1200 rows (41%), ",
        "migrate v2 rewrites: 1000/1200 rows (83%), ",
        "migrate v2 rewrites: 1200/1200 rows (100%), ",
    ] {
        assert!(
            lines.iter().any(|l| l.contains(expected)),
            "no line with {expected:?} in:\n{}",
            run.stderr
        );
    }
    assert!(
        lines
            .iter()
            .all(|l| l.contains(" rows/s") && l.contains("table todos")),
        "{lines:#?}"
    );
    assert!(
        lines.last().is_some_and(|l| l.ends_with("(done)")),
        "{lines:#?}"
    );
    assert!(!run.stderr.contains('\u{1b}'), "{}", run.stderr);
    // The rows were re-encoded: every one reads back with the new column.
    let rows = common::all_rows(&db, "acme", "todos", 1000);
    assert_eq!(rows.len(), 1200);
    let again = syncstore_in(
        None,
        &["--db", &url, "-v", "migrate", "--schema", &v2],
        &[("SYNCSTORE_PROGRESS_SECS", "0")],
    );
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert!(
        !again.stderr.contains("rewrites: "),
        "verifying rewrites nothing: {}",
        again.stderr
    );
}

/// A fresh database stays untouched by a `migrate` or `backfill` whose
/// schema file is missing, empty, binary, a directory, oversized or an
/// endless device, or whose checkpoint names are invalid: every error is
/// one coded JSON document (exit 1), and afterwards there is no SQLite
/// file and no storage table (`status` answers not_a_sync_database).
fn hostile_arguments_are_coded_and_create_nothing(db: Db) {
    let dir = db.scratch();
    let v1 = write_file(&dir, "v1.json", &todos_schema(1, false, ""));
    let empty = write_file(&dir, "empty.json", "");
    let binary = dir.path().join("binary.json");
    std::fs::write(&binary, [0xff_u8, 0xfe, 0x00, 0x7b, 0x80, 0x81]).unwrap();
    let binary = binary.display().to_string();
    let huge = dir.path().join("huge.json");
    std::fs::File::create(&huge)
        .and_then(|f| f.set_len(17 * 1024 * 1024))
        .unwrap();
    let huge = huge.display().to_string();
    let directory = dir.path().display().to_string();
    let long = "n".repeat(129);
    let declare_long = format!("acme:{long}");
    let cases: Vec<(Vec<&str>, &str, Option<&str>)> = vec![
        (
            vec!["migrate", "--schema", &empty],
            "schema.malformed_input",
            None,
        ),
        (
            vec!["migrate", "--schema", &binary],
            "sync.cli.schema_file",
            Some("not_utf8"),
        ),
        (
            vec!["migrate", "--schema", &directory],
            "sync.cli.schema_file",
            None,
        ),
        (
            vec!["migrate", "--schema", &huge],
            "sync.cli.schema_file",
            Some("too_large"),
        ),
        (
            vec!["migrate", "--schema", "/dev/zero"],
            "sync.cli.schema_file",
            Some("too_large"),
        ),
        (
            vec!["migrate", "--schema", &v1, "--declare", &declare_long],
            "sync.storage.invalid_argument",
            None,
        ),
        (
            vec![
                "migrate",
                "--schema",
                &v1,
                "--new-partition",
                "--carry",
                &declare_long,
            ],
            "sync.storage.invalid_argument",
            None,
        ),
        (
            vec![
                "backfill",
                "--partition",
                "acme",
                "--name",
                "x_v1",
                "--schema",
                &empty,
                "--projector",
                "derived-column",
                "--table",
                "todos",
                "--column",
                "title",
                "--from",
                "title",
            ],
            "schema.malformed_input",
            None,
        ),
        (
            vec![
                "backfill",
                "--partition",
                "acme",
                "--name",
                &long,
                "--schema",
                &v1,
                "--projector",
                "derived-column",
                "--table",
                "todos",
                "--column",
                "title",
                "--from",
                "title",
            ],
            "sync.storage.invalid_argument",
            None,
        ),
    ];
    for (args, code, reason) in cases {
        let details = db.json_error(&args, code);
        if let Some(reason) = reason {
            assert_eq!(details["reason"], reason, "{args:?}: {details:#}");
        }
        if let Db::Sqlite { path, .. } = &db {
            assert!(!path.exists(), "{args:?} created the database file");
        }
        db.json_error(&["status"], "sync.storage.not_a_sync_database");
    }
}

/// A table missing from the schema file (here: a rename typo) is retired
/// by a bump with its rows. Without `--retire` the bump is refused, dry run
/// or not, naming the table and its rows, and nothing changes; the dry run
/// with `--retire` says what goes; an empty table goes without it.
fn a_table_left_out_keeps_its_rows_unless_retired_by_name(db: Db) {
    let _app = seed_todos(&db, "acme", 45, 9);
    let dir = db.scratch();
    let typo = todos_schema(2, true, "").replace(r#""name": "todos""#, r#""name": "todoz""#);
    let v2 = write_file(&dir, "v2.json", &typo);
    let before = db.json(&["status"]);
    for dry in [false, true] {
        let mut args = vec!["migrate", "--schema", &v2];
        if dry {
            args.push("--dry-run");
        }
        let details = db.json_error(&args, "sync.cli.retire_refused");
        assert_eq!(details["tables"], "todos:45", "dry run {dry}: {details:#}");
        assert!(
            details["hint"]
                .as_str()
                .is_some_and(|h| h.contains("--retire")),
            "{details:#}"
        );
    }
    db.run(&["migrate", "--schema", &v2])
        .text_error("sync.cli.retire_refused");
    // Naming another table does not let this one go.
    db.json_error(
        &["migrate", "--schema", &v2, "--retire", "todo"],
        "sync.cli.retire_refused",
    );
    assert_eq!(
        db.json(&["status"]),
        before,
        "a refused bump changes nothing"
    );
    assert_eq!(all_rows(&db, "acme", "todos", 1000).len(), 45);

    let dry = db.json(&["migrate", "--schema", &v2, "--retire", "todos", "--dry-run"]);
    assert_eq!(
        dry["plan"]["retiredRows"],
        json!([{"table": "todos", "rows": 45}])
    );
    assert_eq!(dry["plan"]["retired"][0]["table"], "todos");
    let text = db.run(&["migrate", "--schema", &v2, "--retire", "todos", "--dry-run"]);
    assert!(
        text.stdout
            .contains("-- retired table todos: 45 rows dropped with it"),
        "{}",
        text.stdout
    );
    let applied = db.json(&["migrate", "--schema", &v2, "--retire", "todos"]);
    assert_eq!(applied["applied"], true);
    assert_eq!(db.json(&["status"])["schema_version"], 2);
    // A re-run (nothing retired any more) accepts the same arguments.
    db.json(&["migrate", "--schema", &v2, "--retire", "todos"]);

    // The empty `todoz` goes at the next bump without being named.
    let v3 = write_file(&dir, "v3.json", &todos_schema(3, true, ""));
    let applied = db.json(&["migrate", "--schema", &v3]);
    assert_eq!(
        applied["plan"]["retiredRows"],
        json!([{"table": "todoz", "rows": 0}])
    );
}

/// Rows keep the row ids and scopes they were written with, so a bump that
/// changes the primary key or adds a scope pattern is refused while the
/// table holds rows (`schema-and-migrations.md` §7.4); with no rows there
/// is nothing to keep and the bump goes ahead.
fn a_changed_primary_key_or_scope_is_refused_while_rows_exist(db: Db) {
    let _app = seed_todos(&db, "acme", 12, 4);
    let dir = db.scratch();
    let before = db.json(&["status"]);
    let key =
        todos_schema(2, true, "").replace(r#""primaryKey": "id""#, r#""primaryKey": "title""#);
    let key = write_file(&dir, "key.json", &key);
    for dry in [false, true] {
        let mut args = vec!["migrate", "--schema", &key];
        if dry {
            args.push("--dry-run");
        }
        let details = db.json_error(&args, "sync.cli.row_identity_changed");
        assert_eq!(details["table"], "todos", "{details:#}");
        assert_eq!(details["reason"], "primary_key", "{details:#}");
        assert_eq!(details["partition"], "acme", "{details:#}");
        assert_eq!(details["row_id"], "t-0000", "{details:#}");
        assert_eq!(details["expected"], "Buy MILK Nr 0", "{details:#}");
    }
    let scope = todos_schema(2, true, "").replace(
        r#""scopes": ["list:{list_id}"]"#,
        r#""scopes": ["list:{list_id}", "done:{done}"]"#,
    );
    assert!(scope.contains("done:{done}"));
    let scope = write_file(&dir, "scope.json", &scope);
    let details = db.json_error(
        &["migrate", "--schema", &scope],
        "sync.cli.row_identity_changed",
    );
    assert_eq!(details["reason"], "scopes", "{details:#}");
    assert_eq!(details["expected"], r#"{"done":"true","list_id":"list-0"}"#);
    assert_eq!(details["stored"], r#"{"list_id":"list-0"}"#);
    assert_eq!(
        db.json(&["status"]),
        before,
        "a refused bump changes nothing"
    );

    // An unchanged identity passes.
    let v2 = write_file(&dir, "v2.json", &todos_schema(2, true, ""));
    assert_eq!(db.json(&["migrate", "--schema", &v2])["applied"], true);

    // Without rows there is nothing to keep: the same changes go ahead.
    let empty = match db {
        Db::Sqlite { .. } => Db::sqlite(),
        Db::Postgres { .. } => Db::postgres(),
        Db::Mariadb { .. } => Db::mariadb(),
    };
    let _app = common::App::start(&empty, &todos_schema(1, false, ""), "acme");
    assert_eq!(empty.json(&["migrate", "--schema", &key])["applied"], true);
}
