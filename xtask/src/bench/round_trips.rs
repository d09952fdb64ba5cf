//! Postgres round trips per single-row push, counted by a loopback proxy
//! (`proxy.rs`) between the client and the server: after a warm-up (so
//! prepared statements are cached), `rt_pushes` W1 commits go through the
//! proxy and the counted requests are divided by the commits; the same
//! commits as one-push engine rounds (W8's requests) give the engine's.

use anyhow::Result;
use sync_sqlite::Synchronous;

use super::db::Env;
use super::proxy::{upstream, Proxy};
use super::pushes::{run_ours, run_ours_prelude, run_raw, Prepared};
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

/// Round trips per push of ours and raw (Postgres only).
pub fn run(env: &Env, scale: &Scale) -> Result<Vec<Measure>> {
    let proxy = Proxy::start(upstream(env.pg_url())?)?;
    let url = proxy.url(env.pg_url())?;
    let n = scale.rt_pushes.max(1) as f64;

    let db = env.fresh(Synchronous::default())?;
    let storage = db.storage_via(&url)?;
    let (warm, measured) = split(scale, "rto")?;
    run_ours(storage.as_ref(), PARTITION, &warm, true)?;
    proxy.reset();
    run_ours(storage.as_ref(), PARTITION, &measured, true)?;
    let ours = proxy.round_trips() as f64 / n;
    drop(storage);
    drop(db);

    let db = env.fresh(Synchronous::default())?;
    let storage = db.storage_via(&url)?;
    let (warm, measured) = split(scale, "rtp")?;
    run_ours_prelude(storage.as_ref(), PARTITION, &warm, true)?;
    proxy.reset();
    run_ours_prelude(storage.as_ref(), PARTITION, &measured, true)?;
    let prelude = proxy.round_trips() as f64 / n;
    drop(storage);
    drop(db);

    // One push per engine round (W8's requests): entry, push, result.
    let db = env.fresh(Synchronous::default())?;
    let engine = engine::engine(db.storage_via(&url)?)?;
    let (warm, measured) = split(scale, "rte")?;
    let actor = warm
        .bench
        .first()
        .map_or("bench-user", |c| c.actor_id.as_str());
    let epoch = engine::acquire_epoch(&engine, actor, "rt-setup")?;
    for (commits, counted) in [(&warm, false), (&measured, true)] {
        if counted {
            proxy.reset();
        }
        for (commit, request) in commits
            .bench
            .iter()
            .zip(w8_engine_push::requests(&commits.bench, &epoch))
        {
            engine::round(&engine, &commit.actor_id, &request)?;
        }
    }
    let engine_round = proxy.round_trips() as f64 / n;
    drop(engine);
    drop(db);

    let db = env.fresh(Synchronous::default())?;
    drop(db.storage(false)?);
    let mut raw = db.raw_via(&url)?;
    let (warm, measured) = split(scale, "rtr")?;
    run_raw(raw.as_mut(), PARTITION, &warm, true)?;
    proxy.reset();
    run_raw(raw.as_mut(), PARTITION, &measured, true)?;
    let base = proxy.round_trips() as f64 / n;
    progress(
        env.dialect,
        "round trips",
        &format!(
            "ours {ours:.2} (prelude {prelude:.2}, engine round {engine_round:.2}) raw {base:.2} per single-row push"
        ),
    );
    Ok(vec![
        Measure::from_samples(
            "W1",
            "round-trips",
            env.dialect,
            "round trips/push",
            Better::NoRatio,
            vec![Sample {
                ours,
                raw: Some(base),
            }],
        ),
        Measure::from_samples(
            "W1",
            "round-trips,sequence=prelude",
            env.dialect,
            "round trips/push",
            Better::NoRatio,
            vec![Sample {
                ours: prelude,
                raw: Some(base),
            }],
        ),
        Measure::from_samples(
            "W8",
            "round-trips,sequence=engine",
            env.dialect,
            "round trips/push",
            Better::NoRatio,
            vec![Sample {
                ours: engine_round,
                raw: Some(base),
            }],
        ),
    ])
}
