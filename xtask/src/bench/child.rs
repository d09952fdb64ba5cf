//! `cargo xtask bench-child`: one W5 backfill measurement in a process of
//! its own, so the peak resident memory it reports (`VmHWM` of
//! `/proc/self/status`) belongs to that backfill alone. Prints one JSON line.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use sync_backfill::{CheckpointRunner, DerivedColumn, RunOutcome, RunnerConfig};
use sync_core::{CompiledTable, RowValue};
use sync_sqlite::Synchronous;

use super::db::{Db, Location};
use super::fixture::{self, CHECKPOINT, DERIVED, TABLE, VERSION};
use super::w1_push::PARTITION;

/// Which implementation backfills.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Implementation {
    /// `sync_backfill::CheckpointRunner` with `DerivedColumn`.
    Ours,
    /// The raw keyset-batch update.
    Raw,
}

/// Options of the hidden `bench-child` subcommand.
#[derive(Args, Debug)]
pub struct ChildArgs {
    /// Which implementation runs.
    #[arg(long = "impl", value_enum)]
    implementation: Implementation,
    /// SQLite database file.
    #[arg(long)]
    sqlite: Option<PathBuf>,
    /// PostgreSQL server.
    #[arg(long)]
    pg_url: Option<String>,
    /// Postgres schema of the database.
    #[arg(long)]
    schema: Option<String>,
    /// Rows the backfill must rewrite.
    #[arg(long)]
    rows: u64,
    /// Rows per batch.
    #[arg(long, default_value_t = 500)]
    batch: i64,
}

/// `VmHWM` (peak resident set) of this process in KiB.
pub fn peak_rss_kb() -> Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .context("VmHWM missing from /proc/self/status")
}

/// `title_lower = lower(title)`.
fn derive(table: &CompiledTable, values: &[RowValue]) -> sync_core::Result<RowValue> {
    let title = table.column_index.get("title").and_then(|&i| values.get(i));
    Ok(match title {
        Some(RowValue::String(t)) => RowValue::String(t.to_lowercase()),
        _ => RowValue::Null,
    })
}

/// Runs one backfill on `db` in this process; returns the rows rewritten
/// and the seconds the backfill itself took.
pub fn backfill(db: &Db, implementation: Implementation, batch: i64) -> Result<(u64, f64)> {
    let schema = fixture::schema(true)?;
    let table = schema.require_table(TABLE)?.clone();
    match implementation {
        Implementation::Ours => {
            let storage = db.storage(true)?;
            let ensured = storage.ensured_schema().context("schema not ensured")?;
            let projector = DerivedColumn::new(ensured, TABLE, DERIVED, Arc::new(derive))?;
            let runner =
                CheckpointRunner::new(storage.as_ref(), PARTITION, CHECKPOINT, VERSION, &projector)
                    .with_config(RunnerConfig {
                        batch_size: batch,
                        ..RunnerConfig::default()
                    });
            let t = Instant::now();
            let outcome = runner.run()?;
            let seconds = t.elapsed().as_secs_f64();
            let RunOutcome::Activated { observed_rows, .. } = outcome else {
                bail!("backfill ended {}", outcome.as_str());
            };
            Ok((u64::try_from(observed_rows)?, seconds))
        }
        Implementation::Raw => {
            let mut raw = db.raw()?;
            let t = Instant::now();
            let rows = raw.backfill(PARTITION, &table, batch)?;
            Ok((rows, t.elapsed().as_secs_f64()))
        }
    }
}

/// Runs one backfill and prints `{"rows", "seconds", "peak_kb", "start_kb"}`.
pub fn run(args: &ChildArgs) -> Result<()> {
    let location = match (&args.sqlite, &args.pg_url, &args.schema) {
        (Some(path), _, _) => Location::Sqlite(path.clone()),
        (None, Some(url), Some(schema)) => Location::Postgres {
            url: url.clone(),
            schema: schema.clone(),
        },
        _ => bail!("bench-child needs --sqlite PATH or --pg-url URL --schema NAME"),
    };
    let db = Db::at(location, Synchronous::default());
    let start_kb = peak_rss_kb()?;
    let (rows, seconds) = backfill(&db, args.implementation, args.batch)?;
    if rows != args.rows {
        bail!("backfill rewrote {rows} rows, expected {}", args.rows);
    }
    let peak_kb = peak_rss_kb()?;
    println!(
        "{}",
        serde_json::json!({"rows": rows, "seconds": seconds, "peak_kb": peak_kb, "start_kb": start_kb})
    );
    Ok(())
}
