//! A storage's own segment store as a shareable [`SegmentStore`].

use std::sync::Arc;

use sync_core::segments::{
    NewSegment, SegmentBuildKey, SegmentFetch, SegmentLimits, SegmentMeta, SegmentStore,
};
use sync_core::ServerStorage;

/// The segment store of a storage's own database
/// ([`ServerStorage::segment_store`]) behind an owned handle, so it can be
/// configured as [`crate::WireConfig::segment_store`]. Every server process
/// over that database serves the segments every other one built.
#[derive(Clone)]
pub struct StorageSegmentStore {
    storage: Arc<dyn ServerStorage>,
}

impl std::fmt::Debug for StorageSegmentStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StorageSegmentStore")
            .finish_non_exhaustive()
    }
}

impl StorageSegmentStore {
    /// The store of `storage`, or `None` when it keeps no segments.
    pub fn of(storage: Arc<dyn ServerStorage>) -> Option<Self> {
        storage.segment_store()?;
        Some(Self { storage })
    }

    fn store(&self) -> sync_core::Result<&dyn SegmentStore> {
        self.storage.segment_store().ok_or_else(|| {
            sync_core::Error::invalid_argument("segment_store", "storage keeps no segments")
        })
    }
}

impl SegmentStore for StorageSegmentStore {
    fn segment_limits(&self) -> SegmentLimits {
        self.store()
            .map(SegmentStore::segment_limits)
            .unwrap_or_default()
    }

    fn put_segment(&self, segment: &NewSegment) -> sync_core::Result<SegmentMeta> {
        self.store()?.put_segment(segment)
    }

    fn find_live_segment(
        &self,
        partition: &str,
        key: &SegmentBuildKey,
        now_ms: i64,
    ) -> sync_core::Result<Option<SegmentMeta>> {
        self.store()?.find_live_segment(partition, key, now_ms)
    }

    fn get_segment(
        &self,
        partition: &str,
        segment_id: &str,
        scope_digest: &str,
        now_ms: i64,
    ) -> sync_core::Result<SegmentFetch> {
        self.store()?
            .get_segment(partition, segment_id, scope_digest, now_ms)
    }

    fn delete_expired_segments(&self, now_ms: i64, limit: u32) -> sync_core::Result<u64> {
        self.store()?.delete_expired_segments(now_ms, limit)
    }
}
