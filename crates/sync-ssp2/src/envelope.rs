//! The 8-byte SSP2 envelope header and the length-prefixed frame layer
//! (§1.2).

use std::fmt;

use crate::error::{DecodeError, EncodeError};
use crate::primitives::{put_len, put_u16, put_u8, Reader};

/// The envelope magic, `SSP2`.
pub const MAGIC: [u8; 4] = *b"SSP2";

/// The wire versions this codec reads and writes, oldest first.
pub const SUPPORTED_WIRE_VERSIONS: [u16; 3] = [1, 2, 3];

/// The length of the envelope header: magic, version, kind, flags.
pub const HEADER_LEN: usize = 8;

/// A wire version this codec serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum WireVersion {
    /// Version 1: headers without the partition log epoch.
    V1,
    /// Version 2: `REQ_HEADER.logEpoch`, `RESP_HEADER.logEpoch` and
    /// `RESP_HEADER.resetRequired`.
    V2,
    /// Version 3: the headers of version 2; push payloads are sparse rows
    /// (see [`crate::decode_sparse_row`]) and a conflict record ends with
    /// `conflictColumns`.
    V3,
}

impl WireVersion {
    /// The `u16` carried in the envelope.
    pub fn number(self) -> u16 {
        match self {
            Self::V1 => 1,
            Self::V2 => 2,
            Self::V3 => 3,
        }
    }

    /// Whether the headers carry the partition log epoch (versions 2 and
    /// 3: `REQ_HEADER.logEpoch`, `RESP_HEADER.logEpoch`,
    /// `RESP_HEADER.resetRequired`).
    pub fn has_log_epoch(self) -> bool {
        self >= Self::V2
    }

    /// Whether push payloads are sparse rows and a conflict record carries
    /// `conflictColumns` (version 3).
    pub fn has_sparse_rows(self) -> bool {
        self >= Self::V3
    }

    /// The version numbered `n`, if served.
    pub fn from_number(n: u16) -> Option<Self> {
        match n {
            1 => Some(Self::V1),
            2 => Some(Self::V2),
            3 => Some(Self::V3),
            _ => None,
        }
    }
}

/// Which way a message travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MessageKind {
    /// Client to server (`msgKind` 0x01).
    Request,
    /// Server to client (`msgKind` 0x02).
    Response,
}

impl MessageKind {
    /// The `msgKind` byte.
    pub fn byte(self) -> u8 {
        match self {
            Self::Request => 0x01,
            Self::Response => 0x02,
        }
    }

    /// The §11 rendering name: `"request"` or `"response"`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Request => "request",
            Self::Response => "response",
        }
    }
}

impl fmt::Display for MessageKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What the 8-byte envelope header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EnvelopeHeader {
    /// The message's wire version.
    pub wire_version: WireVersion,
    /// Request or response.
    pub kind: MessageKind,
}

/// Reads and checks the 8-byte envelope header only: magic, wire version,
/// message kind and flags, in that order, before any frame.
///
/// An unserved version is [`DecodeError::UnsupportedWireVersion`], which
/// an HTTP front answers as `sync.invalid_request` (HTTP 400) with
/// `details` naming [`SUPPORTED_WIRE_VERSIONS`].
pub fn peek_envelope(bytes: &[u8]) -> Result<EnvelopeHeader, DecodeError> {
    let mut r = Reader::new(bytes);
    if r.take(4, "the envelope magic")? != MAGIC {
        return Err(DecodeError::BadMagic);
    }
    let version = r.u16("the wire version")?;
    let wire_version =
        WireVersion::from_number(version).ok_or(DecodeError::UnsupportedWireVersion { version })?;
    let kind = match r.u8("the message kind")? {
        0x01 => MessageKind::Request,
        0x02 => MessageKind::Response,
        kind => return Err(DecodeError::UnknownMessageKind { kind }),
    };
    if r.u8("the envelope flags")? != 0 {
        return Err(DecodeError::NonZeroFlags);
    }
    Ok(EnvelopeHeader { wire_version, kind })
}

/// Where the first message of a byte stream ends (§1.2: the envelope is
/// self-delimiting): `Ok(Some(n))` once its `END` frame is in `bytes`
/// (the message is `bytes[..n]`; anything after it is not part of it),
/// `Ok(None)` while more bytes are needed. `Err` as soon as the 8-byte
/// envelope header is in and is not valid; frames are only walked by
/// their lengths, never decoded or allocated.
///
/// A realtime socket round (§8.7) arrives in chunks: this says when the
/// request is whole.
pub fn message_length(bytes: &[u8]) -> Result<Option<usize>, DecodeError> {
    if bytes.len() < HEADER_LEN {
        return Ok(None);
    }
    peek_envelope(bytes)?;
    let mut at = HEADER_LEN;
    loop {
        let Some(head) = bytes.get(at..at + 5) else {
            return Ok(None);
        };
        let len = u32::from_le_bytes([head[1], head[2], head[3], head[4]]) as usize;
        let end = (at + 5).checked_add(len).ok_or(DecodeError::Truncated {
            what: "a frame payload",
        })?;
        if head[0] == crate::frames::types::END {
            if len != 0 {
                return Err(DecodeError::EndWithPayload);
            }
            return Ok(Some(end));
        }
        if end > bytes.len() {
            return Ok(None);
        }
        at = end;
    }
}

/// Checks the envelope is of `expected` kind; returns its version and a
/// reader over the frames.
pub(crate) fn open(
    bytes: &[u8],
    expected: MessageKind,
) -> Result<(WireVersion, Reader<'_>), DecodeError> {
    let header = peek_envelope(bytes)?;
    if header.kind != expected {
        return Err(DecodeError::WrongMessageKind {
            expected,
            found: header.kind,
        });
    }
    Ok((header.wire_version, Reader::new(&bytes[HEADER_LEN..])))
}

/// The next frame as (type, payload), or `None` at a well-formed `END`
/// that closes the input.
pub(crate) fn next_frame<'a>(r: &mut Reader<'a>) -> Result<Option<(u8, &'a [u8])>, DecodeError> {
    if r.is_empty() {
        return Err(DecodeError::MissingEnd);
    }
    let frame_type = r.u8("a frame type")?;
    let len = r.u32("a frame length")?;
    let payload = r.take_claimed(u64::from(len), "a frame payload")?;
    if frame_type == crate::frames::types::END {
        if len != 0 {
            return Err(DecodeError::EndWithPayload);
        }
        r.finish("the END frame")?;
        return Ok(None);
    }
    Ok(Some((frame_type, payload)))
}

/// Appends the envelope header.
pub(crate) fn put_header(out: &mut Vec<u8>, version: WireVersion, kind: MessageKind) {
    out.extend_from_slice(&MAGIC);
    put_u16(out, version.number());
    put_u8(out, kind.byte());
    put_u8(out, 0);
}

/// Appends one frame: type, length, payload.
pub(crate) fn put_frame(
    out: &mut Vec<u8>,
    frame_type: u8,
    payload: &[u8],
) -> Result<(), EncodeError> {
    put_u8(out, frame_type);
    put_len(out, payload.len(), "a frame payload")?;
    out.extend_from_slice(payload);
    Ok(())
}

/// Appends the `END` frame.
pub(crate) fn put_end(out: &mut Vec<u8>) {
    put_u8(out, crate::frames::types::END);
    out.extend_from_slice(&0u32.to_le_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_version_4_is_refused_from_the_header_alone() {
        // Header only, no frame at all: the version is refused before the
        // missing END could be noticed.
        let bytes = [b'S', b'S', b'P', b'2', 4, 0, 1, 0];
        assert_eq!(
            peek_envelope(&bytes),
            Err(DecodeError::UnsupportedWireVersion { version: 4 })
        );
        // Garbage where frames would be changes nothing.
        let mut with_garbage = bytes.to_vec();
        with_garbage.extend_from_slice(&[0xff; 9]);
        assert_eq!(
            crate::decode_request(&with_garbage),
            Err(DecodeError::UnsupportedWireVersion { version: 4 })
        );
        assert_eq!(
            crate::decode_response(&with_garbage),
            Err(DecodeError::UnsupportedWireVersion { version: 4 })
        );
    }

    #[test]
    fn served_versions_are_one_two_and_three() {
        for n in SUPPORTED_WIRE_VERSIONS {
            assert_eq!(
                WireVersion::from_number(n).map(WireVersion::number),
                Some(n)
            );
        }
        assert_eq!(WireVersion::from_number(0), None);
    }
}
