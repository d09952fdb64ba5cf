//! W2 push-10: commits of ten new rows each, pushed on top of W1 in the same
//! rounds (`w1_push.rs`). Commits/s and rows/s.

use anyhow::Result;

use super::db::Dialect;
use super::fixture::{self, BenchCommit};
use super::report::{Better, Measure, Sample};

/// Rows per W2 commit.
pub const ROWS_PER_COMMIT: usize = 10;

/// W2's commits: `count` commits of ten distinct new rows each.
pub fn commits(count: usize) -> Result<Vec<BenchCommit>> {
    let table = fixture::schema(false)?
        .require_table(fixture::TABLE)?
        .clone();
    fixture::commits(&table, "w2", count, ROWS_PER_COMMIT, 0)
}

/// The W2 result rows from the per-round rates.
pub fn measures(dialect: Dialect, commits: &[Sample], rows: &[Sample]) -> Vec<Measure> {
    vec![
        Measure::from_samples(
            "W2",
            "default",
            dialect,
            "commits/s",
            Better::Higher,
            commits.to_vec(),
        ),
        Measure::from_samples(
            "W2",
            "rows",
            dialect,
            "rows/s",
            Better::Higher,
            rows.to_vec(),
        ),
    ]
}
