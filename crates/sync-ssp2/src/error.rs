//! The decode-error layer of §1.7 and the encoder's own refusals.
//!
//! Every [`DecodeError`] maps to a stable wire code through
//! [`DecodeError::code`]: `sync.empty_commit` for a push commit without
//! operations, `sync.invalid_request` for everything else. The variants say
//! which rule was broken so tooling and logs can tell cases apart; callers
//! branch on the code, never on the text.

use std::fmt;

use crate::envelope::MessageKind;

/// Why a byte sequence is not a valid SSP2 message, SSG2 segment or
/// realtime control message (§1.7 decode errors).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecodeError {
    /// The first four bytes are not the expected magic (`SSP2` or `SSG2`).
    BadMagic,
    /// The envelope names a wire version this codec does not read.
    ///
    /// Detected from the 8-byte envelope header, before any frame is read.
    /// The HTTP layer answers it as `sync.invalid_request` (HTTP 400) with
    /// `details` naming the versions served, [`crate::SUPPORTED_WIRE_VERSIONS`].
    UnsupportedWireVersion {
        /// The version the envelope declared.
        version: u16,
    },
    /// The envelope's message kind byte is neither request nor response.
    UnknownMessageKind {
        /// The byte found.
        kind: u8,
    },
    /// A request was given where a response was expected, or the reverse.
    WrongMessageKind {
        /// The kind the caller asked to decode.
        expected: MessageKind,
        /// The kind the envelope declared.
        found: MessageKind,
    },
    /// The envelope flags byte, or the SSG2 flags field, is not zero.
    NonZeroFlags,
    /// The SSG2 format version is not 1.
    UnsupportedSegmentVersion {
        /// The version the segment declared.
        version: u16,
    },
    /// The input ended inside a fixed-width field.
    Truncated {
        /// The field being read.
        what: &'static str,
    },
    /// A length or count prefix claims more than the bytes that are left;
    /// refused before anything is allocated.
    ClaimExceedsInput {
        /// The field whose prefix made the claim.
        what: &'static str,
        /// The bytes the claim needs at least.
        claimed: u64,
        /// The bytes left in the enclosing frame or buffer.
        available: u64,
    },
    /// Bytes follow the end of a frame's record, the `END` frame, or a
    /// segment's end marker.
    TrailingBytes {
        /// What should have been the end.
        what: &'static str,
    },
    /// The message ended without an `END` frame.
    MissingEnd,
    /// The `END` frame carries a payload.
    EndWithPayload,
    /// A `bool` byte other than 0 or 1.
    InvalidBool {
        /// The field read.
        what: &'static str,
    },
    /// An `opt()` presence byte other than 0 or 1.
    InvalidPresence {
        /// The field read.
        what: &'static str,
    },
    /// An enum byte outside the values its field table lists.
    InvalidEnum {
        /// The field read.
        what: &'static str,
        /// The byte found.
        value: u8,
    },
    /// An `i64` outside ±(2^53−1).
    UnsafeInteger {
        /// The field read.
        what: &'static str,
    },
    /// A `str` whose bytes are not well-formed UTF-8.
    InvalidUtf8 {
        /// The field read.
        what: &'static str,
    },
    /// A `json` field (or json/blob_ref column value) that is not a JSON
    /// document, or a blob_ref that is not a canonical BlobRef.
    InvalidJson {
        /// The field read.
        what: &'static str,
    },
    /// A map whose keys are not in ascending UTF-16 code-unit order.
    KeyOutOfOrder {
        /// The map read.
        what: &'static str,
    },
    /// A map with the same key twice.
    DuplicateKey {
        /// The map read.
        what: &'static str,
    },
    /// A frame type registered for the other message kind (e.g. `SUB_START`
    /// in a request).
    ForeignFrame {
        /// The frame type byte.
        frame_type: u8,
    },
    /// A frame out of its legal place in the message grammar (§1.5, §1.6).
    Grammar {
        /// The rule broken.
        rule: &'static str,
    },
    /// A presence tie or a single-frame field constraint of §1.7 is broken
    /// (empty `clientId`, `schemaVersion` below 1, `tableIndex` out of
    /// range, `accept` bits 4–7, `url` without its expiry, `serverVersion`
    /// below 1, a null on a non-nullable column, …).
    Constraint {
        /// The rule broken.
        rule: &'static str,
    },
    /// A push payload breaks a rule of the wire version 3 sparse row
    /// ([`crate::decode_sparse_row`]).
    SparseRow {
        /// The rule broken.
        violation: crate::SparseRowViolation,
    },
    /// A `PUSH_COMMIT` with zero operations (`sync.empty_commit`).
    EmptyCommit,
}

impl DecodeError {
    /// The stable wire code of this error (§10): `sync.empty_commit` for
    /// [`DecodeError::EmptyCommit`], `sync.invalid_request` for every other
    /// variant.
    pub fn code(&self) -> &'static str {
        match self {
            Self::EmptyCommit => "sync.empty_commit",
            _ => "sync.invalid_request",
        }
    }

    /// Structured details for the error body the HTTP layer answers with
    /// (§10.1 `details`), where the variant has some: an unsupported wire
    /// version names the version sent and the versions served
    /// (`{"wireVersion": 4, "supportedWireVersions": [1, 2, 3]}`).
    pub fn details(&self) -> Option<serde_json::Value> {
        match self {
            Self::UnsupportedWireVersion { version } => Some(serde_json::json!({
                "wireVersion": version,
                "supportedWireVersions": crate::SUPPORTED_WIRE_VERSIONS,
            })),
            _ => None,
        }
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::BadMagic => write!(f, "the input does not start with the expected magic"),
            Self::UnsupportedWireVersion { version } => write!(
                f,
                "wire version {version} is not served (served: {:?})",
                crate::SUPPORTED_WIRE_VERSIONS
            ),
            Self::UnknownMessageKind { kind } => write!(f, "message kind byte {kind} is unknown"),
            Self::WrongMessageKind { expected, found } => {
                write!(f, "expected a {expected} message, found a {found} message")
            }
            Self::NonZeroFlags => write!(f, "the flags field must be zero"),
            Self::UnsupportedSegmentVersion { version } => {
                write!(f, "rows segment format version {version} is not supported")
            }
            Self::Truncated { what } => write!(f, "the input ends inside {what}"),
            Self::ClaimExceedsInput {
                what,
                claimed,
                available,
            } => write!(
                f,
                "{what} claims at least {claimed} bytes but only {available} are left"
            ),
            Self::TrailingBytes { what } => write!(f, "bytes follow the end of {what}"),
            Self::MissingEnd => write!(f, "the message ends without an END frame"),
            Self::EndWithPayload => write!(f, "the END frame must have length 0"),
            Self::InvalidBool { what } => write!(f, "{what} is a bool byte other than 0 or 1"),
            Self::InvalidPresence { what } => {
                write!(f, "{what} has a presence byte other than 0 or 1")
            }
            Self::InvalidEnum { what, value } => {
                write!(f, "{what} does not admit the byte {value}")
            }
            Self::UnsafeInteger { what } => {
                write!(f, "{what} is outside the safe-integer range ±(2^53-1)")
            }
            Self::InvalidUtf8 { what } => write!(f, "{what} is not well-formed UTF-8"),
            Self::InvalidJson { what } => write!(f, "{what} is not a valid JSON document"),
            Self::KeyOutOfOrder { what } => {
                write!(
                    f,
                    "the keys of {what} are not in ascending UTF-16 code-unit order"
                )
            }
            Self::DuplicateKey { what } => write!(f, "{what} has a duplicate key"),
            Self::ForeignFrame { frame_type } => write!(
                f,
                "frame type {frame_type:#04x} belongs to the other message kind"
            ),
            Self::Grammar { rule } => write!(f, "frame order: {rule}"),
            Self::Constraint { rule } => write!(f, "{rule}"),
            Self::SparseRow { violation } => write!(f, "{violation}"),
            Self::EmptyCommit => write!(f, "a push commit must carry at least one operation"),
        }
    }
}

impl std::error::Error for DecodeError {}

/// Why a typed value cannot be encoded: encoding it would give bytes that
/// no conformant decoder accepts, or that are not its one canonical form.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum EncodeError {
    /// An `i64` outside ±(2^53−1).
    UnsafeInteger {
        /// The field written.
        what: &'static str,
    },
    /// A string, byte string or list longer than a `u32` prefix can say
    /// (or, for a table dictionary index, than a `u16` can say).
    TooLong {
        /// The field written.
        what: &'static str,
    },
    /// An unknown frame kept for re-encoding carries a frame type that this
    /// wire version registers (§1.2 rule 2): refused.
    RegisteredFrameType {
        /// The frame type byte.
        frame_type: u8,
    },
    /// The frames are out of their legal order (§1.5, §1.6).
    Grammar {
        /// The rule broken.
        rule: &'static str,
    },
    /// A field that exists in one wire version only was set, or left out,
    /// for the other (`logEpoch`, `resetRequired`).
    VersionMismatch {
        /// The field concerned.
        what: &'static str,
    },
    /// A single-frame field constraint of §1.7 is broken, or a segment row
    /// does not fit its column table.
    Constraint {
        /// The rule broken.
        rule: &'static str,
    },
    /// A `PUSH_COMMIT` with zero operations.
    EmptyCommit,
}

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnsafeInteger { what } => {
                write!(f, "{what} is outside the safe-integer range ±(2^53-1)")
            }
            Self::TooLong { what } => write!(f, "{what} is too long for its length prefix"),
            Self::RegisteredFrameType { frame_type } => write!(
                f,
                "an unknown frame cannot use the registered frame type {frame_type:#04x}"
            ),
            Self::Grammar { rule } => write!(f, "frame order: {rule}"),
            Self::VersionMismatch { what } => {
                write!(f, "{what} does not match the message's wire version")
            }
            Self::Constraint { rule } => write!(f, "{rule}"),
            Self::EmptyCommit => write!(f, "a push commit must carry at least one operation"),
        }
    }
}

impl std::error::Error for EncodeError {}

/// A failure of the [`crate::ResponseWriter`]: the frame could not be
/// encoded, or the sink refused the bytes.
#[derive(Debug)]
#[non_exhaustive]
pub enum WriteError {
    /// The frame is not encodable, or not legal at this point of the
    /// response grammar; nothing of it was written.
    Encode(EncodeError),
    /// The underlying writer failed.
    Io(std::io::Error),
}

impl fmt::Display for WriteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Encode(e) => write!(f, "cannot encode the frame: {e}"),
            Self::Io(_) => write!(f, "the response sink failed"),
        }
    }
}

impl std::error::Error for WriteError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Encode(e) => Some(e),
            Self::Io(e) => Some(e),
        }
    }
}

impl From<EncodeError> for WriteError {
    fn from(e: EncodeError) -> Self {
        Self::Encode(e)
    }
}

impl From<std::io::Error> for WriteError {
    fn from(e: std::io::Error) -> Self {
        Self::Io(e)
    }
}
