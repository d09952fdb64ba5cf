//! What a transport answers when no response stream has started: an HTTP
//! status and the SSP2 §10.1 JSON body.

use std::fmt;

use serde_json::Value;
use sync_engine::WireError;

/// The content type of SSP2 request and response bodies.
pub const SYNC_CONTENT_TYPE: &str = "application/vnd.syncular.sync.v2";

/// A request-level failure answered before any response byte: the
/// transport sends `status` with `body` as `application/json`.
#[derive(Debug, Clone, PartialEq)]
pub struct WireFailure {
    /// The HTTP status (400, 401, 403, 404, 415, 500, 503, …).
    pub status: u16,
    /// The §10.1 body: `{code, message, category, retryable,
    /// recommendedAction, details?}`.
    pub body: Value,
}

impl WireFailure {
    /// The failure of a catalog error, with the catalog's status.
    pub fn from_wire_error(error: &WireError) -> Self {
        Self {
            status: error.http_status,
            body: error.to_body(),
        }
    }

    /// `sync.auth_required` (401): no or unknown credentials.
    pub fn auth_required() -> Self {
        Self::from_wire_error(&WireError::new(
            "sync.auth_required",
            "authentication required",
        ))
    }

    /// `sync.invalid_request` with HTTP 415: the body is not of
    /// [`SYNC_CONTENT_TYPE`].
    pub fn unsupported_media_type(received: &str) -> Self {
        let error = WireError::new("sync.invalid_request", "unsupported content type")
            .with_detail("reason", "content_type")
            .with_detail("expected", SYNC_CONTENT_TYPE)
            .with_detail("received", received);
        Self {
            status: 415,
            body: error.to_body(),
        }
    }

    /// `sync.invalid_request` with HTTP 413: the body is larger than the
    /// transport accepts.
    pub fn body_too_large(limit: usize) -> Self {
        let error = WireError::new("sync.invalid_request", "request body too large")
            .with_detail("reason", "body_too_large")
            .with_detail("limitBytes", limit);
        Self {
            status: 413,
            body: error.to_body(),
        }
    }

    /// `sync.invalid_request` (400) naming why the body could not be read
    /// (a broken gzip stream, a connection cut mid-body).
    pub fn unreadable_body(reason: &str) -> Self {
        Self::from_wire_error(
            &WireError::new("sync.invalid_request", "request body unreadable")
                .with_detail("reason", reason),
        )
    }

    /// The `code` of the body.
    pub fn code(&self) -> &str {
        self.body
            .get("code")
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    /// The body as JSON text.
    pub fn body_text(&self) -> String {
        self.body.to_string()
    }
}

impl fmt::Display for WireFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HTTP {} {}", self.status, self.code())
    }
}

impl std::error::Error for WireFailure {}
