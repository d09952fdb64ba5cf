//! `cargo xtask test`: every test of the workspace, on both dialects.

use std::process::Command;

use anyhow::{bail, Context, Result};
use clap::Args;

use crate::postgres_server;

/// Options of `cargo xtask test`.
#[derive(Args)]
pub struct TestArgs {
    /// PostgreSQL server for the Postgres tests (default: $SYNCSTORE_PG_URL or the local server).
    #[arg(long)]
    pg_url: Option<String>,
    /// Extra arguments passed to `cargo test` after `--`.
    #[arg(last = true)]
    rest: Vec<String>,
}

/// Checks the Postgres server, then runs `cargo test --workspace --all-features`.
pub fn run(args: &TestArgs) -> Result<()> {
    let url = postgres_server::url(args.pg_url.as_deref());
    let version = postgres_server::require(&url)?;
    println!("xtask: PostgreSQL {version} at {url}");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let status = Command::new(cargo)
        .args(["test", "--workspace", "--all-features", "--no-fail-fast"])
        .arg("--")
        .args(&args.rest)
        .env(postgres_server::PG_URL_ENV, &url)
        .status()
        .context("running cargo test")?;
    if !status.success() {
        bail!("cargo test failed ({status})");
    }
    Ok(())
}
