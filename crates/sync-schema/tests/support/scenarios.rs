//! Plan scenarios shared by the snapshot tests.

use serde_json::Value;
use sync_core::CompiledSchema;
use sync_schema::{
    plan_legacy_upgrade, plan_migration, Dialect, LegacyUpgradePlan, MigrationPlan, ObservedColumn,
    ObservedIndex, ObservedTable, ObservedTables, StoredLayouts,
};

use super::{compiled, fix1, fix2, EVERY_TYPE, FIX1};

/// Every FIX1 table as our DDL creates it.
pub fn created(schema: &CompiledSchema, dialect: Dialect) -> ObservedTables {
    schema
        .tables
        .iter()
        .map(|t| ObservedTable::as_created(t, dialect))
        .collect()
}

/// FIX1 edited as JSON and recompiled.
pub fn fix1_edited(edit: impl FnOnce(&mut Value)) -> CompiledSchema {
    let mut value: Value = serde_json::from_str(FIX1).unwrap();
    value["version"] = 2.into();
    edit(&mut value);
    compiled(&value.to_string())
}

/// A fresh database: everything created.
pub fn fresh_every_type(dialect: Dialect) -> MigrationPlan {
    plan_migration(
        &compiled(EVERY_TYPE),
        &StoredLayouts::new(),
        &ObservedTables::new(),
        dialect,
    )
    .unwrap()
}

/// FIX1 → FIX2 on a database our DDL created.
pub fn bump_fix1_fix2(dialect: Dialect) -> MigrationPlan {
    let f1 = fix1();
    plan_migration(
        &fix2(),
        &StoredLayouts::from_schema(&f1),
        &created(&f1, dialect),
        dialect,
    )
    .unwrap()
}

/// FIX1 → v2 without `docs`.
pub fn retire_docs(dialect: Dialect) -> MigrationPlan {
    let f1 = fix1();
    let v2 = fix1_edited(|v| {
        v["tables"].as_array_mut().unwrap().remove(1);
    });
    plan_migration(
        &v2,
        &StoredLayouts::from_schema(&f1),
        &created(&f1, dialect),
        dialect,
    )
    .unwrap()
}

/// A FIX1 database in the reference's shape: a bare `tasks_by_title`, a
/// `sync_ix_tasks_by_project_title` without the leading partition column, an
/// operator index, default-collation key columns (Postgres) on `tasks` and on
/// the internal `sync_commits`.
pub fn legacy_observed(dialect: Dialect) -> ObservedTables {
    let f1 = fix1();
    let mut observed = created(&f1, dialect);
    let mut tasks = ObservedTable::as_created(f1.table("tasks").unwrap(), dialect);
    tasks.indexes = vec![
        ObservedIndex {
            name: "tasks_by_title".into(),
            unique: false,
            columns: vec!["title".into()],
        },
        ObservedIndex {
            name: "sync_ix_tasks_by_project_title".into(),
            unique: true,
            columns: vec!["project_id".into(), "title".into()],
        },
        ObservedIndex {
            name: "ops_tasks_tuning".into(),
            unique: false,
            columns: vec!["done".into()],
        },
    ];
    for column in &mut tasks.columns {
        column.collation = None;
    }
    observed.insert(tasks);
    let key = ObservedColumn {
        not_null: true,
        primary_key_position: 1,
        ..ObservedColumn::new("partition", "text")
    };
    let seq = ObservedColumn {
        not_null: true,
        primary_key_position: 2,
        ..ObservedColumn::new("commit_seq", "bigint")
    };
    observed.insert(ObservedTable::with_columns("sync_commits", vec![key, seq]));
    observed
}

/// The same-version legacy upgrade of [`legacy_observed`].
pub fn legacy_same_version(dialect: Dialect) -> LegacyUpgradePlan {
    plan_legacy_upgrade(&fix1(), &legacy_observed(dialect), dialect)
}

/// FIX1 → FIX2 on the legacy database.
pub fn legacy_bump(dialect: Dialect) -> MigrationPlan {
    plan_migration(
        &fix2(),
        &StoredLayouts::from_schema(&fix1()),
        &legacy_observed(dialect),
        dialect,
    )
    .unwrap()
}

/// v2 turns `docs` into a non-materialized table.
pub fn dematerialize_docs(dialect: Dialect) -> MigrationPlan {
    let f1 = fix1();
    let v2 = fix1_edited(|v| v["tables"][1]["materialize"] = false.into());
    plan_migration(
        &v2,
        &StoredLayouts::from_schema(&f1),
        &created(&f1, dialect),
        dialect,
    )
    .unwrap()
}

/// v2 materializes `secrets`.
pub fn materialize_secrets(dialect: Dialect) -> MigrationPlan {
    let f1 = fix1();
    let v2 = fix1_edited(|v| v["tables"][2]["materialize"] = true.into());
    plan_migration(
        &v2,
        &StoredLayouts::from_schema(&f1),
        &created(&f1, dialect),
        dialect,
    )
    .unwrap()
}
