//! Retention policy and the pruning routine built on the storage trait
//! (`storage-contract.md` §7.4).

use crate::error::{Error, ErrorCode, Result};
use crate::queries::{CommitPruneQuery, CommitPruneResult};
use crate::storage::ServerStorage;

/// How much commit history a partition keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetentionPolicy {
    /// Clients updated within this window hold the horizon at their cursor.
    pub active_window_ms: i64,
    /// Commits older than this are pruned even past active cursors.
    pub age_force_ms: i64,
    /// Always keep at least this many newest commits.
    pub min_retained_commits: i64,
}

impl Default for RetentionPolicy {
    fn default() -> Self {
        const DAY_MS: i64 = 24 * 60 * 60 * 1000;
        Self {
            active_window_ms: 14 * DAY_MS,
            age_force_ms: 30 * DAY_MS,
            min_retained_commits: 1000,
        }
    }
}

/// Computes the prune target of a partition from its active cursors, the
/// forced age and the retained minimum, then prunes epoch-fenced.
pub fn prune_commit_log(
    storage: &dyn ServerStorage,
    partition: &str,
    now_ms: i64,
    policy: &RetentionPolicy,
) -> Result<CommitPruneResult> {
    crate::validate::partition(partition)?;
    let log_epoch = storage
        .get_partition_log_epoch(partition)?
        .ok_or_else(|| Error::new(ErrorCode::PartitionUnregistered))?;
    let max = storage.get_max_commit_seq(partition)?;
    let floor = storage
        .get_active_client_cursor_floor(partition, now_ms.saturating_sub(policy.active_window_ms))?
        .unwrap_or(i64::MAX);
    let forced =
        storage.get_commit_seq_before(partition, now_ms.saturating_sub(policy.age_force_ms))?;
    let retain_floor = max.saturating_sub(policy.min_retained_commits);
    let target = floor.max(forced).min(retain_floor);
    let through_seq = target.max(0);
    storage.prune_commits_through(
        partition,
        &CommitPruneQuery {
            log_epoch,
            through_seq,
        },
    )
}
