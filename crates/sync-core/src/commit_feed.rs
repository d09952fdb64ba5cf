//! Commits announced across processes: a storage shared by several server
//! processes may tell each of them about every commit any of them applied,
//! so realtime sockets held by one process hear of another's pushes.
//!
//! Optional: a storage that serves one process (an embedded database)
//! offers none, and a server then learns of its own commits only. A
//! listener that loses its connection says so ([`FeedEvent::Lost`]): the
//! server must then assume it missed commits, never that there were none.

use std::time::Duration;

use crate::Result;

/// A commit applied in a partition, by any process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitNotice {
    /// The partition.
    pub partition: String,
    /// The commit's sequence number.
    pub commit_seq: i64,
}

/// What a listener heard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FeedEvent {
    /// A commit was applied (notices of one partition arrive in commit
    /// order; a notice may repeat or cover earlier commits).
    Commit(CommitNotice),
    /// Nothing within the wait.
    Idle,
    /// The listener's connection is gone: notices may have been missed
    /// since the last one. Open a new listener.
    Lost,
}

/// Where a server listens for commits (see the module documentation).
pub trait CommitFeed: Send + Sync {
    /// A new listener; every commit applied after this returns is heard.
    fn listen(&self) -> Result<Box<dyn CommitListener>>;
}

/// One listening connection.
pub trait CommitListener: Send {
    /// Waits up to `wait` for the next event.
    fn next(&mut self, wait: Duration) -> FeedEvent;
}
