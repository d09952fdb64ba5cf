//! Reference data written by the reference implementation 0.15
//! (`shared/fixtures/reference-0.15/A.manifest.json`): the schema compiles,
//! and its layouts agree byte-for-byte with what the reference stored, before
//! and after the reference's own upgrade to `schema_v2`.
//!
//! The fixture directory must exist: a missing directory fails loudly.

mod support;

use serde_json::Value;
use support::reference_fixtures_dir;
use sync_schema::{
    compare_for_bump, compare_same_version, layouts_json, parse_layouts, parse_schema_value,
    physical_index_name, plan_migration, ObservedTable, ObservedTables, StoredLayouts,
};

fn manifest() -> Value {
    let path = reference_fixtures_dir().join("A.manifest.json");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).expect("manifest is JSON")
}

fn compile_value(value: &Value) -> sync_core::CompiledSchema {
    sync_schema::compile(&parse_schema_value(value).expect("reference schema parses"))
        .expect("reference schema compiles")
}

/// The stored layouts object serialized compactly, table order preserved.
fn compact(value: &Value) -> String {
    serde_json::to_string(value).unwrap()
}

#[test]
fn reference_schema_compiles() {
    let manifest = manifest();
    let schema = compile_value(&manifest["schema"]);
    assert_eq!(schema.version, 1);
    let names: Vec<&str> = schema.tables.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["lists", "todos"]);
    assert!(schema.tables.iter().all(|t| t.materialize));
    assert_eq!(schema.table("lists").unwrap().declared_variables, ["id"]);
    assert_eq!(
        schema.table("todos").unwrap().declared_variables,
        ["list_id"]
    );
    assert_eq!(schema.table("todos").unwrap().blob_ref_column_indices, [7]);
}

#[test]
fn stored_layouts_equal_the_computed_layouts_byte_for_byte() {
    let manifest = manifest();
    let schema = compile_value(&manifest["schema"]);
    let meta = &manifest["stored_schema_meta"];
    assert_eq!(meta["schema_version"], 1);
    let text = compact(&meta["layouts"]);
    assert_eq!(layouts_json(&schema), text);
    let stored = parse_layouts(Some(&text)).unwrap();
    assert_eq!(stored, StoredLayouts::from_schema(&schema));
    compare_same_version(&schema, &stored).unwrap();
}

#[test]
fn physical_index_names_match_the_reference() {
    let manifest = manifest();
    let indexes = manifest["physical_indexes"].as_array().unwrap();
    assert!(!indexes.is_empty());
    for index in indexes {
        let declared = index["declared_name"].as_str().unwrap();
        assert_eq!(
            physical_index_name(declared),
            index["physical_name"].as_str().unwrap()
        );
    }
}

#[test]
fn upgrade_check_layouts_equal_the_reference_upgrade() {
    let manifest = manifest();
    let upgrade = &manifest["upgrade_check"];
    let v1 = compile_value(&manifest["schema"]);
    let v2 = compile_value(&upgrade["schema_v2"]);
    assert_eq!(v2.version, 2);
    let expected = &upgrade["expected"]["stored_schema_meta"];
    assert_eq!(expected["schema_version"], 2);
    let text = compact(&expected["layouts"]);
    assert_eq!(layouts_json(&v2), text);
    assert_eq!(
        parse_layouts(Some(&text)).unwrap(),
        StoredLayouts::from_schema(&v2)
    );

    // The bump is append-only for both tables and rebuilds the indexes the
    // reference ended with.
    let old = StoredLayouts::from_schema(&v1);
    for table in &v2.tables {
        assert!(compare_for_bump(table, old.get(&table.name).unwrap()).unwrap());
    }
    let after = &upgrade["expected"]["relational_indexes_after"];
    for dialect in [sync_sqlite::DIALECT, sync_postgres::DIALECT] {
        let observed: ObservedTables = v1
            .tables
            .iter()
            .map(|t| ObservedTable::as_created(t, dialect))
            .collect();
        let plan = plan_migration(&v2, &old, &observed, dialect).unwrap();
        assert!(plan.rewrites.iter().all(|r| r.migrate && !r.backfill));
        for table in ["lists", "todos"] {
            let mut created: Vec<String> = v2
                .table(table)
                .unwrap()
                .indexes
                .iter()
                .map(|ix| physical_index_name(&ix.name))
                .collect();
            created.sort();
            let expected: Vec<String> = after[dialect.as_str()][table]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_str().unwrap().to_owned())
                .collect();
            assert_eq!(created, expected, "{dialect} {table}");
            for name in &expected {
                assert!(plan
                    .to_sql_lines()
                    .iter()
                    .any(|l| l.starts_with(&format!("CREATE INDEX IF NOT EXISTS \"{name}\""))));
            }
        }
    }
}
