//! Pushes under connection faults, on any dialect: four threads push into
//! one partition continuously while a fault is made again and again (every
//! connection of the storage killed, the server stopped and started); each
//! pusher retries a retryable error under the same commit id, as a client
//! would, and a non-retryable error fails the run. Afterwards every
//! acknowledged push has its stored result and its commit, sequences are
//! distinct, and the partition holds exactly one commit per acknowledged
//! push. After a fault that took the server away, the first push must be
//! acknowledged within [`RECOVERY_BOUND`] of the server accepting
//! connections again: a bound of recovery, not a benchmark.
//!
//! Used by `tests/server_restart.rs` (Postgres) and
//! `tests/mariadb_connection_faults.rs`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sync_core::{EnsureOptions, ErrorCode, ServerStorage};

use crate::scenario::{self, PushOptions, CLIENT, PARTITION, T0};

/// Pushing threads.
pub const PUSHERS: usize = 4;
/// Acknowledged pushes between two faults (and after the last).
pub const ACKS_BETWEEN: usize = 40;
/// The longest the first acknowledged push may take after the server is
/// back from a fault.
pub const RECOVERY_BOUND: Duration = Duration::from_secs(1);

/// A number from an environment variable, or `default`.
pub fn env_number(var: &str, default: u64) -> u64 {
    std::env::var(var)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

/// What the pushers saw.
#[derive(Debug, Default)]
struct Figures {
    acknowledged: BTreeSet<String>,
    errors: BTreeMap<String, u64>,
    /// Commit ids whose push ended `outcome_unknown` at least once.
    unknown: BTreeSet<String>,
    /// Of those, the ones whose retry found the stored result (committed).
    unknown_committed: u64,
}

/// Pushes until `stop`, retrying each retryable failure under the same
/// commit id; reports each acknowledgement on `acks`.
fn pusher(
    storage: &dyn ServerStorage,
    thread: usize,
    stop: &AtomicBool,
    acks: &mpsc::Sender<Instant>,
    figures: &Mutex<Figures>,
) {
    let mut n = 0u64;
    while !stop.load(Ordering::SeqCst) {
        n += 1;
        let id = format!("t{thread}-{n}");
        let changes = [scenario::item(&format!("i-{id}"), "g1", n as i64)];
        let mut was_unknown = false;
        loop {
            match scenario::push(storage, &id, &changes, &PushOptions::default(), T0) {
                Ok(seq) => {
                    let mut f = figures.lock().unwrap_or_else(|p| p.into_inner());
                    if was_unknown && seq.is_none() {
                        f.unknown_committed += 1;
                    }
                    f.acknowledged.insert(id.clone());
                    drop(f);
                    let _ = acks.send(Instant::now());
                    break;
                }
                Err(error) => {
                    if stop.load(Ordering::SeqCst) {
                        // The run ended (or failed) while this push was
                        // unacknowledged: it counts for nothing.
                        return;
                    }
                    assert!(
                        error.retryable(),
                        "push {id}: a connection fault surfaced as a non-retryable error: {error:?}"
                    );
                    let mut f = figures.lock().unwrap_or_else(|p| p.into_inner());
                    *f.errors
                        .entry(error.code().as_str().to_owned())
                        .or_default() += 1;
                    if error.is(ErrorCode::OutcomeUnknown) {
                        was_unknown = true;
                        f.unknown.insert(id.clone());
                    }
                }
            }
        }
    }
}

/// Sets the flag when dropped, unwinding included.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// Runs the pushers on `storage` (`dialect` names it in the figure line),
/// calling `fault` `rounds` times, each after [`ACKS_BETWEEN`]
/// acknowledgements; a fault returns the moment the server was back (for a
/// fault that leaves it up: when the fault was done), and the time to the
/// first acknowledgement after that is measured. Then checks that nothing
/// acknowledged was lost, prints the figure line `<family> <dialect>: …`,
/// and holds every recovery to [`RECOVERY_BOUND`].
pub fn run_family(
    family: &str,
    dialect: &str,
    storage: &dyn ServerStorage,
    rounds: u64,
    fault: &dyn Fn() -> Option<Instant>,
) {
    storage
        .ensure_schema(&scenario::schema(1), &EnsureOptions::default())
        .unwrap_or_else(|e| panic!("{family} {dialect}: ensure: {e:?}"));
    let stop = AtomicBool::new(false);
    let figures = Mutex::new(Figures::default());
    let (tx, rx) = mpsc::channel::<Instant>();
    let started = Instant::now();
    let mut recoveries: Vec<Duration> = Vec::new();
    let next_ack = |rx: &mpsc::Receiver<Instant>| {
        rx.recv()
            .unwrap_or_else(|_| panic!("{family} {dialect}: a pusher ended early"))
    };
    std::thread::scope(|scope| {
        for thread in 0..PUSHERS {
            let (stop, figures, tx) = (&stop, &figures, tx.clone());
            scope.spawn(move || pusher(storage, thread, stop, &tx, figures));
        }
        drop(tx);
        // A fault that panics must not leave the pushers retrying for ever
        // (the scope waits for them before the panic goes on).
        let _stop_on_unwind = StopOnDrop(&stop);
        for _ in 0..rounds {
            for _ in 0..ACKS_BETWEEN {
                next_ack(&rx);
            }
            if let Some(back) = fault() {
                // Acknowledgements sent before the server was back do not count.
                let first = loop {
                    let at = next_ack(&rx);
                    if at >= back {
                        break at;
                    }
                };
                recoveries.push(first - back);
            }
        }
        for _ in 0..ACKS_BETWEEN {
            next_ack(&rx);
        }
        stop.store(true, Ordering::SeqCst);
        // Drain so no pusher blocks on a full channel (it is unbounded).
        while rx.try_recv().is_ok() {}
    });
    let figures = figures.into_inner().unwrap_or_else(|p| p.into_inner());
    let mut lost = Vec::new();
    let mut seqs = BTreeSet::new();
    for id in &figures.acknowledged {
        let stored = storage
            .get_push_result(PARTITION, CLIENT, id)
            .unwrap_or_else(|e| panic!("{family} {dialect}: read the result of {id}: {e:?}"));
        match stored {
            Some(result) => {
                let seq = result
                    .commit_seq
                    .unwrap_or_else(|| panic!("{family} {dialect}: {id} applied without a seq"));
                assert!(
                    seqs.insert(seq),
                    "{family} {dialect}: sequence {seq} acknowledged twice"
                );
            }
            None => lost.push(id.clone()),
        }
    }
    let max = storage
        .get_max_commit_seq(PARTITION)
        .unwrap_or_else(|e| panic!("{family} {dialect}: max seq: {e:?}"));
    println!(
        "{family} {dialect}: {rounds} fault(s), {} pushes acknowledged, {} lost, errors {:?}, \
         outcome_unknown on {} commit(s) of which {} had committed, max_commit_seq {max}, \
         first push after the server was back {}, {:.1}s",
        figures.acknowledged.len(),
        lost.len(),
        figures.errors,
        figures.unknown.len(),
        figures.unknown_committed,
        if recoveries.is_empty() {
            "n/a".to_owned()
        } else {
            let ms: Vec<String> = recoveries
                .iter()
                .map(|d| format!("{}ms", d.as_millis()))
                .collect();
            ms.join(" / ")
        },
        started.elapsed().as_secs_f64()
    );
    assert!(
        recoveries.iter().all(|d| *d <= RECOVERY_BOUND),
        "{family} {dialect}: the first push after the server was back took {recoveries:?} \
         (bound {RECOVERY_BOUND:?})"
    );
    assert!(
        lost.is_empty(),
        "{family} {dialect}: acknowledged pushes lost: {lost:?}"
    );
    // Every push was retried until acknowledged, under its own commit id:
    // exactly one commit each, none twice.
    assert_eq!(
        max,
        figures.acknowledged.len() as i64,
        "{family} {dialect}: commits and acknowledged pushes differ"
    );
}
