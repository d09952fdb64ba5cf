//! W4 pull: `read_commit_window` over every commit of W1+W2 for a filter
//! naming all 100 lists, 500 changes per call, the cursor advanced to the
//! last commit of each answer. Commits/s. Ours and raw read the same database.

use anyhow::{bail, Result};
use sync_core::{CommitWindowQuery, ServerStorage};

use super::db::Db;
use super::fixture::{self, TABLE};
use super::raw::RawClient;
use super::report::{Better, Measure, Sample};
use super::w1_push::PARTITION;
use super::{progress, repeat_for, Scale};

/// What a pull read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pulled {
    pub commits: u64,
    pub changes: u64,
    /// `read_commit_window` calls that returned commits.
    pub pages: u64,
}

/// Pulls `(after, through]` through the storage API, `page` changes per
/// call, at most `max_pages` calls.
pub fn pull_ours(
    storage: &dyn ServerStorage,
    partition: &str,
    lists: &[String],
    (after, through): (i64, i64),
    page: i64,
    max_pages: u64,
) -> Result<Pulled> {
    let mut pulled = Pulled {
        commits: 0,
        changes: 0,
        pages: 0,
    };
    let mut cursor = after;
    let filter = fixture::filter(lists);
    while pulled.pages < max_pages {
        let commits = storage.read_commit_window(
            partition,
            &CommitWindowQuery {
                table: TABLE.to_owned(),
                scope_filter: filter.clone(),
                after_seq: cursor,
                through_seq: through,
                limit_changes: page,
            },
        )?;
        let Some(last) = commits.last() else {
            return Ok(pulled);
        };
        cursor = last.commit_seq;
        pulled.pages += 1;
        pulled.commits += commits.len() as u64;
        pulled.changes += commits.iter().map(|c| c.changes.len() as u64).sum::<u64>();
    }
    Ok(pulled)
}

/// The same pull through the raw baseline.
pub fn pull_raw(
    raw: &mut dyn RawClient,
    partition: &str,
    lists: &[String],
    (after, through): (i64, i64),
    page: i64,
    max_pages: u64,
) -> Result<Pulled> {
    let mut pulled = Pulled {
        commits: 0,
        changes: 0,
        pages: 0,
    };
    let mut cursor = after;
    while pulled.pages < max_pages {
        let commits = raw.window(partition, lists, cursor, through, page)?;
        let Some(last) = commits.last() else {
            return Ok(pulled);
        };
        cursor = last.0;
        pulled.pages += 1;
        pulled.commits += commits.len() as u64;
        pulled.changes += commits.iter().map(|c| c.1 as u64).sum::<u64>();
    }
    Ok(pulled)
}

/// Interleaved rounds of the full pull.
pub fn run(db: &Db, scale: &Scale) -> Result<Vec<Measure>> {
    let storage = db.storage(false)?;
    let mut raw: Box<dyn RawClient> = db.raw()?;
    let lists = fixture::all_lists();
    let through = storage.get_max_commit_seq(PARTITION)?;
    let mut samples = Vec::new();
    for round in 0..scale.rounds {
        let (ours, runs, elapsed) = repeat_for(scale.min_read, || {
            pull_ours(
                storage.as_ref(),
                PARTITION,
                &lists,
                (0, through),
                scale.page,
                u64::MAX,
            )
        })?;
        let ours_rate = f64::from(runs) * ours.commits as f64 / elapsed.as_secs_f64().max(1e-9);
        let (base, runs, elapsed) = repeat_for(scale.min_read, || {
            pull_raw(
                raw.as_mut(),
                PARTITION,
                &lists,
                (0, through),
                scale.page,
                u64::MAX,
            )
        })?;
        let raw_rate = f64::from(runs) * base.commits as f64 / elapsed.as_secs_f64().max(1e-9);
        if ours != base || ours.commits != u64::try_from(through)? {
            bail!("W4: ours pulled {ours:?}, raw {base:?}, expected {through} commits");
        }
        progress(
            db.dialect,
            &format!("W4 round {}/{}", round + 1, scale.rounds),
            &format!(
                "ours {ours_rate:.0} raw {raw_rate:.0} commits/s ({} pages)",
                ours.pages
            ),
        );
        samples.push(Sample {
            ours: ours_rate,
            raw: Some(raw_rate),
        });
    }
    Ok(vec![Measure::from_samples(
        "W4",
        "default",
        db.dialect,
        "commits/s",
        Better::Higher,
        samples,
    )])
}
