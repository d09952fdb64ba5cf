//! RFC 0007 checkpoints (`storage-contract.md` §4.14, §5.5): declare, claim,
//! advance, activate, and the database-side fences they read and raise.

use std::sync::LazyLock;

use postgres::Row;
use sync_core::{
    effective_fence, validate, ActivationOutcome, CheckpointDeclaration, CheckpointKey,
    CheckpointState, Coverage, Error, ErrorCode, Result, StoredCheckpoint,
};

use crate::coverage;
use crate::pool::{col, Conn};

const COLUMNS: &str = "cp.partition, cp.name, cp.schema_version, cp.state, cp.watermark, \
    cp.owner_epoch, cp.observed_rows, cp.updated_at_ms";

fn read_all_sql() -> String {
    format!(
        "SELECT {COLUMNS} FROM sync_backfill_checkpoints cp WHERE cp.partition = $1 \
         ORDER BY cp.name COLLATE \"C\""
    )
}

fn read_one_sql() -> String {
    format!("SELECT {COLUMNS} FROM sync_backfill_checkpoints cp WHERE cp.partition = $1 AND cp.name = $2")
}

/// The checkpoint row locked, with the partition counter and both fences.
fn lock_sql() -> String {
    format!(
        "SELECT {COLUMNS}, \
           (SELECT p.max_commit_seq FROM sync_partitions p WHERE p.partition = $1), \
           (SELECT f.required_writer_version FROM sync_writer_fence f WHERE f.partition = $1), \
           (SELECT m.required_writer_version FROM sync_schema_meta m WHERE m.id = 1) \
         FROM sync_backfill_checkpoints cp WHERE cp.partition = $1 AND cp.name = $2 \
         FOR UPDATE OF cp"
    )
}

fn claim_sql() -> String {
    format!(
        "UPDATE sync_backfill_checkpoints cp SET owner_epoch = cp.owner_epoch + 1, \
           state = 'backfilling', updated_at_ms = $4 \
         WHERE cp.partition = $1 AND cp.name = $2 AND cp.schema_version = $3 \
           AND cp.state <> 'activated' RETURNING {COLUMNS}"
    )
}

const PENDING_SQL: &str = "SELECT partition, name FROM sync_backfill_checkpoints \
    WHERE schema_version = $1 AND state <> 'activated' \
    ORDER BY partition COLLATE \"C\", name COLLATE \"C\"";
const CARRY_SQL: &str = "UPDATE sync_backfill_checkpoints SET schema_version = $3, \
    state = 'declared', watermark = 0, observed_rows = 0, owner_epoch = owner_epoch + 1, \
    updated_at_ms = $4 WHERE partition = $1 AND name = $2 AND state <> 'activated'";
const ABANDON_SQL: &str = "DELETE FROM sync_backfill_checkpoints \
    WHERE partition = $1 AND name = $2 AND state <> 'activated'";
const MARKER_SQL: &str = "SELECT schema_version::int8 FROM sync_schema_meta WHERE id = 1";
const INSERT_DECLARED_SQL: &str = "INSERT INTO sync_backfill_checkpoints \
    (partition, name, schema_version, state, watermark, owner_epoch, observed_rows, updated_at_ms) \
    VALUES ($1, $2, $3, 'declared', 0, 0, 0, $4) ON CONFLICT (partition, name) DO NOTHING";
const RAISE_FENCE_SQL: &str = "INSERT INTO sync_writer_fence (partition, required_writer_version) \
    VALUES ($1, $2) ON CONFLICT (partition) DO UPDATE SET required_writer_version = \
    GREATEST(sync_writer_fence.required_writer_version, excluded.required_writer_version)";
const ADVANCE_SQL: &str = "UPDATE sync_backfill_checkpoints SET watermark = $3, \
    observed_rows = $4, updated_at_ms = $5 \
    WHERE partition = $1 AND name = $2 AND owner_epoch = $6 AND state = 'backfilling' RETURNING 1";
const ACTIVATE_SQL: &str = "UPDATE sync_backfill_checkpoints SET state = 'activated', \
    watermark = $3, updated_at_ms = $4 \
    WHERE partition = $1 AND name = $2 AND owner_epoch = $5 AND state <> 'activated' RETURNING 1";
/// The partition fence and the database-wide fence, as two select-list
/// columns over an SQL expression for the partition (combine them with
/// `sync_core::effective_fence`, as the fence trigger does).
pub(crate) fn fence_columns(partition: &str) -> String {
    format!(
        "(SELECT required_writer_version FROM sync_writer_fence WHERE partition = {partition}), \
         (SELECT required_writer_version FROM sync_schema_meta WHERE id = 1)"
    )
}

static FENCES_SQL: LazyLock<String> = LazyLock::new(|| format!("SELECT {}", fence_columns("$1")));

fn checkpoint(row: &Row) -> Result<StoredCheckpoint> {
    let state: String = col(row, 3)?;
    Ok(StoredCheckpoint {
        partition: col(row, 0)?,
        name: col(row, 1)?,
        schema_version: col(row, 2)?,
        state: CheckpointState::parse(&state).ok_or_else(|| {
            Error::new(ErrorCode::Backend).detail("reason", "unknown_checkpoint_state")
        })?,
        watermark: col(row, 4)?,
        owner_epoch: col(row, 5)?,
        observed_rows: col(row, 6)?,
        updated_at_ms: col(row, 7)?,
    })
}

fn version_mismatch(stored: i32, requested: i32) -> Error {
    Error::new(ErrorCode::CheckpointVersionMismatch)
        .detail("stored", stored)
        .detail("requested", requested)
}

/// Every checkpoint of the partition, by name.
pub(crate) fn read_all(conn: &mut Conn, partition: &str) -> Result<Vec<StoredCheckpoint>> {
    conn.query(&read_all_sql(), &[&partition])?
        .iter()
        .map(checkpoint)
        .collect()
}

/// One checkpoint.
pub(crate) fn read_one(
    conn: &mut Conn,
    partition: &str,
    name: &str,
) -> Result<Option<StoredCheckpoint>> {
    conn.query_opt(&read_one_sql(), &[&partition, &name])?
        .as_ref()
        .map(checkpoint)
        .transpose()
}

/// Database-wide non-activated checkpoints at `version`.
pub(crate) fn pending(conn: &mut Conn, version: i32) -> Result<Vec<CheckpointKey>> {
    conn.query(PENDING_SQL, &[&version])?
        .iter()
        .map(|row| {
            Ok(CheckpointKey {
                partition: col(row, 0)?,
                name: col(row, 1)?,
            })
        })
        .collect()
}

/// Database-wide non-activated checkpoints of versions below `version`
/// (finish or refuse).
pub(crate) fn unfinished(conn: &mut Conn, version: i32) -> Result<Vec<StoredCheckpoint>> {
    let sql = format!(
        "SELECT {COLUMNS} FROM sync_backfill_checkpoints cp \
         WHERE cp.schema_version < $1 AND cp.state <> 'activated' \
         ORDER BY cp.partition COLLATE \"C\", cp.name COLLATE \"C\""
    );
    conn.query(&sql, &[&version])?
        .iter()
        .map(checkpoint)
        .collect()
}

/// Finish or refuse, `carry`: moves an unfinished checkpoint to `version`
/// (`declared`, progress reset, owner epoch + 1) and raises its partition
/// fence. Inside the bump transaction.
pub(crate) fn carry(
    conn: &mut Conn,
    partition: &str,
    name: &str,
    version: i32,
    now_ms: i64,
) -> Result<()> {
    conn.execute(CARRY_SQL, &[&partition, &name, &version, &now_ms])?;
    conn.execute(RAISE_FENCE_SQL, &[&partition, &version])?;
    Ok(())
}

/// Finish or refuse, `abandon`: deletes an unfinished checkpoint. Inside the
/// bump transaction; fences are left as they are.
pub(crate) fn abandon(conn: &mut Conn, partition: &str, name: &str) -> Result<()> {
    conn.execute(ABANDON_SQL, &[&partition, &name])?;
    Ok(())
}

/// The stored marker version (`None` without a marker).
pub(crate) fn marker_version(conn: &mut Conn) -> Result<Option<i64>> {
    match conn.query_opt(MARKER_SQL, &[])? {
        Some(row) => col(&row, 0).map(Some),
        None => Ok(None),
    }
}

/// Inserts the declared row if absent, re-reads it (other version →
/// `checkpoint_version_mismatch`) and raises the partition fence.
pub(crate) fn install(
    conn: &mut Conn,
    decl: &CheckpointDeclaration,
    now_ms: i64,
) -> Result<StoredCheckpoint> {
    conn.execute(
        INSERT_DECLARED_SQL,
        &[&decl.partition, &decl.name, &decl.schema_version, &now_ms],
    )?;
    let row = read_one(conn, &decl.partition, &decl.name)?
        .ok_or_else(|| Error::new(ErrorCode::CheckpointNotDeclared))?;
    if row.schema_version != decl.schema_version {
        return Err(version_mismatch(row.schema_version, decl.schema_version));
    }
    conn.execute(RAISE_FENCE_SQL, &[&decl.partition, &decl.schema_version])?;
    Ok(row)
}

/// `declare_checkpoint` inside a write transaction: the version must be the
/// current marker.
pub(crate) fn declare(
    conn: &mut Conn,
    decl: &CheckpointDeclaration,
    now_ms: i64,
) -> Result<StoredCheckpoint> {
    if marker_version(conn)? != Some(i64::from(decl.schema_version)) {
        return Err(Error::new(ErrorCode::CheckpointDeclarationInvalid)
            .detail("partition", &decl.partition)
            .detail("name", &decl.name)
            .detail("reason", "version_not_current"));
    }
    install(conn, decl, now_ms)
}

/// One conditional update; on a miss, the reason from the row.
pub(crate) fn claim(
    conn: &mut Conn,
    partition: &str,
    name: &str,
    version: i32,
    now_ms: i64,
) -> Result<StoredCheckpoint> {
    if let Some(row) = conn.query_opt(&claim_sql(), &[&partition, &name, &version, &now_ms])? {
        return checkpoint(&row);
    }
    match read_one(conn, partition, name)? {
        Some(cp) if cp.state != CheckpointState::Activated && cp.schema_version != version => {
            Err(version_mismatch(cp.schema_version, version))
        }
        _ => Err(Error::new(ErrorCode::CheckpointNotDeclared)),
    }
}

/// The locked checkpoint row with what advance and activate compare against.
struct Locked {
    checkpoint: StoredCheckpoint,
    max_commit_seq: i64,
    fence: Option<i32>,
}

fn lock_row(conn: &mut Conn, partition: &str, name: &str) -> Result<Option<Locked>> {
    let Some(row) = conn.query_opt(&lock_sql(), &[&partition, &name])? else {
        return Ok(None);
    };
    let max: Option<i64> = col(&row, 8)?;
    let partition_fence: Option<i32> = col(&row, 9)?;
    let database_fence: Option<i32> = col(&row, 10)?;
    Ok(Some(Locked {
        checkpoint: checkpoint(&row)?,
        max_commit_seq: max.unwrap_or(0),
        fence: effective_fence(partition_fence, database_fence),
    }))
}

fn check_watermark(locked: &Locked, watermark: i64) -> Result<()> {
    if watermark < locked.checkpoint.watermark {
        return Err(validate::watermark_invalid("regression"));
    }
    if watermark > locked.max_commit_seq {
        return Err(validate::watermark_invalid("ahead_of_log"));
    }
    Ok(())
}

/// Progress compare-and-set; `false` when superseded, unclaimed or finished.
pub(crate) fn advance(
    conn: &mut Conn,
    partition: &str,
    name: &str,
    owner_epoch: i64,
    watermark: i64,
    observed_rows: i64,
    now_ms: i64,
) -> Result<bool> {
    let Some(locked) = lock_row(conn, partition, name)? else {
        return Ok(false);
    };
    if locked.checkpoint.owner_epoch != owner_epoch
        || locked.checkpoint.state != CheckpointState::Backfilling
    {
        return Ok(false);
    }
    check_watermark(&locked, watermark)?;
    let rows = conn.query(
        ADVANCE_SQL,
        &[
            &partition,
            &name,
            &watermark,
            &observed_rows,
            &now_ms,
            &owner_epoch,
        ],
    )?;
    Ok(rows.len() == 1)
}

/// Activation under the partition lock (held by the caller).
pub(crate) fn activate(
    conn: &mut Conn,
    partition: &str,
    name: &str,
    owner_epoch: i64,
    watermark: i64,
    sources: &[String],
    now_ms: i64,
) -> Result<ActivationOutcome> {
    let locked = lock_row(conn, partition, name)?
        .ok_or_else(|| Error::new(ErrorCode::CheckpointNotDeclared))?;
    if locked
        .fence
        .is_none_or(|fence| fence < locked.checkpoint.schema_version)
    {
        return Err(Error::new(ErrorCode::CheckpointFenceMissing));
    }
    if locked.checkpoint.state == CheckpointState::Activated
        || locked.checkpoint.owner_epoch != owner_epoch
    {
        return Ok(ActivationOutcome::Stale);
    }
    check_watermark(&locked, watermark)?;
    match coverage::changes_above(conn, partition, sources, watermark)? {
        Coverage::Changed => return Ok(ActivationOutcome::Stale),
        Coverage::Unverifiable => return Ok(ActivationOutcome::Unverifiable),
        Coverage::Clean => {}
    }
    let rows = conn.query(
        ACTIVATE_SQL,
        &[&partition, &name, &watermark, &now_ms, &owner_epoch],
    )?;
    Ok(if rows.len() == 1 {
        ActivationOutcome::Activated
    } else {
        ActivationOutcome::Stale
    })
}

/// The effective fence of a partition.
pub(crate) fn required_writer_version(conn: &mut Conn, partition: &str) -> Result<Option<i32>> {
    let row = conn.query_one(&FENCES_SQL, &[&partition])?;
    Ok(effective_fence(col(&row, 0)?, col(&row, 1)?))
}
