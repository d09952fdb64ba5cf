//! `conformance-checklist.md` §2 (group `schema-compile`): one test per
//! check, C-041 … C-076.

mod support;

use serde_json::json;
use support::*;
use sync_core::{ColumnType, ErrorCode};
use sync_schema::{create_table_sql, layouts_json, physical_index_name};

fn assert_code(text: &str, code: ErrorCode) -> sync_core::Error {
    let error = compile_error(text);
    assert_eq!(error.code(), code, "{error:?}");
    error
}

#[test]
fn c041_not_json_is_malformed_input() {
    let error = assert_code(
        "{\"version\": 1, \"tables\": [",
        ErrorCode::SchemaMalformedInput,
    );
    assert!(error
        .message()
        .starts_with("schema input is malformed at /: not valid JSON"));
    assert_code("tables: []", ErrorCode::SchemaMalformedInput);
}

#[test]
fn c042_unknown_member_materialise_is_malformed_input_with_pointer() {
    let text = schema_text(vec![ok_table_with("materialise", json!(true))]);
    let error = assert_code(&text, ErrorCode::SchemaMalformedInput);
    assert_eq!(
        error.message(),
        "schema input is malformed at /tables/0/materialise: unknown member"
    );
    assert_eq!(error.get_detail("pointer"), Some("/tables/0/materialise"));
}

#[test]
fn c043_nullable_yes_is_malformed_input() {
    let text = columns_schema(json!([
        {"name": "id", "type": "string"},
        {"name": "v", "type": "string", "nullable": "yes"}
    ]));
    let error = assert_code(&text, ErrorCode::SchemaMalformedInput);
    assert_eq!(
        error.message(),
        "schema input is malformed at /tables/0/columns/1/nullable: expected a boolean"
    );
}

#[test]
fn c044_missing_primary_key_is_malformed_input() {
    let mut table = ok_table();
    table.as_object_mut().unwrap().remove("primaryKey");
    let error = assert_code(&schema_text(vec![table]), ErrorCode::SchemaMalformedInput);
    assert_eq!(
        error.message(),
        "schema input is malformed at /tables/0/primaryKey: missing required member"
    );
}

#[test]
fn c045_version_zero_too_large_and_fractional() {
    let with_version = |v: &str| format!(r#"{{"version": {v}, "tables": []}}"#);
    let error = assert_code(&with_version("0"), ErrorCode::SchemaInvalidVersion);
    assert_eq!(
        error.message(),
        "schema version 0 must be an integer between 1 and 2147483647"
    );
    let error = assert_code(&with_version("2147483648"), ErrorCode::SchemaInvalidVersion);
    assert_eq!(
        error.message(),
        "schema version 2147483648 must be an integer between 1 and 2147483647"
    );
    let error = assert_code(&with_version("1.5"), ErrorCode::SchemaMalformedInput);
    assert_eq!(
        error.message(),
        "schema input is malformed at /version: expected an integer"
    );
    assert_code(&with_version("-1"), ErrorCode::SchemaInvalidVersion);
    assert_code(
        &with_version("18446744073709551615"),
        ErrorCode::SchemaInvalidVersion,
    );
    assert_eq!(compiled(&with_version("2147483647")).version, i32::MAX);
    assert_eq!(compiled(&with_version("1")).version, 1);
}

#[test]
fn c046_table_named_sync_changes_is_reserved() {
    let text = schema_text(vec![ok_table_with("name", json!("sync_changes"))]);
    let error = assert_code(&text, ErrorCode::SchemaInvalidIdentifier);
    assert_eq!(error.get_detail("failure"), Some("reserved-prefix"));
    assert_eq!(error.get_detail("kind"), Some("table"));
    assert_eq!(error.get_detail("identifier"), Some("sync_changes"));
    assert_eq!(error.get_detail("byteLength"), Some("12"));
    assert_eq!(
        error.message(),
        "table name \"sync_changes\" uses a reserved prefix (sync_/_sync are the server storage namespace)"
    );
}

#[test]
fn c047_columns_sync_payload_and_synchronize_are_reserved() {
    for name in ["_sync_payload", "_synchronize"] {
        let text = columns_schema(json!([
            {"name": "id", "type": "string"},
            {"name": "v", "type": "string"},
            {"name": name, "type": "string"}
        ]));
        let error = assert_code(&text, ErrorCode::SchemaInvalidIdentifier);
        assert_eq!(error.get_detail("failure"), Some("reserved-prefix"));
        assert_eq!(error.get_detail("kind"), Some("table ok: column"));
        assert_eq!(error.get_detail("table"), Some("ok"));
        assert_eq!(error.get_detail("column"), Some(name));
        assert_eq!(
            error.message(),
            format!("table ok: column name \"{name}\" uses a reserved prefix (sync_/_sync are the server storage namespace)")
        );
    }
}

#[test]
fn c048_table_name_of_64_bytes_is_too_long() {
    let name = "t".repeat(64);
    let error = assert_code(
        &schema_text(vec![ok_table_with("name", json!(name))]),
        ErrorCode::SchemaInvalidIdentifier,
    );
    assert_eq!(error.get_detail("failure"), Some("too-long"));
    assert_eq!(error.get_detail("byteLength"), Some("64"));
    assert_eq!(
        error.message(),
        format!("table name \"{name}\" exceeds 63 bytes (Postgres identifier limit; actual UTF-8 length: 64 bytes)")
    );
    // 63 bytes is fine.
    compiled(&schema_text(vec![ok_table_with(
        "name",
        json!("t".repeat(63)),
    )]));
}

#[test]
fn c049_index_name_of_63_bytes_is_ok() {
    let name = "i".repeat(63);
    let schema = compiled(&schema_text(vec![ok_table_with(
        "indexes",
        json!([{"name": name, "columns": ["v"]}]),
    )]));
    assert_eq!(schema.tables[0].indexes[0].name, name);
}

#[test]
fn c050_index_name_of_32_umlauts_is_too_long() {
    let name = "ü".repeat(32);
    let error = assert_code(
        &schema_text(vec![ok_table_with(
            "indexes",
            json!([{"name": name, "columns": ["v"]}]),
        )]),
        ErrorCode::SchemaInvalidIdentifier,
    );
    assert!(error
        .message()
        .ends_with("exceeds 63 bytes (Postgres identifier limit; actual UTF-8 length: 64 bytes)"));
    assert_eq!(
        error.message(),
        format!("table ok: index name \"{name}\" exceeds 63 bytes (Postgres identifier limit; actual UTF-8 length: 64 bytes)")
    );
    assert_eq!(error.get_detail("failure"), Some("too-long"));
    assert_eq!(error.get_detail("byteLength"), Some("64"));
    assert_eq!(error.get_detail("index"), Some(name.as_str()));
    assert_eq!(error.get_detail("kind"), Some("table ok: index"));
}

#[test]
fn c051_empty_column_name_is_invalid() {
    let text = columns_schema(json!([
        {"name": "id", "type": "string"},
        {"name": "v", "type": "string"},
        {"name": "", "type": "string"}
    ]));
    let error = assert_code(&text, ErrorCode::SchemaInvalidIdentifier);
    assert_eq!(error.get_detail("failure"), Some("empty"));
    assert_eq!(error.message(), "table ok: column name must not be empty");
}

#[test]
fn c052_column_name_with_nul_is_invalid_character() {
    let text = columns_schema(json!([
        {"name": "id", "type": "string"},
        {"name": "v", "type": "string"},
        {"name": "a\u{0}b", "type": "string"}
    ]));
    let error = assert_code(&text, ErrorCode::SchemaInvalidIdentifier);
    assert_eq!(error.get_detail("failure"), Some("invalid-character"));
    assert_eq!(
        error.message(),
        "table ok: column name \"a\u{0}b\" contains a control character"
    );
}

#[test]
fn c053_tables_tasks_and_tasks_capitalized_are_duplicates() {
    let text = schema_text(vec![
        ok_table_with("name", json!("Tasks")),
        ok_table_with("name", json!("tasks")),
    ]);
    let error = assert_code(&text, ErrorCode::SchemaDuplicateTable);
    assert_eq!(error.message(), "duplicate table \"tasks\"");
    assert_eq!(error.get_detail("table"), Some("tasks"));
}

#[test]
fn c054_duplicate_column_case_insensitive() {
    let text = columns_schema(json!([
        {"name": "id", "type": "string"},
        {"name": "v", "type": "string"},
        {"name": "V", "type": "string"}
    ]));
    let error = assert_code(&text, ErrorCode::SchemaDuplicateColumn);
    assert_eq!(error.message(), "table ok: duplicate column \"V\"");
    assert_eq!(error.get_detail("column"), Some("V"));
}

#[test]
fn c055_same_index_name_in_two_tables() {
    let text = schema_text(vec![
        ok_table_with("indexes", json!([{"name": "by_v", "columns": ["v"]}])),
        {
            let mut t = ok_table_with("indexes", json!([{"name": "BY_V", "columns": ["v"]}]));
            t["name"] = json!("other");
            t
        },
    ]);
    let error = assert_code(&text, ErrorCode::SchemaDuplicateIndex);
    assert_eq!(error.message(), "table other: duplicate index \"BY_V\"");
    assert_eq!(error.get_detail("table"), Some("other"));
    assert_eq!(error.get_detail("index"), Some("BY_V"));
}

#[test]
fn c056_index_without_columns() {
    let text = schema_text(vec![ok_table_with(
        "indexes",
        json!([{"name": "empty_idx", "columns": []}]),
    )]);
    let error = assert_code(&text, ErrorCode::SchemaInvalidIndex);
    assert_eq!(
        error.message(),
        "table ok: index \"empty_idx\" must name at least one column"
    );
    assert_eq!(error.get_detail("index"), Some("empty_idx"));
}

#[test]
fn c057_index_on_unknown_column_or_same_column_twice() {
    let error = assert_code(
        &schema_text(vec![ok_table_with(
            "indexes",
            json!([{"name": "ix", "columns": ["v", "nope"]}]),
        )]),
        ErrorCode::SchemaInvalidIndex,
    );
    assert_eq!(
        error.message(),
        "table ok: index \"ix\" names unknown column \"nope\""
    );
    let error = assert_code(
        &schema_text(vec![ok_table_with(
            "indexes",
            json!([{"name": "ix", "columns": ["v", "id", "v"]}]),
        )]),
        ErrorCode::SchemaInvalidIndex,
    );
    assert_eq!(
        error.message(),
        "table ok: index \"ix\" names column \"v\" twice"
    );
}

#[test]
fn c058_primary_key_missing_float_or_nullable() {
    let error = assert_code(
        &schema_text(vec![ok_table_with("primaryKey", json!("nope"))]),
        ErrorCode::SchemaInvalidPrimaryKey,
    );
    assert_eq!(
        error.message(),
        "table ok: primary key \"nope\" is not a column"
    );
    let error = assert_code(
        &columns_schema(json!([{"name": "id", "type": "float"}, {"name": "v", "type": "string"}])),
        ErrorCode::SchemaInvalidPrimaryKey,
    );
    assert_eq!(
        error.message(),
        "table ok: primary key \"id\" must have type string, integer, boolean or json"
    );
    let error = assert_code(
        &columns_schema(json!([
            {"name": "id", "type": "string", "nullable": true},
            {"name": "v", "type": "string"}
        ])),
        ErrorCode::SchemaInvalidPrimaryKey,
    );
    assert_eq!(
        error.message(),
        "table ok: primary key \"id\" must not be nullable"
    );
    // json, integer and boolean keys are fine.
    for key_type in ["json", "integer", "boolean"] {
        compiled(&columns_schema(json!([
            {"name": "id", "type": key_type},
            {"name": "v", "type": "string"}
        ])));
    }
}

#[test]
fn c059_empty_scopes_is_missing_scope() {
    let error = assert_code(
        &schema_text(vec![ok_table_with("scopes", json!([]))]),
        ErrorCode::SchemaMissingScope,
    );
    assert_eq!(
        error.message(),
        "table ok: every synced table declares at least one scope pattern"
    );
}

#[test]
fn c060_malformed_scope_patterns() {
    for pattern in ["project:{a}{b}", "{x}", "project:x", "p:{a:b}"] {
        let error = assert_code(
            &schema_text(vec![ok_table_with("scopes", json!([pattern]))]),
            ErrorCode::SchemaInvalidScopePattern,
        );
        assert_eq!(
            error.message(),
            format!("table ok: scope pattern \"{pattern}\" must be 'prefix:{{variable}}' with exactly one variable")
        );
        assert_eq!(error.get_detail("pattern"), Some(pattern));
    }
}

#[test]
fn c061_prefix_may_contain_colons() {
    let schema = compiled(&schema_text(vec![ok_table_with(
        "scopes",
        json!(["a:b:{v}"]),
    )]));
    let pattern = &schema.tables[0].scope_patterns[0];
    assert_eq!(pattern.prefix, "a:b");
    assert_eq!(pattern.variable, "v");
    assert_eq!(pattern.column, "v");
    assert_eq!(pattern.column_index, 1);
}

#[test]
fn c062_scope_pattern_naming_unknown_column() {
    let error = assert_code(
        &schema_text(vec![ok_table_with("scopes", json!(["s:{nope}"]))]),
        ErrorCode::SchemaInvalidScopeColumn,
    );
    assert_eq!(
        error.message(),
        "table ok: scope pattern \"s:{nope}\" names unknown column \"nope\""
    );
    let error = assert_code(
        &schema_text(vec![ok_table_with(
            "scopes",
            json!([{"pattern": "s:{x}", "column": "missing"}]),
        )]),
        ErrorCode::SchemaInvalidScopeColumn,
    );
    assert_eq!(
        error.message(),
        "table ok: scope pattern \"s:{x}\" names unknown column \"missing\""
    );
}

#[test]
fn c063_scope_column_nullable_float_or_encrypted() {
    let cases = [
        json!({"name": "v", "type": "string", "nullable": true}),
        json!({"name": "v", "type": "float"}),
        json!({"name": "v", "type": "bytes", "encrypted": true}),
    ];
    for column in cases {
        let error = assert_code(
            &columns_schema(json!([{"name": "id", "type": "string"}, column])),
            ErrorCode::SchemaInvalidScopeColumn,
        );
        assert_eq!(
            error.message(),
            "table ok: scope column \"v\" must be a non-nullable string, integer or boolean column"
        );
    }
}

#[test]
fn c064_variable_mapped_to_two_columns() {
    let mut table = ok_table_with(
        "columns",
        json!([
            {"name": "id", "type": "string"},
            {"name": "v", "type": "string"},
            {"name": "w", "type": "string"}
        ]),
    );
    table["scopes"] = json!(["s:{v}", {"pattern": "t:{v}", "column": "w"}]);
    let error = assert_code(
        &schema_text(vec![table]),
        ErrorCode::SchemaScopeVariableConflict,
    );
    assert_eq!(
        error.message(),
        "table ok: variable \"v\" maps to two different columns"
    );
    assert_eq!(error.get_detail("variable"), Some("v"));
}

#[test]
fn c065_allowed_scope_combinations() {
    let mut first = ok_table_with(
        "columns",
        json!([
            {"name": "id", "type": "string"},
            {"name": "v", "type": "string"},
            {"name": "w", "type": "integer"}
        ]),
    );
    // Same variable and column twice; two variables on one column.
    first["scopes"] = json!(["s:{v}", {"pattern": "s:{v}", "column": "v"}, {"pattern": "x:{other}", "column": "v"}]);
    // One variable on a different column in another table.
    let mut second = ok_table_with(
        "columns",
        json!([{"name": "id", "type": "boolean"}, {"name": "q", "type": "string"}]),
    );
    second["name"] = json!("second");
    second["scopes"] = json!([{"pattern": "s:{v}", "column": "q"}]);
    let schema = compiled(&schema_text(vec![first, second]));
    assert_eq!(schema.tables[0].declared_variables, ["v", "other"]);
    assert_eq!(schema.tables[1].scope_patterns[0].column, "q");
    assert_eq!(schema.declared_variables, ["other", "v"]);
}

#[test]
fn c066_crdt_type_rules() {
    let error = assert_code(
        &columns_schema(json!([
            {"name": "id", "type": "string"},
            {"name": "v", "type": "string"},
            {"name": "doc", "type": "crdt", "nullable": true}
        ])),
        ErrorCode::SchemaInvalidCrdtColumn,
    );
    assert_eq!(
        error.message(),
        "table ok: crdt column \"doc\" must declare a crdtType"
    );
    let error = assert_code(
        &columns_schema(json!([
            {"name": "id", "type": "string"},
            {"name": "v", "type": "string"},
            {"name": "doc", "type": "crdt", "crdtType": ""}
        ])),
        ErrorCode::SchemaInvalidCrdtColumn,
    );
    assert_eq!(
        error.message(),
        "table ok: crdt column \"doc\" must declare a crdtType"
    );
    let error = assert_code(
        &columns_schema(json!([
            {"name": "id", "type": "string"},
            {"name": "v", "type": "string"},
            {"name": "s", "type": "string", "crdtType": "yjs-doc"}
        ])),
        ErrorCode::SchemaInvalidCrdtColumn,
    );
    assert_eq!(
        error.message(),
        "table ok: column \"s\" declares a crdtType but is not a crdt column"
    );
}

#[test]
fn c067_encrypted_rules() {
    let error = assert_code(
        &columns_schema(json!([
            {"name": "id", "type": "string"},
            {"name": "v", "type": "string"},
            {"name": "s", "type": "string", "encrypted": true}
        ])),
        ErrorCode::SchemaInvalidEncryptedColumn,
    );
    assert_eq!(
        error.message(),
        "table ok: encrypted column \"s\" must have type bytes"
    );
    let error = assert_code(
        &columns_schema(json!([
            {"name": "id", "type": "string"},
            {"name": "v", "type": "string"},
            {"name": "b", "type": "bytes", "declaredType": "string"}
        ])),
        ErrorCode::SchemaInvalidEncryptedColumn,
    );
    assert_eq!(
        error.message(),
        "table ok: column \"b\" declares a declaredType but is not encrypted"
    );
    for declared in ["crdt", "decimal"] {
        let error = assert_code(
            &columns_schema(json!([
                {"name": "id", "type": "string"},
                {"name": "v", "type": "string"},
                {"name": "b", "type": "bytes", "encrypted": true, "declaredType": declared}
            ])),
            ErrorCode::SchemaInvalidEncryptedColumn,
        );
        assert_eq!(
            error.message(),
            format!("table ok: encrypted column \"b\" has unsupported declaredType \"{declared}\"")
        );
    }
}

#[test]
fn c068_unknown_column_type() {
    let error = assert_code(
        &columns_schema(json!([
            {"name": "id", "type": "string"},
            {"name": "v", "type": "string"},
            {"name": "price", "type": "decimal"}
        ])),
        ErrorCode::SchemaUnsupportedColumnType,
    );
    assert_eq!(
        error.message(),
        "table ok: column \"price\" has unsupported type \"decimal\""
    );
    assert_eq!(error.get_detail("column"), Some("price"));
}

#[test]
fn c069_too_many_columns() {
    let mut columns = vec![
        json!({"name": "id", "type": "string"}),
        json!({"name": "v", "type": "string"}),
    ];
    columns.extend(
        (0..999).map(|i| json!({"name": format!("c{i}"), "type": "string", "nullable": true})),
    );
    assert_eq!(columns.len(), 1001);
    let error = assert_code(
        &columns_schema(json!(columns)),
        ErrorCode::SchemaTooManyColumns,
    );
    assert_eq!(
        error.message(),
        "table ok: at most 1000 columns are supported"
    );
    columns.pop();
    compiled(&columns_schema(json!(columns)));
}

#[test]
fn c070_materialize_defaults() {
    let fix1 = fix1();
    // Fully encrypted projectables → false.
    assert!(!fix1.table("secrets").unwrap().materialize);
    // Explicit true wins.
    let mut secrets = serde_json::from_str::<serde_json::Value>(FIX1).unwrap()["tables"][2].clone();
    secrets["materialize"] = json!(true);
    assert!(compiled(&schema_text(vec![secrets])).tables[0].materialize);
    // Mixed → true.
    let mixed = columns_schema(json!([
        {"name": "id", "type": "string"},
        {"name": "v", "type": "string"},
        {"name": "e", "type": "bytes", "encrypted": true},
        {"name": "p", "type": "string"}
    ]));
    assert!(compiled(&mixed).tables[0].materialize);
    // PK + scope columns only → true, even with an explicit false absent.
    assert!(compiled(&schema_text(vec![ok_table()])).tables[0].materialize);
    // Explicit false wins too.
    assert!(
        !compiled(&schema_text(vec![ok_table_with(
            "materialize",
            json!(false)
        )]))
        .tables[0]
            .materialize
    );
    assert!(fix1.table("tasks").unwrap().materialize);
}

#[test]
fn c071_declared_variables() {
    let fix1 = fix1();
    let grants = fix1.table("device_key_grants").unwrap();
    assert_eq!(grants.declared_variables, ["user_id"]);
    assert_eq!(
        fix1.table("docs").unwrap().declared_variables,
        ["org_id", "project_id"]
    );
    assert_eq!(fix1.declared_variables, ["org_id", "project_id", "user_id"]);
}

#[test]
fn c072_compile_the_complete_example() {
    let schema = compiled(include_str!("fixtures/example_2_2.json"));
    assert_eq!(schema.version, 3);
    let names: Vec<&str> = schema.tables.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["projects", "tasks"]);
    let projects = schema.table("projects").unwrap();
    let tasks = schema.table("tasks").unwrap();
    assert!(projects.materialize && tasks.materialize);
    let vars = |t: &sync_core::CompiledTable| {
        t.scope_patterns
            .iter()
            .map(|p| {
                (
                    p.variable.clone(),
                    p.column.clone(),
                    p.prefix.clone(),
                    p.column_index,
                )
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(
        vars(projects),
        [
            ("org_id".into(), "org_id".into(), "org".into(), 1),
            ("project_id".into(), "id".into(), "project".into(), 0)
        ]
    );
    assert_eq!(
        vars(tasks),
        [(
            "project_id".into(),
            "project_id".into(),
            "project".into(),
            1
        )]
    );
    assert_eq!(schema.declared_variables, ["org_id", "project_id"]);
    assert_eq!(tasks.blob_ref_column_indices, [6]);
    assert_eq!(tasks.crdt_columns, [(7, "yjs-doc".to_owned())]);
    assert_eq!(tasks.encrypted_column_indices, [8]);
    assert_eq!(tasks.columns[8].declared_type, Some(ColumnType::String));
    assert_eq!(tasks.primary_key_index, 0);
    assert_eq!(tasks.column_index["search_text"], 9);
    assert_eq!(schema.table_index["tasks"], 1);
    let physical: Vec<(String, bool, Vec<String>)> = schema
        .tables
        .iter()
        .flat_map(|t| t.indexes.iter())
        .map(|ix| (physical_index_name(&ix.name), ix.unique, ix.columns.clone()))
        .collect();
    assert_eq!(
        physical,
        [
            (
                "sync_ix_projects_by_org_name".into(),
                true,
                vec!["org_id".into(), "name".into()]
            ),
            ("sync_ix_tasks_by_title".into(), false, vec!["title".into()]),
            (
                "sync_ix_tasks_by_project_done".into(),
                false,
                vec!["project_id".into(), "done".into()]
            ),
        ]
    );
    assert!(
        sync_schema::create_index_sql("projects", &projects.indexes[0], sync_sqlite::DIALECT)
            .contains("(\"_sync_partition\", \"org_id\", \"name\")")
    );
}

#[test]
fn c073_physical_index_names() {
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
    for (declared, physical) in &vectors {
        let name = physical_index_name(declared);
        assert_eq!(&name, physical, "{declared}");
        assert!(name.len() <= 63);
        assert_eq!(physical_index_name(declared), name, "deterministic");
    }
    assert_eq!(physical_index_name(&"x".repeat(55)).len(), 63);
    assert_eq!(
        format!("{:016x}", sync_schema::fnv1a64(b"a")),
        "af63dc4c8601ec8c"
    );
}

// C-074 and C-075 as the checklist writes them, plus the nullable
// `_sync_column_versions` last (docs/design/wire-v3.md §3.5).
#[test]
fn c074_sqlite_ddl_golden_for_tasks() {
    let sql = create_table_sql(fix1().table("tasks").unwrap(), sync_sqlite::DIALECT);
    for part in [
        "\"done\" INTEGER NOT NULL",
        "\"meta\" TEXT",
        "\"thumb\" BLOB",
        "PRIMARY KEY (\"_sync_partition\", \"_sync_row_id\")",
    ] {
        assert!(sql.contains(part), "{part} missing from {sql}");
    }
    assert_eq!(
        sql,
        "CREATE TABLE IF NOT EXISTS \"tasks\" (\"_sync_partition\" TEXT NOT NULL, \"_sync_row_id\" TEXT NOT NULL, \"id\" TEXT NOT NULL, \"project_id\" TEXT NOT NULL, \"title\" TEXT NOT NULL, \"done\" INTEGER NOT NULL, \"priority\" INTEGER, \"score\" REAL, \"meta\" TEXT, \"thumb\" BLOB, \"attachment\" TEXT, \"_sync_server_version\" INTEGER NOT NULL, \"_sync_scopes\" TEXT NOT NULL, \"_sync_payload\" BLOB NOT NULL, \"_sync_column_versions\" BLOB, PRIMARY KEY (\"_sync_partition\", \"_sync_row_id\"))"
    );
}

#[test]
fn c075_postgres_ddl_golden_for_tasks() {
    let sql = create_table_sql(fix1().table("tasks").unwrap(), sync_postgres::DIALECT);
    for part in [
        "\"done\" BOOLEAN NOT NULL",
        "\"meta\" JSONB",
        "\"thumb\" BYTEA",
        "\"priority\" BIGINT",
        "\"score\" DOUBLE PRECISION",
        "\"_sync_payload\" BYTEA NOT NULL",
        "\"_sync_row_id\" TEXT COLLATE \"C\" NOT NULL",
    ] {
        assert!(sql.contains(part), "{part} missing from {sql}");
    }
    assert_eq!(
        sql,
        "CREATE TABLE IF NOT EXISTS \"tasks\" (\"_sync_partition\" TEXT COLLATE \"C\" NOT NULL, \"_sync_row_id\" TEXT COLLATE \"C\" NOT NULL, \"id\" TEXT NOT NULL, \"project_id\" TEXT NOT NULL, \"title\" TEXT NOT NULL, \"done\" BOOLEAN NOT NULL, \"priority\" BIGINT, \"score\" DOUBLE PRECISION, \"meta\" JSONB, \"thumb\" BYTEA, \"attachment\" TEXT, \"_sync_server_version\" BIGINT NOT NULL, \"_sync_scopes\" JSONB NOT NULL, \"_sync_payload\" BYTEA NOT NULL, \"_sync_column_versions\" BYTEA, PRIMARY KEY (\"_sync_partition\", \"_sync_row_id\"))"
    );
}

#[test]
fn c076_layouts_json_of_fix1() {
    assert_eq!(
        layouts_json(&fix1()),
        r#"{"tasks":[{"name":"id","type":"string","nullable":false},{"name":"project_id","type":"string","nullable":false},{"name":"title","type":"string","nullable":false},{"name":"done","type":"boolean","nullable":false},{"name":"priority","type":"integer","nullable":true},{"name":"score","type":"float","nullable":true},{"name":"meta","type":"json","nullable":true},{"name":"thumb","type":"bytes","nullable":true},{"name":"attachment","type":"blob_ref","nullable":true}],"docs":[{"name":"id","type":"string","nullable":false},{"name":"org_id","type":"string","nullable":false},{"name":"project_id","type":"string","nullable":false},{"name":"body","type":"string","nullable":true}],"secrets":[{"name":"id","type":"string","nullable":false},{"name":"project_id","type":"string","nullable":false},{"name":"body","type":"bytes","nullable":false},{"name":"attrs","type":"bytes","nullable":true}],"device_key_grants":[{"name":"id","type":"string","nullable":false},{"name":"user_id","type":"string","nullable":false},{"name":"device_key","type":"string","nullable":false}]}"#
    );
}
