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

// ---- the RFC 0007 operations ----------------------------------------------

fn read_for_update(
    conn: &mut Conn,
    partition: &str,
    name: &str,
) -> Result<Option<StoredCheckpoint>> {
    let raw: Option<Raw> = conn.first(
        &format!(
            "SELECT {COLUMNS} FROM `sync_backfill_checkpoints` \
             WHERE `partition` = ? AND `name` = ? FOR UPDATE"
        ),
        (partition, name),
    )?;
    raw.map(checkpoint).transpose()
}

/// `declare_checkpoint`: the marker (read in share mode) must be at
/// `version` with no migration open, then [`install`]; the stored row.
pub(crate) fn declare(
    conn: &mut Conn,
    partition: &str,
    name: &str,
    version: i32,
    now_ms: i64,
) -> Result<StoredCheckpoint> {
    let marker: Option<(i64, Option<i32>)> = conn.first(
        "SELECT `schema_version`, `migrating_to` FROM `sync_schema_meta` WHERE `id` = 1 \
         LOCK IN SHARE MODE",
        (),
    )?;
    if marker != Some((i64::from(version), None)) {
        return Err(Error::new(ErrorCode::CheckpointDeclarationInvalid)
            .detail("partition", partition)
            .detail("name", name)
            .detail("reason", "version_not_current"));
    }
    install(conn, partition, name, version, now_ms)?;
    read_one(conn, partition, name)?.ok_or_else(|| Error::new(ErrorCode::CheckpointNotDeclared))
}

/// `claim_checkpoint`: the row locked, checked, its owner epoch raised and
/// its state `backfilling`; the row as updated.
pub(crate) fn claim(
    conn: &mut Conn,
    partition: &str,
    name: &str,
    version: i32,
    now_ms: i64,
) -> Result<StoredCheckpoint> {
    match read_for_update(conn, partition, name)? {
        Some(row) if row.state != CheckpointState::Activated && row.schema_version == version => {
            conn.exec(
                "UPDATE `sync_backfill_checkpoints` SET `owner_epoch` = `owner_epoch` + 1, \
                 `state` = 'backfilling', `updated_at_ms` = ? WHERE `partition` = ? AND `name` = ?",
                (now_ms, partition, name),
            )?;
            Ok(StoredCheckpoint {
                owner_epoch: row.owner_epoch + 1,
                state: CheckpointState::Backfilling,
                updated_at_ms: now_ms,
                ..row
            })
        }
        Some(row) if row.state != CheckpointState::Activated => {
            Err(version_mismatch(row.schema_version, version))
        }
        _ => Err(Error::new(ErrorCode::CheckpointNotDeclared)),
    }
}

fn check_watermark(conn: &mut Conn, partition: &str, stored: i64, watermark: i64) -> Result<()> {
    if watermark < stored {
        return Err(sync_core::validate::watermark_invalid("regression"));
    }
    if watermark > crate::commit_log::max_commit_seq(conn, partition)? {
        return Err(sync_core::validate::watermark_invalid("ahead_of_log"));
    }
    Ok(())
}

/// Compare-and-set progress; `false` when superseded, unclaimed or finished.
pub(crate) fn advance(
    conn: &mut Conn,
    partition: &str,
    name: &str,
    owner_epoch: i64,
    watermark: i64,
    observed_rows: i64,
    now_ms: i64,
) -> Result<bool> {
    let Some(row) = read_for_update(conn, partition, name)? else {
        return Ok(false);
    };
    if row.owner_epoch != owner_epoch || row.state != CheckpointState::Backfilling {
        return Ok(false);
    }
    check_watermark(conn, partition, row.watermark, watermark)?;
    let matched = conn.exec(
        "UPDATE `sync_backfill_checkpoints` SET `watermark` = ?, `observed_rows` = ?, \
         `updated_at_ms` = ? WHERE `partition` = ? AND `name` = ? AND `owner_epoch` = ? \
         AND `state` = 'backfilling'",
        (
            watermark,
            observed_rows,
            now_ms,
            partition,
            name,
            owner_epoch,
        ),
    )?;
    Ok(matched == 1)
}

/// The effective writer fence of a partition.
pub(crate) fn required_writer_version(conn: &mut Conn, partition: &str) -> Result<Option<i32>> {
    let fence: Option<(Option<i32>, Option<i32>)> = conn.first(
        "SELECT (SELECT `required_writer_version` FROM `sync_schema_meta` WHERE `id` = 1), \
         (SELECT `required_writer_version` FROM `sync_writer_fence` WHERE `partition` = ?)",
        (partition,),
    )?;
    let (database, partition) = fence.unwrap_or_default();
    Ok(sync_core::effective_fence(partition, database))
}

/// Activation (the caller holds the partition lock); writes only when the
/// outcome is `Activated`.
pub(crate) fn activate(
    conn: &mut Conn,
    partition: &str,
    name: &str,
    owner_epoch: i64,
    watermark: i64,
    sources: &[String],
    now_ms: i64,
) -> Result<sync_core::ActivationOutcome> {
    use sync_core::{ActivationOutcome, Coverage};
    let Some(row) = read_for_update(conn, partition, name)? else {
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
    let matched = conn.exec(
        "UPDATE `sync_backfill_checkpoints` SET `state` = 'activated', `watermark` = ?, \
         `updated_at_ms` = ? WHERE `partition` = ? AND `name` = ? AND `owner_epoch` = ? \
         AND `state` <> 'activated'",
        (watermark, now_ms, partition, name, owner_epoch),
    )?;
    Ok(if matched == 1 {
        ActivationOutcome::Activated
    } else {
        ActivationOutcome::Stale
    })
}

fn table_params(head: Vec<mysql::Value>, tables: &[String]) -> Vec<mysql::Value> {
    let mut params = head;
    params.extend(tables.iter().map(|t| mysql::Value::from(t.as_str())));
    params
}

fn marks(count: usize) -> String {
    vec!["?"; count].join(", ")
}

/// Highest retained source `commit_seq`; 0 when none or no tables.
pub(crate) fn coverage_seq(conn: &mut Conn, partition: &str, tables: &[String]) -> Result<i64> {
    if tables.is_empty() {
        return Ok(0);
    }
    let seq: Option<Option<i64>> = conn.first(
        &format!(
            "SELECT MAX(`commit_seq`) FROM `sync_changes` WHERE `partition` = ? AND `tbl` IN ({})",
            marks(tables.len())
        ),
        table_params(vec![partition.into()], tables),
    )?;
    Ok(seq.flatten().unwrap_or(0))
}

/// Horizon first, then the probe (`rfc0007-migration-barrier.md` §3.5).
pub(crate) fn changes_above(
    conn: &mut Conn,
    partition: &str,
    tables: &[String],
    seq: i64,
) -> Result<sync_core::Coverage> {
    use sync_core::Coverage;
    let horizon = crate::commit_log::horizon_seq(conn, partition)?;
    if tables.is_empty() {
        return Ok(Coverage::Clean);
    }
    let found: Option<i64> = conn.first(
        &format!(
            "SELECT 1 FROM `sync_changes` WHERE `partition` = ? AND `commit_seq` > ? \
             AND `tbl` IN ({}) LIMIT 1",
            marks(tables.len())
        ),
        table_params(vec![partition.into(), seq.into()], tables),
    )?;
    Ok(if found.is_some() {
        Coverage::Changed
    } else if horizon > seq {
        Coverage::Unverifiable
    } else {
        Coverage::Clean
    })
}

/// Retained source changes above `after_seq`, `(commit_seq, idx)` order.
pub(crate) fn source_changes(
    conn: &mut Conn,
    partition: &str,
    tables: &[String],
    after_seq: i64,
    limit: i64,
) -> Result<Vec<sync_core::SourceChange>> {
    if tables.is_empty() {
        return Ok(Vec::new());
    }
    type Raw = (i64, i64, String, String, String, i64);
    let rows: Vec<Raw> = conn.rows(
        &format!(
            "SELECT ch.`commit_seq`, ch.`idx`, c.`client_id`, ch.`tbl`, ch.`row_id`, ch.`op` \
             FROM `sync_changes` AS ch JOIN `sync_commits` AS c \
               ON c.`partition` = ch.`partition` AND c.`commit_seq` = ch.`commit_seq` \
             WHERE ch.`partition` = ? AND ch.`commit_seq` > ? AND ch.`tbl` IN ({}) \
             ORDER BY ch.`commit_seq`, ch.`idx` LIMIT ?",
            marks(tables.len())
        ),
        {
            let mut params = table_params(vec![partition.into(), after_seq.into()], tables);
            params.push(limit.into());
            params
        },
    )?;
    Ok(rows
        .into_iter()
        .map(
            |(commit_seq, idx, client_id, table, row_id, op)| sync_core::SourceChange {
                commit_seq,
                idx,
                client_id,
                table,
                row_id,
                op: sync_core::ChangeOp::from_stored(op),
            },
        )
        .collect())
}
