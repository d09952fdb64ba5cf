//! How a wire service delivers bootstrap segments.

use std::sync::Arc;

use sync_core::segments::{SegmentStore, DEFAULT_SEGMENT_TTL_MS};
use sync_core::{Clock, SystemClock};

/// Largest rows segment sent inline (SSP2 §5.7: servers should inline
/// segments under 256 KiB): 256 KiB.
pub const DEFAULT_INLINE_LIMIT: usize = 256 * 1024;

/// The segment delivery settings of a [`crate::WireService`].
#[derive(Clone)]
pub struct WireConfig {
    /// A rows segment of at most this many bytes goes inline when the
    /// client accepts inline rows; a larger one goes by reference when the
    /// client accepts references and a store is configured.
    pub inline_limit: usize,
    /// How long a stored segment stays downloadable, in ms (default 24 h).
    pub segment_ttl_ms: i64,
    /// Where referenced segments are kept; `None`: a bounded
    /// [`MemorySegmentStore`](sync_core::segments::MemorySegmentStore) of
    /// this process (enough for one server process; several processes
    /// behind one balancer need the storage's own store,
    /// `ServerStorage::segment_store`).
    pub segment_store: Option<Arc<dyn SegmentStore>>,
    /// The clock segment expiry is judged by (give the engine's clock).
    pub clock: Arc<dyn Clock>,
}

impl Default for WireConfig {
    /// 256 KiB inline limit, 24 h TTL, no segment store, the system clock.
    fn default() -> Self {
        Self {
            inline_limit: DEFAULT_INLINE_LIMIT,
            segment_ttl_ms: DEFAULT_SEGMENT_TTL_MS,
            segment_store: None,
            clock: Arc::new(SystemClock),
        }
    }
}

impl std::fmt::Debug for WireConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WireConfig")
            .field("inline_limit", &self.inline_limit)
            .field("segment_ttl_ms", &self.segment_ttl_ms)
            .field("segment_store", &self.segment_store.is_some())
            .finish()
    }
}
