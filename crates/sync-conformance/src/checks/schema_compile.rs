//! §2 Schema input and compile (bad input), C-041…C-076.
//!
//! Pure checks of `sync-schema`: parsing, compile rules and messages,
//! physical index names, application-table DDL text and layouts JSON. They
//! run on every dialect; the context is unused.

use serde_json::{json, Value};
use sync_core::{ColumnType, CompiledSchema, CompiledTable, Error, ErrorCode};
use sync_schema::{
    create_index_sql, create_table_sql, layouts_json, physical_index_name, Dialect,
    INTERNAL_COLUMNS,
};

use crate::check::{expect_code, expect_detail, CheckDef, CheckResult, Failure};
use crate::context::Ctx;
use crate::fixtures::fix1;
use crate::registry::check;
use crate::{check, check_eq};

/// Group name.
pub(crate) const GROUP: &str = "schema-compile";

/// The checks of this group.
pub(crate) const CHECKS: &[CheckDef] = &[
    check(
        GROUP,
        "C-041",
        "text that is not JSON is schema.malformed_input",
        c041_not_json,
    ),
    check(
        GROUP,
        "C-042",
        "unknown table member is malformed_input at its pointer",
        c042_unknown_member,
    ),
    check(
        GROUP,
        "C-043",
        "a non-boolean nullable is malformed_input",
        c043_nullable_not_boolean,
    ),
    check(
        GROUP,
        "C-044",
        "a missing primaryKey is malformed_input",
        c044_missing_primary_key,
    ),
    check(
        GROUP,
        "C-045",
        "version 0 / 2^31 / 1.5: invalid_version / invalid_version / malformed_input",
        c045_version_bounds,
    ),
    check(
        GROUP,
        "C-046",
        "table named sync_changes is a reserved-prefix identifier",
        c046_reserved_table_name,
    ),
    check(
        GROUP,
        "C-047",
        "columns _sync_payload and _synchronize are reserved-prefix identifiers",
        c047_reserved_column_names,
    ),
    check(
        GROUP,
        "C-048",
        "a 64-byte table name is too-long with byteLength 64",
        c048_table_name_too_long,
    ),
    check(
        GROUP,
        "C-049",
        "a 63-byte index name compiles",
        c049_index_name_63_bytes,
    ),
    check(
        GROUP,
        "C-050",
        "a 64-byte UTF-8 index name fails with the byte-length message",
        c050_index_name_utf8_too_long,
    ),
    check(
        GROUP,
        "C-051",
        "an empty column name is an empty identifier",
        c051_empty_column_name,
    ),
    check(
        GROUP,
        "C-052",
        "a column name containing NUL is an invalid-character identifier",
        c052_nul_in_column_name,
    ),
    check(
        GROUP,
        "C-053",
        "tables Tasks and tasks are duplicate_table",
        c053_duplicate_table_case_insensitive,
    ),
    check(
        GROUP,
        "C-054",
        "columns differing only in case are duplicate_column",
        c054_duplicate_column_case_insensitive,
    ),
    check(
        GROUP,
        "C-055",
        "one index name in two tables is duplicate_index",
        c055_duplicate_index_across_tables,
    ),
    check(
        GROUP,
        "C-056",
        "an index without columns is invalid_index with the exact message",
        c056_index_without_columns,
    ),
    check(
        GROUP,
        "C-057",
        "index on an unknown column / a repeated column is invalid_index",
        c057_index_bad_columns,
    ),
    check(
        GROUP,
        "C-058",
        "primary key absent / float / nullable is invalid_primary_key",
        c058_invalid_primary_keys,
    ),
    check(
        GROUP,
        "C-059",
        "an empty scopes list is missing_scope",
        c059_missing_scope,
    ),
    check(
        GROUP,
        "C-060",
        "malformed scope patterns are invalid_scope_pattern",
        c060_invalid_scope_patterns,
    ),
    check(
        GROUP,
        "C-061",
        "pattern a:b:{v} compiles with prefix a:b and variable v",
        c061_prefix_with_colon,
    ),
    check(
        GROUP,
        "C-062",
        "a scope pattern naming an unknown column is invalid_scope_column",
        c062_scope_unknown_column,
    ),
    check(
        GROUP,
        "C-063",
        "nullable / float / encrypted scope columns are invalid_scope_column",
        c063_scope_column_kinds,
    ),
    check(
        GROUP,
        "C-064",
        "one variable on two columns of a table is scope_variable_conflict",
        c064_scope_variable_conflict,
    ),
    check(
        GROUP,
        "C-065",
        "allowed scope variable reuse compiles",
        c065_scope_variable_reuse_allowed,
    ),
    check(
        GROUP,
        "C-066",
        "crdt without crdtType / crdtType on a string are invalid_crdt_column",
        c066_invalid_crdt_columns,
    ),
    check(
        GROUP,
        "C-067",
        "encrypted string / declaredType without encrypted are invalid_encrypted_column",
        c067_invalid_encrypted_columns,
    ),
    check(
        GROUP,
        "C-068",
        "column type decimal is unsupported_column_type",
        c068_unsupported_column_type,
    ),
    check(
        GROUP,
        "C-069",
        "1001 columns is too_many_columns",
        c069_too_many_columns,
    ),
    check(
        GROUP,
        "C-070",
        "materialize defaults follow the encryption rule",
        c070_materialize_defaults,
    ),
    check(
        GROUP,
        "C-071",
        "declared variables per table and schema-wide",
        c071_declared_variables,
    ),
    check(
        GROUP,
        "C-072",
        "the complete example compiles to every listed fact",
        c072_complete_example,
    ),
    check(
        GROUP,
        "C-073",
        "physical_index_name vectors, length bound and determinism",
        c073_physical_index_names,
    ),
    check(
        GROUP,
        "C-074",
        "DDL of tasks: the dialect's column types, NOT NULL iff not nullable, the key",
        c074_ddl_golden,
    ),
    check(
        GROUP,
        "C-075",
        "DDL of tasks: internal columns typed by the dialect, keys with its key collation",
        c075_ddl_internal_columns,
    ),
    check(
        GROUP,
        "C-076",
        "layouts_json(FIX1) is the exact canonical string",
        c076_layouts_json_exact,
    ),
];

// ---------------------------------------------------------------------------
// Input builders

/// A valid table `ok` (`id` string primary key, scope `s:{id}`) with `patch`
/// merged over it.
fn table(patch: Value) -> Value {
    let mut base = json!({
        "name": "ok",
        "primaryKey": "id",
        "columns": [{"name": "id", "type": "string"}],
        "scopes": ["s:{id}"]
    });
    if let (Some(base), Value::Object(patch)) = (base.as_object_mut(), patch) {
        base.extend(patch);
    }
    base
}

/// A table `ok` whose columns are `id` (primary key) followed by `extra`.
fn table_with_columns(extra: Value, patch: Value) -> Value {
    let mut columns = vec![json!({"name": "id", "type": "string"})];
    if let Value::Array(extra) = extra {
        columns.extend(extra);
    }
    let mut value = table(patch);
    value["columns"] = Value::Array(columns);
    value
}

/// A schema at version 1 with these tables.
fn schema(tables: Vec<Value>) -> Value {
    json!({"version": 1, "tables": tables})
}

/// Parses and compiles a schema value.
fn compile_value(value: &Value) -> sync_core::Result<CompiledSchema> {
    sync_schema::compile(&sync_schema::parse_schema_value(value)?)
}

/// Parses and compiles schema text.
fn compile_text(text: &str) -> sync_core::Result<CompiledSchema> {
    sync_schema::compile(&sync_schema::parse_schema_json(text)?)
}

/// Compiles `value`, failing the check unless it is an error with `code`.
fn expect_compile(value: &Value, code: ErrorCode, what: &str) -> CheckResult<Error> {
    expect_code(compile_value(value), code, what)
}

/// Compiles `value`, failing the check on error.
fn expect_ok(value: &Value, what: &str) -> CheckResult<CompiledSchema> {
    compile_value(value).map_err(|e| Failure::new(format!("{what}: expected Ok, got {e:?}")))
}

fn expect_identifier_failure(value: &Value, failure: &str, what: &str) -> CheckResult<Error> {
    let error = expect_compile(value, ErrorCode::SchemaInvalidIdentifier, what)?;
    expect_detail(&error, "failure", failure)?;
    Ok(error)
}

fn single_table(value: &Value) -> CheckResult<CompiledTable> {
    let compiled = expect_ok(value, "schema")?;
    compiled
        .tables
        .first()
        .cloned()
        .ok_or_else(|| Failure::new("compiled schema has no table"))
}

// ---------------------------------------------------------------------------
// Parsing

fn c041_not_json(_ctx: &mut Ctx<'_>) -> CheckResult {
    expect_code(
        compile_text("not json"),
        ErrorCode::SchemaMalformedInput,
        "text `not json`",
    )?;
    expect_code(
        compile_text("{\"version\":1,"),
        ErrorCode::SchemaMalformedInput,
        "truncated JSON",
    )?;
    Ok(())
}

fn c042_unknown_member(_ctx: &mut Ctx<'_>) -> CheckResult {
    let error = expect_compile(
        &schema(vec![table(json!({"materialise": true}))]),
        ErrorCode::SchemaMalformedInput,
        "table member materialise",
    )?;
    let expected = "schema input is malformed at /tables/0/materialise: ";
    check!(
        error.message().starts_with(expected),
        "message {:?} does not start with {expected:?}",
        error.message()
    );
    Ok(())
}

fn c043_nullable_not_boolean(_ctx: &mut Ctx<'_>) -> CheckResult {
    let value = schema(vec![table_with_columns(
        json!([{"name": "c", "type": "string", "nullable": "yes"}]),
        json!({}),
    )]);
    expect_compile(&value, ErrorCode::SchemaMalformedInput, "nullable \"yes\"")?;
    Ok(())
}

fn c044_missing_primary_key(_ctx: &mut Ctx<'_>) -> CheckResult {
    let mut value = table(json!({}));
    if let Some(object) = value.as_object_mut() {
        object.remove("primaryKey");
    }
    expect_compile(
        &schema(vec![value]),
        ErrorCode::SchemaMalformedInput,
        "no primaryKey",
    )?;
    Ok(())
}

fn c045_version_bounds(_ctx: &mut Ctx<'_>) -> CheckResult {
    let cases = [
        ("0", ErrorCode::SchemaInvalidVersion),
        ("2147483648", ErrorCode::SchemaInvalidVersion),
        ("1.5", ErrorCode::SchemaMalformedInput),
    ];
    for (version, code) in cases {
        let text = format!("{{\"version\":{version},\"tables\":[]}}");
        expect_code(compile_text(&text), code, &format!("version {version}"))?;
    }
    let top = compile_text("{\"version\":2147483647,\"tables\":[]}")?;
    check_eq!(top.version, i32::MAX, "version 2147483647");
    Ok(())
}

// ---------------------------------------------------------------------------
// Identifiers

fn c046_reserved_table_name(_ctx: &mut Ctx<'_>) -> CheckResult {
    let value = schema(vec![table(json!({"name": "sync_changes"}))]);
    expect_identifier_failure(&value, "reserved-prefix", "table sync_changes")?;
    Ok(())
}

fn c047_reserved_column_names(_ctx: &mut Ctx<'_>) -> CheckResult {
    for name in ["_sync_payload", "_synchronize"] {
        let value = schema(vec![table_with_columns(
            json!([{"name": name, "type": "string", "nullable": true}]),
            json!({}),
        )]);
        expect_identifier_failure(&value, "reserved-prefix", &format!("column {name}"))?;
    }
    Ok(())
}

fn c048_table_name_too_long(_ctx: &mut Ctx<'_>) -> CheckResult {
    let value = schema(vec![table(json!({"name": "t".repeat(64)}))]);
    let error = expect_identifier_failure(&value, "too-long", "64-byte table name")?;
    expect_detail(&error, "byteLength", "64")?;
    Ok(())
}

fn c049_index_name_63_bytes(_ctx: &mut Ctx<'_>) -> CheckResult {
    let name = "i".repeat(63);
    let value = schema(vec![table(
        json!({"indexes": [{"name": name, "columns": ["id"]}]}),
    )]);
    let compiled = single_table(&value)?;
    let names: Vec<&str> = compiled.indexes.iter().map(|i| i.name.as_str()).collect();
    check_eq!(names, [name.as_str()], "compiled index names");
    Ok(())
}

fn c050_index_name_utf8_too_long(_ctx: &mut Ctx<'_>) -> CheckResult {
    let value = schema(vec![table(
        json!({"indexes": [{"name": "ü".repeat(32), "columns": ["id"]}]}),
    )]);
    let error = expect_compile(&value, ErrorCode::SchemaInvalidIdentifier, "index ü×32")?;
    // The message text is fixed by the contract.
    let suffix = "exceeds 63 bytes (Postgres identifier limit; actual UTF-8 length: 64 bytes)"; // tidy: dialect-name
    check!(
        error.message().ends_with(suffix),
        "message {:?} does not end with {suffix:?}",
        error.message()
    );
    Ok(())
}

fn c051_empty_column_name(_ctx: &mut Ctx<'_>) -> CheckResult {
    let value = schema(vec![table_with_columns(
        json!([{"name": "", "type": "string", "nullable": true}]),
        json!({}),
    )]);
    expect_identifier_failure(&value, "empty", "empty column name")?;
    Ok(())
}

fn c052_nul_in_column_name(_ctx: &mut Ctx<'_>) -> CheckResult {
    let value = schema(vec![table_with_columns(
        json!([{"name": "a\u{0}b", "type": "string", "nullable": true}]),
        json!({}),
    )]);
    expect_identifier_failure(&value, "invalid-character", "column name with U+0000")?;
    Ok(())
}

// ---------------------------------------------------------------------------
// Duplicates and indexes

fn c053_duplicate_table_case_insensitive(_ctx: &mut Ctx<'_>) -> CheckResult {
    let value = schema(vec![
        table(json!({"name": "Tasks"})),
        table(json!({"name": "tasks"})),
    ]);
    expect_compile(
        &value,
        ErrorCode::SchemaDuplicateTable,
        "tables Tasks and tasks",
    )?;
    Ok(())
}

fn c054_duplicate_column_case_insensitive(_ctx: &mut Ctx<'_>) -> CheckResult {
    let value = schema(vec![table_with_columns(
        json!([
            {"name": "title", "type": "string"},
            {"name": "Title", "type": "string"}
        ]),
        json!({}),
    )]);
    expect_compile(
        &value,
        ErrorCode::SchemaDuplicateColumn,
        "columns title and Title",
    )?;
    Ok(())
}

fn c055_duplicate_index_across_tables(_ctx: &mut Ctx<'_>) -> CheckResult {
    let index = json!({"indexes": [{"name": "by_id", "columns": ["id"]}]});
    let mut first = table(index.clone());
    first["name"] = json!("one");
    let mut second = table(index);
    second["name"] = json!("two");
    expect_compile(
        &schema(vec![first, second]),
        ErrorCode::SchemaDuplicateIndex,
        "index by_id twice",
    )?;
    Ok(())
}

fn c056_index_without_columns(_ctx: &mut Ctx<'_>) -> CheckResult {
    let value = schema(vec![table(
        json!({"indexes": [{"name": "empty_idx", "columns": []}]}),
    )]);
    let error = expect_compile(
        &value,
        ErrorCode::SchemaInvalidIndex,
        "index without columns",
    )?;
    check_eq!(
        error.message(),
        "table ok: index \"empty_idx\" must name at least one column",
        "message"
    );
    Ok(())
}

fn c057_index_bad_columns(_ctx: &mut Ctx<'_>) -> CheckResult {
    let cases = [
        ("unknown column", json!(["nope"])),
        ("repeated column", json!(["id", "id"])),
    ];
    for (what, columns) in cases {
        let value = schema(vec![table(
            json!({"indexes": [{"name": "ix", "columns": columns}]}),
        )]);
        expect_compile(&value, ErrorCode::SchemaInvalidIndex, what)?;
    }
    Ok(())
}

fn c058_invalid_primary_keys(_ctx: &mut Ctx<'_>) -> CheckResult {
    let cases = [
        (
            "primary key not a column",
            json!([{"name": "id", "type": "string"}]),
            "missing",
        ),
        (
            "float primary key",
            json!([{"name": "id", "type": "float"}]),
            "id",
        ),
        (
            "nullable primary key",
            json!([{"name": "id", "type": "string", "nullable": true}]),
            "id",
        ),
    ];
    for (what, pk_column, primary_key) in cases {
        let mut value = table(json!({"primaryKey": primary_key}));
        let mut columns = vec![json!({"name": "s", "type": "string"})];
        if let Value::Array(pk_column) = pk_column {
            columns.extend(pk_column);
        }
        value["columns"] = Value::Array(columns);
        value["scopes"] = json!(["s:{s}"]);
        expect_compile(
            &schema(vec![value]),
            ErrorCode::SchemaInvalidPrimaryKey,
            what,
        )?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Scopes

fn c059_missing_scope(_ctx: &mut Ctx<'_>) -> CheckResult {
    let value = schema(vec![table(json!({"scopes": []}))]);
    expect_compile(&value, ErrorCode::SchemaMissingScope, "scopes []")?;
    Ok(())
}

fn c060_invalid_scope_patterns(_ctx: &mut Ctx<'_>) -> CheckResult {
    let columns = json!([
        {"name": "a", "type": "string"},
        {"name": "b", "type": "string"},
        {"name": "x", "type": "string"}
    ]);
    for pattern in ["project:{a}{b}", "{x}", "project:x", "p:{a:b}"] {
        let value = schema(vec![table_with_columns(
            columns.clone(),
            json!({"scopes": [pattern]}),
        )]);
        expect_compile(
            &value,
            ErrorCode::SchemaInvalidScopePattern,
            &format!("pattern {pattern}"),
        )?;
    }
    Ok(())
}

fn c061_prefix_with_colon(_ctx: &mut Ctx<'_>) -> CheckResult {
    let value = schema(vec![table_with_columns(
        json!([{"name": "v", "type": "string"}]),
        json!({"scopes": ["a:b:{v}"]}),
    )]);
    let compiled = single_table(&value)?;
    let pattern = compiled
        .scope_patterns
        .first()
        .ok_or_else(|| Failure::new("no compiled scope pattern"))?;
    check_eq!(pattern.prefix, "a:b", "prefix");
    check_eq!(pattern.variable, "v", "variable");
    check_eq!(pattern.column, "v", "column");
    check_eq!(pattern.column_index, 1, "column index");
    Ok(())
}

fn c062_scope_unknown_column(_ctx: &mut Ctx<'_>) -> CheckResult {
    let string_form = schema(vec![table(json!({"scopes": ["p:{nope}"]}))]);
    expect_compile(
        &string_form,
        ErrorCode::SchemaInvalidScopeColumn,
        "string form, unknown variable column",
    )?;
    let object_form = schema(vec![table(
        json!({"scopes": [{"pattern": "p:{v}", "column": "nope"}]}),
    )]);
    expect_compile(
        &object_form,
        ErrorCode::SchemaInvalidScopeColumn,
        "object form, unknown column",
    )?;
    Ok(())
}

fn c063_scope_column_kinds(_ctx: &mut Ctx<'_>) -> CheckResult {
    let cases = [
        (
            "nullable scope column",
            json!({"name": "v", "type": "string", "nullable": true}),
        ),
        ("float scope column", json!({"name": "v", "type": "float"})),
        (
            "encrypted scope column",
            json!({"name": "v", "type": "bytes", "encrypted": true}),
        ),
    ];
    for (what, column) in cases {
        let value = schema(vec![table_with_columns(
            json!([column]),
            json!({"scopes": ["p:{v}"]}),
        )]);
        expect_compile(&value, ErrorCode::SchemaInvalidScopeColumn, what)?;
    }
    Ok(())
}

fn c064_scope_variable_conflict(_ctx: &mut Ctx<'_>) -> CheckResult {
    let value = schema(vec![table_with_columns(
        json!([{"name": "c1", "type": "string"}, {"name": "c2", "type": "string"}]),
        json!({"scopes": [
            {"pattern": "a:{v}", "column": "c1"},
            {"pattern": "b:{v}", "column": "c2"}
        ]}),
    )]);
    expect_compile(
        &value,
        ErrorCode::SchemaScopeVariableConflict,
        "variable v on c1 and c2",
    )?;
    Ok(())
}

fn c065_scope_variable_reuse_allowed(_ctx: &mut Ctx<'_>) -> CheckResult {
    let same_twice = schema(vec![table_with_columns(
        json!([{"name": "v", "type": "string"}]),
        json!({"scopes": ["a:{v}", {"pattern": "b:{v}", "column": "v"}]}),
    )]);
    let compiled = single_table(&same_twice)?;
    check_eq!(
        compiled.scope_patterns.len(),
        2,
        "patterns of the same variable and column twice"
    );
    check_eq!(
        compiled.declared_variables,
        ["v"],
        "variables of the same variable twice"
    );

    let two_variables = schema(vec![table_with_columns(
        json!([{"name": "c", "type": "string"}]),
        json!({"scopes": [
            {"pattern": "a:{x}", "column": "c"},
            {"pattern": "b:{y}", "column": "c"}
        ]}),
    )]);
    let compiled = single_table(&two_variables)?;
    let mut variables = compiled.declared_variables.clone();
    variables.sort();
    check_eq!(variables, ["x", "y"], "two variables on one column");

    let across = |name: &str, column: &str| {
        let mut value = table_with_columns(
            json!([{"name": "c1", "type": "string"}, {"name": "c2", "type": "string"}]),
            json!({"scopes": [{"pattern": "p:{v}", "column": column}]}),
        );
        value["name"] = json!(name);
        value
    };
    let compiled = expect_ok(
        &schema(vec![across("one", "c1"), across("two", "c2")]),
        "variable v on different columns across tables",
    )?;
    let columns: Vec<&str> = compiled
        .tables
        .iter()
        .flat_map(|t| t.scope_patterns.iter().map(|p| p.column.as_str()))
        .collect();
    check_eq!(columns, ["c1", "c2"], "scope columns across tables");
    Ok(())
}

// ---------------------------------------------------------------------------
// Column kinds

fn c066_invalid_crdt_columns(_ctx: &mut Ctx<'_>) -> CheckResult {
    let cases = [
        (
            "crdt without crdtType",
            json!({"name": "c", "type": "crdt", "nullable": true}),
        ),
        (
            "crdtType on a string",
            json!({"name": "c", "type": "string", "crdtType": "yjs-doc"}),
        ),
    ];
    for (what, column) in cases {
        let value = schema(vec![table_with_columns(json!([column]), json!({}))]);
        expect_compile(&value, ErrorCode::SchemaInvalidCrdtColumn, what)?;
    }
    Ok(())
}

fn c067_invalid_encrypted_columns(_ctx: &mut Ctx<'_>) -> CheckResult {
    let cases = [
        (
            "encrypted string",
            json!({"name": "c", "type": "string", "encrypted": true}),
        ),
        (
            "declaredType without encrypted",
            json!({"name": "c", "type": "bytes", "declaredType": "string"}),
        ),
    ];
    for (what, column) in cases {
        let value = schema(vec![table_with_columns(json!([column]), json!({}))]);
        expect_compile(&value, ErrorCode::SchemaInvalidEncryptedColumn, what)?;
    }
    Ok(())
}

fn c068_unsupported_column_type(_ctx: &mut Ctx<'_>) -> CheckResult {
    let value = schema(vec![table_with_columns(
        json!([{"name": "c", "type": "decimal"}]),
        json!({}),
    )]);
    expect_compile(
        &value,
        ErrorCode::SchemaUnsupportedColumnType,
        "type decimal",
    )?;
    Ok(())
}

fn c069_too_many_columns(_ctx: &mut Ctx<'_>) -> CheckResult {
    let extra: Vec<Value> = (1..1001)
        .map(|i| json!({"name": format!("c{i}"), "type": "string", "nullable": true}))
        .collect();
    let value = schema(vec![table_with_columns(Value::Array(extra), json!({}))]);
    check_eq!(
        value["tables"][0]["columns"].as_array().map(Vec::len),
        Some(1001),
        "column count built"
    );
    expect_compile(&value, ErrorCode::SchemaTooManyColumns, "1001 columns")?;
    Ok(())
}

// ---------------------------------------------------------------------------
// Compiled facts

fn c070_materialize_defaults(_ctx: &mut Ctx<'_>) -> CheckResult {
    let scope = json!({"name": "p", "type": "string"});
    let encrypted = json!({"name": "e", "type": "bytes", "encrypted": true});
    let plain = json!({"name": "n", "type": "string", "nullable": true});
    let cases = [
        (
            "fully encrypted projectables",
            json!([scope, encrypted]),
            json!({}),
            false,
        ),
        (
            "explicit true over fully encrypted",
            json!([scope, encrypted]),
            json!({"materialize": true}),
            true,
        ),
        (
            "mixed encrypted and plain",
            json!([scope, encrypted, plain]),
            json!({}),
            true,
        ),
        (
            "primary key and scope columns only",
            json!([scope]),
            json!({}),
            true,
        ),
    ];
    for (what, columns, mut patch, expected) in cases {
        patch["scopes"] = json!(["s:{p}"]);
        let compiled = single_table(&schema(vec![table_with_columns(columns, patch)]))?;
        check_eq!(compiled.materialize, expected, "materialize, {what}");
    }
    let fixture = fix1()?;
    let secrets = fixture.table("secrets").map(|t| t.materialize);
    check_eq!(secrets, Some(false), "FIX1 secrets materialize");
    Ok(())
}

fn c071_declared_variables(_ctx: &mut Ctx<'_>) -> CheckResult {
    let fixture = fix1()?;
    let grants = fixture
        .table("device_key_grants")
        .ok_or_else(|| Failure::new("FIX1 has no device_key_grants"))?;
    check_eq!(
        grants.declared_variables,
        ["user_id"],
        "device_key_grants variables"
    );
    let docs = fixture
        .table("docs")
        .ok_or_else(|| Failure::new("FIX1 has no docs"))?;
    let mut docs_variables = docs.declared_variables.clone();
    docs_variables.sort();
    check_eq!(docs_variables, ["org_id", "project_id"], "docs variables");
    let mut union = fixture.declared_variables.clone();
    union.sort();
    check_eq!(
        union,
        ["org_id", "project_id", "user_id"],
        "schema-wide variables"
    );
    Ok(())
}

/// The complete example of `schema-and-migrations.md` §2.2.
fn complete_example() -> Value {
    json!({
      "version": 3,
      "tables": [
        {
          "name": "projects",
          "primaryKey": "id",
          "columns": [
            { "name": "id",       "type": "string" },
            { "name": "org_id",   "type": "string" },
            { "name": "name",     "type": "string" },
            { "name": "archived", "type": "boolean" },
            { "name": "settings", "type": "json", "nullable": true }
          ],
          "scopes": [
            "org:{org_id}",
            { "pattern": "project:{project_id}", "column": "id" }
          ],
          "indexes": [
            { "name": "projects_by_org_name", "columns": ["org_id", "name"], "unique": true }
          ]
        },
        {
          "name": "tasks",
          "primaryKey": "id",
          "columns": [
            { "name": "id",          "type": "string" },
            { "name": "project_id",  "type": "string" },
            { "name": "title",       "type": "string" },
            { "name": "done",        "type": "boolean" },
            { "name": "priority",    "type": "integer",  "nullable": true },
            { "name": "estimate",    "type": "float",    "nullable": true },
            { "name": "attachment",  "type": "blob_ref", "nullable": true },
            { "name": "notes",       "type": "crdt", "crdtType": "yjs-doc", "nullable": true },
            { "name": "secret",      "type": "bytes", "nullable": true, "encrypted": true, "declaredType": "string" },
            { "name": "search_text", "type": "string",   "nullable": true }
          ],
          "scopes": ["project:{project_id}"],
          "indexes": [
            { "name": "tasks_by_title", "columns": ["title"] },
            { "name": "tasks_by_project_done", "columns": ["project_id", "done"] }
          ]
        }
      ]
    })
}

fn c072_complete_example(ctx: &mut Ctx<'_>) -> CheckResult {
    let compiled = expect_ok(&complete_example(), "the §2.2 example")?;
    check_eq!(compiled.version, 3, "version");
    let names: Vec<&str> = compiled.tables.iter().map(|t| t.name.as_str()).collect();
    check_eq!(names, ["projects", "tasks"], "table order");
    let projects = compiled
        .table("projects")
        .ok_or_else(|| Failure::new("no projects"))?;
    let tasks = compiled
        .table("tasks")
        .ok_or_else(|| Failure::new("no tasks"))?;
    check!(
        projects.materialize && tasks.materialize,
        "both tables must be materialized"
    );

    let facts = |t: &CompiledTable| -> Vec<(String, String, String)> {
        t.scope_patterns
            .iter()
            .map(|p| (p.variable.clone(), p.column.clone(), p.prefix.clone()))
            .collect()
    };
    let own = |a: &str, b: &str, c: &str| (a.to_owned(), b.to_owned(), c.to_owned());
    check_eq!(
        facts(projects),
        [
            own("org_id", "org_id", "org"),
            own("project_id", "id", "project")
        ],
        "projects scope variables (variable, column, prefix)"
    );
    check_eq!(
        facts(tasks),
        [own("project_id", "project_id", "project")],
        "tasks scope variables (variable, column, prefix)"
    );
    let mut variables = compiled.declared_variables.clone();
    variables.sort();
    check_eq!(
        variables,
        ["org_id", "project_id"],
        "declared variables of the schema"
    );
    check_eq!(
        tasks.blob_ref_column_indices,
        [6],
        "tasks blob_ref column indices"
    );
    check_eq!(
        tasks.crdt_columns,
        [(7, "yjs-doc".to_owned())],
        "tasks crdt columns"
    );
    check_eq!(
        tasks.encrypted_column_indices,
        [8],
        "tasks encrypted column indices"
    );
    check_eq!(
        tasks.columns.get(8).and_then(|c| c.declared_type),
        Some(sync_core::ColumnType::String),
        "declaredType of tasks.secret"
    );

    // The declared indexes become physical indexes led by the partition
    // column, in declared column order, with the declared uniqueness.
    let d = ctx.sql_dialect();
    let index_sql = |t: &CompiledTable| -> Vec<String> {
        t.indexes
            .iter()
            .map(|i| create_index_sql(&t.name, i, d))
            .collect()
    };
    // After the partition and the declared columns a dialect may append its
    // own key suffix (`SqlDialect::declared_index_columns`).
    let expect_index = |sql: &str, name: &str, unique: bool, columns: &[&str]| -> CheckResult {
        let declared = sync_core::IndexDef {
            name: name.to_owned(),
            columns: columns[1..].iter().map(|c| (*c).to_owned()).collect(),
            unique,
        };
        let physical = d.declared_index_columns(&declared);
        check!(
            physical.starts_with(&columns.iter().map(|c| (*c).to_owned()).collect::<Vec<_>>()),
            "{name}: the dialect's index columns {physical:?} do not start with {columns:?}"
        );
        let list: Vec<String> = physical.iter().map(|c| d.quote_ident(c)).collect();
        for fragment in [d.quote_ident(name), format!("({})", list.join(", "))] {
            check!(
                sql.contains(&fragment),
                "index DDL lacks {fragment:?}: {sql}"
            );
        }
        check_eq!(
            sql.contains("UNIQUE"),
            unique,
            "uniqueness of {name} in {sql}"
        );
        Ok(())
    };
    let projects_sql = index_sql(projects);
    check_eq!(projects_sql.len(), 1, "projects physical indexes");
    expect_index(
        &projects_sql[0],
        "sync_ix_projects_by_org_name",
        true,
        &["_sync_partition", "org_id", "name"],
    )?;
    let tasks_sql = index_sql(tasks);
    check_eq!(tasks_sql.len(), 2, "tasks physical indexes");
    expect_index(
        &tasks_sql[0],
        "sync_ix_tasks_by_title",
        false,
        &["_sync_partition", "title"],
    )?;
    expect_index(
        &tasks_sql[1],
        "sync_ix_tasks_by_project_done",
        false,
        &["_sync_partition", "project_id", "done"],
    )?;
    Ok(())
}

fn c073_physical_index_names(_ctx: &mut Ctx<'_>) -> CheckResult {
    let vectors = [
        (
            "tasks_by_title".to_owned(),
            "sync_ix_tasks_by_title".to_owned(),
        ),
        ("x".repeat(55), format!("sync_ix_{}", "x".repeat(55))),
        ("x".repeat(56), "sync_ix_9bebdf7a0cf51405".to_owned()),
        ("i".repeat(63), "sync_ix_bc7cce6c46435a6e".to_owned()),
        ("ü".repeat(28), "sync_ix_af614357ce4271c5".to_owned()),
        (
            "tasks_by_project_and_title_and_assignee_and_due_date_v2_idx".to_owned(),
            "sync_ix_54718140b94a54ef".to_owned(),
        ),
    ];
    for (declared, expected) in &vectors {
        let physical = physical_index_name(declared);
        check_eq!(physical, *expected, "physical_index_name({declared:?})");
        check_eq!(
            physical_index_name(declared),
            physical,
            "second call for {declared:?}"
        );
    }
    check_eq!(
        format!("{:016x}", sync_schema::fnv1a64(b"a")),
        "af63dc4c8601ec8c",
        "fnv1a64(\"a\")"
    );
    for n in 1..=63 {
        for declared in ["x".repeat(n), "ü".repeat(n / 2)] {
            if declared.is_empty() || declared.len() > 63 {
                continue;
            }
            let physical = physical_index_name(&declared);
            check!(physical.len() <= 63, "{physical:?} exceeds 63 bytes");
            let hashed = declared.len() > 55;
            check_eq!(
                physical == format!("sync_ix_{declared}"),
                !hashed,
                "plain form for a {}-byte name",
                declared.len()
            );
        }
    }
    Ok(())
}

fn tasks_ddl(dialect: Dialect) -> CheckResult<String> {
    let fixture = fix1()?;
    let tasks = fixture
        .table("tasks")
        .ok_or_else(|| Failure::new("FIX1 has no tasks"))?;
    Ok(create_table_sql(tasks, dialect))
}

fn expect_fragments(ddl: &str, present: &[&str], absent: &[&str]) -> CheckResult {
    for fragment in present {
        check!(ddl.contains(fragment), "DDL lacks {fragment:?}: {ddl}");
    }
    for fragment in absent {
        check!(!ddl.contains(fragment), "DDL contains {fragment:?}: {ddl}");
    }
    Ok(())
}

fn c074_ddl_golden(ctx: &mut Ctx<'_>) -> CheckResult {
    let d = ctx.sql_dialect();
    let ddl = tasks_ddl(d)?;
    let col = |name: &str, t: ColumnType| format!("{} {}", d.quote_ident(name), d.sql_type(t));
    let not_null = |name: &str, t: ColumnType| format!("{} NOT NULL", col(name, t));
    let key = [INTERNAL_COLUMNS[0].name, INTERNAL_COLUMNS[1].name].map(|c| d.quote_ident(c));
    expect_fragments(
        &ddl,
        &[
            &not_null("done", ColumnType::Boolean),
            &col("meta", ColumnType::Json),
            &col("thumb", ColumnType::Bytes),
            &format!("PRIMARY KEY ({}, {})", key[0], key[1]),
        ],
        &[
            &not_null("meta", ColumnType::Json),
            &not_null("thumb", ColumnType::Bytes),
        ],
    )
}

fn c075_ddl_internal_columns(ctx: &mut Ctx<'_>) -> CheckResult {
    let d = ctx.sql_dialect();
    let ddl = tasks_ddl(d)?;
    let col = |name: &str, t: ColumnType| format!("{} {}", d.quote_ident(name), d.sql_type(t));
    let not_null = |name: &str, t: ColumnType| format!("{} NOT NULL", col(name, t));
    let collate = d
        .key_collation()
        .map(|c| format!(" COLLATE {}", d.quote_ident(c)))
        .unwrap_or_default();
    let internal = |i: usize, collate: &str| {
        let c = &INTERNAL_COLUMNS[i];
        format!(
            "{} {}{collate} NOT NULL",
            d.quote_ident(c.name),
            c.sql_type(d)
        )
    };
    expect_fragments(
        &ddl,
        &[
            &col("priority", ColumnType::Integer),
            &col("score", ColumnType::Float),
            &internal(0, &collate),
            &internal(1, &collate),
            &internal(2, ""),
            &internal(3, ""),
            &internal(4, ""),
        ],
        &[
            &not_null("meta", ColumnType::Json),
            &not_null("priority", ColumnType::Integer),
        ],
    )
}

/// `layouts_json(FIX1)`, written out by hand from §6.1.
const FIX1_LAYOUTS: &str = concat!(
    r#"{"tasks":["#,
    r#"{"name":"id","type":"string","nullable":false},"#,
    r#"{"name":"project_id","type":"string","nullable":false},"#,
    r#"{"name":"title","type":"string","nullable":false},"#,
    r#"{"name":"done","type":"boolean","nullable":false},"#,
    r#"{"name":"priority","type":"integer","nullable":true},"#,
    r#"{"name":"score","type":"float","nullable":true},"#,
    r#"{"name":"meta","type":"json","nullable":true},"#,
    r#"{"name":"thumb","type":"bytes","nullable":true},"#,
    r#"{"name":"attachment","type":"blob_ref","nullable":true}],"#,
    r#""docs":["#,
    r#"{"name":"id","type":"string","nullable":false},"#,
    r#"{"name":"org_id","type":"string","nullable":false},"#,
    r#"{"name":"project_id","type":"string","nullable":false},"#,
    r#"{"name":"body","type":"string","nullable":true}],"#,
    r#""secrets":["#,
    r#"{"name":"id","type":"string","nullable":false},"#,
    r#"{"name":"project_id","type":"string","nullable":false},"#,
    r#"{"name":"body","type":"bytes","nullable":false},"#,
    r#"{"name":"attrs","type":"bytes","nullable":true}],"#,
    r#""device_key_grants":["#,
    r#"{"name":"id","type":"string","nullable":false},"#,
    r#"{"name":"user_id","type":"string","nullable":false},"#,
    r#"{"name":"device_key","type":"string","nullable":false}]}"#,
);

fn c076_layouts_json_exact(_ctx: &mut Ctx<'_>) -> CheckResult {
    check_eq!(layouts_json(&fix1()?), FIX1_LAYOUTS, "layouts_json(FIX1)");
    Ok(())
}
