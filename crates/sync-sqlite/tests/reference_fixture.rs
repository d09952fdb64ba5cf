//! Acceptance test on databases written by the reference implementation
//! (every set of `shared/fixtures/reference-0.15`, or of the directory named
//! by `SYNCSTORE_FIXTURES`), each on a private copy of its `.sqlite` file:
//! the dialect-agnostic checks of `sync_conformance::reference` (reads back
//! exactly, bumps to v2 like the reference, takes new commits, declared
//! indexes in their partition-leading form, read here from SQLite's
//! catalog), plus what only SQLite can say: `PRAGMA integrity_check`. A
//! missing fixture fails the test; it never skips.

use std::path::{Path, PathBuf};

use rusqlite::Connection;
use sync_conformance::reference::{self, assert_passes, IndexCatalog, Manifest};
use sync_conformance::{CheckResult, RawIndex};
use sync_core::{EnsureOptions, ServerStorage};
use sync_sqlite::{SqliteConfig, SqliteStorage};

const FIXTURES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../shared/fixtures/reference-0.15"
);

/// One set and a writable copy of its database file.
struct Copy {
    manifest: Manifest,
    path: PathBuf,
    _dir: tempfile::TempDir,
}

/// Every set of the fixture directory, each on its own copy.
fn copies() -> Vec<Copy> {
    assert_passes(reference::manifests(FIXTURES))
        .into_iter()
        .map(|manifest| {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join(format!("{}.sqlite", manifest.set()));
            std::fs::copy(assert_passes(manifest.file("sqlite")), &path).unwrap();
            let mut perms = std::fs::metadata(&path).unwrap().permissions();
            #[allow(clippy::permissions_set_readonly_false)]
            perms.set_readonly(false);
            std::fs::set_permissions(&path, perms).unwrap();
            Copy {
                manifest,
                path,
                _dir: dir,
            }
        })
        .collect()
}

fn open(path: &Path) -> SqliteStorage {
    SqliteStorage::open(path, SqliteConfig::default()).unwrap()
}

/// SQLite's catalog: `pragma_index_list` / `pragma_index_info`.
struct Catalog(Connection);

impl IndexCatalog for Catalog {
    fn indexes(&mut self, table: &str) -> CheckResult<Vec<RawIndex>> {
        let mut list = self
            .0
            .prepare("SELECT name, \"unique\" FROM pragma_index_list(?1) WHERE origin = 'c'")
            .unwrap();
        let mut info = self
            .0
            .prepare("SELECT name FROM pragma_index_info(?1) ORDER BY seqno")
            .unwrap();
        let indexes: Vec<(String, bool)> = list
            .query_map([table], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        Ok(indexes
            .into_iter()
            .map(|(name, unique)| {
                let columns = info
                    .query_map([&name], |r| r.get(0))
                    .unwrap()
                    .map(Result::unwrap)
                    .collect();
                (name, unique, columns)
            })
            .collect())
    }
}

fn catalog(path: &Path) -> Catalog {
    Catalog(Connection::open(path).unwrap())
}

fn assert_intact(path: &Path) {
    let check: String = Connection::open(path)
        .unwrap()
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(check, "ok");
}

#[test]
fn reference_database_reads_back_exactly() {
    for copy in copies() {
        let manifest = &copy.manifest;
        let storage = open(&copy.path);
        assert_passes(reference::check_reads_back(&storage, manifest));
        assert_passes(reference::check_takes_new_commits(&storage, manifest));
        drop(storage);
        let mut catalog = catalog(&copy.path);
        assert_passes(reference::check_indexes_rebuilt(
            &mut catalog,
            manifest,
            sync_sqlite::DIALECT,
        ));

        // a second instance starts warm
        open(&copy.path)
            .ensure_schema(manifest.schema(), &EnsureOptions::default())
            .unwrap();
        assert_intact(&copy.path);
    }
}

#[test]
fn reference_database_bumps_to_v2_like_the_reference() {
    for copy in copies() {
        let manifest = &copy.manifest;
        let storage = open(&copy.path);
        assert_passes(reference::check_upgrade(&storage, manifest));
        assert_passes(reference::check_takes_new_commits(&storage, manifest));
        drop(storage);
        let mut catalog = catalog(&copy.path);
        assert_passes(reference::check_indexes_after_upgrade(
            &mut catalog,
            manifest,
            sync_sqlite::DIALECT,
        ));
        assert_intact(&copy.path);
    }
}
