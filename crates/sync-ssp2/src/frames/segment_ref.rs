//! Bootstrap segment delivery: `SEGMENT_REF` (§5.4) and `SEGMENT_INLINE`
//! (§5.7).

use super::enum_byte;
use crate::error::{DecodeError, EncodeError};
use crate::primitives::{put_i64, put_opt, put_str, put_u8, Reader};
use crate::segment::{decode_segment, encode_segment, RowsSegment};

/// The format of a referenced segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MediaType {
    /// An SSG2 rows segment (`mediaType` 1).
    Rows,
    /// A sqlite image (`mediaType` 2).
    Sqlite,
}

impl MediaType {
    /// The §11 rendering name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Rows => "rows",
            Self::Sqlite => "sqlite",
        }
    }
}

/// A short-lived signed download URL and its expiry; the two travel
/// together or not at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedUrl {
    /// The URL.
    pub url: String,
    /// When it stops being valid, epoch milliseconds.
    pub expires_at_ms: i64,
}

/// The descriptor of a bootstrap segment to download.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentRef {
    /// `sha256:` + hex of the uncompressed bytes (§5.1).
    pub segment_id: String,
    /// Rows or sqlite.
    pub media_type: MediaType,
    /// The table the segment holds.
    pub table: String,
    /// Uncompressed size in bytes.
    pub byte_length: i64,
    /// Rows in the segment.
    pub row_count: i64,
    /// The bootstrap pin.
    pub as_of_commit_seq: i64,
    /// The scope digest the segment was built for (§3.5).
    pub scope_digest: String,
    /// Page start; `None` = first page.
    pub row_cursor: Option<String>,
    /// Page continuation; `None` = last page of the table.
    pub next_row_cursor: Option<String>,
    /// A signed URL, for clients that advertised the capability.
    pub url: Option<SignedUrl>,
}

impl SegmentRef {
    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let segment_id = r.str("SEGMENT_REF.segmentId")?;
        let media_type = match enum_byte(r, "SEGMENT_REF.mediaType", 2)? {
            1 => MediaType::Rows,
            _ => MediaType::Sqlite,
        };
        let table = r.str("SEGMENT_REF.table")?;
        let byte_length = r.i64("SEGMENT_REF.byteLength")?;
        let row_count = r.i64("SEGMENT_REF.rowCount")?;
        let as_of_commit_seq = r.i64("SEGMENT_REF.asOfCommitSeq")?;
        let scope_digest = r.str("SEGMENT_REF.scopeDigest")?;
        let row_cursor = r.opt("SEGMENT_REF.rowCursor", |r| r.str("SEGMENT_REF.rowCursor"))?;
        let next_row_cursor = r.opt("SEGMENT_REF.nextRowCursor", |r| {
            r.str("SEGMENT_REF.nextRowCursor")
        })?;
        let url = r.opt("SEGMENT_REF.url", |r| r.str("SEGMENT_REF.url"))?;
        let expires = r.opt("SEGMENT_REF.urlExpiresAtMs", |r| {
            r.i64("SEGMENT_REF.urlExpiresAtMs")
        })?;
        let url = match (url, expires) {
            (Some(url), Some(expires_at_ms)) => Some(SignedUrl { url, expires_at_ms }),
            (None, None) => None,
            _ => {
                return Err(DecodeError::Constraint {
                    rule: "SEGMENT_REF.urlExpiresAtMs is present iff url is",
                })
            }
        };
        Ok(Self {
            segment_id,
            media_type,
            table,
            byte_length,
            row_count,
            as_of_commit_seq,
            scope_digest,
            row_cursor,
            next_row_cursor,
            url,
        })
    }

    pub(crate) fn encode(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        put_str(out, &self.segment_id, "SEGMENT_REF.segmentId")?;
        put_u8(
            out,
            if self.media_type == MediaType::Rows {
                1
            } else {
                2
            },
        );
        put_str(out, &self.table, "SEGMENT_REF.table")?;
        put_i64(out, self.byte_length, "SEGMENT_REF.byteLength")?;
        put_i64(out, self.row_count, "SEGMENT_REF.rowCount")?;
        put_i64(out, self.as_of_commit_seq, "SEGMENT_REF.asOfCommitSeq")?;
        put_str(out, &self.scope_digest, "SEGMENT_REF.scopeDigest")?;
        put_opt(out, self.row_cursor.as_ref(), |o, v| {
            put_str(o, v, "SEGMENT_REF.rowCursor")
        })?;
        put_opt(out, self.next_row_cursor.as_ref(), |o, v| {
            put_str(o, v, "SEGMENT_REF.nextRowCursor")
        })?;
        put_opt(out, self.url.as_ref().map(|u| &u.url), |o, v| {
            put_str(o, v, "SEGMENT_REF.url")
        })?;
        put_opt(out, self.url.as_ref().map(|u| &u.expires_at_ms), |o, v| {
            put_i64(o, *v, "SEGMENT_REF.urlExpiresAtMs")
        })
    }
}

/// A rows segment carried inside the response. Its bytes are always a
/// structurally valid SSG2 segment: they can only be built by checking
/// ([`SegmentInline::from_bytes`]) or by encoding
/// ([`SegmentInline::from_segment`]), and they are kept as given so
/// re-encoding reproduces them exactly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentInline {
    bytes: Vec<u8>,
    rows: usize,
}

impl SegmentInline {
    /// Checks `bytes` is a structurally valid rows segment and keeps them.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<Self, DecodeError> {
        let rows = decode_segment(&bytes)?.blocks.iter().map(Vec::len).sum();
        Ok(Self { bytes, rows })
    }

    /// Bytes already known to be a valid rows segment (an
    /// [`EncodedSegment`](crate::segment::EncodedSegment)).
    pub(crate) fn from_valid(bytes: Vec<u8>, rows: usize) -> Self {
        Self { bytes, rows }
    }

    /// Encodes `segment` for inline delivery.
    pub fn from_segment(segment: &RowsSegment) -> Result<Self, EncodeError> {
        Ok(Self {
            bytes: encode_segment(segment)?,
            rows: segment.blocks.iter().map(Vec::len).sum(),
        })
    }

    /// Rows in the segment (known without decoding it again).
    pub fn row_count(&self) -> usize {
        self.rows
    }

    /// The segment's bytes (what `segmentId` would hash).
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The decoded segment.
    pub fn segment(&self) -> Result<RowsSegment, DecodeError> {
        decode_segment(&self.bytes)
    }

    /// Gives back the bytes.
    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }
}
