//! The required scope resolver hook (`engine.md` §1.4, §3.2).

use std::collections::BTreeMap;
use std::fmt;

use crate::WireError;

/// Allowed scope values per variable; the value `"*"` allows any value.
pub type ScopeMap = BTreeMap<String, Vec<String>>;

/// Why a resolver produced no scope map.
#[derive(Debug)]
pub enum ResolveError {
    /// The resolver failed: every subscription is revoked and every push
    /// operation is forbidden for this round.
    Failed(Box<dyn std::error::Error + Send + Sync>),
    /// Fail the whole request with this error (e.g. a host lease layer's
    /// `sync.auth_lease_required`).
    Request(WireError),
}

impl fmt::Display for ResolveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResolveError::Failed(e) => write!(f, "scope resolution failed: {e}"),
            ResolveError::Request(e) => write!(f, "scope resolution refused: {e}"),
        }
    }
}

impl std::error::Error for ResolveError {}

/// Resolves the scopes an actor may read and write. Called at most once per
/// round.
pub trait ScopeResolver: Send + Sync {
    /// The allowed scopes of `actor_id` using `client_id` in `partition`.
    fn resolve(
        &self,
        partition: &str,
        actor_id: &str,
        client_id: &str,
    ) -> Result<ScopeMap, ResolveError>;
}

impl<F> ScopeResolver for F
where
    F: Fn(&str, &str, &str) -> Result<ScopeMap, ResolveError> + Send + Sync,
{
    fn resolve(
        &self,
        partition: &str,
        actor_id: &str,
        client_id: &str,
    ) -> Result<ScopeMap, ResolveError> {
        self(partition, actor_id, client_id)
    }
}
