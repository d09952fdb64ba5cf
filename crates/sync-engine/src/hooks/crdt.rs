//! CRDT mergers by `crdt_type` (`engine.md` §4.6).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// A merge failure; the operation terminates with `sync.crdt_merge_failed`.
#[derive(Debug)]
pub struct MergeError(pub Box<dyn std::error::Error + Send + Sync>);

impl fmt::Display for MergeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "crdt merge failed: {}", self.0)
    }
}

impl std::error::Error for MergeError {}

/// Merges CRDT column states. Must be commutative, associative and idempotent.
pub trait CrdtMerger: Send + Sync {
    /// Merges the incoming state into the stored one (`None` on insert).
    fn merge(&self, stored: Option<&[u8]>, incoming: &[u8]) -> Result<Vec<u8>, MergeError>;
}

/// Mergers keyed by the columns' `crdt_type`.
#[derive(Clone, Default)]
pub struct MergerRegistry {
    mergers: BTreeMap<String, Arc<dyn CrdtMerger>>,
}

impl MergerRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers (or replaces) the merger of `crdt_type`.
    pub fn register(&mut self, crdt_type: impl Into<String>, merger: Arc<dyn CrdtMerger>) {
        self.mergers.insert(crdt_type.into(), merger);
    }

    /// The merger of `crdt_type`.
    pub fn get(&self, crdt_type: &str) -> Option<&Arc<dyn CrdtMerger>> {
        self.mergers.get(crdt_type)
    }
}

impl fmt::Debug for MergerRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.mergers.keys()).finish()
    }
}
