//! Client traffic: the v1 fleet (several threads pushing the initial
//! todos) and the live v2 writer that keeps pushing while the backfill runs.

use std::sync::mpsc::{Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sync_backfill::{Phase, Progress, ProgressObserver};
use sync_core::{Clock, Result, SystemClock};

use super::push::{ClientCommit, Pushed, Pusher};
use super::todos::{Todo, PARTITION};

/// Todos per fleet commit.
pub const ROWS_PER_COMMIT: u32 = 10;
/// Client threads of the v1 fleet.
pub const FLEET_THREADS: u32 = 4;

/// What the fleet pushed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FleetTotals {
    /// Commits applied.
    pub commits: u64,
    /// Rows written.
    pub rows: u64,
}

/// Pushes todos `0..rows` from [`FLEET_THREADS`] client threads, in commits
/// of [`ROWS_PER_COMMIT`]; commit `k` goes to thread `k % FLEET_THREADS`.
pub fn run_fleet(pusher: &Pusher<'_>, rows: u32) -> Result<FleetTotals> {
    let commits = rows.div_ceil(ROWS_PER_COMMIT);
    let results: Vec<Result<FleetTotals>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..FLEET_THREADS)
            .map(|thread| scope.spawn(move || fleet_thread(pusher, thread, commits, rows)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err(thread_panicked())))
            .collect()
    });
    let mut totals = FleetTotals::default();
    for result in results {
        let part = result?;
        totals.commits += part.commits;
        totals.rows += part.rows;
    }
    Ok(totals)
}

fn thread_panicked() -> sync_core::Error {
    sync_core::Error::new(sync_core::ErrorCode::Backend).detail("reason", "client_thread_panicked")
}

fn fleet_thread(pusher: &Pusher<'_>, thread: u32, commits: u32, rows: u32) -> Result<FleetTotals> {
    let client_id = format!("v1-phone-{thread}");
    let mut totals = FleetTotals::default();
    for k in (thread..commits).step_by(FLEET_THREADS as usize) {
        let first = k * ROWS_PER_COMMIT;
        let last = (first + ROWS_PER_COMMIT).min(rows);
        let values: Vec<_> = (first..last)
            .map(|n| Todo::numbered(n).v1_values())
            .collect();
        let commit_id = format!("c-{k:06}");
        let pushed = pusher.push(&ClientCommit {
            partition: PARTITION,
            client_id: &client_id,
            commit_id: &commit_id,
            actor: "user:fleet",
            created_at_ms: SystemClock.now_ms(),
            rows: &values,
        })?;
        if let Pushed::Applied(_) = pushed {
            totals.commits += 1;
            totals.rows += u64::from(last - first);
        }
    }
    Ok(totals)
}

/// What the live writer pushed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LiveTotals {
    /// Commits applied.
    pub commits: u64,
    /// New todos created.
    pub created: u64,
    /// Existing todos renamed.
    pub renamed: u64,
}

/// The live v2 writer: on every go-signal it pushes one commit that creates
/// one todo and renames an existing one (v2 code derives `search_text` on
/// write), then reports done. It stops when the go-sender is dropped.
pub fn live_writer(
    pusher: &Pusher<'_>,
    fleet_rows: u32,
    go: &Receiver<()>,
    done: &Sender<()>,
) -> Result<LiveTotals> {
    let mut totals = LiveTotals::default();
    let mut k: u32 = 0;
    while go.recv().is_ok() {
        let renamed_n = k.wrapping_mul(7919) % fleet_rows.max(1);
        let renamed = Todo::numbered(renamed_n).renamed(format!("Renamed LIVE #{k}"));
        let created = Todo::created_live(k);
        let values = vec![created.v2_values(), renamed.v2_values()];
        let commit_id = format!("live-{k:05}");
        let pushed = pusher.push(&ClientCommit {
            partition: PARTITION,
            client_id: "v2-web-live",
            commit_id: &commit_id,
            actor: "user:live",
            created_at_ms: SystemClock.now_ms(),
            rows: &values,
        });
        let applied = matches!(pushed, Ok(Pushed::Applied(_)));
        if applied {
            totals.commits += 1;
            totals.created += 1;
            totals.renamed += 1;
        }
        let _ = done.send(());
        pushed?;
        k += 1;
    }
    Ok(totals)
}

/// A progress observer that lets one live commit land after every committed
/// full-pass batch: writes interleave with the backfill deterministically,
/// and the single SQLite writer connection is handed over fairly.
pub struct Interleave {
    inner: Arc<dyn ProgressObserver>,
    go: Mutex<Option<Sender<()>>>,
    done: Mutex<Receiver<()>>,
}

impl std::fmt::Debug for Interleave {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Interleave").finish_non_exhaustive()
    }
}

/// How long a batch boundary waits for the live commit it asked for.
const LIVE_COMMIT_WAIT: Duration = Duration::from_secs(30);

impl Interleave {
    /// Wraps `inner` (the progress bar) with the writer's channels.
    pub fn new(inner: Arc<dyn ProgressObserver>, go: Sender<()>, done: Receiver<()>) -> Self {
        Self {
            inner,
            go: Mutex::new(Some(go)),
            done: Mutex::new(done),
        }
    }

    /// Asks the writer for one commit and waits until it landed (or failed).
    pub fn one_live_commit(&self) -> bool {
        let sent = self
            .go
            .lock()
            .ok()
            .and_then(|go| go.as_ref().map(|go| go.send(()).is_ok()))
            .unwrap_or(false);
        if !sent {
            return false;
        }
        match self.done.lock() {
            Ok(done) => done.recv_timeout(LIVE_COMMIT_WAIT).is_ok(),
            Err(_) => false,
        }
    }

    /// Stops the writer (drops the go-sender).
    pub fn stop(&self) {
        if let Ok(mut go) = self.go.lock() {
            go.take();
        }
    }
}

impl ProgressObserver for Interleave {
    fn on_progress(&self, progress: &Progress) {
        self.inner.on_progress(progress);
        // Full-pass reports with batches > 0 follow a committed batch (no
        // transaction is open); seal reports come from inside one, so they
        // must never wait.
        if progress.phase == Phase::FullPass && progress.batches > 0 {
            self.one_live_commit();
        }
    }
}
