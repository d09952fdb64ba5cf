//! `prune --partition P --through SEQ`: epoch-fenced pruning, as the
//! contract's retention routine does it: read the partition's registry
//! epoch (none → `sync.storage.partition_unregistered`), then
//! `prune_commits_through` with that epoch (a rotation in between →
//! `sync.storage.prune_epoch_mismatch`). The horizon never moves back.

use serde_json::json;
use sync_core::{validate, CommitPruneQuery, Error, ErrorCode};

use crate::cli::PruneArgs;
use crate::error::CliResult;
use crate::output::Report;
use crate::url::Database;

/// Runs `prune`.
pub fn run(db: &Database, args: &PruneArgs) -> CliResult<Report> {
    let storage = db.storage();
    validate::partition(&args.partition)?;
    let log_epoch = storage
        .get_partition_log_epoch(&args.partition)?
        .ok_or_else(|| {
            Error::new(ErrorCode::PartitionUnregistered).detail("partition", &args.partition)
        })?;
    let result = storage.prune_commits_through(
        &args.partition,
        &CommitPruneQuery {
            log_epoch,
            through_seq: args.through,
        },
    )?;
    tracing::info!(partition = %args.partition, horizon = result.horizon_seq, removed = result.removed_commits, "pruned");
    let text = format!(
        "partition {}: horizon {} (was {}), {} commits deleted\n",
        args.partition, result.horizon_seq, result.previous_horizon_seq, result.removed_commits
    );
    Ok(Report::new(
        json!({"horizon_seq": result.horizon_seq, "deleted_commits": result.removed_commits}),
        text,
    ))
}
