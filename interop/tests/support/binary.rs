//! The `syncstore` binary under test: `$SYNCSTORE_BIN`, or built once per
//! test process from the main workspace beside this one. A failed build
//! fails the scenario; nothing is skipped.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

/// The path of the `syncstore` executable.
pub fn syncstore_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| match std::env::var_os("SYNCSTORE_BIN") {
        Some(path) => {
            let path = PathBuf::from(path);
            assert!(
                path.is_file(),
                "SYNCSTORE_BIN names {}, which is not a file",
                path.display()
            );
            path
        }
        None => build(),
    })
}

/// `cargo build -p syncstore` in the main workspace (the nearest directory
/// above this test crate that holds `crates/syncstore`); the executable's
/// path is read from cargo's own artifact messages.
fn build() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .find(|dir| dir.join("crates/syncstore/Cargo.toml").is_file())
        .map(|dir| dir.join("Cargo.toml"))
        .expect("the main workspace above the interop tests");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .args([
            "build",
            "-p",
            "syncstore",
            "--message-format=json-render-diagnostics",
        ])
        .arg("--manifest-path")
        .arg(&manifest)
        // The main workspace builds into its own target directory, not
        // this workspace's.
        .env_remove("CARGO_TARGET_DIR")
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("cannot run cargo to build syncstore: {e}"));
    assert!(
        output.status.success(),
        "building syncstore failed (SYNCSTORE_BIN is unset, so the scenarios build it)"
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == "syncstore")
        .find_map(|m| m["executable"].as_str().map(PathBuf::from))
        .expect("cargo reported no syncstore executable")
}

/// Runs `syncstore --db URL args…` to completion.
pub fn run(db_url: &str, args: &[&str]) -> Output {
    Command::new(syncstore_bin())
        .arg("--db")
        .arg(db_url)
        .args(args)
        .env_remove("SYNCSTORE_DATABASE_URL")
        .env_remove("SYNCSTORE_LOG")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", syncstore_bin().display()))
}

/// Runs `syncstore --db URL --json args…` and returns its JSON document,
/// failing the test on a non-zero exit.
pub fn run_json(db_url: &str, args: &[&str]) -> serde_json::Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let output = run(db_url, &all);
    assert!(
        output.status.success(),
        "syncstore {args:?} failed ({}):\nstdout:\n{}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "syncstore {args:?} printed no JSON document ({e}):\n{}",
            String::from_utf8_lossy(&output.stdout)
        )
    })
}
