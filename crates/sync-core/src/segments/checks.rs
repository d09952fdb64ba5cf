//! The argument checks every [`SegmentStore`](crate::segments::SegmentStore)
//! runs before touching storage, in this order.

use crate::error::{Error, ErrorCode, Result};
use crate::limits::MAX_SAFE_INTEGER;
use crate::segments::store::{SegmentLimits, MAX_SEGMENT_PRUNE_BATCH};
use crate::segments::types::{NewSegment, SegmentBuildKey};
use crate::validate;

/// The prefix of every segment id.
pub const SEGMENT_ID_PREFIX: &str = "sha256:";

/// Whether `segment_id` is a content address: [`SEGMENT_ID_PREFIX`] and 64
/// lowercase hex digits.
pub fn check_segment_id(segment_id: &str) -> bool {
    segment_id
        .strip_prefix(SEGMENT_ID_PREFIX)
        .is_some_and(|hex| {
            hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        })
}

/// Checks a put: the partition, the id, the build key, the counts and
/// times, then the size against `limits` (`sync.storage.segment_too_large`,
/// with `details.max_bytes` and `details.byte_length`).
pub fn check_put(segment: &NewSegment, limits: SegmentLimits) -> Result<()> {
    validate::partition(&segment.partition)?;
    if !check_segment_id(&segment.segment_id) {
        return Err(Error::invalid_argument(
            "segment_id",
            "not_a_content_address",
        ));
    }
    check_key(&segment.key)?;
    if !(0..=MAX_SAFE_INTEGER).contains(&segment.row_count) {
        return Err(Error::invalid_argument("row_count", "out_of_range"));
    }
    validate::non_negative("created_at_ms", segment.created_at_ms)?;
    if segment.expires_at_ms <= segment.created_at_ms {
        return Err(Error::invalid_argument(
            "expires_at_ms",
            "not_after_created_at_ms",
        ));
    }
    if segment.bytes.len() > limits.max_segment_bytes {
        return Err(Error::new(ErrorCode::SegmentTooLarge)
            .detail("max_bytes", limits.max_segment_bytes)
            .detail("byte_length", segment.bytes.len()));
    }
    Ok(())
}

/// Checks a build key: a table, a scope digest, a schema version, a
/// safe-integer commit and a page of at least one row.
pub fn check_key(key: &SegmentBuildKey) -> Result<()> {
    if key.table.is_empty() {
        return Err(Error::invalid_argument("table", "empty"));
    }
    if key.scope_digest.is_empty() {
        return Err(Error::invalid_argument("scope_digest", "empty"));
    }
    validate::schema_version(key.schema_version)?;
    validate::safe_non_negative("as_of_commit_seq", key.as_of_commit_seq)?;
    if key.page_rows == 0 {
        return Err(Error::invalid_argument("page_rows", "zero"));
    }
    Ok(())
}

/// Checks the batch of a prune: 1..=[`MAX_SEGMENT_PRUNE_BATCH`].
pub fn check_prune_limit(limit: u32) -> Result<()> {
    if !(1..=MAX_SEGMENT_PRUNE_BATCH).contains(&limit) {
        return Err(Error::invalid_argument("limit", "out_of_range"));
    }
    Ok(())
}
