//! Fault injection at the database seam (feature `fault-injection`; tests
//! only, never enabled by a shipped binary).
//!
//! A [`FaultPlan`] is installed on a storage instance (each dialect has a
//! `set_fault_plan` method behind the same feature) and is consulted by the
//! one function through which that dialect executes every statement. The
//! plan counts statements from 1 and, at its target statement, tells the
//! dialect to inject its [`FaultKind`]. A plan fires at most once, so a
//! rollback issued after the fault runs normally; a plan built with
//! [`FaultPlan::count_only`] never fires and only counts (the dry run of a
//! sweep). Each dialect documents how it realises each kind.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

/// What goes wrong at the target statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FaultKind {
    /// The statement fails before it runs with an I/O-class error
    /// (`sync.storage.backend`).
    Fail,
    /// The statement fails before it runs with a lock/busy error
    /// (`sync.storage.busy`, retryable).
    Busy,
    /// The connection is lost before the statement runs: the open
    /// transaction is gone and the statement fails.
    ConnectionLost,
    /// The statement runs (and, for `COMMIT`, is durable), then the
    /// connection is lost before its reply is read: the caller sees an error
    /// although the effect happened.
    ReplyLost,
}

impl FaultKind {
    /// Every kind, in declaration order.
    pub const ALL: [FaultKind; 4] = [
        FaultKind::Fail,
        FaultKind::Busy,
        FaultKind::ConnectionLost,
        FaultKind::ReplyLost,
    ];

    /// `fail`, `busy`, `connection_lost` or `reply_lost`.
    pub fn as_str(self) -> &'static str {
        match self {
            FaultKind::Fail => "fail",
            FaultKind::Busy => "busy",
            FaultKind::ConnectionLost => "connection_lost",
            FaultKind::ReplyLost => "reply_lost",
        }
    }

    /// Whether the fault strikes after the statement ran.
    pub fn after_statement(self) -> bool {
        self == FaultKind::ReplyLost
    }
}

/// Which statement a text-targeted plan fails.
#[derive(Debug)]
enum StatementMatch {
    /// Exactly this text (trimmed).
    Exactly(String),
    /// `COMMIT`, alone or at the end of a multi-statement message.
    Commit,
}

/// How a message that sends its last statements and the `COMMIT` together ends.
const COMMIT_TAIL: &str = "; COMMIT";

impl StatementMatch {
    fn matches(&self, sql: &str) -> bool {
        let sql = sql.trim().trim_end_matches(';').trim_end();
        match self {
            StatementMatch::Exactly(text) => sql == text,
            StatementMatch::Commit => {
                sql.eq_ignore_ascii_case("COMMIT")
                    || sql
                        .len()
                        .checked_sub(COMMIT_TAIL.len())
                        .and_then(|start| sql.get(start..))
                        .is_some_and(|tail| tail.eq_ignore_ascii_case(COMMIT_TAIL))
            }
        }
    }
}

/// Called with `n` right before statement `n` of an observed dry run.
pub type StatementObserver = Box<dyn Fn(u64) + Send + Sync>;

/// Which statement fails, and how.
pub struct FaultPlan {
    target: Option<(u64, FaultKind)>,
    /// Fire at the first statement this predicate picks instead.
    text_target: Option<(StatementMatch, FaultKind)>,
    seen: AtomicU64,
    fired: AtomicBool,
    log: Mutex<Vec<String>>,
    observer: Option<StatementObserver>,
    observing: AtomicBool,
}

impl std::fmt::Debug for FaultPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaultPlan")
            .field("target", &self.target)
            .field("seen", &self.seen)
            .field("fired", &self.fired)
            .finish_non_exhaustive()
    }
}

impl FaultPlan {
    /// A plan whose first statement with exactly the text `sql` (compared
    /// after trimming) suffers `kind` — e.g. the first `COMMIT`, whichever
    /// transaction runs it.
    pub fn at_statement(sql: &str, kind: FaultKind) -> Arc<Self> {
        Arc::new(Self {
            text_target: Some((StatementMatch::Exactly(sql.trim().to_owned()), kind)),
            ..Self::new(None)
        })
    }

    /// A plan whose first committing statement suffers `kind`: the first
    /// statement that is `COMMIT` or ends with `; COMMIT` (a dialect may send
    /// its last writes and the `COMMIT` in one message), whichever
    /// transaction runs it.
    pub fn at_first_commit(kind: FaultKind) -> Arc<Self> {
        Arc::new(Self {
            text_target: Some((StatementMatch::Commit, kind)),
            ..Self::new(None)
        })
    }

    /// A plan that never fires and records every statement (the dry run).
    pub fn count_only() -> Arc<Self> {
        Arc::new(Self::new(None))
    }

    /// A plan whose `nth` statement (1-based) suffers `kind`.
    pub fn at(nth: u64, kind: FaultKind) -> Arc<Self> {
        Arc::new(Self::new(Some((nth, kind))))
    }

    /// A plan that never fires and calls `observer(n)` right before each
    /// statement `n` (the statements the observer itself issues, on any
    /// connection that consults this plan, are neither counted nor
    /// observed). Lets a test record the committed state between statements.
    pub fn observing(observer: impl Fn(u64) + Send + Sync + 'static) -> Arc<Self> {
        Arc::new(Self {
            observer: Some(Box::new(observer)),
            ..Self::new(None)
        })
    }

    fn new(target: Option<(u64, FaultKind)>) -> Self {
        Self {
            target,
            text_target: None,
            seen: AtomicU64::new(0),
            fired: AtomicBool::new(false),
            log: Mutex::new(Vec::new()),
            observer: None,
            observing: AtomicBool::new(false),
        }
    }

    /// Called by a dialect before it executes a statement: counts it,
    /// records its text, and returns the fault to inject into it, if any.
    pub fn on_statement(&self, sql: &str) -> Option<FaultKind> {
        if self.observing.load(Ordering::SeqCst) {
            return None;
        }
        if let Some(observer) = &self.observer {
            self.observing.store(true, Ordering::SeqCst);
            observer(self.statements() + 1);
            self.observing.store(false, Ordering::SeqCst);
        }
        let n = self.seen.fetch_add(1, Ordering::SeqCst) + 1;
        self.log
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(abridge(sql.trim()));
        if let Some((matcher, kind)) = &self.text_target {
            return (matcher.matches(sql) && !self.fired.swap(true, Ordering::SeqCst))
                .then_some(*kind);
        }
        let (nth, kind) = self.target?;
        (n == nth && !self.fired.swap(true, Ordering::SeqCst)).then_some(kind)
    }

    /// Statements counted so far.
    pub fn statements(&self) -> u64 {
        self.seen.load(Ordering::SeqCst)
    }

    /// Whether the fault was injected.
    pub fn fired(&self) -> bool {
        self.fired.load(Ordering::SeqCst)
    }

    /// The text of every statement counted, in order (a text longer than
    /// 160 characters keeps its first 120 and last 40, joined by ` … `).
    pub fn statement_log(&self) -> Vec<String> {
        self.log
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

fn abridge(sql: &str) -> String {
    let chars: Vec<char> = sql.chars().collect();
    if chars.len() <= 160 {
        return sql.to_owned();
    }
    let head: String = chars[..120].iter().collect();
    let tail: String = chars[chars.len() - 40..].iter().collect();
    format!("{head} … {tail}")
}

/// The plan slot of one storage instance.
#[derive(Debug, Default)]
pub struct FaultSlot {
    plan: RwLock<Option<Arc<FaultPlan>>>,
}

impl FaultSlot {
    /// Installs (`Some`) or removes (`None`) the plan.
    pub fn set(&self, plan: Option<Arc<FaultPlan>>) {
        *self.plan.write().unwrap_or_else(PoisonError::into_inner) = plan;
    }

    /// The installed plan.
    pub fn get(&self) -> Option<Arc<FaultPlan>> {
        self.plan
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fires_once_at_the_target() {
        let plan = FaultPlan::at(2, FaultKind::Busy);
        assert_eq!(plan.on_statement("BEGIN"), None);
        assert_eq!(plan.on_statement("SELECT 1"), Some(FaultKind::Busy));
        assert_eq!(plan.on_statement("ROLLBACK"), None);
        assert!(plan.fired());
        assert_eq!(plan.statements(), 3);
        assert_eq!(plan.statement_log(), ["BEGIN", "SELECT 1", "ROLLBACK"]);
    }

    #[test]
    fn observers_see_each_statement_and_are_not_counted() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let plan = {
            let seen = Arc::clone(&seen);
            let inner: Arc<Mutex<Option<Arc<FaultPlan>>>> = Arc::default();
            let inner_for_observer = Arc::clone(&inner);
            let plan = FaultPlan::observing(move |n| {
                // A statement issued by the observer itself is not counted.
                if let Some(plan) = inner_for_observer.lock().unwrap().as_ref() {
                    assert_eq!(plan.on_statement("SELECT observer"), None);
                }
                seen.lock().unwrap().push(n);
            });
            *inner.lock().unwrap() = Some(Arc::clone(&plan));
            plan
        };
        plan.on_statement("BEGIN");
        plan.on_statement("COMMIT");
        assert_eq!(*seen.lock().unwrap(), [1, 2]);
        assert_eq!(plan.statement_log(), ["BEGIN", "COMMIT"]);
    }

    #[test]
    fn kinds_have_their_documented_names_and_only_a_lost_reply_strikes_after() {
        let names: Vec<_> = FaultKind::ALL.iter().map(|k| k.as_str()).collect();
        assert_eq!(names, ["fail", "busy", "connection_lost", "reply_lost"]);
        let after: Vec<_> = FaultKind::ALL
            .into_iter()
            .filter(|k| k.after_statement())
            .collect();
        assert_eq!(after, [FaultKind::ReplyLost]);
    }

    #[test]
    fn a_commit_tail_is_matched_by_its_last_bytes_whatever_precedes_it() {
        let plan = FaultPlan::at_first_commit(FaultKind::Fail);
        // The last eight bytes of this text start inside a character.
        assert_eq!(plan.on_statement("SELECT 'éééé'"), None);
        assert_eq!(
            plan.on_statement("SELECT 'é'; COMMIT"),
            Some(FaultKind::Fail)
        );
        let terminated = FaultPlan::at_first_commit(FaultKind::Busy);
        assert_eq!(terminated.on_statement("COMMIT;"), Some(FaultKind::Busy));
        let short = FaultPlan::at_first_commit(FaultKind::Busy);
        assert_eq!(short.on_statement("MMIT"), None);
        assert_eq!(short.on_statement("x; commit"), Some(FaultKind::Busy));
    }

    #[test]
    fn long_statements_are_logged_abridged_and_short_ones_whole() {
        let plan = FaultPlan::count_only();
        let exact: String = "é".repeat(160);
        let long = format!("{}{}", "a".repeat(130), "z".repeat(50));
        plan.on_statement(&exact);
        plan.on_statement(&long);
        let log = plan.statement_log();
        assert_eq!(log[0], exact);
        assert_eq!(log[1], format!("{} … {}", "a".repeat(120), "z".repeat(40)));
    }

    #[test]
    fn debug_names_the_target_and_the_count() {
        let plan = FaultPlan::at(7, FaultKind::Busy);
        plan.on_statement("BEGIN");
        let text = format!("{plan:?}");
        assert!(text.starts_with("FaultPlan {"), "{text}");
        assert!(text.contains("target: Some((7, Busy))"), "{text}");
        assert!(text.contains("seen: 1"), "{text}");
    }

    #[test]
    fn a_slot_holds_the_installed_plan_until_removed() {
        let slot = FaultSlot::default();
        assert!(slot.get().is_none());
        let plan = FaultPlan::at(1, FaultKind::Fail);
        slot.set(Some(Arc::clone(&plan)));
        assert!(slot.get().is_some_and(|p| Arc::ptr_eq(&p, &plan)));
        slot.set(None);
        assert!(slot.get().is_none());
    }

    #[test]
    fn count_only_never_fires() {
        let plan = FaultPlan::count_only();
        for _ in 0..5 {
            assert_eq!(plan.on_statement("COMMIT"), None);
        }
        assert!(!plan.fired());
        assert_eq!(plan.statements(), 5);
    }

    #[test]
    fn text_targets_fire_once_at_the_first_match() {
        let plan = FaultPlan::at_statement("COMMIT", FaultKind::Fail);
        assert_eq!(plan.on_statement("BEGIN"), None);
        assert_eq!(plan.on_statement(" COMMIT "), Some(FaultKind::Fail));
        assert_eq!(plan.on_statement("COMMIT"), None);
        let commit = FaultPlan::at_first_commit(FaultKind::Busy);
        assert_eq!(commit.on_statement("SELECT 'COMMIT'"), None);
        assert_eq!(commit.on_statement("UPDATE t SET a = 1"), None);
        assert_eq!(
            commit.on_statement("INSERT INTO t VALUES (1); COMMIT"),
            Some(FaultKind::Busy)
        );
        assert_eq!(commit.on_statement("COMMIT"), None);
        let plain = FaultPlan::at_first_commit(FaultKind::Fail);
        assert_eq!(plain.on_statement("commit"), Some(FaultKind::Fail));
    }
}
