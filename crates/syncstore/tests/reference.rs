//! The reference database (fixture set A, written by the reference
//! TypeScript implementation 0.15): on a copy, `migrate` with the manifest's
//! schema, then `rows` and `commits` for every partition and table reproduce
//! `A.manifest.json` (scopes, versions, values, changes).
//!
//! The fixture folder is `../../../shared/fixtures/reference-0.15` relative
//! to this package, or the folder named by `SYNCSTORE_FIXTURES`. A missing
//! fixture fails the test; it never skips it.

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;

use common::{all_commits, all_rows, write_file, Db};
use serde_json::{json, Value};

const DEFAULT_FIXTURES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../shared/fixtures/reference-0.15"
);

fn fixtures() -> PathBuf {
    std::env::var_os("SYNCSTORE_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_FIXTURES))
}

fn manifest() -> Value {
    let path = fixtures().join("A.manifest.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "reference manifest {} is missing or unreadable ({e}); set SYNCSTORE_FIXTURES",
            path.display()
        )
    });
    serde_json::from_str(&text).expect("the manifest is JSON")
}

/// A manifest change or row without the fields the CLI does not print.
fn without(value: &Value, drop: &[&str]) -> Value {
    let mut value = value.clone();
    if let Some(map) = value.as_object_mut() {
        for key in drop {
            map.remove(*key);
        }
    }
    value
}

#[test]
fn rows_and_commits_of_a_migrated_sqlite_copy_reproduce_the_manifest() {
    let manifest = manifest();
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("A.sqlite");
    std::fs::copy(fixtures().join("A.sqlite"), &copy).unwrap_or_else(|e| {
        panic!(
            "cannot copy the reference database from {} ({e})",
            fixtures().display()
        )
    });
    let db = Db::Sqlite { dir, path: copy };
    reproduces_the_manifest(&db, &manifest);
}

/// The same on the Postgres dump, restored into a fresh schema with `psql`.
#[test]
fn rows_and_commits_of_a_migrated_postgres_restore_reproduce_the_manifest() {
    let manifest = manifest();
    let db = Db::postgres();
    let Db::Postgres { server, schema } = &db else {
        unreachable!("a Postgres database")
    };
    sync_postgres::reference_dump::load_into_schema(
        server,
        schema,
        &fixtures().join("A.postgres.sql"),
    )
    .unwrap_or_else(|e| panic!("cannot restore the reference dump ({e:?})"));
    reproduces_the_manifest(&db, &manifest);
}

/// `migrate` with the manifest's schema (its dry run first), then `status`,
/// `rows` and `commits` of every partition and table against the manifest.
/// The reference wrote its declared index without the leading partition
/// column (and, on Postgres, its key columns with the default collation):
/// the dry run shows that one-time legacy upgrade, the migration runs it.
fn reproduces_the_manifest(db: &Db, manifest: &Value) {
    let scratch = db.scratch();
    let schema = write_file(&scratch, "schema.json", &manifest["schema"].to_string());
    let dry = db.json(&["migrate", "--schema", &schema, "--dry-run"]);
    assert_eq!(dry["applied"], false);
    assert_eq!(dry["plan"]["action"], "verify");
    let creates = dry["plan"]["legacyUpgrade"]["indexCreates"]
        .as_array()
        .expect("index creates");
    let rebuilt = creates.iter().any(|s| {
        s["sql"]
            .as_str()
            .unwrap_or_default()
            .contains("\"sync_ix_todos_by_list_position\"")
    });
    assert!(rebuilt, "{dry:#}");
    let collations = dry["plan"]["legacyUpgrade"]["collations"]
        .as_array()
        .expect("collations");
    assert_eq!(
        !collations.is_empty(),
        matches!(db, Db::Postgres { .. }),
        "{dry:#}"
    );
    // Tables written before column versions existed get the column.
    let additions = dry["plan"]["legacyUpgrade"]["columnAdditions"]
        .as_array()
        .expect("column additions");
    assert!(
        additions.iter().any(|s| s["sql"]
            .as_str()
            .unwrap_or_default()
            .contains("ADD COLUMN \"_sync_column_versions\"")),
        "{dry:#}"
    );
    let again = db.json(&["migrate", "--schema", &schema, "--dry-run"]);
    assert_eq!(again["plan"], dry["plan"], "the dry run changed nothing");

    let migrated = db.json(&["migrate", "--schema", &schema]);
    assert_eq!(migrated["from_version"], 1);
    assert_eq!(migrated["to_version"], 1);
    assert_eq!(migrated["applied"], true);
    assert_eq!(migrated["plan"]["action"], "verify");
    let after = db.json(&["migrate", "--schema", &schema, "--dry-run"]);
    assert_eq!(
        after["plan"]["legacyUpgrade"],
        json!({"dialect": after["plan"]["dialect"], "columnAdditions": [], "collations": [], "indexDrops": [], "indexCreates": []}),
        "the legacy upgrade ran once"
    );

    let partitions = manifest["partitions"].as_object().expect("partitions");
    let status = db.json(&["status"]);
    let listed: Vec<&str> = status["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["partition"].as_str().unwrap())
        .collect();
    assert_eq!(
        listed,
        partitions.keys().map(String::as_str).collect::<Vec<_>>()
    );

    for (partition, expected) in partitions {
        let entry = status["partitions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["partition"] == *partition)
            .unwrap();
        assert_eq!(
            entry["max_commit_seq"], expected["max_commit_seq"],
            "{partition}"
        );
        assert_eq!(entry["horizon_seq"], expected["horizon_seq"], "{partition}");
        assert_eq!(
            entry["log_epoch"], expected["registry"]["log_epoch"],
            "{partition}"
        );

        for (table, table_expected) in expected["tables"].as_object().expect("tables") {
            let rows = all_rows(db, partition, table, 17);
            let actual: BTreeMap<String, Value> = rows
                .iter()
                .map(|r| {
                    (
                        r["row_id"].as_str().unwrap().to_owned(),
                        without(r, &["row_id"]),
                    )
                })
                .collect();
            let wanted: BTreeMap<String, Value> = table_expected["rows"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(id, row)| (id.clone(), without(row, &["payload_hex"])))
                .collect();
            assert_eq!(actual.len(), wanted.len(), "{partition}.{table} row count");
            for (id, row) in &wanted {
                assert_eq!(actual.get(id), Some(row), "{partition}.{table} row {id}");
            }
        }

        let commits = all_commits(db, partition, 40);
        let wanted = expected["commits"].as_array().expect("commits");
        assert_eq!(commits.len(), wanted.len(), "{partition} retained commits");
        for (actual, wanted) in commits.iter().zip(wanted) {
            let mut wanted_commit = without(wanted, &["written_via", "changes"]);
            wanted_commit["writer_version"] = Value::Null;
            let changes: Vec<Value> = wanted["changes"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| without(c, &["payload_hex"]))
                .collect();
            wanted_commit["changes"] = json!(changes);
            assert_eq!(
                actual, &wanted_commit,
                "{partition} commit {}",
                wanted["commit_seq"]
            );
        }
    }
}
