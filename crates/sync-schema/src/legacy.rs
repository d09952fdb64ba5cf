//! Legacy shapes of databases written by the reference implementation and
//! their upgrade (`schema-and-migrations.md` §13, `README.md` §6).

use std::fmt;

use serde_json::{json, Value};
use sync_core::{CompiledSchema, IndexDef};

use crate::ddl::{
    add_internal_column_sql, alter_key_collation_sql, create_index_statements, drop_index_sql,
};
use crate::dialect::{Dialect, INTERNAL_COLUMNS};
use crate::index_name::physical_index_name;
use crate::observed::{ObservedTable, ObservedTables};
use crate::physical::is_legacy_definition;
use crate::statement::Statement;

/// The text key columns (*K* in `tables.md` §3) of every internal table,
/// declared `COLLATE "C"` on Postgres.
pub const INTERNAL_KEY_COLUMNS: &[(&str, &[&str])] = &[
    ("sync_partitions", &["partition"]),
    ("sync_partition_registry", &["partition"]),
    ("sync_commits", &["partition"]),
    ("sync_changes", &["partition", "tbl", "row_id"]),
    ("sync_change_scopes", &["partition", "tbl", "var", "value"]),
    (
        "sync_row_scopes",
        &["partition", "tbl", "var", "value", "row_id"],
    ),
    ("sync_tombstones", &["partition", "tbl", "row_id"]),
    (
        "sync_push_results",
        &["partition", "client_id", "client_commit_id"],
    ),
    ("sync_clients", &["partition", "client_id"]),
    ("sync_reactions", &["partition", "idempotency_key"]),
    ("sync_blob_refs", &["partition", "tbl", "row_id", "blob_id"]),
    ("sync_backfill_checkpoints", &["partition", "name"]),
    ("sync_writer_fence", &["partition"]),
];

/// The statements that upgrade the legacy shapes found in the observed state.
/// Empty when there is nothing to upgrade (the same-version path then takes
/// no lock and issues no DDL).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LegacyUpgradePlan {
    /// The dialect the statements are written for.
    pub dialect: Dialect,
    /// `ALTER TABLE … ADD COLUMN "_sync_column_versions" …` for configured
    /// tables written before the column existed (metadata only: no row is
    /// rewritten, every row reads `NULL`).
    pub column_additions: Vec<Statement>,
    /// Postgres: `ALTER TABLE … ALTER COLUMN … TYPE text COLLATE "C"` for key
    /// columns with the database's default collation.
    pub collations: Vec<Statement>,
    /// Drops of legacy-shaped declared indexes.
    pub index_drops: Vec<Statement>,
    /// Re-creation of those declared indexes in the `tables.md` §5.1 shape.
    pub index_creates: Vec<Statement>,
}

impl LegacyUpgradePlan {
    /// Whether no legacy shape was found.
    pub fn is_empty(&self) -> bool {
        self.column_additions.is_empty()
            && self.collations.is_empty()
            && self.index_drops.is_empty()
            && self.index_creates.is_empty()
    }

    /// Every statement in execution order: column additions, collations,
    /// drops, creates.
    pub fn statements(&self) -> impl Iterator<Item = &Statement> + '_ {
        self.column_additions
            .iter()
            .chain(&self.collations)
            .chain(&self.index_drops)
            .chain(&self.index_creates)
    }

    /// The statement texts in execution order.
    pub fn to_sql_lines(&self) -> Vec<String> {
        self.statements().map(|s| s.sql.clone()).collect()
    }

    /// JSON form for `--dry-run` output.
    pub fn to_json(&self) -> Value {
        let list = |v: &[Statement]| v.iter().map(Statement::to_json).collect::<Vec<_>>();
        json!({
            "dialect": self.dialect.as_str(),
            "columnAdditions": list(&self.column_additions),
            "collations": list(&self.collations),
            "indexDrops": list(&self.index_drops),
            "indexCreates": list(&self.index_creates),
        })
    }
}

impl fmt::Display for LegacyUpgradePlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "-- legacy shape upgrade ({})", self.dialect)?;
        if self.is_empty() {
            writeln!(f, "-- nothing to upgrade")?;
        }
        for statement in self.statements() {
            writeln!(f, "{statement}")?;
        }
        Ok(())
    }
}

/// Detects the legacy shapes of §13 in `observed` and plans their upgrade:
///
/// - a configured table without `_sync_column_versions` (written before
///   wire version 3's column versions) → `ADD COLUMN`, nullable, so no row
///   is rewritten (`docs/design/wire-v3.md` §3.5);
/// - a declared index of a materialized configured table present under its
///   bare declared name, or under its physical name with exactly the
///   declared columns and uniqueness but without the leading
///   `_sync_partition` → drop it, create the declared index;
/// - Postgres: `_sync_partition` / `_sync_row_id` of a configured table, or a
///   key column of an internal table ([`INTERNAL_KEY_COLUMNS`], when the
///   dialect included it in `observed`), with the default collation →
///   `ALTER … TYPE text COLLATE "C"`.
pub fn plan_legacy_upgrade(
    schema: &CompiledSchema,
    observed: &ObservedTables,
    dialect: Dialect,
) -> LegacyUpgradePlan {
    let mut plan = LegacyUpgradePlan {
        dialect,
        column_additions: schema
            .tables
            .iter()
            .filter_map(|t| Some((t, observed.get(&t.name)?)))
            .flat_map(|(t, physical)| missing_internal_columns(&t.name, physical, dialect))
            .collect(),
        collations: key_collation_upgrades(schema, observed, dialect),
        index_drops: Vec::new(),
        index_creates: Vec::new(),
    };
    for table in schema.tables.iter().filter(|t| t.materialize) {
        let Some(physical) = observed.get(&table.name) else {
            continue;
        };
        for index in &table.indexes {
            let drops = legacy_index_names(index, physical);
            if !drops.is_empty() {
                plan.index_drops.extend(
                    drops
                        .iter()
                        .map(|name| Statement::new(drop_index_sql(&table.name, name, dialect))),
                );
                plan.index_creates.extend(
                    create_index_statements(table, index, dialect)
                        .into_iter()
                        .map(Statement::new),
                );
            }
        }
    }
    plan
}

/// `ADD COLUMN` for each nullable internal column that `physical` (an
/// existing configured table) lacks: the columns a newer layout added
/// without rewriting rows.
pub(crate) fn missing_internal_columns(
    table: &str,
    physical: &ObservedTable,
    dialect: Dialect,
) -> Vec<Statement> {
    if !physical.exists {
        return Vec::new();
    }
    INTERNAL_COLUMNS
        .iter()
        .filter(|c| c.nullable && physical.column(c.name).is_none())
        .map(|c| Statement::new(add_internal_column_sql(table, c, dialect)))
        .collect()
}

/// Names of observed indexes that are a legacy shape of `index`.
fn legacy_index_names(index: &IndexDef, physical: &ObservedTable) -> Vec<String> {
    let mut names = Vec::new();
    if physical.index(&index.name).is_some() {
        names.push(index.name.clone());
    }
    let physical_name = physical_index_name(&index.name);
    if physical
        .index(&physical_name)
        .is_some_and(|found| is_legacy_definition(index, found))
    {
        names.push(physical_name);
    }
    names
}

/// Postgres key columns (configured and internal tables) still on the
/// database's default collation.
pub(crate) fn key_collation_upgrades(
    schema: &CompiledSchema,
    observed: &ObservedTables,
    dialect: Dialect,
) -> Vec<Statement> {
    if dialect.key_collation().is_none() {
        return Vec::new();
    }
    let app_keys: Vec<&str> = INTERNAL_COLUMNS
        .iter()
        .filter(|c| c.is_key())
        .map(|c| c.name)
        .collect();
    let configured = schema
        .tables
        .iter()
        .map(|t| (t.name.as_str(), app_keys.as_slice()));
    let internal = INTERNAL_KEY_COLUMNS
        .iter()
        .map(|(table, columns)| (*table, *columns));
    let mut statements = Vec::new();
    for (table, keys) in configured.chain(internal) {
        let Some(physical) = observed.get(table) else {
            continue;
        };
        for key in keys {
            let legacy = physical.column(key).is_some_and(|c| {
                c.collation.is_none() && c.declared_type.eq_ignore_ascii_case("text")
            });
            if legacy {
                statements.push(Statement::new(alter_key_collation_sql(table, key, dialect)));
            }
        }
    }
    statements
}
