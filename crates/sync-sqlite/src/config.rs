//! Configuration of a SQLite storage (`dialects.md` §2.1).

use std::fmt;
use std::sync::Arc;

use sync_core::limits::{DEFAULT_BUSY_TIMEOUT_MS, DEFAULT_POOL_WAIT_MS, DEFAULT_SQLITE_READERS};
use sync_core::segments::SegmentLimits;
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

    /// The level `PRAGMA synchronous` reads back (1 `NORMAL`, 2 `FULL`).
    pub fn level(self) -> i64 {
        match self {
            Synchronous::Normal => 1,
            Synchronous::Full => 2,
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

/// Group commit on the writer (`docs/decisions.md`, "Group commit on
/// SQLite"): transactions from `begin` that queue for the writer while
/// another one runs are run one after another as savepoints inside one
/// SQLite transaction, committed once. Each member's `commit` returns only
/// after that `COMMIT` succeeded; a failed `COMMIT` fails every member
/// (`sync.storage.group_commit_failed`, nothing of the group persisted).
/// Pool-level writes and schema bumps never join a group.
///
/// A member's `commit` waits for the members after it, so a thread must not
/// hold a transaction open while it waits for another thread's `commit` to
/// return: the engine and the backfill runner never do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupCommit {
    /// The most transactions one `COMMIT` carries; 1 turns grouping off.
    pub max_members: u32,
    /// How long a group keeps taking new members after its first one ended,
    /// in ms; the member ending after that commits the group.
    pub max_wait_ms: u64,
}

impl GroupCommit {
    /// No grouping: every transaction commits on its own (the default).
    pub const OFF: GroupCommit = GroupCommit {
        max_members: 1,
        max_wait_ms: 0,
    };

    /// Grouping with the documented bounds: at most 64 members, open for
    /// at most 10 ms.
    pub const ON: GroupCommit = GroupCommit {
        max_members: 64,
        max_wait_ms: 10,
    };

    /// Whether transactions may share a `COMMIT`.
    pub fn enabled(self) -> bool {
        self.max_members > 1
    }
}

impl Default for GroupCommit {
    fn default() -> Self {
        GroupCommit::OFF
    }
}

/// WAL checkpoints (`docs/decisions.md`, "WAL checkpoints off the push
/// path"): the writer never checkpoints (`wal_autocheckpoint = 0`); a
/// background thread with its own connection runs a `PASSIVE` checkpoint
/// after every `every_commits` commits, and a `TRUNCATE` checkpoint when
/// the WAL file is larger than `truncate_above_pages` pages afterwards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WalCheckpoints {
    /// Commits between two background `PASSIVE` checkpoints (at least 1).
    pub every_commits: u64,
    /// Size of the WAL file, in pages, above which a pass follows its
    /// `PASSIVE` checkpoint with `TRUNCATE` (waits for readers and holds off
    /// writers meanwhile, then empties the WAL file). SQLite writes the WAL
    /// from its beginning again after a complete checkpoint, so the file
    /// grows past the bound only when readers keep a checkpoint from
    /// finishing or many commits come between two passes.
    pub truncate_above_pages: u64,
}

impl Default for WalCheckpoints {
    fn default() -> Self {
        WalCheckpoints {
            every_commits: 100,
            truncate_above_pages: 4_000,
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
    /// `PRAGMA synchronous` of the writes that only refresh an existing
    /// client record of the same actor — a pull's cursor, subscriptions and
    /// activity time (`put_client_record`) and an acknowledgement
    /// (`advance_client_cursor`). Default [`Synchronous::Normal`]: such a
    /// write does not wait for an `fsync` of the WAL, and a power loss can
    /// lose only such writes of the last moments, leaving the record as the
    /// previous durable write left it — a cursor behind the client's, which
    /// retention treats conservatively (`docs/decisions.md`, "Client
    /// records without an fsync per pull"). A new record, a record of
    /// another actor and every push keep [`SqliteConfig::synchronous`]. It
    /// matters only when `synchronous` is `Full`.
    pub client_record_synchronous: Synchronous,
    /// Group commit of queued transactions (default off: [`GroupCommit::OFF`]).
    pub group_commit: GroupCommit,
    /// Background WAL checkpoints (default `None`: SQLite's own automatic
    /// checkpoint on the committing connection; `Some` moves checkpoints to
    /// a background thread — opt-in until measured on an idle machine,
    /// `docs/benchmarks.md`).
    pub wal_checkpoints: Option<WalCheckpoints>,
    /// Source of installation timestamps (checkpoints declared by `ensure_schema`).
    pub clock: Arc<dyn Clock>,
    /// The limits of the segment store in the file
    /// (`ServerStorage::segment_store`); default 64 MiB per segment.
    pub segment_limits: SegmentLimits,
    /// `PRAGMA page_size` of a database file this storage creates, in bytes
    /// (a power of two from 512 to 65 536; default `None`: SQLite's own,
    /// 4 096). It applies only when [`crate::SqliteStorage::open`] creates
    /// the file: an existing file keeps the page size it was created with
    /// (WAL mode fixes it), whatever is configured here.
    ///
    /// A push rewrites one page of every B-tree it touches and WAL mode logs
    /// each whole page, so smaller pages write fewer bytes per push (about
    /// 61 KB of WAL per single-row push at 4 096, 12 KB at 512) at the cost
    /// of deeper trees for reads: `docs/benchmarks.md`, "SQLite page size
    /// and the temporary storage of a push", has the figures,
    /// `docs/decisions.md`, "SQLite page size: an option, 4 KiB by default",
    /// why the default stays.
    pub page_size: Option<u32>,
    /// `PRAGMA mmap_size` of the reader connections, in bytes (default
    /// [`DEFAULT_READER_MMAP_SIZE`], 256 MiB; 0 turns memory-mapped reads
    /// off). A reader reads the pages of the database file up to this size
    /// through a memory map of the operating system's page cache instead of
    /// a `read` call and a copy into its own cache per page: a one-list
    /// bootstrap scan reads about 1.4 times as many rows a second on a
    /// table larger than a reader's page cache (`docs/benchmarks.md`,
    /// "Memory-mapped reads"). Pages still in the WAL are read as before,
    /// and the writer never maps. SQLite caps the size at its compile-time
    /// maximum (2 GiB in the bundled library).
    ///
    /// The trade (`docs/decisions.md`, "Memory-mapped reads on SQLite"):
    /// an I/O error while a reader touches a mapped page stops the process
    /// (`SIGBUS`) instead of failing that statement with
    /// `sync.storage.backend`. Set 0 where a failing disk must not take the
    /// process down.
    pub reader_mmap_size: u64,
}

/// Default [`SqliteConfig::reader_mmap_size`]: 256 MiB.
pub const DEFAULT_READER_MMAP_SIZE: u64 = 256 << 20;

/// Smallest page size SQLite accepts.
pub const MIN_PAGE_SIZE: u32 = 512;
/// Largest page size SQLite accepts.
pub const MAX_PAGE_SIZE: u32 = 65_536;

/// Whether SQLite accepts `size` as a page size (a power of two from
/// [`MIN_PAGE_SIZE`] to [`MAX_PAGE_SIZE`]); SQLite itself silently ignores
/// any other value, so the storage refuses it instead.
pub fn valid_page_size(size: u32) -> bool {
    size.is_power_of_two() && (MIN_PAGE_SIZE..=MAX_PAGE_SIZE).contains(&size)
}

impl Default for SqliteConfig {
    fn default() -> Self {
        Self {
            readers: DEFAULT_SQLITE_READERS,
            busy_timeout_ms: DEFAULT_BUSY_TIMEOUT_MS,
            writer_wait_ms: DEFAULT_POOL_WAIT_MS,
            synchronous: Synchronous::Full,
            client_record_synchronous: Synchronous::Normal,
            group_commit: GroupCommit::OFF,
            wal_checkpoints: None,
            clock: Arc::new(SystemClock),
            segment_limits: SegmentLimits::default(),
            page_size: None,
            reader_mmap_size: DEFAULT_READER_MMAP_SIZE,
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
            .field("client_record_synchronous", &self.client_record_synchronous)
            .field("group_commit", &self.group_commit)
            .field("wal_checkpoints", &self.wal_checkpoints)
            .field("clock", &self.clock)
            .field("segment_limits", &self.segment_limits)
            .field("page_size", &self.page_size)
            .field("reader_mmap_size", &self.reader_mmap_size)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn with_clock_keeps_the_clock_it_is_given() {
        let config = SqliteConfig::with_clock(Arc::new(sync_core::ManualClock::new(42)));
        assert_eq!(config.clock.now_ms(), 42);
    }

    #[test]
    fn page_sizes_are_the_powers_of_two_sqlite_accepts() {
        for size in [512, 1_024, 4_096, 65_536] {
            assert!(valid_page_size(size), "{size}");
        }
        for size in [0, 1, 256, 511, 513, 1_000, 4_095, 131_072, u32::MAX] {
            assert!(!valid_page_size(size), "{size}");
        }
    }
}
