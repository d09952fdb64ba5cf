//! Configuration of a SQLite storage (`dialects.md` §2.1).

use std::fmt;
use std::sync::Arc;

use sync_core::limits::{DEFAULT_BUSY_TIMEOUT_MS, DEFAULT_POOL_WAIT_MS, DEFAULT_SQLITE_READERS};
use sync_core::{Clock, SystemClock};

/// `PRAGMA synchronous` of the writer connection: what an acknowledged
/// commit survives. In WAL mode (always used here) both levels survive a
/// crash of the application process; they differ on an operating-system
/// crash or a power loss.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Synchronous {
    /// `FULL` (the default): the WAL is synced to disk before a commit
    /// returns, so an acknowledged push survives a process crash, an
    /// operating-system crash and a power loss.
    #[default]
    Full,
    /// `NORMAL` (opt-in, for speed): the WAL is synced only at checkpoints.
    /// An acknowledged push survives a process crash, but the pushes
    /// acknowledged in the last moments before an operating-system crash or
    /// a power loss can be lost — and a sync client has already dropped
    /// them from its outbox, so nothing ever re-sends them. The database
    /// itself stays consistent.
    Normal,
}

impl Synchronous {
    /// The PRAGMA value.
    pub fn as_pragma(self) -> &'static str {
        match self {
            Synchronous::Normal => "NORMAL",
            Synchronous::Full => "FULL",
        }
    }

    /// The level for a `PRAGMA synchronous` read-back (1 `NORMAL`, 2 `FULL`);
    /// `None` for the levels this storage never sets.
    pub fn from_level(level: i64) -> Option<Self> {
        match level {
            1 => Some(Synchronous::Normal),
            2 => Some(Synchronous::Full),
            _ => None,
        }
    }

    /// Parses `full` / `normal` (any case), as written in a database URL.
    pub fn parse(text: &str) -> Option<Self> {
        if text.eq_ignore_ascii_case("full") {
            Some(Synchronous::Full)
        } else if text.eq_ignore_ascii_case("normal") {
            Some(Synchronous::Normal)
        } else {
            None
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
    /// `PRAGMA synchronous` of the writer (default [`Synchronous::Full`]:
    /// acknowledged pushes survive a power loss; `Normal` is the documented
    /// opt-in that trades that for speed).
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
            synchronous: Synchronous::Full,
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
