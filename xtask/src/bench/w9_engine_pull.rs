//! W9 engine-pull: W4's window through incremental pulls (one
//! `Engine::handle` round per page of 500 changes, the cursor advanced from
//! each `SUB_END`) against W4's `read_commit_window` loop; W3's all-lists
//! scan through bootstrap rounds (one page of 500 rows per round, resumed
//! with the bootstrap state; and `pages=4`, the protocol's default
//! `maxSnapshotPages`) against W3's `scan_rows` loop. Same database, A B A
//! B; the ratio is engine / storage-only.
//!
//! Every incremental round ends with the client record's write (its cursor
//! moved), the one write of a pull. On SQLite the default handle commits
//! that refresh without an `fsync` (`client_record_synchronous`, default
//! `NORMAL`, while pushes stay `FULL`); it is also measured through a
//! second handle on the same file whose writer runs `synchronous=NORMAL`
//! (W8's setting).

use anyhow::{bail, Result};
use sync_core::ServerStorage;
use sync_engine::{Engine, ResponseItem};

use super::db::{Db, Dialect};
use super::engine;
use super::fixture;
use super::report::{Better, Measure, Sample};
use super::w1_push::PARTITION;
use super::w3_scan::scan_ours;
use super::w4_pull::pull_ours;
use super::{progress, repeat_for, Scale};

const ACTOR: &str = "bench-reader";
const CLIENT: &str = "w9-client";

/// What a sequence of rounds returned.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Read {
    pub commits: u64,
    pub rows: u64,
}

/// Incremental rounds from cursor 0 until the cursor reaches `through`.
fn pull_engine(engine: &Engine, epoch: &str, through: i64, page: i32) -> Result<Read> {
    let mut read = Read::default();
    let mut cursor = 0;
    while cursor < through {
        let items = engine::round(
            engine,
            ACTOR,
            &engine::pull(CLIENT, epoch, cursor, None, page),
        )?;
        let mut next = None;
        for item in &items {
            match item {
                ResponseItem::Commit(_) => read.commits += 1,
                ResponseItem::BootstrapPage(_) => {
                    bail!("W9: a bootstrap page in an incremental pull")
                }
                ResponseItem::SubEnd(end) => next = Some(end.next_cursor),
                _ => {}
            }
        }
        match next {
            Some(n) if n > cursor => cursor = n,
            other => bail!("W9: the cursor did not advance from {cursor} ({other:?})"),
        }
    }
    Ok(read)
}

/// Bootstrap rounds of `pages` pages each until the bootstrap state is gone.
pub(super) fn bootstrap_engine(
    engine: &Engine,
    epoch: &str,
    page: i32,
    pages: i32,
) -> Result<Read> {
    let mut read = Read::default();
    let mut state = None;
    loop {
        let items = engine::round(
            engine,
            ACTOR,
            &engine::pull_pages(CLIENT, epoch, -1, state.take(), page, pages),
        )?;
        let mut ended = false;
        for item in &items {
            match item {
                ResponseItem::BootstrapPage(p) => read.rows += p.rows.len() as u64,
                ResponseItem::SubEnd(end) => {
                    state = end.bootstrap_state.clone();
                    ended = true;
                }
                _ => {}
            }
        }
        if !ended {
            bail!("W9: a bootstrap round without SUB_END");
        }
        if state.is_none() {
            return Ok(read);
        }
    }
}

fn rate(count: u64, runs: u32, elapsed: std::time::Duration) -> f64 {
    f64::from(runs) * count as f64 / elapsed.as_secs_f64().max(1e-9)
}

/// Interleaved rounds of both variants on the W3/W4 fixture.
pub fn run(db: &Db, scale: &Scale) -> Result<Vec<Measure>> {
    let storage = db.storage(false)?;
    let engine = engine::engine(storage.clone())?;
    let epoch = engine::acquire_epoch(&engine, ACTOR, CLIENT)?;
    let normal = if db.dialect == Dialect::Sqlite {
        Some(engine::engine(db.storage_with(false, |c| {
            c.synchronous = sync_sqlite::Synchronous::Normal;
        })?)?)
    } else {
        None
    };
    let mut window_normal = Vec::new();
    let through = storage.get_max_commit_seq(PARTITION)?;
    let page = i32::try_from(scale.page)?;
    let lists = fixture::all_lists();
    let mut window = Vec::new();
    let mut scan = Vec::new();
    let mut scan4 = Vec::new();
    for round in 0..scale.rounds {
        let (ours, runs, elapsed) = repeat_for(scale.min_read, || {
            pull_engine(&engine, &epoch, through, page)
        })?;
        let engine_rate = rate(ours.commits, runs, elapsed);
        let normal_rate = match &normal {
            Some(normal) => {
                let (read, runs, elapsed) = repeat_for(scale.min_read, || {
                    pull_engine(normal, &epoch, through, page)
                })?;
                if read != ours {
                    bail!("W9: the NORMAL handle pulled {read:?}, the default {ours:?}");
                }
                Some(rate(read.commits, runs, elapsed))
            }
            None => None,
        };
        let (base, runs, elapsed) = repeat_for(scale.min_read, || {
            pull_ours(
                storage.as_ref(),
                PARTITION,
                &lists,
                (0, through),
                scale.page,
                u64::MAX,
            )
        })?;
        let storage_rate = rate(base.commits, runs, elapsed);
        if ours.commits != base.commits {
            bail!(
                "W9: the engine pulled {} commits, the storage {}",
                ours.commits,
                base.commits
            );
        }
        let (boot, runs, elapsed) = repeat_for(scale.min_read, || {
            bootstrap_engine(&engine, &epoch, page, 1)
        })?;
        let boot_rate = rate(boot.rows, runs, elapsed);
        let (boot4, runs, elapsed) = repeat_for(scale.min_read, || {
            bootstrap_engine(&engine, &epoch, page, 4)
        })?;
        let boot4_rate = rate(boot4.rows, runs, elapsed);
        let (rows, runs, elapsed) = repeat_for(scale.min_read, || {
            scan_ours(
                storage.as_ref() as &dyn ServerStorage,
                &lists,
                scale.page,
                u64::MAX,
            )
        })?;
        let scan_rate = rate(rows, runs, elapsed);
        if boot.rows != rows || boot4.rows != rows {
            bail!(
                "W9: the engine bootstrapped {} rows ({} at 4 pages a round), the scan read {rows}",
                boot.rows,
                boot4.rows
            );
        }
        progress(
            db.dialect,
            &format!("W9 round {}/{}", round + 1, scale.rounds),
            &format!(
                "incremental engine {engine_rate:.0}{} storage-only {storage_rate:.0} commits/s; \
                 bootstrap engine {boot_rate:.0} (4 pages a round {boot4_rate:.0}) \
                 storage-only {scan_rate:.0} rows/s",
                normal_rate.map_or(String::new(), |r| format!(" (NORMAL {r:.0})"))
            ),
        );
        window.push(Sample {
            ours: engine_rate,
            raw: Some(storage_rate),
        });
        if let Some(normal_rate) = normal_rate {
            window_normal.push(Sample {
                ours: normal_rate,
                raw: Some(storage_rate),
            });
        }
        scan.push(Sample {
            ours: boot_rate,
            raw: Some(scan_rate),
        });
        scan4.push(Sample {
            ours: boot4_rate,
            raw: Some(scan_rate),
        });
    }
    let d = db.dialect;
    let mut measures = vec![Measure::from_samples(
        "W9",
        "incremental (W4)",
        d,
        "commits/s",
        Better::Higher,
        window,
    )];
    if !window_normal.is_empty() {
        measures.push(Measure::from_samples(
            "W9",
            "incremental (W4),synchronous=NORMAL",
            d,
            "commits/s",
            Better::Higher,
            window_normal,
        ));
    }
    measures.push(Measure::from_samples(
        "W9",
        "bootstrap (W3 lists=100)",
        d,
        "rows/s",
        Better::Higher,
        scan,
    ));
    measures.push(Measure::from_samples(
        "W9",
        "bootstrap (W3 lists=100),pages=4",
        d,
        "rows/s",
        Better::Higher,
        scan4,
    ));
    Ok(measures)
}
