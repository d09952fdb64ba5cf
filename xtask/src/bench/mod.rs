//! `cargo xtask bench`: each hot path of both dialects measured side by
//! side with a raw baseline — the same SQL effect issued by a minimal
//! hand-written client in the same run — interleaved ours/raw per round,
//! reported as medians and ratios (issue 7, `docs/benchmarks.md`).
//!
//! The `cargo xtask` alias builds the xtask in the dev profile, where the
//! workspace crates are unoptimized; `bench` therefore re-executes itself
//! through `cargo run --release` unless it already runs optimized (set
//! `SYNCSTORE_BENCH_AS_IS=1` to measure whatever profile is running).

pub mod child;
mod concurrency;
mod db;
mod engine;
mod fixture;
mod machine;
mod mariadb_server;
mod mariadb_statements;
mod proxy;
mod pushes;
mod raw;
mod raw_mariadb;
mod raw_postgres;
mod raw_sqlite;
mod report;
mod round_trips;
mod w10_concurrent;
mod w11_http_push;
mod w12_http_bootstrap;
pub mod w12_serve;
mod w13_realtime;
mod w15_sparse;
mod w16_cost;
mod w16_grouped;
mod w1_push;
mod w2_push10;
mod w3_growth;
mod w3_scan;
mod w4_pull;
mod w5_backfill;
mod w6_fence_gate;
mod w7_growth;
mod w8_engine_push;
mod w9_engine_pull;

#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};

use crate::postgres_server;
use db::{Dialect, Env};
use report::Measure;

/// Environment variable that stops the release re-execution.
const AS_IS_ENV: &str = "SYNCSTORE_BENCH_AS_IS";

/// Which dialects run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DialectChoice {
    /// Embedded SQLite.
    Sqlite,
    /// PostgreSQL at `--pg-url`.
    Postgres,
    /// MariaDB at `--mariadb-url`: W1, W2, W3, W4 and W10 only.
    Mariadb,
    /// SQLite and Postgres (MariaDB only when named: it needs a third
    /// server and measures fewer workloads).
    All,
}

/// Options of `cargo xtask bench`.
#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Which dialects run.
    #[arg(long, value_enum, default_value = "all")]
    dialect: DialectChoice,
    /// Smoke run: every workload at reduced counts (under two minutes).
    #[arg(long)]
    quick: bool,
    /// Write the results as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// PostgreSQL server (default: $SYNCSTORE_PG_URL or the local server).
    #[arg(long)]
    pg_url: Option<String>,
    /// MariaDB server of `--dialect mariadb`, a database per measurement
    /// created on it (default: $SYNCSTORE_MARIADB_URL or the local server).
    #[arg(long)]
    mariadb_url: Option<String>,
    /// Rounds per workload (default 3, quick 2).
    #[arg(long)]
    rounds: Option<usize>,
    /// Only these workloads (comma-separated: W1,W2,W3,W4,W5,W6,W7,W3G,W8,W9,W10,W11,W12,W13,W15,W16,W1P,NORMAL,CONC,RT;
    /// W1P is W1 through the push prelude against W1 through the single calls;
    /// W3G is the W3 growth of scan pages with the table size; W16 the cost of one push).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Directory for the SQLite files (default: the system temporary directory).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Postgres at a distance: every connection (ours and raw) goes through
    /// a loopback proxy that delays each direction by this many ms.
    #[arg(long)]
    latency_ms: Option<u64>,
    /// On a Citus coordinator (`--pg-url`): lay out every fresh schema as a
    /// distributed schema (`schemas`) or distributed by partition (`rows`,
    /// with `--citus-shards` shards); ours and the raw client share it.
    #[arg(long, value_enum)]
    citus_layout: Option<BenchCitusLayout>,
    /// Shards of the `rows` layout.
    #[arg(long, default_value_t = 4)]
    citus_shards: u32,
    /// Create every SQLite file with pages of this many bytes (a power of
    /// two from 512 to 65 536) before either client opens it, as
    /// `SqliteConfig::page_size` does (default: SQLite's own, 4 096).
    #[arg(long, value_name = "BYTES")]
    sqlite_page_size: Option<u32>,
}

/// `--citus-layout`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BenchCitusLayout {
    /// Schema-based sharding.
    Schemas,
    /// Row-based distribution by partition.
    Rows,
}

/// Counts and rounds of one run.
#[derive(Debug, Clone)]
pub struct Scale {
    pub quick: bool,
    pub rounds: usize,
    pub w1_commits: usize,
    pub w1_normal_commits: usize,
    pub normal_rounds: usize,
    pub w2_commits: usize,
    /// W1 and W2 commits of the W3/W4 fixture (the pinned 20 000 + 5 000).
    pub fixture_w1: usize,
    pub fixture_w2: usize,
    pub page: i64,
    pub w5_rows: usize,
    pub w5_big_rows: Option<usize>,
    pub w5_batch: i64,
    pub w6_commits: usize,
    pub w7_small: u64,
    pub w7_large: u64,
    /// Table sizes of the W3 growth scans.
    pub w3g_small: u64,
    pub w3g_large: u64,
    pub w7_rows: usize,
    pub w7_push: usize,
    pub w7_pull: i64,
    pub conc_commits: usize,
    pub conc_rounds: usize,
    pub rt_pushes: usize,
    /// W10: commits of one run, split over its threads.
    pub w10_commits: usize,
    pub w10_rounds: usize,
    /// Reads (W3, W4, W7 pulls) repeat until at least this long has passed,
    /// so one sample is never a fraction of a second of a noisy machine.
    pub min_read: Duration,
}

impl Scale {
    /// The pinned sizes of issue 7.
    pub fn full(rounds: usize) -> Self {
        Self {
            quick: false,
            rounds,
            w1_commits: 20_000,
            w1_normal_commits: 20_000,
            normal_rounds: rounds,
            w2_commits: 5_000,
            fixture_w1: 20_000,
            fixture_w2: 5_000,
            page: 500,
            w5_rows: 200_000,
            w5_big_rows: Some(1_000_000),
            w5_batch: 500,
            w6_commits: 20_000,
            w7_small: 10_000,
            w7_large: 1_000_000,
            w3g_small: 70_000,
            w3g_large: 1_000_000,
            w7_rows: 10_000,
            w7_push: 2_000,
            w7_pull: 10_000,
            conc_commits: 20_000,
            conc_rounds: rounds,
            rt_pushes: 200,
            w10_commits: 4_000,
            w10_rounds: rounds.min(2),
            min_read: Duration::from_secs(2),
        }
    }

    /// The smoke run: a tenth or less of every count.
    pub fn quick(rounds: usize) -> Self {
        Self {
            quick: true,
            rounds,
            w1_commits: 1_000,
            w1_normal_commits: 1_000,
            normal_rounds: rounds,
            w2_commits: 250,
            fixture_w1: 1_000,
            fixture_w2: 250,
            page: 500,
            w5_rows: 10_000,
            w5_big_rows: None,
            w5_batch: 500,
            w6_commits: 300,
            w7_small: 2_000,
            w7_large: 50_000,
            w3g_small: 7_000,
            w3g_large: 100_000,
            w7_rows: 1_000,
            w7_push: 200,
            w7_pull: 2_000,
            conc_commits: 400,
            conc_rounds: 1,
            rt_pushes: 50,
            w10_commits: 256,
            w10_rounds: 1,
            min_read: Duration::from_millis(200),
        }
    }

    /// Rows of the W3/W4 fixture (W1 + W2).
    pub fn fixture_rows(&self) -> u64 {
        (self.fixture_w1 + self.fixture_w2 * w2_push10::ROWS_PER_COMMIT) as u64
    }

    /// The counts used on Postgres and MariaDB. A full run pushes a
    /// quarter of the pinned commits per push measurement and runs at most
    /// two rounds: a commit waits for its log flush (WAL, InnoDB redo log)
    /// and costs milliseconds on the shared machine, and rates do not
    /// depend on the count. The W3/W4 fixture keeps the pinned 70 000 rows
    /// (built without timing).
    pub fn for_dialect(&self, dialect: Dialect) -> Self {
        if self.quick || dialect == Dialect::Sqlite {
            return self.clone();
        }
        Self {
            rounds: self.rounds.min(2),
            w1_commits: self.w1_commits / 4,
            w2_commits: self.w2_commits / 4,
            w6_commits: self.w6_commits / 4,
            conc_commits: self.conc_commits / 4,
            conc_rounds: self.conc_rounds.min(2),
            w10_commits: self.w10_commits / 4,
            ..self.clone()
        }
    }
}

/// Runs `read` (at least once) until `min` has passed; returns what the
/// first run returned, the number of runs and the total time.
pub fn repeat_for<T>(
    min: Duration,
    mut read: impl FnMut() -> Result<T>,
) -> Result<(T, u32, Duration)> {
    let start = Instant::now();
    let first = read()?;
    let mut runs = 1u32;
    while start.elapsed() < min {
        read()?;
        runs += 1;
    }
    Ok((first, runs, start.elapsed()))
}

/// One progress line on stderr.
pub fn progress(dialect: Dialect, what: &str, detail: &str) {
    eprintln!("bench [{}] {what}: {detail}", dialect.name());
}

/// Which workloads a run includes.
#[derive(Debug, Clone)]
struct Selection(Vec<String>);

impl Selection {
    fn has(&self, name: &str) -> bool {
        self.0.is_empty() || self.0.iter().any(|n| n.eq_ignore_ascii_case(name))
    }

    /// The selection a dialect can run: on MariaDB only [`MARIADB_WORKLOADS`]
    /// (no `--only`: those; `--only` naming another workload: refused,
    /// before anything runs).
    fn for_dialect(&self, dialect: Dialect) -> Result<Self> {
        if dialect != Dialect::Mariadb {
            return Ok(self.clone());
        }
        if self.0.is_empty() {
            eprintln!(
                "bench [mariadb]: measures {} (the other workloads are not built on MariaDB)",
                MARIADB_WORKLOADS.join(", ")
            );
            return Ok(Self(MARIADB_WORKLOADS.map(str::to_owned).to_vec()));
        }
        let unsupported: Vec<&str> = self
            .0
            .iter()
            .filter(|n| !MARIADB_WORKLOADS.iter().any(|w| w.eq_ignore_ascii_case(n)))
            .map(String::as_str)
            .collect();
        if !unsupported.is_empty() {
            bail!(
                "--dialect mariadb measures only {}; not built on MariaDB: {}",
                MARIADB_WORKLOADS.join(", "),
                unsupported.join(", ")
            );
        }
        Ok(self.clone())
    }
}

/// The workloads built on MariaDB.
const MARIADB_WORKLOADS: [&str; 5] = ["W1", "W2", "W3", "W4", "W10"];

/// Re-runs this command from a release build (see the module docs).
fn reexec_release() -> Result<()> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    eprintln!("bench: re-running in the release profile (cargo run --release -p xtask)");
    let status = Command::new(cargo)
        .args(["run", "--release", "--quiet", "--package", "xtask", "--"])
        .args(std::env::args_os().skip(1))
        .env(AS_IS_ENV, "1")
        .status()
        .context("running cargo run --release")?;
    if !status.success() {
        bail!("the release benchmark failed ({status})");
    }
    Ok(())
}

/// Every workload of one dialect.
fn run_dialect(env: &Env, scale: &Scale, only: &Selection) -> Result<Vec<Measure>> {
    let mut out = Vec::new();
    let started = Instant::now();
    if ["W1", "W2", "W3", "W4"].iter().any(|w| only.has(w)) {
        let (pushes, fixture) = w1_push::run(env, scale)?;
        out.extend(pushes);
        if env.dialect == Dialect::Mariadb && only.has("W1") {
            out.extend(mariadb_statements::run(env, scale)?);
        }
        let fixture =
            if (scale.w1_commits, scale.w2_commits) == (scale.fixture_w1, scale.fixture_w2) {
                fixture
            } else {
                drop(fixture);
                w1_push::build_fixture(env, scale)?
            };
        if only.has("W3") {
            out.extend(w3_scan::run(&fixture, scale, false)?);
        }
        if only.has("W4") {
            out.extend(w4_pull::run(&fixture, scale)?);
        }
        if only.has("W9") {
            out.extend(w9_engine_pull::run(&fixture, scale)?);
        }
        if only.has("W12") {
            out.extend(w12_http_bootstrap::run(&fixture, scale)?);
        }
        if only.has("W3") {
            out.extend(w3_scan::run(&fixture, scale, true)?);
        }
    } else if only.has("W9") || only.has("W12") {
        let fixture = w1_push::build_fixture(env, scale)?;
        if only.has("W9") {
            out.extend(w9_engine_pull::run(&fixture, scale)?);
        }
        if only.has("W12") {
            out.extend(w12_http_bootstrap::run(&fixture, scale)?);
        }
    }
    if only.has("W1P") {
        out.extend(w1_push::run_prelude(env, scale)?);
    }
    if only.has("W8") {
        out.extend(w8_engine_push::run(env, scale)?);
    }
    if env.dialect == Dialect::Sqlite && only.has("NORMAL") {
        out.extend(w1_push::run_normal(env, scale)?);
    }
    if env.dialect == Dialect::Postgres && only.has("RT") {
        out.extend(round_trips::run(env, scale)?);
    }
    if env.dialect == Dialect::Postgres && only.has("CONC") {
        out.extend(concurrency::run(env, scale)?);
    }
    if only.has("W11") {
        out.extend(w11_http_push::run(env, scale)?);
    }
    if only.has("W13") {
        out.extend(w13_realtime::run(env, scale)?);
    }
    if only.has("W10") {
        out.extend(w10_concurrent::run(env, scale)?);
    }
    if only.has("W5") {
        out.extend(w5_backfill::run(env, scale)?);
    }
    if only.has("W6") {
        out.extend(w6_fence_gate::run(env, scale)?);
    }
    if only.has("W7") {
        out.extend(w7_growth::run(env, scale)?);
    }
    if only.has("W3G") {
        out.extend(w3_growth::run(env, scale)?);
    }
    if only.has("W15") {
        out.extend(w15_sparse::run(env, scale)?);
    }
    if only.has("W16") {
        out.extend(w16_cost::run(env, scale)?);
    }
    progress(
        env.dialect,
        "done",
        &format!("{:.0} s", started.elapsed().as_secs_f64()),
    );
    Ok(out)
}

/// `cargo xtask bench`.
pub fn run(args: &BenchArgs) -> Result<()> {
    if cfg!(debug_assertions) && std::env::var_os(AS_IS_ENV).is_none() {
        return reexec_release();
    }
    let profile = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    let rounds = args.rounds.unwrap_or(if args.quick { 2 } else { 3 }).max(1);
    let scale = if args.quick {
        Scale::quick(rounds)
    } else {
        Scale::full(rounds)
    };
    let only = Selection(args.only.clone());
    let dialects: Vec<Dialect> = match args.dialect {
        DialectChoice::Sqlite => vec![Dialect::Sqlite],
        DialectChoice::Postgres => vec![Dialect::Postgres],
        DialectChoice::Mariadb => vec![Dialect::Mariadb],
        DialectChoice::All => vec![Dialect::Sqlite, Dialect::Postgres],
    };
    let selections = dialects
        .iter()
        .map(|&d| only.for_dialect(d))
        .collect::<Result<Vec<_>>>()?;
    let mariadb_url = mariadb_server::url(args.mariadb_url.as_deref());
    let mariadb = if dialects.contains(&Dialect::Mariadb) {
        let version = mariadb_server::require(&mariadb_url)?;
        eprintln!("bench: MariaDB {version} at {mariadb_url}");
        Some(machine::mariadb(&mariadb_url))
    } else {
        None
    };
    let server_url = postgres_server::url(args.pg_url.as_deref());
    let pg = if dialects.contains(&Dialect::Postgres) {
        let version = postgres_server::require(&server_url)?;
        eprintln!("bench: PostgreSQL {version} at {server_url}");
        Some(machine::postgres(&server_url))
    } else {
        None
    };
    // Kept alive for the whole run.
    let distance = match args.latency_ms {
        Some(ms) => {
            let delay = Duration::from_millis(ms);
            let proxy = proxy::Proxy::start_delayed(proxy::upstream(&server_url)?, delay)?;
            eprintln!("bench: Postgres at a distance: {ms} ms added each way (delay proxy)");
            Some(proxy)
        }
        None => None,
    };
    let pg_url = match &distance {
        Some(proxy) => proxy.url(&server_url)?,
        None => server_url.clone(),
    };
    if scale.quick {
        eprintln!(
            "bench: --quick: counts scaled down (W1 {} commits, W2 {}, W5 {} rows, W7 logs {} / {}), {} rounds — a smoke run, not the pinned sizes",
            scale.w1_commits, scale.w2_commits, scale.w5_rows, scale.w7_small, scale.w7_large, scale.rounds
        );
    }
    let mut machine = machine::describe(profile, scale.quick, scale.rounds, pg);
    if let (Some(mariadb), Some(object)) = (mariadb, machine.as_object_mut()) {
        object.insert("mariadb".into(), mariadb);
    }
    if let (Some(ms), Some(object)) = (args.latency_ms, machine.as_object_mut()) {
        object.insert("postgres_added_latency_ms_each_way".into(), ms.into());
    }
    if let Some(size) = args.sqlite_page_size {
        if !sync_sqlite::valid_page_size(size) {
            anyhow::bail!("--sqlite-page-size {size}: not a power of two from 512 to 65536");
        }
        if let Some(object) = machine.as_object_mut() {
            object.insert("sqlite_page_size".into(), size.into());
        }
    }
    if let (Some(layout), Some(object)) = (args.citus_layout, machine.as_object_mut()) {
        let layout = match layout {
            BenchCitusLayout::Schemas => "schemas".to_owned(),
            BenchCitusLayout::Rows => format!("rows ({} shards)", args.citus_shards),
        };
        object.insert("citus_layout".into(), layout.into());
    }
    let started = Instant::now();
    let mut results = Vec::new();
    for (dialect, only) in dialects.into_iter().zip(&selections) {
        let env = match dialect {
            Dialect::Sqlite => {
                Env::sqlite(args.dir.as_deref())?.with_page_size(args.sqlite_page_size)
            }
            Dialect::Postgres => Env::postgres(
                &pg_url,
                args.citus_layout.map(|layout| match layout {
                    BenchCitusLayout::Schemas => db::CitusLayout::Schemas,
                    BenchCitusLayout::Rows => db::CitusLayout::Rows {
                        shard_count: args.citus_shards,
                    },
                }),
            ),
            Dialect::Mariadb => Env::mariadb(&mariadb_url),
        };
        results.extend(run_dialect(&env, &scale.for_dialect(dialect), only)?);
    }
    if let Some(object) = machine.as_object_mut() {
        object.insert("load_average_at_end".into(), machine::load_average().into());
        object.insert(
            "duration_s".into(),
            started.elapsed().as_secs_f64().round().into(),
        );
    }
    println!();
    if scale.quick {
        println!("QUICK RUN (--quick): reduced counts, not comparable to the pinned sizes.");
    }
    print!("{}", report::table(&results));
    println!(
        "\nratio = speed of ours relative to raw (1.00 = as fast; ours/raw for rates, raw/ours for times), \
         median of per-round ratios over {} interleaved rounds.",
        scale.rounds
    );
    println!(
        "SQLite: file database, WAL, synchronous=FULL (the default; W1 also NORMAL). Postgres, MariaDB: see the machine section of the JSON. \
         The machine is shared: ratios are the robust figures."
    );
    if let Some(path) = &args.json {
        report::write_json(path, machine, &results)?;
        println!("JSON: {}", path.display());
    }
    if std::env::var_os("SYNCSTORE_BENCH_MARKDOWN").is_some() {
        println!("\n{}", report::markdown(&results));
    }
    Ok(())
}
