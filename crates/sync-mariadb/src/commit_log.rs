//! The per-partition commit log: allocation under the partition row lock,
//! appends (the fence trigger fires on the commit insert), counters and
//! the horizon (`docs/design/mariadb.md` §9.3).

use std::collections::BTreeSet;

use mysql::Value;
use sync_core::{Error, NewCommit, Result};

use crate::pool::Conn;
use crate::values::scopes_json;

/// Changes per multi-row insert (9 parameters each).
const CHANGE_BATCH: usize = 4096;
/// Change-scope or tombstone rows per multi-row insert.
const ENTRY_BATCH: usize = 4096;

const ALLOCATE_SEQ: &str = "INSERT INTO `sync_partitions` (`partition`, `max_commit_seq`) \
VALUES (?, 1) ON DUPLICATE KEY UPDATE `max_commit_seq` = `max_commit_seq` + 1 \
RETURNING `max_commit_seq`";

const INSERT_COMMIT: &str = "INSERT INTO `sync_commits` (`partition`, `commit_seq`, \
`client_id`, `client_commit_id`, `actor_id`, `created_at_ms`, `writer_version`) \
VALUES (?, ?, ?, ?, ?, ?, ?)";

/// Appends a validated commit; returns its `commit_seq`.
pub(crate) fn append(
    conn: &mut Conn,
    partition: &str,
    writer_version: i32,
    commit: &NewCommit,
) -> Result<i64> {
    let seq: i64 = conn.first(ALLOCATE_SEQ, (partition,))?.ok_or_else(|| {
        Error::backend(crate::session::SessionRefused(
            "allocation returned no row".into(),
        ))
    })?;
    conn.exec(
        INSERT_COMMIT,
        (
            partition,
            seq,
            &commit.client_id,
            &commit.client_commit_id,
            &commit.actor_id,
            commit.created_at_ms,
            writer_version,
        ),
    )?;
    let changes: Vec<(usize, &sync_core::NewChange)> = commit.changes.iter().enumerate().collect();
    for chunk in changes.chunks(CHANGE_BATCH) {
        let marks = vec!["(?, ?, ?, ?, ?, ?, ?, ?, ?)"; chunk.len()].join(", ");
        let mut params: Vec<Value> = Vec::with_capacity(chunk.len() * 9);
        for (idx, change) in chunk {
            params.extend([
                Value::from(partition),
                Value::Int(seq),
                Value::Int(*idx as i64),
                Value::from(change.table.as_str()),
                Value::from(change.row_id.as_str()),
                Value::Int(i64::from(change.op.as_i16())),
                change.row_version.map_or(Value::NULL, Value::Int),
                Value::from(scopes_json(&change.scopes)),
                change
                    .payload
                    .as_ref()
                    .map_or(Value::NULL, |p| Value::Bytes(p.clone())),
            ]);
        }
        conn.exec(
            &format!(
                "INSERT INTO `sync_changes` (`partition`, `commit_seq`, `idx`, `tbl`, `row_id`, \
                 `op`, `row_version`, `scopes`, `payload`) VALUES {marks}"
            ),
            params,
        )?;
    }
    let scope_keys: BTreeSet<(&str, &str, &str)> = commit
        .changes
        .iter()
        .flat_map(|c| {
            c.scopes
                .iter()
                .map(move |(k, v)| (c.table.as_str(), k.as_str(), v.as_str()))
        })
        .collect();
    let scope_keys: Vec<_> = scope_keys.into_iter().collect();
    for chunk in scope_keys.chunks(ENTRY_BATCH) {
        let marks = vec!["(?, ?, ?, ?, ?)"; chunk.len()].join(", ");
        let mut params: Vec<Value> = Vec::with_capacity(chunk.len() * 5);
        for (table, variable, value) in chunk {
            params.extend([
                Value::from(partition),
                Value::from(*table),
                Value::from(*variable),
                Value::from(*value),
                Value::Int(seq),
            ]);
        }
        conn.exec(
            &format!(
                "INSERT INTO `sync_change_scopes` (`partition`, `tbl`, `var`, `value`, `commit_seq`) \
                 VALUES {marks} ON DUPLICATE KEY UPDATE `commit_seq` = `commit_seq`"
            ),
            params,
        )?;
    }
    let tombstones: BTreeSet<(&str, &str)> = commit
        .changes
        .iter()
        .zip(commit.tombstones())
        .filter(|(_, leaves)| *leaves)
        .map(|(c, _)| (c.table.as_str(), c.row_id.as_str()))
        .collect();
    let tombstones: Vec<_> = tombstones.into_iter().collect();
    for chunk in tombstones.chunks(ENTRY_BATCH) {
        let marks = vec!["(?, ?, ?, ?)"; chunk.len()].join(", ");
        let mut params: Vec<Value> = Vec::with_capacity(chunk.len() * 4);
        for (table, row_id) in chunk {
            params.extend([
                Value::from(partition),
                Value::from(*table),
                Value::from(*row_id),
                Value::Int(seq),
            ]);
        }
        conn.exec(
            &format!(
                "INSERT INTO `sync_tombstones` (`partition`, `tbl`, `row_id`, `commit_seq`) \
                 VALUES {marks} ON DUPLICATE KEY UPDATE `commit_seq` = VALUE(`commit_seq`)"
            ),
            params,
        )?;
    }
    Ok(seq)
}

/// The allocated counter (0 for an unknown partition).
pub(crate) fn max_commit_seq(conn: &mut Conn, partition: &str) -> Result<i64> {
    Ok(conn
        .first(
            "SELECT `max_commit_seq` FROM `sync_partitions` WHERE `partition` = ?",
            (partition,),
        )?
        .unwrap_or(0))
}

/// The horizon (0 by default).
pub(crate) fn horizon_seq(conn: &mut Conn, partition: &str) -> Result<i64> {
    Ok(conn
        .first(
            "SELECT `horizon_seq` FROM `sync_partitions` WHERE `partition` = ?",
            (partition,),
        )?
        .unwrap_or(0))
}

/// Newest retained `commit_seq` created strictly before the bound; 0 if none.
pub(crate) fn commit_seq_before(conn: &mut Conn, partition: &str, before_ms: i64) -> Result<i64> {
    let seq: Option<Option<i64>> = conn.first(
        "SELECT MAX(`commit_seq`) FROM `sync_commits` WHERE `partition` = ? AND `created_at_ms` < ?",
        (partition, before_ms),
    )?;
    Ok(seq.flatten().unwrap_or(0))
}

/// Epoch-fenced pruning (the caller holds the partition lock): the epoch
/// must match, `through_seq` may not pass the head, the horizon only rises,
/// and commits, changes, change-scope entries and tombstones at or below it
/// are deleted.
pub(crate) fn prune_through(
    conn: &mut Conn,
    partition: &str,
    query: &sync_core::CommitPruneQuery,
) -> Result<sync_core::CommitPruneResult> {
    if crate::records::log_epoch(conn, partition)?.as_deref() != Some(query.log_epoch.as_str()) {
        return Err(Error::new(sync_core::ErrorCode::PruneEpochMismatch));
    }
    if query.through_seq > max_commit_seq(conn, partition)? {
        return Err(sync_core::validate::prune_beyond_head());
    }
    let previous = horizon_seq(conn, partition)?;
    let horizon = previous.max(query.through_seq);
    conn.exec(
        "UPDATE `sync_partitions` SET `horizon_seq` = ? WHERE `partition` = ?",
        (horizon, partition),
    )?;
    let removed = conn.exec(
        "DELETE FROM `sync_commits` WHERE `partition` = ? AND `commit_seq` <= ?",
        (partition, horizon),
    )?;
    for sql in [
        "DELETE FROM `sync_changes` WHERE `partition` = ? AND `commit_seq` <= ?",
        "DELETE FROM `sync_change_scopes` WHERE `partition` = ? AND `commit_seq` <= ?",
        "DELETE FROM `sync_tombstones` WHERE `partition` = ? AND `commit_seq` <= ?",
    ] {
        conn.exec(sql, (partition, horizon))?;
    }
    Ok(sync_core::CommitPruneResult {
        previous_horizon_seq: previous,
        horizon_seq: horizon,
        removed_commits: i64::try_from(removed).unwrap_or(i64::MAX),
    })
}
