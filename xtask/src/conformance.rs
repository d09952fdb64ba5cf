//! `cargo xtask conformance`: the conformance suite per dialect
//! (`conformance-checklist.md` §0.1).

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use serde_json::Value;
use sync_conformance::{
    run_suite, selected_checks, Harness, HarnessEntry, HarnessEnv, RunOptions, SuiteReport,
};
use sync_postgres::harness::{CitusLayout, PostgresHarness};
use sync_schema::{find_dialect, RegistryError};

/// The dialects `cargo xtask conformance` knows: one line per dialect.
pub const DIALECTS: &[HarnessEntry] = &[
    sync_sqlite::harness::ENTRY,
    sync_postgres::harness::ENTRY,
    sync_mariadb::harness::ENTRY,
    dialect_shadow::ENTRY,
];

/// The name that runs the Postgres harness on a Citus coordinator (not a
/// dialect of its own: the Postgres dialect in a distributed layout).
const CITUS: &str = "citus";

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
    /// Which registered dialect runs (`sqlite`, `postgres`, `shadow`, …), or
    /// `all` (every registered one), or `citus`: the Postgres harness on the
    /// Citus coordinator of `--citus-url` or $SYNCSTORE_CITUS_URL, once per
    /// layout; without a URL nothing runs and the run says why (a skip:
    /// exit 1 unless `--allow-skip`).
    #[arg(long, default_value = "all")]
    dialect: String,
    /// Citus coordinator for `--dialect citus` (default: $SYNCSTORE_CITUS_URL).
    #[arg(long)]
    citus_url: Option<String>,
    /// Layouts `--dialect citus` runs.
    #[arg(long, value_enum, default_value = "both")]
    citus_layout: CitusLayoutChoice,
    /// Shards per schema in the row-based layout.
    #[arg(long, default_value_t = 4)]
    citus_shards: u32,
    /// Database server of a dialect that has one (default: the dialect's
    /// own environment variable, e.g. $SYNCSTORE_PG_URL, or local server).
    #[arg(long, alias = "pg-url")]
    server_url: Option<String>,
    /// Run checks whose ID or group starts with this prefix, or with one of
    /// several comma-separated prefixes (`E-,C-350`).
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
    if args.dialect == CITUS {
        if args.list {
            for line in citus_listing(args) {
                println!("{line}");
            }
            return Ok(0);
        }
        return run_citus(args);
    }
    let entries = match selected_dialects(&args.dialect) {
        Ok(entries) => entries,
        Err(error) => {
            eprintln!("error: {error}");
            return Ok(2);
        }
    };
    if args.list {
        for entry in &entries {
            let harness = match (entry.hooks)(&env(args)) {
                Ok(harness) => harness,
                Err(error) => {
                    eprintln!("error: {error}");
                    return Ok(2);
                }
            };
            for check in selected_checks(&harness.properties(), args.filter.as_deref()) {
                println!(
                    "{} {} {} — {}",
                    check.id,
                    entry.name(),
                    check.group,
                    check.title
                );
            }
        }
        return Ok(0);
    }
    let options = run_options(args);
    let mut reports = Vec::new();
    for entry in &entries {
        let harness = match (entry.hooks)(&env(args)) {
            Ok(harness) => harness,
            Err(error) => {
                eprintln!("error: {error}");
                return Ok(2);
            }
        };
        let report = run_suite(harness.as_ref(), &options);
        print_report(args, &report);
        reports.push(report);
    }
    finish(args, &reports)
}

/// The JSON document and JUnit file of the run, and its exit code.
fn finish(args: &ConformanceArgs, reports: &[SuiteReport]) -> Result<i32> {
    if args.json {
        let document = match reports {
            [single] if args.dialect != "all" => single.to_json(),
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

/// The layouts `--citus-layout` selects.
fn citus_layouts(args: &ConformanceArgs) -> Vec<CitusLayout> {
    let rows = CitusLayout::Rows {
        shard_count: args.citus_shards,
    };
    match args.citus_layout {
        CitusLayoutChoice::Schemas => vec![CitusLayout::Schemas],
        CitusLayoutChoice::Rows => vec![rows],
        CitusLayoutChoice::Both => vec![CitusLayout::Schemas, rows],
    }
}

/// `--dialect citus --list`: the checks each selected layout runs, one
/// line each. Selecting checks needs only the harness's declared
/// properties, so no coordinator is asked.
fn citus_listing(args: &ConformanceArgs) -> Vec<String> {
    let url = args
        .citus_url
        .clone()
        .or_else(sync_postgres::harness::citus_url_from_env)
        .unwrap_or_default();
    let mut lines = Vec::new();
    for layout in citus_layouts(args) {
        let harness = PostgresHarness::citus(url.clone(), layout);
        let properties = (&harness as &dyn Harness).properties();
        for check in selected_checks(&properties, args.filter.as_deref()) {
            lines.push(format!(
                "{} postgres+citus-{} {} — {}",
                check.id,
                layout.name(),
                check.group,
                check.title
            ));
        }
    }
    lines
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
    if let Err(error) = crate::postgres_server::require(&url) {
        eprintln!("error: {error:#}");
        return Ok(2);
    }
    let layouts = citus_layouts(args);
    let options = run_options(args);
    let mut reports = Vec::new();
    for layout in layouts {
        let harness = PostgresHarness::citus(url.clone(), layout);
        let mut report = run_suite(&harness as &dyn Harness, &options);
        report.dialect = format!("postgres+citus-{}", layout.name());
        print_report(args, &report);
        reports.push(report);
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

/// One line per check and the summary, unless `--json`.
fn print_report(args: &ConformanceArgs, report: &SuiteReport) {
    if !args.json {
        for line in report.lines() {
            println!("{line}");
        }
        println!("{}", report.summary_line());
    }
}

fn env(args: &ConformanceArgs) -> HarnessEnv {
    HarnessEnv {
        server_url: args.server_url.clone(),
    }
}

/// `all` = every registered dialect; otherwise exactly the named one (an
/// unknown name is an error listing the registered ones, never a fallback).
fn selected_dialects(name: &str) -> Result<Vec<&'static HarnessEntry>, RegistryError> {
    if name == "all" {
        return Ok(DIALECTS.iter().collect());
    }
    find_dialect(DIALECTS, name).map(|entry| vec![entry])
}

/// Fails when nothing was selected (a typo in `--filter` must not pass
/// silently): a prefix of the filter (`--filter E-,C-350` has two) that
/// matches no check of the registry.
pub fn ensure_selected(args: &ConformanceArgs) -> Result<()> {
    if let Some(filter) = &args.filter {
        let registry = sync_conformance::registry();
        let mut prefixes = sync_conformance::filter_prefixes(filter).peekable();
        if prefixes.peek().is_none() {
            bail!("--filter {filter:?} names no prefix");
        }
        for prefix in prefixes {
            if !registry
                .iter()
                .any(|c| sync_conformance::filter_matches(prefix, c.id, c.group))
            {
                bail!("--filter prefix {prefix:?} selects no check");
            }
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
    fn the_registry_has_unique_names_and_schemes_and_refuses_unknown_ones() {
        use super::{selected_dialects, DIALECTS};
        assert_eq!(sync_schema::check_registry(DIALECTS), Ok(()));
        let names: Vec<&str> = DIALECTS.iter().map(|e| e.name()).collect();
        assert_eq!(names, ["sqlite", "postgres", "mariadb", "shadow"]);
        assert!(matches!(
            selected_dialects("mysql"),
            Err(sync_schema::RegistryError::UnknownDialect { .. })
        ));
        assert_eq!(selected_dialects("all").map(|e| e.len()), Ok(4));
    }

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: super::ConformanceArgs,
    }

    fn args(line: &[&str]) -> super::ConformanceArgs {
        use clap::Parser;
        Cli::parse_from(std::iter::once("conformance").chain(line.iter().copied())).args
    }

    #[test]
    fn a_filter_of_several_prefixes_selects_each_and_refuses_a_typo_in_any() {
        use sync_conformance::Harness;
        let sqlite = sync_sqlite::harness::SqliteHarness::DEFAULT;
        let properties = (&sqlite as &dyn Harness).properties();
        let engine = sync_conformance::selected_checks(&properties, Some("E-")).len();
        let both = sync_conformance::selected_checks(&properties, Some("E-, C-350")).len();
        assert!(engine > 100, "{engine} engine checks");
        assert_eq!(both, engine + 1, "C-350 joins the engine checks");
        assert!(super::ensure_selected(&args(&["--filter", "E-,C-350"])).is_ok());
        for typo in ["E-,C-9999", "X-,E-", " , "] {
            assert!(
                super::ensure_selected(&args(&["--filter", typo])).is_err(),
                "{typo:?} must be refused"
            );
        }
    }

    #[test]
    fn citus_lists_the_postgres_checks_per_layout_without_a_coordinator() {
        use sync_conformance::Harness;
        let postgres = sync_postgres::harness::PostgresHarness::with_url(String::new());
        let expected =
            sync_conformance::selected_checks(&(&postgres as &dyn Harness).properties(), None)
                .len();
        assert!(
            expected > 400,
            "the Postgres dialect runs {expected} checks"
        );
        let both = super::citus_listing(&args(&["--dialect", "citus", "--list"]));
        assert_eq!(both.len(), 2 * expected);
        assert!(both[0].contains(" postgres+citus-schemas "), "{}", both[0]);
        assert!(
            both[expected].contains(" postgres+citus-rows "),
            "{}",
            both[expected]
        );
        let rows = super::citus_listing(&args(&[
            "--dialect",
            "citus",
            "--citus-layout",
            "rows",
            "--list",
            "--filter",
            "C-3",
        ]));
        assert!(!rows.is_empty() && rows.len() < expected);
        assert!(rows
            .iter()
            .all(|line| line.starts_with("C-3") && line.contains(" postgres+citus-rows ")));
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
