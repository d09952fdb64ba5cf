//! Raw access for the `mixed-fleet` group (`conformance-checklist.md` §23):
//! a reference process starting against the shared database, the fence
//! trigger broken behind the storage's back, and a hostile role that shadows
//! the fence tables.

use sync_conformance::FenceTamper;
use sync_core::{Error, Result};

use super::{fresh_schema_name, schema_client};
use crate::fence_trigger::{FENCE_FUNCTION_NAME, FENCE_TRIGGER_NAME};
use crate::pool::Conn;
use crate::sql::quote_ident;

/// The statements the reference server's Postgres storage at the RFC 0007
/// release (0.23) adds to its start-up migration and runs on every start,
/// in its order (the fixture `reference-0.23/start.postgres.sql`, whose
/// statements a test of this crate compares with this text). Unqualified:
/// they run in the schema of the session's `search_path`, as the reference
/// does. Sent as one simple-query message.
pub const REFERENCE_0_23_START_SQL: &str = "\
CREATE INDEX IF NOT EXISTS sync_row_scopes_by_row
  ON sync_row_scopes(partition, tbl, row_id);
CREATE TABLE IF NOT EXISTS sync_backfill_checkpoints(
  partition TEXT NOT NULL, name TEXT NOT NULL,
  schema_version INTEGER NOT NULL,
  state TEXT NOT NULL CHECK(state IN ('declared','backfilling','activated')),
  watermark BIGINT NOT NULL DEFAULT 0,
  owner_epoch BIGINT NOT NULL DEFAULT 0,
  observed_rows BIGINT NOT NULL DEFAULT 0,
  updated_at_ms BIGINT NOT NULL,
  PRIMARY KEY(partition, name)
);
CREATE TABLE IF NOT EXISTS sync_writer_fence(
  partition TEXT PRIMARY KEY,
  required_writer_version INTEGER NOT NULL
);
ALTER TABLE sync_commits ADD COLUMN IF NOT EXISTS writer_version BIGINT;
CREATE OR REPLACE FUNCTION syncular_writer_fence()
RETURNS trigger AS $$
BEGIN
  IF EXISTS (
    SELECT 1 FROM sync_writer_fence
     WHERE partition = NEW.partition
       AND (NEW.writer_version IS NULL
            OR NEW.writer_version < required_writer_version)
  ) THEN
    RAISE EXCEPTION 'sync.storage.writer_fence_rejected';
  END IF;
  RETURN NEW;
END;
$$ LANGUAGE plpgsql;
DROP TRIGGER IF EXISTS sync_commits_writer_fence ON sync_commits;
CREATE TRIGGER sync_commits_writer_fence
BEFORE INSERT ON sync_commits
FOR EACH ROW EXECUTE FUNCTION syncular_writer_fence();
";

/// The statements of a script, split at each `;` outside `$$` quotes
/// (enough for [`REFERENCE_0_23_START_SQL`]), without empty ones.
pub(crate) fn statements_of(sql: &str) -> Vec<&str> {
    let mut statements = Vec::new();
    let mut start = 0;
    let mut quoted = false;
    let bytes = sql.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if sql[i..].starts_with("$$") {
            quoted = !quoted;
            i += 2;
            continue;
        }
        if bytes[i] == b';' && !quoted {
            statements.push(sql[start..i].trim());
            start = i + 1;
        }
        i += 1;
    }
    statements.push(sql[start..].trim());
    statements.retain(|s| !s.is_empty());
    statements
}

/// The statements that break our trigger the way `tamper` says.
pub(crate) fn tamper_sql(tamper: FenceTamper) -> Vec<String> {
    let drop = format!("DROP TRIGGER {FENCE_TRIGGER_NAME} ON sync_commits");
    let redefined = |definition: &str| {
        vec![
            drop.clone(),
            format!(
                "CREATE TRIGGER {FENCE_TRIGGER_NAME} {definition} \
                 EXECUTE FUNCTION {FENCE_FUNCTION_NAME}()"
            ),
        ]
    };
    match tamper {
        FenceTamper::Drop => vec![drop],
        FenceTamper::Disable => vec![format!(
            "ALTER TABLE sync_commits DISABLE TRIGGER {FENCE_TRIGGER_NAME}"
        )],
        FenceTamper::WhenFalse => {
            redefined("BEFORE INSERT ON sync_commits FOR EACH ROW WHEN (false)")
        }
        FenceTamper::BeforeUpdate => redefined("BEFORE UPDATE ON sync_commits FOR EACH ROW"),
    }
}

const SHADOW_INSERT_SQL: &str = "INSERT INTO sync_commits \
    (partition, commit_seq, client_id, client_commit_id, actor_id, created_at_ms, writer_version) \
    VALUES ($1, $2::int8, 'shadow-client', 'shadow-' || ($2::int8)::text, 'shadow-actor', 0, $3::int4)";

/// The shadow copies of the two fence tables: empty fences, so a fence
/// check that reads them lets every writer through.
const SHADOW_TABLES_SQL: &str = "\
CREATE TABLE {schema}sync_writer_fence (partition TEXT PRIMARY KEY, required_writer_version INTEGER);
CREATE TABLE {schema}sync_schema_meta (id INTEGER PRIMARY KEY, schema_version BIGINT, \
  layouts TEXT, required_writer_version INTEGER);
INSERT INTO {schema}sync_schema_meta VALUES (1, 1, '{}', NULL);";

/// Inserts a bare commit into the storage's `sync_commits` in `schema` as
/// a fresh role that owns a schema named after itself holding its own
/// `sync_writer_fence` and `sync_schema_meta`, with the default
/// `search_path` shape `"$user", <storage schema>`, and temporary tables of
/// the same names in its session (searched before any schema when a path
/// does not name `pg_temp`). The role may read and write the storage's
/// tables, as a writer role would, and may log in (a distributed Postgres
/// connects to its workers as the session's role). It and everything it owns are dropped
/// before returning, whatever the outcome.
pub fn insert_as_shadowing_role(
    url: &str,
    schema: &str,
    partition: &str,
    commit_seq: i64,
    writer_version: Option<i32>,
) -> Result<()> {
    let role = fresh_schema_name("sync_shadow");
    let mut conn = Conn::from_client(schema_client(url, schema)?);
    let outcome = setup_role(&mut conn, &role, schema).and_then(|()| {
        conn.execute(
            SHADOW_INSERT_SQL,
            &[&partition, &commit_seq, &writer_version],
        )
        .map(|_| ())
    });
    let cleanup = drop_role(&mut conn, &role);
    outcome?;
    cleanup
}

fn setup_role(conn: &mut Conn, role: &str, schema: &str) -> Result<()> {
    let r = quote_ident(role);
    let s = quote_ident(schema);
    conn.simple(&format!(
        "CREATE ROLE {r} LOGIN; GRANT USAGE ON SCHEMA {s} TO {r}; \
         GRANT SELECT, INSERT, UPDATE ON ALL TABLES IN SCHEMA {s} TO {r}; \
         CREATE SCHEMA {r} AUTHORIZATION {r}; SET ROLE {r}; \
         SET search_path TO \"$user\", {s}"
    ))?;
    conn.simple(&SHADOW_TABLES_SQL.replace("{schema}", &format!("{r}.")))?;
    conn.simple(&SHADOW_TABLES_SQL.replace("{schema}", "pg_temp."))?;
    Ok(())
}

fn drop_role(conn: &mut Conn, role: &str) -> Result<()> {
    let r = quote_ident(role);
    conn.simple(&format!(
        "RESET ROLE; DROP SCHEMA IF EXISTS {r} CASCADE; DROP OWNED BY {r}; DROP ROLE {r}"
    ))
    .map(|_| ())
    .map_err(|e: Error| e.detail("cleanup", "shadowing_role"))
}

#[cfg(test)]
mod tests {
    use super::{statements_of, REFERENCE_0_23_START_SQL};

    #[test]
    fn the_reference_start_splits_into_its_statements() {
        let statements = statements_of(REFERENCE_0_23_START_SQL);
        assert_eq!(statements.len(), 7, "{statements:#?}");
        assert!(statements[4].starts_with("CREATE OR REPLACE FUNCTION syncular_writer_fence()"));
        assert!(statements[4].ends_with("$$ LANGUAGE plpgsql"));
        assert!(statements[6].starts_with("CREATE TRIGGER sync_commits_writer_fence"));
        assert_eq!(
            statements_of("SELECT 1;; SELECT 2"),
            ["SELECT 1", "SELECT 2"]
        );
    }
}
