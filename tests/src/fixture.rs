//! The schema family shared by the model, stress, isolation and hostile-input
//! tests: two synced tables whose layouts grow by one nullable column per
//! schema version, so that every "migrate" step is a legal bump with a row
//! rewrite.
//!
//! - `items(id string, grp string, n integer, extra_2 string?, …, extra_v string?)`,
//!   materialized, scope `grp:{grp}`, index `items_by_n(n)`;
//! - `notes(id string, grp string, body string?)`, materialized, scope
//!   `grp:{grp}`.

use std::collections::BTreeMap;

use serde_json::json;
use sync_core::{codec, CompiledSchema, NewChange, RowValue, StoredRow, StoredScopes};

/// The table whose layout grows with every version.
pub const ITEMS: &str = "items";
/// The table whose layout never changes.
pub const NOTES: &str = "notes";
/// Both tables, in schema order.
pub const TABLES: [&str; 2] = [ITEMS, NOTES];
/// The scope variable of both tables.
pub const SCOPE_VAR: &str = "grp";

/// The compiled schema at `version` (≥ 1).
pub fn schema(version: i32) -> CompiledSchema {
    let mut items = vec![
        json!({"name": "id", "type": "string"}),
        json!({"name": "grp", "type": "string"}),
        json!({"name": "n", "type": "integer"}),
    ];
    for v in 2..=version {
        items.push(json!({"name": format!("extra_{v}"), "type": "string", "nullable": true}));
    }
    let value = json!({
        "version": version,
        "tables": [
            {
                "name": ITEMS,
                "primaryKey": "id",
                "columns": items,
                "scopes": ["grp:{grp}"],
                "indexes": [{"name": "items_by_n", "columns": ["n"]}]
            },
            {
                "name": NOTES,
                "primaryKey": "id",
                "columns": [
                    {"name": "id", "type": "string"},
                    {"name": "grp", "type": "string"},
                    {"name": "body", "type": "string", "nullable": true}
                ],
                "scopes": ["grp:{grp}"]
            }
        ]
    });
    let input = sync_schema::parse_schema_value(&value)
        .unwrap_or_else(|e| panic!("fixture schema v{version} parses: {e:?}"));
    sync_schema::compile(&input)
        .unwrap_or_else(|e| panic!("fixture schema v{version} compiles: {e:?}"))
}

/// Every fixture schema from 1 through `max`, by version (for the invariant
/// checker, which decodes change payloads under their writer's layout).
pub fn schema_history(max: i32) -> BTreeMap<i32, CompiledSchema> {
    (1..=max.max(1)).map(|v| (v, schema(v))).collect()
}

/// The scopes of a row of either table.
pub fn scopes(grp: &str) -> StoredScopes {
    [(SCOPE_VAR.to_owned(), grp.to_owned())].into()
}

/// The values of a row of `table` as the code of `version` writes it: every
/// appended column is NULL except the newest, which carries a marker string.
pub fn row_values(table: &str, version: i32, id: &str, grp: &str, n: i64) -> Vec<RowValue> {
    let mut values = vec![
        RowValue::String(id.to_owned()),
        RowValue::String(grp.to_owned()),
    ];
    if table == NOTES {
        values.push(RowValue::String(format!("body {n}")));
        return values;
    }
    values.push(RowValue::Integer(n));
    for v in 2..=version {
        values.push(if v == version {
            RowValue::String(format!("v{v}:{n}"))
        } else {
            RowValue::Null
        });
    }
    values
}

/// The payload of `values` under `table` of `schema`.
pub fn encode(schema: &CompiledSchema, table: &str, values: &[RowValue]) -> Vec<u8> {
    let compiled = schema
        .table(table)
        .unwrap_or_else(|| panic!("fixture table {table}"));
    codec::encode_row(compiled, values).unwrap_or_else(|e| panic!("fixture row encodes: {e:?}"))
}

/// A stored row of `table` as the code of `schema.version` writes it.
pub fn row(
    schema: &CompiledSchema,
    table: &str,
    id: &str,
    grp: &str,
    n: i64,
    server_version: i64,
) -> StoredRow {
    let values = row_values(table, schema.version, id, grp, n);
    StoredRow {
        row_id: id.to_owned(),
        server_version,
        scopes: scopes(grp),
        payload: encode(schema, table, &values),
        column_versions: None,
    }
}

/// The upsert change that records `row`.
pub fn upsert_change(table: &str, row: &StoredRow) -> NewChange {
    NewChange::upsert(
        table,
        row.row_id.clone(),
        row.server_version,
        row.scopes.clone(),
        row.payload.clone(),
    )
}
