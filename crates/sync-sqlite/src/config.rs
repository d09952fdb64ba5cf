//! Configuration of a SQLite storage (`dialects.md` §2.1).

use std::fmt;
use std::sync::Arc;

use sync_core::limits::{DEFAULT_BUSY_TIMEOUT_MS, DEFAULT_POOL_WAIT_MS, DEFAULT_SQLITE_READERS};
use sync_core::{Clock, SystemClock};

/// `PRAGMA synchronous` of the writer connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Synchronous {
    /// `NORMAL`: durable across application crashes; in WAL mode the last
    /// commits may be lost on power failure.
    #[default]
    Normal,
    /// `FULL`: every commit is synced to disk.
    Full,
}

impl Synchronous {
    /// The PRAGMA value.
    pub fn as_pragma(self) -> &'static str {
        match self {
            Synchronous::Normal => "NORMAL",
            Synchronous::Full => "FULL",
        }
    }
}

/// How [`crate::SqliteStorage::open`] configures its pools and connections.
#[derive(Clone)]
pub struct SqliteConfig {
    /// Size of the reader pool (default 8). At least 1 is used.
    pub readers: u32,
    /// `PRAGMA busy_timeout` on every connection, in ms (default 5 000): how
    /// long a statement waits for another process holding a lock.
    pub busy_timeout_ms: u64,
    /// How long `begin` and pool writes wait for the single writer connection
    /// held by another thread of this process, in ms (default 30 000).
    pub writer_wait_ms: u64,
    /// `PRAGMA synchronous` (default `NORMAL`).
    pub synchronous: Synchronous,
    /// Source of installation timestamps (checkpoints declared by `ensure_schema`).
    pub clock: Arc<dyn Clock>,
}

impl Default for SqliteConfig {
    fn default() -> Self {
        Self {
            readers: DEFAULT_SQLITE_READERS,
            busy_timeout_ms: DEFAULT_BUSY_TIMEOUT_MS,
            writer_wait_ms: DEFAULT_POOL_WAIT_MS,
            synchronous: Synchronous::Normal,
            clock: Arc::new(SystemClock),
        }
    }
}

impl SqliteConfig {
    /// The default configuration with another clock.
    pub fn with_clock(clock: Arc<dyn Clock>) -> Self {
        Self {
            clock,
            ..Self::default()
        }
    }
}

impl fmt::Debug for SqliteConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteConfig")
            .field("readers", &self.readers)
            .field("busy_timeout_ms", &self.busy_timeout_ms)
            .field("writer_wait_ms", &self.writer_wait_ms)
            .field("synchronous", &self.synchronous)
            .field("clock", &self.clock)
            .finish()
    }
}
