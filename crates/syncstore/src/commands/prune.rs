//! `prune --partition P --through SEQ`: epoch-fenced pruning, as the
//! contract's retention routine does it: read the partition's registry
//! epoch (none → `sync.storage.partition_unregistered`), refuse a `SEQ`
//! above the head of the log (`sync.storage.invalid_prune_cursor`,
//! `reason = beyond_head`: a horizon past the head could never be undone),
//! then `prune_commits_through` with that epoch (a rotation in between →
//! `sync.storage.prune_epoch_mismatch`). The horizon never moves back.
//!
//! Long prunes run in steps of [`STEP`] commits, each its own epoch-fenced
//! transaction, so progress is real and no transaction holds the partition
//! lock for the whole history.

use serde_json::json;
use sync_core::{validate, CommitPruneQuery, Error, ErrorCode};

use crate::cli::PruneArgs;
use crate::error::CliResult;
use crate::escape::field;
use crate::output::Report;
use crate::progress::Meter;
use crate::url::Database;

/// Commits pruned per transaction.
pub const STEP: i64 = 10_000;

/// Runs `prune`.
pub fn run(db: &Database, args: &PruneArgs) -> CliResult<Report> {
    let storage = db.storage();
    validate::partition(&args.partition)?;
    let log_epoch = storage
        .get_partition_log_epoch(&args.partition)?
        .ok_or_else(|| {
            Error::new(ErrorCode::PartitionUnregistered).detail("partition", &args.partition)
        })?;
    let head = storage.get_max_commit_seq(&args.partition)?;
    if args.through > head {
        return Err(validate::prune_beyond_head()
            .detail("through", args.through)
            .detail("max_commit_seq", head)
            .into());
    }
    let start = storage.get_horizon_seq(&args.partition)?;
    let query = |through_seq| CommitPruneQuery {
        log_epoch: log_epoch.clone(),
        through_seq,
    };
    let meter = Meter::new(
        &format!("prune {}", field(&args.partition)),
        "commits",
        Some(u64::try_from(args.through.saturating_sub(start)).unwrap_or(0)),
    );
    let mut deleted = 0;
    let mut step_through = start;
    let result = loop {
        step_through = (step_through.saturating_add(STEP)).min(args.through);
        let result = storage.prune_commits_through(&args.partition, &query(step_through));
        let result = match result {
            Ok(result) => result,
            Err(error) => {
                meter.finish();
                return Err(error.into());
            }
        };
        deleted += result.removed_commits;
        meter.update(
            u64::try_from(step_through.saturating_sub(start)).unwrap_or(0),
            None,
            &format!("{deleted} deleted"),
        );
        if step_through >= args.through {
            break result;
        }
    };
    meter.finish();
    tracing::info!(partition = %field(&args.partition), horizon = result.horizon_seq, removed = deleted, "pruned");
    let text = format!(
        "partition {}: horizon {} (was {start}), {deleted} commits deleted\n",
        field(&args.partition),
        result.horizon_seq,
    );
    Ok(Report::new(
        json!({"horizon_seq": result.horizon_seq, "deleted_commits": deleted}),
        text,
    ))
}
