//! Progress of long commands (backfill, prune, bump rewrites), on stderr.
//!
//! - stderr a terminal: an indicatif bar — position/total, percent, rate and
//!   ETA when the total is known, else a spinner with position and rate;
//! - otherwise: a log line (`-v`, level info) at the first update and then
//!   at most every [`LOG_EVERY`] (`SYNCSTORE_PROGRESS_SECS` overrides it),
//!   naming position, total, percent and rate.
//!
//! Logs, pipes and `--json` consumers never see escape codes.

use std::io::IsTerminal;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use sync_backfill::{Phase, Progress, ProgressObserver};
use sync_core::{RewriteObserver, RewriteProgress};

use crate::escape::field;

/// How often the non-terminal progress line is logged by default.
pub const LOG_EVERY: Duration = Duration::from_secs(5);

/// The environment variable that sets the interval of the non-terminal
/// progress line, in whole seconds (`0`: every update).
pub const INTERVAL_VAR: &str = "SYNCSTORE_PROGRESS_SECS";

/// The time source of the log lines (a virtual clock in tests).
type Now = Arc<dyn Fn() -> Instant + Send + Sync>;

/// Where the log lines go (the `info` log; a list in tests).
type Sink = Arc<dyn Fn(String) + Send + Sync>;

fn info_log() -> Sink {
    Arc::new(|line| tracing::info!("{line}"))
}

/// The interval of the non-terminal progress line: `SYNCSTORE_PROGRESS_SECS`
/// when set to a whole number of seconds, else [`LOG_EVERY`] (a value that
/// is not a number is reported and ignored).
fn log_interval() -> Duration {
    match std::env::var(INTERVAL_VAR) {
        Err(_) => LOG_EVERY,
        Ok(text) => parse_interval(&text).unwrap_or_else(|| {
            tracing::warn!(
                "{INTERVAL_VAR}={} is not a whole number of seconds; logging progress every {}s",
                field(&text),
                LOG_EVERY.as_secs()
            );
            LOG_EVERY
        }),
    }
}

fn parse_interval(text: &str) -> Option<Duration> {
    text.trim().parse::<u64>().ok().map(Duration::from_secs)
}

/// A progress display for one long operation.
pub struct Meter {
    label: String,
    unit: &'static str,
    bar: Option<ProgressBar>,
    every: Duration,
    now: Now,
    sink: Sink,
    log: Mutex<LogState>,
}

impl std::fmt::Debug for Meter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Meter")
            .field("label", &self.label)
            .field("unit", &self.unit)
            .field("terminal", &self.bar.is_some())
            .field("every", &self.every)
            .finish_non_exhaustive()
    }
}

#[derive(Debug)]
struct LogState {
    started: Instant,
    at: Instant,
    last: Option<Instant>,
    position: u64,
    total: Option<u64>,
    message: String,
}

/// Where a meter shows progress.
enum Display {
    /// An indicatif bar drawn on `target`, redrawn steadily when `steady`
    /// (a spinner keeps moving between updates).
    Bar {
        target: ProgressDrawTarget,
        steady: bool,
    },
    /// Lines to `sink` at most every `every`, timed by `now`.
    Log {
        every: Duration,
        now: Now,
        sink: Sink,
    },
}

impl Meter {
    /// A meter counting `unit`s towards `total` (when known): a bar when
    /// stderr is a terminal, log lines otherwise.
    pub fn new(label: &str, unit: &'static str, total: Option<u64>) -> Self {
        let display = if std::io::stderr().is_terminal() {
            Display::Bar {
                target: ProgressDrawTarget::stderr(),
                steady: true,
            }
        } else {
            Display::Log {
                every: log_interval(),
                now: Arc::new(Instant::now),
                sink: info_log(),
            }
        };
        Self::with_display(label, unit, total, display)
    }

    fn with_display(label: &str, unit: &'static str, total: Option<u64>, display: Display) -> Self {
        let (bar, every, now, sink): (_, _, Now, _) = match display {
            Display::Bar { target, steady } => (
                Some(terminal_bar(label, unit, total, target, steady)),
                LOG_EVERY,
                Arc::new(Instant::now),
                info_log(),
            ),
            Display::Log { every, now, sink } => (None, every, now, sink),
        };
        let started = now();
        Self {
            label: label.to_owned(),
            unit,
            bar,
            every,
            now,
            sink,
            log: Mutex::new(LogState {
                started,
                at: started,
                last: None,
                position: 0,
                total,
                message: String::new(),
            }),
        }
    }

    /// Moves to `position` of `total` (a new total replaces the old one).
    pub fn update(&self, position: u64, total: Option<u64>, message: &str) {
        let total = total.map(|t| t.max(position));
        if let Some(bar) = &self.bar {
            if let Some(total) = total {
                if bar.length() != Some(total) {
                    bar.set_length(total);
                    set_style(bar, self.unit, true);
                }
            }
            bar.set_position(position);
            bar.set_message(message.to_owned());
            return;
        }
        let mut state = self.log.lock().unwrap_or_else(PoisonError::into_inner);
        let now = (self.now)();
        state.at = now;
        state.position = position;
        if total.is_some() {
            state.total = total;
        }
        state.message = message.to_owned();
        let due = state
            .last
            .is_none_or(|last| now.saturating_duration_since(last) >= self.every);
        if due {
            state.last = Some(now);
            (self.sink)(progress_line(&self.label, self.unit, &state));
        }
    }

    /// Clears the bar, or logs the final line.
    pub fn finish(&self) {
        match &self.bar {
            Some(bar) => bar.finish_and_clear(),
            None => {
                let mut state = self.log.lock().unwrap_or_else(PoisonError::into_inner);
                state.at = (self.now)();
                (self.sink)(format!(
                    "{} (done)",
                    progress_line(&self.label, self.unit, &state)
                ));
            }
        }
    }
}

fn terminal_bar(
    label: &str,
    unit: &'static str,
    total: Option<u64>,
    target: ProgressDrawTarget,
    steady: bool,
) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(total, target);
    set_style(&bar, unit, total.is_some());
    bar.set_prefix(label.to_owned());
    if steady {
        bar.enable_steady_tick(Duration::from_millis(120));
    }
    bar
}

fn set_style(bar: &ProgressBar, unit: &str, known_total: bool) {
    let template = if known_total {
        format!(
            "{{prefix}} [{{bar:30}}] {{pos}}/{{len}} {unit} {{percent}}% · {{per_sec}} · ETA {{eta}} · {{msg}}"
        )
    } else {
        format!("{{prefix}} {{spinner}} {{pos}} {unit} · {{per_sec}} · {{elapsed}} · {{msg}}")
    };
    if let Ok(style) = ProgressStyle::with_template(&template) {
        bar.set_style(style.progress_chars("=> "));
    }
}

/// `backfill acme:x: 1200/5000 rows (24%), 800 rows/s, ETA 5s · full pass`.
fn progress_line(label: &str, unit: &str, state: &LogState) -> String {
    let secs = state
        .at
        .saturating_duration_since(state.started)
        .as_secs_f64();
    let rate = if secs > 0.0 {
        state.position as f64 / secs
    } else {
        0.0
    };
    let mut line = format!("{label}: {}", state.position);
    match state.total {
        Some(total) if total > 0 => {
            let percent = state.position.min(total) * 100 / total;
            line.push_str(&format!("/{total} {unit} ({percent}%), {rate:.0} {unit}/s"));
            if rate > 0.0 && total > state.position {
                let eta = (total - state.position) as f64 / rate;
                line.push_str(&format!(", ETA {eta:.0}s"));
            }
        }
        _ => line.push_str(&format!(" {unit}, {rate:.0} {unit}/s")),
    }
    if !state.message.is_empty() {
        line.push_str(&format!(" · {}", state.message));
    }
    line
}

/// The checkpoint runner's observer: rows seen against the counted total.
#[derive(Debug)]
pub struct BackfillProgress {
    meter: Meter,
    counted: Option<u64>,
}

impl BackfillProgress {
    /// Progress of a backfill whose sources held `counted` rows at the start.
    pub fn new(label: &str, counted: Option<u64>) -> Arc<Self> {
        Arc::new(Self {
            meter: Meter::new(label, "rows", counted),
            counted,
        })
    }

    /// Clears the bar or logs the final line.
    pub fn finish(&self) {
        self.meter.finish();
    }
}

impl ProgressObserver for BackfillProgress {
    fn on_progress(&self, progress: &Progress) {
        let seen = u64::try_from(progress.rows_seen).unwrap_or(0);
        let total = self
            .counted
            .or_else(|| progress.estimated_total.and_then(|t| u64::try_from(t).ok()));
        self.meter.update(
            seen,
            total,
            &format!(
                "{}, batch {}, watermark {}",
                phase_label(progress.phase),
                progress.batches,
                progress.watermark
            ),
        );
    }
}

/// The bump's row-rewrite observer: one meter (created at the first report,
/// so a migration that rewrites nothing shows nothing) of rows rewritten
/// against the rows counted in the migration transaction.
#[derive(Debug)]
pub struct RewriteMeter {
    label: String,
    meter: OnceLock<Meter>,
}

impl RewriteMeter {
    /// A display for the rewrites of the migration called `label`.
    pub fn new(label: &str) -> Arc<Self> {
        Arc::new(Self {
            label: label.to_owned(),
            meter: OnceLock::new(),
        })
    }

    /// Clears the bar or logs the final line, when anything was rewritten.
    pub fn finish(&self) {
        if let Some(meter) = self.meter.get() {
            meter.finish();
        }
    }
}

impl RewriteObserver for RewriteMeter {
    fn on_rewrite(&self, progress: &RewriteProgress) {
        let meter = self
            .meter
            .get_or_init(|| Meter::new(&self.label, "rows", Some(progress.rows_total)));
        meter.update(
            progress.rows_done,
            Some(progress.rows_total),
            &format!("table {}", field(&progress.table)),
        );
    }
}

fn phase_label(phase: Phase) -> &'static str {
    match phase {
        Phase::Claim => "claiming",
        Phase::FullPass => "full pass",
        Phase::CatchUp => "catching up",
        Phase::Seal => "sealing",
        Phase::Done => "done",
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::*;

    fn state(position: u64, total: Option<u64>, elapsed: Duration) -> LogState {
        let started = Instant::now();
        LogState {
            started,
            at: started + elapsed,
            last: None,
            position,
            total,
            message: "full pass".to_owned(),
        }
    }

    #[test]
    fn the_log_line_names_position_total_percent_rate_and_eta() {
        let line = progress_line(
            "backfill acme:x",
            "rows",
            &state(250, Some(1000), Duration::from_secs(5)),
        );
        assert_eq!(
            line,
            "backfill acme:x: 250/1000 rows (25%), 50 rows/s, ETA 15s · full pass"
        );
        let line = progress_line("prune acme", "commits", &state(7, None, Duration::ZERO));
        assert_eq!(line, "prune acme: 7 commits, 0 commits/s · full pass");
    }

    /// A virtual clock (seconds after a fixed instant) and the lines logged.
    struct Harness {
        base: Instant,
        secs: Arc<AtomicU64>,
        lines: Arc<Mutex<Vec<String>>>,
    }

    impl Harness {
        fn new() -> Self {
            Self {
                base: Instant::now(),
                secs: Arc::new(AtomicU64::new(0)),
                lines: Arc::new(Mutex::new(Vec::new())),
            }
        }

        fn meter(&self, label: &str, total: Option<u64>, every: Duration) -> Meter {
            let (base, secs) = (self.base, self.secs.clone());
            let lines = self.lines.clone();
            Meter::with_display(
                label,
                "rows",
                total,
                Display::Log {
                    every,
                    now: Arc::new(move || base + Duration::from_secs(secs.load(Ordering::SeqCst))),
                    sink: Arc::new(move |line| {
                        lines
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .push(line)
                    }),
                },
            )
        }

        fn at(&self, secs: u64) {
            self.secs.store(secs, Ordering::SeqCst);
        }

        fn lines(&self) -> Vec<String> {
            self.lines
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone()
        }
    }

    #[test]
    fn off_a_terminal_a_line_is_logged_first_then_once_per_interval() {
        let h = Harness::new();
        let meter = h.meter("migrate v2 rewrites", Some(1000), Duration::from_secs(5));
        meter.update(0, Some(1000), "table todos");
        h.at(2);
        meter.update(100, None, "table todos");
        h.at(4);
        meter.update(200, None, "table todos");
        h.at(5);
        meter.update(500, None, "table todos");
        h.at(9);
        meter.update(800, None, "table todos");
        h.at(10);
        meter.update(1000, None, "table todos");
        meter.finish();
        assert_eq!(
            h.lines(),
            [
                "migrate v2 rewrites: 0/1000 rows (0%), 0 rows/s · table todos",
                "migrate v2 rewrites: 500/1000 rows (50%), 100 rows/s, ETA 5s · table todos",
                "migrate v2 rewrites: 1000/1000 rows (100%), 100 rows/s · table todos",
                "migrate v2 rewrites: 1000/1000 rows (100%), 100 rows/s · table todos (done)",
            ]
        );
    }

    #[test]
    fn a_zero_interval_logs_every_update() {
        let h = Harness::new();
        let meter = h.meter("prune acme", None, Duration::ZERO);
        for position in [1, 2, 3] {
            meter.update(position, None, "");
        }
        assert_eq!(h.lines().len(), 3, "{:?}", h.lines());
    }

    #[test]
    fn the_interval_variable_is_whole_seconds() {
        assert_eq!(parse_interval("0"), Some(Duration::ZERO));
        assert_eq!(parse_interval(" 30 "), Some(Duration::from_secs(30)));
        assert_eq!(parse_interval("5s"), None);
        assert_eq!(parse_interval("-1"), None);
    }

    /// A terminal that records what indicatif writes.
    #[derive(Debug, Default, Clone)]
    struct Screen(Arc<Mutex<String>>);

    impl Screen {
        fn push(&self, text: &str) -> std::io::Result<()> {
            self.0
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push_str(text);
            Ok(())
        }

        fn text(&self) -> String {
            self.0
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone()
        }
    }

    impl indicatif::TermLike for Screen {
        fn width(&self) -> u16 {
            200
        }
        fn move_cursor_up(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_down(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_right(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_left(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn write_line(&self, s: &str) -> std::io::Result<()> {
            self.push(s)?;
            self.push("\n")
        }
        fn write_str(&self, s: &str) -> std::io::Result<()> {
            self.push(s)
        }
        fn clear_line(&self) -> std::io::Result<()> {
            self.push("\n")
        }
        fn flush(&self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn terminal_meter(screen: &Screen, total: Option<u64>) -> Meter {
        Meter::with_display(
            "migrate v2 rewrites",
            "rows",
            total,
            Display::Bar {
                target: ProgressDrawTarget::term_like(Box::new(screen.clone())),
                steady: false,
            },
        )
    }

    #[test]
    fn on_a_terminal_the_bar_shows_position_total_percent_rate_and_eta() {
        let screen = Screen::default();
        let meter = terminal_meter(&screen, Some(1000));
        meter.update(250, Some(1000), "table todos");
        let bar = meter.bar.clone();
        assert_eq!(bar.as_ref().and_then(ProgressBar::length), Some(1000));
        if let Some(bar) = bar {
            bar.force_draw();
        }
        let text = screen.text();
        assert!(text.contains("migrate v2 rewrites ["), "{text:?}");
        assert!(text.contains("] 250/1000 rows 25% · "), "{text:?}");
        assert!(text.contains("/s · ETA "), "{text:?}");
        assert!(text.contains(" · table todos"), "{text:?}");
        meter.finish();
    }

    #[test]
    fn on_a_terminal_a_later_total_turns_the_spinner_into_a_bar() {
        let screen = Screen::default();
        let meter = terminal_meter(&screen, None);
        meter.update(10, None, "");
        meter.update(40, Some(80), "");
        if let Some(bar) = &meter.bar {
            bar.force_draw();
        }
        let text = screen.text();
        assert!(text.contains("40/80 rows 50%"), "{text:?}");
    }

    #[test]
    fn the_rewrite_meter_shows_nothing_until_a_rewrite_is_reported() {
        let meter = RewriteMeter::new("migrate v2 rewrites");
        meter.finish();
        assert!(meter.meter.get().is_none());
        meter.on_rewrite(&RewriteProgress {
            table: "to\u{1b}dos".to_owned(),
            rows_done: 0,
            rows_total: 10,
        });
        assert!(meter.meter.get().is_some());
    }
}
