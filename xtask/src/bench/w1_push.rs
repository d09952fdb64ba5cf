//! W1 push-1: single-row commits through the full push sequence, each its
//! own transaction. Commits/s and p50/p99 latency. SQLite runs with the
//! storage's default `synchronous=FULL`, and also with the `NORMAL` opt-in. Every round pushes W1 and then W2 (`w2_push10.rs`) on
//! the same fresh database, ours and raw on separate databases, so the
//! reads of W3/W4 find the 70 000 rows of W1+W2.

use anyhow::Result;
use sync_sqlite::Synchronous;

use super::db::{Db, Dialect, Env};
use super::fixture::{self, BenchCommit};
use super::pushes::{run_ours, run_ours_prelude, run_raw, Prepared, PushRun};
use super::report::{Better, Measure, Sample};
use super::{progress, w2_push10, Scale};

/// The partition of the single-partition workloads.
pub const PARTITION: &str = "bench";

/// W1's commits: `count` commits of one distinct new row each.
pub fn commits(count: usize, prefix: &str) -> Result<Vec<BenchCommit>> {
    let table = fixture::schema(false)?
        .require_table(fixture::TABLE)?
        .clone();
    fixture::commits(&table, prefix, count, 1, 0)
}

/// One round's measurements of one implementation.
#[derive(Debug)]
pub struct RoundRuns {
    pub w1: PushRun,
    pub w2: PushRun,
}

/// Pushes W1 then W2 through ours on a fresh database; returns the runs and the database.
pub fn ours_round(env: &Env, w1: &Prepared, w2: &Prepared) -> Result<(RoundRuns, Db)> {
    let db = env.fresh(Synchronous::default())?;
    let storage = db.storage(false)?;
    let r1 = run_ours(storage.as_ref(), PARTITION, w1, true)?;
    let r2 = run_ours(storage.as_ref(), PARTITION, w2, true)?;
    drop(storage);
    Ok((RoundRuns { w1: r1, w2: r2 }, db))
}

/// Pushes W1 then W2 through the raw baseline on a fresh database.
pub fn raw_round(env: &Env, w1: &Prepared, w2: &Prepared) -> Result<(RoundRuns, Db)> {
    let db = env.fresh(Synchronous::default())?;
    drop(db.storage(false)?);
    let mut raw = db.raw()?;
    let r1 = run_raw(raw.as_mut(), PARTITION, w1, true)?;
    let r2 = run_raw(raw.as_mut(), PARTITION, w2, true)?;
    drop(raw);
    Ok((RoundRuns { w1: r1, w2: r2 }, db))
}

/// W1 and W2 in interleaved rounds; returns the results and ours' last
/// database (the fixture of W3 and W4).
pub fn run(env: &Env, scale: &Scale) -> Result<(Vec<Measure>, Db)> {
    let w1 = Prepared::new(commits(scale.w1_commits, "w1")?);
    let w2 = Prepared::new(w2_push10::commits(scale.w2_commits)?);
    let mut rounds: Vec<(RoundRuns, RoundRuns)> = Vec::new();
    let mut fixture_db = None;
    for round in 0..scale.rounds {
        let (ours, db) = ours_round(env, &w1, &w2)?;
        let (raw, _raw_db) = raw_round(env, &w1, &w2)?;
        progress(
            env.dialect,
            &format!("W1/W2 round {}/{}", round + 1, scale.rounds),
            &format!(
                "W1 ours {:.0} raw {:.0} commits/s; W2 ours {:.0} raw {:.0} commits/s",
                ours.w1.commits_per_s(),
                raw.w1.commits_per_s(),
                ours.w2.commits_per_s(),
                raw.w2.commits_per_s()
            ),
        );
        rounds.push((ours, raw));
        fixture_db = Some(db);
    }
    let Some(db) = fixture_db else {
        anyhow::bail!("no W1 round ran (rounds = 0)");
    };
    let d = env.dialect;
    let samples = |f: &dyn Fn(&RoundRuns) -> f64| -> Vec<Sample> {
        rounds
            .iter()
            .map(|(o, r)| Sample {
                ours: f(o),
                raw: Some(f(r)),
            })
            .collect()
    };
    let mut out = vec![
        Measure::from_samples(
            "W1",
            "default",
            d,
            "commits/s",
            Better::Higher,
            samples(&|r| r.w1.commits_per_s()),
        ),
        Measure::from_samples(
            "W1",
            "latency=p50",
            d,
            "µs",
            Better::Lower,
            samples(&|r| r.w1.latency(0.50)),
        ),
        Measure::from_samples(
            "W1",
            "latency=p99",
            d,
            "µs",
            Better::Lower,
            samples(&|r| r.w1.latency(0.99)),
        ),
    ];
    out.extend(w2_push10::measures(
        d,
        &samples(&|r| r.w2.commits_per_s()),
        &samples(&|r| r.w2.rows_per_s()),
    ));
    Ok((out, db))
}

/// The W3/W4 fixture at the pinned sizes without timing: W1's and W2's
/// commits pushed by the raw client in chunked transactions (the same rows,
/// log and scope entries as pushing them one by one).
pub fn build_fixture(env: &Env, scale: &Scale) -> Result<Db> {
    let db = env.fresh(Synchronous::default())?;
    drop(db.storage(false)?);
    let mut raw = db.raw()?;
    raw.push_batch(PARTITION, &commits(scale.fixture_w1, "w1")?)?;
    raw.push_batch(PARTITION, &w2_push10::commits(scale.fixture_w2)?)?;
    progress(
        env.dialect,
        "W3/W4 fixture",
        &format!("{} rows pushed", scale.fixture_rows()),
    );
    Ok(db)
}

/// W1 through the prelude (`begin_push`, as the engine pushes) against
/// W1 through the single calls (`push_ours`) in the same rounds, each on a
/// fresh database: the ratio is prelude / single calls; the raw client runs
/// between them so both also have a ratio to raw in the W1 rows.
pub fn run_prelude(env: &Env, scale: &Scale) -> Result<Vec<Measure>> {
    let w1 = Prepared::new(commits(scale.w1_commits, "w1p")?);
    let mut rate = Vec::new();
    let mut to_raw = Vec::new();
    let mut p50 = Vec::new();
    for round in 0..scale.rounds {
        let db = env.fresh(Synchronous::default())?;
        let storage = db.storage(false)?;
        let prelude = run_ours_prelude(storage.as_ref(), PARTITION, &w1, true)?;
        drop(storage);
        drop(db);
        let raw_db = env.fresh(Synchronous::default())?;
        drop(raw_db.storage(false)?);
        let raw = run_raw(raw_db.raw()?.as_mut(), PARTITION, &w1, true)?;
        drop(raw_db);
        let db = env.fresh(Synchronous::default())?;
        let storage = db.storage(false)?;
        let single = run_ours(storage.as_ref(), PARTITION, &w1, true)?;
        progress(
            env.dialect,
            &format!("W1 prelude round {}/{}", round + 1, scale.rounds),
            &format!(
                "prelude {:.0} single calls {:.0} raw {:.0} commits/s",
                prelude.commits_per_s(),
                single.commits_per_s(),
                raw.commits_per_s()
            ),
        );
        rate.push(Sample {
            ours: prelude.commits_per_s(),
            raw: Some(single.commits_per_s()),
        });
        to_raw.push(Sample {
            ours: prelude.commits_per_s(),
            raw: Some(raw.commits_per_s()),
        });
        p50.push(Sample {
            ours: prelude.latency(0.5),
            raw: Some(single.latency(0.5)),
        });
    }
    let d = env.dialect;
    Ok(vec![
        Measure::from_samples(
            "W1",
            "sequence=prelude/single-calls",
            d,
            "commits/s",
            Better::Higher,
            rate,
        ),
        Measure::from_samples(
            "W1",
            "sequence=prelude/single-calls,latency=p50",
            d,
            "µs",
            Better::Lower,
            p50,
        ),
        Measure::from_samples(
            "W1",
            "sequence=prelude",
            d,
            "commits/s",
            Better::Higher,
            to_raw,
        ),
    ])
}

/// W1 with `synchronous=NORMAL` (SQLite only): the opt-in that syncs the
/// WAL only at checkpoints (the default runs above use `FULL`).
pub fn run_normal(env: &Env, scale: &Scale) -> Result<Vec<Measure>> {
    if env.dialect != Dialect::Sqlite {
        return Ok(Vec::new());
    }
    let w1 = Prepared::new(commits(scale.w1_normal_commits, "w1")?);
    let mut rate = Vec::new();
    let mut p50 = Vec::new();
    let mut p99 = Vec::new();
    for round in 0..scale.normal_rounds {
        let ours_db = env.fresh(Synchronous::Normal)?;
        let storage = ours_db.storage(false)?;
        let ours = run_ours(storage.as_ref(), PARTITION, &w1, true)?;
        drop(storage);
        drop(ours_db);
        let raw_db = env.fresh(Synchronous::Normal)?;
        drop(raw_db.storage(false)?);
        let raw = run_raw(raw_db.raw()?.as_mut(), PARTITION, &w1, true)?;
        progress(
            env.dialect,
            &format!(
                "W1 synchronous=NORMAL round {}/{}",
                round + 1,
                scale.normal_rounds
            ),
            &format!(
                "ours {:.0} raw {:.0} commits/s",
                ours.commits_per_s(),
                raw.commits_per_s()
            ),
        );
        rate.push(Sample {
            ours: ours.commits_per_s(),
            raw: Some(raw.commits_per_s()),
        });
        p50.push(Sample {
            ours: ours.latency(0.5),
            raw: Some(raw.latency(0.5)),
        });
        p99.push(Sample {
            ours: ours.latency(0.99),
            raw: Some(raw.latency(0.99)),
        });
    }
    let d = env.dialect;
    Ok(vec![
        Measure::from_samples(
            "W1",
            "synchronous=NORMAL",
            d,
            "commits/s",
            Better::Higher,
            rate,
        ),
        Measure::from_samples(
            "W1",
            "synchronous=NORMAL,latency=p50",
            d,
            "µs",
            Better::Lower,
            p50,
        ),
        Measure::from_samples(
            "W1",
            "synchronous=NORMAL,latency=p99",
            d,
            "µs",
            Better::Lower,
            p99,
        ),
    ])
}
