//! [`MemorySegmentStore`]: segments in process memory, bounded by count and
//! total bytes, the oldest evicted first.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::error::Result;
use crate::segments::checks::{check_key, check_prune_limit, check_put, check_segment_id};
use crate::segments::store::{SegmentLimits, SegmentStore};
use crate::segments::types::{
    NewSegment, SegmentBuildKey, SegmentFetch, SegmentMeta, StoredSegment,
};
use crate::validate;

/// The bounds of a [`MemorySegmentStore`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryLimits {
    /// Per-segment limits (a larger segment is refused, never stored).
    pub segment: SegmentLimits,
    /// Most bytes held in total; putting more evicts the oldest segments.
    pub max_total_bytes: usize,
    /// Most segments held; putting more evicts the oldest segments.
    pub max_segments: usize,
}

impl Default for MemoryLimits {
    /// 64 MiB per segment, 512 MiB and 10 000 segments in total.
    fn default() -> Self {
        Self {
            segment: SegmentLimits::default(),
            max_total_bytes: 512 * 1024 * 1024,
            max_segments: 10_000,
        }
    }
}

/// `(partition, segment_id, scope_digest)`.
type EntryKey = (String, String, String);

#[derive(Debug)]
struct Entry {
    meta: SegmentMeta,
    bytes: Vec<u8>,
    /// Insertion order: the smallest is evicted first.
    seq: u64,
}

#[derive(Debug, Default)]
struct Inner {
    entries: BTreeMap<EntryKey, Entry>,
    by_age: BTreeMap<u64, EntryKey>,
    total_bytes: usize,
    next_seq: u64,
}

impl Inner {
    fn remove(&mut self, key: &EntryKey) {
        if let Some(entry) = self.entries.remove(key) {
            self.by_age.remove(&entry.seq);
            self.total_bytes -= entry.bytes.len();
        }
    }

    /// Evicts the oldest segments until one of `len` bytes fits.
    fn make_room(&mut self, len: usize, limits: &MemoryLimits) {
        while !self.entries.is_empty()
            && (self.entries.len() >= limits.max_segments
                || self.total_bytes + len > limits.max_total_bytes)
        {
            let Some((_, oldest)) = self.by_age.pop_first() else {
                return;
            };
            if let Some(entry) = self.entries.remove(&oldest) {
                self.total_bytes -= entry.bytes.len();
            }
        }
    }
}

/// A [`SegmentStore`] in process memory, for one server process (or tests):
/// bounded by [`MemoryLimits`], evicting the segments put longest ago first,
/// safe to share between threads. Segments do not survive the process and
/// are not seen by other processes.
#[derive(Debug, Default)]
pub struct MemorySegmentStore {
    limits: MemoryLimits,
    inner: Mutex<Inner>,
}

impl MemorySegmentStore {
    /// An empty store with these bounds. A per-segment limit above the
    /// total is lowered to the total (a segment never evicts itself), and
    /// at least one segment is always allowed.
    pub fn new(limits: MemoryLimits) -> Self {
        let mut limits = limits;
        limits.segment.max_segment_bytes =
            limits.segment.max_segment_bytes.min(limits.max_total_bytes);
        limits.max_segments = limits.max_segments.max(1);
        Self {
            limits,
            inner: Mutex::new(Inner::default()),
        }
    }

    /// The bounds in force.
    pub fn limits(&self) -> MemoryLimits {
        self.limits
    }

    /// Segments held.
    pub fn len(&self) -> usize {
        self.lock().entries.len()
    }

    /// Whether no segment is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes held in total.
    pub fn total_bytes(&self) -> usize {
        self.lock().total_bytes
    }

    /// The state; a panic of another thread mid-update cannot leave it torn
    /// (every update completes before it can panic), so poison is ignored.
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl SegmentStore for MemorySegmentStore {
    fn segment_limits(&self) -> SegmentLimits {
        self.limits.segment
    }

    fn put_segment(&self, segment: &NewSegment) -> Result<SegmentMeta> {
        check_put(segment, self.limits.segment)?;
        let key = (
            segment.partition.clone(),
            segment.segment_id.clone(),
            segment.key.scope_digest.clone(),
        );
        let mut inner = self.lock();
        if let Some(entry) = inner.entries.get_mut(&key) {
            entry.meta.expires_at_ms = entry.meta.expires_at_ms.max(segment.expires_at_ms);
            return Ok(entry.meta.clone());
        }
        inner.make_room(segment.bytes.len(), &self.limits);
        let seq = inner.next_seq;
        inner.next_seq += 1;
        inner.total_bytes += segment.bytes.len();
        inner.by_age.insert(seq, key.clone());
        let meta = segment.meta();
        inner.entries.insert(
            key,
            Entry {
                meta: meta.clone(),
                bytes: segment.bytes.clone(),
                seq,
            },
        );
        Ok(meta)
    }

    fn find_live_segment(
        &self,
        partition: &str,
        key: &SegmentBuildKey,
        now_ms: i64,
    ) -> Result<Option<SegmentMeta>> {
        validate::partition(partition)?;
        check_key(key)?;
        let inner = self.lock();
        Ok(inner
            .entries
            .values()
            .filter(|e| e.meta.partition == partition && e.meta.key == *key)
            .filter(|e| e.meta.is_live(now_ms))
            .max_by_key(|e| e.meta.expires_at_ms)
            .map(|e| e.meta.clone()))
    }

    fn get_segment(
        &self,
        partition: &str,
        segment_id: &str,
        scope_digest: &str,
        now_ms: i64,
    ) -> Result<SegmentFetch> {
        validate::partition(partition)?;
        if !check_segment_id(segment_id) {
            return Ok(SegmentFetch::NotFound);
        }
        let inner = self.lock();
        let key = (
            partition.to_owned(),
            segment_id.to_owned(),
            scope_digest.to_owned(),
        );
        if let Some(entry) = inner.entries.get(&key) {
            return Ok(if entry.meta.is_live(now_ms) {
                SegmentFetch::Found(Box::new(StoredSegment {
                    meta: entry.meta.clone(),
                    bytes: entry.bytes.clone(),
                }))
            } else {
                SegmentFetch::Expired
            });
        }
        let start = (partition.to_owned(), segment_id.to_owned(), String::new());
        let other_scopes = inner
            .entries
            .range(start..)
            .next()
            .is_some_and(|((p, id, _), _)| p == partition && id == segment_id);
        Ok(if other_scopes {
            SegmentFetch::ScopeMismatch
        } else {
            SegmentFetch::NotFound
        })
    }

    fn delete_expired_segments(&self, now_ms: i64, limit: u32) -> Result<u64> {
        check_prune_limit(limit)?;
        let mut inner = self.lock();
        let expired: Vec<EntryKey> = inner
            .by_age
            .values()
            .filter(|key| {
                inner
                    .entries
                    .get(*key)
                    .is_some_and(|e| !e.meta.is_live(now_ms))
            })
            .take(usize::try_from(limit).unwrap_or(usize::MAX))
            .cloned()
            .collect();
        for key in &expired {
            inner.remove(key);
        }
        Ok(expired.len() as u64)
    }
}
