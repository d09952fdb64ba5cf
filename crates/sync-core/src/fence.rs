//! The writer-fence predicate (`storage-contract.md` §7.3).

/// Whether a commit stamped with `writer_version` passes the effective fence
/// `required`. Mirrors the database trigger, which remains the authority.
pub fn writer_fence_allows(required: Option<i32>, writer_version: i32) -> bool {
    required.is_none_or(|fence| writer_version >= fence)
}

/// The effective fence: the larger of a partition fence and the database-wide fence.
pub fn effective_fence(partition: Option<i32>, database: Option<i32>) -> Option<i32> {
    match (partition, database) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}
