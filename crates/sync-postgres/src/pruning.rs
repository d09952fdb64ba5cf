//! Epoch-fenced commit-log pruning (`storage-contract.md` §4.4).

use sync_core::{validate, CommitPruneQuery, CommitPruneResult, Error, ErrorCode, Result};

use crate::instance::{Finish, PostgresStorage};
use crate::partition_lock;
use crate::pool::col;
use crate::registry;

const SET_HORIZON_SQL: &str = "UPDATE sync_partitions SET horizon_seq = $2 WHERE partition = $1";
const DELETE_SQL: &str = "WITH changes AS (DELETE FROM sync_changes \
      WHERE partition = $1 AND commit_seq <= $2), \
    scopes AS (DELETE FROM sync_change_scopes WHERE partition = $1 AND commit_seq <= $2), \
    tombstones AS (DELETE FROM sync_tombstones WHERE partition = $1 AND commit_seq <= $2), \
    commits AS (DELETE FROM sync_commits WHERE partition = $1 AND commit_seq <= $2 RETURNING 1) \
    SELECT count(*) FROM commits";

/// Locks the partition first, checks the epoch and that `through_seq` is not
/// above the head (`invalid_prune_cursor`, `reason = beyond_head`), raises the horizon and
/// deletes everything at or below it, atomically.
pub(crate) fn prune_through(
    storage: &PostgresStorage,
    partition: &str,
    q: &CommitPruneQuery,
) -> Result<CommitPruneResult> {
    storage.with_write(|conn| {
        let (head, previous) =
            partition_lock::lock(conn, partition, storage.config().push_lock_timeout_ms)?;
        if registry::log_epoch(conn, partition)?.as_deref() != Some(q.log_epoch.as_str()) {
            return Err(Error::new(ErrorCode::PruneEpochMismatch));
        }
        if q.through_seq > head {
            return Err(validate::prune_beyond_head());
        }
        let horizon = previous.max(q.through_seq);
        if horizon != previous {
            conn.execute(SET_HORIZON_SQL, &[&partition, &horizon])?;
        }
        let row = conn.query_one(DELETE_SQL, &[&partition, &horizon])?;
        let removed: i64 = col(&row, 0)?;
        Ok(Finish::Commit(CommitPruneResult {
            previous_horizon_seq: previous,
            horizon_seq: horizon,
            removed_commits: removed,
        }))
    })
}
