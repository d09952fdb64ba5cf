//! Acceptance test on a database written by the reference implementation
//! (set A of `shared/fixtures/reference-0.15`): opening it, ensuring its
//! schema, reading everything back through the storage API exactly as the
//! manifest states it, upgrading to the manifest's v2 schema, and checking
//! the file's integrity. A missing fixture fails the test; it never skips.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use serde_json::Value;
use sync_core::codec;
use sync_core::{
    ChangeOp, CommitMetadataQuery, CommitWindowQuery, CompiledSchema, CompiledTable, EnsureOptions,
    IndexRowScanQuery, RowScanQuery, RowValue, ScopeFilter, ServerStorage, StoredCommit,
    StoredScopes,
};
use sync_sqlite::{SqliteConfig, SqliteStorage};

/// The fixture directory: `$SYNCSTORE_FIXTURES` (the set directory itself or
/// its parent), else the shared fixtures next to the workspace.
fn fixture_dir() -> PathBuf {
    let candidates: Vec<PathBuf> = match std::env::var_os("SYNCSTORE_FIXTURES") {
        Some(dir) => {
            let dir = PathBuf::from(dir);
            vec![dir.clone(), dir.join("reference-0.15")]
        }
        None => vec![PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../../shared/fixtures/reference-0.15"
        ))],
    };
    candidates
        .iter()
        .find(|d| d.join("A.manifest.json").is_file() && d.join("A.sqlite").is_file())
        .cloned()
        .unwrap_or_else(|| {
            panic!("reference fixture set A not found in {candidates:?} (set SYNCSTORE_FIXTURES)")
        })
}

fn compile(schema: &Value) -> CompiledSchema {
    sync_schema::compile(&sync_schema::parse_schema_value(schema).unwrap()).unwrap()
}

fn scopes_of(value: &Value) -> StoredScopes {
    value
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
        .collect()
}

/// A decoded value in the manifest's `value_encoding`.
fn manifest_value(value: &RowValue) -> Value {
    match value {
        RowValue::Null => Value::Null,
        RowValue::String(s) | RowValue::Json(s) | RowValue::BlobRef(s) => Value::String(s.clone()),
        RowValue::Integer(i) => Value::from(*i),
        RowValue::Float(f) => Value::from(*f),
        RowValue::Boolean(b) => Value::Bool(*b),
        RowValue::Bytes(b) | RowValue::Crdt(b) => Value::String(hex::encode(b)),
    }
}

fn same_value(actual: &Value, expected: &Value) -> bool {
    match (actual, expected) {
        (Value::Number(a), Value::Number(b)) => {
            a.as_f64() == b.as_f64() && a.as_i64() == b.as_i64()
        }
        _ => actual == expected,
    }
}

/// Decodes a payload and compares every column with the manifest's `values`.
fn assert_values(table: &CompiledTable, payload: &[u8], expected: &Value, what: &str) {
    let values = codec::decode_row(table, payload).unwrap();
    let expected = expected.as_object().unwrap();
    assert_eq!(values.len(), expected.len(), "{what}: column count");
    for (column, value) in table.columns.iter().zip(&values) {
        let want = &expected[&column.name];
        assert!(
            same_value(&manifest_value(value), want),
            "{what}.{}: {value:?} vs {want}",
            column.name
        );
    }
}

struct Fixture {
    manifest: Value,
    _dir: tempfile::TempDir,
    path: PathBuf,
}

fn load() -> Fixture {
    let source = fixture_dir();
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(source.join("A.manifest.json")).unwrap())
            .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("A.sqlite");
    std::fs::copy(source.join("A.sqlite"), &path).unwrap();
    let mut perms = std::fs::metadata(&path).unwrap().permissions();
    #[allow(clippy::permissions_set_readonly_false)]
    perms.set_readonly(false);
    std::fs::set_permissions(&path, perms).unwrap();
    Fixture {
        manifest,
        _dir: dir,
        path,
    }
}

fn open(path: &PathBuf) -> SqliteStorage {
    SqliteStorage::open(path, SqliteConfig::default()).unwrap()
}

/// Every retained commit of `table`, read through `read_commit_window` with
/// every scope value seen, in pages of `limit_changes`.
fn window(
    storage: &SqliteStorage,
    partition: &str,
    table: &str,
    filter: &ScopeFilter,
    limit: i64,
) -> Vec<StoredCommit> {
    let mut out: Vec<StoredCommit> = Vec::new();
    let mut after = 0;
    loop {
        let page = storage
            .read_commit_window(
                partition,
                &CommitWindowQuery {
                    table: table.into(),
                    scope_filter: filter.clone(),
                    after_seq: after,
                    through_seq: i64::MAX,
                    limit_changes: limit,
                },
            )
            .unwrap();
        let Some(last) = page.last() else {
            return out;
        };
        after = last.commit_seq;
        out.extend(page);
    }
}

fn check_partition(
    storage: &SqliteStorage,
    schema: &CompiledSchema,
    partition: &str,
    expected: &Value,
) {
    assert_eq!(
        storage.get_max_commit_seq(partition).unwrap(),
        expected["max_commit_seq"].as_i64().unwrap()
    );
    assert_eq!(
        storage.get_horizon_seq(partition).unwrap(),
        expected["horizon_seq"].as_i64().unwrap()
    );
    let registry = &expected["registry"];
    assert_eq!(
        storage
            .get_partition_log_epoch(partition)
            .unwrap()
            .as_deref(),
        registry["log_epoch"].as_str()
    );
    let entry = storage
        .list_partition_registry()
        .unwrap()
        .into_iter()
        .find(|e| e.partition == partition)
        .unwrap();
    assert_eq!(
        entry.epoch_required,
        registry["epoch_required"].as_bool().unwrap()
    );
    assert_eq!(
        entry.last_authenticated_at_ms,
        registry["last_authenticated_at_ms"].as_i64().unwrap()
    );

    check_rows(storage, schema, partition, expected);
    check_commits(storage, schema, partition, expected);
    check_push_results(storage, partition, expected);
    check_clients(storage, partition, expected);
    check_blob_refs(storage, partition, expected);
}

fn filter_for(expected: &Value, table: &str) -> ScopeFilter {
    expected["scope_values_seen"][table]
        .as_object()
        .unwrap()
        .iter()
        .map(|(var, values)| {
            let values = values
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_str().unwrap().to_owned())
                .collect();
            (var.clone(), values)
        })
        .collect()
}

fn check_rows(storage: &SqliteStorage, schema: &CompiledSchema, partition: &str, expected: &Value) {
    for (name, table_rows) in expected["tables"].as_object().unwrap() {
        let table = schema.table(name).unwrap();
        let rows = table_rows["rows"].as_object().unwrap();
        assert_eq!(rows.len() as i64, table_rows["row_count"].as_i64().unwrap());
        for (row_id, want) in rows {
            let row = storage.get_row(partition, name, row_id).unwrap().unwrap();
            assert_eq!(
                row.server_version,
                want["server_version"].as_i64().unwrap(),
                "{partition}/{row_id}"
            );
            assert_eq!(
                row.scopes,
                scopes_of(&want["scopes"]),
                "{partition}/{row_id}"
            );
            assert_eq!(
                hex::encode(&row.payload),
                want["payload_hex"].as_str().unwrap(),
                "{partition}/{row_id}"
            );
            assert_values(table, &row.payload, &want["values"], row_id);
            let (version, scopes) = storage
                .get_row_scopes(partition, name, row_id)
                .unwrap()
                .unwrap();
            assert_eq!((version, scopes), (row.server_version, row.scopes.clone()));
        }
        // every live row through paged scope scans, in byte order
        let filter = filter_for(expected, name);
        let mut scanned = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let page = storage
                .scan_rows(
                    partition,
                    &RowScanQuery {
                        table: name.clone(),
                        scope_filter: filter.clone(),
                        after_row_id: after.clone(),
                        limit: 7,
                    },
                )
                .unwrap();
            let Some(last) = page.last() else { break };
            after = Some(last.row_id.clone());
            scanned.extend(page.into_iter().map(|r| r.row_id));
        }
        let mut want: Vec<String> = rows.keys().cloned().collect();
        want.sort();
        assert_eq!(scanned, want, "{partition}/{name} scan");
        let all = storage
            .scan_partition_rows(partition, name, None, 1000)
            .unwrap();
        assert_eq!(
            all.iter().map(|r| r.row_id.clone()).collect::<Vec<_>>(),
            want
        );
        // trusted lookups through the declared index
        for index in &table.indexes {
            for (row_id, row) in rows {
                let values = index
                    .columns
                    .iter()
                    .map(|c| {
                        let v = &row["values"][c];
                        match table.column(c).unwrap().column_type {
                            sync_core::ColumnType::Integer => {
                                RowValue::Integer(v.as_i64().unwrap())
                            }
                            _ => RowValue::String(v.as_str().unwrap().to_owned()),
                        }
                    })
                    .collect();
                let found = storage
                    .scan_rows_by_index(
                        partition,
                        &IndexRowScanQuery {
                            table: name.clone(),
                            index: index.name.clone(),
                            values,
                            after_row_id: None,
                            limit: 1000,
                        },
                    )
                    .unwrap();
                assert!(
                    found.iter().any(|r| &r.row_id == row_id),
                    "{partition}/{row_id} by {}",
                    index.name
                );
            }
        }
    }
}

fn check_commits(
    storage: &SqliteStorage,
    schema: &CompiledSchema,
    partition: &str,
    expected: &Value,
) {
    let commits = expected["commits"].as_array().unwrap();
    // admin metadata, newest first
    let metadata = storage
        .list_commit_metadata(
            partition,
            &CommitMetadataQuery {
                after_seq: 0,
                before_seq: None,
                limit: 100_000,
                table: None,
            },
        )
        .unwrap();
    assert_eq!(metadata.len(), commits.len());
    for (meta, want) in metadata.iter().rev().zip(commits) {
        assert_eq!(meta.commit_seq, want["commit_seq"].as_i64().unwrap());
        assert_eq!(meta.client_id, want["client_id"].as_str().unwrap());
        assert_eq!(
            meta.client_commit_id,
            want["client_commit_id"].as_str().unwrap()
        );
        assert_eq!(meta.actor_id, want["actor_id"].as_str().unwrap());
        assert_eq!(meta.created_at_ms, want["created_at_ms"].as_i64().unwrap());
        let changes = want["changes"].as_array().unwrap();
        assert_eq!(meta.change_count, changes.len() as i64);
        let tables: BTreeSet<String> = changes
            .iter()
            .map(|c| c["table"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(meta.tables, tables.into_iter().collect::<Vec<_>>());
    }
    // per-table windows carry every change, whole and paged
    for table in &schema.tables {
        let filter = filter_for(expected, &table.name);
        let variable = filter.keys().next().unwrap().clone();
        let want: Vec<(i64, i64, String, Vec<&Value>)> = commits
            .iter()
            .filter_map(|c| {
                let changes: Vec<&Value> = c["changes"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|ch| {
                        ch["table"] == table.name.as_str() && ch["scopes"].get(&variable).is_some()
                    })
                    .collect();
                (!changes.is_empty()).then(|| {
                    (
                        c["commit_seq"].as_i64().unwrap(),
                        c["created_at_ms"].as_i64().unwrap(),
                        c["actor_id"].as_str().unwrap().to_owned(),
                        changes,
                    )
                })
            })
            .collect();
        for limit in [100_000, 3] {
            let got = window(storage, partition, &table.name, &filter, limit);
            assert_eq!(
                got.len(),
                want.len(),
                "{partition}/{} window (limit {limit})",
                table.name
            );
            for (commit, (seq, at, actor, changes)) in got.iter().zip(&want) {
                assert_eq!(
                    (commit.commit_seq, commit.created_at_ms, &commit.actor_id),
                    (*seq, *at, actor)
                );
                assert_eq!(commit.changes.len(), changes.len(), "commit {seq}");
                for (change, w) in commit.changes.iter().zip(changes) {
                    assert_eq!(change.row_id, w["row_id"].as_str().unwrap());
                    let op = if w["op"] == "upsert" {
                        ChangeOp::Upsert
                    } else {
                        ChangeOp::Delete
                    };
                    assert_eq!(change.op, op);
                    assert_eq!(change.row_version, w["row_version"].as_i64());
                    assert_eq!(change.scopes, scopes_of(&w["scopes"]));
                    assert_eq!(
                        change.payload.as_ref().map(hex::encode).as_deref(),
                        w["payload_hex"].as_str()
                    );
                    if let Some(payload) = &change.payload {
                        assert_values(table, payload, &w["values"], &change.row_id);
                    }
                }
            }
        }
    }
}

fn check_push_results(storage: &SqliteStorage, partition: &str, expected: &Value) {
    for record in expected["push_results"].as_array().unwrap() {
        let client = record["client_id"].as_str().unwrap();
        let ccid = record["client_commit_id"].as_str().unwrap();
        let stored = storage
            .get_push_result(partition, client, ccid)
            .unwrap()
            .unwrap();
        let reserialized: Value = serde_json::from_str(&stored.to_json()).unwrap();
        assert_eq!(
            reserialized, record["document"],
            "{partition}/{client}/{ccid}"
        );
    }
}

fn check_clients(storage: &SqliteStorage, partition: &str, expected: &Value) {
    let want = expected["clients"].as_array().unwrap();
    let listed = storage.list_client_records(partition).unwrap();
    assert_eq!(listed.len(), want.len());
    for w in want {
        let id = w["client_id"].as_str().unwrap();
        let record = storage.get_client_record(partition, id).unwrap().unwrap();
        assert!(listed.contains(&record));
        assert_eq!(record.actor_id, w["actor_id"].as_str().unwrap());
        assert_eq!(
            i64::from(record.wire_version),
            w["wire_version"].as_i64().unwrap()
        );
        assert_eq!(record.cursor, w["cursor"].as_i64().unwrap());
        assert_eq!(record.updated_at_ms, w["updated_at_ms"].as_i64().unwrap());
        let subscriptions: Vec<(String, String, BTreeMap<String, Vec<String>>)> = w
            ["subscriptions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                let scopes = s["scopes"]
                    .as_object()
                    .unwrap()
                    .iter()
                    .map(|(k, v)| {
                        (
                            k.clone(),
                            v.as_array()
                                .unwrap()
                                .iter()
                                .map(|x| x.as_str().unwrap().to_owned())
                                .collect(),
                        )
                    })
                    .collect();
                (
                    s["id"].as_str().unwrap().to_owned(),
                    s["table"].as_str().unwrap().to_owned(),
                    scopes,
                )
            })
            .collect();
        let got: Vec<_> = record
            .subscriptions
            .iter()
            .map(|s| (s.id.clone(), s.table.clone(), s.scopes.clone()))
            .collect();
        assert_eq!(got, subscriptions);
    }
}

fn check_blob_refs(storage: &SqliteStorage, partition: &str, expected: &Value) {
    let refs = expected["blob_refs"].as_array().unwrap();
    let mut ids = BTreeSet::new();
    for r in refs {
        let table = r["table"].as_str().unwrap();
        let row_id = r["row_id"].as_str().unwrap();
        let scopes = scopes_of(&expected["tables"][table]["rows"][row_id]["scopes"]);
        for blob in r["blob_ids"].as_array().unwrap() {
            let blob = blob.as_str().unwrap();
            ids.insert(blob.to_owned());
            let rows = storage.list_rows_referencing_blob(partition, blob).unwrap();
            assert!(
                rows.iter()
                    .any(|x| x.table == table && x.row_id == row_id && x.scopes == scopes),
                "{partition}/{row_id} → {blob}"
            );
        }
    }
    assert_eq!(
        storage.list_referenced_blob_ids(partition).unwrap(),
        ids.into_iter().collect::<Vec<_>>()
    );
}

fn change_payloads(path: &PathBuf) -> Vec<(String, i64, i64, Option<Vec<u8>>)> {
    let conn = rusqlite::Connection::open(path).unwrap();
    let mut stmt = conn
        .prepare("SELECT partition, commit_seq, idx, payload FROM sync_changes ORDER BY partition, commit_seq, idx")
        .unwrap();
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

#[test]
fn reference_database_reads_back_exactly_and_upgrades() {
    let fixture = load();
    let manifest = &fixture.manifest;
    let schema = compile(&manifest["schema"]);
    let storage = open(&fixture.path);
    storage
        .ensure_schema(&schema, &EnsureOptions::default())
        .unwrap();
    assert_eq!(storage.ensured_version(), Some(1));

    let partitions = manifest["partitions"].as_object().unwrap();
    let mut names: Vec<String> = partitions.keys().cloned().collect();
    names.sort();
    assert_eq!(storage.list_partitions().unwrap(), names);
    for (partition, expected) in partitions {
        check_partition(&storage, &schema, partition, expected);
    }
    drop(storage);

    // upgrade to the manifest's v2 on a fresh instance
    let before = change_payloads(&fixture.path);
    let upgrade = &manifest["upgrade_check"];
    let v2 = compile(&upgrade["schema_v2"]);
    let storage = open(&fixture.path);
    storage
        .ensure_schema(&v2, &EnsureOptions::default())
        .unwrap();
    let marker = storage.read_schema_marker().unwrap().unwrap();
    let want_meta = &upgrade["expected"]["stored_schema_meta"];
    assert_eq!(
        marker.schema_version,
        want_meta["schema_version"].as_i64().unwrap()
    );
    let layouts: Value = serde_json::from_str(&marker.layouts).unwrap();
    assert_eq!(layouts, want_meta["layouts"]);
    for (partition, tables) in upgrade["expected"]["live_rows_after"].as_object().unwrap() {
        for (name, rows) in tables.as_object().unwrap() {
            let table = v2.table(name).unwrap();
            for (row_id, want) in rows.as_object().unwrap() {
                let row = storage.get_row(partition, name, row_id).unwrap().unwrap();
                assert_eq!(
                    hex::encode(&row.payload),
                    want["payload_hex"].as_str().unwrap(),
                    "{partition}/{row_id}"
                );
                assert_eq!(row.server_version, want["server_version"].as_i64().unwrap());
                assert_eq!(row.scopes, scopes_of(&want["scopes"]));
                assert_values(table, &row.payload, &want["values"], row_id);
            }
        }
    }
    assert_eq!(
        upgrade["expected"]["change_payloads_unchanged"],
        Value::Bool(true)
    );
    assert_eq!(change_payloads(&fixture.path), before);
    drop(storage);

    let conn = rusqlite::Connection::open(&fixture.path).unwrap();
    for (table, want) in upgrade["expected"]["relational_indexes_after"]["sqlite"]
        .as_object()
        .unwrap()
    {
        let mut stmt = conn
            .prepare("SELECT name FROM pragma_index_list(?1) WHERE origin = 'c' ORDER BY name")
            .unwrap();
        let names: Vec<String> = stmt
            .query_map([table], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let want: Vec<String> = want
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_owned())
            .collect();
        assert_eq!(names, want, "{table}");
    }
    let check: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(check, "ok");
}
