//! Application hooks (`engine.md` §1.4).

pub(crate) mod blobs;
pub(crate) mod crdt;
pub(crate) mod ids;
pub(crate) mod reactions;
pub(crate) mod reader;
pub(crate) mod rejection;
pub(crate) mod scope_resolver;
pub(crate) mod validators;

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::blobs::BlobStoreError;
    use super::crdt::{CrdtMerger, MergeError, MergerRegistry};
    use super::reactions::PlanError;
    use super::rejection::{Rejection, RejectionError};
    use super::scope_resolver::ResolveError;
    use super::validators::ValidationFailure;
    use crate::WireError;

    struct Keep;

    impl CrdtMerger for Keep {
        fn merge(&self, _stored: Option<&[u8]>, incoming: &[u8]) -> Result<Vec<u8>, MergeError> {
            Ok(incoming.to_vec())
        }
    }

    /// What an operator reads in a failed round's log names the hook and
    /// the host's own cause.
    #[test]
    fn hook_errors_print_the_hook_and_the_cause() {
        let cause = || -> Box<dyn std::error::Error + Send + Sync> { "disk gone".into() };
        assert_eq!(
            BlobStoreError(cause()).to_string(),
            "blob store failed: disk gone"
        );
        assert_eq!(
            MergeError(cause()).to_string(),
            "crdt merge failed: disk gone"
        );
        assert_eq!(
            PlanError(cause()).to_string(),
            "reaction planning failed: disk gone"
        );
        assert_eq!(
            RejectionError {
                reason: "code_empty"
            }
            .to_string(),
            "invalid rejection: code_empty"
        );
        assert_eq!(
            ResolveError::Failed(cause()).to_string(),
            "scope resolution failed: disk gone"
        );
        assert_eq!(
            ResolveError::Request(WireError::new("sync.auth_lease_required", "no lease"))
                .to_string(),
            "scope resolution refused: sync.auth_lease_required: no lease"
        );
        assert_eq!(
            ValidationFailure::Failed(cause()).to_string(),
            "validator failed: disk gone"
        );
        let rejection =
            Rejection::new("task.too_long", "too long", None, None).map_err(|e| e.to_string());
        assert_eq!(
            rejection.map(|r| ValidationFailure::Reject(r).to_string()),
            Ok("rejected: task.too_long".to_owned())
        );
    }

    /// A registry's debug form lists its crdt types.
    #[test]
    fn a_merger_registry_debugs_as_its_types() {
        let mut registry = MergerRegistry::new();
        registry.register("union", Arc::new(Keep));
        registry.register("counter", Arc::new(Keep));
        assert_eq!(format!("{registry:?}"), r#"{"counter", "union"}"#);
    }
}
