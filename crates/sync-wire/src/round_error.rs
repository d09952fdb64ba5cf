//! A round's failure before its first item → HTTP status and §10.1 body.

use sync_engine::{EngineError, WireError};

use crate::failure::WireFailure;

/// The failure answering an [`EngineError`] returned before any response
/// item was produced.
///
/// - a request-level error: its catalog status and body;
/// - a retryable storage error (busy, connection lost, outcome unknown,
///   serve gate closed): HTTP 503 with the storage's code, category
///   `unavailable`, `retryable: true`, `retryLater`;
/// - anything else: HTTP 500 `sync.internal` (category `internal`, not
///   retryable, `inspectServer`), whose body names no internal detail.
pub fn round_failure(error: &EngineError) -> WireFailure {
    match error {
        EngineError::Request(wire) => WireFailure::from_wire_error(wire),
        EngineError::Internal { source } => match source.downcast_ref::<sync_core::Error>() {
            Some(storage) if storage.retryable() => {
                let mut wire = WireError::from_storage(storage);
                wire.category = sync_engine::category::UNAVAILABLE.to_owned();
                wire.retryable = true;
                wire.recommended_action = "retryLater".to_owned();
                wire.http_status = 503;
                WireFailure::from_wire_error(&wire)
            }
            _ => internal(),
        },
        EngineError::Sink(_) | EngineError::Config { .. } => internal(),
    }
}

/// HTTP 500 `sync.internal`.
pub(crate) fn internal() -> WireFailure {
    WireFailure::from_wire_error(&WireError::new("sync.internal", "internal server error"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn internal_error(error: sync_core::Error) -> EngineError {
        EngineError::Internal {
            source: Box::new(error),
        }
    }

    #[test]
    fn retryable_storage_errors_are_503_retry_later() {
        for code in [
            sync_core::ErrorCode::Busy,
            sync_core::ErrorCode::ConnectionLost,
        ] {
            let failure = round_failure(&internal_error(sync_core::Error::new(code)));
            assert_eq!(failure.status, 503);
            assert_eq!(failure.code(), code.as_str());
            assert_eq!(failure.body["category"], "unavailable");
            assert_eq!(failure.body["retryable"], true);
            assert_eq!(failure.body["recommendedAction"], "retryLater");
        }
    }

    #[test]
    fn other_internal_failures_are_500_without_detail() {
        let failure = round_failure(&internal_error(sync_core::Error::backend(
            "secret driver text",
        )));
        assert_eq!(failure.status, 500);
        assert_eq!(failure.code(), "sync.internal");
        assert!(!failure.body_text().contains("secret"));
    }

    #[test]
    fn request_errors_keep_their_catalog_status() {
        let wire = WireError::new("sync.invalid_subscription", "duplicate id");
        let failure = round_failure(&EngineError::Request(wire));
        assert_eq!(
            (failure.status, failure.code()),
            (400, "sync.invalid_subscription")
        );
        let wire = WireError::new("sync.schema_not_ready", "gate closed");
        assert_eq!(round_failure(&EngineError::Request(wire)).status, 503);
    }
}
