//! How a round stops early, and how storage errors map onto the error
//! surfaces (`engine.md` §1.6 item 4).

use sync_core::{Error, ErrorCode};

use crate::error::EngineError;
use crate::sink::SinkError;
use crate::wire::wire_error::WireError;

/// Why the round stops.
#[derive(Debug)]
pub(crate) enum Abort {
    /// Request-level error (returned or emitted as an `Error` item).
    Request(WireError),
    /// Internal failure (HTTP 500 / aborted stream).
    Internal(Box<dyn std::error::Error + Send + Sync>),
    /// The sink is gone.
    Sink(SinkError),
}

impl Abort {
    /// Storage error mapping: `busy`, `connection_lost`, `outcome_unknown`,
    /// `unavailable` (full disk, moved file, insufficient resources) and `schema_not_ready` are request-level and retryable
    /// with their own codes (a client retries the same commit id; after `outcome_unknown`
    /// the first-writer-wins push result answers `cached` if the commit had
    /// landed — `docs/decisions.md`); a writer fence refusal (from whichever call
    /// reports it: the append, a deferred flush, the commit) is request-level
    /// `sync.schema_not_ready` with `reason = writer_fenced` and is never
    /// persisted (`engine.md` §4.10); everything else is internal.
    pub(crate) fn storage(error: Error) -> Self {
        match error.code() {
            ErrorCode::Busy
            | ErrorCode::ConnectionLost
            | ErrorCode::OutcomeUnknown
            | ErrorCode::Unavailable
            | ErrorCode::SchemaNotReady => Abort::Request(WireError::from_storage(&error)),
            ErrorCode::WriterFenceRejected => Abort::Request(
                WireError::new(
                    "sync.schema_not_ready",
                    "server schema is not ready for this request",
                )
                .with_detail("reason", "writer_fenced"),
            ),
            _ => Abort::Internal(Box::new(error)),
        }
    }

    /// The operation whose row write this storage error reports as a
    /// `constraint_violation`: a dialect that defers a push's writes
    /// (`PushPreludeRequest::deferred_violations`) reports it from a later
    /// call of the transaction, not only from `upsert_row`.
    pub(crate) fn violation(&self) -> Option<u32> {
        match self {
            Abort::Internal(source) => source
                .downcast_ref::<Error>()
                .filter(|e| e.is(ErrorCode::ConstraintViolation))
                .map(|e| e.op_index_value().unwrap_or(0)),
            Abort::Request(_) | Abort::Sink(_) => None,
        }
    }

    pub(crate) fn internal(error: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Abort::Internal(error.into())
    }

    pub(crate) fn into_engine_error(self) -> EngineError {
        match self {
            Abort::Request(e) => EngineError::Request(e),
            Abort::Internal(source) => EngineError::Internal { source },
            Abort::Sink(e) => EngineError::Sink(e),
        }
    }
}

impl From<SinkError> for Abort {
    fn from(e: SinkError) -> Self {
        Abort::Sink(e)
    }
}

/// A plain internal failure message.
#[derive(Debug)]
pub(crate) struct InternalFailure(pub &'static str);

impl std::fmt::Display for InternalFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for InternalFailure {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retryable_storage_failures_are_request_level_with_their_own_codes() {
        for code in [
            ErrorCode::Busy,
            ErrorCode::ConnectionLost,
            ErrorCode::OutcomeUnknown,
            ErrorCode::Unavailable,
            ErrorCode::SchemaNotReady,
        ] {
            match Abort::storage(Error::new(code)) {
                Abort::Request(wire) => {
                    assert_eq!(wire.code, code.as_str());
                    assert!(wire.retryable, "{code} must be retryable on the wire");
                    assert_eq!(wire.http_status, 503, "{code}");
                }
                other => panic!("{code} mapped to {other:?}"),
            }
        }
    }

    #[test]
    fn an_internal_failure_names_its_cause_to_the_operator() {
        let error = Abort::internal(InternalFailure("server_version overflow")).into_engine_error();
        assert_eq!(
            error.to_string(),
            "internal failure: server_version overflow"
        );
    }

    #[test]
    fn other_storage_failures_are_internal() {
        for code in [ErrorCode::Backend, ErrorCode::TransactionAborted] {
            assert!(matches!(
                Abort::storage(Error::new(code)),
                Abort::Internal(_)
            ));
        }
    }
}
