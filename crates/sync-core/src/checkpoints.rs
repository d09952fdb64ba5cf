//! RFC 0007 checkpoint types (`storage-contract.md` §2.8).

/// State of a checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CheckpointState {
    /// Declared, never claimed.
    Declared,
    /// Claimed by a backfill owner.
    Backfilling,
    /// Terminal.
    Activated,
}

impl CheckpointState {
    /// Stored text form.
    pub fn as_str(self) -> &'static str {
        match self {
            CheckpointState::Declared => "declared",
            CheckpointState::Backfilling => "backfilling",
            CheckpointState::Activated => "activated",
        }
    }

    /// Parses the stored text form.
    pub fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "declared" => CheckpointState::Declared,
            "backfilling" => CheckpointState::Backfilling,
            "activated" => CheckpointState::Activated,
            _ => return None,
        })
    }
}

/// "This process is the backfiller of `(partition, name)` at `schema_version`
/// and may serve that partition while the checkpoint is incomplete."
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CheckpointDeclaration {
    /// Partition.
    pub partition: String,
    /// Checkpoint name.
    pub name: String,
    /// Schema version.
    pub schema_version: i32,
}

impl CheckpointDeclaration {
    /// A declaration.
    pub fn new(partition: impl Into<String>, name: impl Into<String>, schema_version: i32) -> Self {
        Self {
            partition: partition.into(),
            name: name.into(),
            schema_version,
        }
    }
}

/// A stored checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredCheckpoint {
    /// Partition.
    pub partition: String,
    /// Name.
    pub name: String,
    /// Schema version.
    pub schema_version: i32,
    /// State.
    pub state: CheckpointState,
    /// Certified watermark.
    pub watermark: i64,
    /// Fencing token of the current owner.
    pub owner_epoch: i64,
    /// Source rows observed so far.
    pub observed_rows: i64,
    /// Last update time.
    pub updated_at_ms: i64,
}

/// `(partition, name)`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CheckpointKey {
    /// Partition.
    pub partition: String,
    /// Name.
    pub name: String,
}

/// Result of an activation attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActivationOutcome {
    /// Activated now.
    Activated,
    /// Already activated, superseded, or a source changed above the watermark.
    Stale,
    /// History above the watermark was pruned; coverage cannot be proven.
    Unverifiable,
}

/// Result of a source-coverage probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coverage {
    /// No source change above the sequence.
    Clean,
    /// A source change exists above the sequence.
    Changed,
    /// The horizon is above the sequence; nothing can be proven.
    Unverifiable,
}
