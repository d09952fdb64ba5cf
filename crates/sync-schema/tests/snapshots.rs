//! Snapshot (golden) tests of the emitted SQL: DDL and migration plans for
//! both dialects, printed through `Display`.

mod support;

use support::scenarios::*;

/// Fresh database: DDL of a schema with every column type, both scope forms,
/// a unique index, a quoted table name and a non-materialized table.
#[test]
fn fresh_every_type_sqlite() {
    assert_eq!(
        fresh_every_type(sync_sqlite::DIALECT).to_string(),
        r##"-- migration plan (sqlite) to schema version 7
-- creates
CREATE TABLE IF NOT EXISTS "Every ""Type""" ("_sync_partition" TEXT NOT NULL, "_sync_row_id" TEXT NOT NULL, "id" INTEGER NOT NULL, "org" TEXT NOT NULL, "flag" INTEGER NOT NULL, "label" TEXT, "amount" REAL NOT NULL, "doc" TEXT, "raw" BLOB NOT NULL, "file" TEXT, "state" BLOB, "sealed" BLOB, "_sync_server_version" INTEGER NOT NULL, "_sync_scopes" TEXT NOT NULL, "_sync_payload" BLOB NOT NULL, "_sync_column_versions" BLOB, PRIMARY KEY ("_sync_partition", "_sync_row_id"));
CREATE UNIQUE INDEX IF NOT EXISTS "sync_ix_every_by_org_label" ON "Every ""Type""" ("_sync_partition", "org", "label");
CREATE INDEX IF NOT EXISTS "sync_ix_every_by_amount" ON "Every ""Type""" ("_sync_partition", "amount", "_sync_row_id");
CREATE TABLE IF NOT EXISTS "vault" ("_sync_partition" TEXT NOT NULL, "_sync_row_id" TEXT NOT NULL, "_sync_server_version" INTEGER NOT NULL, "_sync_scopes" TEXT NOT NULL, "_sync_payload" BLOB NOT NULL, "_sync_column_versions" BLOB, PRIMARY KEY ("_sync_partition", "_sync_row_id"));
"##
    );
}

/// Fresh database: DDL of a schema with every column type, both scope forms,
/// a unique index, a quoted table name and a non-materialized table.
#[test]
fn fresh_every_type_postgres() {
    assert_eq!(
        fresh_every_type(sync_postgres::DIALECT).to_string(),
        r##"-- migration plan (postgres) to schema version 7
-- creates
CREATE TABLE IF NOT EXISTS "Every ""Type""" ("_sync_partition" TEXT COLLATE "C" NOT NULL, "_sync_row_id" TEXT COLLATE "C" NOT NULL, "id" BIGINT NOT NULL, "org" TEXT NOT NULL, "flag" BOOLEAN NOT NULL, "label" TEXT, "amount" DOUBLE PRECISION NOT NULL, "doc" JSONB, "raw" BYTEA NOT NULL, "file" TEXT, "state" BYTEA, "sealed" BYTEA, "_sync_server_version" BIGINT NOT NULL, "_sync_scopes" JSONB NOT NULL, "_sync_payload" BYTEA NOT NULL, "_sync_column_versions" BYTEA, PRIMARY KEY ("_sync_partition", "_sync_row_id"));
CREATE UNIQUE INDEX IF NOT EXISTS "sync_ix_every_by_org_label" ON "Every ""Type""" ("_sync_partition", "org", "label");
CREATE INDEX IF NOT EXISTS "sync_ix_every_by_amount" ON "Every ""Type""" ("_sync_partition", "amount", "_sync_row_id");
CREATE TABLE IF NOT EXISTS "vault" ("_sync_partition" TEXT COLLATE "C" NOT NULL, "_sync_row_id" TEXT COLLATE "C" NOT NULL, "_sync_server_version" BIGINT NOT NULL, "_sync_scopes" JSONB NOT NULL, "_sync_payload" BYTEA NOT NULL, "_sync_column_versions" BYTEA, PRIMARY KEY ("_sync_partition", "_sync_row_id"));
"##
    );
}

/// FIX1 → FIX2: owned indexes rebuilt, `assignee` added, `tasks` re-encoded.
#[test]
fn bump_fix1_fix2_sqlite() {
    assert_eq!(
        bump_fix1_fix2(sync_sqlite::DIALECT).to_string(),
        r##"-- migration plan (sqlite) to schema version 2
-- drops
DROP INDEX IF EXISTS "sync_ix_tasks_by_title";
DROP INDEX IF EXISTS "sync_ix_tasks_by_project_title";
DROP INDEX IF EXISTS "sync_ix_docs_by_body";
DROP INDEX IF EXISTS "sync_ix_grants_by_device";
-- creates
ALTER TABLE "tasks" ADD COLUMN "assignee" TEXT;
CREATE INDEX IF NOT EXISTS "sync_ix_tasks_by_title" ON "tasks" ("_sync_partition", "title", "_sync_row_id");
CREATE INDEX IF NOT EXISTS "sync_ix_tasks_by_assignee" ON "tasks" ("_sync_partition", "assignee", "_sync_row_id");
CREATE INDEX IF NOT EXISTS "sync_ix_docs_by_body" ON "docs" ("_sync_partition", "body", "_sync_row_id");
CREATE INDEX IF NOT EXISTS "sync_ix_grants_by_device" ON "device_key_grants" ("_sync_partition", "device_key", "_sync_row_id");
-- row rewrites
-- "tasks": re-encode payloads
"##
    );
}

/// FIX1 → FIX2: owned indexes rebuilt, `assignee` added, `tasks` re-encoded.
#[test]
fn bump_fix1_fix2_postgres() {
    assert_eq!(
        bump_fix1_fix2(sync_postgres::DIALECT).to_string(),
        r##"-- migration plan (postgres) to schema version 2
-- drops
DROP INDEX IF EXISTS "sync_ix_tasks_by_title";
DROP INDEX IF EXISTS "sync_ix_tasks_by_project_title";
DROP INDEX IF EXISTS "sync_ix_docs_by_body";
DROP INDEX IF EXISTS "sync_ix_grants_by_device";
-- creates
ALTER TABLE "tasks" ADD COLUMN "assignee" TEXT;
CREATE INDEX IF NOT EXISTS "sync_ix_tasks_by_title" ON "tasks" ("_sync_partition", "title", "_sync_row_id");
CREATE INDEX IF NOT EXISTS "sync_ix_tasks_by_assignee" ON "tasks" ("_sync_partition", "assignee", "_sync_row_id");
CREATE INDEX IF NOT EXISTS "sync_ix_docs_by_body" ON "docs" ("_sync_partition", "body", "_sync_row_id");
CREATE INDEX IF NOT EXISTS "sync_ix_grants_by_device" ON "device_key_grants" ("_sync_partition", "device_key", "_sync_row_id");
-- row rewrites
-- "tasks": re-encode payloads
"##
    );
}

/// FIX1 → v2 without `docs`: retirement statements in order.
#[test]
fn retire_docs_sqlite() {
    assert_eq!(
        retire_docs(sync_sqlite::DIALECT).to_string(),
        r##"-- migration plan (sqlite) to schema version 2
-- retire "docs"
DELETE FROM sync_row_scopes WHERE tbl = ?; -- params: ["docs"]
DELETE FROM sync_blob_refs WHERE tbl = ?; -- params: ["docs"]
DELETE FROM sync_tombstones WHERE tbl = ?; -- params: ["docs"]
DROP TABLE IF EXISTS "docs";
-- drops
DROP INDEX IF EXISTS "sync_ix_tasks_by_title";
DROP INDEX IF EXISTS "sync_ix_tasks_by_project_title";
DROP INDEX IF EXISTS "sync_ix_grants_by_device";
-- creates
CREATE INDEX IF NOT EXISTS "sync_ix_tasks_by_title" ON "tasks" ("_sync_partition", "title", "_sync_row_id");
CREATE UNIQUE INDEX IF NOT EXISTS "sync_ix_tasks_by_project_title" ON "tasks" ("_sync_partition", "project_id", "title");
CREATE INDEX IF NOT EXISTS "sync_ix_grants_by_device" ON "device_key_grants" ("_sync_partition", "device_key", "_sync_row_id");
"##
    );
}

/// FIX1 → v2 without `docs`: retirement statements in order.
#[test]
fn retire_docs_postgres() {
    assert_eq!(
        retire_docs(sync_postgres::DIALECT).to_string(),
        r##"-- migration plan (postgres) to schema version 2
-- retire "docs"
DELETE FROM sync_row_scopes WHERE tbl = $1; -- params: ["docs"]
DELETE FROM sync_blob_refs WHERE tbl = $1; -- params: ["docs"]
DELETE FROM sync_tombstones WHERE tbl = $1; -- params: ["docs"]
DROP TABLE IF EXISTS "docs";
-- drops
DROP INDEX IF EXISTS "sync_ix_tasks_by_title";
DROP INDEX IF EXISTS "sync_ix_tasks_by_project_title";
DROP INDEX IF EXISTS "sync_ix_grants_by_device";
-- creates
CREATE INDEX IF NOT EXISTS "sync_ix_tasks_by_title" ON "tasks" ("_sync_partition", "title", "_sync_row_id");
CREATE UNIQUE INDEX IF NOT EXISTS "sync_ix_tasks_by_project_title" ON "tasks" ("_sync_partition", "project_id", "title");
CREATE INDEX IF NOT EXISTS "sync_ix_grants_by_device" ON "device_key_grants" ("_sync_partition", "device_key", "_sync_row_id");
"##
    );
}

/// FIX1 → FIX2 on a reference-shaped database: legacy indexes dropped as
/// owned, operator index kept, Postgres key collations converted first.
#[test]
fn legacy_bump_sqlite() {
    assert_eq!(
        legacy_bump(sync_sqlite::DIALECT).to_string(),
        r##"-- migration plan (sqlite) to schema version 2
-- drops
DROP INDEX IF EXISTS "tasks_by_title";
DROP INDEX IF EXISTS "sync_ix_tasks_by_project_title";
DROP INDEX IF EXISTS "sync_ix_docs_by_body";
DROP INDEX IF EXISTS "sync_ix_grants_by_device";
-- creates
ALTER TABLE "tasks" ADD COLUMN "assignee" TEXT;
CREATE INDEX IF NOT EXISTS "sync_ix_tasks_by_title" ON "tasks" ("_sync_partition", "title", "_sync_row_id");
CREATE INDEX IF NOT EXISTS "sync_ix_tasks_by_assignee" ON "tasks" ("_sync_partition", "assignee", "_sync_row_id");
CREATE INDEX IF NOT EXISTS "sync_ix_docs_by_body" ON "docs" ("_sync_partition", "body", "_sync_row_id");
CREATE INDEX IF NOT EXISTS "sync_ix_grants_by_device" ON "device_key_grants" ("_sync_partition", "device_key", "_sync_row_id");
-- row rewrites
-- "tasks": re-encode payloads
"##
    );
}

/// FIX1 → FIX2 on a reference-shaped database: legacy indexes dropped as
/// owned, operator index kept, Postgres key collations converted first.
#[test]
fn legacy_bump_postgres() {
    assert_eq!(
        legacy_bump(sync_postgres::DIALECT).to_string(),
        r##"-- migration plan (postgres) to schema version 2
-- key column collations
ALTER TABLE "tasks" ALTER COLUMN "_sync_partition" TYPE text COLLATE "C";
ALTER TABLE "tasks" ALTER COLUMN "_sync_row_id" TYPE text COLLATE "C";
ALTER TABLE "sync_commits" ALTER COLUMN "partition" TYPE text COLLATE "C";
-- drops
DROP INDEX IF EXISTS "tasks_by_title";
DROP INDEX IF EXISTS "sync_ix_tasks_by_project_title";
DROP INDEX IF EXISTS "sync_ix_docs_by_body";
DROP INDEX IF EXISTS "sync_ix_grants_by_device";
-- creates
ALTER TABLE "tasks" ADD COLUMN "assignee" TEXT;
CREATE INDEX IF NOT EXISTS "sync_ix_tasks_by_title" ON "tasks" ("_sync_partition", "title", "_sync_row_id");
CREATE INDEX IF NOT EXISTS "sync_ix_tasks_by_assignee" ON "tasks" ("_sync_partition", "assignee", "_sync_row_id");
CREATE INDEX IF NOT EXISTS "sync_ix_docs_by_body" ON "docs" ("_sync_partition", "body", "_sync_row_id");
CREATE INDEX IF NOT EXISTS "sync_ix_grants_by_device" ON "device_key_grants" ("_sync_partition", "device_key", "_sync_row_id");
-- row rewrites
-- "tasks": re-encode payloads
"##
    );
}

/// Materialize true → false: owned indexes and projection columns dropped.
#[test]
fn dematerialize_docs_sqlite() {
    assert_eq!(
        dematerialize_docs(sync_sqlite::DIALECT).to_string(),
        r##"-- migration plan (sqlite) to schema version 2
-- drops
DROP INDEX IF EXISTS "sync_ix_tasks_by_title";
DROP INDEX IF EXISTS "sync_ix_tasks_by_project_title";
DROP INDEX IF EXISTS "sync_ix_docs_by_body";
ALTER TABLE "docs" DROP COLUMN "id";
ALTER TABLE "docs" DROP COLUMN "org_id";
ALTER TABLE "docs" DROP COLUMN "project_id";
ALTER TABLE "docs" DROP COLUMN "body";
DROP INDEX IF EXISTS "sync_ix_grants_by_device";
-- creates
CREATE INDEX IF NOT EXISTS "sync_ix_tasks_by_title" ON "tasks" ("_sync_partition", "title", "_sync_row_id");
CREATE UNIQUE INDEX IF NOT EXISTS "sync_ix_tasks_by_project_title" ON "tasks" ("_sync_partition", "project_id", "title");
CREATE INDEX IF NOT EXISTS "sync_ix_grants_by_device" ON "device_key_grants" ("_sync_partition", "device_key", "_sync_row_id");
"##
    );
}

/// Materialize true → false: owned indexes and projection columns dropped.
#[test]
fn dematerialize_docs_postgres() {
    assert_eq!(
        dematerialize_docs(sync_postgres::DIALECT).to_string(),
        r##"-- migration plan (postgres) to schema version 2
-- drops
DROP INDEX IF EXISTS "sync_ix_tasks_by_title";
DROP INDEX IF EXISTS "sync_ix_tasks_by_project_title";
DROP INDEX IF EXISTS "sync_ix_docs_by_body";
ALTER TABLE "docs" DROP COLUMN "id";
ALTER TABLE "docs" DROP COLUMN "org_id";
ALTER TABLE "docs" DROP COLUMN "project_id";
ALTER TABLE "docs" DROP COLUMN "body";
DROP INDEX IF EXISTS "sync_ix_grants_by_device";
-- creates
CREATE INDEX IF NOT EXISTS "sync_ix_tasks_by_title" ON "tasks" ("_sync_partition", "title", "_sync_row_id");
CREATE UNIQUE INDEX IF NOT EXISTS "sync_ix_tasks_by_project_title" ON "tasks" ("_sync_partition", "project_id", "title");
CREATE INDEX IF NOT EXISTS "sync_ix_grants_by_device" ON "device_key_grants" ("_sync_partition", "device_key", "_sync_row_id");
"##
    );
}

/// Materialize false → true: projection columns added, backfill planned.
#[test]
fn materialize_secrets_sqlite() {
    assert_eq!(
        materialize_secrets(sync_sqlite::DIALECT).to_string(),
        r##"-- migration plan (sqlite) to schema version 2
-- drops
DROP INDEX IF EXISTS "sync_ix_tasks_by_title";
DROP INDEX IF EXISTS "sync_ix_tasks_by_project_title";
DROP INDEX IF EXISTS "sync_ix_docs_by_body";
DROP INDEX IF EXISTS "sync_ix_grants_by_device";
-- creates
CREATE INDEX IF NOT EXISTS "sync_ix_tasks_by_title" ON "tasks" ("_sync_partition", "title", "_sync_row_id");
CREATE UNIQUE INDEX IF NOT EXISTS "sync_ix_tasks_by_project_title" ON "tasks" ("_sync_partition", "project_id", "title");
CREATE INDEX IF NOT EXISTS "sync_ix_docs_by_body" ON "docs" ("_sync_partition", "body", "_sync_row_id");
ALTER TABLE "secrets" ADD COLUMN "id" TEXT;
ALTER TABLE "secrets" ADD COLUMN "project_id" TEXT;
ALTER TABLE "secrets" ADD COLUMN "body" BLOB;
ALTER TABLE "secrets" ADD COLUMN "attrs" BLOB;
CREATE INDEX IF NOT EXISTS "sync_ix_grants_by_device" ON "device_key_grants" ("_sync_partition", "device_key", "_sync_row_id");
-- row rewrites
-- "secrets": refresh projections
"##
    );
}

/// Materialize false → true: projection columns added, backfill planned.
#[test]
fn materialize_secrets_postgres() {
    assert_eq!(
        materialize_secrets(sync_postgres::DIALECT).to_string(),
        r##"-- migration plan (postgres) to schema version 2
-- drops
DROP INDEX IF EXISTS "sync_ix_tasks_by_title";
DROP INDEX IF EXISTS "sync_ix_tasks_by_project_title";
DROP INDEX IF EXISTS "sync_ix_docs_by_body";
DROP INDEX IF EXISTS "sync_ix_grants_by_device";
-- creates
CREATE INDEX IF NOT EXISTS "sync_ix_tasks_by_title" ON "tasks" ("_sync_partition", "title", "_sync_row_id");
CREATE UNIQUE INDEX IF NOT EXISTS "sync_ix_tasks_by_project_title" ON "tasks" ("_sync_partition", "project_id", "title");
CREATE INDEX IF NOT EXISTS "sync_ix_docs_by_body" ON "docs" ("_sync_partition", "body", "_sync_row_id");
ALTER TABLE "secrets" ADD COLUMN "id" TEXT;
ALTER TABLE "secrets" ADD COLUMN "project_id" TEXT;
ALTER TABLE "secrets" ADD COLUMN "body" BYTEA;
ALTER TABLE "secrets" ADD COLUMN "attrs" BYTEA;
CREATE INDEX IF NOT EXISTS "sync_ix_grants_by_device" ON "device_key_grants" ("_sync_partition", "device_key", "_sync_row_id");
-- row rewrites
-- "secrets": refresh projections
"##
    );
}

/// Same-version legacy upgrade: bare and partition-less declared indexes
/// rebuilt (Postgres: default-collation key columns converted first); the
/// operator index is left alone.
#[test]
fn legacy_same_version_sqlite() {
    assert_eq!(
        legacy_same_version(sync_sqlite::DIALECT).to_string(),
        r##"-- legacy shape upgrade (sqlite)
DROP INDEX IF EXISTS "tasks_by_title";
DROP INDEX IF EXISTS "sync_ix_tasks_by_project_title";
CREATE INDEX IF NOT EXISTS "sync_ix_tasks_by_title" ON "tasks" ("_sync_partition", "title", "_sync_row_id");
CREATE UNIQUE INDEX IF NOT EXISTS "sync_ix_tasks_by_project_title" ON "tasks" ("_sync_partition", "project_id", "title");
"##
    );
}

/// Same-version legacy upgrade: bare and partition-less declared indexes
/// rebuilt (Postgres: default-collation key columns converted first); the
/// operator index is left alone.
#[test]
fn legacy_same_version_postgres() {
    assert_eq!(
        legacy_same_version(sync_postgres::DIALECT).to_string(),
        r##"-- legacy shape upgrade (postgres)
ALTER TABLE "tasks" ALTER COLUMN "_sync_partition" TYPE text COLLATE "C";
ALTER TABLE "tasks" ALTER COLUMN "_sync_row_id" TYPE text COLLATE "C";
ALTER TABLE "sync_commits" ALTER COLUMN "partition" TYPE text COLLATE "C";
DROP INDEX IF EXISTS "tasks_by_title";
DROP INDEX IF EXISTS "sync_ix_tasks_by_project_title";
CREATE INDEX IF NOT EXISTS "sync_ix_tasks_by_title" ON "tasks" ("_sync_partition", "title", "_sync_row_id");
CREATE UNIQUE INDEX IF NOT EXISTS "sync_ix_tasks_by_project_title" ON "tasks" ("_sync_partition", "project_id", "title");
"##
    );
}

#[test]
fn bump_plan_serializes_to_json_for_dry_run() {
    let plan = bump_fix1_fix2(sync_postgres::DIALECT);
    let value = plan.to_json();
    assert_eq!(value["dialect"], "postgres");
    assert_eq!(value["schemaVersion"], 2);
    assert_eq!(value["keyCollations"], serde_json::json!([]));
    assert_eq!(value["retired"], serde_json::json!([]));
    assert_eq!(
        value["drops"][0],
        serde_json::json!({"sql": "DROP INDEX IF EXISTS \"sync_ix_tasks_by_title\"", "params": []})
    );
    assert_eq!(value["creates"].as_array().unwrap().len(), 5);
    assert_eq!(
        value["rewrites"][0],
        serde_json::json!({
            "table": "tasks",
            "migrate": true,
            "backfill": false,
            "oldLayout": serde_json::from_str::<serde_json::Value>(
                &sync_schema::layouts_json(&support::fix1())
            ).unwrap()["tasks"],
        })
    );
    assert_eq!(value["rewrites"][1]["migrate"], false);
    let retire = retire_docs(sync_postgres::DIALECT).to_json();
    assert_eq!(
        retire["retired"][0]["statements"][0],
        serde_json::json!({"sql": "DELETE FROM sync_row_scopes WHERE tbl = $1", "params": ["docs"]})
    );
}

#[test]
fn plans_list_statements_in_execution_order() {
    let plan = legacy_bump(sync_postgres::DIALECT);
    let lines = plan.to_sql_lines();
    assert_eq!(lines.len(), 3 + 4 + 5);
    assert!(lines[0].starts_with("ALTER TABLE \"tasks\" ALTER COLUMN"));
    assert_eq!(lines[3], "DROP INDEX IF EXISTS \"tasks_by_title\"");
    assert!(lines.iter().all(|l| !l.contains("ops_tasks_tuning")));
    let retire = retire_docs(sync_sqlite::DIALECT).to_sql_lines();
    assert_eq!(
        &retire[..4],
        [
            "DELETE FROM sync_row_scopes WHERE tbl = ?",
            "DELETE FROM sync_blob_refs WHERE tbl = ?",
            "DELETE FROM sync_tombstones WHERE tbl = ?",
            "DROP TABLE IF EXISTS \"docs\"",
        ]
    );
    let legacy = legacy_same_version(sync_sqlite::DIALECT);
    assert!(!legacy.is_empty());
    assert_eq!(legacy.to_json()["collations"], serde_json::json!([]));
    assert_eq!(legacy.to_sql_lines().len(), 4);
}
