//! W10 concurrent push: 1, 4, 16 and 64 client threads, each pushing
//! single-row commits, all to one partition or each thread to its own.
//! Three implementations per variant, run A B C A B C … on fresh databases:
//! ours through the storage API's push sequence with the prelude
//! (`pushes::push_ours_prelude`, as the engine pushes; one shared
//! storage), ours through `Engine::handle` (one push per request,
//! one shared engine), and the raw one-transaction-per-push client (one
//! connection per thread). Commits/s over the whole run and p50/p99 of the
//! per-push latencies of every thread; ratios are ours / raw.
//!
//! Storage configurations are data ([`variants`]): SQLite runs with the
//! default `synchronous=FULL` and the `NORMAL` opt-in; a new storage option
//! is one more line there.

use std::sync::Barrier;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};
use sync_engine::{Engine, PushResultStatus, RequestContext, ResponseItem, SyncRequest};
use sync_sqlite::{GroupCommit, SqliteConfig, Synchronous};

use super::db::{Db, Dialect, Env};
use super::engine;
use super::fixture;
use super::pushes::{push_ours_prelude, Prepared};
use super::report::{quantile, Better, Measure, Sample};
use super::w8_engine_push::requests;
use super::{progress, Scale};

/// How long a raw SQLite writer waits for the file lock: with 64 writers
/// queued behind `synchronous=FULL` commits, far beyond the 5 s of one writer.
const RAW_BUSY_TIMEOUT: Duration = Duration::from_secs(120);

/// Client thread counts.
pub const THREADS: [usize; 4] = [1, 4, 16, 64];

/// One storage configuration W10 measures.
#[derive(Debug, Clone, Copy)]
pub struct StorageVariant {
    /// Label in the results (`synchronous=FULL`, …).
    pub name: &'static str,
    /// SQLite `synchronous` (ignored on Postgres).
    pub synchronous: Synchronous,
    /// Further SQLite settings of ours (the raw client has none of them).
    pub sqlite: fn(&mut SqliteConfig),
}

/// The configurations of a dialect: one line each.
pub fn variants(dialect: Dialect) -> Vec<StorageVariant> {
    match dialect {
        Dialect::Sqlite => vec![
            StorageVariant {
                name: "synchronous=FULL",
                synchronous: Synchronous::Full,
                sqlite: |_| {},
            },
            StorageVariant {
                name: "synchronous=NORMAL",
                synchronous: Synchronous::Normal,
                sqlite: |_| {},
            },
            StorageVariant {
                name: "synchronous=FULL,group_commit",
                synchronous: Synchronous::Full,
                sqlite: |c| c.group_commit = GroupCommit::ON,
            },
            StorageVariant {
                name: "synchronous=NORMAL,group_commit",
                synchronous: Synchronous::Normal,
                sqlite: |c| c.group_commit = GroupCommit::ON,
            },
        ],
        Dialect::Postgres | Dialect::Mariadb => vec![StorageVariant {
            name: "default",
            synchronous: Synchronous::default(),
            sqlite: |_| {},
        }],
    }
}

/// Which implementation pushes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Path {
    Storage,
    Engine,
    Raw,
}

/// One measured run.
#[derive(Debug, Clone)]
struct ConcRun {
    commits_per_s: f64,
    p50_us: f64,
    p99_us: f64,
}

fn partition_of(thread: usize, distinct: bool) -> String {
    if distinct {
        format!("w10-p{thread}")
    } else {
        "w10-p0".to_owned()
    }
}

/// Thread `t`'s commits: `per_thread` single-row commits of its own rows
/// and clients.
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

/// Runs every thread's pushes after a common start; returns the elapsed
/// time and every push latency in µs.
fn run_threads<W: Send>(
    workers: Vec<W>,
    per_thread: usize,
    push: impl Fn(&mut W, usize) -> Result<()> + Sync,
) -> Result<(Duration, Vec<f64>)> {
    let barrier = Barrier::new(workers.len() + 1);
    std::thread::scope(|scope| {
        let mut handles = Vec::new();
        for mut worker in workers {
            let (barrier, push) = (&barrier, &push);
            handles.push(scope.spawn(move || -> Result<Vec<f64>> {
                let mut latencies = Vec::with_capacity(per_thread);
                barrier.wait();
                for i in 0..per_thread {
                    let t = Instant::now();
                    push(&mut worker, i)?;
                    latencies.push(t.elapsed().as_secs_f64() * 1e6);
                }
                Ok(latencies)
            }));
        }
        barrier.wait();
        let start = Instant::now();
        let mut all = Vec::new();
        let mut failure = None;
        for handle in handles {
            match handle.join() {
                Ok(Ok(latencies)) => all.extend(latencies),
                Ok(Err(err)) => failure = failure.or(Some(err)),
                Err(_) => failure = failure.or(Some(anyhow!("W10 push thread panicked"))),
            }
        }
        match failure {
            Some(err) => Err(err),
            None => Ok((start.elapsed(), all)),
        }
    })
}

/// The engine's push of one prepared request.
fn engine_push(
    engine: &Engine,
    ctx: &RequestContext,
    request: &SyncRequest,
    what: &str,
) -> Result<()> {
    let mut items = Vec::new();
    let outcome = engine.handle(ctx, request, &mut items)?;
    if let Some(error) = outcome.error {
        bail!("W10 {what}: engine round failed: {error}");
    }
    match items.get(1) {
        Some(ResponseItem::PushResult(r)) if r.status == PushResultStatus::Applied => Ok(()),
        other => bail!("W10 {what}: push was not applied: {other:?}"),
    }
}

fn run_path(
    env: &Env,
    variant: &StorageVariant,
    path: Path,
    threads: usize,
    distinct: bool,
    per_thread: usize,
) -> Result<ConcRun> {
    let tag = match path {
        Path::Storage => "ws",
        Path::Engine => "we",
        Path::Raw => "wr",
    };
    let commits = commits_of(threads, per_thread, tag)?;
    let db: Db = env.fresh(variant.synchronous)?;
    let storage = db.storage_with(false, variant.sqlite)?;
    let (elapsed, mut latencies) = match path {
        Path::Storage => {
            let ctx = sync_core::ServeContext::default();
            let workers: Vec<(String, &Prepared)> = (0..threads)
                .map(|t| (partition_of(t, distinct), &commits[t]))
                .collect();
            run_threads(workers, per_thread, |(partition, commits), i| {
                push_ours_prelude(storage.as_ref(), partition, &commits.ours[i], Some(&ctx))
                    .map(|_| ())
            })?
        }
        Path::Engine => {
            let engine = engine::engine(storage.clone())?;
            let mut workers = Vec::new();
            for (t, commits) in commits.iter().enumerate() {
                let partition = partition_of(t, distinct);
                let actor = commits
                    .bench
                    .first()
                    .map_or("bench-user", |c| c.actor_id.as_str());
                let ctx = RequestContext::new(partition.clone(), actor);
                let epoch = engine::acquire_epoch_in(&engine, &ctx, &format!("w10-setup-{t}"))?;
                workers.push((ctx, requests(&commits.bench, &epoch)));
            }
            let engine = &engine;
            run_threads(workers, per_thread, |(ctx, requests), i| {
                engine_push(engine, ctx, &requests[i], "engine")
            })?
        }
        Path::Raw => {
            drop(storage);
            let mut workers = Vec::new();
            for (t, commits) in commits.iter().enumerate() {
                workers.push((
                    db.raw_waiting(RAW_BUSY_TIMEOUT)?,
                    partition_of(t, distinct),
                    commits,
                ));
            }
            run_threads(workers, per_thread, |(raw, partition, commits), i| {
                raw.push(partition, &commits.bench[i], true).map(|_| ())
            })?
        }
    };
    let total = threads * per_thread;
    Ok(ConcRun {
        commits_per_s: total as f64 / elapsed.as_secs_f64().max(1e-9),
        p50_us: quantile(&mut latencies, 0.5),
        p99_us: quantile(&mut latencies, 0.99),
    })
}

/// Commits per thread: the run's total split over the threads (at least
/// four each).
fn per_thread(scale: &Scale, threads: usize) -> usize {
    (scale.w10_commits / threads).max(4)
}

/// Every variant in interleaved rounds.
pub fn run(env: &Env, scale: &Scale) -> Result<Vec<Measure>> {
    let mut out = Vec::new();
    for variant in variants(env.dialect) {
        for threads in THREADS {
            for distinct in [false, true] {
                if threads == 1 && distinct {
                    continue; // one thread: one partition either way
                }
                out.extend(run_cell(env, scale, &variant, threads, distinct)?);
            }
        }
    }
    Ok(out)
}

fn run_cell(
    env: &Env,
    scale: &Scale,
    variant: &StorageVariant,
    threads: usize,
    distinct: bool,
) -> Result<Vec<Measure>> {
    let n = per_thread(scale, threads);
    let partitions = if distinct { threads } else { 1 };
    let mut runs: Vec<[ConcRun; 3]> = Vec::new();
    for round in 0..scale.w10_rounds {
        let storage = run_path(env, variant, Path::Storage, threads, distinct, n)?;
        let engine = run_path(env, variant, Path::Engine, threads, distinct, n)?;
        let raw = run_path(env, variant, Path::Raw, threads, distinct, n)?;
        progress(
            env.dialect,
            &format!(
                "W10 {} threads={threads} partitions={partitions} round {}/{}",
                variant.name,
                round + 1,
                scale.w10_rounds
            ),
            &format!(
                "storage {:.0} engine {:.0} raw {:.0} commits/s; p99 {:.0} / {:.0} / {:.0} µs",
                storage.commits_per_s,
                engine.commits_per_s,
                raw.commits_per_s,
                storage.p99_us,
                engine.p99_us,
                raw.p99_us
            ),
        );
        runs.push([storage, engine, raw]);
    }
    let d = env.dialect;
    let mut out = Vec::new();
    for (k, path) in ["storage", "engine"].iter().enumerate() {
        let label = |extra: &str| {
            format!(
                "{},path={path},threads={threads},partitions={partitions}{extra}",
                variant.name
            )
        };
        let samples = |f: fn(&ConcRun) -> f64| -> Vec<Sample> {
            runs.iter()
                .map(|r| Sample {
                    ours: f(&r[k]),
                    raw: Some(f(&r[2])),
                })
                .collect()
        };
        out.push(Measure::from_samples(
            "W10",
            label(""),
            d,
            "commits/s",
            Better::Higher,
            samples(|r| r.commits_per_s),
        ));
        out.push(Measure::from_samples(
            "W10",
            label(",latency=p50"),
            d,
            "µs",
            Better::Lower,
            samples(|r| r.p50_us),
        ));
        out.push(Measure::from_samples(
            "W10",
            label(",latency=p99"),
            d,
            "µs",
            Better::Lower,
            samples(|r| r.p99_us),
        ));
    }
    Ok(out)
}
