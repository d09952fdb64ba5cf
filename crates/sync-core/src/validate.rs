//! Argument validation (`storage-contract.md` §1 rule 4, §4): pure,
//! side-effect free, run before any database access — by the validating
//! front ([`crate::front`]) for every storage method, and by the segment
//! stores and operator tools for theirs. The refusals that need the
//! database's state (a prune beyond the head, a watermark regression) are
//! built here and raised by each dialect under its lock.

use crate::error::{Error, ErrorCode, Result};
use crate::limits::{MAX_CHECKPOINT_NAME_BYTES, MAX_LOOKUP_LIMIT, MAX_SAFE_INTEGER};

/// Partition must be non-empty (`sync.storage.invalid_partition`).
pub fn partition(partition: &str) -> Result<()> {
    if partition.is_empty() {
        return Err(Error::new(ErrorCode::InvalidPartition));
    }
    Ok(())
}

/// Row id must be non-empty (`sync.storage.invalid_row_id`).
pub fn row_id(row_id: &str) -> Result<()> {
    if row_id.is_empty() {
        return Err(Error::new(ErrorCode::InvalidRowId));
    }
    Ok(())
}

/// Log epoch must be non-empty (`sync.storage.invalid_log_epoch`).
pub fn log_epoch(epoch: &str) -> Result<()> {
    if epoch.is_empty() {
        return Err(Error::new(ErrorCode::InvalidLogEpoch));
    }
    Ok(())
}

/// Limit in 1..=1000 (`sync.storage.invalid_limit`).
pub fn lookup_limit(limit: i64) -> Result<()> {
    if !(1..=MAX_LOOKUP_LIMIT).contains(&limit) {
        return Err(Error::new(ErrorCode::InvalidLimit));
    }
    Ok(())
}

/// Checkpoint name: 1..=128 UTF-8 bytes without NUL (`invalid_argument`, `argument = name`).
pub fn checkpoint_name(name: &str) -> Result<()> {
    if name.is_empty() {
        return Err(Error::invalid_argument("name", "empty"));
    }
    if name.len() > MAX_CHECKPOINT_NAME_BYTES {
        return Err(Error::invalid_argument("name", "too_long"));
    }
    if name.contains('\0') {
        return Err(Error::invalid_argument("name", "nul"));
    }
    Ok(())
}

/// Whether a checkpoint name is valid (without building an error).
pub fn is_valid_checkpoint_name(name: &str) -> bool {
    checkpoint_name(name).is_ok()
}

/// Schema version ≥ 1 (`invalid_argument`, `argument = schema_version`).
pub fn schema_version(version: i32) -> Result<()> {
    if version < 1 {
        return Err(Error::invalid_argument("schema_version", "below_one"));
    }
    Ok(())
}

/// A sequence argument ≥ 0 (`invalid_argument`).
pub fn non_negative(argument: &str, value: i64) -> Result<()> {
    if value < 0 {
        return Err(Error::invalid_argument(argument, "negative"));
    }
    Ok(())
}

/// A watermark ≥ 0 (`checkpoint_watermark_invalid`, `reason = negative`).
pub fn watermark(value: i64) -> Result<()> {
    if value < 0 {
        return Err(watermark_invalid("negative"));
    }
    Ok(())
}

/// `sync.storage.checkpoint_watermark_invalid` with a reason.
pub fn watermark_invalid(reason: &str) -> Error {
    Error::new(ErrorCode::CheckpointWatermarkInvalid).detail("reason", reason)
}

/// A value in `0..=2^53−1` (`invalid_argument`).
pub fn safe_non_negative(argument: &str, value: i64) -> Result<()> {
    if !(0..=MAX_SAFE_INTEGER).contains(&value) {
        return Err(Error::invalid_argument(argument, "out_of_range"));
    }
    Ok(())
}

/// Deduplicates a table list, keeping first occurrences in order.
pub fn dedup_tables(tables: &[String]) -> Vec<String> {
    let mut seen = std::collections::BTreeSet::new();
    tables
        .iter()
        .filter(|t| seen.insert(t.as_str()))
        .cloned()
        .collect()
}

/// The validation of a `prune_commits_through` request (`invalid_prune_cursor`).
pub fn prune_query(query: &crate::CommitPruneQuery) -> Result<()> {
    if query.log_epoch.is_empty() || !(0..=MAX_SAFE_INTEGER).contains(&query.through_seq) {
        return Err(Error::new(ErrorCode::InvalidPruneCursor));
    }
    Ok(())
}
/// `sync.storage.invalid_prune_cursor` with `reason = beyond_head`: checked
/// by each dialect under the partition lock, where `max_commit_seq` is
/// stable (`storage-contract.md` §4.4 step 1, amended).
pub fn prune_beyond_head() -> Error {
    Error::new(ErrorCode::InvalidPruneCursor).detail("reason", "beyond_head")
}

/// Validates a declaration against the version it is installed at
/// (`checkpoint_declaration_invalid`, `reason` ∈ `version_mismatch`,
/// `invalid_partition`, `invalid_name`).
pub fn declaration(decl: &crate::CheckpointDeclaration, version: i32) -> Result<()> {
    let reason = if decl.schema_version != version {
        "version_mismatch"
    } else if decl.partition.is_empty() {
        "invalid_partition"
    } else if !is_valid_checkpoint_name(&decl.name) {
        "invalid_name"
    } else {
        return Ok(());
    };
    Err(Error::new(ErrorCode::CheckpointDeclarationInvalid)
        .detail("partition", &decl.partition)
        .detail("name", &decl.name)
        .detail("reason", reason))
}
