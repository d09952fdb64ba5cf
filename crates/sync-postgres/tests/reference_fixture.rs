//! Acceptance test: a database written by the reference implementation
//! (set A, `A.postgres.sql`) opens, upgrades in place and reads back through
//! the storage API exactly as `A.manifest.json` states.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use common::*;
use serde_json::{json, Value};
use sync_core::{
    codec, AuthoritativeQueryRequest, CommitMetadataQuery, CommitWindowQuery, CompiledSchema,
    CompiledTable, EnsureOptions, IndexRowScanQuery, RowScanQuery, RowValue, ScopeFilter,
    ServeContext, ServerStorage, SqlValue, StoredRow,
};
use sync_postgres::PostgresStorage;

fn fixture_dir() -> PathBuf {
    let dir = match std::env::var("SYNCSTORE_FIXTURES") {
        Ok(dir) => {
            let dir = PathBuf::from(dir);
            if dir.join("reference-0.15").is_dir() {
                dir.join("reference-0.15")
            } else {
                dir
            }
        }
        Err(_) => PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../../shared/fixtures/reference-0.15"
        )),
    };
    assert!(
        dir.join("A.postgres.sql").is_file() && dir.join("A.manifest.json").is_file(),
        "reference fixtures not found in {} (set SYNCSTORE_FIXTURES to the reference-0.15 directory)",
        dir.display()
    );
    dir
}

fn manifest() -> Value {
    let text = std::fs::read_to_string(fixture_dir().join("A.manifest.json")).expect("manifest");
    serde_json::from_str(&text).expect("manifest json")
}

fn load(db: &TestDb) {
    sync_postgres::reference_dump::load_into_schema(
        &pg_url(),
        &db.schema,
        &fixture_dir().join("A.postgres.sql"),
    )
    .expect("restore A.postgres.sql");
}

fn schema_of(value: &Value) -> CompiledSchema {
    sync_schema::compile(&sync_schema::parse_schema_value(value).expect("schema input"))
        .expect("compile")
}

fn obj(value: &Value) -> &serde_json::Map<String, Value> {
    value.as_object().expect("object")
}

fn string_map(value: &Value) -> BTreeMap<String, String> {
    obj(value)
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().expect("string").to_owned()))
        .collect()
}

/// A decoded value in the manifest's `value_encoding`.
fn manifest_value(value: &RowValue) -> Value {
    match value {
        RowValue::Null => Value::Null,
        RowValue::String(s) | RowValue::Json(s) | RowValue::BlobRef(s) => json!(s),
        RowValue::Integer(i) => json!(i),
        RowValue::Float(f) => json!(f),
        RowValue::Boolean(b) => json!(b),
        RowValue::Bytes(b) | RowValue::Crdt(b) => json!(hex::encode(b)),
    }
}

fn decoded_values(table: &CompiledTable, payload: &[u8]) -> Value {
    let values = codec::decode_row(table, payload).expect("payload decodes");
    Value::Object(
        table
            .columns
            .iter()
            .zip(&values)
            .map(|(c, v)| (c.name.clone(), manifest_value(v)))
            .collect(),
    )
}

fn all_rows(storage: &PostgresStorage, partition: &str, table: &str) -> Vec<StoredRow> {
    let mut rows = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = storage
            .scan_partition_rows(partition, table, after.as_deref(), 1000)
            .expect("scan_partition_rows");
        let short = page.len() < 1000;
        after = page.last().map(|r| r.row_id.clone());
        rows.extend(page);
        if short {
            return rows;
        }
    }
}

/// Every live row of every table equals the manifest's rows (version,
/// scopes, payload bytes, decoded values), through several read paths.
fn check_rows(
    storage: &PostgresStorage,
    schema: &CompiledSchema,
    partition: &str,
    expected: &Value,
    seen: &Value,
) {
    for table in &schema.tables {
        let want = obj(&expected[&table.name]["rows"]);
        let rows = all_rows(storage, partition, &table.name);
        let ids: Vec<&str> = rows.iter().map(|r| r.row_id.as_str()).collect();
        let mut sorted = ids.clone();
        sorted.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
        assert_eq!(
            ids, sorted,
            "{partition}/{}: keyset scan is byte-ordered",
            table.name
        );
        assert_eq!(
            ids.iter().copied().collect::<BTreeSet<_>>(),
            want.keys().map(String::as_str).collect::<BTreeSet<_>>(),
            "{partition}/{}: live row ids",
            table.name
        );
        for row in &rows {
            let w = &want[&row.row_id];
            assert_eq!(
                row.server_version,
                w["server_version"].as_i64().unwrap(),
                "{}: version",
                row.row_id
            );
            assert_eq!(
                row.scopes,
                string_map(&w["scopes"]),
                "{}: scopes",
                row.row_id
            );
            assert_eq!(
                hex::encode(&row.payload),
                w["payload_hex"].as_str().unwrap(),
                "{}: payload",
                row.row_id
            );
            assert_eq!(
                decoded_values(table, &row.payload),
                w["values"],
                "{}: values",
                row.row_id
            );
            let single = storage
                .get_row(partition, &table.name, &row.row_id)
                .unwrap()
                .unwrap();
            assert_eq!(&single, row, "get_row {}", row.row_id);
            let (version, scopes) = storage
                .get_row_scopes(partition, &table.name, &row.row_id)
                .unwrap()
                .unwrap();
            assert_eq!((version, &scopes), (row.server_version, &row.scopes));
        }
        let filter: ScopeFilter = obj(&seen[&table.name])
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
            .collect();
        let scanned = storage
            .scan_rows(
                partition,
                &RowScanQuery {
                    table: table.name.clone(),
                    scope_filter: filter,
                    after_row_id: None,
                    limit: 10_000,
                },
            )
            .unwrap();
        assert_eq!(
            scanned, rows,
            "{partition}/{}: scope scan over every value seen",
            table.name
        );
    }
}

/// JSON with every number as an f64, so `jsonb`'s number spelling
/// (`1e2` → `100`) compares equal; object member order never matters.
fn normalized(value: &Value) -> Value {
    match value {
        Value::Number(n) => json!(n.as_f64()),
        Value::Array(items) => Value::Array(items.iter().map(normalized).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), normalized(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Projection columns, read through a registered query, equal the decoded values.
fn check_projections(
    storage: &PostgresStorage,
    schema: &CompiledSchema,
    partition: &str,
    expected: &Value,
) {
    for table in &schema.tables {
        let columns: Vec<&str> = table.columns.iter().map(|c| c.name.as_str()).collect();
        let sql = format!(
            "SELECT {} FROM {}",
            columns
                .iter()
                .map(|c| format!("\"{c}\""))
                .collect::<Vec<_>>()
                .join(", "),
            table.name
        );
        let request = AuthoritativeQueryRequest {
            sql,
            params: vec![],
            tables: vec![table.name.clone()],
        };
        let result = storage
            .query_authoritative(partition, &request, &ServeContext::default())
            .unwrap();
        let want = obj(&expected[&table.name]["rows"]);
        assert_eq!(
            result.rows.len(),
            want.len(),
            "{partition}/{}: projected rows",
            table.name
        );
        let pk = table.primary_key_index;
        for row in &result.rows {
            let SqlValue::Text(id) = &row[pk] else {
                panic!("text primary key")
            };
            let w = &want[id]["values"];
            for (column, cell) in table.columns.iter().zip(row) {
                let expected = &w[&column.name];
                let matches = match (cell, column.column_type) {
                    (SqlValue::Null, _) => expected.is_null(),
                    (SqlValue::Text(t), sync_core::ColumnType::Json) => {
                        normalized(&serde_json::from_str(t).unwrap())
                            == normalized(
                                &serde_json::from_str(expected.as_str().unwrap()).unwrap(),
                            )
                    }
                    (SqlValue::Text(t), _) => expected.as_str() == Some(t.as_str()),
                    (SqlValue::Integer(i), _) => expected.as_i64() == Some(*i),
                    (SqlValue::Float(f), _) => expected.as_f64() == Some(*f),
                    (SqlValue::Bool(b), _) => expected.as_bool() == Some(*b),
                    (SqlValue::Bytes(b), _) => expected.as_str() == Some(hex::encode(b).as_str()),
                };
                assert!(
                    matches,
                    "{partition}/{}/{id}/{}: projection {cell:?} vs {expected}",
                    table.name, column.name
                );
            }
        }
    }
}

fn check_commits(
    storage: &PostgresStorage,
    schema: &CompiledSchema,
    partition: &str,
    expected: &Value,
) {
    let commits = expected["commits"].as_array().unwrap();
    let meta = storage
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
    assert_eq!(meta.len(), commits.len(), "{partition}: retained commits");
    for (m, c) in meta.iter().rev().zip(commits) {
        assert_eq!(m.commit_seq, c["commit_seq"].as_i64().unwrap());
        assert_eq!(m.client_id, c["client_id"].as_str().unwrap());
        assert_eq!(m.client_commit_id, c["client_commit_id"].as_str().unwrap());
        assert_eq!(m.actor_id, c["actor_id"].as_str().unwrap());
        assert_eq!(m.created_at_ms, c["created_at_ms"].as_i64().unwrap());
        let changes = c["changes"].as_array().unwrap();
        assert_eq!(
            m.change_count,
            changes.len() as i64,
            "change count of {}",
            m.commit_seq
        );
        let tables: BTreeSet<&str> = changes
            .iter()
            .map(|ch| ch["table"].as_str().unwrap())
            .collect();
        assert_eq!(
            m.tables,
            tables.into_iter().map(str::to_owned).collect::<Vec<_>>()
        );
    }
    let seen = &expected["scope_values_seen"];
    for table in &schema.tables {
        let filter: ScopeFilter = obj(&seen[&table.name])
            .iter()
            .map(|(var, values)| {
                (
                    var.clone(),
                    values
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|v| v.as_str().unwrap().to_owned())
                        .collect(),
                )
            })
            .collect();
        let window = storage
            .read_commit_window(
                partition,
                &CommitWindowQuery {
                    table: table.name.clone(),
                    scope_filter: filter,
                    after_seq: 0,
                    through_seq: expected["max_commit_seq"].as_i64().unwrap(),
                    limit_changes: 1_000_000,
                },
            )
            .unwrap();
        let want: Vec<&Value> = commits
            .iter()
            .filter(|c| {
                c["changes"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|ch| ch["table"] == table.name.as_str())
            })
            .collect();
        assert_eq!(
            window.len(),
            want.len(),
            "{partition}/{}: window commits",
            table.name
        );
        for (got, c) in window.iter().zip(want) {
            assert_eq!(got.commit_seq, c["commit_seq"].as_i64().unwrap());
            assert_eq!(got.actor_id, c["actor_id"].as_str().unwrap());
            assert_eq!(got.created_at_ms, c["created_at_ms"].as_i64().unwrap());
            let changes: Vec<&Value> = c["changes"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|ch| ch["table"] == table.name.as_str())
                .collect();
            assert_eq!(
                got.changes.len(),
                changes.len(),
                "changes of {} in {}",
                got.commit_seq,
                table.name
            );
            for (g, w) in got.changes.iter().zip(changes) {
                assert_eq!(g.row_id, w["row_id"].as_str().unwrap());
                assert_eq!(g.op.as_str(), w["op"].as_str().unwrap());
                assert_eq!(g.row_version, w["row_version"].as_i64());
                assert_eq!(g.scopes, string_map(&w["scopes"]));
                assert_eq!(
                    g.payload.as_ref().map(hex::encode),
                    w["payload_hex"].as_str().map(str::to_owned)
                );
            }
        }
    }
}

fn check_push_results(storage: &PostgresStorage, partition: &str, expected: &Value) {
    for record in expected["push_results"].as_array().unwrap() {
        let client = record["client_id"].as_str().unwrap();
        let commit = record["client_commit_id"].as_str().unwrap();
        let stored = storage
            .get_push_result(partition, client, commit)
            .unwrap()
            .expect("push result");
        let got: Value = serde_json::from_str(&stored.to_json()).unwrap();
        assert_eq!(got, record["document"], "push result {client}/{commit}");
    }
}

fn check_clients(storage: &PostgresStorage, partition: &str, expected: &Value) {
    let want = expected["clients"].as_array().unwrap();
    let records = storage.list_client_records(partition).unwrap();
    assert_eq!(records.len(), want.len(), "{partition}: client records");
    for w in want {
        let id = w["client_id"].as_str().unwrap();
        let r = storage
            .get_client_record(partition, id)
            .unwrap()
            .expect("client record");
        assert_eq!(r.actor_id, w["actor_id"].as_str().unwrap());
        assert_eq!(
            i64::from(r.wire_version),
            w["wire_version"].as_i64().unwrap()
        );
        assert_eq!(r.cursor, w["cursor"].as_i64().unwrap());
        assert_eq!(r.updated_at_ms, w["updated_at_ms"].as_i64().unwrap());
        let subs: Vec<Value> = r
            .subscriptions
            .iter()
            .map(|s| json!({"id": s.id, "table": s.table, "scopes": s.scopes}))
            .collect();
        assert_eq!(
            Value::Array(subs),
            w["subscriptions"],
            "subscriptions of {id}"
        );
        assert!(records.contains(&r));
    }
    let cursors = storage.list_client_cursors(partition).unwrap();
    assert_eq!(cursors.len(), want.len());
}

fn check_blobs(storage: &PostgresStorage, partition: &str, expected: &Value) {
    let mut by_blob: BTreeMap<String, BTreeSet<(String, String)>> = BTreeMap::new();
    for entry in expected["blob_refs"].as_array().unwrap() {
        for blob in entry["blob_ids"].as_array().unwrap() {
            by_blob
                .entry(blob.as_str().unwrap().to_owned())
                .or_default()
                .insert((
                    entry["table"].as_str().unwrap().to_owned(),
                    entry["row_id"].as_str().unwrap().to_owned(),
                ));
        }
    }
    let ids = storage.list_referenced_blob_ids(partition).unwrap();
    assert_eq!(
        ids,
        by_blob.keys().cloned().collect::<Vec<_>>(),
        "{partition}: referenced blob ids"
    );
    for (blob, rows) in &by_blob {
        let got: BTreeSet<(String, String)> = storage
            .list_rows_referencing_blob(partition, blob)
            .unwrap()
            .into_iter()
            .map(|r| (r.table, r.row_id))
            .collect();
        assert_eq!(&got, rows, "rows referencing {blob}");
    }
}

fn check_index_lookups(storage: &PostgresStorage, partition: &str, expected: &Value) {
    for (id, row) in obj(&expected["todos"]["rows"]) {
        let values = vec![
            RowValue::String(row["values"]["list_id"].as_str().unwrap().to_owned()),
            RowValue::Integer(row["values"]["position"].as_i64().unwrap()),
        ];
        let found = storage
            .scan_rows_by_index(
                partition,
                &IndexRowScanQuery {
                    table: "todos".into(),
                    index: "todos_by_list_position".into(),
                    values,
                    after_row_id: None,
                    limit: 1000,
                },
            )
            .unwrap();
        assert!(
            found.iter().any(|r| &r.row_id == id),
            "index lookup finds {id}"
        );
    }
}

/// `(table, column, collation)` of every key column: the two key columns of
/// the application tables and the *K* columns of the internal tables.
fn key_collations(db: &TestDb, schema: &CompiledSchema) -> Vec<(String, String, Option<String>)> {
    let mut keys: Vec<(String, String)> = schema
        .tables
        .iter()
        .flat_map(|t| {
            [
                (t.name.clone(), "_sync_partition".to_owned()),
                (t.name.clone(), "_sync_row_id".to_owned()),
            ]
        })
        .collect();
    for (table, columns) in sync_schema::INTERNAL_KEY_COLUMNS {
        keys.extend(
            columns
                .iter()
                .map(|c| ((*table).to_owned(), (*c).to_owned())),
        );
    }
    let mut raw = db.raw();
    keys.into_iter()
        .map(|(table, column)| {
            let collation: Option<String> = raw
                .query_one(
                    "SELECT CASE WHEN a.attcollation = 100 THEN NULL ELSE co.collname::text END \
                     FROM pg_attribute a LEFT JOIN pg_collation co ON co.oid = a.attcollation \
                     WHERE a.attrelid = to_regclass(quote_ident($1)) AND a.attname = $2",
                    &[&table, &column],
                )
                .unwrap_or_else(|e| panic!("{table}.{column}: {e}"))
                .get(0);
            (table, column, collation)
        })
        .collect()
}

#[test]
fn reference_database_opens_upgrades_and_reads_back_exactly() {
    let manifest = manifest();
    let db = TestDb::new();
    load(&db);
    let storage = db.open();
    let schema = schema_of(&manifest["schema"]);
    storage
        .ensure_schema(&schema, &EnsureOptions::default())
        .expect("ensure_schema over the reference database");

    for (table, column, collation) in key_collations(&db, &schema) {
        assert_eq!(
            collation.as_deref(),
            Some("C"),
            "{table}.{column} converted to COLLATE \"C\""
        );
    }
    let marker = storage.read_schema_marker().unwrap().expect("marker");
    assert_eq!(marker.schema_version, 1);
    assert_eq!(
        serde_json::from_str::<Value>(&marker.layouts).unwrap(),
        manifest["stored_schema_meta"]["layouts"]
    );

    let partitions = obj(&manifest["partitions"]);
    assert_eq!(
        storage.list_partitions().unwrap(),
        partitions.keys().cloned().collect::<Vec<_>>()
    );
    let registry = storage.list_partition_registry().unwrap();
    for (name, expected) in partitions {
        let entry = registry
            .iter()
            .find(|e| &e.partition == name)
            .expect("registry entry");
        assert_eq!(
            entry.log_epoch,
            expected["registry"]["log_epoch"].as_str().unwrap()
        );
        assert_eq!(
            entry.epoch_required,
            expected["registry"]["epoch_required"].as_bool().unwrap()
        );
        assert_eq!(
            entry.last_authenticated_at_ms,
            expected["registry"]["last_authenticated_at_ms"]
                .as_i64()
                .unwrap()
        );
        assert_eq!(
            storage.get_max_commit_seq(name).unwrap(),
            expected["max_commit_seq"].as_i64().unwrap()
        );
        assert_eq!(
            storage.get_horizon_seq(name).unwrap(),
            expected["horizon_seq"].as_i64().unwrap()
        );
        check_rows(
            &storage,
            &schema,
            name,
            &expected["tables"],
            &expected["scope_values_seen"],
        );
        check_projections(&storage, &schema, name, &expected["tables"]);
        check_commits(&storage, &schema, name, expected);
        check_push_results(&storage, name, expected);
        check_clients(&storage, name, expected);
        check_blobs(&storage, name, expected);
        check_index_lookups(&storage, name, &expected["tables"]);
    }

    // The upgraded database takes new pushes: dense seq, fence satisfied.
    let next = storage.get_max_commit_seq("acme").unwrap() + 1;
    let mut tx = storage.begin("acme").unwrap();
    tx.lock_partition_for_push().unwrap();
    let seq = tx
        .append_commit(&commit("c-new", "cc-new", vec![]))
        .unwrap();
    tx.commit().unwrap();
    assert_eq!(seq, next);

    // A second instance starts warm: same version, nothing left to upgrade.
    db.open()
        .ensure_schema(&schema, &EnsureOptions::default())
        .expect("warm ensure");
}

#[test]
fn reference_database_bumps_to_v2_like_the_reference() {
    let manifest = manifest();
    let check = &manifest["upgrade_check"];
    let db = TestDb::new();
    load(&db);
    let storage = db.open();
    let v1 = schema_of(&manifest["schema"]);
    let v2 = schema_of(&check["schema_v2"]);
    storage
        .ensure_schema(&v2, &EnsureOptions::default())
        .expect("bump of the reference database to v2");
    let expected = &check["expected"];

    let marker = storage.read_schema_marker().unwrap().expect("marker");
    assert_eq!(
        marker.schema_version,
        expected["stored_schema_meta"]["schema_version"]
            .as_i64()
            .unwrap()
    );
    assert_eq!(
        serde_json::from_str::<Value>(&marker.layouts).unwrap(),
        expected["stored_schema_meta"]["layouts"]
    );
    assert_eq!(marker.required_writer_version, Some(2));

    for (partition, tables) in obj(&expected["live_rows_after"]) {
        for table in &v2.tables {
            let want = obj(&tables[&table.name]);
            let rows = all_rows(&storage, partition, &table.name);
            assert_eq!(
                rows.len(),
                want.len(),
                "{partition}/{}: rows after",
                table.name
            );
            for row in rows {
                let w = &want[&row.row_id];
                assert_eq!(row.server_version, w["server_version"].as_i64().unwrap());
                assert_eq!(row.scopes, string_map(&w["scopes"]));
                assert_eq!(
                    hex::encode(&row.payload),
                    w["payload_hex"].as_str().unwrap(),
                    "{}",
                    row.row_id
                );
                assert_eq!(
                    decoded_values(table, &row.payload),
                    w["values"],
                    "{}",
                    row.row_id
                );
            }
        }
    }

    let mut raw = db.raw();
    for (table, names) in obj(&expected["relational_indexes_after"]["postgres"]) {
        let got: Vec<String> = raw
            .query(
                "SELECT ic.relname::text FROM pg_index ix JOIN pg_class ic ON ic.oid = ix.indexrelid \
                 WHERE ix.indrelid = to_regclass(quote_ident($1)) AND NOT ix.indisprimary ORDER BY 1",
                &[table],
            )
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        let want: Vec<String> = names
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_str().unwrap().to_owned())
            .collect();
        assert_eq!(got, want, "indexes of {table}");
    }

    if expected["change_payloads_unchanged"].as_bool() == Some(true) {
        for (partition, part) in obj(&manifest["partitions"]) {
            for c in part["commits"].as_array().unwrap() {
                for ch in c["changes"].as_array().unwrap() {
                    let Some(hex_payload) = ch["payload_hex"].as_str() else {
                        continue;
                    };
                    let stored: String = raw
                        .query_one(
                            "SELECT encode(payload, 'hex') FROM sync_changes WHERE partition = $1 \
                             AND commit_seq = $2 AND row_id = $3 AND tbl = $4 AND op = 1 \
                             AND row_version = $5",
                            &[
                                partition,
                                &c["commit_seq"].as_i64().unwrap(),
                                &ch["row_id"].as_str().unwrap(),
                                &ch["table"].as_str().unwrap(),
                                &ch["row_version"].as_i64().unwrap(),
                            ],
                        )
                        .unwrap()
                        .get(0);
                    assert_eq!(
                        stored, hex_payload,
                        "change payload of {partition}/{}",
                        c["commit_seq"]
                    );
                }
            }
        }
    }
    let _ = v1;
}
