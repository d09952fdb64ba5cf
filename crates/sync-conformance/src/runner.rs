//! Runs checks against a harness, in parallel, each with its own database,
//! and reports PASS / FAIL / SKIP per checklist ID.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use sync_core::Capabilities;

use crate::check::{CheckDef, Failure};
use crate::context::Ctx;
use crate::harness::Harness;
use crate::properties::Properties;
use crate::registry::registry;

/// Environment variable that narrows [`assert_suite_passes`] to the checks
/// whose ID or group starts with its value, or with one of its
/// comma-separated prefixes (`E-,C-350`; see [`filter_matches`]): mutation
/// testing judges a crate by the checks that exercise it; `cargo xtask
/// test` clears it.
pub const FILTER_ENV: &str = "SYNCSTORE_CONFORMANCE_FILTER";

/// Options of a suite run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Run only checks whose ID or group starts with this prefix, or with
    /// one of its comma-separated prefixes ([`filter_matches`]).
    pub filter: Option<String>,
    /// Checks run in parallel (default: available parallelism).
    pub threads: usize,
    /// A check still running after this long is reported as failed (hang guard).
    pub check_timeout: Duration,
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            filter: None,
            threads: std::thread::available_parallelism().map_or(2, usize::from),
            check_timeout: Duration::from_secs(300),
        }
    }
}

/// Outcome of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Every assertion held.
    Pass,
    /// An assertion failed, an unexpected error occurred, or the check panicked.
    Fail,
    /// The dialect does not advertise the capability group the check needs.
    Skip,
}

impl Status {
    /// `pass` / `fail` / `skip`.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Fail => "fail",
            Status::Skip => "skip",
        }
    }
}

/// The reported outcome of one check.
#[derive(Debug, Clone)]
pub struct CheckOutcome {
    /// Checklist ID.
    pub id: &'static str,
    /// Group.
    pub group: &'static str,
    /// Title.
    pub title: &'static str,
    /// Status.
    pub status: Status,
    /// Failure or skip reason.
    pub detail: Option<String>,
    /// Wall time.
    pub duration: Duration,
}

/// Outcomes of one suite run on one dialect.
#[derive(Debug, Clone)]
pub struct SuiteReport {
    /// Dialect name.
    pub dialect: String,
    /// Outcomes ordered by ID.
    pub outcomes: Vec<CheckOutcome>,
}

impl SuiteReport {
    /// `(pass, fail, skip)` counts.
    pub fn counts(&self) -> (usize, usize, usize) {
        let count = |s| self.outcomes.iter().filter(|o| o.status == s).count();
        (
            count(Status::Pass),
            count(Status::Fail),
            count(Status::Skip),
        )
    }

    /// True when nothing failed.
    pub fn passed(&self) -> bool {
        self.counts().1 == 0
    }

    /// The failed outcomes.
    pub fn failures(&self) -> impl Iterator<Item = &CheckOutcome> {
        self.outcomes.iter().filter(|o| o.status == Status::Fail)
    }

    /// One line per check: `PASS C-001 sqlite 12ms`, with the reason for FAIL/SKIP.
    pub fn lines(&self) -> Vec<String> {
        self.outcomes
            .iter()
            .map(|o| {
                let mut line = format!(
                    "{} {} {} {}ms",
                    o.status.as_str().to_uppercase(),
                    o.id,
                    self.dialect,
                    o.duration.as_millis()
                );
                if let Some(detail) = &o.detail {
                    line.push_str(" — ");
                    line.push_str(detail);
                }
                line
            })
            .collect()
    }

    /// The summary line, e.g. `sqlite: 321 passed, 0 failed, 0 skipped`.
    pub fn summary_line(&self) -> String {
        let (pass, fail, skip) = self.counts();
        format!(
            "{}: {pass} passed, {fail} failed, {skip} skipped",
            self.dialect
        )
    }

    /// The JSON document of `cargo xtask conformance --json`.
    pub fn to_json(&self) -> Value {
        let (pass, fail, skip) = self.counts();
        let checks: Vec<Value> = self
            .outcomes
            .iter()
            .map(|o| {
                json!({
                    "id": o.id,
                    "group": o.group,
                    "title": o.title,
                    "status": o.status.as_str(),
                    "detail": o.detail,
                    "duration_ms": u64::try_from(o.duration.as_millis()).unwrap_or(u64::MAX),
                })
            })
            .collect();
        json!({
            "dialect": self.dialect,
            "checks": checks,
            "summary": {"pass": pass, "fail": fail, "skip": skip},
        })
    }

    /// A JUnit XML document of this run.
    pub fn to_junit(&self) -> String {
        let (_, fail, skip) = self.counts();
        let mut out = format!(
            "<testsuite name=\"conformance-{}\" tests=\"{}\" failures=\"{fail}\" skipped=\"{skip}\">\n",
            xml(&self.dialect),
            self.outcomes.len()
        );
        for o in &self.outcomes {
            out.push_str(&format!(
                "  <testcase classname=\"{}.{}\" name=\"{} {}\" time=\"{:.3}\">",
                xml(&self.dialect),
                xml(o.group),
                o.id,
                xml(o.title),
                o.duration.as_secs_f64()
            ));
            match o.status {
                Status::Pass => {}
                Status::Fail => out.push_str(&format!(
                    "<failure message=\"{}\"/>",
                    xml(o.detail.as_deref().unwrap_or(""))
                )),
                Status::Skip => out.push_str(&format!(
                    "<skipped message=\"{}\"/>",
                    xml(o.detail.as_deref().unwrap_or(""))
                )),
            }
            out.push_str("</testcase>\n");
        }
        out.push_str("</testsuite>\n");
        out
    }
}

fn xml(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The prefixes of a filter: its comma-separated parts, trimmed, empty
/// parts left out (`"E-, C-350"` → `["E-", "C-350"]`).
pub fn filter_prefixes(filter: &str) -> impl Iterator<Item = &str> {
    filter.split(',').map(str::trim).filter(|p| !p.is_empty())
}

/// Whether a check with this ID and group is selected by `filter`: its ID
/// or its group starts with one of the filter's prefixes
/// ([`filter_prefixes`]).
///
/// ```
/// use sync_conformance::filter_matches;
/// assert!(filter_matches("E-,C-350", "C-350", "client_records"));
/// assert!(filter_matches("E-,C-350", "E-010", "engine_push"));
/// assert!(!filter_matches("E-,C-350", "C-351", "client_records"));
/// assert!(filter_matches("client", "C-351", "client_records"));
/// ```
pub fn filter_matches(filter: &str, id: &str, group: &str) -> bool {
    filter_prefixes(filter).any(|p| id.starts_with(p) || group.starts_with(p))
}

/// The checks a harness with `properties` runs that match `filter`, ordered by ID.
pub fn selected_checks(properties: &Properties, filter: Option<&str>) -> Vec<&'static CheckDef> {
    registry()
        .into_iter()
        .filter(|c| c.requires.met_by(properties))
        .filter(|c| filter.is_none_or(|f| filter_matches(f, c.id, c.group)))
        .collect()
}

fn capability_advertised(caps: Capabilities, check: &CheckDef) -> bool {
    use sync_core::Capability as C;
    match check.capability {
        None => true,
        Some(C::Reactions) => caps.reactions,
        Some(C::BlobRefs) => caps.blob_refs,
        Some(C::Admin) => caps.admin,
        Some(C::AuthoritativeQuery) => caps.authoritative_query,
        Some(C::IndexScan) => caps.index_scan,
    }
}

/// Capabilities advertised by a freshly opened instance of the harness.
fn harness_capabilities(harness: &dyn Harness) -> Result<Capabilities, Failure> {
    let mut ctx = Ctx::new(harness);
    Ok(ctx.open()?.capabilities())
}

/// Runs one check with panic capture.
pub fn run_check(harness: &dyn Harness, check: &CheckDef) -> CheckOutcome {
    let started = Instant::now();
    let result = catch_unwind(AssertUnwindSafe(|| {
        let mut ctx = Ctx::new(harness);
        (check.run)(&mut ctx)
    }));
    let (status, detail) = match result {
        Ok(Ok(())) => (Status::Pass, None),
        Ok(Err(failure)) => (Status::Fail, Some(failure.message)),
        Err(panic) => {
            let text = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_else(|| "non-string panic".to_owned());
            (Status::Fail, Some(format!("panicked: {text}")))
        }
    };
    CheckOutcome {
        id: check.id,
        group: check.group,
        title: check.title,
        status,
        detail,
        duration: started.elapsed(),
    }
}

/// Runs the selected checks on `harness` and reports every outcome.
pub fn run_suite(harness: &dyn Harness, options: &RunOptions) -> SuiteReport {
    let checks = selected_checks(&harness.properties(), options.filter.as_deref());
    let caps = match harness_capabilities(harness) {
        Ok(caps) => caps,
        Err(failure) => {
            let outcomes = checks
                .iter()
                .map(|c| CheckOutcome {
                    id: c.id,
                    group: c.group,
                    title: c.title,
                    status: Status::Fail,
                    detail: Some(format!("harness setup failed: {failure}")),
                    duration: Duration::ZERO,
                })
                .collect();
            return SuiteReport {
                dialect: harness.dialect().to_owned(),
                outcomes,
            };
        }
    };
    let next = AtomicUsize::new(0);
    let outcomes = Mutex::new(Vec::with_capacity(checks.len()));
    std::thread::scope(|scope| {
        for _ in 0..options.threads.max(1) {
            scope.spawn(|| loop {
                let index = next.fetch_add(1, Ordering::SeqCst);
                let Some(check) = checks.get(index) else {
                    break;
                };
                let outcome = if capability_advertised(caps, check) {
                    run_guarded(harness, check, options.check_timeout)
                } else {
                    CheckOutcome {
                        id: check.id,
                        group: check.group,
                        title: check.title,
                        status: Status::Skip,
                        detail: Some(format!(
                            "capability {} not advertised",
                            check.capability.map_or("?", |c| c.as_str())
                        )),
                        duration: Duration::ZERO,
                    }
                };
                if let Ok(mut list) = outcomes.lock() {
                    list.push(outcome);
                }
            });
        }
    });
    let mut outcomes = outcomes.into_inner().unwrap_or_default();
    outcomes.sort_by_key(|o| o.id);
    SuiteReport {
        dialect: harness.dialect().to_owned(),
        outcomes,
    }
}

/// Runs a check on its own thread so that a hung check is reported instead
/// of stalling the suite (the thread is left behind; the process ends later).
fn run_guarded(harness: &dyn Harness, check: &CheckDef, timeout: Duration) -> CheckOutcome {
    let (sender, receiver) = mpsc::channel();
    std::thread::scope(|scope| {
        let worker = scope.spawn(move || {
            let _ = sender.send(run_check(harness, check));
        });
        match receiver.recv_timeout(timeout) {
            Ok(outcome) => {
                let _ = worker.join();
                outcome
            }
            Err(_) => {
                // A scoped thread cannot be abandoned: report the hang and exit,
                // because waiting would hang the whole run.
                eprintln!(
                    "FAIL {} timed out after {}s (hung check); aborting the run",
                    check.id,
                    timeout.as_secs()
                );
                std::process::exit(1);
            }
        }
    })
}

/// Runs the suite and panics with every failure listed unless all passed and
/// nothing was skipped. The entry point of a dialect's `tests/conformance.rs`.
pub fn assert_suite_passes(harness: &dyn Harness) {
    let filter = std::env::var(FILTER_ENV).ok().filter(|f| !f.is_empty());
    if let Some(prefix) = &filter {
        // Loud, so a stray variable cannot pass a run that checked less.
        println!(
            "{FILTER_ENV}={prefix}: only checks whose ID or group starts with it (or one of its comma-separated prefixes) run"
        );
    }
    let options = RunOptions {
        filter,
        ..RunOptions::default()
    };
    let report = run_suite(harness, &options);
    for line in report.lines() {
        println!("{line}");
    }
    println!("{}", report.summary_line());
    let bad: Vec<String> = report
        .outcomes
        .iter()
        .filter(|o| o.status != Status::Pass)
        .map(|o| {
            format!(
                "{} {} [{}]: {}",
                o.status.as_str().to_uppercase(),
                o.id,
                o.group,
                o.detail.as_deref().unwrap_or("")
            )
        })
        .collect();
    assert!(
        bad.is_empty(),
        "{} of {} conformance checks did not pass on {}:\n{}",
        bad.len(),
        report.outcomes.len(),
        report.dialect,
        bad.join("\n")
    );
}
