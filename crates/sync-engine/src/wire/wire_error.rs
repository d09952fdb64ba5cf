//! Request-level wire errors with the fixed catalog metadata of SSP2 §10.2
//! plus the two codes of `engine.md` §1.6.

use std::fmt;

use serde_json::{Map, Value};

/// Error categories of the catalog.
pub mod category {
    /// `invalid-request`.
    pub const INVALID_REQUEST: &str = "invalid-request";
    /// `forbidden`.
    pub const FORBIDDEN: &str = "forbidden";
    /// `not-found`.
    pub const NOT_FOUND: &str = "not-found";
    /// `schema-mismatch`.
    pub const SCHEMA_MISMATCH: &str = "schema-mismatch";
    /// `internal`.
    pub const INTERNAL: &str = "internal";
    /// `unavailable`.
    pub const UNAVAILABLE: &str = "unavailable";
}

/// One catalog entry: `(code, category, retryable, recommendedAction, HTTP status)`.
type Entry = (&'static str, &'static str, bool, &'static str, u16);

/// The codes the engine produces or passes through, and those its
/// transports answer with (`sync.not_found`, `sync.segment_expired` of a
/// segment download), with their metadata.
const CATALOG: &[Entry] = &[
    (
        "sync.auth_required",
        "auth-required",
        true,
        "refreshAuth",
        401,
    ),
    (
        "sync.auth_lease_required",
        "auth-required",
        true,
        "refreshAuth",
        401,
    ),
    (
        "sync.auth_lease_revoked",
        "auth-required",
        true,
        "refreshAuth",
        401,
    ),
    (
        "sync.forbidden",
        "forbidden",
        false,
        "checkPermissions",
        403,
    ),
    (
        "sync.invalid_request",
        "invalid-request",
        false,
        "fixRequest",
        400,
    ),
    (
        "sync.invalid_client_id",
        "invalid-request",
        false,
        "resetClientId",
        400,
    ),
    (
        "sync.invalid_subscription",
        "invalid-request",
        false,
        "fixRequest",
        400,
    ),
    (
        "sync.empty_commit",
        "invalid-request",
        false,
        "fixRequest",
        400,
    ),
    (
        "sync.unknown_table",
        "schema-mismatch",
        false,
        "regenerateClient",
        400,
    ),
    ("sync.row_missing", "not-found", false, "forceResync", 404),
    ("sync.not_found", "not-found", false, "forceResync", 404),
    ("sync.segment_expired", "not-found", true, "retryLater", 404),
    (
        "sync.version_conflict",
        "conflict",
        false,
        "resolveConflict",
        409,
    ),
    (
        "sync.constraint_violation",
        "invalid-request",
        false,
        "fixRequest",
        400,
    ),
    (
        "sync.missing_scopes",
        "internal",
        false,
        "inspectServer",
        500,
    ),
    (
        "sync.crdt_merge_failed",
        "internal",
        false,
        "inspectServer",
        500,
    ),
    (
        "sync.idempotency_cache_miss",
        "internal",
        true,
        "retryLater",
        500,
    ),
    (
        "sync.too_many_operations",
        "invalid-request",
        false,
        "splitBatch",
        400,
    ),
    (
        "sync.cursor_expired",
        "reset-required",
        false,
        "rebootstrap",
        400,
    ),
    (
        "sync.scope_revoked",
        "scope-revoked",
        false,
        "checkPermissions",
        403,
    ),
    ("sync.rate_limited", "rate-limited", true, "retryLater", 429),
    (
        "sync.client_schema_unsupported",
        "schema-mismatch",
        false,
        "upgradeClient",
        400,
    ),
    (
        "sync.client_wire_unsupported",
        "schema-mismatch",
        false,
        "upgradeClient",
        400,
    ),
    (
        "sync.schema_not_ready",
        "unavailable",
        true,
        "retryLater",
        503,
    ),
    ("sync.storage.busy", "unavailable", true, "retryLater", 503),
    (
        "sync.storage.connection_lost",
        "unavailable",
        true,
        "retryLater",
        503,
    ),
    (
        "sync.storage.outcome_unknown",
        "unavailable",
        true,
        "retryLater",
        503,
    ),
    (
        "sync.storage.unavailable",
        "unavailable",
        true,
        "retryLater",
        503,
    ),
    ("blob.not_found", "not-found", false, "fixRequest", 404),
    (
        "operation.unknown",
        "not-found",
        false,
        "regenerateClient",
        404,
    ),
    (
        "operation.forbidden",
        "forbidden",
        false,
        "checkPermissions",
        403,
    ),
    (
        "operation.invalid_request",
        "invalid-request",
        false,
        "fixRequest",
        400,
    ),
    (
        "operation.execution_failed",
        "internal",
        false,
        "inspectServer",
        500,
    ),
];

/// A request-level error as sent to the client: the SSP2 §10.1 body or an
/// `ERROR` frame.
#[derive(Debug, Clone, PartialEq)]
pub struct WireError {
    /// Stable code (`sync.invalid_request`, …).
    pub code: String,
    /// Diagnostic message; never parsed, never contains row values.
    pub message: String,
    /// Catalog category (`invalid-request`, `unavailable`, …).
    pub category: String,
    /// Whether the same request may succeed later unchanged.
    pub retryable: bool,
    /// Catalog recommended action (`fixRequest`, `retryLater`, …).
    pub recommended_action: String,
    /// HTTP status for transports answering before the first item.
    pub http_status: u16,
    /// Code-specific details (a JSON object; boxed to keep the error small).
    pub details: Option<Box<Map<String, Value>>>,
}

impl WireError {
    /// An error with `code`'s catalog metadata. A code outside the catalog
    /// is treated as `internal` (not retryable, `inspectServer`, 500).
    pub fn new(code: &str, message: impl Into<String>) -> Self {
        let (category, retryable, action, status) = catalog_entry(code).map_or(
            (category::INTERNAL, false, "inspectServer", 500),
            |&(_, c, r, a, s)| (c, r, a, s),
        );
        Self {
            code: code.to_owned(),
            message: message.into(),
            category: category.to_owned(),
            retryable,
            recommended_action: action.to_owned(),
            http_status: status,
            details: None,
        }
    }

    /// Adds a string detail.
    pub fn with_detail(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.details
            .get_or_insert_with(Box::default)
            .insert(key.to_owned(), value.into());
        self
    }

    /// Whether `code` has catalog metadata.
    pub fn is_catalog_code(code: &str) -> bool {
        catalog_entry(code).is_some()
    }

    /// `sync.invalid_request` with a diagnostic reason in `details.reason`.
    pub fn invalid_request(reason: &str) -> Self {
        Self::new("sync.invalid_request", "malformed request").with_detail("reason", reason)
    }

    /// The wire form of a storage or gate error whose code is itself a wire
    /// code (`sync.schema_not_ready`, `sync.storage.busy`,
    /// `sync.storage.connection_lost`, `sync.storage.outcome_unknown`,
    /// `sync.storage.unavailable`),
    /// carrying the error's details.
    pub fn from_storage(error: &sync_core::Error) -> Self {
        let mut wire = Self::new(error.code().as_str(), error.message());
        for (key, value) in error.details() {
            wire = wire.with_detail(key, value.clone());
        }
        wire
    }

    /// The SSP2 §10.1 JSON body: `{code, message, category, retryable,
    /// recommendedAction, details?}`.
    pub fn to_body(&self) -> Value {
        let mut out = Map::new();
        out.insert("code".into(), self.code.clone().into());
        out.insert("message".into(), self.message.clone().into());
        out.insert("category".into(), self.category.clone().into());
        out.insert("retryable".into(), self.retryable.into());
        out.insert(
            "recommendedAction".into(),
            self.recommended_action.clone().into(),
        );
        if let Some(details) = &self.details {
            out.insert("details".into(), Value::Object((**details).clone()));
        }
        Value::Object(out)
    }
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for WireError {}

fn catalog_entry(code: &str) -> Option<&'static Entry> {
    CATALOG.iter().find(|entry| entry.0 == code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalog_metadata_is_attached() {
        let e = WireError::new("sync.schema_not_ready", "x");
        assert_eq!(
            (e.category.as_str(), e.retryable, e.http_status),
            ("unavailable", true, 503)
        );
        let e = WireError::new("sync.unknown_table", "x");
        assert_eq!(
            (e.category.as_str(), e.http_status),
            ("schema-mismatch", 400)
        );
        let e = WireError::new("app.custom", "x");
        assert_eq!((e.category.as_str(), e.retryable), ("internal", false));
    }

    #[test]
    fn storage_details_become_wire_details() {
        let core = sync_core::Error::new(sync_core::ErrorCode::SchemaNotReady)
            .detail("reason", "writer_fenced");
        let wire = WireError::from_storage(&core);
        assert_eq!(wire.code, "sync.schema_not_ready");
        assert_eq!(
            wire.details.as_ref().and_then(|d| d.get("reason")),
            Some(&Value::from("writer_fenced"))
        );
    }

    #[test]
    fn catalog_codes_are_told_from_application_codes() {
        assert!(WireError::is_catalog_code("sync.invalid_request"));
        assert!(WireError::is_catalog_code("sync.storage.busy"));
        assert!(!WireError::is_catalog_code("app.custom"));
        assert!(!WireError::is_catalog_code(""));
    }
}
