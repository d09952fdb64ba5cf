//! The backfill progress bar: drawn with indicatif on stderr, and only when
//! stderr is a terminal (so logs, pipes and `--json` consumers never see
//! escape codes).

use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use sync_backfill::{NoProgress, Phase, Progress, ProgressObserver};

/// A progress observer for the checkpoint runner.
#[derive(Debug)]
pub struct Bar {
    bar: ProgressBar,
    known_total: Option<u64>,
}

impl Bar {
    /// A bar on stderr when it is a terminal, `None` otherwise.
    /// `known_total` is the number of source rows when the caller knows it.
    pub fn on_terminal(label: &str, known_total: Option<u64>) -> Option<Self> {
        if !std::io::stderr().is_terminal() {
            return None;
        }
        let bar = ProgressBar::with_draw_target(known_total, ProgressDrawTarget::stderr());
        let template = if known_total.is_some() {
            "{prefix} {spinner} [{bar:24}] {pos}/{len} rows · {msg}"
        } else {
            "{prefix} {spinner} {pos} rows · {msg}"
        };
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_prefix(label.to_owned());
        bar.enable_steady_tick(Duration::from_millis(120));
        Some(Self { bar, known_total })
    }

    /// Clears the bar from the terminal.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

impl ProgressObserver for Bar {
    fn on_progress(&self, progress: &Progress) {
        if self.known_total.is_none() {
            if let Some(total) = progress.estimated_total.and_then(|t| u64::try_from(t).ok()) {
                self.bar.set_length(total);
            }
        }
        let seen = u64::try_from(progress.rows_seen).unwrap_or(0);
        if self.bar.length().is_some_and(|total| seen > total) {
            self.bar.set_length(seen);
        }
        self.bar.set_position(seen);
        self.bar.set_message(format!(
            "{}, batch {}, watermark {}",
            phase_label(progress.phase),
            progress.batches,
            progress.watermark
        ));
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

/// The bar as a runner observer, or a silent one.
pub fn observer(bar: Option<&Arc<Bar>>) -> Arc<dyn ProgressObserver> {
    match bar {
        Some(bar) => bar.clone(),
        None => Arc::new(NoProgress),
    }
}
