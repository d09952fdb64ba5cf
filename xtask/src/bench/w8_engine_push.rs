//! W8 engine-push: W1's single-row commits through `Engine::handle`, one
//! push per request (entry checks, idempotency lookup, the push
//! transaction, the result record), against the same commits through the
//! storage-only push sequence of W1 — A B A B in the same run, each on a
//! fresh database. Commits/s; the ratio is engine / storage-only.

use anyhow::{bail, Result};
use sync_engine::{Operation, PushCommit, PushResultStatus, ResponseItem, SyncRequest};
use sync_sqlite::Synchronous;

use super::db::Env;
use super::engine;
use super::fixture::{BenchCommit, TABLE};
use super::pushes::{run_ours, timed, Prepared, PushRun};
use super::report::{Better, Measure, Sample};
use super::w1_push::{self, PARTITION};
use super::{progress, Scale};

/// One push request per commit.
pub fn requests(commits: &[BenchCommit], epoch: &str) -> Vec<SyncRequest> {
    commits
        .iter()
        .map(|c| {
            let mut req = engine::request(&c.client_id, Some(epoch));
            req.pushes.push(PushCommit {
                client_commit_id: c.commit_id.clone(),
                operations: c
                    .rows
                    .iter()
                    .map(|r| Operation::upsert(TABLE, r.id.clone(), None, r.payload.clone()))
                    .collect(),
            });
            req
        })
        .collect()
}

/// One timed run of the commits through `Engine::handle` on a fresh database.
pub fn engine_round(env: &Env, commits: &Prepared) -> Result<PushRun> {
    let db = env.fresh(Synchronous::Normal)?;
    let engine = engine::engine(db.storage(false)?)?;
    let actor = commits
        .bench
        .first()
        .map_or("bench-user", |c| c.actor_id.as_str());
    let epoch = engine::acquire_epoch(&engine, actor, "w8-setup")?;
    let requests = requests(&commits.bench, &epoch);
    let rows = commits.bench.iter().map(|c| c.rows.len()).sum();
    timed(requests.len(), rows, |i| {
        let items = engine::round(&engine, &commits.bench[i].actor_id, &requests[i])?;
        match items.get(1) {
            Some(ResponseItem::PushResult(r)) if r.status == PushResultStatus::Applied => Ok(()),
            other => bail!("W8: push {i} was not applied: {other:?}"),
        }
    })
}

fn storage_round(env: &Env, commits: &Prepared) -> Result<PushRun> {
    let db = env.fresh(Synchronous::Normal)?;
    let storage = db.storage(false)?;
    run_ours(storage.as_ref(), PARTITION, commits, true)
}

/// Interleaved rounds.
pub fn run(env: &Env, scale: &Scale) -> Result<Vec<Measure>> {
    let commits = Prepared::new(w1_push::commits(scale.w1_commits, "w8")?);
    let mut rate = Vec::new();
    let mut p50 = Vec::new();
    for round in 0..scale.rounds {
        let engine = engine_round(env, &commits)?;
        let storage = storage_round(env, &commits)?;
        progress(
            env.dialect,
            &format!("W8 round {}/{}", round + 1, scale.rounds),
            &format!(
                "engine {:.0} storage-only {:.0} commits/s",
                engine.commits_per_s(),
                storage.commits_per_s()
            ),
        );
        rate.push(Sample {
            ours: engine.commits_per_s(),
            raw: Some(storage.commits_per_s()),
        });
        p50.push(Sample {
            ours: engine.latency(0.5),
            raw: Some(storage.latency(0.5)),
        });
    }
    let d = env.dialect;
    Ok(vec![
        Measure::from_samples("W8", "engine/storage", d, "commits/s", Better::Higher, rate),
        Measure::from_samples(
            "W8",
            "engine/storage,latency=p50",
            d,
            "µs",
            Better::Lower,
            p50,
        ),
    ])
}
