//! Blob existence (`engine.md` §4.7).

use std::fmt;

/// A blob store failure; the round fails as an internal error.
#[derive(Debug)]
pub struct BlobStoreError(pub Box<dyn std::error::Error + Send + Sync>);

impl fmt::Display for BlobStoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "blob store failed: {}", self.0)
    }
}

impl std::error::Error for BlobStoreError {}

/// Answers whether a blob exists. Runs inside the partition lock: should be quick.
pub trait BlobExistence: Send + Sync {
    /// Whether `blob_id` exists for `partition`.
    fn exists(&self, partition: &str, blob_id: &str) -> Result<bool, BlobStoreError>;
}
