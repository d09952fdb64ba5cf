//! The authenticated request context.

/// Who is syncing: set by the host's authentication.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestContext {
    /// The partition (tenant) of the request.
    pub partition: String,
    /// The authenticated actor.
    pub actor_id: String,
}

impl RequestContext {
    /// A context for `actor_id` in `partition`.
    pub fn new(partition: impl Into<String>, actor_id: impl Into<String>) -> Self {
        Self {
            partition: partition.into(),
            actor_id: actor_id.into(),
        }
    }
}
