//! Backfill checkpoints read and installed by `ensure_schema` (the rest of
//! the RFC 0007 surface is not written yet).

use sync_core::{CheckpointKey, CheckpointState, Error, ErrorCode, Result, StoredCheckpoint};

use crate::pool::Conn;
use crate::values::corrupt;

const COLUMNS: &str = "CAST(`partition` AS CHAR), CAST(`name` AS CHAR), `schema_version`, \
`state`, `watermark`, `owner_epoch`, `observed_rows`, `updated_at_ms`";

type Raw = (String, String, i32, String, i64, i64, i64, i64);

fn checkpoint(raw: Raw) -> Result<StoredCheckpoint> {
    let (
        partition,
        name,
        schema_version,
        state,
        watermark,
        owner_epoch,
        observed_rows,
        updated_at_ms,
    ) = raw;
    Ok(StoredCheckpoint {
        partition,
        name,
        schema_version,
        state: CheckpointState::parse(&state).ok_or_else(|| corrupt("checkpoint_state"))?,
        watermark,
        owner_epoch,
        observed_rows,
        updated_at_ms,
    })
}

/// Non-activated checkpoints at `schema_version`.
pub(crate) fn list_pending(conn: &mut Conn, schema_version: i32) -> Result<Vec<CheckpointKey>> {
    let rows: Vec<(String, String)> = conn.rows(
        "SELECT CAST(`partition` AS CHAR), CAST(`name` AS CHAR) FROM `sync_backfill_checkpoints` \
         WHERE `schema_version` = ? AND `state` <> 'activated' ORDER BY `partition`, `name`",
        (schema_version,),
    )?;
    Ok(rows
        .into_iter()
        .map(|(partition, name)| CheckpointKey { partition, name })
        .collect())
}

/// Non-activated checkpoints of versions below `schema_version`.
pub(crate) fn list_unfinished(
    conn: &mut Conn,
    schema_version: i32,
) -> Result<Vec<StoredCheckpoint>> {
    let rows: Vec<Raw> = conn.rows(
        &format!(
            "SELECT {COLUMNS} FROM `sync_backfill_checkpoints` \
             WHERE `schema_version` < ? AND `state` <> 'activated' ORDER BY `partition`, `name`"
        ),
        (schema_version,),
    )?;
    rows.into_iter().map(checkpoint).collect()
}

/// One checkpoint.
pub(crate) fn read_one(
    conn: &mut Conn,
    partition: &str,
    name: &str,
) -> Result<Option<StoredCheckpoint>> {
    let raw: Option<Raw> = conn.first(
        &format!(
            "SELECT {COLUMNS} FROM `sync_backfill_checkpoints` WHERE `partition` = ? AND `name` = ?"
        ),
        (partition, name),
    )?;
    raw.map(checkpoint).transpose()
}

/// `checkpoint_version_mismatch` when a stored row has another version.
pub(crate) fn version_mismatch(stored: i32, requested: i32) -> Error {
    Error::new(ErrorCode::CheckpointVersionMismatch)
        .detail("stored", stored)
        .detail("requested", requested)
}

/// Installs a declaration (insert if absent, then re-read: a row at
/// another version is `checkpoint_version_mismatch`) and raises its
/// partition fence to `version`.
pub(crate) fn install(
    conn: &mut Conn,
    partition: &str,
    name: &str,
    version: i32,
    now_ms: i64,
) -> Result<()> {
    conn.exec(
        "INSERT INTO `sync_backfill_checkpoints` (`partition`, `name`, `schema_version`, `state`, \
         `updated_at_ms`) VALUES (?, ?, ?, 'declared', ?) \
         ON DUPLICATE KEY UPDATE `partition` = `partition`",
        (partition, name, version, now_ms),
    )?;
    let stored: Option<i32> = conn.first(
        "SELECT `schema_version` FROM `sync_backfill_checkpoints` WHERE `partition` = ? AND `name` = ?",
        (partition, name),
    )?;
    match stored {
        Some(v) if v == version => raise_partition_fence(conn, partition, version),
        Some(v) => Err(version_mismatch(v, version)),
        None => Err(Error::new(ErrorCode::CheckpointNotDeclared)),
    }
}

/// Finish or refuse, `carry`: moves an unfinished checkpoint to `version`.
pub(crate) fn carry(
    conn: &mut Conn,
    partition: &str,
    name: &str,
    version: i32,
    now_ms: i64,
) -> Result<()> {
    conn.exec(
        "UPDATE `sync_backfill_checkpoints` SET `schema_version` = ?, `state` = 'declared', \
         `watermark` = 0, `observed_rows` = 0, `owner_epoch` = `owner_epoch` + 1, \
         `updated_at_ms` = ? WHERE `partition` = ? AND `name` = ? AND `state` <> 'activated'",
        (version, now_ms, partition, name),
    )?;
    raise_partition_fence(conn, partition, version)
}

/// Finish or refuse, `abandon`: deletes an unfinished checkpoint.
pub(crate) fn abandon(conn: &mut Conn, partition: &str, name: &str) -> Result<()> {
    conn.exec(
        "DELETE FROM `sync_backfill_checkpoints` \
         WHERE `partition` = ? AND `name` = ? AND `state` <> 'activated'",
        (partition, name),
    )?;
    Ok(())
}

/// The partition fence becomes `max(existing, version)`.
pub(crate) fn raise_partition_fence(conn: &mut Conn, partition: &str, version: i32) -> Result<()> {
    conn.exec(
        "INSERT INTO `sync_writer_fence` (`partition`, `required_writer_version`) VALUES (?, ?) \
         ON DUPLICATE KEY UPDATE `required_writer_version` = \
         GREATEST(`required_writer_version`, VALUE(`required_writer_version`))",
        (partition, version),
    )?;
    Ok(())
}
