//! What a backfill run reports to its progress observer about the rows it
//! expects: a first run knows no total; a run that takes over a checkpoint
//! whose earlier full pass stored `observed_rows` reports that count as
//! `estimated_total` from its first snapshot on; the full pass is reported
//! when it starts and after each of its batches (SQLite).

use std::sync::{Arc, Mutex};

use sync_backfill::{Phase, Progress, ProgressObserver, RunOutcome};
use sync_core::ServerStorage;
use sync_sqlite::{SqliteConfig, SqliteStorage};
use syncstore_tests::scenario::{self, BACKFILL_CHECKPOINT, PARTITION, T0};

/// Every snapshot's `(phase, estimated_total)`; on the first entry into
/// `phase` (when given) another owner claims the checkpoint.
struct Recorder {
    seen: Mutex<Vec<(Phase, Option<i64>)>>,
    claim_at: Option<(Phase, Arc<SqliteStorage>)>,
}

impl Recorder {
    fn new(claim_at: Option<(Phase, Arc<SqliteStorage>)>) -> Arc<Self> {
        Arc::new(Self {
            seen: Mutex::new(Vec::new()),
            claim_at,
        })
    }

    fn estimates(&self) -> Vec<(Phase, Option<i64>)> {
        self.seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

impl ProgressObserver for Recorder {
    fn on_progress(&self, progress: &Progress) {
        let mut seen = self
            .seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let first_entry = seen.iter().all(|(phase, _)| *phase != progress.phase);
        seen.push((progress.phase, progress.estimated_total));
        if let Some((phase, storage)) = &self.claim_at {
            if first_entry && *phase == progress.phase {
                storage
                    .claim_checkpoint(PARTITION, BACKFILL_CHECKPOINT, 2, T0 + 50_000)
                    .unwrap_or_else(|e| panic!("competing claim: {e:?}"));
            }
        }
    }
}

#[test]
fn a_takeover_estimates_the_rows_its_predecessor_observed() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let path = dir.path().join("sync.db");
    let storage = Arc::new(
        SqliteStorage::open(&path, SqliteConfig::default())
            .unwrap_or_else(|e| panic!("open {}: {e:?}", path.display())),
    );
    scenario::base(storage.as_ref(), 2).unwrap_or_else(|e| panic!("base: {e:?}"));

    // The first owner completes its full pass (storing observed_rows) and
    // is superseded before its catch-up.
    let first = Recorder::new(Some((Phase::CatchUp, Arc::clone(&storage))));
    let outcome = scenario::backfill_observed(storage.as_ref(), 1, T0 + 40_000, first.clone())
        .unwrap_or_else(|e| panic!("first run: {e:?}"));
    assert!(
        matches!(outcome, RunOutcome::Superseded { .. }),
        "first run: {outcome:?}"
    );
    assert!(
        first
            .estimates()
            .iter()
            .all(|(_, estimate)| estimate.is_none()),
        "a first run knows no total: {:?}",
        first.estimates()
    );
    let stored = storage
        .read_checkpoint(PARTITION, BACKFILL_CHECKPOINT)
        .unwrap_or_else(|e| panic!("read checkpoint: {e:?}"))
        .unwrap_or_else(|| panic!("checkpoint missing"));
    assert!(stored.observed_rows > 0, "stored: {stored:?}");

    let takeover = Recorder::new(None);
    let outcome = scenario::backfill_observed(storage.as_ref(), 1, T0 + 60_000, takeover.clone())
        .unwrap_or_else(|e| panic!("takeover: {e:?}"));
    assert!(
        matches!(outcome, RunOutcome::Activated { .. }),
        "takeover: {outcome:?}"
    );
    let estimates = takeover.estimates();
    assert!(!estimates.is_empty(), "no progress reported");
    assert!(
        estimates
            .iter()
            .all(|(_, estimate)| *estimate == Some(stored.observed_rows)),
        "takeover estimates {estimates:?}, stored observed_rows {}",
        stored.observed_rows
    );
}

/// Every snapshot, in order.
#[derive(Default)]
struct Snapshots(Mutex<Vec<Progress>>);

impl ProgressObserver for Snapshots {
    fn on_progress(&self, progress: &Progress) {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(progress.clone());
    }
}

#[test]
fn the_full_pass_is_reported_when_it_starts_and_after_each_batch() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let path = dir.path().join("sync.db");
    let storage = SqliteStorage::open(&path, SqliteConfig::default())
        .unwrap_or_else(|e| panic!("open {}: {e:?}", path.display()));
    scenario::base(&storage, 2).unwrap_or_else(|e| panic!("base: {e:?}"));
    let snapshots = Arc::new(Snapshots::default());
    let outcome = scenario::backfill_observed(&storage, 1, T0 + 40_000, snapshots.clone())
        .unwrap_or_else(|e| panic!("run: {e:?}"));
    assert!(
        matches!(outcome, RunOutcome::Activated { .. }),
        "run: {outcome:?}"
    );
    let seen = snapshots
        .0
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    let full: Vec<&Progress> = seen.iter().filter(|p| p.phase == Phase::FullPass).collect();
    assert!(full.len() >= 3, "full-pass snapshots: {seen:#?}");
    // On entry, before its first batch: nothing of the pass seen yet.
    assert_eq!(full[0].rows_seen, 0, "first full-pass snapshot: {seen:#?}");
    // Then one snapshot per batch, each a batch further.
    for pair in full.windows(2) {
        assert_eq!(
            pair[1].batches,
            pair[0].batches + 1,
            "consecutive full-pass snapshots: {seen:#?}"
        );
    }
    assert!(
        full[1].rows_seen > 0,
        "the first batch's snapshot: {seen:#?}"
    );
}
