//! Progress of long commands (backfill, prune, bump rewrites), on stderr.
//!
//! - stderr a terminal: an indicatif bar — position/total, percent, rate and
//!   ETA when the total is known, else a spinner with position and rate;
//! - otherwise: a log line (`-v`, level info) at the first update and then
//!   at most every [`LOG_EVERY`], naming position, total, percent and rate.
//!
//! Logs, pipes and `--json` consumers never see escape codes.

use std::io::IsTerminal;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use sync_backfill::{Phase, Progress, ProgressObserver};

/// How often the non-terminal progress line is logged.
pub const LOG_EVERY: Duration = Duration::from_secs(5);

/// A progress display for one long operation.
#[derive(Debug)]
pub struct Meter {
    label: String,
    unit: &'static str,
    bar: Option<ProgressBar>,
    log: Mutex<LogState>,
}

#[derive(Debug)]
struct LogState {
    started: Instant,
    last: Option<Instant>,
    position: u64,
    total: Option<u64>,
    message: String,
}

impl Meter {
    /// A meter counting `unit`s towards `total` (when known).
    pub fn new(label: &str, unit: &'static str, total: Option<u64>) -> Self {
        let bar = std::io::stderr()
            .is_terminal()
            .then(|| terminal_bar(label, unit, total));
        Self {
            label: label.to_owned(),
            unit,
            bar,
            log: Mutex::new(LogState {
                started: Instant::now(),
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
        state.position = position;
        if total.is_some() {
            state.total = total;
        }
        state.message = message.to_owned();
        let due = state.last.is_none_or(|last| last.elapsed() >= LOG_EVERY);
        if due {
            state.last = Some(Instant::now());
            tracing::info!("{}", progress_line(&self.label, self.unit, &state));
        }
    }

    /// Clears the bar, or logs the final line.
    pub fn finish(&self) {
        match &self.bar {
            Some(bar) => bar.finish_and_clear(),
            None => {
                let state = self.log.lock().unwrap_or_else(PoisonError::into_inner);
                tracing::info!("{} (done)", progress_line(&self.label, self.unit, &state));
            }
        }
    }
}

fn terminal_bar(label: &str, unit: &'static str, total: Option<u64>) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(total, ProgressDrawTarget::stderr());
    set_style(&bar, unit, total.is_some());
    bar.set_prefix(label.to_owned());
    bar.enable_steady_tick(Duration::from_millis(120));
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
    let secs = state.started.elapsed().as_secs_f64();
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
    use super::*;

    #[test]
    fn the_log_line_names_position_total_percent_and_rate() {
        let state = LogState {
            started: Instant::now(),
            last: None,
            position: 250,
            total: Some(1000),
            message: "full pass".to_owned(),
        };
        let line = progress_line("backfill acme:x", "rows", &state);
        assert!(
            line.starts_with("backfill acme:x: 250/1000 rows (25%), "),
            "{line}"
        );
        assert!(line.ends_with(" · full pass"), "{line}");
    }
}
