//! Sharing a database with the reference at the RFC 0007 release
//! (`tables.md` §4.2a, §4.2b) — what only Postgres can show beyond the
//! `mixed-fleet` conformance group: the replayed statements are the
//! fixture's, the restart case checked with `psql` as an operator would,
//! the reference's trigger left alone, databases of earlier releases of
//! this storage upgraded in place, and a hostile role on a storage whose
//! sessions keep the default `"$user", <schema>` search path.

mod common;

use std::process::Command;

use common::*;
use sync_conformance::reference::{self, assert_passes};
use sync_core::{CheckpointDeclaration, EnsureOptions, FenceTriggerState, ServerStorage};
use sync_postgres::harness::mixed_fleet::{insert_as_shadowing_role, REFERENCE_0_23_START_SQL};
use sync_postgres::{PostgresConfig, PostgresStorage};

const SET_A_FIXTURES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../shared/fixtures/reference-0.15"
);

const START_FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../shared/fixtures/reference-0.23/start.postgres.sql"
);

/// The statements of a SQL script without its comment lines, whitespace-normalized.
fn statements(sql: &str) -> String {
    sql.lines()
        .filter(|line| !line.trim_start().starts_with("--"))
        .flat_map(str::split_whitespace)
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn the_replayed_reference_start_is_the_fixtures() {
    // SYNCSTORE_FIXTURES names the reference-0.15 directory or its parent.
    let fixture = std::env::var_os("SYNCSTORE_FIXTURES")
        .and_then(|dir| {
            let dir = std::path::PathBuf::from(dir);
            [dir.join(".."), dir]
                .into_iter()
                .map(|d| d.join("reference-0.23/start.postgres.sql"))
                .find(|path| path.is_file())
        })
        .unwrap_or_else(|| START_FIXTURE.into());
    let text = std::fs::read_to_string(&fixture).unwrap_or_else(|e| {
        panic!(
            "the reference 0.23 start fixture {} is unreadable ({e})",
            fixture.display()
        )
    });
    assert_eq!(statements(REFERENCE_0_23_START_SQL), statements(&text));
}

fn triggers(db: &TestDb) -> Vec<(String, String, String)> {
    db.raw()
        .query(
            "SELECT g.tgname::text, p.proname::text, g.tgenabled::text FROM pg_trigger g \
             JOIN pg_proc p ON p.oid = g.tgfoid \
             WHERE g.tgrelid = 'sync_commits'::regclass AND NOT g.tgisinternal ORDER BY 1",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect()
}

fn trigger(name: &str, function: &str) -> (String, String, String) {
    (name.to_owned(), function.to_owned(), "O".to_owned())
}

/// `psql -c <insert>` as the operator would type it; returns stderr on failure.
fn psql_insert(db: &TestDb, partition: &str, seq: i64, version: &str) -> Result<(), String> {
    let sql = format!(
        "SET search_path TO \"{}\"; INSERT INTO sync_commits (partition, commit_seq, client_id, \
         client_commit_id, actor_id, created_at_ms, writer_version) \
         VALUES ('{partition}', {seq}, 'psql', 'psql-{seq}', 'psql', 0, {version})",
        db.schema
    );
    let out = Command::new("psql")
        .args([
            "-X",
            "-q",
            "-v",
            "ON_ERROR_STOP=1",
            "-d",
            &pg_url(),
            "-c",
            &sql,
        ])
        .output()
        .expect("psql runs");
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

fn assert_psql_refused(db: &TestDb, partition: &str, seq: i64, version: &str) {
    let error = psql_insert(db, partition, seq, version)
        .expect_err("an old writer's insert must be refused");
    assert!(
        error.contains("sync.storage.writer_fence_rejected"),
        "{partition} / {version}: {error}"
    );
}

/// The restart case: a reference 0.23 start before our open and again
/// after our bump; inserts as `psql` by an old writer into a partition
/// created after the bump are refused, both triggers stand.
#[test]
fn reference_restarts_before_and_after_our_bump_leave_the_fence_enforced() {
    let manifest = assert_passes(reference::manifests(SET_A_FIXTURES))
        .into_iter()
        .find(|m| m.set() == "A")
        .expect("set A");
    let db = TestDb::new();
    let dump = assert_passes(manifest.file("postgres"));
    sync_postgres::reference_dump::load_into_schema(&pg_url(), &db.schema, &dump)
        .expect("restore set A");
    db.raw().batch_execute(REFERENCE_0_23_START_SQL).unwrap();
    let storage = db.open();
    storage
        .ensure_schema(manifest.schema(), &EnsureOptions::default())
        .unwrap();
    let bumped = db.open();
    bumped
        .ensure_schema(
            assert_passes(manifest.schema_v2()),
            &EnsureOptions::with_declarations(vec![CheckpointDeclaration::new("acme", "c", 2)]),
        )
        .unwrap();
    db.raw().batch_execute(REFERENCE_0_23_START_SQL).unwrap();

    assert_eq!(
        triggers(&db),
        [
            trigger(
                "sync_commits_effective_writer_fence",
                "sync_writer_fence_check"
            ),
            trigger("sync_commits_writer_fence", "syncular_writer_fence"),
        ]
    );
    for version in ["NULL", "1"] {
        assert_psql_refused(&db, "created-after-bump", 1, version);
        assert_psql_refused(&db, "acme", 1_000, version);
    }
    psql_insert(&db, "created-after-bump", 1, "2").expect("a v2 writer inserts");
    assert_eq!(
        bumped.writer_fence_trigger().unwrap(),
        FenceTriggerState::Enforced
    );
    let column_type: String = db
        .raw()
        .query_one(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute \
             WHERE attrelid = 'sync_commits'::regclass AND attname = 'writer_version'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(column_type, "bigint", "the reference's column type is kept");
}

/// The fence as every earlier release of this storage installed it: the
/// trigger under the reference's name, the function with
/// `SET search_path FROM CURRENT` and unqualified table names.
const LEGACY_FUNCTION_SQL: &str =
    "CREATE OR REPLACE FUNCTION sync_writer_fence_check() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
  fence integer;
BEGIN
  SELECT max(v) INTO fence FROM (
    SELECT required_writer_version AS v FROM sync_writer_fence WHERE partition = NEW.partition
    UNION ALL
    SELECT required_writer_version FROM sync_schema_meta WHERE id = 1) AS f;
  IF fence IS NOT NULL AND (NEW.writer_version IS NULL OR NEW.writer_version < fence) THEN
    RAISE EXCEPTION 'sync.storage.writer_fence_rejected';
  END IF;
  RETURN NEW;
END
$$";

fn install_legacy_fence(db: &TestDb) {
    let mut raw = db.raw();
    raw.batch_execute("DROP TRIGGER sync_commits_effective_writer_fence ON sync_commits")
        .unwrap();
    raw.batch_execute(LEGACY_FUNCTION_SQL).unwrap();
    raw.batch_execute(
        "CREATE TRIGGER sync_commits_writer_fence BEFORE INSERT ON sync_commits \
         FOR EACH ROW EXECUTE FUNCTION sync_writer_fence_check()",
    )
    .unwrap();
}

fn function_settings(db: &TestDb) -> (Vec<String>, bool) {
    let row = db
        .raw()
        .query_one(
            "SELECT proconfig, prosrc LIKE '%\"' || current_schema() || '\".sync_writer_fence %' \
             FROM pg_proc WHERE proname = 'sync_writer_fence_check' \
               AND pronamespace = current_schema()::regnamespace",
            &[],
        )
        .unwrap();
    (row.get(0), row.get(1))
}

#[test]
fn a_database_of_an_earlier_release_is_upgraded_in_place_on_open() {
    let db = TestDb::new();
    ensured(&db);
    install_legacy_fence(&db);
    assert_eq!(
        db.open().writer_fence_trigger().unwrap(),
        FenceTriggerState::Missing,
        "read before any bootstrap: our trigger is not under its name yet"
    );

    let upgraded = ensured(&db);
    assert_eq!(
        triggers(&db),
        [trigger(
            "sync_commits_effective_writer_fence",
            "sync_writer_fence_check"
        )],
        "ours under the new name; the old-name trigger that ran our function is gone"
    );
    assert_eq!(
        function_settings(&db),
        (vec!["search_path=pg_catalog, pg_temp".to_owned()], true),
        "the function is replaced in place: fixed search path, qualified names"
    );
    assert_eq!(
        upgraded.writer_fence_trigger().unwrap(),
        FenceTriggerState::Enforced
    );
}

#[test]
fn an_outdated_function_is_reported_and_replaced() {
    let db = TestDb::new();
    ensured(&db);
    db.raw().batch_execute(LEGACY_FUNCTION_SQL).unwrap();
    let reader = db.open();
    assert_eq!(
        reader.writer_fence_trigger().unwrap(),
        FenceTriggerState::Outdated
    );
    ensured(&db);
    assert_eq!(
        reader.writer_fence_trigger().unwrap(),
        FenceTriggerState::Enforced
    );
}

fn reference_trigger_oid(db: &TestDb) -> u32 {
    db.raw()
        .query_one(
            "SELECT oid FROM pg_trigger WHERE tgname = 'sync_commits_writer_fence' \
             AND tgrelid = 'sync_commits'::regclass",
            &[],
        )
        .unwrap()
        .get(0)
}

#[test]
fn the_references_trigger_under_the_old_name_is_never_touched() {
    let db = TestDb::new();
    ensured(&db);
    install_legacy_fence(&db);
    // A reference process starts: the old name now runs its function.
    db.raw().batch_execute(REFERENCE_0_23_START_SQL).unwrap();
    let oid_before = reference_trigger_oid(&db);
    ensured(&db);
    assert_eq!(
        triggers(&db),
        [
            trigger(
                "sync_commits_effective_writer_fence",
                "sync_writer_fence_check"
            ),
            trigger("sync_commits_writer_fence", "syncular_writer_fence"),
        ]
    );
    let oid_after = reference_trigger_oid(&db);
    assert_eq!(
        oid_before, oid_after,
        "the reference's trigger was not re-created"
    );
}

/// The shadowing role of the issue: the storage's sessions use the default
/// search-path shape `"$user", <schema>` (as a storage in `public` does), so
/// a function that took its path from the bootstrap session would resolve
/// the fence tables in the inserting role's own schema.
#[test]
fn a_role_with_a_shadowing_schema_cannot_insert_an_old_writers_commit() {
    let db = TestDb::new();
    let url = format!(
        "{}{}options=-csearch_path%3D%22%24user%22%2C{}",
        pg_url(),
        if pg_url().contains('?') { '&' } else { '?' },
        db.schema
    );
    let connect = || {
        PostgresStorage::connect(
            &url,
            PostgresConfig {
                schema: None,
                ..db.config()
            },
        )
        .expect("connect with the default search-path shape")
    };
    connect()
        .ensure_schema(&fix1(), &EnsureOptions::default())
        .unwrap();
    connect()
        .ensure_schema(
            &fix2(),
            &EnsureOptions::with_declarations(vec![CheckpointDeclaration::new("acme", "c", 2)]),
        )
        .unwrap();
    for (partition, seq) in [("acme", 1), ("created-after-bump", 1)] {
        for version in [None, Some(1)] {
            let error = insert_as_shadowing_role(&pg_url(), &db.schema, partition, seq, version)
                .expect_err("the shadowing role's old-writer insert must be refused");
            assert_eq!(
                error.code(),
                sync_core::ErrorCode::WriterFenceRejected,
                "{partition} / {version:?}: {error:?}"
            );
        }
    }
    insert_as_shadowing_role(&pg_url(), &db.schema, "created-after-bump", 2, Some(2))
        .expect("the role may insert as a v2 writer");
}
