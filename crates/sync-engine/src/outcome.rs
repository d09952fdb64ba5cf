//! What a round returns to the application besides the response items.

use sync_core::NewChange;

use crate::wire::wire_error::WireError;

/// An applied commit, for realtime fanout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppliedCommit {
    /// The commit's sequence number.
    pub commit_seq: i64,
    /// Its creation time.
    pub created_at_ms: i64,
    /// The pushing actor.
    pub actor_id: String,
    /// Its changes (possibly none).
    pub changes: Vec<NewChange>,
}

/// The outcome of one [`Engine::handle`](crate::Engine::handle) call that
/// produced a response stream.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct RoundOutcome {
    /// Commits applied by this round, in order.
    pub applied: Vec<AppliedCommit>,
    /// The request-level error emitted as an `Error` item after the header,
    /// if the round ended that way.
    pub error: Option<WireError>,
}
