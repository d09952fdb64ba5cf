//! `cargo xtask mutants [--crate NAME] [--shard K/N]`: mutation testing with
//! `cargo-mutants` (installed with `cargo install cargo-mutants --locked`
//! when missing). Each mutant of the crate is built and tested against the
//! crate's own tests and the conformance suite (the `conformance` test of
//! the SQLite dialect, and of the Postgres one with `--dialect all`); the
//! results go to `target/mutants/<crate>[-shard-K-of-N]/mutants.out/`
//! (`caught.txt`, `missed.txt`, `unviable.txt`, `timeout.txt`,
//! `outcomes.json`). `--summary` only prints the counts of the results
//! already there. The tests that read the reference fixtures find them
//! through `SYNCSTORE_FIXTURES`, which this command sets to the absolute
//! fixture directory of the real workspace (cargo-mutants' scratch copy of
//! the tree has no `shared/fixtures` beside it). Slow (every mutant is a build and a test run): not part
//! of `cargo xtask test`; figures in `docs/reliability.md`.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};

use crate::postgres_server;

/// The crates mutated when `--crate` is not given.
const DEFAULT_CRATES: &[&str] = &["sync-core", "sync-schema", "sync-backfill"];

/// Which dialects' conformance tests judge the mutants.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum MutantsDialect {
    /// The SQLite conformance test (fast, no server).
    Sqlite,
    /// The SQLite and Postgres conformance tests.
    All,
}

/// Options of `cargo xtask mutants`.
#[derive(Args)]
pub struct MutantsArgs {
    /// Crate to mutate (repeatable; default: sync-core, sync-schema, sync-backfill).
    #[arg(long = "crate", value_name = "NAME")]
    crates: Vec<String>,
    /// Run only shard K of N (`K/N`, K from 0): every N-th mutant from the K-th.
    #[arg(long, value_name = "K/N")]
    shard: Option<String>,
    /// Dialects whose conformance tests run against each mutant.
    #[arg(long, value_enum, default_value = "sqlite")]
    dialect: MutantsDialect,
    /// Longest test run of one mutant, in seconds (then it counts as a
    /// timeout); default: cargo-mutants derives it from the unmutated run,
    /// whose test phase also builds the test binaries.
    #[arg(long)]
    timeout: Option<u64>,
    /// Only mutants whose name matches this regex (`cargo mutants --re`).
    #[arg(long)]
    re: Option<String>,
    /// Judge each mutant by the conformance checks whose ID or group starts
    /// with this prefix only (e.g. `E-` for `sync-engine`, whose code only
    /// the engine checks run; several comma-separated, `E-,C-350`), plus the
    /// crate's own tests and those of `--also-test`; default: every check.
    #[arg(long, value_name = "PREFIX")]
    conformance_filter: Option<String>,
    /// More packages whose tests judge each mutant (repeatable), e.g.
    /// `sync-wire` for `sync-engine`.
    #[arg(long = "also-test", value_name = "PACKAGE")]
    also_test: Vec<String>,
    /// Run only these test targets of the judging packages (repeatable;
    /// their unit tests always run): a mutant of `sync-engine` then links
    /// a dozen test binaries instead of every one of `sync-sqlite`'s.
    #[arg(long = "only-test", value_name = "TARGET")]
    only_tests: Vec<String>,
    /// Print the counts of the results under `target/mutants/`; run nothing.
    #[arg(long)]
    summary: bool,
    /// PostgreSQL server for `--dialect all` (default: $SYNCSTORE_PG_URL or the local server).
    #[arg(long)]
    pg_url: Option<String>,
}

/// Runs `cargo mutants` per crate, then prints the counts.
pub fn run(args: &MutantsArgs) -> Result<()> {
    let root = workspace_root()?;
    let out_root = root.join("target").join("mutants");
    if args.summary {
        return print_summary(&out_root);
    }
    let shard = args.shard.as_deref().map(parse_shard).transpose()?;
    let crates: Vec<String> = if args.crates.is_empty() {
        DEFAULT_CRATES.iter().map(|c| (*c).to_owned()).collect()
    } else {
        args.crates.clone()
    };
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    ensure_installed(&cargo)?;
    let url = postgres_server::url(args.pg_url.as_deref());
    if args.dialect == MutantsDialect::All {
        postgres_server::require(&url)?;
    }
    let fixtures = fixtures_dir(&root)?;
    for name in &crates {
        let out = out_root.join(output_name(name, shard));
        std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
        let mut command = Command::new(&cargo);
        command
            .current_dir(&root)
            .args(mutants_args(name, shard, args, &out))
            .env(postgres_server::PG_URL_ENV, &url)
            .env(FIXTURES_ENV, &fixtures);
        match &args.conformance_filter {
            Some(prefix) => command.env(sync_conformance::FILTER_ENV, prefix),
            None => command.env_remove(sync_conformance::FILTER_ENV),
        };
        println!("xtask mutants: {name} -> {}", out.display());
        // cargo-mutants exits non-zero when mutants are missed or time out:
        // that is a finding, reported by the counts, not a failure to run.
        let status = command.status().context("running cargo mutants")?;
        let counts = Counts::read(&out.join("mutants.out"))
            .with_context(|| format!("cargo mutants for {name} ended {status} without results"))?;
        println!("xtask mutants: {name}: {counts}");
    }
    Ok(())
}

/// Environment variable through which the tests find the reference
/// fixtures (read first by every test that loads them).
const FIXTURES_ENV: &str = "SYNCSTORE_FIXTURES";
/// The reference fixture set directory, relative to the workspace root:
/// the tests' own fallback, resolved here from the real tree.
const DEFAULT_FIXTURES: &str = "../shared/fixtures/reference-0.15";

/// The absolute reference fixture directory handed to the mutants' tests:
/// `$SYNCSTORE_FIXTURES` when set (made absolute, since the tests run in the
/// scratch copy), else the tests' default location resolved from the real
/// workspace. A directory without `A.manifest.json` is an error here, before
/// any baseline is built.
fn fixtures_dir(root: &Path) -> Result<PathBuf> {
    let given = match std::env::var_os(FIXTURES_ENV) {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => root.join(DEFAULT_FIXTURES),
    };
    let dir = given.canonicalize().with_context(|| {
        format!(
            "reference fixtures not found at {} (set {FIXTURES_ENV})",
            given.display()
        )
    })?;
    // Like the tests, accept the set directory's parent too.
    let nested = dir.join("reference-0.15");
    let dir = if nested.is_dir() { nested } else { dir };
    if !dir.join("A.manifest.json").is_file() {
        bail!(
            "{} holds no A.manifest.json; point {FIXTURES_ENV} at the reference-0.15 directory",
            dir.display()
        );
    }
    Ok(dir)
}

/// The `cargo mutants` arguments for one crate.
fn mutants_args(
    name: &str,
    shard: Option<(u32, u32)>,
    args: &MutantsArgs,
    out: &Path,
) -> Vec<String> {
    let mut list: Vec<String> = [
        "mutants",
        "--package",
        name,
        "--test-package",
        name,
        "--test-package",
        "sync-sqlite",
        // cargo test runs the mutated package only unless told otherwise.
        "--cargo-test-arg=--package=sync-sqlite",
        "--all-features",
        "--copy-target=true",
        "--jobs",
        "1",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    if let Some(timeout) = args.timeout {
        list.extend(["--timeout".to_owned(), timeout.to_string()]);
    }
    if args.dialect == MutantsDialect::All {
        list.extend([
            "--test-package".to_owned(),
            "sync-postgres".to_owned(),
            "--cargo-test-arg=--package=sync-postgres".to_owned(),
        ]);
    }
    for package in &args.also_test {
        list.extend([
            "--test-package".to_owned(),
            package.clone(),
            format!("--cargo-test-arg=--package={package}"),
        ]);
    }
    if !args.only_tests.is_empty() {
        list.push("--cargo-test-arg=--lib".to_owned());
        list.extend(
            args.only_tests
                .iter()
                .map(|t| format!("--cargo-test-arg=--test={t}")),
        );
    }
    if let Some((k, n)) = shard {
        // Round-robin: every shard is an even sample of the crate, so a
        // partial run still gives representative figures.
        list.extend([
            "--shard".to_owned(),
            format!("{k}/{n}"),
            "--sharding".to_owned(),
            "round-robin".to_owned(),
        ]);
    }
    if let Some(re) = &args.re {
        list.extend(["--re".to_owned(), re.clone()]);
    }
    list.extend(["--output".to_owned(), out.display().to_string()]);
    list
}

/// `target/mutants/` subdirectory of one run.
fn output_name(name: &str, shard: Option<(u32, u32)>) -> String {
    match shard {
        Some((k, n)) => format!("{name}-shard-{k}-of-{n}"),
        None => name.to_owned(),
    }
}

/// Parses `K/N` with `K < N`.
fn parse_shard(text: &str) -> Result<(u32, u32)> {
    let parsed = text
        .split_once('/')
        .and_then(|(k, n)| Some((k.trim().parse().ok()?, n.trim().parse().ok()?)));
    match parsed {
        Some((k, n)) if n > 0 && k < n => Ok((k, n)),
        _ => bail!("--shard {text:?}: expected K/N with 0 <= K < N"),
    }
}

/// Installs cargo-mutants when `cargo mutants --version` does not answer.
fn ensure_installed(cargo: &str) -> Result<()> {
    let present = Command::new(cargo)
        .args(["mutants", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if present {
        return Ok(());
    }
    println!("xtask mutants: installing cargo-mutants");
    let status = Command::new(cargo)
        .args(["install", "cargo-mutants", "--locked"])
        .status()
        .context("running cargo install cargo-mutants")?;
    if !status.success() {
        bail!("cargo install cargo-mutants --locked failed ({status})");
    }
    Ok(())
}

/// The workspace root (the parent of the xtask package).
fn workspace_root() -> Result<PathBuf> {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .context("the xtask package has no parent directory")
}

/// Outcome counts of one `mutants.out` directory.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Counts {
    caught: usize,
    missed: usize,
    unviable: usize,
    timeout: usize,
}

impl Counts {
    /// Counts the lines of `caught.txt`, `missed.txt`, `unviable.txt` and
    /// `timeout.txt` (one mutant per line).
    fn read(dir: &Path) -> Result<Self> {
        let lines = |file: &str| -> Result<usize> {
            let path = dir.join(file);
            if !path.exists() {
                return Ok(0);
            }
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("reading {}", path.display()))?;
            Ok(text.lines().filter(|l| !l.trim().is_empty()).count())
        };
        if !dir.is_dir() {
            bail!("{} does not exist", dir.display());
        }
        Ok(Self {
            caught: lines("caught.txt")?,
            missed: lines("missed.txt")?,
            unviable: lines("unviable.txt")?,
            timeout: lines("timeout.txt")?,
        })
    }
}

impl std::fmt::Display for Counts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} caught, {} missed, {} unviable, {} timeout",
            self.caught, self.missed, self.unviable, self.timeout
        )
    }
}

/// One line per run directory under `target/mutants/`.
fn print_summary(out_root: &Path) -> Result<()> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(out_root)
        .with_context(|| format!("reading {}", out_root.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.join("mutants.out").is_dir())
        .collect();
    dirs.sort();
    for dir in dirs {
        let name = dir
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        println!("{name}: {}", Counts::read(&dir.join("mutants.out"))?);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_are_k_of_n_from_zero() {
        assert_eq!(parse_shard("0/4").ok(), Some((0, 4)));
        assert_eq!(parse_shard("3/4").ok(), Some((3, 4)));
        assert!(parse_shard("4/4").is_err());
        assert!(parse_shard("1/0").is_err());
        assert!(parse_shard("x").is_err());
        assert_eq!(
            output_name("sync-core", Some((1, 3))),
            "sync-core-shard-1-of-3"
        );
        assert_eq!(output_name("sync-core", None), "sync-core");
    }

    #[test]
    fn the_fixture_directory_is_absolute_and_holds_a_manifest() {
        let root = workspace_root().ok();
        let dir = root.as_deref().map(fixtures_dir);
        let Some(Ok(dir)) = dir else {
            panic!("no reference fixture directory: {dir:?}")
        };
        assert!(dir.is_absolute(), "{}", dir.display());
        assert!(dir.join("A.manifest.json").is_file(), "{}", dir.display());
    }

    #[test]
    fn counts_are_lines_of_the_outcome_files() {
        let dir = tempfile::tempdir().ok();
        let Some(dir) = dir else {
            panic!("no temporary directory")
        };
        std::fs::write(dir.path().join("caught.txt"), "a\nb\n\nc\n").ok();
        std::fs::write(dir.path().join("missed.txt"), "d\n").ok();
        let counts = Counts::read(dir.path()).ok();
        assert_eq!(
            counts,
            Some(Counts {
                caught: 3,
                missed: 1,
                unviable: 0,
                timeout: 0
            })
        );
    }
}
