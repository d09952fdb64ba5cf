//! The checkpoint runner: declare, claim, full pass, catch-up, seal
//! (`rfc0007-migration-barrier.md` §8.3–§8.6).

use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sync_core::{
    check_serve_gate, ActivationOutcome, CheckpointDeclaration, CheckpointState, Clock, Coverage,
    Error, ErrorCode, NewChange, NewCommit, Result, ServeContext, ServerStorage,
    StorageTransaction, StoredPushResult, StoredRow, SystemClock,
};

use crate::config::RunnerConfig;
use crate::progress::{NoProgress, Phase, Progress, ProgressObserver};
use crate::projector::{Projector, SourceRowRef};

/// Page size of the catch-up tail listing.
const TAIL_PAGE: i64 = 1000;

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunOutcome {
    /// This run activated the checkpoint.
    Activated {
        /// The run's owner epoch.
        owner_epoch: i64,
        /// The certified watermark at activation.
        watermark: i64,
        /// Source rows observed.
        observed_rows: i64,
    },
    /// The checkpoint was already activated; nothing was written.
    AlreadyActivated,
    /// Another owner claimed the checkpoint; this run's last batch rolled back.
    Superseded {
        /// The epoch this run held.
        owner_epoch: i64,
    },
    /// Attempts were exhausted (retries after `busy`, `connection_lost` or
    /// `outcome_unknown`, and full-pass restarts).
    GaveUp {
        /// Attempts made.
        attempts: u32,
    },
}

impl RunOutcome {
    /// `activated`, `already_activated`, `superseded` or `gave_up`.
    pub fn as_str(&self) -> &'static str {
        match self {
            RunOutcome::Activated { .. } => "activated",
            RunOutcome::AlreadyActivated => "already_activated",
            RunOutcome::Superseded { .. } => "superseded",
            RunOutcome::GaveUp { .. } => "gave_up",
        }
    }
}

/// Waits between retries. Injected so tests never sleep.
pub trait Pause: Send + Sync {
    /// Blocks for `duration`.
    fn pause(&self, duration: Duration);
}

/// Sleeps the current thread.
#[derive(Debug, Clone, Copy, Default)]
pub struct ThreadPause;

impl Pause for ThreadPause {
    fn pause(&self, duration: Duration) {
        std::thread::sleep(duration);
    }
}

/// Backfills one projection for one partition and activates its checkpoint.
pub struct CheckpointRunner<'a> {
    storage: &'a dyn ServerStorage,
    partition: String,
    name: String,
    schema_version: i32,
    projector: &'a dyn Projector,
    config: RunnerConfig,
    serve_context: ServeContext,
    clock: Arc<dyn Clock>,
    progress: Arc<dyn ProgressObserver>,
    pause: Arc<dyn Pause>,
}

impl fmt::Debug for CheckpointRunner<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CheckpointRunner")
            .field("partition", &self.partition)
            .field("name", &self.name)
            .field("schema_version", &self.schema_version)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl<'a> CheckpointRunner<'a> {
    /// A runner for `(partition, name)` at `schema_version` with default settings.
    pub fn new(
        storage: &'a dyn ServerStorage,
        partition: impl Into<String>,
        name: impl Into<String>,
        schema_version: i32,
        projector: &'a dyn Projector,
    ) -> Self {
        Self {
            storage,
            partition: partition.into(),
            name: name.into(),
            schema_version,
            projector,
            config: RunnerConfig::default(),
            serve_context: ServeContext::default(),
            clock: Arc::new(SystemClock),
            progress: Arc::new(NoProgress),
            pause: Arc::new(ThreadPause),
        }
    }

    /// Replaces the configuration.
    pub fn with_config(mut self, config: RunnerConfig) -> Self {
        self.config = config;
        self
    }

    /// The host's serve context (its declarations); the runner adds its own declaration.
    pub fn with_serve_context(mut self, ctx: ServeContext) -> Self {
        self.serve_context = ctx;
        self
    }

    /// The clock for `now_ms` arguments.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Receives progress snapshots.
    pub fn with_progress(mut self, progress: Arc<dyn ProgressObserver>) -> Self {
        self.progress = progress;
        self
    }

    /// Replaces how the runner waits between retries.
    pub fn with_pause(mut self, pause: Arc<dyn Pause>) -> Self {
        self.pause = pause;
        self
    }

    /// The client id of the runner's commits: `<prefix>:<name>`.
    pub fn client_id(&self) -> String {
        format!("{}:{}", self.config.client_id_prefix, self.name)
    }

    /// Runs until the checkpoint is activated, superseded, or attempts run out.
    ///
    /// A step failing with `sync.storage.busy`, `sync.storage.connection_lost`
    /// or `sync.storage.outcome_unknown` is retried (with backoff, counted
    /// against `max_attempts`): every batch is one transaction whose writes
    /// are keyed by the run's epoch and position and whose checkpoint advance
    /// is a compare-and-set of values the retry computes again, so running
    /// it twice leaves the state of running it once. Before a retry the run
    /// re-reads its checkpoint, so a batch whose commit did land (an unknown
    /// outcome) is never repeated from a stale watermark, and an activation
    /// that landed is reported as `Activated`.
    pub fn run(&self) -> Result<RunOutcome> {
        self.config.validate()?;
        Run::start(self)?.drive()
    }
}

/// Position of a full pass, kept across retries so a retry resumes the same batch.
/// The rows one batch re-derives.
#[derive(Debug, Clone, Copy)]
enum BatchRows<'b> {
    /// Rows named by a catch-up tail; the projector reads them.
    Refs(&'b [SourceRowRef]),
    /// Rows the full pass has just read from `table` in this transaction.
    Scanned {
        table: &'b str,
        rows: &'b [StoredRow],
    },
}

impl BatchRows<'_> {
    fn is_empty(&self) -> bool {
        match self {
            BatchRows::Refs(refs) => refs.is_empty(),
            BatchRows::Scanned { rows, .. } => rows.is_empty(),
        }
    }
}

#[derive(Debug, Clone, Default)]
struct FullPass {
    /// `max_commit_seq` read under the lock at pass start.
    target: Option<i64>,
    table_index: usize,
    after: Option<String>,
    rows: i64,
}

/// What one step (one transaction) concluded.
enum Step {
    /// Keep going.
    Continue,
    /// History above the watermark is gone: start a full pass.
    NeedFullPass,
    /// The compare-and-set failed.
    Superseded,
    /// Sealed and activated.
    Activated,
}

/// The mutable state of one run.
struct Run<'r, 'a> {
    runner: &'r CheckpointRunner<'a>,
    ctx: ServeContext,
    client_id: String,
    epoch: i64,
    watermark: i64,
    observed: i64,
    full_pass: Option<FullPass>,
    started: Instant,
    rows_seen: i64,
    batches: u64,
    estimated_total: Option<i64>,
    phase: Phase,
    attempts: u32,
    /// A step failed transiently: re-read the checkpoint before the next one.
    needs_resync: bool,
}

impl<'r, 'a> Run<'r, 'a> {
    /// Declares and claims (retrying transient failures), capturing the
    /// expected log epoch. Both are safe to repeat after an unknown outcome:
    /// a declaration that landed is returned as it is, and a claim that
    /// landed is superseded by the retried claim (the next epoch), which
    /// keeps the stored watermark and observed rows.
    fn start(runner: &'r CheckpointRunner<'a>) -> Result<RunStart<'r, 'a>> {
        let mut ctx = runner.serve_context.clone();
        ctx.declarations.push(CheckpointDeclaration::new(
            runner.partition.clone(),
            runner.name.clone(),
            runner.schema_version,
        ));
        let mut attempts = 0;
        let storage = runner.storage;
        let declared = retry_transient(runner, &mut attempts, || {
            storage.declare_checkpoint(
                &runner.partition,
                &runner.name,
                runner.schema_version,
                runner.clock.now_ms(),
            )
        })?;
        let Some(declared) = declared else {
            return Ok(RunStart::Done(RunOutcome::GaveUp { attempts }));
        };
        if declared.state == CheckpointState::Activated {
            return Ok(RunStart::Done(RunOutcome::AlreadyActivated));
        }
        let claimed = retry_transient(runner, &mut attempts, || {
            storage.claim_checkpoint(
                &runner.partition,
                &runner.name,
                runner.schema_version,
                runner.clock.now_ms(),
            )
        });
        let claimed = match claimed {
            Ok(Some(claimed)) => claimed,
            Ok(None) => return Ok(RunStart::Done(RunOutcome::GaveUp { attempts })),
            // Activated between declare and claim.
            Err(e) if e.code() == ErrorCode::CheckpointNotDeclared => {
                return Ok(RunStart::Done(RunOutcome::AlreadyActivated))
            }
            Err(e) => return Err(e),
        };
        let log_epoch = retry_transient(runner, &mut attempts, || {
            storage.get_partition_log_epoch(&runner.partition)
        })?;
        let Some(log_epoch) = log_epoch else {
            return Ok(RunStart::Done(RunOutcome::GaveUp { attempts }));
        };
        ctx.expected_log_epoch = log_epoch;
        let full_pass = (claimed.watermark == 0).then(FullPass::default);
        Ok(RunStart::Running(Box::new(Run {
            runner,
            ctx,
            client_id: runner.client_id(),
            epoch: claimed.owner_epoch,
            watermark: claimed.watermark,
            observed: claimed.observed_rows,
            full_pass,
            started: Instant::now(),
            rows_seen: 0,
            batches: 0,
            estimated_total: (claimed.observed_rows > 0).then_some(claimed.observed_rows),
            phase: Phase::Claim,
            attempts,
            needs_resync: false,
        })))
    }

    fn report(&mut self, phase: Phase) {
        self.phase = phase;
        self.runner.progress.on_progress(&Progress {
            phase,
            rows_seen: self.rows_seen,
            estimated_total: self.estimated_total,
            batches: self.batches,
            watermark: self.watermark,
            owner_epoch: self.epoch,
            elapsed: self.started.elapsed(),
        });
    }

    fn drive(mut self) -> Result<RunOutcome> {
        loop {
            if self.attempts >= self.runner.config.max_attempts {
                self.report(Phase::Done);
                return Ok(RunOutcome::GaveUp {
                    attempts: self.attempts,
                });
            }
            let step = if self.needs_resync {
                self.resync()
            } else if self.full_pass.is_some() {
                self.full_pass_batch()
            } else {
                self.catch_up_batch()
            };
            match step {
                Ok(Step::Continue) => {}
                Ok(Step::NeedFullPass) => {
                    self.attempts += 1;
                    self.full_pass = Some(FullPass::default());
                }
                Ok(Step::Activated) => {
                    self.report(Phase::Done);
                    return Ok(RunOutcome::Activated {
                        owner_epoch: self.epoch,
                        watermark: self.watermark,
                        observed_rows: self.observed,
                    });
                }
                Ok(Step::Superseded) => {
                    self.report(Phase::Done);
                    return self.superseded_outcome();
                }
                Err(error) if is_transient(&error) => {
                    self.attempts += 1;
                    let delay = self.runner.config.backoff_ms(self.attempts);
                    self.runner.pause.pause(Duration::from_millis(delay));
                    self.needs_resync = true;
                }
                Err(error) => return Err(error),
            }
        }
    }

    /// After a CAS failure: activated by someone → `AlreadyActivated`, else `Superseded`.
    fn superseded_outcome(&self) -> Result<RunOutcome> {
        let stored = self
            .runner
            .storage
            .read_checkpoint(&self.runner.partition, &self.runner.name)?;
        Ok(match stored {
            Some(cp) if cp.state == CheckpointState::Activated && cp.owner_epoch != self.epoch => {
                RunOutcome::AlreadyActivated
            }
            _ => RunOutcome::Superseded {
                owner_epoch: self.epoch,
            },
        })
    }

    /// After a transient failure the last commit may or may not have landed
    /// (`outcome_unknown`): re-read the checkpoint so the run continues from
    /// what is stored. A catch-up batch that landed advanced the stored
    /// watermark past its tail; repeating it from the old watermark would
    /// find its idempotency key taken, skip its rows, and certify source
    /// changes written since then that it never projected. An activation
    /// that landed is this run's success. A checkpoint another owner claimed
    /// is left to the next step's compare-and-set (`Superseded`).
    fn resync(&mut self) -> Result<Step> {
        let stored = self
            .runner
            .storage
            .read_checkpoint(&self.runner.partition, &self.runner.name)?;
        self.needs_resync = false;
        if let Some(cp) = stored {
            if cp.owner_epoch == self.epoch {
                self.watermark = self.watermark.max(cp.watermark);
                if cp.state == CheckpointState::Activated {
                    self.observed = cp.observed_rows;
                    self.batches += 1;
                    return Ok(Step::Activated);
                }
            }
        }
        Ok(Step::Continue)
    }

    /// `begin` → lock → serve gate (refusal → rollback and the error).
    fn open_batch(&self) -> Result<Box<dyn StorageTransaction + 'a>> {
        let runner = self.runner;
        let mut tx = runner.storage.begin(&runner.partition)?;
        tx.lock_partition_for_push()?;
        let gate = tx.read_serve_gate(runner.schema_version)?;
        if let Err(refusal) = check_serve_gate(&gate, runner.schema_version, &self.ctx) {
            tx.rollback()?;
            return Err(refusal);
        }
        Ok(tx)
    }

    /// Appends the projector's changes under an idempotency key, unless that
    /// batch was already committed by an earlier attempt.
    fn record(
        &self,
        tx: &mut dyn StorageTransaction,
        key: &str,
        rows: BatchRows<'_>,
    ) -> Result<()> {
        if rows.is_empty() || tx.get_push_result(&self.client_id, key)?.is_some() {
            return Ok(());
        }
        let projector = self.runner.projector;
        let changes: Vec<NewChange> = match rows {
            BatchRows::Refs(refs) => projector.project(tx, refs)?,
            BatchRows::Scanned { table, rows } => projector.project_scanned(tx, table, rows)?,
        };
        if changes.is_empty() {
            return Ok(());
        }
        let commit_seq = tx.append_commit(&NewCommit {
            client_id: self.client_id.clone(),
            client_commit_id: key.to_owned(),
            actor_id: self.runner.config.client_id_prefix.clone(),
            created_at_ms: self.runner.clock.now_ms(),
            changes,
        })?;
        tx.put_push_result(&self.client_id, key, &StoredPushResult::applied(commit_seq))
    }

    fn advance(
        &self,
        tx: &mut dyn StorageTransaction,
        watermark: i64,
        observed: i64,
    ) -> Result<bool> {
        tx.advance_checkpoint(
            &self.runner.name,
            self.epoch,
            watermark,
            observed,
            self.runner.clock.now_ms(),
        )
    }

    /// One batch of the full pass (§8.4).
    fn full_pass_batch(&mut self) -> Result<Step> {
        if self.phase != Phase::FullPass {
            self.report(Phase::FullPass);
        }
        let sources = self.runner.projector.sources().to_vec();
        let mut pass = self.full_pass.clone().unwrap_or_default();
        let mut tx = self.open_batch()?;
        let target = match pass.target {
            Some(t) => t,
            None => {
                let t = tx.max_commit_seq()?;
                pass.target = Some(t);
                t
            }
        };
        let Some(table) = sources.get(pass.table_index) else {
            // Pass end: certify the target.
            let observed = self.observed.saturating_add(pass.rows);
            if !self.advance(tx.as_mut(), target, observed)? {
                tx.rollback()?;
                return Ok(Step::Superseded);
            }
            tx.commit()?;
            self.watermark = target;
            self.observed = observed;
            self.full_pass = None;
            self.batches += 1;
            self.report(Phase::CatchUp);
            return Ok(Step::Continue);
        };
        let batch =
            tx.scan_partition_rows(table, pass.after.as_deref(), self.runner.config.batch_size)?;
        if batch.is_empty() {
            tx.rollback()?;
            pass.table_index += 1;
            pass.after = None;
            self.full_pass = Some(pass);
            return Ok(Step::Continue);
        }
        let key = format!(
            "{}:full{}:{}:{}",
            self.epoch,
            target,
            table,
            pass.after.as_deref().unwrap_or("")
        );
        self.record(
            tx.as_mut(),
            &key,
            BatchRows::Scanned {
                table,
                rows: &batch,
            },
        )?;
        let batch_rows = i64::try_from(batch.len()).unwrap_or(i64::MAX);
        let rows = pass.rows.saturating_add(batch_rows);
        if !self.advance(
            tx.as_mut(),
            self.watermark,
            self.observed.saturating_add(rows),
        )? {
            tx.rollback()?;
            return Ok(Step::Superseded);
        }
        tx.commit()?;
        pass.rows = rows;
        pass.after = batch.last().map(|r| r.row_id.clone());
        if batch_rows < self.runner.config.batch_size {
            pass.table_index += 1;
            pass.after = None;
        }
        self.full_pass = Some(pass);
        self.rows_seen = self.rows_seen.saturating_add(batch_rows);
        self.batches += 1;
        self.report(Phase::FullPass);
        Ok(Step::Continue)
    }

    /// One catch-up iteration, ending in the seal when the tail is exhausted (§8.5).
    fn catch_up_batch(&mut self) -> Result<Step> {
        let sources = self.runner.projector.sources().to_vec();
        let mut tx = self.open_batch()?;
        if tx.has_source_changes_above(&sources, self.watermark)? == Coverage::Unverifiable {
            tx.rollback()?;
            return Ok(Step::NeedFullPass);
        }
        let tail = match self.collect_tail(tx.as_mut(), &sources)? {
            Some(tail) => tail,
            None => {
                // A single commit larger than one listing page: re-read everything.
                tx.rollback()?;
                return Ok(Step::NeedFullPass);
            }
        };
        let key = format!("{}:catchup:{}", self.epoch, self.watermark);
        self.record(tx.as_mut(), &key, BatchRows::Refs(&tail.rows))?;
        let seen = i64::try_from(tail.rows.len()).unwrap_or(i64::MAX);
        if !tail.exhausted {
            if !self.advance(tx.as_mut(), tail.last_seq, self.observed)? {
                tx.rollback()?;
                return Ok(Step::Superseded);
            }
            tx.commit()?;
            self.watermark = tail.last_seq;
            self.rows_seen = self.rows_seen.saturating_add(seen);
            self.batches += 1;
            self.report(Phase::CatchUp);
            return Ok(Step::Continue);
        }
        self.report(Phase::Seal);
        let sealed = tx.max_commit_seq()?;
        if !self.advance(tx.as_mut(), sealed, self.observed)? {
            tx.rollback()?;
            return Ok(Step::Superseded);
        }
        let outcome = tx.activate_checkpoint(
            &self.runner.name,
            self.epoch,
            sealed,
            &sources,
            self.runner.clock.now_ms(),
        )?;
        match outcome {
            ActivationOutcome::Activated => {
                tx.commit()?;
                self.watermark = sealed;
                self.rows_seen = self.rows_seen.saturating_add(seen);
                self.batches += 1;
                Ok(Step::Activated)
            }
            ActivationOutcome::Stale => {
                tx.rollback()?;
                Ok(Step::Superseded)
            }
            ActivationOutcome::Unverifiable => {
                tx.rollback()?;
                Ok(Step::NeedFullPass)
            }
        }
    }

    /// Collects whole commits of the source tail above the watermark until at
    /// least one batch of distinct rows is gathered. `None` when one commit
    /// alone exceeds a listing page (it cannot be split safely).
    fn collect_tail(
        &self,
        tx: &mut dyn StorageTransaction,
        sources: &[String],
    ) -> Result<Option<Tail>> {
        let batch = usize::try_from(self.runner.config.batch_size).unwrap_or(usize::MAX);
        let mut seen = BTreeSet::new();
        let mut rows = Vec::new();
        // Every commit at or below `cursor` is fully collected.
        let mut cursor = self.watermark;
        loop {
            let page = tx.list_source_changes(sources, cursor, TAIL_PAGE)?;
            let Some(last) = page.last() else {
                return Ok(Some(Tail::exhausted(rows, cursor)));
            };
            let full_page = i64::try_from(page.len()).unwrap_or(i64::MAX) == TAIL_PAGE;
            // On a full page the last commit may continue on the next page: leave it.
            let complete_through = if full_page {
                last.commit_seq - 1
            } else {
                last.commit_seq
            };
            if complete_through <= cursor {
                return Ok(None);
            }
            let mut current = cursor;
            for change in page.iter().take_while(|c| c.commit_seq <= complete_through) {
                if change.commit_seq != current {
                    cursor = current;
                    if seen.len() >= batch {
                        return Ok(Some(Tail {
                            rows,
                            last_seq: cursor,
                            exhausted: false,
                        }));
                    }
                    current = change.commit_seq;
                }
                if change.client_id == self.client_id {
                    continue;
                }
                let key = SourceRowRef {
                    table: change.table.clone(),
                    row_id: change.row_id.clone(),
                };
                if seen.insert(key.clone()) {
                    rows.push(key);
                }
            }
            cursor = complete_through;
            if !full_page {
                return Ok(Some(Tail::exhausted(rows, cursor)));
            }
        }
    }
}

/// The collected tail of one catch-up iteration.
struct Tail {
    rows: Vec<SourceRowRef>,
    /// The last commit fully collected.
    last_seq: i64,
    /// True when nothing above `last_seq` remains.
    exhausted: bool,
}

impl Tail {
    fn exhausted(rows: Vec<SourceRowRef>, last_seq: i64) -> Self {
        Self {
            rows,
            last_seq,
            exhausted: true,
        }
    }
}

enum RunStart<'r, 'a> {
    Done(RunOutcome),
    Running(Box<Run<'r, 'a>>),
}

impl RunStart<'_, '_> {
    fn drive(self) -> Result<RunOutcome> {
        match self {
            RunStart::Done(outcome) => Ok(outcome),
            RunStart::Running(run) => run.drive(),
        }
    }
}

/// Whether the runner retries after `error`: `busy` (nothing was written),
/// `connection_lost` (the connection died before anything of the
/// transaction could persist) and `outcome_unknown` (the commit may have
/// landed; the run re-reads its checkpoint before the retry).
fn is_transient(error: &Error) -> bool {
    matches!(
        error.code(),
        ErrorCode::Busy | ErrorCode::ConnectionLost | ErrorCode::OutcomeUnknown
    )
}

/// Retries `op` after a transient failure ([`is_transient`]) with backoff;
/// `Ok(None)` when attempts ran out. Only for operations that are safe to
/// repeat whether or not the failed attempt took effect.
fn retry_transient<T>(
    runner: &CheckpointRunner<'_>,
    attempts: &mut u32,
    mut op: impl FnMut() -> Result<T>,
) -> Result<Option<T>> {
    loop {
        match op() {
            Ok(value) => return Ok(Some(value)),
            Err(e) if is_transient(&e) => {
                *attempts += 1;
                if *attempts >= runner.config.max_attempts {
                    return Ok(None);
                }
                runner
                    .pause
                    .pause(Duration::from_millis(runner.config.backoff_ms(*attempts)));
            }
            Err(e) => return Err(e),
        }
    }
}
