//! Finish or refuse: a bump to a new schema version while a checkpoint of an
//! older version is not activated is refused
//! (`sync.storage.checkpoint_unfinished`) unless the caller states, per
//! checkpoint, how the bump resolves it (`docs/decisions.md`, "Finish or
//! refuse").
//!
//! The two ways out keep every stored `state` inside the reference's
//! `CHECK (state IN ('declared','backfilling','activated'))`:
//!
//! - [`Resolution::Carry`]: the bump moves the checkpoint to the new
//!   version: `declared`, watermark and observed rows reset, owner epoch + 1
//!   (any runner of the old version is superseded), partition fence raised to
//!   the new version. The projection is then backfilled with the new code,
//!   which can always finish it.
//! - [`Resolution::Abandon`]: the bump deletes the checkpoint row: its
//!   projection is certified at no version and no gate ever reads it again.
//!   Fences are never lowered.
//!
//! The rules are dialect-agnostic; each dialect lists the unfinished rows
//! and applies the plan inside its bump transaction.

use crate::checkpoints::StoredCheckpoint;
use crate::error::{Error, ErrorCode, Result};

/// How a bump resolves one unfinished checkpoint of an older version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Resolution {
    /// Move the checkpoint to the bump's version, progress reset.
    Carry,
    /// Delete the checkpoint: its projection is given up.
    Abandon,
}

impl Resolution {
    /// `carry` or `abandon`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Carry => "carry",
            Self::Abandon => "abandon",
        }
    }
}

/// "When this bump meets the unfinished checkpoint `(partition, name)`, resolve
/// it this way."
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct UnfinishedResolution {
    /// Partition of the checkpoint.
    pub partition: String,
    /// Checkpoint name.
    pub name: String,
    /// What the bump does with it.
    pub resolution: Resolution,
}

impl UnfinishedResolution {
    /// A resolution.
    pub fn new(
        partition: impl Into<String>,
        name: impl Into<String>,
        resolution: Resolution,
    ) -> Self {
        Self {
            partition: partition.into(),
            name: name.into(),
            resolution,
        }
    }
}

/// One step of a bump's resolution plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedCheckpoint {
    /// The checkpoint as stored before the bump.
    pub checkpoint: StoredCheckpoint,
    /// What the bump does with it.
    pub resolution: Resolution,
}

/// Matches the unfinished checkpoints of versions below the bump's target
/// with the caller's resolutions. Every unfinished checkpoint needs one, else
/// `sync.storage.checkpoint_unfinished` naming all the unresolved ones
/// (`details.checkpoints` = `partition:name@version` comma-separated,
/// `details.count`). Resolutions naming no unfinished checkpoint are ignored
/// (a checkpoint finished meanwhile needs none).
pub fn resolve_unfinished(
    unfinished: &[StoredCheckpoint],
    resolutions: &[UnfinishedResolution],
) -> Result<Vec<ResolvedCheckpoint>> {
    let mut plan = Vec::with_capacity(unfinished.len());
    let mut missing = Vec::new();
    for checkpoint in unfinished {
        let found = resolutions
            .iter()
            .find(|r| r.partition == checkpoint.partition && r.name == checkpoint.name);
        match found {
            Some(r) => plan.push(ResolvedCheckpoint {
                checkpoint: checkpoint.clone(),
                resolution: r.resolution,
            }),
            None => missing.push(checkpoint),
        }
    }
    if missing.is_empty() {
        return Ok(plan);
    }
    let names: Vec<String> = missing
        .iter()
        .map(|c| format!("{}:{}@{}", c.partition, c.name, c.schema_version))
        .collect();
    Err(Error::new(ErrorCode::CheckpointUnfinished)
        .detail("checkpoints", names.join(","))
        .detail("count", missing.len()))
}

/// The resolution plan of one bump under its options: with
/// [`crate::EnsureOptions::refuse_unfinished`] every unfinished checkpoint
/// needs a resolution ([`resolve_unfinished`]); without it (the storage
/// contract's default, which C-222, C-269, C-270 and C-297 hold) the bump
/// goes ahead and applies only the resolutions it was given, leaving the
/// other checkpoints as they are.
pub fn bump_resolutions(
    unfinished: &[StoredCheckpoint],
    opts: &crate::EnsureOptions,
) -> Result<Vec<ResolvedCheckpoint>> {
    if opts.refuse_unfinished {
        return resolve_unfinished(unfinished, &opts.unfinished);
    }
    let resolvable: Vec<StoredCheckpoint> = unfinished
        .iter()
        .filter(|c| {
            opts.unfinished
                .iter()
                .any(|r| r.partition == c.partition && r.name == c.name)
        })
        .cloned()
        .collect();
    resolve_unfinished(&resolvable, &opts.unfinished)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CheckpointState;

    fn pending(partition: &str, name: &str, version: i32) -> StoredCheckpoint {
        StoredCheckpoint {
            partition: partition.into(),
            name: name.into(),
            schema_version: version,
            state: CheckpointState::Backfilling,
            watermark: 3,
            owner_epoch: 1,
            observed_rows: 9,
            updated_at_ms: 0,
        }
    }

    #[test]
    fn nothing_unfinished_needs_nothing() {
        assert_eq!(resolve_unfinished(&[], &[]).unwrap(), vec![]);
    }

    #[test]
    fn every_unresolved_checkpoint_is_named() {
        let unfinished = [pending("acme", "x", 3), pending("globex", "y", 2)];
        let resolutions = [UnfinishedResolution::new("acme", "x", Resolution::Carry)];
        let error = resolve_unfinished(&unfinished, &resolutions).unwrap_err();
        assert_eq!(error.code(), ErrorCode::CheckpointUnfinished);
        assert_eq!(
            error.details().get("checkpoints").map(String::as_str),
            Some("globex:y@2")
        );
        assert_eq!(error.details().get("count").map(String::as_str), Some("1"));
    }

    #[test]
    fn resolved_checkpoints_form_the_plan() {
        let unfinished = [pending("acme", "x", 3), pending("globex", "y", 2)];
        let resolutions = [
            UnfinishedResolution::new("globex", "y", Resolution::Abandon),
            UnfinishedResolution::new("acme", "x", Resolution::Carry),
            UnfinishedResolution::new("initech", "z", Resolution::Carry),
        ];
        let plan = resolve_unfinished(&unfinished, &resolutions).unwrap();
        assert_eq!(plan.len(), 2);
        assert_eq!(plan[0].resolution, Resolution::Carry);
        assert_eq!(plan[1].resolution, Resolution::Abandon);
    }

    /// With finish-or-refuse a resolution resolves only the checkpoint with
    /// both its partition and its name: one sharing only the partition or
    /// only the name is still unresolved.
    #[test]
    fn a_resolution_matches_partition_and_name_together() {
        let unfinished = [pending("acme", "y", 3), pending("globex", "x", 3)];
        let resolutions = [UnfinishedResolution::new("acme", "x", Resolution::Carry)];
        let error = resolve_unfinished(&unfinished, &resolutions).unwrap_err();
        assert_eq!(
            error.details().get("checkpoints").map(String::as_str),
            Some("acme:y@3,globex:x@3")
        );
        assert_eq!(error.details().get("count").map(String::as_str), Some("2"));
    }

    /// Without finish-or-refuse a bump applies exactly the resolutions it
    /// was given: a checkpoint named by none of them is left as it is, even
    /// beside one that shares its partition or its name.
    #[test]
    fn without_refusal_only_the_named_checkpoints_are_resolved() {
        let unfinished = [
            pending("acme", "x", 3),
            pending("acme", "y", 3),
            pending("globex", "x", 3),
        ];
        let opts = crate::EnsureOptions {
            unfinished: vec![UnfinishedResolution::new("acme", "x", Resolution::Carry)],
            refuse_unfinished: false,
            ..crate::EnsureOptions::default()
        };
        let plan = bump_resolutions(&unfinished, &opts).unwrap();
        assert_eq!(
            plan,
            vec![ResolvedCheckpoint {
                checkpoint: pending("acme", "x", 3),
                resolution: Resolution::Carry,
            }]
        );
    }
}
