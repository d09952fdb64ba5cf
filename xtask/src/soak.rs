//! `cargo xtask soak`: the reliability tests of the `tests` package (fault
//! sweeps, process kills, connection faults, model sequences, stress runs,
//! hostile input), run again and again with larger budgets and a new seed
//! each time, until N minutes have passed (the running pass always
//! finishes). `cargo xtask test` runs the same tests once with their
//! default, bounded budgets.
//!
//! The budgets travel as environment variables the tests read:
//! `SYNCSTORE_FAULT_KINDS=all` and `SYNCSTORE_FAULT_ROUNDS` (fault sweeps),
//! `SYNCSTORE_KILL_ROUNDS` / `SYNCSTORE_KILL_SEED` (process kills, every
//! dialect), `SYNCSTORE_MODEL_CASES` / `SYNCSTORE_MODEL_STEPS` /
//! `SYNCSTORE_MODEL_SEED` (model sequences), `SYNCSTORE_STRESS_OPS` /
//! `SYNCSTORE_STRESS_ROUNDS` (stress runs), `SYNCSTORE_FUZZ_EXECS` (hostile
//! input), `SYNCSTORE_KILL_BACKEND_ROUNDS` (every connection of a storage
//! killed under load: Postgres backends terminated, MariaDB connections
//! killed), `SYNCSTORE_RESTART_ROUNDS` (server restarts under load: Postgres
//! on a throwaway local cluster, the test printing why when it cannot run;
//! MariaDB on a throwaway server of its own, a clean shutdown and a crash
//! in turn) and `SYNCSTORE_REALTIME_ROUNDS` (realtime clients with dropped
//! sockets and restarted servers). A variable already set in the
//! environment wins over the soak default.
//!
//! Both test servers are checked before the first pass and passed on:
//! PostgreSQL (`--pg-url`, `SYNCSTORE_PG_URL`) and MariaDB
//! (`--mariadb-url`, `SYNCSTORE_MARIADB_URL`).
//!
//! The fault sweep (`fault-sweep` figures, `SYNCSTORE_FAULT_*` budgets)
//! runs on SQLite, Postgres and MariaDB (`fault_sweep_mariadb`, on the
//! MariaDB server passed on), all under the same prefix and budgets.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;

use crate::{mariadb_server, postgres_server};

/// Options of `cargo xtask soak`.
#[derive(Args)]
pub struct SoakArgs {
    /// Minutes to keep starting new passes (default 10).
    #[arg(long, default_value_t = 10)]
    minutes: u64,
    /// PostgreSQL server (default: $SYNCSTORE_PG_URL or the local server).
    #[arg(long)]
    pg_url: Option<String>,
    /// MariaDB server (default: $SYNCSTORE_MARIADB_URL or the local server).
    #[arg(long)]
    mariadb_url: Option<String>,
}

/// The soak budget of each test family (per pass).
const BUDGETS: &[(&str, &str)] = &[
    ("SYNCSTORE_FAULT_KINDS", "all"),
    ("SYNCSTORE_FAULT_ROUNDS", "1"),
    ("SYNCSTORE_KILL_ROUNDS", "10"),
    ("SYNCSTORE_MODEL_CASES", "200"),
    ("SYNCSTORE_MODEL_STEPS", "80"),
    ("SYNCSTORE_STRESS_OPS", "1000"),
    ("SYNCSTORE_STRESS_ROUNDS", "3"),
    ("SYNCSTORE_FUZZ_EXECS", "200000"),
    ("SYNCSTORE_KILL_BACKEND_ROUNDS", "6"),
    ("SYNCSTORE_RESTART_ROUNDS", "2"),
    ("SYNCSTORE_REALTIME_ROUNDS", "12"),
];

/// Output lines that carry figures.
const FIGURE_PREFIXES: &[&str] = &[
    "fault-sweep",
    "process-kills",
    "model",
    "stress",
    "fuzz",
    "hostile",
    "isolation",
    "killed-backends",
    "killed-connections",
    "server-restart",
    "realtime",
];

/// Runs passes until the time is up; fails on the first failing pass.
pub fn run(args: &SoakArgs) -> Result<()> {
    let url = postgres_server::url(args.pg_url.as_deref());
    let version = postgres_server::require(&url)?;
    let mariadb_url = mariadb_server::url(args.mariadb_url.as_deref());
    mariadb_server::require(&mariadb_url)?;
    println!(
        "xtask soak: PostgreSQL {version} at {url}, MariaDB at {mariadb_url}; {} minute(s)",
        args.minutes
    );
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let deadline = Instant::now() + Duration::from_secs(args.minutes.saturating_mul(60));
    let mut pass: u64 = 0;
    loop {
        pass += 1;
        let started = Instant::now();
        let mut command = Command::new(&cargo);
        command
            .args([
                "test",
                "--package",
                "syncstore-tests",
                "--all-features",
                "--no-fail-fast",
                "--",
                "--nocapture",
                "--test-threads",
                "2",
            ])
            .env(postgres_server::PG_URL_ENV, &url)
            .env(mariadb_server::MARIADB_URL_ENV, &mariadb_url)
            .env("SYNCSTORE_KILL_SEED", (0x5_0A4E + pass).to_string())
            .env("SYNCSTORE_MODEL_SEED", (0x5EED_0007 + pass).to_string())
            .stdout(Stdio::piped());
        for (var, value) in BUDGETS {
            if std::env::var_os(var).is_none() {
                command.env(var, value);
            }
        }
        let mut child = command.spawn().context("running cargo test")?;
        let stdout = child.stdout.take().context("cargo test stdout")?;
        let mut figures = Vec::new();
        for line in BufReader::new(stdout).lines() {
            let line = line.context("reading cargo test output")?;
            if FIGURE_PREFIXES.iter().any(|p| line.starts_with(p)) {
                figures.push(line);
            } else if line.starts_with("test result:") && !line.contains(" 0 failed") {
                println!("{line}");
            }
        }
        let status = child.wait().context("waiting for cargo test")?;
        println!(
            "xtask soak: pass {pass} ({:.0} s)",
            started.elapsed().as_secs_f64()
        );
        for line in &figures {
            println!("  {line}");
        }
        if !status.success() {
            bail!("soak pass {pass} failed ({status}); rerun with the seeds above to reproduce");
        }
        if Instant::now() >= deadline {
            break;
        }
    }
    println!("xtask soak: {pass} pass(es), all passed");
    Ok(())
}
