//! The storage half of RFC 0007 (`storage-contract.md` §4.14, §5.5,
//! `rfc0007-migration-barrier.md` §3–§4): checkpoints, owner epochs,
//! watermarks, source coverage and writer fences. Every function takes the
//! connection it runs on, so pool methods (reader or writer transaction)
//! and transaction methods share one implementation.

use rusqlite::{Connection, OptionalExtension, Row, ToSql};
use sync_core::{
    effective_fence, validate, ActivationOutcome, ChangeOp, CheckpointKey, CheckpointState,
    Coverage, Error, ErrorCode, Result, SourceChange, StoredCheckpoint,
};

use crate::commit_log::{horizon_seq, max_commit_seq};
use crate::errors::{corrupt, DbResultExt};
use crate::seam;
use crate::sql::placeholders;
use crate::values::to_i32;

const COLUMNS: &str =
    "partition, name, schema_version, state, watermark, owner_epoch, observed_rows, updated_at_ms";

type RawCheckpoint = (String, String, i64, String, i64, i64, i64, i64);

fn raw(row: &Row<'_>) -> rusqlite::Result<RawCheckpoint> {
    Ok((
        row.get(0)?,
        row.get(1)?,
        row.get(2)?,
        row.get(3)?,
        row.get(4)?,
        row.get(5)?,
        row.get(6)?,
        row.get(7)?,
    ))
}

fn checkpoint(raw: RawCheckpoint) -> Result<StoredCheckpoint> {
    Ok(StoredCheckpoint {
        partition: raw.0,
        name: raw.1,
        schema_version: to_i32(raw.2)?,
        state: CheckpointState::parse(&raw.3).ok_or_else(|| corrupt("checkpoint_state_unknown"))?,
        watermark: raw.4,
        owner_epoch: raw.5,
        observed_rows: raw.6,
        updated_at_ms: raw.7,
    })
}

// ---- reads -----------------------------------------------------------------

/// Every checkpoint of the partition, ordered by name.
pub(crate) fn read_all(conn: &Connection, partition: &str) -> Result<Vec<StoredCheckpoint>> {
    let mut stmt = seam::cached(
        conn,
        &format!(
            "SELECT {COLUMNS} FROM sync_backfill_checkpoints WHERE partition = ?1 ORDER BY name"
        ),
    )
    .db()?;
    let rows: Vec<RawCheckpoint> = stmt
        .query_map([partition], raw)
        .db()?
        .collect::<rusqlite::Result<_>>()
        .db()?;
    rows.into_iter().map(checkpoint).collect()
}

/// One checkpoint.
pub(crate) fn read_one(
    conn: &Connection,
    partition: &str,
    name: &str,
) -> Result<Option<StoredCheckpoint>> {
    seam::cached(
        conn,
        &format!(
            "SELECT {COLUMNS} FROM sync_backfill_checkpoints WHERE partition = ?1 AND name = ?2"
        ),
    )
    .db()?
    .query_row((partition, name), raw)
    .optional()
    .db()?
    .map(checkpoint)
    .transpose()
}

/// Database-wide non-activated checkpoints at a version, ordered `(partition, name)`.
pub(crate) fn list_pending(conn: &Connection, schema_version: i32) -> Result<Vec<CheckpointKey>> {
    let mut stmt = seam::cached(
        conn,
        "SELECT partition, name FROM sync_backfill_checkpoints \
             WHERE schema_version = ?1 AND state <> 'activated' ORDER BY partition, name",
    )
    .db()?;
    let rows = stmt
        .query_map([schema_version], |r| {
            Ok(CheckpointKey {
                partition: r.get(0)?,
                name: r.get(1)?,
            })
        })
        .db()?;
    rows.collect::<rusqlite::Result<_>>().db()
}

/// Database-wide non-activated checkpoints of versions below `schema_version`,
/// ordered `(partition, name)` (finish or refuse).
pub(crate) fn list_unfinished(
    conn: &Connection,
    schema_version: i32,
) -> Result<Vec<StoredCheckpoint>> {
    let mut stmt = seam::cached(
        conn,
        &format!(
            "SELECT {COLUMNS} FROM sync_backfill_checkpoints \
             WHERE schema_version < ?1 AND state <> 'activated' ORDER BY partition, name"
        ),
    )
    .db()?;
    let rows: Vec<RawCheckpoint> = stmt
        .query_map([schema_version], raw)
        .db()?
        .collect::<rusqlite::Result<_>>()
        .db()?;
    rows.into_iter().map(checkpoint).collect()
}

/// The stored marker version, `None` without a marker.
pub(crate) fn marker_version(conn: &Connection) -> Result<Option<i64>> {
    seam::cached(
        conn,
        "SELECT schema_version FROM sync_schema_meta WHERE id = 1",
    )
    .db()?
    .query_row([], |r| r.get(0))
    .optional()
    .db()
}

// ---- fences ----------------------------------------------------------------

/// The per-partition fence.
pub(crate) fn partition_fence(conn: &Connection, partition: &str) -> Result<Option<i32>> {
    let value: Option<i64> = seam::cached(
        conn,
        "SELECT required_writer_version FROM sync_writer_fence WHERE partition = ?1",
    )
    .db()?
    .query_row([partition], |r| r.get(0))
    .optional()
    .db()?;
    value.map(to_i32).transpose()
}

/// The database-wide fence.
pub(crate) fn database_fence(conn: &Connection) -> Result<Option<i32>> {
    let value: Option<Option<i64>> = seam::cached(
        conn,
        "SELECT required_writer_version FROM sync_schema_meta WHERE id = 1",
    )
    .db()?
    .query_row([], |r| r.get(0))
    .optional()
    .db()?;
    value.flatten().map(to_i32).transpose()
}

/// The effective fence of a partition.
pub(crate) fn required_writer_version(conn: &Connection, partition: &str) -> Result<Option<i32>> {
    Ok(effective_fence(
        partition_fence(conn, partition)?,
        database_fence(conn)?,
    ))
}

/// Raises the partition fence to `max(existing, version)`; never lowers it.
/// The inserted value is already the maximum: the insert guard refuses an
/// insert below the stored fence even when the conflict branch would keep it.
pub(crate) fn raise_partition_fence(
    conn: &Connection,
    partition: &str,
    version: i32,
) -> Result<()> {
    seam::cached(
        conn,
        "INSERT INTO sync_writer_fence (partition, required_writer_version) \
         VALUES (?1, max(?2, coalesce((SELECT required_writer_version FROM sync_writer_fence WHERE partition = ?1), ?2))) \
         ON CONFLICT (partition) DO UPDATE SET required_writer_version = \
         max(sync_writer_fence.required_writer_version, excluded.required_writer_version)",
    )
    .db()?
    .execute((partition, version))
    .db()?;
    Ok(())
}

// ---- writes ----------------------------------------------------------------

/// `declare_checkpoint` inside the writer transaction: the version must be
/// the marker's, then [`install`].
pub(crate) fn declare(
    conn: &Connection,
    partition: &str,
    name: &str,
    version: i32,
    now_ms: i64,
) -> Result<StoredCheckpoint> {
    if marker_version(conn)? != Some(i64::from(version)) {
        return Err(Error::new(ErrorCode::CheckpointDeclarationInvalid)
            .detail("partition", partition)
            .detail("name", name)
            .detail("reason", "version_not_current"));
    }
    install(conn, partition, name, version, now_ms)
}

/// Inserts the `declared` row if absent, re-reads it (another version →
/// `checkpoint_version_mismatch`) and raises the partition fence. Shared by
/// `declare_checkpoint` and the declaration install of a bump.
pub(crate) fn install(
    conn: &Connection,
    partition: &str,
    name: &str,
    version: i32,
    now_ms: i64,
) -> Result<StoredCheckpoint> {
    // Read first: the insert guard refuses any insert over an existing row
    // (an `INSERT OR REPLACE` would reset it), so only an absent row is
    // inserted. The writer lock makes the two one step.
    let row = match read_one(conn, partition, name)? {
        Some(row) => row,
        None => {
            seam::cached(conn,
                "INSERT INTO sync_backfill_checkpoints (partition, name, schema_version, state, watermark, owner_epoch, \
                 observed_rows, updated_at_ms) VALUES (?1, ?2, ?3, 'declared', 0, 0, 0, ?4)",
            )
            .db()?
            .execute((partition, name, version, now_ms))
            .db()?;
            read_one(conn, partition, name)?
                .ok_or_else(|| Error::new(ErrorCode::CheckpointNotDeclared))?
        }
    };
    if row.schema_version != version {
        return Err(version_mismatch(row.schema_version, version));
    }
    raise_partition_fence(conn, partition, version)?;
    Ok(row)
}

/// Finish or refuse, `carry`: moves an unfinished checkpoint to `version`
/// (`declared`, progress reset, owner epoch + 1) and raises its partition
/// fence. Inside the bump transaction.
pub(crate) fn carry(
    conn: &Connection,
    partition: &str,
    name: &str,
    version: i32,
    now_ms: i64,
) -> Result<()> {
    seam::cached(
        conn,
        "UPDATE sync_backfill_checkpoints SET schema_version = ?3, state = 'declared', \
         watermark = 0, observed_rows = 0, owner_epoch = owner_epoch + 1, updated_at_ms = ?4 \
         WHERE partition = ?1 AND name = ?2 AND state <> 'activated'",
    )
    .db()?
    .execute((partition, name, version, now_ms))
    .db()?;
    raise_partition_fence(conn, partition, version)
}

/// Finish or refuse, `abandon`: deletes an unfinished checkpoint. Inside the
/// bump transaction; fences are left as they are.
pub(crate) fn abandon(conn: &Connection, partition: &str, name: &str) -> Result<()> {
    seam::cached(
        conn,
        "DELETE FROM sync_backfill_checkpoints \
         WHERE partition = ?1 AND name = ?2 AND state <> 'activated'",
    )
    .db()?
    .execute((partition, name))
    .db()?;
    Ok(())
}

fn version_mismatch(stored: i32, requested: i32) -> Error {
    Error::new(ErrorCode::CheckpointVersionMismatch)
        .detail("stored", stored)
        .detail("requested", requested)
}

/// One atomic conditional update: `owner_epoch + 1`, state `backfilling`.
pub(crate) fn claim(
    conn: &Connection,
    partition: &str,
    name: &str,
    version: i32,
    now_ms: i64,
) -> Result<StoredCheckpoint> {
    let claimed = seam::cached(conn, &format!(
            "UPDATE sync_backfill_checkpoints SET owner_epoch = owner_epoch + 1, state = 'backfilling', \
             updated_at_ms = ?4 WHERE partition = ?1 AND name = ?2 AND schema_version = ?3 \
             AND state <> 'activated' RETURNING {COLUMNS}"
        ))
        .db()?
        .query_row((partition, name, version, now_ms), raw)
        .optional()
        .db()?;
    if let Some(row) = claimed {
        return checkpoint(row);
    }
    match read_one(conn, partition, name)? {
        Some(row) if row.state != CheckpointState::Activated && row.schema_version != version => {
            Err(version_mismatch(row.schema_version, version))
        }
        _ => Err(Error::new(ErrorCode::CheckpointNotDeclared)),
    }
}

/// Watermark must not regress nor pass the partition's log.
fn check_watermark(conn: &Connection, partition: &str, stored: i64, watermark: i64) -> Result<()> {
    if watermark < stored {
        return Err(validate::watermark_invalid("regression"));
    }
    if watermark > max_commit_seq(conn, partition)? {
        return Err(validate::watermark_invalid("ahead_of_log"));
    }
    Ok(())
}

/// Compare-and-set progress; `false` when superseded, unclaimed or finished.
pub(crate) fn advance(
    conn: &Connection,
    partition: &str,
    name: &str,
    owner_epoch: i64,
    watermark: i64,
    observed_rows: i64,
    now_ms: i64,
) -> Result<bool> {
    let Some(row) = read_one(conn, partition, name)? else {
        return Ok(false);
    };
    if row.owner_epoch != owner_epoch || row.state != CheckpointState::Backfilling {
        return Ok(false);
    }
    check_watermark(conn, partition, row.watermark, watermark)?;
    let changed = seam::cached(conn,
            "UPDATE sync_backfill_checkpoints SET watermark = ?4, observed_rows = ?5, updated_at_ms = ?6 \
             WHERE partition = ?1 AND name = ?2 AND owner_epoch = ?3 AND state = 'backfilling'",
        )
        .db()?
        .execute((partition, name, owner_epoch, watermark, observed_rows, now_ms))
        .db()?;
    Ok(changed == 1)
}

/// Activation under the writer lock; see `storage-contract.md` §4.14 for
/// the order of the checks. Writes only when the outcome is `Activated`.
pub(crate) fn activate(
    conn: &Connection,
    partition: &str,
    name: &str,
    owner_epoch: i64,
    watermark: i64,
    sources: &[String],
    now_ms: i64,
) -> Result<ActivationOutcome> {
    let Some(row) = read_one(conn, partition, name)? else {
        return Err(Error::new(ErrorCode::CheckpointNotDeclared));
    };
    let fence = required_writer_version(conn, partition)?;
    if fence.is_none_or(|f| f < row.schema_version) {
        return Err(Error::new(ErrorCode::CheckpointFenceMissing));
    }
    if row.state == CheckpointState::Activated || row.owner_epoch != owner_epoch {
        return Ok(ActivationOutcome::Stale);
    }
    check_watermark(conn, partition, row.watermark, watermark)?;
    match changes_above(conn, partition, sources, watermark)? {
        Coverage::Changed => return Ok(ActivationOutcome::Stale),
        Coverage::Unverifiable => return Ok(ActivationOutcome::Unverifiable),
        Coverage::Clean => {}
    }
    let changed = seam::cached(conn,
            "UPDATE sync_backfill_checkpoints SET state = 'activated', watermark = ?4, updated_at_ms = ?5 \
             WHERE partition = ?1 AND name = ?2 AND owner_epoch = ?3 AND state <> 'activated'",
        )
        .db()?
        .execute((partition, name, owner_epoch, watermark, now_ms))
        .db()?;
    Ok(if changed == 1 {
        ActivationOutcome::Activated
    } else {
        ActivationOutcome::Stale
    })
}

// ---- source coverage -------------------------------------------------------

/// Any retained change of the tables above a sequence (`sync_changes_by_table`).
/// Parameters: partition, seq, then one per table.
pub fn coverage_probe_sql(tables: usize) -> String {
    format!(
        "SELECT 1 FROM sync_changes WHERE partition = ?1 AND commit_seq > ?2 AND tbl IN ({}) LIMIT 1",
        placeholders(3, tables)
    )
}

/// Highest retained `commit_seq` among changes of the tables. Parameters:
/// partition, then one per table.
pub fn coverage_seq_sql(tables: usize) -> String {
    format!(
        "SELECT max(commit_seq) FROM sync_changes WHERE partition = ?1 AND tbl IN ({})",
        placeholders(2, tables)
    )
}

fn bind_tables<'a>(head: Vec<&'a dyn ToSql>, tables: &'a [String]) -> Vec<&'a dyn ToSql> {
    let mut params = head;
    params.extend(tables.iter().map(|t| t as &dyn ToSql));
    params
}

/// Highest retained source `commit_seq`; 0 when none or no tables.
pub(crate) fn coverage_seq(conn: &Connection, partition: &str, tables: &[String]) -> Result<i64> {
    if tables.is_empty() {
        return Ok(0);
    }
    let params = bind_tables(vec![&partition], tables);
    let seq: Option<i64> = seam::cached(conn, &coverage_seq_sql(tables.len()))
        .db()?
        .query_row(params.as_slice(), |r| r.get(0))
        .db()?;
    Ok(seq.unwrap_or(0))
}

/// Horizon first, then the probe (`rfc0007-migration-barrier.md` §3.5).
pub(crate) fn changes_above(
    conn: &Connection,
    partition: &str,
    tables: &[String],
    seq: i64,
) -> Result<Coverage> {
    let horizon = horizon_seq(conn, partition)?;
    if tables.is_empty() {
        return Ok(Coverage::Clean);
    }
    let params = bind_tables(vec![&partition, &seq], tables);
    let changed = seam::cached(conn, &coverage_probe_sql(tables.len()))
        .db()?
        .exists(params.as_slice())
        .db()?;
    Ok(if changed {
        Coverage::Changed
    } else if horizon > seq {
        Coverage::Unverifiable
    } else {
        Coverage::Clean
    })
}

/// Retained source changes above `after_seq`, `(commit_seq, idx)` order.
pub(crate) fn source_changes(
    conn: &Connection,
    partition: &str,
    tables: &[String],
    after_seq: i64,
    limit: i64,
) -> Result<Vec<SourceChange>> {
    if tables.is_empty() {
        return Ok(Vec::new());
    }
    let sql = format!(
        "SELECT ch.commit_seq, ch.idx, c.client_id, ch.tbl, ch.row_id, ch.op FROM sync_changes AS ch \
         JOIN sync_commits AS c ON c.partition = ?1 AND c.commit_seq = ch.commit_seq \
         WHERE ch.partition = ?1 AND ch.commit_seq > ?2 AND ch.tbl IN ({}) \
         ORDER BY ch.commit_seq, ch.idx LIMIT CAST(?3 AS INTEGER)",
        placeholders(4, tables.len())
    );
    let params = bind_tables(vec![&partition, &after_seq, &limit], tables);
    let mut stmt = seam::cached(conn, &sql).db()?;
    let rows = stmt
        .query_map(params.as_slice(), |r| {
            Ok(SourceChange {
                commit_seq: r.get(0)?,
                idx: r.get(1)?,
                client_id: r.get(2)?,
                table: r.get(3)?,
                row_id: r.get(4)?,
                op: ChangeOp::from_stored(r.get(5)?),
            })
        })
        .db()?;
    rows.collect::<rusqlite::Result<_>>().db()
}
