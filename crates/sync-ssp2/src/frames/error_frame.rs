//! The in-band `ERROR` frame (§1.6).

use crate::error::{DecodeError, EncodeError};
use crate::primitives::{put_bool, put_json, put_opt, put_str, Reader};
use crate::values::RawJson;

/// A failure detected after the response began streaming; only `END` may
/// follow it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorFrame {
    /// A §10 error code.
    pub code: String,
    /// Human-readable text, never parsed.
    pub message: String,
    /// The code's category.
    pub category: String,
    /// Whether the same request may succeed later.
    pub retryable: bool,
    /// The client action the code recommends.
    pub recommended_action: String,
    /// Code-specific details, host-opaque JSON.
    pub details: Option<RawJson>,
}

impl ErrorFrame {
    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            code: r.str("ERROR.code")?,
            message: r.str("ERROR.message")?,
            category: r.str("ERROR.category")?,
            retryable: r.bool("ERROR.retryable")?,
            recommended_action: r.str("ERROR.recommendedAction")?,
            details: r.opt("ERROR.details", |r| r.json("ERROR.details"))?,
        })
    }

    pub(crate) fn encode(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        put_str(out, &self.code, "ERROR.code")?;
        put_str(out, &self.message, "ERROR.message")?;
        put_str(out, &self.category, "ERROR.category")?;
        put_bool(out, self.retryable);
        put_str(out, &self.recommended_action, "ERROR.recommendedAction")?;
        put_opt(out, self.details.as_ref(), |o, v| {
            put_json(o, v, "ERROR.details")
        })
    }
}
