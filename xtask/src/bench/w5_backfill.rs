//! W5 backfill: the derived column `title_lower = lower(title)` over
//! 200 000 rows in batches of 500 — ours through `CheckpointRunner` +
//! `DerivedColumn`, raw as a keyset-batch update (`raw_*.rs`). Each
//! measurement runs in a child process of the xtask binary (`child.rs`) so
//! its peak memory is its own. Rows/s and peak MB; on SQLite the full run
//! also backfills 1 000 000 rows once (`rows=1000000`).

use std::process::Command;

use anyhow::{bail, Context, Result};
use serde_json::Value;
use sync_sqlite::Synchronous;

use super::db::{Db, Dialect, Env, Location};
use super::fixture::{self, BenchRow, TABLE};
use super::report::{Better, Measure, Sample};
use super::w1_push::PARTITION;
use super::{progress, Scale};

/// What one child measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChildReport {
    pub rows: u64,
    pub seconds: f64,
    pub peak_mb: f64,
}

impl ChildReport {
    fn rate(&self) -> f64 {
        self.rows as f64 / self.seconds.max(1e-9)
    }
}

/// Seeds `rows` rows (with `title_lower` NULL) into a database ensured with
/// the W5 schema, in chunks so the parent never holds them all.
pub fn seed(db: &Db, rows: usize) -> Result<()> {
    drop(db.storage(true)?);
    let table = fixture::schema(true)?.require_table(TABLE)?.clone();
    let mut raw = db.raw()?;
    let mut start = 0usize;
    while start < rows {
        let end = (start + 50_000).min(rows);
        let chunk = (start..end)
            .map(|n| BenchRow::new(&table, "w5", n as u64))
            .collect::<Result<Vec<_>>>()?;
        raw.seed_rows(PARTITION, &chunk)?;
        start = end;
    }
    Ok(())
}

/// Runs one backfill in a child process.
pub fn child(db: &Db, implementation: &str, rows: usize, batch: i64) -> Result<ChildReport> {
    let exe = std::env::current_exe().context("locating the xtask binary")?;
    let mut command = Command::new(exe);
    command
        .arg("bench-child")
        .args(["--impl", implementation])
        .args(["--rows", &rows.to_string(), "--batch", &batch.to_string()]);
    match &db.location {
        Location::Sqlite(path) => {
            command.arg("--sqlite").arg(path);
        }
        Location::Postgres { url, schema } => {
            command.args(["--pg-url", url, "--schema", schema]);
        }
        Location::Mariadb { .. } => bail!("W5 is not built on MariaDB"),
    }
    let output = command.output().context("running bench-child")?;
    if !output.status.success() {
        bail!(
            "bench-child {implementation} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let text = String::from_utf8_lossy(&output.stdout);
    let line = text.lines().last().context("bench-child printed nothing")?;
    let value: Value = serde_json::from_str(line)?;
    let field = |k: &str| {
        value
            .get(k)
            .and_then(Value::as_f64)
            .with_context(|| format!("bench-child: no {k}"))
    };
    Ok(ChildReport {
        rows: field("rows")? as u64,
        seconds: field("seconds")?,
        peak_mb: field("peak_kb")? / 1024.0,
    })
}

fn prepared(env: &Env, template: Option<&Db>, rows: usize) -> Result<Db> {
    let db = env.fresh(Synchronous::default())?;
    match template {
        Some(template) => {
            template.copy_sqlite_to(&db)?;
        }
        None => seed(&db, rows)?,
    }
    Ok(db)
}

fn verify(db: &Db, rows: usize) -> Result<()> {
    let done = db.count("SELECT count(*) FROM todos WHERE title_lower IS NOT NULL")?;
    let state =
        db.count("SELECT count(*) FROM sync_backfill_checkpoints WHERE state = 'activated'")?;
    if done != i64::try_from(rows)? || state != 1 {
        bail!("W5: {done} of {rows} rows derived, {state} activated checkpoints");
    }
    Ok(())
}

/// Interleaved rounds at one size.
pub fn measure(
    env: &Env,
    scale: &Scale,
    rows: usize,
    rounds: usize,
    label: &str,
) -> Result<Vec<Measure>> {
    let template = match env.dialect {
        Dialect::Sqlite => {
            let template = env.fresh(Synchronous::default())?;
            seed(&template, rows)?;
            Some(template)
        }
        Dialect::Postgres => None,
        Dialect::Mariadb => bail!("W5 is not built on MariaDB"),
    };
    let mut rate = Vec::new();
    let mut memory = Vec::new();
    for round in 0..rounds {
        let db = prepared(env, template.as_ref(), rows)?;
        let ours = child(&db, "ours", rows, scale.w5_batch)?;
        verify(&db, rows)?;
        drop(db);
        let db = prepared(env, template.as_ref(), rows)?;
        let raw = child(&db, "raw", rows, scale.w5_batch)?;
        verify(&db, rows)?;
        drop(db);
        progress(
            env.dialect,
            &format!("W5 {label} round {}/{rounds}", round + 1),
            &format!(
                "ours {:.0} raw {:.0} rows/s; peak ours {:.1} raw {:.1} MB",
                ours.rate(),
                raw.rate(),
                ours.peak_mb,
                raw.peak_mb
            ),
        );
        rate.push(Sample {
            ours: ours.rate(),
            raw: Some(raw.rate()),
        });
        memory.push(Sample {
            ours: ours.peak_mb,
            raw: Some(raw.peak_mb),
        });
    }
    let memory_variant = if label == "default" {
        "peak-memory".to_owned()
    } else {
        format!("{label},peak-memory")
    };
    Ok(vec![
        Measure::from_samples("W5", label, env.dialect, "rows/s", Better::Higher, rate),
        Measure::from_samples(
            "W5",
            memory_variant,
            env.dialect,
            "MB",
            Better::NoRatio,
            memory,
        ),
    ])
}

/// W5 at the pinned size, plus the 1 000 000-row run on SQLite (full runs).
pub fn run(env: &Env, scale: &Scale) -> Result<Vec<Measure>> {
    let mut out = measure(env, scale, scale.w5_rows, scale.rounds, "default")?;
    if let (Dialect::Sqlite, Some(big)) = (env.dialect, scale.w5_big_rows) {
        out.extend(measure(env, scale, big, 1, &format!("rows={big}"))?);
    }
    Ok(out)
}
