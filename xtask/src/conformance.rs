//! `cargo xtask conformance`: the conformance suite per dialect
//! (`conformance-checklist.md` §0.1).

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use serde_json::Value;
use sync_conformance::{run_suite, selected_checks, Harness, RunOptions, SuiteReport};
use sync_postgres::harness::{CitusLayout, PostgresHarness};

use crate::postgres_server;

/// Which harnesses run.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DialectChoice {
    /// Embedded SQLite.
    Sqlite,
    /// PostgreSQL at `--pg-url`.
    Postgres,
    /// SQLite and PostgreSQL (not Citus).
    All,
    /// The PostgreSQL harness on the Citus coordinator of `--citus-url` or
    /// $SYNCSTORE_CITUS_URL, once per layout (`--citus-layout`); without a
    /// URL nothing runs and the run says why (a skip: exit 1 unless
    /// `--allow-skip`).
    Citus,
}

/// Which Citus layouts run with `--dialect citus`.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CitusLayoutChoice {
    /// Schema-based sharding (each check's schema a distributed schema).
    Schemas,
    /// Row-based: distributed by partition.
    Rows,
    /// Both, schemas first.
    Both,
}

/// Options of `cargo xtask conformance`.
#[derive(Args)]
pub struct ConformanceArgs {
    /// Which harnesses run.
    #[arg(long, value_enum, default_value = "all")]
    dialect: DialectChoice,
    /// PostgreSQL server (default: $SYNCSTORE_PG_URL or the local server).
    #[arg(long)]
    pg_url: Option<String>,
    /// Citus coordinator for `--dialect citus` (default: $SYNCSTORE_CITUS_URL).
    #[arg(long)]
    citus_url: Option<String>,
    /// Layouts `--dialect citus` runs.
    #[arg(long, value_enum, default_value = "both")]
    citus_layout: CitusLayoutChoice,
    /// Shards per schema in the row-based layout.
    #[arg(long, default_value_t = 4)]
    citus_shards: u32,
    /// Run checks whose ID or group starts with this prefix.
    #[arg(long)]
    filter: Option<String>,
    /// Print IDs, groups and titles; run nothing.
    #[arg(long)]
    list: bool,
    /// Checks running in parallel (default: CPU count).
    #[arg(long)]
    threads: Option<usize>,
    /// Write a JUnit XML report.
    #[arg(long)]
    junit: Option<PathBuf>,
    /// Print one JSON document on stdout (an array with `--dialect all`).
    #[arg(long)]
    json: bool,
    /// Exit 0 even when selected checks were skipped (a dialect without a
    /// capability group); by default a skip fails the run like a failure.
    #[arg(long)]
    allow_skip: bool,
}

/// Exit codes: 0 all passed, 1 a check failed (or was skipped without
/// `--allow-skip`), 2 setup error.
pub fn run(args: &ConformanceArgs) -> Result<i32> {
    let dialects: &[&str] = match args.dialect {
        DialectChoice::Sqlite => &["sqlite"],
        DialectChoice::Postgres | DialectChoice::Citus => &["postgres"],
        DialectChoice::All => &["sqlite", "postgres"],
    };
    if args.dialect == DialectChoice::Citus && !args.list {
        return run_citus(args);
    }
    if args.list {
        for dialect in dialects {
            for check in selected_checks(dialect, args.filter.as_deref()) {
                println!("{} {} {} — {}", check.id, dialect, check.group, check.title);
            }
        }
        return Ok(0);
    }
    let options = run_options(args);
    let mut reports = Vec::new();
    for dialect in dialects {
        let harness: Box<dyn Harness> = match *dialect {
            "sqlite" => Box::new(sync_sqlite::harness::SqliteHarness),
            _ => {
                let url = postgres_server::url(args.pg_url.as_deref());
                if let Err(error) = postgres_server::require(&url) {
                    eprintln!("error: {error:#}");
                    return Ok(2);
                }
                Box::new(PostgresHarness::with_url(url))
            }
        };
        reports.push(run_one(harness.as_ref(), &options, args.json, None));
    }
    finish(args, &reports)
}

fn run_options(args: &ConformanceArgs) -> RunOptions {
    let mut options = RunOptions {
        filter: args.filter.clone(),
        ..RunOptions::default()
    };
    if let Some(threads) = args.threads {
        options.threads = threads.max(1);
    }
    options
}

/// Runs the suite on `harness`; `label` renames the report's dialect
/// (`postgres+citus-rows`) so the lines say where they ran.
fn run_one(
    harness: &dyn Harness,
    options: &RunOptions,
    json: bool,
    label: Option<String>,
) -> SuiteReport {
    let mut report = run_suite(harness, options);
    if let Some(label) = label {
        report.dialect = label;
    }
    if !json {
        for line in report.lines() {
            println!("{line}");
        }
        println!("{}", report.summary_line());
    }
    report
}

/// `--dialect citus`: the Postgres harness on the coordinator, per layout.
fn run_citus(args: &ConformanceArgs) -> Result<i32> {
    let url = args
        .citus_url
        .clone()
        .or_else(sync_postgres::harness::citus_url_from_env);
    let Some(url) = url else {
        eprintln!(
            "skipped: no Citus coordinator (set {} or pass --citus-url); \
             see docs/scale-out.md for running one locally",
            sync_postgres::harness::CITUS_URL_ENV
        );
        return Ok(if args.allow_skip { 0 } else { 1 });
    };
    if let Err(error) = postgres_server::require(&url) {
        eprintln!("error: {error:#}");
        return Ok(2);
    }
    let layouts = match args.citus_layout {
        CitusLayoutChoice::Schemas => vec![CitusLayout::Schemas],
        CitusLayoutChoice::Rows => vec![CitusLayout::Rows {
            shard_count: args.citus_shards,
        }],
        CitusLayoutChoice::Both => vec![
            CitusLayout::Schemas,
            CitusLayout::Rows {
                shard_count: args.citus_shards,
            },
        ],
    };
    let options = run_options(args);
    let reports: Vec<SuiteReport> = layouts
        .into_iter()
        .map(|layout| {
            let harness = PostgresHarness::citus(url.clone(), layout);
            let label = format!("postgres+citus-{}", layout.name());
            run_one(&harness, &options, args.json, Some(label))
        })
        .collect();
    finish(args, &reports)
}

fn finish(args: &ConformanceArgs, reports: &[SuiteReport]) -> Result<i32> {
    if args.json {
        let document = match reports {
            [single] if args.dialect != DialectChoice::All => single.to_json(),
            many => Value::Array(many.iter().map(SuiteReport::to_json).collect()),
        };
        println!("{document}");
    }
    if let Some(path) = &args.junit {
        let xml: String = reports.iter().map(SuiteReport::to_junit).collect();
        let document = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n{xml}</testsuites>\n"
        );
        std::fs::write(path, document).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(exit_code(reports, args.allow_skip))
}

/// 0 when every report passed and, unless `allow_skip`, nothing was skipped.
fn exit_code(reports: &[SuiteReport], allow_skip: bool) -> i32 {
    let failed = !reports.iter().all(SuiteReport::passed);
    let skipped: usize = reports.iter().map(|r| r.counts().2).sum();
    if failed {
        return 1;
    }
    if skipped > 0 && !allow_skip {
        eprintln!(
            "error: {skipped} selected check(s) skipped; every check must run \
             (pass --allow-skip to accept skips)"
        );
        return 1;
    }
    0
}

/// Fails when nothing was selected (a typo in `--filter` must not pass silently).
pub fn ensure_selected(args: &ConformanceArgs) -> Result<()> {
    if let Some(filter) = &args.filter {
        if selected_checks("sqlite", Some(filter)).is_empty()
            && selected_checks("postgres", Some(filter)).is_empty()
        {
            bail!("--filter {filter:?} selects no check");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use sync_conformance::{CheckOutcome, Status, SuiteReport};

    use super::exit_code;

    fn report(statuses: &[Status]) -> SuiteReport {
        SuiteReport {
            dialect: "sqlite".to_owned(),
            outcomes: statuses
                .iter()
                .map(|&status| CheckOutcome {
                    id: "C-001",
                    group: "g",
                    title: "t",
                    status,
                    detail: None,
                    duration: Duration::ZERO,
                })
                .collect(),
        }
    }

    #[test]
    fn a_skip_fails_the_run_unless_allowed() {
        let passed = [report(&[Status::Pass, Status::Pass])];
        let skipped = [report(&[Status::Pass]), report(&[Status::Skip])];
        let failed = [report(&[Status::Fail, Status::Skip])];
        assert_eq!(exit_code(&passed, false), 0);
        assert_eq!(exit_code(&skipped, false), 1);
        assert_eq!(exit_code(&skipped, true), 0);
        assert_eq!(exit_code(&failed, true), 1);
    }
}
