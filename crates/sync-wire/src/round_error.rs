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
