//! Who calls a test instance's sync routes: `Authorization: Bearer
//! <actorId>` names the actor directly (the instance's resolver decides
//! what it may see); the partition is the instance's. An absent or empty
//! token is 401 `sync.auth_required`, as on the served database.

use http::request::Parts;
use sync_engine::RequestContext;
use sync_wire::WireFailure;

/// The bearer token is the actor id.
#[derive(Debug)]
pub(crate) struct ActorBearer {
    partition: String,
}

impl ActorBearer {
    /// Actors of `partition`.
    pub(crate) fn new(partition: &str) -> Self {
        Self {
            partition: partition.to_owned(),
        }
    }
}

impl sync_http::Authenticator for ActorBearer {
    fn authenticate(&self, parts: &Parts) -> Result<RequestContext, WireFailure> {
        let actor = parts
            .headers
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim)
            .filter(|actor| !actor.is_empty())
            .ok_or_else(WireFailure::auth_required)?;
        Ok(RequestContext::new(&self.partition, actor))
    }
}
