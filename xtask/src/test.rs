//! `cargo xtask test`: every test of the workspace, on every dialect (the
//! conformance suite of each included), then the engine's examples.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};
use clap::Args;

use crate::{mariadb_server, postgres_server};

/// Options of `cargo xtask test`.
#[derive(Args)]
pub struct TestArgs {
    /// PostgreSQL server for the Postgres tests (default: $SYNCSTORE_PG_URL or the local server).
    #[arg(long)]
    pg_url: Option<String>,
    /// MariaDB server for the MariaDB tests (default: $SYNCSTORE_MARIADB_URL or the local server).
    #[arg(long)]
    mariadb_url: Option<String>,
    /// Extra arguments passed to `cargo test` after `--`.
    #[arg(last = true)]
    rest: Vec<String>,
}

/// Totals over every `test result:` line of a run.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Totals {
    passed: u64,
    failed: u64,
    ignored: u64,
}

impl Totals {
    /// Adds the counts of one libtest summary line
    /// (`test result: ok. 5 passed; 0 failed; 1 ignored; …`).
    fn add_line(&mut self, line: &str) {
        let Some(rest) = line.trim().strip_prefix("test result:") else {
            return;
        };
        for part in rest.split(';') {
            let mut words = part.split_whitespace().rev();
            let (Some(label), Some(count)) = (words.next(), words.next()) else {
                continue;
            };
            let Ok(count) = count.parse::<u64>() else {
                continue;
            };
            match label {
                "passed" => self.passed += count,
                "failed" => self.failed += count,
                "ignored" => self.ignored += count,
                _ => {}
            }
        }
    }
}

/// Checks the Postgres and MariaDB servers, then runs `cargo test
/// --workspace --all-features` (every dialect's `conformance` and
/// `fault-injection` features on), passing its output through and closing
/// with one total line.
pub fn run(args: &TestArgs) -> Result<()> {
    let url = postgres_server::url(args.pg_url.as_deref());
    let version = postgres_server::require(&url)?;
    println!("xtask: PostgreSQL {version} at {url}");
    let mariadb_url = mariadb_server::url(args.mariadb_url.as_deref());
    mariadb_server::require(&mariadb_url)?;
    println!("xtask: MariaDB at {mariadb_url}");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut child = Command::new(cargo)
        .args(["test", "--workspace", "--all-features", "--no-fail-fast"])
        .arg("--")
        .args(&args.rest)
        .env(postgres_server::PG_URL_ENV, &url)
        .env(mariadb_server::MARIADB_URL_ENV, &mariadb_url)
        // Every check runs: a narrowing meant for mutation runs must not
        // leak into the whole suite.
        .env_remove(sync_conformance::FILTER_ENV)
        .stdout(Stdio::piped())
        .spawn()
        .context("running cargo test")?;
    let mut totals = Totals::default();
    if let Some(stdout) = child.stdout.take() {
        let mut out = std::io::stdout().lock();
        for line in BufReader::new(stdout).lines() {
            let line = line.context("reading cargo test output")?;
            totals.add_line(&line);
            writeln!(out, "{line}")?;
        }
    }
    let status = child.wait().context("waiting for cargo test")?;
    println!(
        "total: {} passed, {} failed, {} skipped",
        totals.passed, totals.failed, totals.ignored
    );
    if !status.success() {
        bail!("cargo test failed ({status})");
    }
    if totals.passed == 0 {
        bail!("cargo test ran no test");
    }
    run_examples(&url, &mariadb_url)
}

/// The engine's examples, each run to completion: a failing story step
/// exits non-zero and fails the run. The Postgres and MariaDB ones get the
/// checked servers' URLs, as the tests of the run do.
const EXAMPLES: [&str; 3] = ["todos_sqlite", "todos_postgres", "todos_mariadb"];

/// Runs the example binaries that `cargo test` has just built (it builds
/// every example to check that it compiles). Running them through
/// `cargo run` instead would build the whole workspace a second time under
/// another profile and feature set: slower, and on a small CI disk the
/// second build is what runs out of space.
fn run_examples(url: &str, mariadb_url: &str) -> Result<()> {
    let dir = examples_dir()?;
    for example in EXAMPLES {
        println!("xtask: example {example}");
        let binary = dir.join(format!("{example}{}", std::env::consts::EXE_SUFFIX));
        if !binary.is_file() {
            bail!(
                "example {example} was not built by cargo test (looked for {})",
                binary.display()
            );
        }
        let status = Command::new(&binary)
            .env(postgres_server::PG_URL_ENV, url)
            .env(mariadb_server::MARIADB_URL_ENV, mariadb_url)
            .status()
            .with_context(|| format!("running example {example}"))?;
        if !status.success() {
            bail!("example {example} failed ({status})");
        }
    }
    println!("examples: {} ran", EXAMPLES.len());
    Ok(())
}

/// Where `cargo test` puts the example binaries: `debug/examples` under the
/// target directory (`CARGO_TARGET_DIR`, else `target` in the workspace).
fn examples_dir() -> Result<PathBuf> {
    let target = match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .context("the xtask package has no parent directory")?
            .join("target"),
    };
    Ok(target.join("debug").join("examples"))
}

#[cfg(test)]
mod tests {
    use super::Totals;

    #[test]
    fn summary_lines_are_totalled() {
        let mut totals = Totals::default();
        totals.add_line("test result: ok. 5 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.96s");
        totals.add_line(
            "test result: FAILED. 2 passed; 3 failed; 0 ignored; 0 measured; 0 filtered out",
        );
        totals.add_line("running 7 tests");
        assert_eq!(
            totals,
            Totals {
                passed: 7,
                failed: 3,
                ignored: 1
            }
        );
    }
}
