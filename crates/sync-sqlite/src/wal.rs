//! WAL checkpoints off the push path: the writer runs with
//! `wal_autocheckpoint = 0`, so no commit copies WAL pages into the
//! database file; a background thread with its own connection does it
//! (`PASSIVE` every `every_commits` commits, `TRUNCATE` when the WAL still
//! holds more than `truncate_above_pages` pages afterwards). The thread
//! stops, and its connection closes, when the storage is dropped.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};
use sync_core::{Error, ErrorCode, Result};

use crate::config::WalCheckpoints;
use crate::errors::DbResultExt;

/// What one checkpoint pass found and did, in WAL pages (frames).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WalCheckpointReport {
    /// Pages in the WAL when the `PASSIVE` checkpoint ran.
    pub wal_pages: i64,
    /// Of those, pages copied into the database file.
    pub checkpointed_pages: i64,
    /// Whether the pass also ran `TRUNCATE` (the WAL stayed above the bound).
    pub truncated: bool,
    /// Passes run by the checkpointer so far, this one included.
    pub passes: u64,
}

enum Request {
    /// A pass after enough commits.
    Pass,
    /// A pass whose report is wanted.
    Report(mpsc::Sender<Result<WalCheckpointReport>>),
}

/// The background checkpointer of one storage.
#[derive(Debug)]
pub(crate) struct Checkpointer {
    every: u64,
    commits: AtomicU64,
    sender: Mutex<Option<SyncSender<Request>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Request::Pass => "Pass",
            Request::Report(_) => "Report",
        })
    }
}

impl Checkpointer {
    /// Opens the checkpointer's own connection on `file` and starts its thread.
    pub(crate) fn start(file: &Path, busy: Duration, config: WalCheckpoints) -> Result<Self> {
        let conn = Connection::open_with_flags(
            file,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_URI
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .db()?;
        conn.busy_timeout(busy).db()?;
        let page: u64 = conn
            .query_row("PRAGMA page_size", [], |row| row.get(0))
            .db()?;
        let bound = Bound {
            wal: crate::companions::companion(file, "-wal"),
            bytes: config.truncate_above_pages.saturating_mul(page),
        };
        let (sender, receiver) = mpsc::sync_channel(1);
        let thread = std::thread::Builder::new()
            .name("sync-sqlite-checkpointer".to_owned())
            .spawn(move || serve(&conn, &receiver, &bound))
            .map_err(Error::backend)?;
        Ok(Self {
            every: config.every_commits.max(1),
            commits: AtomicU64::new(0),
            sender: Mutex::new(Some(sender)),
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Counts a commit of the writer; every `every_commits`-th one asks for a
    /// pass without waiting (a pass already queued serves it).
    pub(crate) fn committed(&self) {
        let n = self.commits.fetch_add(1, Ordering::Relaxed) + 1;
        if n % self.every != 0 {
            return;
        }
        let sender = self.sender.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(sender) = sender.as_ref() {
            match sender.try_send(Request::Pass) {
                Ok(()) | Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {}
            }
        }
    }

    /// Runs a pass after every pass already asked for, and reports it.
    pub(crate) fn run_now(&self) -> Result<WalCheckpointReport> {
        let (reply, answer) = mpsc::channel();
        let sender = self
            .sender
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let stopped = || Error::new(ErrorCode::Backend).detail("reason", "checkpointer_stopped");
        sender
            .ok_or_else(stopped)?
            .send(Request::Report(reply))
            .map_err(|_| stopped())?;
        answer.recv().map_err(|_| stopped())?
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        // Closing the channel ends the thread's loop.
        drop(
            self.sender
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take(),
        );
        let thread = self
            .thread
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(thread) = thread {
            let _ = thread.join();
        }
    }
}

/// The WAL file and the size above which a pass truncates it.
struct Bound {
    wal: PathBuf,
    bytes: u64,
}

fn serve(conn: &Connection, requests: &Receiver<Request>, bound: &Bound) {
    let mut passes = 0;
    while let Ok(request) = requests.recv() {
        passes += 1;
        let report = pass(conn, bound).map(|report| WalCheckpointReport { passes, ..report });
        if let Request::Report(reply) = request {
            let _ = reply.send(report);
        }
    }
}

/// `PASSIVE`, then `TRUNCATE` when the WAL file exceeds the bound (a
/// reader that kept `PASSIVE` from finishing, or a burst of commits between
/// two passes, let it grow).
fn pass(conn: &Connection, bound: &Bound) -> Result<WalCheckpointReport> {
    let (wal_pages, checkpointed_pages) = checkpoint(conn, "PRAGMA wal_checkpoint(PASSIVE)")?;
    let size = std::fs::metadata(&bound.wal).map_or(0, |m| m.len());
    let truncated = size > bound.bytes;
    if truncated {
        checkpoint(conn, "PRAGMA wal_checkpoint(TRUNCATE)")?;
    }
    Ok(WalCheckpointReport {
        wal_pages,
        checkpointed_pages,
        truncated,
        passes: 0,
    })
}

/// Runs one checkpoint pragma: `(pages in the WAL, pages checkpointed)`.
fn checkpoint(conn: &Connection, sql: &str) -> Result<(i64, i64)> {
    conn.query_row(sql, [], |row| Ok((row.get(1)?, row.get(2)?)))
        .db()
}
