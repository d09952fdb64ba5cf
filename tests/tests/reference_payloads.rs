//! Row payloads written by the reference implementation (fixture set A of
//! `shared/fixtures/reference-0.15`) decode to the manifest's values and
//! re-encode to the same bytes; the v2 upgrade's rewritten payloads equal
//! `reencode(v1 layout, v2 columns, original payload)`.
//!
//! The fixture folder is `../../shared/fixtures/reference-0.15` relative to
//! this package, or the folder named by `SYNCSTORE_FIXTURES`. A missing or
//! unreadable manifest fails the tests; it never skips them.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::{Map, Value};
use sync_core::codec::{decode, encode, reencode};
use sync_core::{ColumnType, CompiledColumn, LayoutColumn, RowValue};

const DEFAULT_FIXTURES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../shared/fixtures/reference-0.15"
);

fn fixtures_dir() -> PathBuf {
    std::env::var_os("SYNCSTORE_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_FIXTURES))
}

fn manifest() -> Value {
    let path = fixtures_dir().join("A.manifest.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|error| {
        panic!(
            "reference fixture manifest {} is missing or unreadable ({error}); \
             set SYNCSTORE_FIXTURES to the folder holding A.manifest.json",
            path.display()
        )
    });
    serde_json::from_str(&text)
        .unwrap_or_else(|error| panic!("{} is not JSON: {error}", path.display()))
}

fn field<'a>(value: &'a Value, key: &str) -> &'a Value {
    value
        .get(key)
        .unwrap_or_else(|| panic!("manifest member `{key}` missing in {value:.200}"))
}

fn object<'a>(value: &'a Value, key: &str) -> &'a Map<String, Value> {
    field(value, key)
        .as_object()
        .unwrap_or_else(|| panic!("manifest member `{key}` is not an object"))
}

fn array<'a>(value: &'a Value, key: &str) -> &'a [Value] {
    field(value, key)
        .as_array()
        .unwrap_or_else(|| panic!("manifest member `{key}` is not an array"))
}

fn text<'a>(value: &'a Value, key: &str) -> &'a str {
    field(value, key)
        .as_str()
        .unwrap_or_else(|| panic!("manifest member `{key}` is not a string"))
}

/// Layout columns from `{name, type, nullable}` objects (schema columns or
/// stored layouts), built without the schema compiler.
fn layout_columns(columns: &[Value]) -> Vec<LayoutColumn> {
    columns
        .iter()
        .map(|column| LayoutColumn {
            name: text(column, "name").to_owned(),
            column_type: text(column, "type").to_owned(),
            nullable: field(column, "nullable")
                .as_bool()
                .expect("`nullable` is a boolean"),
        })
        .collect()
}

/// Table name → layout columns of a manifest `schema` object.
fn schema_layouts(schema: &Value) -> BTreeMap<String, Vec<LayoutColumn>> {
    array(schema, "tables")
        .iter()
        .map(|table| {
            (
                text(table, "name").to_owned(),
                layout_columns(array(table, "columns")),
            )
        })
        .collect()
}

fn compiled_columns(layout: &[LayoutColumn]) -> Vec<CompiledColumn> {
    layout
        .iter()
        .map(|column| {
            let column_type = column
                .known_type()
                .unwrap_or_else(|| panic!("unknown column type {:?}", column.column_type));
            CompiledColumn {
                name: column.name.clone(),
                column_type,
                nullable: column.nullable,
                crdt_type: None,
                encrypted: false,
                declared_type: None,
            }
        })
        .collect()
}

/// The manifest's `values` object as codec values, in column order
/// (`value_encoding`: bytes as lowercase hex, json/blob_ref verbatim).
fn expected_values(
    columns: &[LayoutColumn],
    values: &Map<String, Value>,
    at: &str,
) -> Vec<RowValue> {
    let names: Vec<&str> = columns.iter().map(|c| c.name.as_str()).collect();
    let mut keys: Vec<&str> = values.keys().map(String::as_str).collect();
    let mut sorted_names = names.clone();
    keys.sort_unstable();
    sorted_names.sort_unstable();
    assert_eq!(keys, sorted_names, "{at}: value keys are the column names");

    columns
        .iter()
        .map(|column| {
            let value = &values[&column.name];
            if value.is_null() {
                return RowValue::Null;
            }
            let wrong = || -> ! { panic!("{at}: column {} has unexpected {value}", column.name) };
            let as_text = || value.as_str().unwrap_or_else(|| wrong()).to_owned();
            let as_hex = || hex::decode(as_text()).unwrap_or_else(|_| wrong());
            match column.known_type().unwrap_or_else(|| wrong()) {
                ColumnType::String => RowValue::String(as_text()),
                ColumnType::Integer => RowValue::Integer(value.as_i64().unwrap_or_else(|| wrong())),
                ColumnType::Float => RowValue::Float(value.as_f64().unwrap_or_else(|| wrong())),
                ColumnType::Boolean => {
                    RowValue::Boolean(value.as_bool().unwrap_or_else(|| wrong()))
                }
                ColumnType::Json => RowValue::Json(as_text()),
                ColumnType::BlobRef => RowValue::BlobRef(as_text()),
                ColumnType::Bytes => RowValue::Bytes(as_hex()),
                ColumnType::Crdt => RowValue::Crdt(as_hex()),
            }
        })
        .collect()
}

/// Equality with floats compared by bit pattern.
fn same(a: &[RowValue], b: &[RowValue]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|pair| match pair {
            (RowValue::Float(x), RowValue::Float(y)) => x.to_bits() == y.to_bits(),
            (x, y) => x == y,
        })
}

/// Decodes `payload_hex` of `item` under `columns`, compares with its
/// `values`, re-encodes it, and returns the payload bytes.
fn check_payload(columns: &[LayoutColumn], item: &Value, at: &str) -> Vec<u8> {
    let payload = hex::decode(text(item, "payload_hex"))
        .unwrap_or_else(|error| panic!("{at}: payload_hex is not hex: {error}"));
    let expected = expected_values(columns, object(item, "values"), at);
    let decoded =
        decode(columns, &payload).unwrap_or_else(|error| panic!("{at}: decode failed: {error:?}"));
    assert!(
        same(&decoded, &expected),
        "{at}: decoded {decoded:?}, manifest says {expected:?}"
    );
    let encoded =
        encode(columns, &decoded).unwrap_or_else(|error| panic!("{at}: encode failed: {error:?}"));
    assert_eq!(encoded, payload, "{at}: re-encoding changed the bytes");
    payload
}

fn table_columns<'a>(
    layouts: &'a BTreeMap<String, Vec<LayoutColumn>>,
    table: &str,
) -> &'a [LayoutColumn] {
    layouts
        .get(table)
        .unwrap_or_else(|| panic!("table {table} is not in the manifest schema"))
}

#[test]
fn schema_columns_match_the_stored_v1_layouts() {
    let manifest = manifest();
    let schema = schema_layouts(field(&manifest, "schema"));
    let stored = object(field(&manifest, "stored_schema_meta"), "layouts");
    assert_eq!(schema.len(), stored.len());
    for (table, columns) in stored {
        let columns = layout_columns(columns.as_array().expect("layout array"));
        assert_eq!(&columns, table_columns(&schema, table), "table {table}");
    }
}

#[test]
fn live_row_payloads_decode_to_the_manifest_values_and_reencode_identically() {
    let manifest = manifest();
    let layouts = schema_layouts(field(&manifest, "schema"));
    let mut checked = 0usize;
    for (partition, data) in object(&manifest, "partitions") {
        for (table, rows) in object(data, "tables") {
            let columns = table_columns(&layouts, table);
            let rows = object(rows, "rows");
            assert_eq!(
                field(
                    object(data, "tables").get(table).expect("table"),
                    "row_count"
                )
                .as_u64(),
                Some(rows.len() as u64),
                "{partition}/{table}: row_count"
            );
            for (row_id, row) in rows {
                check_payload(columns, row, &format!("{partition}/{table}/{row_id}"));
                checked += 1;
            }
        }
    }
    println!("verified {checked} live-row payloads");
    assert!(checked > 0, "no live-row payload was checked");
}

#[test]
fn commit_change_payloads_decode_to_the_manifest_values_and_reencode_identically() {
    let manifest = manifest();
    let layouts = schema_layouts(field(&manifest, "schema"));
    let (mut checked, mut deletes) = (0usize, 0usize);
    for (partition, data) in object(&manifest, "partitions") {
        for commit in array(data, "commits") {
            let seq = field(commit, "commit_seq");
            for (idx, change) in array(commit, "changes").iter().enumerate() {
                let table = text(change, "table");
                let at = format!("{partition}/commit {seq}/change {idx} ({table})");
                match text(change, "op") {
                    "upsert" => {
                        check_payload(table_columns(&layouts, table), change, &at);
                        checked += 1;
                    }
                    "delete" => {
                        let payload = change.get("payload_hex").unwrap_or(&Value::Null);
                        assert!(payload.is_null(), "{at}: delete with payload");
                        deletes += 1;
                    }
                    other => panic!("{at}: unknown op {other}"),
                }
            }
        }
    }
    println!("verified {checked} commit-change payloads ({deletes} deletes carry none)");
    assert!(checked > 0, "no commit-change payload was checked");
}

#[test]
fn upgrade_check_payloads_decode_under_v2_and_equal_reencode_of_the_v1_payloads() {
    let manifest = manifest();
    let upgrade = field(&manifest, "upgrade_check");
    let v2_layouts = schema_layouts(field(upgrade, "schema_v2"));
    let stored_v1 = object(field(&manifest, "stored_schema_meta"), "layouts");
    let expected = field(upgrade, "expected");
    let stored_v2 = object(field(expected, "stored_schema_meta"), "layouts");
    let partitions = object(&manifest, "partitions");

    let mut checked = 0usize;
    for (partition, tables) in object(expected, "live_rows_after") {
        for (table, rows_after) in tables.as_object().expect("tables object") {
            let v2_layout = table_columns(&v2_layouts, table);
            let stored_v2_layout =
                layout_columns(stored_v2[table].as_array().expect("v2 layout array"));
            assert_eq!(
                v2_layout, stored_v2_layout,
                "{table}: v2 schema = v2 stored layout"
            );
            let v2_columns = compiled_columns(v2_layout);
            let v1_layout = layout_columns(stored_v1[table].as_array().expect("v1 layout array"));
            let rows_before = object(&partitions[partition]["tables"][table], "rows");
            let rows_after = rows_after.as_object().expect("rows object");
            assert_eq!(
                rows_before.keys().collect::<Vec<_>>(),
                rows_after.keys().collect::<Vec<_>>(),
                "{partition}/{table}: the upgrade keeps every live row"
            );

            for (row_id, row_after) in rows_after {
                let at = format!("upgrade {partition}/{table}/{row_id}");
                let after = check_payload(v2_layout, row_after, &at);
                let before =
                    hex::decode(text(&rows_before[row_id], "payload_hex")).expect("v1 payload hex");
                let rewritten = reencode(&v1_layout, &v2_columns, &before)
                    .unwrap_or_else(|error| panic!("{at}: reencode failed: {error:?}"));
                assert_eq!(
                    rewritten, after,
                    "{at}: reencode differs from the reference"
                );
                checked += 1;
            }
        }
    }
    println!("verified {checked} upgrade payloads (v2 decode, re-encode and reencode from v1)");
    assert!(checked > 0, "no upgrade payload was checked");
}
