//! Who is calling: the application's authentication.

use http::request::Parts;
use sync_engine::RequestContext;
use sync_wire::WireFailure;

/// Maps a request to the partition and actor it acts for.
///
/// Runs on the async runtime for every request before anything else is
/// read: it must not block. An application that authenticates with I/O
/// does so in its own middleware and leaves the result in the request's
/// extensions, where `parts.extensions` finds it.
pub trait Authenticator: Send + Sync + 'static {
    /// The request's partition and actor, or a refusal (usually
    /// [`WireFailure::auth_required`], HTTP 401).
    fn authenticate(&self, parts: &Parts) -> Result<RequestContext, WireFailure>;
}

impl<F> Authenticator for F
where
    F: Fn(&Parts) -> Result<RequestContext, WireFailure> + Send + Sync + 'static,
{
    fn authenticate(&self, parts: &Parts) -> Result<RequestContext, WireFailure> {
        self(parts)
    }
}
