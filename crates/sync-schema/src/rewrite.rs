//! Rewrite plans (`schema-and-migrations.md` §7.3) and the keyset-paged SQL
//! that executes them (§11).
//!
//! The re-encoding itself (decode under the old layout, append NULLs, encode
//! under the current columns) belongs to the row codec in `sync-core`; this
//! module only decides *whether* a table is rewritten and spells the SQL.

use serde_json::{json, Value};
use sync_core::{CompiledTable, LayoutColumn, Result};

use crate::dialect::{Dialect, INTERNAL_COLUMNS};
use crate::layouts::compare_for_bump;
use crate::observed::ObservedTable;

/// Rows per rewrite page (keyset on `(_sync_partition, _sync_row_id)`).
pub const REWRITE_PAGE_SIZE: usize = 500;

/// What a bump does to the rows of one configured table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RewritePlan {
    /// Table name.
    pub table: String,
    /// Re-encode payloads from `old_layout` to the configured columns
    /// (comparison A found appended columns).
    pub migrate: bool,
    /// Refresh the projection columns from the payloads (materialization
    /// switched on, or an operator dropped a projection column).
    pub backfill: bool,
    /// The stored layout payloads are decoded with, when one exists.
    pub old_layout: Option<Vec<LayoutColumn>>,
}

impl RewritePlan {
    /// A plan that touches no row.
    pub fn none(table: impl Into<String>) -> Self {
        Self {
            table: table.into(),
            migrate: false,
            backfill: false,
            old_layout: None,
        }
    }

    /// Whether any row is rewritten.
    pub fn needs_rewrite(&self) -> bool {
        self.migrate || self.backfill
    }

    /// The page query. Without `after` it is the first page (no lower bound);
    /// with `after` it binds the last `(partition, row_id)` of the previous
    /// page. Stop after an empty or short page.
    pub fn page_sql(&self, dialect: Dialect, after: bool) -> String {
        let partition = dialect.quote_ident(INTERNAL_COLUMNS[0].name);
        let row_id = dialect.quote_ident(INTERNAL_COLUMNS[1].name);
        let payload = dialect.quote_ident(INTERNAL_COLUMNS[4].name);
        let bound = if after {
            format!(
                " WHERE ({partition}, {row_id}) > ({}, {})",
                dialect.placeholder(1),
                dialect.placeholder(2)
            )
        } else {
            String::new()
        };
        format!(
            "SELECT {partition}, {row_id}, {payload} FROM {}{bound} ORDER BY {partition}, {row_id} LIMIT {REWRITE_PAGE_SIZE}",
            dialect.quote_ident(&self.table)
        )
    }

    /// `SELECT count(*)` of the table: the rows a rewrite will visit (for
    /// progress reports).
    pub fn count_sql(&self, dialect: Dialect) -> String {
        format!("SELECT count(*) FROM {}", dialect.quote_ident(&self.table))
    }

    /// The per-row update: every projection column (materialized tables, in
    /// column order) then `_sync_payload`, keyed by partition and row id —
    /// parameters in that order.
    pub fn update_sql(table: &CompiledTable, dialect: Dialect) -> String {
        let mut targets: Vec<&str> = Vec::new();
        if table.materialize {
            targets.extend(table.columns.iter().map(|c| c.name.as_str()));
        }
        targets.push(INTERNAL_COLUMNS[4].name);
        let assignments: Vec<String> = targets
            .iter()
            .enumerate()
            .map(|(i, c)| {
                format!(
                    "{} = {}",
                    dialect.quote_ident(c),
                    dialect.placeholder(i + 1)
                )
            })
            .collect();
        let n = targets.len();
        format!(
            "UPDATE {} SET {} WHERE {} = {} AND {} = {}",
            dialect.quote_ident(&table.name),
            assignments.join(", "),
            dialect.quote_ident(INTERNAL_COLUMNS[0].name),
            dialect.placeholder(n + 1),
            dialect.quote_ident(INTERNAL_COLUMNS[1].name),
            dialect.placeholder(n + 2)
        )
    }

    /// `{"table","migrate","backfill","oldLayout"}`.
    pub fn to_json(&self) -> Value {
        let old_layout = self.old_layout.as_ref().map(|layout| {
            layout
                .iter()
                .map(|c| json!({"name": c.name, "type": c.column_type, "nullable": c.nullable}))
                .collect::<Vec<_>>()
        });
        json!({
            "table": self.table,
            "migrate": self.migrate,
            "backfill": self.backfill,
            "oldLayout": old_layout,
        })
    }
}

/// `rewrite_plan(table, old_layout, physical_before)` (§7.3).
///
/// No stored layout, or no physical table before the migration: nothing to
/// rewrite and nothing compared. Otherwise `migrate` is comparison A's
/// `appended` (its refusals are returned) and `backfill` is set when the
/// table is materialized and a column at a position below `old.len()` was
/// absent physically.
pub fn rewrite_plan(
    table: &CompiledTable,
    old_layout: Option<&[LayoutColumn]>,
    physical_before: Option<&ObservedTable>,
) -> Result<RewritePlan> {
    let (Some(old), Some(before)) = (old_layout, physical_before.filter(|t| t.exists)) else {
        return Ok(RewritePlan::none(&table.name));
    };
    let migrate = compare_for_bump(table, old)?;
    let backfill = table.materialize
        && table
            .columns
            .iter()
            .take(old.len())
            .any(|c| before.column(&c.name).is_none());
    Ok(RewritePlan {
        table: table.name.clone(),
        migrate,
        backfill,
        old_layout: Some(old.to_vec()),
    })
}
