//! W7 growth: W1's per-commit push time and W4's time per pull page when
//! the partition already holds a small (10 000) and a large (1 000 000)
//! log. The logs are seeded directly (`RawClient::seed_log`: single-row
//! commits over 10 000 rows, with their changes, change scopes and push
//! results), so the row table has the same size at both log sizes and only
//! the log grows. Pulls read the newest `w7_pull` commits (a client behind
//! by that many) and, separately, the first pages from cursor 0 (a client
//! replaying the whole log). Rounds interleave both sizes and both
//! implementations; each round pushes new rows on top.

use std::time::Instant;

use anyhow::{bail, Result};
use sync_sqlite::Synchronous;

use super::db::{Db, Env};
use super::fixture::{self, BenchRow, TABLE};
use super::pushes::{run_ours, run_raw, Prepared};
use super::report::{Better, Measure, Sample};
use super::w1_push::PARTITION;
use super::w4_pull::{pull_ours, pull_raw};
use super::{progress, repeat_for, Scale};

/// Pages read from cursor 0 by the `from=0` pull.
const FROM_ZERO_PAGES: u64 = 5;

/// One seeded database.
struct Seeded {
    size: u64,
    db: Db,
}

fn seed(env: &Env, size: u64, rows: &[BenchRow]) -> Result<Seeded> {
    let db = env.fresh(Synchronous::default())?;
    drop(db.storage(false)?);
    db.raw()?.seed_log(PARTITION, size, rows)?;
    Ok(Seeded { size, db })
}

/// Per round and size: (ours, raw) in the unit of the measurement.
pub(super) type Series = Vec<Vec<(f64, f64)>>;

fn pull_ms_per_page(
    seeded: &Seeded,
    window: (i64, i64),
    scale: &Scale,
    max_pages: u64,
) -> Result<(f64, f64)> {
    let storage = seeded.db.storage(false)?;
    let mut raw = seeded.db.raw()?;
    let lists = fixture::all_lists();
    let page = scale.page;
    let (ours, runs, elapsed) = repeat_for(scale.min_read, || {
        pull_ours(storage.as_ref(), PARTITION, &lists, window, page, max_pages)
    })?;
    let ours_ms = elapsed.as_secs_f64() * 1e3 / (f64::from(runs) * ours.pages.max(1) as f64);
    let (base, runs, elapsed) = repeat_for(scale.min_read, || {
        pull_raw(raw.as_mut(), PARTITION, &lists, window, page, max_pages)
    })?;
    let raw_ms = elapsed.as_secs_f64() * 1e3 / (f64::from(runs) * base.pages.max(1) as f64);
    if ours != base {
        bail!("W7 pull: ours {ours:?}, raw {base:?}");
    }
    Ok((ours_ms, raw_ms))
}

/// One measure per size and the growth of the second size over the first
/// (`prefix` names the variant; sizes are labelled `label=<size>`).
pub(super) fn growth_measures(
    workload: &'static str,
    label: &str,
    dialect: super::db::Dialect,
    sizes: &[u64],
    series: &Series,
    prefix: &str,
    unit: &'static str,
) -> Vec<Measure> {
    let mut out = Vec::new();
    for (i, size) in sizes.iter().enumerate() {
        let samples = series
            .iter()
            .map(|round| Sample {
                ours: round[i].0,
                raw: Some(round[i].1),
            })
            .collect();
        out.push(Measure::from_samples(
            workload,
            format!("{prefix}{label}={size}"),
            dialect,
            unit,
            Better::Lower,
            samples,
        ));
    }
    let growth = series
        .iter()
        .map(|round| Sample {
            ours: round[1].0 / round[0].0.max(1e-9),
            raw: Some(round[1].1 / round[0].1.max(1e-9)),
        })
        .collect();
    out.push(Measure::from_samples(
        workload,
        format!("{prefix}growth={}/{}", sizes[1], sizes[0]),
        dialect,
        "× time",
        Better::NoRatio,
        growth,
    ));
    out
}

/// Seeds both logs, then interleaved rounds of pulls and pushes.
pub fn run(env: &Env, scale: &Scale) -> Result<Vec<Measure>> {
    let table = fixture::schema(false)?.require_table(TABLE)?.clone();
    let rows = (0..scale.w7_rows as u64)
        .map(|n| BenchRow::new(&table, "w7", n))
        .collect::<Result<Vec<_>>>()?;
    let sizes = [scale.w7_small, scale.w7_large];
    let mut seeded = Vec::new();
    for size in sizes {
        let t = Instant::now();
        seeded.push(seed(env, size, &rows)?);
        progress(
            env.dialect,
            "W7 seed",
            &format!(
                "log of {size} commits in {:.1} s",
                t.elapsed().as_secs_f64()
            ),
        );
    }
    let mut tail: Series = Vec::new();
    let mut from_zero: Series = Vec::new();
    let mut push: Series = Vec::new();
    for round in 0..scale.rounds {
        let mut tail_round = Vec::new();
        let mut zero_round = Vec::new();
        let mut push_round = Vec::new();
        for s in &seeded {
            let through = i64::try_from(s.size)?;
            let behind = scale.w7_pull.min(through);
            tail_round.push(pull_ms_per_page(
                s,
                (through - behind, through),
                scale,
                u64::MAX,
            )?);
            zero_round.push(pull_ms_per_page(s, (0, through), scale, FROM_ZERO_PAGES)?);
        }
        for s in &seeded {
            let prefix = format!("w7-{round}");
            let ours_commits = Prepared::new(fixture::commits(
                &table,
                &format!("{prefix}-o"),
                scale.w7_push,
                1,
                0,
            )?);
            let raw_commits = Prepared::new(fixture::commits(
                &table,
                &format!("{prefix}-r"),
                scale.w7_push,
                1,
                0,
            )?);
            let storage = s.db.storage(false)?;
            let ours = run_ours(storage.as_ref(), PARTITION, &ours_commits, true)?;
            drop(storage);
            let raw = run_raw(s.db.raw()?.as_mut(), PARTITION, &raw_commits, true)?;
            push_round.push((ours.us_per_commit(), raw.us_per_commit()));
        }
        progress(
            env.dialect,
            &format!("W7 round {}/{}", round + 1, scale.rounds),
            &format!(
                "push µs/commit {:.0}/{:.0} (ours small/large), pull ms/page {:.2}/{:.2}, from 0 {:.1}/{:.1}",
                push_round[0].0, push_round[1].0, tail_round[0].0, tail_round[1].0, zero_round[0].0, zero_round[1].0
            ),
        );
        tail.push(tail_round);
        from_zero.push(zero_round);
        push.push(push_round);
    }
    let d = env.dialect;
    let mut out = growth_measures("W7", "log", d, &sizes, &push, "push,", "µs/commit");
    out.extend(growth_measures(
        "W7",
        "log",
        d,
        &sizes,
        &tail,
        &format!("pull-newest-{},", scale.w7_pull),
        "ms/page",
    ));
    out.extend(growth_measures(
        "W7",
        "log",
        d,
        &sizes,
        &from_zero,
        "pull-from-0,",
        "ms/page",
    ));
    Ok(out)
}
