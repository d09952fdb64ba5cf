//! Layout comparisons (§6.3–§6.5), rewrite plans (§7.3) and the DDL list
//! (§7.2) as data.

mod support;

use serde_json::json;
use support::scenarios::{created, fix1_edited};
use support::*;
use sync_core::ErrorCode;
use sync_schema::{
    compare_for_bump, compare_same_version, parse_layouts, plan_migration, retired_table_names,
    rewrite_plan, LegacyUpgradePlan, ObservedConstraint, ObservedIndex, ObservedTable,
    ObservedTables, RewritePlan, Statement, StoredLayouts,
};

fn fix1_layouts() -> StoredLayouts {
    StoredLayouts::from_schema(&fix1())
}

#[test]
fn c021_appending_a_non_nullable_column_is_refused() {
    let v2 = fix1_edited(|v| {
        v["tables"][0]["columns"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "owner", "type": "string"}))
    });
    let old = fix1_layouts();
    let error =
        compare_for_bump(v2.table("tasks").unwrap(), old.get("tasks").unwrap()).unwrap_err();
    assert_eq!(error.code(), ErrorCode::MigrationRefused);
    assert_eq!(error.get_detail("reason"), Some("column_not_nullable"));
    assert_eq!(error.get_detail("column"), Some("owner"));
    assert_eq!(error.get_detail("table"), Some("tasks"));
    for dialect in [sync_sqlite::DIALECT, sync_postgres::DIALECT] {
        let error = plan_migration(&v2, &old, &created(&fix1(), dialect), dialect).unwrap_err();
        assert_eq!(error.get_detail("reason"), Some("column_not_nullable"));
    }
}

#[test]
fn c022_changing_a_type_is_refused() {
    let v2 = fix1_edited(|v| v["tables"][0]["columns"][4]["type"] = json!("string"));
    let error = compare_for_bump(
        v2.table("tasks").unwrap(),
        fix1_layouts().get("tasks").unwrap(),
    )
    .unwrap_err();
    assert_eq!(error.code(), ErrorCode::MigrationRefused);
    assert_eq!(error.get_detail("reason"), Some("column_changed"));
    assert_eq!(error.get_detail("column"), Some("priority"));
    assert_eq!(
        error.get_detail("expected"),
        Some(r#"{"name":"priority","type":"integer","nullable":true}"#)
    );
    assert_eq!(
        error.get_detail("actual"),
        Some(r#"{"name":"priority","type":"string","nullable":true}"#)
    );
    // Renames, nullability changes and toggling encryption are changes too.
    let renamed = fix1_edited(|v| v["tables"][0]["columns"][5]["name"] = json!("rating"));
    let error = compare_for_bump(
        renamed.table("tasks").unwrap(),
        fix1_layouts().get("tasks").unwrap(),
    )
    .unwrap_err();
    assert_eq!(error.get_detail("column"), Some("score"));
    let nullable = fix1_edited(|v| v["tables"][0]["columns"][2]["nullable"] = json!(true));
    let error = compare_for_bump(
        nullable.table("tasks").unwrap(),
        fix1_layouts().get("tasks").unwrap(),
    )
    .unwrap_err();
    assert_eq!(error.get_detail("reason"), Some("column_changed"));
}

#[test]
fn c023_removing_the_last_column_is_refused() {
    let v2 = fix1_edited(|v| {
        v["tables"][0]["columns"].as_array_mut().unwrap().pop();
    });
    let error = compare_for_bump(
        v2.table("tasks").unwrap(),
        fix1_layouts().get("tasks").unwrap(),
    )
    .unwrap_err();
    assert_eq!(error.code(), ErrorCode::MigrationRefused);
    assert_eq!(error.get_detail("reason"), Some("column_removed"));
    assert_eq!(error.get_detail("column"), Some("attachment"));
}

#[test]
fn removing_a_middle_column_names_that_column() {
    // `score` (the sixth of nine) is gone; the last stored column is not.
    let v2 = fix1_edited(|v| {
        v["tables"][0]["columns"].as_array_mut().unwrap().remove(5);
    });
    let error = compare_for_bump(
        v2.table("tasks").unwrap(),
        fix1_layouts().get("tasks").unwrap(),
    )
    .unwrap_err();
    assert_eq!(error.get_detail("reason"), Some("column_removed"));
    assert_eq!(error.get_detail("column"), Some("score"));
}

#[test]
fn appending_nullable_columns_is_allowed() {
    let f2 = fix2();
    let old = fix1_layouts();
    assert!(compare_for_bump(f2.table("tasks").unwrap(), old.get("tasks").unwrap()).unwrap());
    assert!(!compare_for_bump(f2.table("docs").unwrap(), old.get("docs").unwrap()).unwrap());
}

#[test]
fn c024_same_version_with_empty_layouts() {
    let error = compare_same_version(&fix1(), &parse_layouts(Some("{}")).unwrap()).unwrap_err();
    assert_eq!(error.code(), ErrorCode::StoredLayoutMismatch);
    assert_eq!(error.get_detail("table"), Some("tasks"));
    assert_eq!(error.get_detail("column"), Some("id"));
}

#[test]
fn c026_same_version_with_an_extra_stored_table() {
    let mut stored = fix1_layouts();
    stored.insert("zombies", vec![]);
    let error = compare_same_version(&fix1(), &stored).unwrap_err();
    assert_eq!(error.code(), ErrorCode::StoredLayoutMismatch);
    assert_eq!(error.get_detail("table"), Some("zombies"));
    assert_eq!(error.get_detail("column"), None);
}

#[test]
fn comparison_b_finds_the_first_difference() {
    compare_same_version(&fix1(), &fix1_layouts()).unwrap();
    // A stored layout with one column fewer: the configured name at that position.
    let stored = StoredLayouts::from_schema(&fix1());
    let error = compare_same_version(&fix2(), &stored).unwrap_err();
    assert_eq!(error.get_detail("table"), Some("tasks"));
    assert_eq!(error.get_detail("column"), Some("assignee"));
    // A stored layout with one column more: the stored name.
    let error = compare_same_version(&fix1(), &StoredLayouts::from_schema(&fix2())).unwrap_err();
    assert_eq!(error.get_detail("column"), Some("assignee"));
    // An unknown stored type never equals a configured type.
    let text = support::fix1_layouts_text().replace(r#""type":"float""#, r#""type":"double""#);
    let error = compare_same_version(&fix1(), &parse_layouts(Some(&text)).unwrap()).unwrap_err();
    assert_eq!(error.get_detail("column"), Some("score"));
}

#[test]
fn retired_tables_are_stored_tables_absent_from_configuration_in_byte_order() {
    let mut stored = fix1_layouts();
    for name in ["zeta", "Zeta", "alpha", "éclair"] {
        stored.insert(name, vec![]);
    }
    assert_eq!(
        retired_table_names(&fix1(), &stored),
        ["Zeta", "alpha", "zeta", "éclair"]
    );
    assert!(retired_table_names(&fix1(), &StoredLayouts::new()).is_empty());
}

#[test]
fn c025_bump_from_empty_layouts_rewrites_nothing() {
    for dialect in [sync_sqlite::DIALECT, sync_postgres::DIALECT] {
        let plan = plan_migration(
            &fix2(),
            &StoredLayouts::new(),
            &created(&fix1(), dialect),
            dialect,
        )
        .unwrap();
        assert_eq!(plan.needed_rewrites().count(), 0);
        assert!(plan.retired.is_empty());
        assert!(plan
            .to_sql_lines()
            .contains(&"ALTER TABLE \"tasks\" ADD COLUMN \"assignee\" TEXT".to_owned()));
    }
}

#[test]
fn fresh_database_creates_everything_and_rewrites_nothing() {
    let plan = plan_migration(
        &fix1(),
        &StoredLayouts::new(),
        &ObservedTables::new(),
        sync_sqlite::DIALECT,
    )
    .unwrap();
    assert!(plan.drops.is_empty());
    // 4 tables + 2 + 1 + 0 + 1 indexes (secrets is not materialized).
    assert_eq!(plan.creates.len(), 8);
    assert!(plan
        .rewrites
        .iter()
        .all(|r| *r == RewritePlan::none(&r.table)));
    // A stored layout whose table vanished physically: created, not compared.
    let stale = fix1_edited(|v| v["tables"][0]["columns"][0]["type"] = json!("integer"));
    let plan = plan_migration(
        &stale,
        &fix1_layouts(),
        &ObservedTables::new(),
        sync_sqlite::DIALECT,
    )
    .unwrap();
    assert_eq!(plan.needed_rewrites().count(), 0);
}

#[test]
fn c016_an_index_name_moving_between_tables_is_dropped_before_it_is_created() {
    let v2 = fix1_edited(|v| {
        v["tables"][1]["indexes"] = json!([]);
        v["tables"][0]["indexes"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "docs_by_body", "columns": ["title"]}));
    });
    for dialect in [sync_sqlite::DIALECT, sync_postgres::DIALECT] {
        let plan =
            plan_migration(&v2, &fix1_layouts(), &created(&fix1(), dialect), dialect).unwrap();
        let lines = plan.to_sql_lines();
        let drop = lines
            .iter()
            .position(|l| l == "DROP INDEX IF EXISTS \"sync_ix_docs_by_body\"")
            .unwrap();
        let create = lines
            .iter()
            .position(|l| {
                l.starts_with(
                    "CREATE INDEX IF NOT EXISTS \"sync_ix_docs_by_body\" ON \"tasks\" (\"_sync_partition\", \"title\"",
                )
            })
            .unwrap();
        assert!(drop < create);
        assert_eq!(
            lines
                .iter()
                .filter(|l| l.contains("sync_ix_docs_by_body"))
                .count(),
            2
        );
    }
}

#[test]
fn c015_redefined_index_is_rebuilt_under_one_name() {
    let v2 = fix1_edited(|v| {
        v["tables"][0]["indexes"] = json!([
            {"name": "tasks_by_title", "columns": ["project_id", "title"], "unique": true}
        ])
    });
    let plan = plan_migration(
        &v2,
        &fix1_layouts(),
        &created(&fix1(), sync_sqlite::DIALECT),
        sync_sqlite::DIALECT,
    )
    .unwrap();
    let lines = plan.to_sql_lines();
    assert!(lines.contains(&"DROP INDEX IF EXISTS \"sync_ix_tasks_by_title\"".to_owned()));
    assert!(lines.contains(&"DROP INDEX IF EXISTS \"sync_ix_tasks_by_project_title\"".to_owned()));
    assert!(lines.contains(
        &"CREATE UNIQUE INDEX IF NOT EXISTS \"sync_ix_tasks_by_title\" ON \"tasks\" (\"_sync_partition\", \"project_id\", \"title\")".to_owned()
    ));
    assert!(!lines
        .iter()
        .any(|l| l.starts_with("CREATE") && l.contains("project_title")));
}

#[test]
fn dropping_a_projection_column_with_a_dependent_object_fails_before_any_ddl() {
    let v2 = fix1_edited(|v| v["tables"][1]["materialize"] = json!(false));
    for dialect in [sync_sqlite::DIALECT, sync_postgres::DIALECT] {
        let mut observed = created(&fix1(), dialect);
        let mut docs = ObservedTable::as_created(fix1().table("docs").unwrap(), dialect);
        docs.indexes.push(ObservedIndex {
            name: "ops_docs_body".into(),
            unique: false,
            columns: vec!["body".into()],
        });
        observed.insert(docs.clone());
        let error = plan_migration(&v2, &fix1_layouts(), &observed, dialect).unwrap_err();
        assert_eq!(error.code(), ErrorCode::Backend);
        assert_eq!(error.get_detail("reason"), Some("dependent_index"));
        assert_eq!(error.get_detail("index"), Some("ops_docs_body"));
        assert_eq!(error.get_detail("column"), Some("body"));

        docs.indexes.pop();
        docs.constraints.push(ObservedConstraint {
            name: "docs_org_check".into(),
            columns: vec!["org_id".into()],
        });
        observed.insert(docs);
        let error = plan_migration(&v2, &fix1_layouts(), &observed, dialect).unwrap_err();
        assert_eq!(error.code(), ErrorCode::Backend);
        assert_eq!(error.get_detail("reason"), Some("dependent_constraint"));
        assert_eq!(error.get_detail("constraint"), Some("docs_org_check"));
        assert_eq!(error.get_detail("column"), Some("org_id"));
    }
}

#[test]
fn operator_dropped_projection_column_is_backfilled() {
    let f1 = fix1();
    let mut tasks = ObservedTable::as_created(f1.table("tasks").unwrap(), sync_sqlite::DIALECT);
    tasks.columns.retain(|c| c.name != "priority");
    let rewrite = rewrite_plan(
        fix2().table("tasks").unwrap(),
        fix1_layouts().get("tasks"),
        Some(&tasks),
    )
    .unwrap();
    assert!(rewrite.migrate && rewrite.backfill);
    let mut observed = created(&f1, sync_sqlite::DIALECT);
    observed.insert(tasks);
    let plan = plan_migration(&fix2(), &fix1_layouts(), &observed, sync_sqlite::DIALECT).unwrap();
    let lines = plan.to_sql_lines();
    assert!(lines.contains(&"ALTER TABLE \"tasks\" ADD COLUMN \"priority\" INTEGER".to_owned()));
    // Without a physical table before, nothing is rewritten.
    let none = rewrite_plan(
        fix2().table("tasks").unwrap(),
        fix1_layouts().get("tasks"),
        None,
    )
    .unwrap();
    assert!(!none.needs_rewrite());
}

#[test]
fn rewrite_sql_pages_by_keyset_and_updates_every_projection() {
    let plan = RewritePlan::none("tasks");
    for dialect in [sync_sqlite::DIALECT, sync_postgres::DIALECT] {
        assert_eq!(plan.count_sql(dialect), "SELECT count(*) FROM \"tasks\"");
    }
    assert_eq!(
        plan.page_sql(sync_sqlite::DIALECT, false),
        "SELECT \"_sync_partition\", \"_sync_row_id\", \"_sync_payload\" FROM \"tasks\" ORDER BY \"_sync_partition\", \"_sync_row_id\" LIMIT 500"
    );
    assert_eq!(
        plan.page_sql(sync_postgres::DIALECT, true),
        "SELECT \"_sync_partition\", \"_sync_row_id\", \"_sync_payload\" FROM \"tasks\" WHERE (\"_sync_partition\", \"_sync_row_id\") > ($1, $2) ORDER BY \"_sync_partition\", \"_sync_row_id\" LIMIT 500"
    );
    let f1 = fix1();
    assert_eq!(
        RewritePlan::update_sql(f1.table("docs").unwrap(), sync_postgres::DIALECT),
        "UPDATE \"docs\" SET \"id\" = $1, \"org_id\" = $2, \"project_id\" = $3, \"body\" = $4, \"_sync_payload\" = $5 WHERE \"_sync_partition\" = $6 AND \"_sync_row_id\" = $7"
    );
    assert_eq!(
        RewritePlan::update_sql(f1.table("secrets").unwrap(), sync_sqlite::DIALECT),
        "UPDATE \"secrets\" SET \"_sync_payload\" = ? WHERE \"_sync_partition\" = ? AND \"_sync_row_id\" = ?"
    );
}

#[test]
fn a_legacy_plan_is_empty_only_without_any_statement() {
    let plan = |additions: usize, collations: usize, drops: usize, creates: usize| {
        let statements = |n: usize| (0..n).map(|i| Statement::new(format!("S{i}"))).collect();
        LegacyUpgradePlan {
            dialect: sync_sqlite::DIALECT,
            column_additions: statements(additions),
            collations: statements(collations),
            index_drops: statements(drops),
            index_creates: statements(creates),
        }
    };
    assert!(plan(0, 0, 0, 0).is_empty());
    for (a, c, d, i) in [
        (1, 0, 0, 0),
        (0, 1, 0, 0),
        (0, 0, 1, 0),
        (0, 0, 0, 1),
        (1, 1, 1, 1),
    ] {
        let plan = plan(a, c, d, i);
        assert!(!plan.is_empty(), "{a} {c} {d} {i}");
        assert_eq!(plan.statements().count(), a + c + d + i);
    }
}
