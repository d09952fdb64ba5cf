//! Guard triggers on the migration barrier's own tables: "a fence is never
//! lowered" and "a checkpoint is activated only by the storage" as rules of
//! the database, like the writer fence itself (`docs/decisions.md`, *The
//! barrier's rules in the database*).
//!
//! - `sync_writer_fence`: no update to a lower value or another partition,
//!   no delete, and no insert (an `INSERT OR REPLACE` deletes without firing
//!   delete triggers) below the stored value.
//! - `sync_schema_meta`: once the database-wide fence is set, no update to a
//!   lower value or NULL, no delete, and no insert replacing it with less.
//! - `sync_backfill_checkpoints`: a row is inserted only as a fresh
//!   `declared` one (epoch, watermark and observed rows 0) and never over an
//!   existing row; an activated row is never changed or deleted; no update
//!   moves a row to another key, lowers its owner epoch or moves its
//!   watermark back within one schema version; an activation keeps the
//!   epoch and version, needs the effective fence at the version and a
//!   watermark within the log; and activations and deletions run only on a
//!   connection of the storage, which carries the SQL function
//!   [`STORAGE_FUNCTION`] — on any other connection the statement does not
//!   even prepare. The database cannot see the sources an activation
//!   certifies clean, so who activates is the rule it can enforce.
//!
//! Every trigger raises `sync.storage.barrier_write_refused`.

use rusqlite::functions::FunctionFlags;
use rusqlite::Connection;
use sync_core::Result;

use crate::errors::DbResultExt;

/// The message every guard raises.
pub(crate) const GUARD_MESSAGE: &str = "sync.storage.barrier_write_refused";

/// The SQL function only the storage's connections define.
pub const STORAGE_FUNCTION: &str = "sync_storage_connection";

/// `(name, statement)` of every guard trigger, exactly as installed.
pub const GUARD_TRIGGERS: &[(&str, &str)] = &[
    (
        "sync_writer_fence_guard_update",
        "CREATE TRIGGER sync_writer_fence_guard_update BEFORE UPDATE ON sync_writer_fence FOR EACH ROW
WHEN NEW.partition IS NOT OLD.partition OR NEW.required_writer_version IS NULL
  OR NEW.required_writer_version < OLD.required_writer_version
BEGIN SELECT RAISE(ABORT, 'sync.storage.barrier_write_refused'); END",
    ),
    (
        "sync_writer_fence_guard_delete",
        "CREATE TRIGGER sync_writer_fence_guard_delete BEFORE DELETE ON sync_writer_fence FOR EACH ROW
BEGIN SELECT RAISE(ABORT, 'sync.storage.barrier_write_refused'); END",
    ),
    (
        "sync_writer_fence_guard_insert",
        "CREATE TRIGGER sync_writer_fence_guard_insert BEFORE INSERT ON sync_writer_fence FOR EACH ROW
WHEN NEW.required_writer_version < (
  SELECT required_writer_version FROM sync_writer_fence WHERE partition = NEW.partition)
BEGIN SELECT RAISE(ABORT, 'sync.storage.barrier_write_refused'); END",
    ),
    (
        "sync_schema_meta_guard_update",
        "CREATE TRIGGER sync_schema_meta_guard_update BEFORE UPDATE ON sync_schema_meta FOR EACH ROW
WHEN OLD.required_writer_version IS NOT NULL AND (NEW.required_writer_version IS NULL
  OR NEW.required_writer_version < OLD.required_writer_version)
BEGIN SELECT RAISE(ABORT, 'sync.storage.barrier_write_refused'); END",
    ),
    (
        "sync_schema_meta_guard_delete",
        "CREATE TRIGGER sync_schema_meta_guard_delete BEFORE DELETE ON sync_schema_meta FOR EACH ROW
WHEN OLD.required_writer_version IS NOT NULL
BEGIN SELECT RAISE(ABORT, 'sync.storage.barrier_write_refused'); END",
    ),
    (
        "sync_schema_meta_guard_insert",
        "CREATE TRIGGER sync_schema_meta_guard_insert BEFORE INSERT ON sync_schema_meta FOR EACH ROW
WHEN EXISTS (SELECT 1 FROM sync_schema_meta m WHERE m.id = NEW.id
  AND m.required_writer_version IS NOT NULL AND (NEW.required_writer_version IS NULL
    OR NEW.required_writer_version < m.required_writer_version))
BEGIN SELECT RAISE(ABORT, 'sync.storage.barrier_write_refused'); END",
    ),
    (
        "sync_backfill_checkpoints_guard_insert",
        "CREATE TRIGGER sync_backfill_checkpoints_guard_insert BEFORE INSERT ON sync_backfill_checkpoints FOR EACH ROW
WHEN NEW.state IS NOT 'declared' OR NEW.owner_epoch <> 0 OR NEW.watermark <> 0 OR NEW.observed_rows <> 0
  OR EXISTS (SELECT 1 FROM sync_backfill_checkpoints c WHERE c.partition = NEW.partition AND c.name = NEW.name)
BEGIN SELECT RAISE(ABORT, 'sync.storage.barrier_write_refused'); END",
    ),
    (
        "sync_backfill_checkpoints_guard_update",
        "CREATE TRIGGER sync_backfill_checkpoints_guard_update BEFORE UPDATE ON sync_backfill_checkpoints FOR EACH ROW
WHEN OLD.state = 'activated' OR NEW.partition IS NOT OLD.partition OR NEW.name IS NOT OLD.name
  OR NEW.owner_epoch < OLD.owner_epoch
  OR (NEW.watermark < OLD.watermark AND NEW.schema_version = OLD.schema_version)
BEGIN SELECT RAISE(ABORT, 'sync.storage.barrier_write_refused'); END",
    ),
    (
        "sync_backfill_checkpoints_guard_activate",
        "CREATE TRIGGER sync_backfill_checkpoints_guard_activate BEFORE UPDATE OF state ON sync_backfill_checkpoints FOR EACH ROW
WHEN NEW.state = 'activated' AND (sync_storage_connection() IS NOT 1
  OR NEW.owner_epoch <> OLD.owner_epoch OR NEW.schema_version <> OLD.schema_version
  OR NEW.watermark > coalesce((SELECT max_commit_seq FROM sync_partitions WHERE partition = NEW.partition), 0)
  OR coalesce((SELECT max(v) FROM (
    SELECT required_writer_version AS v FROM sync_writer_fence WHERE partition = NEW.partition
    UNION ALL
    SELECT required_writer_version FROM sync_schema_meta WHERE id = 1)), 0) < NEW.schema_version)
BEGIN SELECT RAISE(ABORT, 'sync.storage.barrier_write_refused'); END",
    ),
    (
        "sync_backfill_checkpoints_guard_delete",
        "CREATE TRIGGER sync_backfill_checkpoints_guard_delete BEFORE DELETE ON sync_backfill_checkpoints FOR EACH ROW
WHEN OLD.state = 'activated' OR sync_storage_connection() IS NOT 1
BEGIN SELECT RAISE(ABORT, 'sync.storage.barrier_write_refused'); END",
    ),
];

/// Defines [`STORAGE_FUNCTION`] (returning 1) on a connection: marks it as
/// one of the storage's own, which may activate and delete checkpoints.
/// The storage marks its writer; code that implements the protocol by hand
/// over the same file (a benchmark baseline) may mark its connection, and
/// is then trusted to activate only what the protocol allows.
pub fn register_storage_function(conn: &Connection) -> rusqlite::Result<()> {
    conn.create_scalar_function(
        STORAGE_FUNCTION,
        0,
        FunctionFlags::SQLITE_UTF8
            | FunctionFlags::SQLITE_DETERMINISTIC
            | FunctionFlags::SQLITE_INNOCUOUS,
        |_| Ok(1_i64),
    )
}

/// Installs every guard whose stored text is not exactly ours (inside the
/// bootstrap transaction, after the tables exist). A warm start issues no
/// DDL.
pub(crate) fn install(conn: &Connection) -> Result<()> {
    for (name, sql) in GUARD_TRIGGERS {
        if stored_trigger(conn, name)?.as_deref() == Some(*sql) {
            continue;
        }
        conn.execute_batch(&format!("DROP TRIGGER IF EXISTS {name}"))
            .db()?;
        conn.execute_batch(sql).db()?;
    }
    Ok(())
}

/// The stored text of a trigger.
fn stored_trigger(conn: &Connection, name: &str) -> Result<Option<String>> {
    let mut stmt = conn
        .prepare("SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = ?1")
        .db()?;
    let mut rows = stmt.query([name]).db()?;
    match rows.next().db()? {
        Some(row) => row.get(0).db(),
        None => Ok(None),
    }
}

/// Runs `f` with the guards dropped and re-creates them afterwards, all in
/// one transaction the caller has open: what a test fixture or a restore
/// that must write the barrier's tables directly does (the guards are DDL,
/// so only a connection that may change the schema can lift them).
pub fn without_guards<T>(conn: &Connection, f: impl FnOnce() -> Result<T>) -> Result<T> {
    for (name, _) in GUARD_TRIGGERS {
        conn.execute_batch(&format!("DROP TRIGGER IF EXISTS {name}"))
            .db()?;
    }
    let out = f()?;
    for (_, sql) in GUARD_TRIGGERS {
        conn.execute_batch(sql).db()?;
    }
    Ok(out)
}
