//! Databases written by the reference implementation (specification
//! `README.md` §6): the expected content of a fixture set, loaded from its
//! `<set>.manifest.json`, and dialect-agnostic checks that a storage reads
//! that content back exactly and bumps it to the manifest's v2 schema the way
//! the reference does.
//!
//! A dialect's test loads the set's database its own way (SQLite copies
//! `<set>.sqlite`, Postgres restores `<set>.postgres.sql`), opens a storage
//! on it and calls [`check_reads_back`] or [`check_upgrade`], then
//! [`check_takes_new_commits`]; the index checks read the dialect's catalog
//! through an [`IndexCatalog`] it implements. Only what no other dialect
//! shares (file integrity, key collations) stays in the dialect's own test.
//! Nothing here knows a set's data: every enumeration comes from the
//! manifest and the schema it carries, so other sets are checked alike.
//!
//! Comparison rules (fixtures `README.md`): row and change payloads are
//! compared byte for byte and their decoded values exactly (json values are
//! the verbatim document strings); projection columns and stored JSON
//! documents semantically (object member order, whitespace, duplicate keys
//! and number spelling ignored), because Postgres keeps them as JSONB.
//! Optional method groups a storage does not advertise are not called.

use std::path::{Path, PathBuf};

use crate::check;
use crate::check::{CheckResult, Failure};

mod checks;
mod manifest;

pub use checks::{
    check_indexes_after_upgrade, check_indexes_rebuilt, check_reads_back, check_takes_new_commits,
    check_upgrade, IndexCatalog,
};
pub use manifest::{
    ExpectedBlobRefs, ExpectedCommit, ExpectedPushResult, ExpectedRow, Manifest, Partition,
    PhysicalIndex, SchemaMeta, Upgrade,
};

/// Environment variable naming the fixtures directory: the set directory
/// itself or its parent.
pub const FIXTURES_ENV: &str = "SYNCSTORE_FIXTURES";
/// Name of the set directory inside a fixtures directory.
pub const SET_DIRECTORY: &str = "reference-0.15";
/// File name ending of a set's manifest: `<set>.manifest.json`.
pub const MANIFEST_SUFFIX: &str = ".manifest.json";

/// Client and actor id of the commits [`check_takes_new_commits`] writes.
const PROBE_CLIENT: &str = "reference-conformance";
/// Page sizes: small enough that every keyset and window read pages.
const ROW_PAGE: i64 = 7;
const COMMIT_PAGE: i64 = 40;
const WINDOW_LIMITS: [i64; 2] = [1_000_000, 3];

// ---- locating and loading -------------------------------------------------

/// The directory holding the reference fixture sets: `$SYNCSTORE_FIXTURES`
/// when set, else `default` (tests pass a path relative to their
/// `CARGO_MANIFEST_DIR`). Either may name the set directory or its parent
/// (which holds [`SET_DIRECTORY`]). A directory without any
/// `<set>.manifest.json` is a failure, never a reason to skip.
pub fn fixture_dir(default: impl AsRef<Path>) -> CheckResult<PathBuf> {
    let (given, source) = match std::env::var_os(FIXTURES_ENV) {
        Some(dir) if !dir.is_empty() => (PathBuf::from(dir), FIXTURES_ENV),
        _ => (default.as_ref().to_path_buf(), "the default location"),
    };
    let nested = given.join(SET_DIRECTORY);
    let dir = if nested.is_dir() { nested } else { given };
    fixture_sets(&dir).map_err(|failure| {
        Failure::new(format!(
            "reference fixtures not found ({source}): {failure}; point {FIXTURES_ENV} at the \
             {SET_DIRECTORY} directory or its parent"
        ))
    })?;
    Ok(dir)
}

/// The names of the sets in `dir` (every `<set>.manifest.json`), sorted; an
/// unreadable directory or one without a manifest is a failure.
pub fn fixture_sets(dir: &Path) -> CheckResult<Vec<String>> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| Failure::new(format!("cannot list {}: {e}", dir.display())))?;
    let mut sets = Vec::new();
    for entry in entries {
        let entry =
            entry.map_err(|e| Failure::new(format!("cannot list {}: {e}", dir.display())))?;
        let name = entry.file_name();
        if let Some(set) = name.to_str().and_then(|n| n.strip_suffix(MANIFEST_SUFFIX)) {
            sets.push(set.to_owned());
        }
    }
    sets.sort();
    check!(
        !sets.is_empty(),
        "{} holds no <set>{MANIFEST_SUFFIX}",
        dir.display()
    );
    Ok(sets)
}

/// Every set of the fixture directory ([`fixture_dir`]), loaded.
pub fn manifests(default: impl AsRef<Path>) -> CheckResult<Vec<Manifest>> {
    let dir = fixture_dir(default)?;
    fixture_sets(&dir)?
        .iter()
        .map(|set| Manifest::load(&dir, set))
        .collect()
}

/// The value of a passed check; a failure panics with its message, at the
/// caller (for `#[test]` functions).
#[track_caller]
pub fn assert_passes<T>(result: CheckResult<T>) -> T {
    match result {
        Ok(value) => value,
        Err(failure) => panic!("{failure}"),
    }
}
