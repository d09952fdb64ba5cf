//! The backfill runner under transient failures, through the fault-injection
//! seam of each dialect: a step failing with `busy`, `connection_lost` or
//! `outcome_unknown` is retried after the run re-reads its checkpoint, and
//! counts against `max_attempts`; a claim failing otherwise is an error,
//! never `AlreadyActivated`; a checkpoint another owner activated while
//! this run waited to retry is `AlreadyActivated`, never this run's
//! activation. `connection_lost` and `outcome_unknown` only occur on
//! Postgres (a SQLite I/O error is `backend`), so those tests are
//! Postgres-only; the others run on both dialects.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use sync_backfill::{
    CheckpointRunner, Pause, Phase, Progress, ProgressObserver, RunOutcome, RunnerConfig,
};
use sync_core::fault::{FaultKind, FaultPlan};
use sync_core::{CheckpointState, ErrorCode, ManualClock, ServerStorage};
use syncstore_tests::scenario::{self, BACKFILL_CHECKPOINT, PARTITION, T0};

const T1: i64 = T0 + 100_000;

fn pg_url() -> String {
    std::env::var("SYNCSTORE_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

fn admin(sql: &str) {
    let url = pg_url();
    let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap_or_else(|e| {
        panic!("PostgreSQL is not reachable at {url} ({e}); start it or set SYNCSTORE_PG_URL")
    });
    client
        .batch_execute(sql)
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}

#[derive(Clone, Copy, Debug)]
enum Dialect {
    Sqlite,
    Postgres,
}

/// A fresh database at the scenario's base state (schema v2, the backfill
/// checkpoint declared by the migration).
enum Db {
    Sqlite {
        _dir: tempfile::TempDir,
        storage: sync_sqlite::SqliteStorage,
    },
    Postgres {
        schema: String,
        storage: Box<sync_postgres::PostgresStorage>,
    },
}

impl Db {
    fn new(dialect: Dialect) -> Self {
        let db = match dialect {
            Dialect::Sqlite => {
                let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
                let path = dir.path().join("sync.db");
                let storage =
                    sync_sqlite::SqliteStorage::open(&path, sync_sqlite::SqliteConfig::default())
                        .unwrap_or_else(|e| panic!("open {}: {e:?}", path.display()));
                Db::Sqlite { _dir: dir, storage }
            }
            Dialect::Postgres => {
                static NEXT: AtomicU64 = AtomicU64::new(0);
                let schema = format!(
                    "bffault_{}_{}",
                    std::process::id(),
                    NEXT.fetch_add(1, Ordering::SeqCst)
                );
                admin(&format!(
                    "DROP SCHEMA IF EXISTS \"{schema}\" CASCADE; CREATE SCHEMA \"{schema}\""
                ));
                let config = sync_postgres::PostgresConfig {
                    schema: Some(schema.clone()),
                    pool_size: 2,
                    ..sync_postgres::PostgresConfig::default()
                };
                let storage = sync_postgres::PostgresStorage::connect(&pg_url(), config)
                    .unwrap_or_else(|e| panic!("connect: {e:?}"));
                Db::Postgres {
                    schema,
                    storage: Box::new(storage),
                }
            }
        };
        scenario::base(db.storage(), 2).unwrap_or_else(|e| panic!("base: {e:?}"));
        db
    }

    fn storage(&self) -> &dyn ServerStorage {
        match self {
            Db::Sqlite { storage, .. } => storage,
            Db::Postgres { storage, .. } => storage.as_ref(),
        }
    }

    fn install(&self, plan: Option<Arc<FaultPlan>>) {
        match self {
            Db::Sqlite { storage, .. } => storage
                .set_fault_plan(plan)
                .unwrap_or_else(|e| panic!("install fault plan: {e:?}")),
            Db::Postgres { storage, .. } => storage.set_fault_plan(plan),
        }
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        if let Db::Postgres { schema, .. } = self {
            if let Ok(mut client) = postgres::Client::connect(&pg_url(), postgres::NoTls) {
                let _ =
                    client.batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"));
            }
        }
    }
}

/// Calls a hook on the first pause only (the runner pauses before every retry).
struct HookPause {
    hook: Mutex<Option<Box<dyn FnOnce() + Send>>>,
    pauses: AtomicU64,
}

impl HookPause {
    fn new(hook: Option<Box<dyn FnOnce() + Send>>) -> Arc<Self> {
        Arc::new(Self {
            hook: Mutex::new(hook),
            pauses: AtomicU64::new(0),
        })
    }
}

impl Pause for HookPause {
    fn pause(&self, _duration: Duration) {
        self.pauses.fetch_add(1, Ordering::SeqCst);
        let hook = self
            .hook
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(hook) = hook {
            hook();
        }
    }
}

/// The scenario's backfill (batches of 1 row) with `max_attempts` and `pause`.
fn run(
    storage: &dyn ServerStorage,
    max_attempts: u32,
    pause: Arc<dyn Pause>,
    now: i64,
) -> sync_core::Result<RunOutcome> {
    run_observed(
        storage,
        max_attempts,
        pause,
        now,
        Arc::new(LastSnapshot::default()),
    )
}

fn run_observed(
    storage: &dyn ServerStorage,
    max_attempts: u32,
    pause: Arc<dyn Pause>,
    now: i64,
    progress: Arc<dyn ProgressObserver>,
) -> sync_core::Result<RunOutcome> {
    let projector = scenario::derived_column(storage)?;
    CheckpointRunner::new(storage, PARTITION, BACKFILL_CHECKPOINT, 2, &projector)
        .with_config(RunnerConfig {
            batch_size: 1,
            max_attempts,
            ..RunnerConfig::default()
        })
        .with_clock(Arc::new(ManualClock::new(now)))
        .with_pause(pause)
        .with_progress(progress)
        .run()
}

/// The last progress snapshot a run reported.
#[derive(Default)]
struct LastSnapshot(Mutex<Option<Progress>>);

impl LastSnapshot {
    fn get(&self) -> Option<Progress> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl ProgressObserver for LastSnapshot {
    fn on_progress(&self, progress: &Progress) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(progress.clone());
    }
}

/// What the fault-free run does on a fresh database: its statement log, the
/// projection, and the log head it leaves.
struct DryRun {
    log: Vec<String>,
    projection: Vec<(String, Option<String>)>,
    head: i64,
}

fn dry_run(dialect: Dialect) -> DryRun {
    let db = Db::new(dialect);
    let plan = FaultPlan::count_only();
    db.install(Some(Arc::clone(&plan)));
    let outcome = run(db.storage(), 10, HookPause::new(None), T1);
    db.install(None);
    assert!(
        matches!(outcome, Ok(RunOutcome::Activated { .. })),
        "{dialect:?} dry run: {outcome:?}"
    );
    DryRun {
        log: plan.statement_log(),
        projection: scenario::projection(db.storage())
            .unwrap_or_else(|e| panic!("projection: {e:?}")),
        head: db
            .storage()
            .get_max_commit_seq(PARTITION)
            .unwrap_or_else(|e| panic!("head: {e:?}")),
    }
}

/// 1-based indices of the statements of `log` matching `pred`.
fn positions(log: &[String], pred: impl Fn(&str) -> bool) -> Vec<u64> {
    log.iter()
        .enumerate()
        .filter(|(_, sql)| pred(sql))
        .map(|(i, _)| i as u64 + 1)
        .collect()
}

fn is_commit(sql: &str) -> bool {
    sql.trim_end()
        .trim_end_matches(';')
        .trim_end()
        .to_ascii_uppercase()
        .ends_with("COMMIT")
}

/// The claim is the first statement that mentions `owner_epoch + 1`.
fn claim_statement(log: &[String]) -> u64 {
    let found = positions(log, |sql| {
        sql.to_ascii_lowercase()
            .replace(' ', "")
            .contains("owner_epoch+1")
    });
    *found
        .first()
        .unwrap_or_else(|| panic!("no claim statement in the dry run:\n{}", log.join("\n")))
}

/// Runs with one fault at statement `k`; returns the outcome and the pauses.
fn faulted(
    db: &Db,
    k: u64,
    kind: FaultKind,
    max_attempts: u32,
    hook: Option<Box<dyn FnOnce() + Send>>,
) -> (sync_core::Result<RunOutcome>, u64) {
    let plan = FaultPlan::at(k, kind);
    let pause = HookPause::new(hook);
    db.install(Some(Arc::clone(&plan)));
    let outcome = run(db.storage(), max_attempts, pause.clone(), T1);
    db.install(None);
    assert!(plan.fired(), "statement {k} was not reached");
    (outcome, pause.pauses.load(Ordering::SeqCst))
}

fn a_failed_claim_is_an_error(dialect: Dialect) {
    let dry = dry_run(dialect);
    let k = claim_statement(&dry.log);
    let db = Db::new(dialect);
    let (outcome, _) = faulted(&db, k, FaultKind::Fail, 10, None);
    match outcome {
        Err(e) => assert_eq!(e.code(), ErrorCode::Backend, "{dialect:?}: {e:?}"),
        Ok(other) => panic!("{dialect:?}: a claim that failed ended {other:?}"),
    }
    let stored = db
        .storage()
        .read_checkpoint(PARTITION, BACKFILL_CHECKPOINT)
        .unwrap_or_else(|e| panic!("read checkpoint: {e:?}"));
    assert!(
        stored.is_some_and(|cp| cp.state == CheckpointState::Declared),
        "{dialect:?}: the failed claim changed the checkpoint"
    );
}

#[test]
fn a_failed_claim_is_an_error_sqlite() {
    a_failed_claim_is_an_error(Dialect::Sqlite);
}

#[test]
fn a_failed_claim_is_an_error_postgres() {
    a_failed_claim_is_an_error(Dialect::Postgres);
}

/// Another owner activates the checkpoint between this run's declaration and
/// its claim (here: while the run waits to retry a `busy` claim): the claim
/// answers `checkpoint_not_declared`, and the run ends `AlreadyActivated`,
/// not with that error.
fn activated_by_another_owner_before_the_claim(dialect: Dialect) {
    let dry = dry_run(dialect);
    let k = claim_statement(&dry.log);
    let db = Arc::new(Db::new(dialect));
    let other = Arc::clone(&db);
    let hook: Box<dyn FnOnce() + Send> = Box::new(move || {
        let outcome = run(other.storage(), 10, HookPause::new(None), T1 + 1);
        assert!(
            matches!(outcome, Ok(RunOutcome::Activated { .. })),
            "the other owner: {outcome:?}"
        );
    });
    let (outcome, pauses) = faulted(&db, k, FaultKind::Busy, 10, Some(hook));
    assert_eq!(pauses, 1, "{dialect:?}: pauses");
    match outcome {
        Ok(outcome) => assert_eq!(
            outcome,
            RunOutcome::AlreadyActivated,
            "{dialect:?}: the first owner's outcome"
        ),
        Err(e) => panic!("{dialect:?}: the first owner failed: {e:?}"),
    }
}

#[test]
fn activated_by_another_owner_before_the_claim_sqlite() {
    activated_by_another_owner_before_the_claim(Dialect::Sqlite);
}

#[test]
fn activated_by_another_owner_before_the_claim_postgres() {
    activated_by_another_owner_before_the_claim(Dialect::Postgres);
}

/// A `busy` claim counts against `max_attempts` like a `busy` batch: with
/// one attempt the run gives up at once, without pausing and without
/// having claimed.
fn busy_at_the_claim_counts_against_max_attempts(dialect: Dialect) {
    let dry = dry_run(dialect);
    let k = claim_statement(&dry.log);
    let db = Db::new(dialect);
    let (outcome, pauses) = faulted(&db, k, FaultKind::Busy, 1, None);
    assert_eq!(
        outcome.ok(),
        Some(RunOutcome::GaveUp { attempts: 1 }),
        "{dialect:?}: a busy claim with max_attempts 1 ({pauses} pauses)"
    );
    assert_eq!(pauses, 0, "{dialect:?}: pauses");
    let stored = db
        .storage()
        .read_checkpoint(PARTITION, BACKFILL_CHECKPOINT)
        .unwrap_or_else(|e| panic!("read checkpoint: {e:?}"));
    assert!(
        stored.is_some_and(|cp| cp.state == CheckpointState::Declared && cp.owner_epoch == 0),
        "{dialect:?}: the run that gave up claimed the checkpoint"
    );
}

#[test]
fn busy_at_the_claim_counts_against_max_attempts_sqlite() {
    busy_at_the_claim_counts_against_max_attempts(Dialect::Sqlite);
}

#[test]
fn busy_at_the_claim_counts_against_max_attempts_postgres() {
    busy_at_the_claim_counts_against_max_attempts(Dialect::Postgres);
}

/// The first statement after the claim: the first batch's.
fn first_batch_statement(log: &[String]) -> u64 {
    let claim = claim_statement(log);
    *positions(log, |sql| sql.to_ascii_uppercase().starts_with("BEGIN"))
        .iter()
        .find(|&&k| k > claim)
        .unwrap_or_else(|| panic!("no batch after the claim:\n{}", log.join("\n")))
}

fn busy_counts_against_max_attempts(dialect: Dialect) {
    let dry = dry_run(dialect);
    let k = first_batch_statement(&dry.log) + 1;
    let db = Db::new(dialect);
    let (outcome, pauses) = faulted(&db, k, FaultKind::Busy, 1, None);
    assert_eq!(
        outcome.ok(),
        Some(RunOutcome::GaveUp { attempts: 1 }),
        "{dialect:?}: busy with max_attempts 1 ({pauses} pauses)"
    );
    // With attempts to spare the same fault is retried to the end.
    let db = Db::new(dialect);
    let (outcome, pauses) = faulted(&db, k, FaultKind::Busy, 2, None);
    assert!(
        matches!(outcome, Ok(RunOutcome::Activated { .. })),
        "{dialect:?}: busy with max_attempts 2: {outcome:?}"
    );
    assert_eq!(pauses, 1, "{dialect:?}: pauses");
    assert_eq!(
        scenario::projection(db.storage()).ok(),
        Some(dry.projection),
        "{dialect:?}: projection after the retry"
    );
}

#[test]
fn busy_counts_against_max_attempts_sqlite() {
    busy_counts_against_max_attempts(Dialect::Sqlite);
}

#[test]
fn busy_counts_against_max_attempts_postgres() {
    busy_counts_against_max_attempts(Dialect::Postgres);
}

/// While the run waits to retry a `busy` batch, another owner claims and
/// activates the checkpoint: the run ends `AlreadyActivated`.
fn activated_by_another_owner_during_a_retry(dialect: Dialect) {
    let dry = dry_run(dialect);
    let k = first_batch_statement(&dry.log) + 1;
    let db = Arc::new(Db::new(dialect));
    let other = Arc::clone(&db);
    let hook: Box<dyn FnOnce() + Send> = Box::new(move || {
        let outcome = run(other.storage(), 10, HookPause::new(None), T1 + 1);
        assert!(
            matches!(outcome, Ok(RunOutcome::Activated { owner_epoch: 2, .. })),
            "the other owner: {outcome:?}"
        );
    });
    let (outcome, _) = faulted(&db, k, FaultKind::Busy, 10, Some(hook));
    assert_eq!(
        outcome.ok(),
        Some(RunOutcome::AlreadyActivated),
        "{dialect:?}: the first owner's outcome"
    );
    let stored = db
        .storage()
        .read_checkpoint(PARTITION, BACKFILL_CHECKPOINT)
        .unwrap_or_else(|e| panic!("read checkpoint: {e:?}"))
        .unwrap_or_else(|| panic!("checkpoint missing"));
    assert_eq!(
        (stored.state, stored.owner_epoch),
        (CheckpointState::Activated, 2),
        "{dialect:?}: stored checkpoint"
    );
    assert_eq!(
        scenario::projection(db.storage()).ok(),
        Some(dry.projection),
        "{dialect:?}: projection"
    );
}

#[test]
fn activated_by_another_owner_during_a_retry_sqlite() {
    activated_by_another_owner_during_a_retry(Dialect::Sqlite);
}

#[test]
fn activated_by_another_owner_during_a_retry_postgres() {
    activated_by_another_owner_during_a_retry(Dialect::Postgres);
}

/// Postgres: a lost connection or a lost reply at any `COMMIT` of the run
/// (`connection_lost` / `outcome_unknown`), and a lost connection at every
/// statement of the first batch, are retried by the run itself: it
/// activates with the fault-free projection and the fault-free log head
/// (no batch committed twice). A lost reply at the activation's `COMMIT`
/// reports the activation, which did happen.
#[test]
fn lost_connections_and_replies_are_retried_postgres() {
    let dry = dry_run(Dialect::Postgres);
    let commits = positions(&dry.log, is_commit);
    assert!(commits.len() >= 3, "commits of the dry run: {commits:?}");
    let first = first_batch_statement(&dry.log);
    let first_commit = *commits
        .iter()
        .find(|&&k| k > first)
        .unwrap_or_else(|| panic!("no commit after the first batch"));
    let mut cases: Vec<(u64, FaultKind)> = Vec::new();
    for &k in &commits {
        cases.push((k, FaultKind::ReplyLost));
        cases.push((k, FaultKind::ConnectionLost));
    }
    for k in first + 1..first_commit {
        cases.push((k, FaultKind::ConnectionLost));
    }
    let last_commit = *commits.last().unwrap_or(&0);
    for (k, kind) in cases {
        let what = format!(
            "{} at statement {k} ({:?})",
            kind.as_str(),
            dry.log.get(k as usize - 1)
        );
        let db = Db::new(Dialect::Postgres);
        let (outcome, pauses) = faulted(&db, k, kind, 10, None);
        match outcome {
            Ok(RunOutcome::Activated { owner_epoch, .. }) => {
                assert_eq!(owner_epoch, 1, "{what}: epoch");
            }
            other => panic!("{what}: {other:?}"),
        }
        if k == last_commit && kind == FaultKind::ReplyLost {
            // The activation landed; the run learnt it from its checkpoint.
            assert_eq!(pauses, 1, "{what}: pauses");
        }
        assert_eq!(
            scenario::projection(db.storage()).ok().as_ref(),
            Some(&dry.projection),
            "{what}: projection"
        );
        assert_eq!(
            db.storage().get_max_commit_seq(PARTITION).ok(),
            Some(dry.head),
            "{what}: log head (a batch committed twice?)"
        );
    }
}

/// Postgres: a run whose activation landed but whose reply was lost learns
/// it from its checkpoint and reports, in its last snapshot, the batches a
/// run without the fault reports (the activation counted once).
#[test]
fn a_lost_activation_reply_reports_the_batches_of_a_clean_run_postgres() {
    let clean_db = Db::new(Dialect::Postgres);
    let clean = Arc::new(LastSnapshot::default());
    let plan = FaultPlan::count_only();
    clean_db.install(Some(Arc::clone(&plan)));
    let outcome = run_observed(
        clean_db.storage(),
        10,
        HookPause::new(None),
        T1,
        clean.clone(),
    );
    clean_db.install(None);
    assert!(
        matches!(outcome, Ok(RunOutcome::Activated { .. })),
        "{outcome:?}"
    );
    let activation = *positions(&plan.statement_log(), is_commit)
        .last()
        .unwrap_or_else(|| panic!("no commit in the clean run"));
    let clean = clean.get().unwrap_or_else(|| panic!("no snapshot"));
    assert_eq!(clean.phase, Phase::Done);

    let db = Db::new(Dialect::Postgres);
    let last = Arc::new(LastSnapshot::default());
    let plan = FaultPlan::at(activation, FaultKind::ReplyLost);
    db.install(Some(Arc::clone(&plan)));
    let outcome = run_observed(db.storage(), 10, HookPause::new(None), T1, last.clone());
    db.install(None);
    assert!(plan.fired(), "statement {activation} was not reached");
    assert!(
        matches!(outcome, Ok(RunOutcome::Activated { .. })),
        "{outcome:?}"
    );
    let last = last.get().unwrap_or_else(|| panic!("no snapshot"));
    assert_eq!(last.phase, Phase::Done);
    assert_eq!(
        last.batches, clean.batches,
        "batches after a lost activation reply: {last:?}, clean run: {clean:?}"
    );
}

/// Postgres: after a lost reply at a batch's `COMMIT` (`outcome_unknown`),
/// source rows written while the run waits to retry are projected too.
#[test]
fn source_writes_during_an_unknown_outcome_are_projected_postgres() {
    let dry = dry_run(Dialect::Postgres);
    let commits = positions(&dry.log, is_commit);
    let first = first_batch_statement(&dry.log);
    let last = *commits.last().unwrap_or(&0);
    // The last commit is the activation's: writes after it are not the
    // backfill's to project.
    for &k in commits.iter().filter(|&&k| k > first && k < last) {
        let db = Arc::new(Db::new(Dialect::Postgres));
        let writer = Arc::clone(&db);
        let hook: Box<dyn FnOnce() + Send> = Box::new(move || {
            scenario::writes_before_takeover(writer.storage(), T1 + 5)
                .unwrap_or_else(|e| panic!("writes: {e:?}"))
                .unwrap_or_else(|| panic!("writes not applied"));
        });
        let (outcome, pauses) = faulted(&db, k, FaultKind::ReplyLost, 10, Some(hook));
        let what = format!(
            "reply lost at statement {k} ({:?})",
            dry.log.get(k as usize - 1)
        );
        assert!(
            matches!(outcome, Ok(RunOutcome::Activated { .. })),
            "{what}: {outcome:?}"
        );
        assert_eq!(pauses, 1, "{what}: pauses");
        assert_eq!(
            scenario::projection(db.storage()).ok(),
            Some(scenario::projection_after_writes(&dry.projection)),
            "{what}: projection"
        );
    }
}
