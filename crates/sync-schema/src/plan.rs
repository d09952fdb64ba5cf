//! Migration planning for the bump transaction (`schema-and-migrations.md`
//! §7.2, §7.3, §9.1 steps 6–10, §12): the plan is a data value that can be
//! printed, serialized and tested before a dialect executes it.

use std::fmt;

use serde_json::{json, Value};
use sync_core::{CompiledSchema, CompiledTable, Error, ErrorCode, Result};

use crate::ddl::{
    add_column_sql, create_index_statements, create_table_sql, drop_column_sql, drop_index_sql,
    drop_table_sql, quote_ident,
};
use crate::dialect::Dialect;
use crate::index_name::PHYSICAL_INDEX_PREFIX;
use crate::layouts::{retired_table_names, StoredLayouts};
use crate::legacy::{key_collation_upgrades, missing_internal_columns};
use crate::observed::{ObservedTable, ObservedTables};
use crate::rewrite::{rewrite_plan, RewritePlan};
use crate::statement::Statement;

/// One table retired on a bump (§12): present in the stored layouts, absent
/// from the configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetiredTable {
    /// Table name.
    pub table: String,
    /// Its scope-index, blob-reference and tombstone deletes (all
    /// partitions), then `DROP TABLE IF EXISTS`.
    pub statements: Vec<Statement>,
}

/// Everything a bump transaction does between introspection and the marker
/// write, in execution order: key-collation upgrades (§9.1 step 6), table
/// retirements in byte order (step 7), all drops then all creates (step 9),
/// then the row rewrites (step 10).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrationPlan {
    /// The dialect the statements are written for.
    pub dialect: Dialect,
    /// The configured schema version the plan migrates to.
    pub schema_version: i32,
    /// Postgres: legacy default-collation key columns converted to `COLLATE "C"`.
    pub key_collations: Vec<Statement>,
    /// Retired tables, sorted byte-wise.
    pub retired: Vec<RetiredTable>,
    /// Owned index drops and projection column drops (every drop runs before
    /// every create).
    pub drops: Vec<Statement>,
    /// Table creations, added columns and declared indexes.
    pub creates: Vec<Statement>,
    /// One rewrite plan per configured table, in configuration order.
    pub rewrites: Vec<RewritePlan>,
}

impl MigrationPlan {
    /// Every statement in execution order (collations, retirements, drops,
    /// creates). Row rewrites are separate: see [`Self::rewrites`].
    pub fn statements(&self) -> impl Iterator<Item = &Statement> + '_ {
        self.key_collations
            .iter()
            .chain(self.retired.iter().flat_map(|r| r.statements.iter()))
            .chain(&self.drops)
            .chain(&self.creates)
    }

    /// The statement texts in execution order.
    pub fn to_sql_lines(&self) -> Vec<String> {
        self.statements().map(|s| s.sql.clone()).collect()
    }

    /// The rewrite plans of tables whose rows are rewritten.
    pub fn needed_rewrites(&self) -> impl Iterator<Item = &RewritePlan> + '_ {
        self.rewrites.iter().filter(|r| r.needs_rewrite())
    }

    /// JSON form for `--dry-run` output.
    pub fn to_json(&self) -> Value {
        let list = |v: &[Statement]| v.iter().map(Statement::to_json).collect::<Vec<_>>();
        json!({
            "dialect": self.dialect.as_str(),
            "schemaVersion": self.schema_version,
            "keyCollations": list(&self.key_collations),
            "retired": self.retired.iter().map(|r| json!({
                "table": r.table,
                "statements": list(&r.statements),
            })).collect::<Vec<_>>(),
            "drops": list(&self.drops),
            "creates": list(&self.creates),
            "rewrites": self.rewrites.iter().map(RewritePlan::to_json).collect::<Vec<_>>(),
        })
    }
}

/// A commented SQL script; statements end with `;`, parameters follow as a
/// comment.
impl fmt::Display for MigrationPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "-- migration plan ({}) to schema version {}",
            self.dialect, self.schema_version
        )?;
        section(f, "key column collations", &self.key_collations)?;
        for retired in &self.retired {
            section(
                f,
                &format!("retire {}", quote_ident(&retired.table)),
                &retired.statements,
            )?;
        }
        section(f, "drops", &self.drops)?;
        section(f, "creates", &self.creates)?;
        let rewrites: Vec<_> = self.needed_rewrites().collect();
        if !rewrites.is_empty() {
            writeln!(f, "-- row rewrites")?;
        }
        for rewrite in rewrites {
            let mut what = Vec::new();
            if rewrite.migrate {
                what.push("re-encode payloads");
            }
            if rewrite.backfill {
                what.push("refresh projections");
            }
            writeln!(f, "-- {}: {}", quote_ident(&rewrite.table), what.join(", "))?;
        }
        Ok(())
    }
}

fn section(f: &mut fmt::Formatter<'_>, title: &str, statements: &[Statement]) -> fmt::Result {
    if statements.is_empty() {
        return Ok(());
    }
    writeln!(f, "-- {title}")?;
    statements.iter().try_for_each(|s| writeln!(f, "{s}"))
}

/// Plans the bump transaction from the stored layouts and the observed state
/// of the configured tables (introspected inside the migration lock).
///
/// Fails with comparison A's `sync.storage.migration_refused`, or with
/// `sync.storage.backend` (`reason = dependent_index` / `dependent_constraint`)
/// when an operator index or a constraint depends on a projection column the
/// plan would drop (§7.2; checked on both dialects so the failure is uniform
/// and happens before any DDL).
pub fn plan_migration(
    schema: &CompiledSchema,
    stored: &StoredLayouts,
    observed: &ObservedTables,
    dialect: Dialect,
) -> Result<MigrationPlan> {
    let rewrites = schema
        .tables
        .iter()
        .map(|table| rewrite_plan(table, stored.get(&table.name), observed.get(&table.name)))
        .collect::<Result<Vec<_>>>()?;
    let mut plan = MigrationPlan {
        dialect,
        schema_version: schema.version,
        key_collations: key_collation_upgrades(schema, observed, dialect),
        retired: retired_table_names(schema, stored)
            .into_iter()
            .map(|table| retire(table, dialect))
            .collect(),
        drops: Vec::new(),
        creates: Vec::new(),
        rewrites,
    };
    for table in &schema.tables {
        match observed.get(&table.name) {
            None => plan_absent(table, dialect, &mut plan),
            Some(physical) => plan_present(table, physical, dialect, &mut plan)?,
        }
    }
    Ok(plan)
}

/// §12: the statements that retire one table.
fn retire(table: String, dialect: Dialect) -> RetiredTable {
    let p = dialect.placeholder(1);
    let delete = |internal: &str| {
        Statement::with_params(
            format!("DELETE FROM {internal} WHERE tbl = {p}"),
            vec![table.clone()],
        )
    };
    let statements = vec![
        delete("sync_row_scopes"),
        delete("sync_blob_refs"),
        delete("sync_tombstones"),
        Statement::new(drop_table_sql(&table)),
    ];
    RetiredTable { table, statements }
}

fn plan_absent(table: &CompiledTable, dialect: Dialect, plan: &mut MigrationPlan) {
    plan.creates
        .push(Statement::new(create_table_sql(table, dialect)));
    if table.materialize {
        plan.creates.extend(
            table
                .indexes
                .iter()
                .flat_map(|index| create_index_statements(table, index, dialect))
                .map(Statement::new),
        );
    }
}

fn plan_present(
    table: &CompiledTable,
    physical: &ObservedTable,
    dialect: Dialect,
    plan: &mut MigrationPlan,
) -> Result<()> {
    let owned = |name: &str| name.starts_with(PHYSICAL_INDEX_PREFIX) || table.index(name).is_some();
    plan.drops.extend(
        physical
            .indexes
            .iter()
            .filter(|index| owned(&index.name))
            .map(|index| Statement::new(drop_index_sql(&table.name, &index.name, dialect))),
    );
    plan.creates
        .extend(missing_internal_columns(&table.name, physical, dialect));
    if table.materialize {
        plan.creates.extend(
            table
                .columns
                .iter()
                .filter(|c| physical.column(&c.name).is_none())
                .map(|c| Statement::new(add_column_sql(&table.name, c, dialect))),
        );
        plan.creates.extend(
            table
                .indexes
                .iter()
                .flat_map(|index| create_index_statements(table, index, dialect))
                .map(Statement::new),
        );
        return Ok(());
    }
    let dropped: Vec<&str> = table
        .columns
        .iter()
        .map(|c| c.name.as_str())
        .filter(|name| physical.column(name).is_some())
        .collect();
    for column in &dropped {
        check_no_dependents(&table.name, column, physical, &owned)?;
    }
    plan.drops.extend(
        dropped
            .iter()
            .map(|c| Statement::new(drop_column_sql(&table.name, c))),
    );
    Ok(())
}

/// §7.2: an operator index or a constraint on a projection column being
/// dropped fails the migration before any DDL.
fn check_no_dependents(
    table: &str,
    column: &str,
    physical: &ObservedTable,
    owned: &dyn Fn(&str) -> bool,
) -> Result<()> {
    let dependent = |reason: &str| {
        Error::new(ErrorCode::Backend)
            .detail("table", table)
            .detail("column", column)
            .detail("reason", reason)
    };
    if let Some(index) = physical
        .indexes
        .iter()
        .find(|ix| !owned(&ix.name) && ix.columns.iter().any(|c| c == column))
    {
        return Err(dependent("dependent_index").detail("index", &index.name));
    }
    if let Some(constraint) = physical
        .constraints
        .iter()
        .find(|k| k.columns.iter().any(|c| c == column))
    {
        return Err(dependent("dependent_constraint").detail("constraint", &constraint.name));
    }
    Ok(())
}
