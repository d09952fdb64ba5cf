//! Postgres concurrency: W1 with 1 and 4 client threads on 1 and 4
//! partitions (thread `t` pushes to partition `t mod P`; one thread on four
//! partitions rotates through them). Ours shares one `PostgresStorage`
//! (pool of 16); each raw thread has its own connection. Commits/s and the
//! scaling of 4 threads on 4 partitions over one thread.

use std::time::Instant;

use anyhow::{anyhow, Result};
use sync_sqlite::Synchronous;

use super::db::Env;
use super::fixture;
use super::pushes::{push_ours, Prepared};
use super::report::{Better, Measure, Sample};
use super::{progress, Scale};

const VARIANTS: [(usize, usize); 4] = [(1, 1), (4, 1), (1, 4), (4, 4)];

fn partition(p: usize) -> String {
    format!("bench-p{p}")
}

/// Thread `t`'s commits with the partition of each.
fn plan(scale: &Scale, threads: usize, partitions: usize) -> Result<Vec<Vec<(String, usize)>>> {
    let per_thread = scale.conc_commits / threads;
    Ok((0..threads)
        .map(|t| {
            (0..per_thread)
                .map(|i| (partition((t + i) % partitions), i))
                .collect()
        })
        .collect())
}

fn commits_of(threads: usize, per_thread: usize, tag: &str) -> Result<Vec<Prepared>> {
    let table = fixture::schema(false)?
        .require_table(fixture::TABLE)?
        .clone();
    (0..threads)
        .map(|t| {
            Ok(Prepared::new(fixture::commits(
                &table,
                &format!("{tag}{t}"),
                per_thread,
                1,
                0,
            )?))
        })
        .collect()
}

fn run_variant(
    env: &Env,
    scale: &Scale,
    threads: usize,
    partitions: usize,
    raw: bool,
) -> Result<f64> {
    let plan = plan(scale, threads, partitions)?;
    let per_thread = scale.conc_commits / threads;
    let commits = commits_of(threads, per_thread, if raw { "cr" } else { "co" })?;
    let db = env.fresh(Synchronous::default())?;
    let storage = db.storage(false)?;
    let mut raws = Vec::new();
    if raw {
        for _ in 0..threads {
            raws.push(db.raw()?);
        }
    }
    let start = Instant::now();
    std::thread::scope(|scope| -> Result<()> {
        let mut handles = Vec::new();
        if raw {
            for ((mut client, work), commits) in raws.into_iter().zip(&plan).zip(&commits) {
                handles.push(scope.spawn(move || -> Result<()> {
                    for (p, i) in work {
                        client.push(p, &commits.bench[*i], true)?;
                    }
                    Ok(())
                }));
            }
        } else {
            for (work, commits) in plan.iter().zip(&commits) {
                let storage = storage.as_ref();
                handles.push(scope.spawn(move || -> Result<()> {
                    for (p, i) in work {
                        push_ours(storage, p, &commits.ours[*i], Some(&Default::default()))?;
                    }
                    Ok(())
                }));
            }
        }
        for handle in handles {
            handle
                .join()
                .map_err(|_| anyhow!("push thread panicked"))??;
        }
        Ok(())
    })?;
    Ok((per_thread * threads) as f64 / start.elapsed().as_secs_f64().max(1e-9))
}

/// Interleaved rounds of every variant (Postgres only).
pub fn run(env: &Env, scale: &Scale) -> Result<Vec<Measure>> {
    let mut rates: Vec<Vec<Sample>> = vec![Vec::new(); VARIANTS.len()];
    for round in 0..scale.conc_rounds {
        let mut line = Vec::new();
        for (i, (threads, partitions)) in VARIANTS.iter().enumerate() {
            let ours = run_variant(env, scale, *threads, *partitions, false)?;
            let raw = run_variant(env, scale, *threads, *partitions, true)?;
            line.push(format!(
                "{threads}t/{partitions}p ours {ours:.0} raw {raw:.0}"
            ));
            rates[i].push(Sample {
                ours,
                raw: Some(raw),
            });
        }
        progress(
            env.dialect,
            &format!("concurrency round {}/{}", round + 1, scale.conc_rounds),
            &format!("{} commits/s", line.join("; ")),
        );
    }
    let mut out = Vec::new();
    for (i, (threads, partitions)) in VARIANTS.iter().enumerate() {
        out.push(Measure::from_samples(
            "W1",
            format!("threads={threads},partitions={partitions}"),
            env.dialect,
            "commits/s",
            Better::Higher,
            rates[i].clone(),
        ));
    }
    let scaling = rates[0]
        .iter()
        .zip(&rates[3])
        .map(|(one, four)| Sample {
            ours: four.ours / one.ours.max(1e-9),
            raw: Some(four.raw.unwrap_or(0.0) / one.raw.unwrap_or(1.0).max(1e-9)),
        })
        .collect();
    out.push(Measure::from_samples(
        "W1",
        "scaling=threads=4,partitions=4/threads=1",
        env.dialect,
        "× commits/s",
        Better::NoRatio,
        scaling,
    ));
    Ok(out)
}
