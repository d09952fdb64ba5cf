//! What `migrate` checks after the run, by reading the stored checkpoints
//! again: every requested declaration exists at the target version, and
//! every `--carry` / `--abandon` is what the database now holds.
//!
//! Another `migrate` may bump the database between this run's preview and
//! its `ensure_schema`; the library then takes the same-version path and
//! this run's resolutions are never applied. Reporting the preview would
//! lie, so the stored checkpoint is the only truth the command reports.

use sync_core::{
    CheckpointState, Error, ErrorCode, Resolution, ServerStorage, StoredCheckpoint,
    UnfinishedResolution,
};

use crate::error::{CliCode, CliError, CliResult};
use sync_core::CheckpointDeclaration;

/// Every requested declaration exists at the target version, else
/// `sync.cli.declaration_missing`.
pub(super) fn verify_declared(
    storage: &dyn ServerStorage,
    declarations: &[CheckpointDeclaration],
) -> CliResult<()> {
    for d in declarations {
        match storage.read_checkpoint(&d.partition, &d.name)? {
            Some(c) if c.schema_version == d.schema_version => {}
            Some(c) => {
                return Err(Error::new(ErrorCode::CheckpointVersionMismatch)
                    .detail("stored", c.schema_version)
                    .detail("requested", d.schema_version)
                    .into())
            }
            None => {
                return Err(CliError::new(CliCode::DeclarationMissing)
                    .detail("partition", &d.partition)
                    .detail("name", &d.name))
            }
        }
    }
    Ok(())
}

/// The checkpoint of each resolution before the run (`None` = absent), in
/// the order of `resolutions`.
pub(super) fn before_resolutions(
    storage: &dyn ServerStorage,
    resolutions: &[UnfinishedResolution],
) -> CliResult<Vec<Option<StoredCheckpoint>>> {
    resolutions
        .iter()
        .map(|r| Ok(storage.read_checkpoint(&r.partition, &r.name)?))
        .collect()
}

/// Every resolution holds in the database after the run, else
/// `sync.cli.resolution_not_applied`:
///
/// - `--carry`: the checkpoint exists at `version` (carried; any state);
/// - `--abandon`: the checkpoint is absent;
/// - either: an activated checkpoint of an older version needed no
///   resolution and passes.
///
/// `before` is [`before_resolutions`]; `applied` is whether this run
/// migrated the database.
pub(super) fn verify_resolved(
    storage: &dyn ServerStorage,
    resolutions: &[UnfinishedResolution],
    before: &[Option<StoredCheckpoint>],
    version: i32,
    applied: bool,
) -> CliResult<()> {
    for (r, before) in resolutions.iter().zip(before) {
        let now = storage.read_checkpoint(&r.partition, &r.name)?;
        let holds = match (&now, r.resolution) {
            (Some(c), _) if finished_before(c, version) => true,
            (Some(c), Resolution::Carry) => c.schema_version == version,
            (None, Resolution::Carry) => false,
            (Some(_), Resolution::Abandon) => false,
            (None, Resolution::Abandon) => true,
        };
        if !holds {
            return Err(not_applied(
                r,
                before.as_ref(),
                now.as_ref(),
                version,
                applied,
            ));
        }
    }
    Ok(())
}

/// Activated at a version below the target: nothing to resolve.
fn finished_before(checkpoint: &StoredCheckpoint, version: i32) -> bool {
    checkpoint.state == CheckpointState::Activated && checkpoint.schema_version < version
}

/// The refusal: what was asked, what is stored, which resolution that is
/// (`carry`, `abandon`, or `unknown` when the checkpoint did not exist
/// unfinished at an older version before this run), by whom, and when.
fn not_applied(
    requested: &UnfinishedResolution,
    before: Option<&StoredCheckpoint>,
    now: Option<&StoredCheckpoint>,
    version: i32,
    applied: bool,
) -> CliError {
    let unfinished_before =
        before.is_some_and(|c| c.schema_version < version && c.state != CheckpointState::Activated);
    let resolution = match now {
        None if unfinished_before => "abandon",
        Some(c) if unfinished_before && c.schema_version == version => "carry",
        _ => "unknown",
    };
    let stored = now.map_or_else(
        || "absent".to_owned(),
        |c| format!("{} at version {}", c.state.as_str(), c.schema_version),
    );
    let mut error = CliError::new(CliCode::ResolutionNotApplied)
        .detail("partition", &requested.partition)
        .detail("name", &requested.name)
        .detail("requested", requested.resolution.as_str())
        .detail("applied", resolution)
        .detail("stored", stored);
    if resolution != "unknown" {
        let by = if applied {
            "this run"
        } else {
            "another process"
        };
        error = error.detail("applied_by", by);
    }
    if let Some(c) = now.filter(|_| resolution == "carry") {
        error = error.detail("updated_at_ms", c.updated_at_ms);
    }
    error
}
