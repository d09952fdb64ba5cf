//! Progress reporting: what a command line draws as a bar and a server logs.

use std::fmt;
use std::time::Duration;

/// Where the runner is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Declaring and claiming the checkpoint.
    Claim,
    /// Reading every source row in batches.
    FullPass,
    /// Re-deriving rows changed since the watermark.
    CatchUp,
    /// The final locked catch-up and activation.
    Seal,
    /// Finished (activated, superseded or given up).
    Done,
}

impl Phase {
    /// Lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Claim => "claim",
            Phase::FullPass => "full_pass",
            Phase::CatchUp => "catch_up",
            Phase::Seal => "seal",
            Phase::Done => "done",
        }
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A snapshot of the runner's progress.
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    /// Current phase.
    pub phase: Phase,
    /// Source rows read in this run (full pass) or re-derived (catch-up).
    pub rows_seen: i64,
    /// Rows a full pass is expected to read, when known (the checkpoint's
    /// stored `observed_rows` from an earlier pass).
    pub estimated_total: Option<i64>,
    /// Batches committed in this run.
    pub batches: u64,
    /// The checkpoint's certified watermark.
    pub watermark: i64,
    /// The owner epoch of this run.
    pub owner_epoch: i64,
    /// Time since the run started.
    pub elapsed: Duration,
}

impl Progress {
    /// Rows per second since the run started.
    pub fn rate(&self) -> f64 {
        let secs = self.elapsed.as_secs_f64();
        if secs > 0.0 {
            self.rows_seen as f64 / secs
        } else {
            0.0
        }
    }
}

/// Receives progress after every batch and phase change.
pub trait ProgressObserver: Send + Sync {
    /// Called with the latest snapshot.
    fn on_progress(&self, progress: &Progress);
}

/// Ignores progress.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoProgress;

impl ProgressObserver for NoProgress {
    fn on_progress(&self, _progress: &Progress) {}
}
