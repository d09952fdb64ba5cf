//! The [`SegmentStore`] contract.

use std::fmt;

use crate::error::Result;
use crate::segments::types::{NewSegment, SegmentBuildKey, SegmentFetch, SegmentMeta};

/// Default largest segment a store accepts: 64 MiB.
pub const DEFAULT_MAX_SEGMENT_BYTES: usize = 64 * 1024 * 1024;
/// Default lifetime of a segment: 24 hours, in ms.
pub const DEFAULT_SEGMENT_TTL_MS: i64 = 24 * 60 * 60 * 1000;
/// Most segments one [`SegmentStore::delete_expired_segments`] call deletes.
pub const MAX_SEGMENT_PRUNE_BATCH: u32 = 10_000;

/// The limits a store enforces on every put.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentLimits {
    /// Largest segment, in bytes; a larger put is
    /// `sync.storage.segment_too_large`.
    pub max_segment_bytes: usize,
}

impl Default for SegmentLimits {
    fn default() -> Self {
        Self {
            max_segment_bytes: DEFAULT_MAX_SEGMENT_BYTES,
        }
    }
}

/// Where bootstrap segments live between their build and their download.
///
/// A segment belongs to one partition and is stored for one scope digest:
/// it is keyed by `(partition, segment_id, scope_digest)`. Identical bytes
/// built for two different scope sets are two entries, so each download is
/// judged against the scopes it was issued for. Expiry is judged by the
/// `now_ms` the caller passes, never by a clock of the store.
///
/// Every method checks its arguments before touching storage
/// ([`crate::segments::check_put`]); implementations are `Send + Sync` and
/// shared behind `Arc`.
pub trait SegmentStore: Send + Sync + fmt::Debug {
    /// The limits this store enforces.
    fn segment_limits(&self) -> SegmentLimits;

    /// Stores a segment and returns it as stored. Idempotent: a segment
    /// already stored under the same `(partition, segment_id, scope_digest)`
    /// stays one segment with its first metadata and bytes, and its expiry
    /// becomes the later of the two.
    ///
    /// Refused with `sync.storage.segment_too_large` above
    /// [`SegmentLimits::max_segment_bytes`], with
    /// `sync.storage.invalid_partition` or `sync.storage.invalid_argument`
    /// for a malformed field.
    fn put_segment(&self, segment: &NewSegment) -> Result<SegmentMeta>;

    /// A segment of `partition` built for `key` that is live at `now_ms`,
    /// the one expiring last when there are several; for reuse across
    /// clients.
    fn find_live_segment(
        &self,
        partition: &str,
        key: &SegmentBuildKey,
        now_ms: i64,
    ) -> Result<Option<SegmentMeta>>;

    /// The segment `segment_id` of `partition` stored for `scope_digest`,
    /// judged at `now_ms`. A segment of another partition is
    /// [`SegmentFetch::NotFound`], exactly like one never stored; so is an
    /// id that is not a content address.
    fn get_segment(
        &self,
        partition: &str,
        segment_id: &str,
        scope_digest: &str,
        now_ms: i64,
    ) -> Result<SegmentFetch>;

    /// Deletes at most `limit` segments (of any partition) expired at
    /// `now_ms` and returns how many it deleted; call again while it
    /// returns `limit`. `limit` is 1..=[`MAX_SEGMENT_PRUNE_BATCH`]
    /// (`sync.storage.invalid_argument` otherwise).
    fn delete_expired_segments(&self, now_ms: i64, limit: u32) -> Result<u64>;
}
