//! Errors of the engine's entry points (`engine.md` §1.6).

use std::fmt;

use crate::sink::SinkError;
use crate::wire::wire_error::WireError;

/// Why an engine call failed.
#[derive(Debug)]
pub enum EngineError {
    /// Construction refused the storage/schema/hook combination.
    Config {
        /// What is wrong (`schema_not_ensured`, `reactions_unsupported`, …).
        reason: &'static str,
    },
    /// A request-level protocol error, returned before the first response
    /// item (the transport answers with [`WireError::to_body`] and
    /// [`WireError::http_status`]).
    Request(WireError),
    /// An internal failure without a wire code (HTTP 500 before the first
    /// item; after it the transport aborts the stream without `End`).
    Internal {
        /// The underlying failure (often a [`sync_core::Error`]).
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The response sink failed; work already committed stays committed.
    Sink(SinkError),
}

impl EngineError {
    /// The wire error of a `Request` error.
    pub fn wire(&self) -> Option<&WireError> {
        match self {
            EngineError::Request(e) => Some(e),
            _ => None,
        }
    }

    /// The storage error code behind an `Internal` error, if it is one.
    pub fn storage_code(&self) -> Option<sync_core::ErrorCode> {
        match self {
            EngineError::Internal { source } => source
                .downcast_ref::<sync_core::Error>()
                .map(sync_core::Error::code),
            _ => None,
        }
    }
}

impl fmt::Display for EngineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EngineError::Config { reason } => write!(f, "engine configuration refused: {reason}"),
            EngineError::Request(e) => write!(f, "request refused: {e}"),
            EngineError::Internal { source } => write!(f, "internal failure: {source}"),
            EngineError::Sink(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for EngineError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            EngineError::Internal { source } => Some(source.as_ref()),
            EngineError::Request(e) => Some(e),
            EngineError::Sink(e) => Some(e),
            EngineError::Config { .. } => None,
        }
    }
}

impl From<SinkError> for EngineError {
    fn from(e: SinkError) -> Self {
        EngineError::Sink(e)
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;

    fn internal(source: impl std::error::Error + Send + Sync + 'static) -> EngineError {
        EngineError::Internal {
            source: Box::new(source),
        }
    }

    #[test]
    fn an_internal_storage_error_keeps_its_code() {
        let busy = internal(sync_core::Error::new(sync_core::ErrorCode::Busy));
        assert_eq!(busy.storage_code(), Some(sync_core::ErrorCode::Busy));
        let other = internal(SinkError {
            reason: "gone".into(),
        });
        assert_eq!(other.storage_code(), None);
        let request = EngineError::Request(WireError::invalid_request("x"));
        assert_eq!(request.storage_code(), None);
    }

    #[test]
    fn every_wrapping_variant_exposes_its_source() {
        let busy = internal(sync_core::Error::new(sync_core::ErrorCode::Busy));
        let source = busy.source().expect("an internal error has a source");
        assert!(source.downcast_ref::<sync_core::Error>().is_some());
        let request = EngineError::Request(WireError::invalid_request("x"));
        assert!(request.source().is_some_and(|s| s.is::<WireError>()));
        let sink = EngineError::Sink(SinkError {
            reason: "gone".into(),
        });
        assert!(sink.source().is_some_and(|s| s.is::<SinkError>()));
        let config = EngineError::Config { reason: "r" };
        assert!(config.source().is_none());
    }

    #[test]
    fn a_sink_error_says_why() {
        let sink = SinkError {
            reason: "client went away".into(),
        };
        assert_eq!(sink.to_string(), "response sink failed: client went away");
        assert_eq!(
            EngineError::Sink(sink).to_string(),
            "response sink failed: client went away"
        );
    }
}
