//! The scope resolver of a test instance: each actor's allowed scopes as
//! the control surface last set them (an actor never set holds nothing:
//! its subscriptions are revoked and its writes forbidden), and a switch
//! that makes every resolution fail.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{PoisonError, RwLock};

use sync_engine::{ResolveError, ScopeMap, ScopeResolver};

/// Allowed scopes per actor, and the failure switch.
#[derive(Debug, Default)]
pub(crate) struct ControlResolver {
    allowed: RwLock<BTreeMap<String, ScopeMap>>,
    failing: AtomicBool,
}

/// The error of a resolver switched to fail.
#[derive(Debug)]
struct Injected;

impl std::fmt::Display for Injected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the test control made the scope resolver fail")
    }
}

impl std::error::Error for Injected {}

impl ControlResolver {
    /// Sets (replaces) `actor`'s allowed scopes.
    pub(crate) fn set_allowed(&self, actor: &str, allowed: ScopeMap) {
        self.allowed
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(actor.to_owned(), allowed);
    }

    /// Makes every resolution fail (`true`) or answer again (`false`).
    pub(crate) fn set_failing(&self, failing: bool) {
        self.failing.store(failing, Ordering::SeqCst);
    }
}

impl ScopeResolver for ControlResolver {
    fn resolve(&self, _: &str, actor_id: &str, _: &str) -> Result<ScopeMap, ResolveError> {
        if self.failing.load(Ordering::SeqCst) {
            return Err(ResolveError::Failed(Box::new(Injected)));
        }
        Ok(self
            .allowed
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(actor_id)
            .cloned()
            .unwrap_or_default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unset_actors_hold_nothing_and_the_switch_fails_everyone() {
        let resolver = ControlResolver::default();
        resolver.set_allowed("a", [("k".to_owned(), vec!["v".to_owned()])].into());
        assert_eq!(resolver.resolve("p", "a", "c").unwrap()["k"], vec!["v"]);
        assert!(resolver.resolve("p", "b", "c").unwrap().is_empty());
        resolver.set_failing(true);
        assert!(matches!(
            resolver.resolve("p", "a", "c"),
            Err(ResolveError::Failed(_))
        ));
        resolver.set_failing(false);
        assert!(resolver.resolve("p", "a", "c").is_ok());
    }
}
