//! Atomic, epoch-fenced commit-log pruning (`storage-contract.md` §4.4).

use rusqlite::Connection;
use sync_core::{validate, CommitPruneQuery, CommitPruneResult, Error, ErrorCode, Result};

use crate::commit_log::{horizon_seq, max_commit_seq, raise_horizon};
use crate::errors::DbResultExt;
use crate::registry;
use crate::seam;

/// Runs inside the writer transaction: epoch check, the head check
/// (`through_seq` above `max_commit_seq` → `invalid_prune_cursor`,
/// `reason = beyond_head`), monotonic horizon,
/// deletion of commits, changes, change-scope entries and tombstones at or
/// below the effective horizon.
pub(crate) fn prune_through(
    conn: &Connection,
    partition: &str,
    query: &CommitPruneQuery,
) -> Result<CommitPruneResult> {
    if registry::log_epoch(conn, partition)?.as_deref() != Some(query.log_epoch.as_str()) {
        return Err(Error::new(ErrorCode::PruneEpochMismatch));
    }
    if query.through_seq > max_commit_seq(conn, partition)? {
        return Err(validate::prune_beyond_head());
    }
    let previous = horizon_seq(conn, partition)?;
    let horizon = previous.max(query.through_seq);
    raise_horizon(conn, partition, horizon)?;
    let removed = delete_through(conn, partition, horizon)?;
    Ok(CommitPruneResult {
        previous_horizon_seq: previous,
        horizon_seq: horizon,
        removed_commits: removed,
    })
}

fn delete_through(conn: &Connection, partition: &str, horizon: i64) -> Result<i64> {
    let removed = seam::cached(
        conn,
        "DELETE FROM sync_commits WHERE partition = ?1 AND commit_seq <= ?2",
    )
    .db()?
    .execute((partition, horizon))
    .db()?;
    for sql in [
        "DELETE FROM sync_changes WHERE partition = ?1 AND commit_seq <= ?2",
        "DELETE FROM sync_change_scopes WHERE partition = ?1 AND commit_seq <= ?2",
        "DELETE FROM sync_tombstones WHERE partition = ?1 AND commit_seq <= ?2",
    ] {
        seam::cached(conn, sql)
            .db()?
            .execute((partition, horizon))
            .db()?;
    }
    Ok(i64::try_from(removed).unwrap_or(i64::MAX))
}
