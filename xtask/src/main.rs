//! `cargo xtask`: the project's automation as a plain Rust binary.
//!
//! - `cargo xtask test` — every test of the workspace, both dialects
//!   (checks that PostgreSQL answers first, and fails loudly when it does not).
//! - `cargo xtask conformance` — the conformance suite per dialect.
//! - `cargo xtask soak [--minutes N]` — the reliability tests, repeatedly,
//!   with larger budgets (`docs/reliability.md`).
//! - `cargo xtask bench` — measured speed of both dialects against a raw
//!   baseline (`docs/benchmarks.md`).
//! - `cargo xtask mutants [--crate NAME] [--shard K/N]` — mutation testing
//!   with cargo-mutants, results in `target/mutants/` (`docs/reliability.md`).

mod bench;
mod conformance;
mod mariadb_server;
mod mutants;
mod postgres_server;
mod soak;
mod test;
mod tidy;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "cargo xtask", about = "syncstore project automation")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run every test of the workspace on both dialects.
    Test(test::TestArgs),
    /// Run the conformance suite (exit 0 pass, 1 failure or skip, 2 setup error).
    Conformance(conformance::ConformanceArgs),
    /// Run the reliability tests again and again with larger budgets.
    Soak(soak::SoakArgs),
    /// Measure both dialects against a raw baseline (see docs/benchmarks.md).
    Bench(bench::BenchArgs),
    /// Mutation testing with cargo-mutants (results in target/mutants/).
    Mutants(mutants::MutantsArgs),
    /// Internal: one backfill measurement in its own process (peak memory).
    #[command(hide = true)]
    BenchChild(bench::child::ChildArgs),
    /// Internal: W12's server in its own process (peak memory).
    #[command(hide = true)]
    BenchServe(bench::w12_serve::ServeArgs),
}

fn main() -> ExitCode {
    let result = match Cli::parse().command {
        Command::Test(args) => test::run(&args).map(|()| 0),
        Command::Soak(args) => soak::run(&args).map(|()| 0),
        Command::Bench(args) => bench::run(&args).map(|()| 0),
        Command::Mutants(args) => mutants::run(&args).map(|()| 0),
        Command::BenchChild(args) => bench::child::run(&args).map(|()| 0),
        Command::BenchServe(args) => bench::w12_serve::run(&args).map(|()| 0),
        Command::Conformance(args) => {
            conformance::ensure_selected(&args).and_then(|()| conformance::run(&args))
        }
    };
    match result {
        Ok(0) => ExitCode::SUCCESS,
        Ok(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::from(2)
        }
    }
}
