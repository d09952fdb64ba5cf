//! Base DDL of the internal tables and the writer-fence trigger
//! (`tables.md` §3–§4.1, `dialects.md` §4.1), run once at construction in
//! one `BEGIN IMMEDIATE`.

use rusqlite::Connection;
use sync_core::{FenceTriggerState, Result};

use crate::errors::DbResultExt;
use crate::pools::{begin_immediate, commit, rollback};

/// Every internal table and index; idempotent.
const BASE_DDL: &str = "
CREATE TABLE IF NOT EXISTS sync_schema_meta (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  schema_version INTEGER NOT NULL,
  layouts TEXT NOT NULL DEFAULT '{}',
  required_writer_version INTEGER
);
CREATE TABLE IF NOT EXISTS sync_partitions (
  partition TEXT PRIMARY KEY,
  max_commit_seq INTEGER NOT NULL DEFAULT 0,
  horizon_seq INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS sync_partition_registry (
  partition TEXT PRIMARY KEY,
  log_epoch TEXT NOT NULL,
  epoch_required INTEGER NOT NULL DEFAULT 0,
  last_authenticated_at_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS sync_commits (
  partition TEXT NOT NULL,
  commit_seq INTEGER NOT NULL,
  client_id TEXT NOT NULL,
  client_commit_id TEXT NOT NULL,
  actor_id TEXT NOT NULL,
  created_at_ms INTEGER NOT NULL,
  writer_version INTEGER,
  PRIMARY KEY (partition, commit_seq)
);
CREATE INDEX IF NOT EXISTS sync_commits_by_time ON sync_commits (partition, created_at_ms);
CREATE TABLE IF NOT EXISTS sync_changes (
  partition TEXT NOT NULL,
  commit_seq INTEGER NOT NULL,
  idx INTEGER NOT NULL,
  tbl TEXT NOT NULL,
  row_id TEXT NOT NULL,
  op INTEGER NOT NULL,
  row_version INTEGER,
  scopes TEXT NOT NULL,
  payload BLOB,
  PRIMARY KEY (partition, commit_seq, idx)
);
CREATE INDEX IF NOT EXISTS sync_changes_by_table ON sync_changes (partition, commit_seq, tbl, idx);
CREATE TABLE IF NOT EXISTS sync_change_scopes (
  partition TEXT NOT NULL,
  tbl TEXT NOT NULL,
  var TEXT NOT NULL,
  value TEXT NOT NULL,
  commit_seq INTEGER NOT NULL,
  PRIMARY KEY (partition, tbl, var, value, commit_seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS sync_row_scopes (
  partition TEXT NOT NULL,
  tbl TEXT NOT NULL,
  var TEXT NOT NULL,
  value TEXT NOT NULL,
  row_id TEXT NOT NULL,
  PRIMARY KEY (partition, tbl, var, value, row_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS sync_tombstones (
  partition TEXT NOT NULL,
  tbl TEXT NOT NULL,
  row_id TEXT NOT NULL,
  commit_seq INTEGER NOT NULL,
  PRIMARY KEY (partition, tbl, row_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS sync_push_results (
  partition TEXT NOT NULL,
  client_id TEXT NOT NULL,
  client_commit_id TEXT NOT NULL,
  result TEXT NOT NULL,
  PRIMARY KEY (partition, client_id, client_commit_id)
);
CREATE TABLE IF NOT EXISTS sync_clients (
  partition TEXT NOT NULL,
  client_id TEXT NOT NULL,
  actor_id TEXT NOT NULL,
  wire_version INTEGER NOT NULL DEFAULT 1,
  cursor INTEGER NOT NULL,
  subscriptions TEXT NOT NULL,
  updated_at_ms INTEGER NOT NULL,
  PRIMARY KEY (partition, client_id)
);
CREATE TABLE IF NOT EXISTS sync_reactions (
  partition TEXT NOT NULL,
  idempotency_key TEXT NOT NULL,
  type TEXT NOT NULL,
  version INTEGER NOT NULL,
  payload TEXT NOT NULL,
  source_client_id TEXT NOT NULL,
  source_client_commit_id TEXT NOT NULL,
  source_commit_seq INTEGER NOT NULL,
  created_at_ms INTEGER NOT NULL,
  available_at_ms INTEGER NOT NULL,
  status TEXT NOT NULL,
  attempts INTEGER NOT NULL,
  max_attempts INTEGER NOT NULL,
  lease_owner TEXT,
  lease_expires_at_ms INTEGER,
  completed_at_ms INTEGER,
  last_failure TEXT,
  PRIMARY KEY (partition, idempotency_key),
  CHECK (status IN ('pending', 'leased', 'completed', 'dead-letter'))
);
CREATE INDEX IF NOT EXISTS sync_reactions_due
  ON sync_reactions (partition, status, available_at_ms, created_at_ms, idempotency_key);
CREATE INDEX IF NOT EXISTS sync_reactions_lease
  ON sync_reactions (partition, status, lease_expires_at_ms);
CREATE INDEX IF NOT EXISTS sync_reactions_completed
  ON sync_reactions (partition, status, completed_at_ms, idempotency_key);
CREATE INDEX IF NOT EXISTS sync_reactions_dead_letter
  ON sync_reactions (partition, status, available_at_ms, idempotency_key);
CREATE TABLE IF NOT EXISTS sync_blob_refs (
  partition TEXT NOT NULL,
  tbl TEXT NOT NULL,
  row_id TEXT NOT NULL,
  blob_id TEXT NOT NULL,
  PRIMARY KEY (partition, tbl, row_id, blob_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS sync_blob_refs_by_blob ON sync_blob_refs (partition, blob_id);
CREATE TABLE IF NOT EXISTS sync_backfill_checkpoints (
  partition TEXT NOT NULL,
  name TEXT NOT NULL,
  schema_version INTEGER NOT NULL CHECK (schema_version >= 1),
  state TEXT NOT NULL CHECK (state IN ('declared', 'backfilling', 'activated')),
  watermark INTEGER NOT NULL DEFAULT 0 CHECK (watermark >= 0),
  owner_epoch INTEGER NOT NULL DEFAULT 0 CHECK (owner_epoch >= 0),
  observed_rows INTEGER NOT NULL DEFAULT 0 CHECK (observed_rows >= 0),
  updated_at_ms INTEGER NOT NULL,
  PRIMARY KEY (partition, name)
);
CREATE TABLE IF NOT EXISTS sync_writer_fence (
  partition TEXT PRIMARY KEY,
  required_writer_version INTEGER NOT NULL CHECK (required_writer_version >= 1)
);
CREATE TABLE IF NOT EXISTS _syncstore_segments (
  partition TEXT NOT NULL,
  segment_id TEXT NOT NULL,
  scope_digest TEXT NOT NULL,
  build_key TEXT NOT NULL,
  tbl TEXT NOT NULL,
  media_type INTEGER NOT NULL,
  schema_version INTEGER NOT NULL,
  as_of_commit_seq INTEGER NOT NULL,
  row_cursor TEXT,
  page_rows INTEGER NOT NULL,
  next_row_cursor TEXT,
  row_count INTEGER NOT NULL,
  byte_length INTEGER NOT NULL,
  created_at_ms INTEGER NOT NULL,
  expires_at_ms INTEGER NOT NULL,
  bytes BLOB NOT NULL,
  PRIMARY KEY (partition, segment_id, scope_digest)
);
CREATE INDEX IF NOT EXISTS _syncstore_segments_by_key
  ON _syncstore_segments (partition, build_key, expires_at_ms);
CREATE INDEX IF NOT EXISTS _syncstore_segments_by_expiry ON _syncstore_segments (expires_at_ms);
";

/// Columns added in place to tables an older writer created
/// (`tables.md` §1): `(table, column, ALTER statement)`.
const LEGACY_COLUMNS: [(&str, &str, &str); 3] = [
    (
        "sync_clients",
        "wire_version",
        "ALTER TABLE sync_clients ADD COLUMN wire_version INTEGER NOT NULL DEFAULT 1",
    ),
    (
        "sync_commits",
        "writer_version",
        "ALTER TABLE sync_commits ADD COLUMN writer_version INTEGER",
    ),
    (
        "sync_schema_meta",
        "required_writer_version",
        "ALTER TABLE sync_schema_meta ADD COLUMN required_writer_version INTEGER",
    ),
];

/// Name of the writer-fence trigger.
pub const FENCE_TRIGGER_NAME: &str = "sync_commits_writer_fence";

/// The writer-fence trigger, exactly as installed (`tables.md` §4.1).
pub const FENCE_TRIGGER_SQL: &str =
    "CREATE TRIGGER sync_commits_writer_fence BEFORE INSERT ON sync_commits FOR EACH ROW
WHEN coalesce(NEW.writer_version, -1) < coalesce((
  SELECT max(v) FROM (
    SELECT required_writer_version AS v FROM sync_writer_fence WHERE partition = NEW.partition
    UNION ALL
    SELECT required_writer_version FROM sync_schema_meta WHERE id = 1)), -1)
BEGIN SELECT RAISE(ABORT, 'sync.storage.writer_fence_rejected'); END";

/// Runs the whole base DDL in one `BEGIN IMMEDIATE`.
pub(crate) fn run(conn: &Connection) -> Result<()> {
    begin_immediate(conn)?;
    match install(conn) {
        Ok(()) => commit(conn),
        Err(error) => {
            rollback(conn);
            Err(error)
        }
    }
}

fn install(conn: &Connection) -> Result<()> {
    conn.execute_batch(BASE_DDL).db()?;
    for (table, column, alter) in LEGACY_COLUMNS {
        if !has_column(conn, table, column)? {
            conn.execute_batch(alter).db()?;
        }
    }
    install_fence_trigger(conn)
}

/// Whether `PRAGMA table_info` of an internal table lists `column`.
fn has_column(conn: &Connection, table: &str, column: &str) -> Result<bool> {
    let mut stmt = conn
        .prepare("SELECT 1 FROM pragma_table_info(?1) WHERE name = ?2")
        .db()?;
    stmt.exists((table, column)).db()
}

/// Replaces the trigger unless `sqlite_master` holds exactly the current text.
fn install_fence_trigger(conn: &Connection) -> Result<()> {
    if stored_fence_trigger(conn)?.as_deref() == Some(FENCE_TRIGGER_SQL) {
        return Ok(());
    }
    conn.execute_batch(&format!("DROP TRIGGER IF EXISTS {FENCE_TRIGGER_NAME}"))
        .db()?;
    conn.execute_batch(FENCE_TRIGGER_SQL).db()
}

/// The stored definition of the writer-fence trigger.
pub(crate) fn stored_fence_trigger(conn: &Connection) -> Result<Option<String>> {
    let mut stmt = conn
        .prepare("SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = ?1")
        .db()?;
    let mut rows = stmt.query([FENCE_TRIGGER_NAME]).db()?;
    match rows.next().db()? {
        Some(row) => row.get(0).db(),
        None => Ok(None),
    }
}

/// The overlay a read-only connection runs (in its `temp` schema, before
/// `query_only`) so the storage's reads work on a database an older writer
/// created (e.g. the reference before RFC 0007) without changing the file:
/// each base table absent from `main` becomes an empty `TEMP` table, and
/// each internal table lacking a column added since becomes a `TEMP VIEW` of
/// the same name adding that column with its default (unqualified names
/// resolve to `temp` first).
pub(crate) fn read_only_overlay(conn: &Connection) -> Result<String> {
    let mut overlay = String::new();
    for statement in BASE_DDL.split(';') {
        let statement = statement.trim();
        let Some(rest) = statement.strip_prefix("CREATE TABLE IF NOT EXISTS ") else {
            continue;
        };
        let table = rest.split_whitespace().next().unwrap_or_default();
        if !has_table(conn, table)? {
            overlay.push_str(&format!("CREATE TEMP TABLE {rest};\n"));
        }
    }
    let mut views: Vec<(&str, Vec<String>)> = Vec::new();
    for (table, column, alter) in LEGACY_COLUMNS {
        if !has_table(conn, table)? || has_column(conn, table, column)? {
            continue;
        }
        let default = alter
            .split_once(" DEFAULT ")
            .map_or("NULL", |(_, value)| value.trim());
        let added = format!("{default} AS {column}");
        match views.iter_mut().find(|(t, _)| *t == table) {
            Some((_, columns)) => columns.push(added),
            None => views.push((table, vec![added])),
        }
    }
    for (table, columns) in views {
        overlay.push_str(&format!(
            "CREATE TEMP VIEW {table} AS SELECT *, {} FROM main.{table};\n",
            columns.join(", ")
        ));
    }
    Ok(overlay)
}

/// Whether `main` holds the table.
fn has_table(conn: &Connection, table: &str) -> Result<bool> {
    let mut stmt = conn
        .prepare("SELECT 1 FROM main.sqlite_master WHERE type = 'table' AND name = ?1")
        .db()?;
    stmt.exists([table]).db()
}

/// The state of the writer-fence trigger (`tables.md` §4.1): enforced only
/// when `sqlite_master` holds exactly the current text.
pub(crate) fn fence_trigger_state(conn: &Connection) -> Result<FenceTriggerState> {
    let commits = conn
        .prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'sync_commits'")
        .db()?
        .exists([])
        .db()?;
    Ok(match stored_fence_trigger(conn)? {
        _ if !commits => FenceTriggerState::NoCommitTable,
        None => FenceTriggerState::Missing,
        Some(text) if text == FENCE_TRIGGER_SQL => FenceTriggerState::Enforced,
        Some(_) => FenceTriggerState::Foreign,
    })
}
