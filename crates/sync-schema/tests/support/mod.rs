//! Shared fixtures and helpers for the integration tests of `sync-schema`.
#![allow(dead_code)]

pub mod scenarios;

use std::path::PathBuf;

use serde_json::{json, Value};
use sync_core::{CompiledSchema, Error, Result};
use sync_schema::{compile, parse_schema_json};

/// FIX1 of `conformance-checklist.md` §0.3.
pub const FIX1: &str = include_str!("../fixtures/fix1.json");
/// FIX2: FIX1 at v2 with `tasks.assignee` appended and `tasks_by_assignee`
/// replacing `tasks_by_project_title`.
pub const FIX2: &str = include_str!("../fixtures/fix2.json");
/// Every column type, scopes of both forms, a unique index and a
/// non-materialized table.
pub const EVERY_TYPE: &str = include_str!("../fixtures/every_type.json");

/// Parses and compiles schema text.
pub fn compile_text(text: &str) -> Result<CompiledSchema> {
    compile(&parse_schema_json(text)?)
}

/// Parses and compiles schema text that must be valid.
pub fn compiled(text: &str) -> CompiledSchema {
    compile_text(text).unwrap_or_else(|e| panic!("schema must compile: {e:?}"))
}

pub fn fix1() -> CompiledSchema {
    compiled(FIX1)
}

pub fn fix2() -> CompiledSchema {
    compiled(FIX2)
}

/// The error of schema text that must fail.
pub fn compile_error(text: &str) -> Error {
    match compile_text(text) {
        Ok(_) => panic!("schema must be rejected: {text}"),
        Err(e) => e,
    }
}

/// A valid table `ok(id string PK, v string)` scoped by `s:{v}`.
pub fn ok_table() -> Value {
    json!({
        "name": "ok",
        "primaryKey": "id",
        "columns": [{"name": "id", "type": "string"}, {"name": "v", "type": "string"}],
        "scopes": ["s:{v}"]
    })
}

/// `ok_table()` with one member replaced.
pub fn ok_table_with(member: &str, value: Value) -> Value {
    let mut table = ok_table();
    table[member] = value;
    table
}

/// A v1 schema text with these tables.
pub fn schema_text(tables: Vec<Value>) -> String {
    json!({"version": 1, "tables": tables}).to_string()
}

/// A v1 schema text with one table having these columns (PK `id`, scope `s:{v}`
/// unless `scopes` is given).
pub fn columns_schema(columns: Value) -> String {
    schema_text(vec![ok_table_with("columns", columns)])
}

/// The reference fixture directory: `SYNCSTORE_FIXTURES` when set, else
/// `shared/fixtures/reference-0.15` next to the workspace. Panics when it is
/// missing: reference checks never skip.
pub fn reference_fixtures_dir() -> PathBuf {
    let dir = match std::env::var_os("SYNCSTORE_FIXTURES") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../../shared/fixtures/reference-0.15"),
    };
    assert!(
        dir.join("A.manifest.json").is_file(),
        "reference fixtures not found at {} (set SYNCSTORE_FIXTURES to the reference-0.15 directory)",
        dir.display()
    );
    dir
}

/// `layouts_json(FIX1)`.
pub fn fix1_layouts_text() -> String {
    sync_schema::layouts_json(&fix1())
}
