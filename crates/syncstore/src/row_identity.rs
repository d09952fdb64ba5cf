//! A bump must not change how existing rows are identified.
//!
//! `schema-and-migrations.md` §7.4: a changed primary key column or changed
//! scope patterns are invisible in the stored layouts and allowed by
//! storage, but existing rows keep the row ids and scopes they were written
//! with — callers MUST NOT do this without a data migration. Layouts cannot
//! show the change; the rows can: a row's stored row id and scopes are the
//! renderings of its primary-key and scope columns (§3.4). `migrate` decodes
//! a sample of each table's current rows under the stored layout and
//! refuses the bump when what the new schema derives from them differs
//! from what is stored. A table without rows passes: no row keeps an old
//! identity. After a data migration that rewrote the rows, the sample
//! agrees and the bump goes ahead.

use sync_core::{codec, CompiledSchema, CompiledTable, LayoutColumn, ServerStorage, StoredRow};
use sync_schema::{ObservedTables, StoredLayouts};

use crate::error::{CliCode, CliError, CliResult};

/// Rows decoded per table, at most.
pub const SAMPLE_ROWS: usize = 100;

/// Partitions of the registry probed per table, at most (a table's rows
/// may sit in few of many partitions).
pub const SAMPLE_PARTITIONS: usize = 1000;

/// Every configured table with a stored layout that exists physically
/// (`observed`): a sample of its rows
/// (the first rows of the first registered partitions, byte order) still
/// has the row ids and scopes the schema derives, else
/// `sync.cli.row_identity_changed` (`details`: `table`, `reason` =
/// `primary_key` or `scopes`, `partition`, `row_id`, `expected`).
pub fn check(
    storage: &dyn ServerStorage,
    schema: &CompiledSchema,
    layouts: &StoredLayouts,
    observed: &ObservedTables,
) -> CliResult<()> {
    let partitions = storage.list_partitions()?;
    for table in &schema.tables {
        let Some(layout) = layouts.get(&table.name) else {
            continue;
        };
        if observed.get(&table.name).is_none() {
            continue;
        }
        check_table(storage, table, layout, &partitions)?;
    }
    Ok(())
}

fn check_table(
    storage: &dyn ServerStorage,
    table: &CompiledTable,
    layout: &[LayoutColumn],
    partitions: &[String],
) -> CliResult<()> {
    let mut sampled = 0;
    for partition in partitions.iter().take(SAMPLE_PARTITIONS) {
        let limit = i64::try_from(SAMPLE_ROWS - sampled).unwrap_or(1);
        for row in storage.inspect_table_rows(partition, &table.name, None, limit)? {
            sampled += 1;
            if let Some(error) = changed(table, layout, &row) {
                return Err(error.detail("partition", partition));
            }
        }
        if sampled >= SAMPLE_ROWS {
            break;
        }
    }
    Ok(())
}

/// The refusal when the schema derives another row id or other scopes from
/// the row than the stored ones. A payload the stored layout cannot decode
/// is left to the bump's rewrite, which fails on it by itself.
fn changed(table: &CompiledTable, layout: &[LayoutColumn], row: &StoredRow) -> Option<CliError> {
    let values = codec::decode(layout, &row.payload).ok()?;
    let key = |index: usize| values.get(index).and_then(|v| v.render_key());
    let refuse = |reason: &str, expected: String| {
        CliError::new(CliCode::RowIdentityChanged)
            .detail("table", &table.name)
            .detail("reason", reason)
            .detail("row_id", &row.row_id)
            .detail("expected", expected)
    };
    let row_id = key(table.primary_key_index);
    if row_id.as_deref() != Some(row.row_id.as_str()) {
        let expected = row_id.unwrap_or_else(|| "none (the column is empty)".to_owned());
        return Some(refuse("primary_key", expected));
    }
    let scopes: Option<sync_core::StoredScopes> = table
        .scope_patterns
        .iter()
        .map(|p| Some((p.variable.clone(), key(p.column_index)?)))
        .collect();
    if scopes.as_ref() != Some(&row.scopes) {
        let expected = scopes.map_or_else(
            || "none (a scope column is empty)".to_owned(),
            |s| serde_json::to_string(&s).unwrap_or_default(),
        );
        return Some(refuse("scopes", expected).detail(
            "stored",
            serde_json::to_string(&row.scopes).unwrap_or_default(),
        ));
    }
    None
}
