//! The options and outcome of `ensure_schema` as a caller sees them: an
//! observer set through the builder receives the dialect's rewrite reports,
//! `Debug` shows what is set, and only a call that changed the schema
//! counts as applied.

use std::sync::{Arc, Mutex};

use sync_core::{EnsureOptions, EnsureOutcome, RewriteObserver, RewriteProgress};

#[derive(Default)]
struct Seen(Mutex<Vec<(String, u64, u64)>>);

impl RewriteObserver for Seen {
    fn on_rewrite(&self, progress: &RewriteProgress) {
        if let Ok(mut seen) = self.0.lock() {
            seen.push((
                progress.table.clone(),
                progress.rows_done,
                progress.rows_total,
            ));
        }
    }
}

#[test]
fn an_observer_set_by_the_builder_receives_the_tally_reports() {
    let seen = Arc::new(Seen::default());
    let options = EnsureOptions::default().with_rewrite_progress(seen.clone());
    let mut tally = options.rewrite_tally(4);
    assert!(tally.observed());
    tally.start("tasks");
    tally.advance("tasks", 4);
    let reports = seen.0.lock().map(|v| v.clone()).unwrap_or_default();
    assert_eq!(
        reports,
        [("tasks".to_owned(), 0, 4), ("tasks".to_owned(), 4, 4)]
    );
    assert!(!EnsureOptions::default().rewrite_tally(4).observed());
}

#[test]
fn debug_shows_what_is_set() {
    let plain = format!("{:?}", EnsureOptions::default());
    assert!(plain.starts_with("EnsureOptions {"), "{plain}");
    assert!(plain.contains("refuse_unfinished: false"), "{plain}");
    assert!(plain.contains("rewrite_progress: false"), "{plain}");
    let observed = EnsureOptions {
        refuse_unfinished: true,
        ..EnsureOptions::default()
    }
    .with_rewrite_progress(Arc::new(Seen::default()));
    let text = format!("{observed:?}");
    assert!(text.contains("refuse_unfinished: true"), "{text}");
    assert!(text.contains("rewrite_progress: true"), "{text}");
}

#[test]
fn only_an_upgrade_or_a_migration_is_applied() {
    assert!(!EnsureOutcome::Verified.applied());
    assert!(EnsureOutcome::Upgraded.applied());
    assert!(EnsureOutcome::Migrated.applied());
}
