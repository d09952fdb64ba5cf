//! Runner configuration (`rfc0007-migration-barrier.md` §8.1).

use sync_core::limits::{DEFAULT_BACKFILL_ATTEMPTS, DEFAULT_BACKFILL_BATCH, MAX_LOOKUP_LIMIT};
use sync_core::{Error, Result};

/// How the runner batches, retries and names its commits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunnerConfig {
    /// Source rows per transaction, 1..=1000 (default 500).
    pub batch_size: i64,
    /// Full passes plus retries after `busy`, `connection_lost` or
    /// `outcome_unknown` before giving up (default 10).
    pub max_attempts: u32,
    /// First retry delay in ms, doubled per retry and capped at 5 000 (default 100).
    pub retry_backoff_ms: u64,
    /// Prefix of the runner's client id (`<prefix>:<name>`) and actor id (default `sync.backfill`).
    pub client_id_prefix: String,
}

impl Default for RunnerConfig {
    fn default() -> Self {
        Self {
            batch_size: DEFAULT_BACKFILL_BATCH,
            max_attempts: DEFAULT_BACKFILL_ATTEMPTS,
            retry_backoff_ms: 100,
            client_id_prefix: "sync.backfill".to_owned(),
        }
    }
}

/// Longest pause between retries.
pub const MAX_BACKOFF_MS: u64 = 5_000;

impl RunnerConfig {
    /// Checks `batch_size ∈ 1..=1000` (`sync.storage.invalid_argument`, `argument = batch_size`).
    pub fn validate(&self) -> Result<()> {
        if !(1..=MAX_LOOKUP_LIMIT).contains(&self.batch_size) {
            return Err(Error::invalid_argument("batch_size", "out_of_range"));
        }
        Ok(())
    }

    /// The delay before retry number `retry` (1-based).
    pub fn backoff_ms(&self, retry: u32) -> u64 {
        let shift = retry.saturating_sub(1).min(16);
        self.retry_backoff_ms
            .saturating_mul(1u64 << shift)
            .min(MAX_BACKOFF_MS)
    }
}
