//! MariaDB statements per single-row push (each one round trip), counted by
//! the storage's fault-injection plan, which every statement of its
//! connections passes (the feature is on in this binary through
//! `sync-mariadb`'s `conformance`): after a warm-up (so the partition, the
//! registry entry and the client record exist), `rt_pushes` of W1's commits
//! through the single calls (W1's sequence), through the prelude (as the
//! engine pushes) and as one-push engine rounds (W8's requests), each on a
//! fresh database. Printed with W1; the raw client's push is 15 statements.

use std::sync::Arc;

use anyhow::Result;
use sync_core::fault::FaultPlan;
use sync_core::ServerStorage;
use sync_mariadb::MariadbStorage;
use sync_sqlite::Synchronous;

use super::db::Env;
use super::pushes::{run_ours, run_ours_prelude, Prepared};
use super::report::{Better, Measure, Sample};
use super::w1_push::{self, PARTITION};
use super::{engine, progress, w8_engine_push, Scale};

const WARM_UP: usize = 20;

fn split(scale: &Scale, tag: &str) -> Result<(Prepared, Prepared)> {
    let all = w1_push::commits(WARM_UP + scale.rt_pushes, tag)?;
    let (warm, measured) = all.split_at(WARM_UP);
    Ok((
        Prepared::new(warm.to_vec()),
        Prepared::new(measured.to_vec()),
    ))
}

/// Statements `f` sends through `storage`'s connections.
fn counted(storage: &MariadbStorage, f: impl FnOnce() -> Result<()>) -> Result<u64> {
    let plan = FaultPlan::count_only();
    storage.set_fault_plan(Some(Arc::clone(&plan)));
    let outcome = f();
    storage.set_fault_plan(None);
    outcome.map(|()| plan.statements())
}

/// Statements per push: single calls, prelude, engine round.
pub fn run(env: &Env, scale: &Scale) -> Result<Vec<Measure>> {
    let n = scale.rt_pushes.max(1) as f64;

    let db = env.fresh(Synchronous::default())?;
    let storage = db.mariadb_storage()?;
    let (warm, measured) = split(scale, "sto")?;
    run_ours(storage.as_ref(), PARTITION, &warm, true)?;
    let single = counted(&storage, || {
        run_ours(storage.as_ref(), PARTITION, &measured, true).map(drop)
    })? as f64
        / n;
    drop(storage);
    drop(db);

    let db = env.fresh(Synchronous::default())?;
    let storage = db.mariadb_storage()?;
    let (warm, measured) = split(scale, "stp")?;
    run_ours_prelude(storage.as_ref(), PARTITION, &warm, true)?;
    let prelude = counted(&storage, || {
        run_ours_prelude(storage.as_ref(), PARTITION, &measured, true).map(drop)
    })? as f64
        / n;
    drop(storage);
    drop(db);

    let db = env.fresh(Synchronous::default())?;
    let storage = db.mariadb_storage()?;
    let engine = engine::engine(Arc::clone(&storage) as Arc<dyn ServerStorage>)?;
    let (warm, measured) = split(scale, "ste")?;
    let actor = warm
        .bench
        .first()
        .map_or("bench-user", |c| c.actor_id.as_str());
    let epoch = engine::acquire_epoch(&engine, actor, "st-setup")?;
    let rounds = |commits: &Prepared| -> Result<()> {
        for (commit, request) in commits
            .bench
            .iter()
            .zip(w8_engine_push::requests(&commits.bench, &epoch))
        {
            engine::round(&engine, &commit.actor_id, &request)?;
        }
        Ok(())
    };
    rounds(&warm)?;
    let engine_round = counted(&storage, || rounds(&measured))? as f64 / n;
    drop(engine);
    drop(storage);
    drop(db);

    progress(
        env.dialect,
        "statements",
        &format!(
            "per single-row push: single calls {single:.2}, prelude {prelude:.2}, \
             engine round {engine_round:.2} (raw 15)"
        ),
    );
    let measure = |variant: &str, ours: f64| {
        Measure::from_samples(
            "W1",
            variant.to_owned(),
            env.dialect,
            "statements/push",
            Better::NoRatio,
            vec![Sample { ours, raw: None }],
        )
    };
    Ok(vec![
        measure("statements", single),
        measure("statements,sequence=prelude", prelude),
        measure("statements,sequence=engine", engine_round),
    ])
}
