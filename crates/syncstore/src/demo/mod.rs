//! `demo [--db URL] [--rows N]`: tells and shows the whole RFC 0007 story on
//! a fresh database — schema v1, a v1 fleet pushing, the bump to v2 with a
//! derived column, the database-side writer fence stopping v1, the serve
//! gate stopping undeclared v2 code, the backfill under live writes,
//! activation, the gate opening, and a final consistency check.
//!
//! Exit 0 only when every step behaved as told; otherwise
//! `sync.cli.demo_failed` names the step and the claim that did not hold.

mod fresh;
mod narrator;
mod push;
mod story;
mod todos;
mod traffic;

use std::time::Instant;

use serde_json::json;

use crate::cli::DemoArgs;
use crate::error::CliResult;
use crate::output::{Format, Report};
use narrator::Narrator;
use story::{Story, STEPS};

/// Runs the demo.
pub fn run(explicit_db: Option<&str>, args: &DemoArgs, format: Format) -> CliResult<Report> {
    let started = Instant::now();
    let fresh = fresh::prepare(explicit_db)?;
    let mut narrator = Narrator::new(format);
    narrator.intro(
        "syncstore demo: a schema upgrade under live traffic (RFC 0007), from start to finish.",
    );
    narrator.intro(&format!("Database: {}.", fresh.description));
    let distribute = args.distribute.then_some(sync_postgres::DistributeOptions {
        shard_count: args.shard_count,
    });
    let mut story = Story::new(fresh.url.clone(), args.rows, distribute)?;
    for step in STEPS {
        step(&mut story, &mut narrator).map_err(|error| narrator.unexpected(error))?;
    }
    let elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let json = json!({
        "ok": true,
        "database": fresh.reopen,
        "rows": args.rows,
        "elapsed_ms": elapsed_ms,
        "steps": narrator.steps_json(),
    });
    let text = format!(
        "\nAll {} steps behaved as told ({:.1} s).\nLook inside: syncstore --db '{}' status\n",
        narrator.step_count(),
        elapsed_ms as f64 / 1000.0,
        fresh.reopen
    );
    Ok(Report::new(json, text))
}
