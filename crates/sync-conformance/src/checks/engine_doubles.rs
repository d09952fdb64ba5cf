//! Test doubles of the engine's hooks (`engine.md` §7): the fixture
//! resolver, a blob store holding `b1`, the `union` merger, sequential ids,
//! a ticking clock and recording validators / planners built from closures.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use sync_core::Clock;

use crate::check;
use crate::check::CheckResult;
use sync_engine::{
    BlobExistence, BlobStoreError, CandidateReader, CommitInput, CommitValidator, CrdtMerger,
    IdSource, MergeError, PlanError, ReactionPlan, ReactionPlanner, ResolveError, RowValidator,
    ScopeMap, ScopeResolver, ValidateContext, ValidateOperation, ValidationFailure,
};

/// A boxed error for `Failed` outcomes of the doubles.
pub(crate) fn boxed(text: &str) -> Box<dyn std::error::Error + Send + Sync> {
    text.to_owned().into()
}

fn map(pairs: &[(&str, &[&str])]) -> ScopeMap {
    pairs
        .iter()
        .map(|(k, vs)| {
            (
                (*k).to_owned(),
                vs.iter().map(|v| (*v).to_owned()).collect(),
            )
        })
        .collect()
}

/// What the fixture resolver answers.
#[derive(Debug, Clone)]
pub(crate) enum ResolverMode {
    /// `alice → {project_id:[p1]}`, `bob → {project_id:[p2]}`, `root → *`.
    Fixture,
    /// `Err(Failed)` for everyone.
    Failed,
    /// This map for everyone.
    Fixed(ScopeMap),
}

/// The fixture resolver; counts its calls.
#[derive(Debug)]
pub(crate) struct FixtureResolver {
    /// Calls so far.
    pub calls: AtomicUsize,
    mode: Mutex<ResolverMode>,
}

impl FixtureResolver {
    /// A resolver answering `mode`.
    pub(crate) fn new(mode: ResolverMode) -> Self {
        Self {
            calls: AtomicUsize::new(0),
            mode: Mutex::new(mode),
        }
    }

    /// Calls so far.
    pub(crate) fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    /// Switches the answer.
    pub(crate) fn set(&self, mode: ResolverMode) {
        if let Ok(mut m) = self.mode.lock() {
            *m = mode;
        }
    }

    /// The fixture answer for `actor`.
    pub(crate) fn fixture(actor: &str) -> ScopeMap {
        match actor {
            "alice" => map(&[("project_id", &["p1"])]),
            "bob" => map(&[("project_id", &["p2"])]),
            "root" => map(&[
                ("project_id", &["*"]),
                ("org_id", &["*"]),
                ("user_id", &["*"]),
            ]),
            _ => ScopeMap::new(),
        }
    }
}

impl ScopeResolver for FixtureResolver {
    fn resolve(&self, _: &str, actor_id: &str, _: &str) -> Result<ScopeMap, ResolveError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let mode = self
            .mode
            .lock()
            .map(|m| m.clone())
            .unwrap_or(ResolverMode::Failed);
        match mode {
            ResolverMode::Fixture => Ok(Self::fixture(actor_id)),
            ResolverMode::Failed => Err(ResolveError::Failed(boxed("resolver down"))),
            ResolverMode::Fixed(m) => Ok(m),
        }
    }
}

/// A scope map from pairs (for `ResolverMode::Fixed`).
pub(crate) fn scope_map(pairs: &[(&str, &[&str])]) -> ScopeMap {
    map(pairs)
}

/// A blob store holding `b1` and whatever [`Blobs::hold`] adds; counts calls.
#[derive(Debug, Default)]
pub(crate) struct Blobs {
    /// Calls so far.
    pub calls: AtomicUsize,
    held: Mutex<Vec<String>>,
}

impl Blobs {
    /// The store holds `blob_id` from now on.
    pub(crate) fn hold(&self, blob_id: &str) {
        self.held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(blob_id.to_owned());
    }
}

impl BlobExistence for Blobs {
    fn exists(&self, _: &str, blob_id: &str) -> Result<bool, BlobStoreError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(blob_id == "b1" || held.iter().any(|id| id == blob_id))
    }
}

/// The `union` merger: the sorted set of the bytes of both inputs; counts
/// calls, or fails every call when `failing`.
#[derive(Debug, Default)]
pub(crate) struct Union {
    /// Calls so far.
    pub calls: AtomicUsize,
    /// Fail every merge.
    pub failing: bool,
}

impl CrdtMerger for Union {
    fn merge(&self, stored: Option<&[u8]>, incoming: &[u8]) -> Result<Vec<u8>, MergeError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if self.failing {
            return Err(MergeError(boxed("merge refused")));
        }
        let set: BTreeSet<u8> = stored
            .unwrap_or_default()
            .iter()
            .chain(incoming)
            .copied()
            .collect();
        Ok(set.into_iter().collect())
    }
}

/// Ids `id-1`, `id-2`, … ; remembers every id issued.
#[derive(Debug, Default)]
pub(crate) struct SeqIds {
    next: AtomicUsize,
    /// Every id issued, in order.
    pub issued: Mutex<Vec<String>>,
}

impl SeqIds {
    /// The ids issued so far.
    pub(crate) fn issued(&self) -> Vec<String> {
        self.issued.lock().map(|v| v.clone()).unwrap_or_default()
    }
}

impl IdSource for SeqIds {
    fn new_id(&self) -> String {
        let n = self.next.fetch_add(1, Ordering::SeqCst) + 1;
        let id = format!("id-{n}");
        if let Ok(mut issued) = self.issued.lock() {
            issued.push(id.clone());
        }
        id
    }
}

/// A clock that advances by 1 ms on every read (E-041).
#[derive(Debug)]
pub(crate) struct TickingClock {
    now: AtomicI64,
}

impl TickingClock {
    /// Starts at `start`.
    pub(crate) fn new(start: i64) -> Self {
        Self {
            now: AtomicI64::new(start),
        }
    }
}

impl Clock for TickingClock {
    fn now_ms(&self) -> i64 {
        self.now.fetch_add(1, Ordering::SeqCst)
    }
}

type RowFn = dyn Fn(&ValidateOperation) -> Result<(), ValidationFailure> + Send + Sync;

/// A row validator from a closure; records every operation it saw.
pub(crate) struct RowCheck {
    body: Box<RowFn>,
    /// Operations seen, in call order.
    pub seen: Mutex<Vec<ValidateOperation>>,
}

impl std::fmt::Debug for RowCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RowCheck").finish_non_exhaustive()
    }
}

impl RowCheck {
    /// A validator running `body`.
    pub(crate) fn new(
        body: impl Fn(&ValidateOperation) -> Result<(), ValidationFailure> + Send + Sync + 'static,
    ) -> Arc<Self> {
        Arc::new(Self {
            body: Box::new(body),
            seen: Mutex::new(Vec::new()),
        })
    }

    /// A validator accepting everything.
    pub(crate) fn accept() -> Arc<Self> {
        Self::new(|_| Ok(()))
    }

    /// The operations seen so far.
    pub(crate) fn seen(&self) -> Vec<ValidateOperation> {
        self.seen.lock().map(|v| v.clone()).unwrap_or_default()
    }
}

impl RowValidator for RowCheck {
    fn validate(
        &self,
        op: &ValidateOperation,
        _: &ValidateContext,
    ) -> Result<(), ValidationFailure> {
        if let Ok(mut seen) = self.seen.lock() {
            seen.push(op.clone());
        }
        (self.body)(op)
    }
}

type CommitFn =
    dyn Fn(&CommitInput, &mut dyn CandidateReader) -> Result<(), ValidationFailure> + Send + Sync;

/// A whole-commit validator from a closure; counts calls.
pub(crate) struct CommitCheck {
    body: Box<CommitFn>,
    /// Calls so far.
    pub calls: AtomicUsize,
}

impl std::fmt::Debug for CommitCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommitCheck").finish_non_exhaustive()
    }
}

impl CommitCheck {
    /// A validator running `body`.
    pub(crate) fn new(
        body: impl Fn(&CommitInput, &mut dyn CandidateReader) -> Result<(), ValidationFailure>
            + Send
            + Sync
            + 'static,
    ) -> Arc<Self> {
        Arc::new(Self {
            body: Box::new(body),
            calls: AtomicUsize::new(0),
        })
    }

    /// Calls so far.
    pub(crate) fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

impl CommitValidator for CommitCheck {
    fn validate(
        &self,
        input: &CommitInput,
        read: &mut dyn CandidateReader,
    ) -> Result<(), ValidationFailure> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        (self.body)(input, read)
    }
}

type PlanFn = dyn Fn(&CommitInput) -> Result<Vec<ReactionPlan>, PlanError> + Send + Sync;

/// A reaction planner from a closure; counts calls.
pub(crate) struct Planner {
    body: Box<PlanFn>,
    /// Calls so far.
    pub calls: AtomicUsize,
}

impl std::fmt::Debug for Planner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Planner").finish_non_exhaustive()
    }
}

impl Planner {
    /// A planner running `body`.
    pub(crate) fn new(
        body: impl Fn(&CommitInput) -> Result<Vec<ReactionPlan>, PlanError> + Send + Sync + 'static,
    ) -> Arc<Self> {
        Arc::new(Self {
            body: Box::new(body),
            calls: AtomicUsize::new(0),
        })
    }

    /// Calls so far.
    pub(crate) fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

impl ReactionPlanner for Planner {
    fn plan(
        &self,
        input: &CommitInput,
        _: &mut dyn CandidateReader,
    ) -> Result<Vec<ReactionPlan>, PlanError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        (self.body)(input)
    }
}

/// A reaction plan with `key` and `kind`, version 1, payload `{}`.
pub(crate) fn plan(key: &str, kind: &str) -> ReactionPlan {
    ReactionPlan {
        key: key.to_owned(),
        kind: kind.to_owned(),
        version: 1,
        payload: serde_json::json!({}),
        max_attempts: None,
    }
}

/// Collects failures of work done inside a hook.
#[derive(Debug, Default, Clone)]
pub(crate) struct HookLog(Arc<Mutex<Vec<String>>>);

impl HookLog {
    /// Records a failure.
    pub(crate) fn note(&self, what: String) {
        if let Ok(mut log) = self.0.lock() {
            log.push(what);
        }
    }

    /// Fails the check when a failure was recorded.
    pub(crate) fn check_empty(&self) -> CheckResult {
        let log = self.0.lock().map(|l| l.clone()).unwrap_or_default();
        check!(log.is_empty(), "hook work failed: {log:?}");
        Ok(())
    }
}
