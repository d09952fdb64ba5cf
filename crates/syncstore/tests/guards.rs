//! No operator mistake silently breaks the barrier: prune cannot pass the
//! head, declarations must name known partitions, runner arguments are
//! range-checked, checkpoint names are blamed by name, a bump past an
//! unfinished checkpoint is refused unless the operator says how to resolve
//! it, schema files with repeated members are refused, and `--limit -1` is a
//! coded error rather than a usage puzzle.

mod common;

use common::{seed_todos, todos_schema, write_file, Db};
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

on_both!(
    prune_cannot_pass_the_head,
    a_declaration_names_a_known_partition,
    runner_arguments_and_names_are_checked,
    a_bump_past_an_unfinished_checkpoint_is_refused,
    the_library_refuses_a_bump_past_an_unfinished_checkpoint,
    carrying_an_unfinished_checkpoint_lets_the_new_code_finish_it,
    abandoning_an_unfinished_checkpoint_opens_the_gate,
    a_resolution_the_database_does_not_hold_is_refused,
    schema_files_with_repeated_members_are_refused,
    the_dry_run_says_what_would_happen_to_each_declaration,
);

fn prune_cannot_pass_the_head(db: Db) {
    let _app = seed_todos(&db, "acme", 5, 1);
    let details = db.json_error(
        &["prune", "--partition", "acme", "--through", "6"],
        "sync.storage.invalid_prune_cursor",
    );
    assert_eq!(details["reason"], "beyond_head", "{details}");
    db.run(&["prune", "--partition", "acme", "--through", "10000000"])
        .text_error("sync.storage.invalid_prune_cursor");
    let status = db.json(&["status"]);
    assert_eq!(status["partitions"][0]["horizon_seq"], 0);
    let commits = db.json(&["commits", "--partition", "acme"]);
    assert_eq!(commits["commits"].as_array().map(Vec::len), Some(5));
    let pruned = db.json(&["prune", "--partition", "acme", "--through", "5"]);
    assert_eq!(pruned, json!({"horizon_seq": 5, "deleted_commits": 5}));
}

fn a_declaration_names_a_known_partition(db: Db) {
    let _app = seed_todos(&db, "acme", 3, 3);
    let dir = db.scratch();
    let v2 = write_file(&dir, "v2.json", &todos_schema(2, true, ""));
    let details = db.json_error(
        &["migrate", "--schema", &v2, "--declare", "acmee:search_v2"],
        "sync.cli.unknown_partition",
    );
    assert_eq!(details["partition"], "acmee");
    let status = db.json(&["status"]);
    assert_eq!(status["schema_version"], 1, "nothing migrated: {status:#}");
    assert_eq!(db.json(&["checkpoints"])["checkpoints"], json!([]));

    let applied = db.json(&[
        "migrate",
        "--schema",
        &v2,
        "--declare",
        "newco:search_v2",
        "--new-partition",
    ]);
    assert_eq!(applied["applied"], true);
    let listed = db.json(&["checkpoints"]);
    assert_eq!(listed["checkpoints"][0]["partition"], "newco");
}

fn runner_arguments_and_names_are_checked(db: Db) {
    let _app = seed_todos(&db, "acme", 3, 3);
    let dir = db.scratch();
    let v2 = write_file(&dir, "v2.json", &todos_schema(2, true, ""));
    let long = format!("acme:{}", "n".repeat(300));
    let details = db.json_error(
        &["migrate", "--schema", &v2, "--declare", &long],
        "sync.storage.invalid_argument",
    );
    assert_eq!(details, json!({"argument": "name", "reason": "too_long"}));
    db.json(&["migrate", "--schema", &v2, "--declare", "acme:search_v2"]);
    let run = db.run(&[
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
        "--max-attempts",
        "0",
    ]);
    assert_eq!(
        run.code, 2,
        "--max-attempts 0 is a usage error: {}",
        run.stderr
    );
    let checkpoint = &db.json(&["checkpoints"])["checkpoints"][0];
    assert_eq!(checkpoint["state"], "declared", "nothing claimed it");
    assert_eq!(checkpoint["owner_epoch"], 0);

    let details = db.json_error(
        &[
            "rows",
            "--partition",
            "acme",
            "--table",
            "todos",
            "--limit",
            "-1",
        ],
        "sync.storage.invalid_limit",
    );
    assert!(details.is_object());
    db.json_error(
        &["commits", "--partition", "acme", "--limit", "-1"],
        "sync.storage.invalid_limit",
    );
}

fn backfill_args<'a>(v: &'a str, name: &'a str) -> Vec<&'a str> {
    vec![
        "backfill",
        "--partition",
        "acme",
        "--name",
        name,
        "--schema",
        v,
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
    ]
}

/// v1 with `acme` seeded, bumped to v2 declaring `acme:search_v2` (pending);
/// returns the scratch directory and the v2 and v3 schema files.
fn pending_at_v2(db: &Db) -> (tempfile::TempDir, String, String) {
    let app = seed_todos(db, "acme", 12, 4);
    drop(app);
    let dir = db.scratch();
    let v2 = write_file(&dir, "v2.json", &todos_schema(2, true, ""));
    let v3 = write_file(&dir, "v3.json", &todos_schema(3, true, ""));
    db.json(&["migrate", "--schema", &v2, "--declare", "acme:search_v2"]);
    (dir, v2, v3)
}

fn a_bump_past_an_unfinished_checkpoint_is_refused(db: Db) {
    let (_dir, _v2, v3) = pending_at_v2(&db);
    let before = db.json(&["status"]);
    for dry in [true, false] {
        let mut args = vec!["migrate", "--schema", &v3];
        if dry {
            args.push("--dry-run");
        }
        let details = db.json_error(&args, "sync.storage.checkpoint_unfinished");
        assert_eq!(
            details,
            json!({"checkpoints": "acme:search_v2@2", "count": "1"}),
            "dry run {dry}"
        );
    }
    db.run(&["migrate", "--schema", &v3])
        .text_error("sync.storage.checkpoint_unfinished");
    assert_eq!(
        db.json(&["status"]),
        before,
        "a refused bump changes nothing"
    );
}

fn carrying_an_unfinished_checkpoint_lets_the_new_code_finish_it(db: Db) {
    let (_dir, _v2, v3) = pending_at_v2(&db);
    let dry = db.json(&[
        "migrate",
        "--schema",
        &v3,
        "--carry",
        "acme:search_v2",
        "--dry-run",
    ]);
    assert_eq!(
        dry["plan"]["unfinished"],
        json!([{"partition": "acme", "name": "search_v2", "schemaVersion": 2,
                "state": "declared", "resolution": "carry"}])
    );
    let applied = db.json(&["migrate", "--schema", &v3, "--carry", "acme:search_v2"]);
    assert_eq!(applied["applied"], true);
    let checkpoint = &db.json(&["checkpoints"])["checkpoints"][0];
    assert_eq!(checkpoint["schema_version"], 3, "{checkpoint:#}");
    assert_eq!(checkpoint["state"], "declared");
    assert_eq!(checkpoint["owner_epoch"], 1, "older runners are superseded");
    let status = db.json(&["status"]);
    assert_eq!(
        status["partitions"][0]["gate"],
        json!({"serve": false, "reason": "checkpoint_pending"})
    );
    assert_eq!(status["partitions"][0]["writer_fence"], 3);

    let outcome = db.json(&backfill_args(&v3, "search_v2"));
    assert_eq!(outcome["outcome"], "activated", "{outcome:#}");
    let status = db.json(&["status"]);
    assert_eq!(status["partitions"][0]["gate"]["serve"], true);
    let rows = db.json(&["rows", "--partition", "acme", "--table", "todos"]);
    assert_eq!(rows["rows"][0]["values"]["search_text"], "buy milk nr 0");
}

fn abandoning_an_unfinished_checkpoint_opens_the_gate(db: Db) {
    let (_dir, _v2, v3) = pending_at_v2(&db);
    let text = db.run(&["migrate", "--schema", &v3, "--abandon", "acme:search_v2"]);
    assert_eq!(text.code, 0, "{}", text.stderr);
    assert!(
        text.stdout
            .contains("unfinished checkpoint acme:search_v2 (version 2, declared): abandoned"),
        "{}",
        text.stdout
    );
    assert_eq!(db.json(&["checkpoints"])["checkpoints"], json!([]));
    let status = db.json(&["status"]);
    assert_eq!(status["schema_version"], 3);
    assert_eq!(status["partitions"][0]["gate"]["serve"], true);
    assert_eq!(
        status["partitions"][0]["writer_fence"], 3,
        "fences never go down"
    );
    // The next bump has nothing left to resolve.
    let dir = db.scratch();
    let v4 = write_file(&dir, "v4.json", &todos_schema(4, true, ""));
    assert_eq!(db.json(&["migrate", "--schema", &v4])["applied"], true);
}

/// After a bump that carried the checkpoint, a later `migrate --abandon` of
/// it (the same version: nothing is resolved any more) must not exit 0 as
/// if it had abandoned it; nor a `--carry` of one that is gone.
fn a_resolution_the_database_does_not_hold_is_refused(db: Db) {
    let (_dir, _v2, v3) = pending_at_v2(&db);
    db.json(&["migrate", "--schema", &v3, "--carry", "acme:search_v2"]);
    let details = db.json_error(
        &["migrate", "--schema", &v3, "--abandon", "acme:search_v2"],
        "sync.cli.resolution_not_applied",
    );
    assert_eq!(
        details,
        json!({"partition": "acme", "name": "search_v2", "requested": "abandon",
               "applied": "unknown", "stored": "declared at version 3"})
    );
    assert_eq!(
        db.json(&["checkpoints"])["checkpoints"][0]["schema_version"],
        3
    );
    // Once abandoned for real, a carry of it cannot be reported as done.
    let dir = db.scratch();
    let v4 = write_file(&dir, "v4.json", &todos_schema(4, true, ""));
    db.json(&["migrate", "--schema", &v4, "--abandon", "acme:search_v2"]);
    db.run(&["migrate", "--schema", &v4, "--carry", "acme:search_v2"])
        .text_error("sync.cli.resolution_not_applied");
    // A dry run changes nothing and claims nothing.
    db.json(&[
        "migrate",
        "--schema",
        &v4,
        "--carry",
        "acme:search_v2",
        "--dry-run",
    ]);
}

fn schema_files_with_repeated_members_are_refused(db: Db) {
    let dir = db.scratch();
    let repeated = write_file(
        &dir,
        "repeated.json",
        r#"{"version": 1, "tables": [], "version": 2}"#,
    );
    let details = db.json_error(
        &["migrate", "--schema", &repeated],
        "schema.malformed_input",
    );
    assert_eq!(details["pointer"], "/version");
    let root = write_file(&dir, "root.json", "[]");
    let run = db.run(&["migrate", "--schema", &root]);
    run.text_error("schema.malformed_input");
    assert!(run.stderr.contains("malformed at /: "), "{}", run.stderr);
    let bom = write_file(
        &dir,
        "bom.json",
        &format!("\u{feff}{}", todos_schema(1, false, "")),
    );
    assert_eq!(db.json(&["migrate", "--schema", &bom])["to_version"], 1);
}

fn the_dry_run_says_what_would_happen_to_each_declaration(db: Db) {
    let (_dir, v2, _v3) = pending_at_v2(&db);
    db.json(&backfill_args(&v2, "search_v2"));
    let run = db.run(&[
        "migrate",
        "--schema",
        &v2,
        "--declare",
        "acme:search_v2",
        "--declare",
        "acme:other_v2",
        "--dry-run",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout
            .contains("checkpoint acme:search_v2 at version 2: already declared (activated)"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("checkpoint acme:other_v2 at version 2: would be declared"),
        "{}",
        run.stdout
    );
    let listed = db.json(&["checkpoints"]);
    assert_eq!(listed["checkpoints"].as_array().map(Vec::len), Some(1));
    let applied = db.json(&["migrate", "--schema", &v2, "--declare", "acme:other_v2"]);
    assert_eq!(applied["applied"], false);
    assert_eq!(
        applied["declared_online"],
        json!([{"partition": "acme", "name": "other_v2", "schemaVersion": 2}])
    );
}

/// The library, not only the command's preview: `ensure_schema` with
/// `refuse_unfinished` refuses the bump past a pending checkpoint in the
/// dialect's migration transaction (the preview reads the same state, so
/// only a concurrent change could reach this path from the command line),
/// changes nothing, and bumps once the checkpoint is resolved.
fn the_library_refuses_a_bump_past_an_unfinished_checkpoint(db: Db) {
    let (_dir, _v2, _v3) = pending_at_v2(&db);
    let storage = db.storage();
    let v3 = common::compile(&todos_schema(3, true, ""));
    let refusing = sync_core::EnsureOptions {
        refuse_unfinished: true,
        ..sync_core::EnsureOptions::default()
    };
    let error = storage
        .ensure_schema_outcome(&v3, &refusing)
        .expect_err("the bump is refused");
    assert_eq!(error.code(), sync_core::ErrorCode::CheckpointUnfinished);
    assert_eq!(error.get_detail("checkpoints"), Some("acme:search_v2@2"));
    let marker = storage.read_schema_marker().expect("marker");
    assert_eq!(marker.map(|m| m.schema_version), Some(2));
    let carrying = sync_core::EnsureOptions {
        unfinished: vec![sync_core::UnfinishedResolution::new(
            "acme",
            "search_v2",
            sync_core::Resolution::Carry,
        )],
        ..refusing
    };
    let outcome = storage.ensure_schema_outcome(&v3, &carrying);
    assert!(outcome.is_ok(), "{outcome:?}");
    let checkpoint = storage
        .read_checkpoint("acme", "search_v2")
        .expect("read")
        .expect("carried, not deleted");
    assert_eq!(checkpoint.schema_version, 3);
}
