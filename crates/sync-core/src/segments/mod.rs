//! Bootstrap segments at rest: the [`SegmentStore`] contract, the types it
//! stores and answers with, the argument checks every implementation runs
//! first, and [`MemorySegmentStore`], a bounded store in process memory.
//!
//! A segment is a content-addressed blob of snapshot rows of one table (its
//! id is `"sha256:"` and the lowercase hex digest of its uncompressed
//! bytes). Segments are cache entries, not durable state: each carries an
//! expiry judged by the caller's clock, and a store may forget an expired
//! one at any time. The dialects keep theirs in the storage's own database
//! (`ServerStorage::segment_store`), so every server process in front of
//! one database serves every other's segments.

mod checks;
mod memory;
mod store;
mod types;

pub use checks::{check_key, check_prune_limit, check_put, check_segment_id, SEGMENT_ID_PREFIX};
pub use memory::{MemoryLimits, MemorySegmentStore};
pub use store::{
    SegmentLimits, SegmentStore, DEFAULT_MAX_SEGMENT_BYTES, DEFAULT_SEGMENT_TTL_MS,
    MAX_SEGMENT_PRUNE_BATCH,
};
pub use types::{
    NewSegment, SegmentBuildKey, SegmentFetch, SegmentMediaType, SegmentMeta, StoredSegment,
};
