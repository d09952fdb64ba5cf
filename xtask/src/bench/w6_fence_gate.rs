//! W6 fence and gate cost: W1 with a writer fence present vs absent and with
//! the serve gate read in each push vs not. "Present" is a database-wide
//! fence and a partition fence at version 1 (writer version 1 passes);
//! "absent" is neither (the trigger stays installed and finds no fence).
//!
//! The four configurations share one database per implementation and run in
//! interleaved blocks (each round: ten blocks, each block pushes a tenth of
//! the round's commits in every configuration, the configuration order
//! rotating per block; the fence is switched between blocks, untimed), so
//! table growth and machine noise hit all four alike. Overhead in percent of
//! the configuration without either, per round and per implementation (the
//! raw baseline pays the same trigger, and reads the same gate statement when
//! the gate is on).

use std::time::Duration;

use anyhow::Result;
use sync_core::ServerStorage;
use sync_sqlite::Synchronous;

use super::db::{Db, Env};
use super::pushes::{run_ours, run_raw, Prepared};
use super::raw::RawClient;
use super::report::{Better, Measure, Sample};
use super::w1_push::{self, PARTITION};
use super::{progress, Scale};

const CONFIGS: [(bool, bool, &str); 4] = [
    (false, false, "fence=off,gate=off"),
    (true, false, "fence=on"),
    (false, true, "gate=on"),
    (true, true, "fence=on,gate=on"),
];

const BLOCKS: usize = 10;

/// One implementation's database, its pusher and a raw connection for the
/// (untimed) fence switches.
struct Side {
    _db: Db,
    storage: Option<std::sync::Arc<dyn ServerStorage>>,
    pusher: Option<Box<dyn RawClient>>,
    admin: Box<dyn RawClient>,
    next: usize,
}

impl Side {
    fn new(env: &Env, raw: bool) -> Result<Self> {
        let db = env.fresh(Synchronous::default())?;
        let storage = db.storage(false)?;
        let admin = db.raw()?;
        let (storage, pusher) = if raw {
            drop(storage);
            (None, Some(db.raw()?))
        } else {
            (Some(storage), None)
        };
        Ok(Self {
            _db: db,
            storage,
            pusher,
            admin,
            next: 0,
        })
    }

    /// Pushes `count` new commits in one configuration (prepared untimed).
    fn block(&mut self, tag: &str, count: usize, fence: bool, gate: bool) -> Result<Duration> {
        self.admin.set_fence(PARTITION, fence)?;
        let commits = Prepared::new(w1_push::commits(count, &format!("{tag}{}", self.next))?);
        self.next += 1;
        let run = match (&self.storage, &mut self.pusher) {
            (Some(storage), _) => run_ours(storage.as_ref(), PARTITION, &commits, gate)?,
            (None, Some(pusher)) => run_raw(pusher.as_mut(), PARTITION, &commits, gate)?,
            (None, None) => anyhow::bail!("W6 side without a pusher"),
        };
        Ok(run.elapsed)
    }
}

/// Interleaved blocks of the four configurations.
pub fn run(env: &Env, scale: &Scale) -> Result<Vec<Measure>> {
    let per_block = (scale.w6_commits / BLOCKS).max(1);
    let mut ours = Side::new(env, false)?;
    let mut raw = Side::new(env, true)?;
    // rates[config] = per-round (ours, raw) commits/s
    let mut rates: Vec<Vec<(f64, f64)>> = vec![Vec::new(); CONFIGS.len()];
    for round in 0..scale.rounds {
        let mut time = [[Duration::ZERO; 2]; CONFIGS.len()];
        for block in 0..BLOCKS {
            for k in 0..CONFIGS.len() {
                let i = (block + k) % CONFIGS.len();
                let (fence, gate, _) = CONFIGS[i];
                time[i][0] += ours.block("w6o", per_block, fence, gate)?;
                time[i][1] += raw.block("w6r", per_block, fence, gate)?;
            }
        }
        let commits = (per_block * BLOCKS) as f64;
        let mut line = Vec::new();
        for (i, (_, _, name)) in CONFIGS.iter().enumerate() {
            let o = commits / time[i][0].as_secs_f64().max(1e-9);
            let r = commits / time[i][1].as_secs_f64().max(1e-9);
            rates[i].push((o, r));
            line.push(format!("{name}: ours {o:.0} raw {r:.0}"));
        }
        progress(
            env.dialect,
            &format!("W6 round {}/{}", round + 1, scale.rounds),
            &format!("{} commits/s", line.join("; ")),
        );
    }
    let overhead = |base: f64, x: f64| (base / x.max(1e-9) - 1.0) * 100.0;
    let mut out = Vec::new();
    for (i, (_, _, name)) in CONFIGS.iter().enumerate().skip(1) {
        let samples = rates[0]
            .iter()
            .zip(&rates[i])
            .map(|(base, x)| Sample {
                ours: overhead(base.0, x.0),
                raw: Some(overhead(base.1, x.1)),
            })
            .collect();
        out.push(Measure::from_samples(
            "W6",
            *name,
            env.dialect,
            "% overhead",
            Better::NoRatio,
            samples,
        ));
    }
    let base = rates[0]
        .iter()
        .map(|(o, r)| Sample {
            ours: *o,
            raw: Some(*r),
        })
        .collect();
    out.push(Measure::from_samples(
        "W6",
        CONFIGS[0].2,
        env.dialect,
        "commits/s",
        Better::Higher,
        base,
    ));
    Ok(out)
}
