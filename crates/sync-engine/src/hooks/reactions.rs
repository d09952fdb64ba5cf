//! Reaction planning (`engine.md` §4.9).

use std::fmt;

use super::reader::CandidateReader;
use super::validators::CommitInput;

/// One reaction the planner wants enqueued with the commit.
#[derive(Debug, Clone, PartialEq)]
pub struct ReactionPlan {
    /// Key, unique within the commit, 1..=256 UTF-8 bytes.
    pub key: String,
    /// Type, `^[A-Za-z][A-Za-z0-9._:-]*$`, at most 128 bytes.
    pub kind: String,
    /// Payload version, 1..=2^31−1.
    pub version: i32,
    /// Plain JSON payload: depth ≤ 16, object keys sorted, ≤ 65 536 bytes.
    pub payload: serde_json::Value,
    /// Attempt budget, 1..=100 (default 10).
    pub max_attempts: Option<i32>,
}

/// A planner failure; the round fails without persisting anything.
#[derive(Debug)]
pub struct PlanError(pub Box<dyn std::error::Error + Send + Sync>);

impl fmt::Display for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "reaction planning failed: {}", self.0)
    }
}

impl std::error::Error for PlanError {}

/// Plans reactions for an applied commit.
pub trait ReactionPlanner: Send + Sync {
    /// The reactions to enqueue atomically with the commit.
    fn plan(
        &self,
        input: &CommitInput,
        read: &mut dyn CandidateReader,
    ) -> Result<Vec<ReactionPlan>, PlanError>;
}
