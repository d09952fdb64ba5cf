//! W3 growth: the time of a `scan_rows` page when the table holds the W3
//! fixture's 70 000 rows and when it holds 1 000 000, for one list and for
//! a filter naming all 100 lists (`dialects.md` §7: a page's cost must not
//! grow with the table). The rows are seeded directly
//! (`RawClient::seed_rows`, lists round-robin as in W1), so only the table
//! size differs. Each sample scans the first [`PAGES`] pages from the
//! start — where a shape that collects every entry above the cursor pays
//! the most — and reports milliseconds per 500 rows read. Rounds
//! interleave both sizes, both variants and both implementations.

use std::time::Instant;

use anyhow::{bail, Result};
use sync_sqlite::Synchronous;

use super::db::{Db, Env};
use super::fixture::{self, BenchRow, TABLE};
use super::w1_push::PARTITION;
use super::w3_scan::scan_ours;
use super::w7_growth::{growth_measures, Series};
use super::{progress, repeat_for, Scale};
use crate::bench::report::Measure;

/// Pages read from the start by one scan.
const PAGES: u64 = 2;
/// Rows built and seeded per chunk (bounds the memory of the seed).
const SEED_CHUNK: u64 = 50_000;

/// One seeded database.
struct Seeded {
    db: Db,
}

fn seed(env: &Env, size: u64) -> Result<Seeded> {
    let table = fixture::schema(false)?.require_table(TABLE)?.clone();
    let db = env.fresh(Synchronous::Normal)?;
    drop(db.storage(false)?);
    let mut raw = db.raw()?;
    let mut first = 0;
    while first < size {
        let end = (first + SEED_CHUNK).min(size);
        let rows = (first..end)
            .map(|n| BenchRow::new(&table, "w3g", n))
            .collect::<Result<Vec<_>>>()?;
        raw.seed_rows(PARTITION, &rows)?;
        first = end;
    }
    Ok(Seeded { db })
}

/// Milliseconds per `page` rows, (ours, raw), scanning `lists`.
fn ms_per_page(seeded: &Seeded, lists: &[String], scale: &Scale) -> Result<(f64, f64)> {
    let storage = seeded.db.storage(false)?;
    let mut raw = seeded.db.raw()?;
    let page = scale.page;
    let (ours, runs, elapsed) = repeat_for(scale.min_read, || {
        scan_ours(storage.as_ref(), lists, page, PAGES)
    })?;
    let per = |rows: u64, runs: u32, secs: f64| {
        secs * 1e3 / (f64::from(runs) * (rows as f64 / page as f64).max(1e-9))
    };
    let ours_ms = per(ours, runs, elapsed.as_secs_f64());
    let (base, runs, elapsed) =
        repeat_for(scale.min_read, || raw.scan(PARTITION, lists, page, PAGES))?;
    let raw_ms = per(base, runs, elapsed.as_secs_f64());
    if ours != base || ours == 0 {
        bail!("W3 growth: ours read {ours} rows, raw {base}");
    }
    Ok((ours_ms, raw_ms))
}

/// Seeds both tables, then interleaved rounds of scans.
pub fn run(env: &Env, scale: &Scale) -> Result<Vec<Measure>> {
    let sizes = [scale.w3g_small, scale.w3g_large];
    let mut seeded = Vec::new();
    for size in sizes {
        let t = Instant::now();
        seeded.push(seed(env, size)?);
        progress(
            env.dialect,
            "W3 growth seed",
            &format!("{size} rows in {:.1} s", t.elapsed().as_secs_f64()),
        );
    }
    let all = fixture::all_lists();
    let variants: [(&str, &[String]); 2] = [("lists=1,", &all[..1]), ("lists=100,", &all)];
    let mut series: Vec<Series> = vec![Vec::new(); variants.len()];
    for round in 0..scale.rounds {
        let mut line = Vec::new();
        for ((name, lists), out) in variants.iter().zip(series.iter_mut()) {
            let mut per_size = Vec::new();
            for s in &seeded {
                per_size.push(ms_per_page(s, lists, scale)?);
            }
            line.push(format!(
                "{name} ours {:.2}/{:.2} raw {:.2}/{:.2}",
                per_size[0].0, per_size[1].0, per_size[0].1, per_size[1].1
            ));
            out.push(per_size);
        }
        progress(
            env.dialect,
            &format!("W3 growth round {}/{}", round + 1, scale.rounds),
            &format!("ms/page (small/large): {}", line.join("; ")),
        );
    }
    let mut out = Vec::new();
    for ((name, _), s) in variants.iter().zip(&series) {
        out.extend(growth_measures(
            "W3",
            "rows",
            env.dialect,
            &sizes,
            s,
            &format!("growth,{name}"),
            "ms/page",
        ));
    }
    Ok(out)
}
