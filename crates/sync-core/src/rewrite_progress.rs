//! Progress of a bump's row rewrites, reported through
//! [`EnsureOptions::rewrite_progress`](crate::EnsureOptions::rewrite_progress).
//!
//! A bump that re-encodes payloads or refreshes projections rewrites every
//! row of the affected tables inside the migration transaction
//! (`schema-and-migrations.md` §11). With an observer set, the dialect
//! counts those rows first (one `count(*)` per rewritten table, in the same
//! transaction) and then reports after every keyset page. Without an
//! observer nothing is counted and nothing is reported.

use std::fmt;

/// Where the row rewrites of one bump are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RewriteProgress {
    /// The table being rewritten.
    pub table: String,
    /// Rows rewritten so far, over every table of this bump.
    pub rows_done: u64,
    /// Rows to rewrite over every table of this bump, counted in the
    /// migration transaction before the first rewrite.
    pub rows_total: u64,
}

/// Receives [`RewriteProgress`] reports. Called on the migrating thread,
/// inside the migration transaction: keep it quick and never call back
/// into the storage.
pub trait RewriteObserver: Send + Sync {
    /// One report: once with `rows_done` at the table's start, then after
    /// every page of rows rewritten.
    fn on_rewrite(&self, progress: &RewriteProgress);
}

/// The running tally a dialect keeps while rewriting (`total` counted
/// upfront, `done` advanced page by page). Reports nothing when the options
/// carry no observer.
pub struct RewriteTally<'a> {
    observer: Option<&'a dyn RewriteObserver>,
    total: u64,
    done: u64,
}

impl<'a> RewriteTally<'a> {
    /// A tally of `total` rows for `observer` (none: reports nothing).
    pub fn new(observer: Option<&'a dyn RewriteObserver>, total: u64) -> Self {
        Self {
            observer,
            total,
            done: 0,
        }
    }

    /// Whether anyone listens (dialects count rows only then).
    pub fn observed(&self) -> bool {
        self.observer.is_some()
    }

    /// Reports the start of `table`.
    pub fn start(&self, table: &str) {
        self.report(table);
    }

    /// `rows` more of `table` were rewritten.
    pub fn advance(&mut self, table: &str, rows: usize) {
        self.done = self
            .done
            .saturating_add(u64::try_from(rows).unwrap_or(u64::MAX));
        // Rows inserted after the count (none can be: the migration lock is
        // held) would otherwise show more than 100%.
        self.total = self.total.max(self.done);
        self.report(table);
    }

    fn report(&self, table: &str) {
        if let Some(observer) = self.observer {
            observer.on_rewrite(&RewriteProgress {
                table: table.to_owned(),
                rows_done: self.done,
                rows_total: self.total,
            });
        }
    }
}

impl fmt::Debug for RewriteTally<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RewriteTally")
            .field("observed", &self.observer.is_some())
            .field("total", &self.total)
            .field("done", &self.done)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    #[derive(Default)]
    struct Seen(Mutex<Vec<RewriteProgress>>);

    impl RewriteObserver for Seen {
        fn on_rewrite(&self, progress: &RewriteProgress) {
            self.0.lock().map(|mut v| v.push(progress.clone())).ok();
        }
    }

    #[test]
    fn the_tally_reports_starts_and_pages_against_the_total() {
        let seen = Seen::default();
        let mut tally = RewriteTally::new(Some(&seen), 700);
        assert!(tally.observed());
        tally.start("a");
        tally.advance("a", 500);
        tally.advance("a", 100);
        tally.start("b");
        tally.advance("b", 150);
        let seen = seen.0.into_inner().unwrap_or_default();
        let points: Vec<(&str, u64, u64)> = seen
            .iter()
            .map(|p| (p.table.as_str(), p.rows_done, p.rows_total))
            .collect();
        assert_eq!(
            points,
            [
                ("a", 0, 700),
                ("a", 500, 700),
                ("a", 600, 700),
                ("b", 600, 700),
                ("b", 750, 750)
            ]
        );
    }

    #[test]
    fn without_an_observer_nothing_is_reported() {
        let mut tally = RewriteTally::new(None, 0);
        assert!(!tally.observed());
        tally.advance("a", 10);
        assert_eq!(tally.done, 10);
    }

    #[test]
    fn debug_shows_whether_observed_and_the_counts() {
        let seen = Seen::default();
        let mut tally = RewriteTally::new(Some(&seen), 5);
        tally.advance("a", 2);
        assert_eq!(
            format!("{tally:?}"),
            "RewriteTally { observed: true, total: 5, done: 2 }"
        );
    }
}
