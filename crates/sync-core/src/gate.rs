//! The serve gate: token, refusal rules and the `sync.schema_not_ready`
//! error (`storage-contract.md` §7.2, `rfc0007-migration-barrier.md` §7).

use crate::checkpoints::CheckpointDeclaration;
use crate::error::{Error, ErrorCode};

/// What a serve path reads before (and inside) its work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServeGate {
    /// Partition.
    pub partition: String,
    /// Stored schema version; 0 when there is no marker.
    pub stored_schema_version: i64,
    /// The partition's registry epoch; `None` when unregistered.
    pub log_epoch: Option<String>,
    /// Names of this partition's non-activated checkpoints at the running version, byte-ordered.
    pub pending: Vec<String>,
}

/// What the serving process brings to the gate.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServeContext {
    /// Checkpoints this process declared (it may serve while they are pending).
    pub declarations: Vec<CheckpointDeclaration>,
    /// The log epoch the caller expects, if any.
    pub expected_log_epoch: Option<String>,
}

/// Why the gate refuses to serve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServeGateRefusal {
    /// The database is at an older version than the code (or never migrated).
    SchemaBehind {
        /// Stored version.
        stored: i64,
        /// Running version.
        running: i32,
    },
    /// Another process migrated the database further; this code is stale.
    SchemaAhead {
        /// Stored version.
        stored: i64,
        /// Running version.
        running: i32,
    },
    /// The caller expects an epoch but the partition is unregistered.
    LogEpochUnknown {
        /// Partition.
        partition: String,
    },
    /// The partition's log epoch differs from the expected one.
    LogEpochRotated {
        /// Partition.
        partition: String,
    },
    /// A checkpoint at the running version is pending and undeclared here.
    CheckpointPending {
        /// Partition.
        partition: String,
        /// Checkpoint name.
        name: String,
    },
    /// The gate token changed between two reads.
    TokenChanged {
        /// Partition.
        partition: String,
    },
}

impl ServeGateRefusal {
    /// The `details.reason` string of this refusal.
    pub fn reason(&self) -> &'static str {
        match self {
            ServeGateRefusal::SchemaBehind { .. } => "schema_behind",
            ServeGateRefusal::SchemaAhead { .. } => "schema_ahead",
            ServeGateRefusal::LogEpochUnknown { .. } => "log_epoch_unknown",
            ServeGateRefusal::LogEpochRotated { .. } => "log_epoch_rotated",
            ServeGateRefusal::CheckpointPending { .. } => "checkpoint_pending",
            ServeGateRefusal::TokenChanged { .. } => "token_changed",
        }
    }
}

/// Evaluates the refusal rules in order and returns the first that applies.
pub fn serve_gate_refusal(
    gate: &ServeGate,
    running: i32,
    ctx: &ServeContext,
) -> Option<ServeGateRefusal> {
    let stored = gate.stored_schema_version;
    if running == 0 || stored < i64::from(running) {
        return Some(ServeGateRefusal::SchemaBehind { stored, running });
    }
    if stored > i64::from(running) {
        return Some(ServeGateRefusal::SchemaAhead { stored, running });
    }
    if let Some(expected) = &ctx.expected_log_epoch {
        match &gate.log_epoch {
            None => {
                return Some(ServeGateRefusal::LogEpochUnknown {
                    partition: gate.partition.clone(),
                })
            }
            Some(actual) if actual != expected => {
                return Some(ServeGateRefusal::LogEpochRotated {
                    partition: gate.partition.clone(),
                })
            }
            Some(_) => {}
        }
    }
    let mut pending: Vec<&String> = gate.pending.iter().collect();
    pending.sort();
    for name in pending {
        let declared = ctx.declarations.iter().any(|d| {
            d.partition == gate.partition && &d.name == name && d.schema_version == running
        });
        if !declared {
            return Some(ServeGateRefusal::CheckpointPending {
                partition: gate.partition.clone(),
                name: name.clone(),
            });
        }
    }
    None
}

/// `TokenChanged` when the stored version or the log epoch differ between two
/// gate reads; pending lists are not compared.
pub fn serve_gate_token_changed(before: &ServeGate, after: &ServeGate) -> Option<ServeGateRefusal> {
    (before.stored_schema_version != after.stored_schema_version
        || before.log_epoch != after.log_epoch)
        .then(|| ServeGateRefusal::TokenChanged {
            partition: after.partition.clone(),
        })
}

/// Builds `sync.schema_not_ready` with the refusal's details.
pub fn serve_not_ready_error(refusal: &ServeGateRefusal) -> Error {
    let error = Error::new(ErrorCode::SchemaNotReady).detail("reason", refusal.reason());
    match refusal {
        ServeGateRefusal::SchemaBehind { stored, running }
        | ServeGateRefusal::SchemaAhead { stored, running } => error
            .detail("storedSchemaVersion", stored)
            .detail("runningSchemaVersion", running),
        ServeGateRefusal::LogEpochUnknown { partition }
        | ServeGateRefusal::LogEpochRotated { partition }
        | ServeGateRefusal::TokenChanged { partition } => error.detail("partition", partition),
        ServeGateRefusal::CheckpointPending { partition, name } => error
            .detail("partition", partition)
            .detail("projection", name),
    }
}

/// Evaluates the gate and converts a refusal into the error.
pub fn check_serve_gate(gate: &ServeGate, running: i32, ctx: &ServeContext) -> crate::Result<()> {
    match serve_gate_refusal(gate, running, ctx) {
        Some(refusal) => Err(serve_not_ready_error(&refusal)),
        None => Ok(()),
    }
}
