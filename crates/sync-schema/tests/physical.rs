//! Physical checks (`schema-and-migrations.md` §8): every reason, both dialects.

mod support;

use support::*;
use sync_core::{CompiledTable, ErrorCode};
use sync_schema::{check_physical, Dialect, ObservedColumn, ObservedIndex, ObservedTable};

fn table(name: &str) -> CompiledTable {
    fix1().table(name).unwrap().clone()
}

/// Applies `edit` to the as-created state of a FIX1 table and returns the
/// failure details `(reason, column-or-index, expected, actual)`.
fn failure(
    name: &str,
    dialect: Dialect,
    edit: impl FnOnce(&mut ObservedTable),
) -> (String, Option<String>, Option<String>, Option<String>) {
    let compiled = table(name);
    let mut observed = ObservedTable::as_created(&compiled, dialect);
    edit(&mut observed);
    let error = check_physical(&compiled, &observed, dialect).unwrap_err();
    assert_eq!(error.code(), ErrorCode::PhysicalLayoutMismatch, "{error:?}");
    assert_eq!(error.get_detail("table"), Some(name));
    let get = |k: &str| error.get_detail(k).map(str::to_owned);
    (
        get("reason").unwrap(),
        get("column").or_else(|| get("index")),
        get("expected"),
        get("actual"),
    )
}

fn column<'a>(observed: &'a mut ObservedTable, name: &str) -> &'a mut ObservedColumn {
    observed
        .columns
        .iter_mut()
        .find(|c| c.name == name)
        .unwrap()
}

#[test]
fn freshly_created_tables_pass_in_both_dialects() {
    for dialect in [sync_sqlite::DIALECT, sync_postgres::DIALECT] {
        for t in &fix1().tables {
            check_physical(t, &ObservedTable::as_created(t, dialect), dialect).unwrap();
        }
    }
}

#[test]
fn the_created_state_makes_exactly_the_non_nullable_columns_not_null() {
    let tasks = table("tasks");
    for dialect in [sync_sqlite::DIALECT, sync_postgres::DIALECT] {
        let mut observed = ObservedTable::as_created(&tasks, dialect);
        for declared in &tasks.columns {
            assert_eq!(
                column(&mut observed, &declared.name).not_null,
                !declared.nullable,
                "{dialect}: {}",
                declared.name
            );
        }
        for internal in ["_sync_partition", "_sync_row_id", "_sync_payload"] {
            assert!(column(&mut observed, internal).not_null, "{internal}");
        }
    }
    assert!(tasks.columns.iter().any(|c| c.nullable));
    assert!(tasks.columns.iter().any(|c| !c.nullable));
}

#[test]
fn extra_columns_and_operator_indexes_are_tolerated() {
    for dialect in [sync_sqlite::DIALECT, sync_postgres::DIALECT] {
        let tasks = table("tasks");
        let mut observed = ObservedTable::as_created(&tasks, dialect);
        observed
            .columns
            .push(ObservedColumn::new("ops_note", "TEXT"));
        observed.indexes.push(ObservedIndex {
            name: "ops_tasks_tuning".into(),
            unique: false,
            columns: vec!["done".into()],
        });
        check_physical(&tasks, &observed, dialect).unwrap();
        // SQLite declared types compare case-insensitively.
        if dialect == sync_sqlite::DIALECT {
            column(&mut observed, "priority").declared_type = "integer".into();
            check_physical(&tasks, &observed, dialect).unwrap();
        }
    }
}

#[test]
fn missing_table() {
    let tasks = table("tasks");
    let error = check_physical(
        &tasks,
        &ObservedTable::absent("tasks"),
        sync_sqlite::DIALECT,
    )
    .unwrap_err();
    assert_eq!(error.get_detail("reason"), Some("missing_table"));
    assert_eq!(error.get_detail("table"), Some("tasks"));
}

#[test]
fn missing_internal_and_application_columns() {
    for dialect in [sync_sqlite::DIALECT, sync_postgres::DIALECT] {
        let (reason, column, ..) = failure("tasks", dialect, |o| {
            o.columns.retain(|c| c.name != "_sync_scopes")
        });
        assert_eq!(
            (reason.as_str(), column.as_deref()),
            ("missing_column", Some("_sync_scopes"))
        );
        let (reason, column, ..) = failure("tasks", dialect, |o| {
            o.columns.retain(|c| c.name != "priority")
        });
        assert_eq!(
            (reason.as_str(), column.as_deref()),
            ("missing_column", Some("priority"))
        );
        // Non-materialized tables need no application columns.
        let secrets = table("secrets");
        check_physical(
            &secrets,
            &ObservedTable::as_created(&secrets, dialect),
            dialect,
        )
        .unwrap();
        let (reason, column, ..) = failure("secrets", dialect, |o| {
            o.columns.retain(|c| c.name != "_sync_payload")
        });
        assert_eq!(
            (reason.as_str(), column.as_deref()),
            ("missing_column", Some("_sync_payload"))
        );
    }
}

#[test]
fn internal_and_application_types() {
    let cases = [
        (sync_sqlite::DIALECT, "_sync_payload", "TEXT", "BLOB"),
        (sync_postgres::DIALECT, "_sync_scopes", "text", "JSONB"),
        (sync_sqlite::DIALECT, "priority", "TEXT", "INTEGER"),
        (sync_postgres::DIALECT, "meta", "json", "JSONB"),
        (sync_postgres::DIALECT, "score", "real", "DOUBLE PRECISION"),
    ];
    for (dialect, name, actual_type, expected_type) in cases {
        let (reason, column, expected, actual) = failure("tasks", dialect, |o| {
            column(o, name).declared_type = actual_type.into();
        });
        assert_eq!(reason, "type");
        assert_eq!(column.as_deref(), Some(name));
        assert_eq!(expected.as_deref(), Some(expected_type));
        assert_eq!(actual.as_deref(), Some(actual_type));
    }
}

#[test]
fn nullability() {
    for dialect in [sync_sqlite::DIALECT, sync_postgres::DIALECT] {
        let (reason, column, expected, actual) = failure("tasks", dialect, |o| {
            column(o, "_sync_server_version").not_null = false;
        });
        assert_eq!(reason, "nullability");
        assert_eq!(column.as_deref(), Some("_sync_server_version"));
        assert_eq!(
            (expected.as_deref(), actual.as_deref()),
            (Some("not null"), Some("nullable"))
        );
        // C-032: a NOT NULL extra column on a non-materialized table.
        let (reason, column, expected, actual) = failure("secrets", dialect, |o| {
            o.columns.push(ObservedColumn {
                not_null: true,
                ..ObservedColumn::new("extra", "TEXT")
            });
        });
        assert_eq!(reason, "nullability");
        assert_eq!(column.as_deref(), Some("extra"));
        assert_eq!(
            (expected.as_deref(), actual.as_deref()),
            (Some("nullable"), Some("not null"))
        );
    }
    // A NOT NULL application column on a materialized table is fine.
    let tasks = table("tasks");
    let mut observed = ObservedTable::as_created(&tasks, sync_sqlite::DIALECT);
    column(&mut observed, "priority").not_null = true;
    check_physical(&tasks, &observed, sync_sqlite::DIALECT).unwrap();
}

#[test]
fn primary_key() {
    for dialect in [sync_sqlite::DIALECT, sync_postgres::DIALECT] {
        let (reason, _, expected, actual) = failure("docs", dialect, |o| {
            column(o, "_sync_partition").primary_key_position = 2;
            column(o, "_sync_row_id").primary_key_position = 1;
        });
        assert_eq!(reason, "primary_key");
        assert_eq!(expected.as_deref(), Some("_sync_partition, _sync_row_id"));
        assert_eq!(actual.as_deref(), Some("_sync_row_id, _sync_partition"));
        let (reason, ..) = failure("docs", dialect, |o| {
            column(o, "id").primary_key_position = 3;
        });
        assert_eq!(reason, "primary_key");
    }
}

#[test]
fn postgres_key_collation() {
    let (reason, column_name, expected, actual) = failure("tasks", sync_postgres::DIALECT, |o| {
        column(o, "_sync_row_id").collation = Some("POSIX".into());
    });
    assert_eq!(reason, "collation");
    assert_eq!(column_name.as_deref(), Some("_sync_row_id"));
    assert_eq!(
        (expected.as_deref(), actual.as_deref()),
        (Some("C"), Some("POSIX"))
    );
    let (reason, _, _, actual) = failure("tasks", sync_postgres::DIALECT, |o| {
        column(o, "_sync_partition").collation = None;
    });
    assert_eq!(reason, "collation");
    assert_eq!(actual.as_deref(), Some("default"));
    // SQLite does not check collations.
    let tasks = table("tasks");
    let mut observed = ObservedTable::as_created(&tasks, sync_sqlite::DIALECT);
    column(&mut observed, "_sync_row_id").collation = Some("NOCASE".into());
    check_physical(&tasks, &observed, sync_sqlite::DIALECT).unwrap();
}

#[test]
fn missing_index_and_index_definition() {
    for dialect in [sync_sqlite::DIALECT, sync_postgres::DIALECT] {
        let (reason, index, ..) = failure("tasks", dialect, |o| {
            o.indexes.retain(|i| i.name != "sync_ix_tasks_by_title")
        });
        assert_eq!(
            (reason.as_str(), index.as_deref()),
            ("missing_index", Some("sync_ix_tasks_by_title"))
        );
        // C-031: the unique index recreated non-unique with the same columns.
        let (reason, index, expected, actual) = failure("tasks", dialect, |o| {
            o.indexes
                .iter_mut()
                .find(|i| i.name == "sync_ix_tasks_by_project_title")
                .unwrap()
                .unique = false;
        });
        assert_eq!(reason, "index_definition");
        assert_eq!(index.as_deref(), Some("sync_ix_tasks_by_project_title"));
        assert_eq!(
            expected.as_deref(),
            Some("UNIQUE (\"_sync_partition\", \"project_id\", \"title\")")
        );
        assert_eq!(
            actual.as_deref(),
            Some("(\"_sync_partition\", \"project_id\", \"title\")")
        );
        // A legacy index without the leading partition column (not upgraded).
        let (reason, ..) = failure("tasks", dialect, |o| {
            o.indexes
                .iter_mut()
                .find(|i| i.name == "sync_ix_tasks_by_title")
                .unwrap()
                .columns = vec!["title".into()];
        });
        assert_eq!(reason, "index_definition");
    }
    // Non-materialized tables carry no declared index.
    let mut secrets_json: serde_json::Value = serde_json::from_str(FIX1).unwrap();
    secrets_json["tables"][2]["indexes"] =
        serde_json::json!([{"name": "sec_ix", "columns": ["body"]}]);
    let schema = compiled(&secrets_json.to_string());
    let secrets = schema.table("secrets").unwrap();
    assert!(!secrets.materialize);
    check_physical(
        secrets,
        &ObservedTable::as_created(secrets, sync_sqlite::DIALECT),
        sync_sqlite::DIALECT,
    )
    .unwrap();
}

#[test]
fn column_versions_must_be_nullable_bytes() {
    for dialect in [sync_sqlite::DIALECT, sync_postgres::DIALECT] {
        let bytes = sync_schema::INTERNAL_COLUMNS[5]
            .sql_type(dialect)
            .to_owned();
        assert_eq!(
            failure("tasks", dialect, |o| {
                column(o, "_sync_column_versions").not_null = true;
            }),
            (
                "nullability".into(),
                Some("_sync_column_versions".into()),
                Some("nullable".into()),
                Some("not null".into())
            ),
            "{dialect}"
        );
        assert_eq!(
            failure("tasks", dialect, |o| {
                column(o, "_sync_column_versions").declared_type = "TEXT".into();
            }),
            (
                "type".into(),
                Some("_sync_column_versions".into()),
                Some(bytes.clone()),
                Some("TEXT".into())
            ),
            "{dialect}"
        );
        // The other internal columns stay NOT NULL.
        assert_eq!(
            failure("tasks", dialect, |o| {
                column(o, "_sync_payload").not_null = false;
            })
            .0,
            "nullability"
        );
    }
}

#[test]
fn a_table_without_column_versions_is_a_legacy_shape_upgraded_by_one_add_column() {
    let schema = fix1();
    for dialect in [sync_sqlite::DIALECT, sync_postgres::DIALECT] {
        let mut observed = sync_schema::ObservedTables::new();
        for t in &schema.tables {
            let mut o = ObservedTable::as_created(t, dialect);
            if t.name == "tasks" {
                o.columns.retain(|c| c.name != "_sync_column_versions");
            }
            observed.insert(o);
        }
        let plan = sync_schema::plan_legacy_upgrade(&schema, &observed, dialect);
        let bytes = sync_schema::INTERNAL_COLUMNS[5].sql_type(dialect);
        assert_eq!(
            plan.to_sql_lines(),
            vec![format!(
                "ALTER TABLE \"tasks\" ADD COLUMN \"_sync_column_versions\" {bytes}"
            )],
            "{dialect}"
        );
        assert_eq!(
            plan.to_json()["columnAdditions"][0]["sql"],
            plan.to_sql_lines()[0]
        );
        // Before the upgrade the physical check names the missing column.
        let tasks = schema.table("tasks").unwrap();
        let error = check_physical(tasks, observed.get("tasks").unwrap(), dialect).unwrap_err();
        assert_eq!(error.get_detail("reason"), Some("missing_column"));
        // The created state has nothing to upgrade.
        let mut created = sync_schema::ObservedTables::new();
        for t in &schema.tables {
            created.insert(ObservedTable::as_created(t, dialect));
        }
        assert!(sync_schema::plan_legacy_upgrade(&schema, &created, dialect).is_empty());
    }
}
