//! The schema ensured on one storage instance and the per-table SQL text
//! derived from it once.

use std::collections::HashMap;
use std::sync::Arc;

use sync_core::{CompiledSchema, CompiledTable};

use crate::dialect::quote_ident as q;

/// What `ensure_schema` recorded on the instance.
#[derive(Debug)]
pub struct Ensured {
    schema: Arc<CompiledSchema>,
    tables: HashMap<String, (CompiledTable, Arc<TableSql>)>,
}

impl Ensured {
    /// Derives the per-table SQL of `schema`.
    pub(crate) fn new(schema: Arc<CompiledSchema>) -> Self {
        let tables = schema
            .tables
            .iter()
            .map(|t| (t.name.clone(), (t.clone(), Arc::new(TableSql::new(t)))))
            .collect();
        Self { schema, tables }
    }

    /// The running version.
    pub(crate) fn version(&self) -> i32 {
        self.schema.version
    }
}

impl sync_core::front::EnsuredSchema for Ensured {
    type Handle = Arc<TableSql>;

    fn schema(&self) -> &Arc<CompiledSchema> {
        &self.schema
    }

    fn table(&self, name: &str) -> Option<(&CompiledTable, &Arc<TableSql>)> {
        self.tables.get(name).map(|(t, sql)| (t, sql))
    }
}

/// SQL text of one application table.
#[derive(Debug)]
pub struct TableSql {
    pub(crate) name: String,
    pub(crate) quoted: String,
    /// Whether the projection columns are bound (materialized table).
    pub(crate) materialized: bool,
    /// `UPDATE` of the whole row by key: projection, version, scopes,
    /// payload, then partition and row id.
    pub(crate) update: String,
    /// `INSERT` of the whole row: partition, row id, projection, version,
    /// scopes, payload.
    pub(crate) insert: String,
    /// `(server_version, scopes, payload, column_versions)` of one row.
    pub(crate) select_row: String,
    /// The stored scopes text of one row.
    pub(crate) select_scopes: String,
    /// Delete of one row.
    pub(crate) delete_row: String,
    /// Keyset page of one partition: partition, after, limit.
    pub(crate) partition_scan: String,
    /// How many scope variables the table declares: the entries of one row
    /// in `sync_row_scopes` (sizes a scan's walk).
    pub(crate) scope_variables: usize,
}

impl TableSql {
    fn new(table: &CompiledTable) -> Self {
        let quoted = q(&table.name);
        let projection: Vec<String> = if table.materialize {
            table.columns.iter().map(|c| q(&c.name)).collect()
        } else {
            Vec::new()
        };
        let trailing = [
            q("_sync_server_version"),
            q("_sync_scopes"),
            q("_sync_payload"),
            q("_sync_column_versions"),
        ];
        let assignments: Vec<String> = projection
            .iter()
            .chain(&trailing)
            .map(|c| format!("{c} = ?"))
            .collect();
        let key = "`_sync_partition` = ? AND `_sync_row_id` = ?";
        let mut columns = vec![q("_sync_partition"), q("_sync_row_id")];
        columns.extend(projection.iter().cloned());
        columns.extend(trailing.iter().cloned());
        let marks = vec!["?"; columns.len()].join(", ");
        Self {
            update: format!("UPDATE {quoted} SET {} WHERE {key}", assignments.join(", ")),
            insert: format!("INSERT INTO {quoted} ({}) VALUES ({marks})", columns.join(", ")),
            select_row: format!(
                "SELECT `_sync_server_version`, `_sync_scopes`, `_sync_payload`, `_sync_column_versions` FROM {quoted} WHERE {key}"
            ),
            select_scopes: format!("SELECT `_sync_scopes` FROM {quoted} WHERE {key}"),
            delete_row: format!("DELETE FROM {quoted} WHERE {key}"),
            partition_scan: format!(
                "SELECT `_sync_row_id`, `_sync_server_version`, `_sync_scopes`, `_sync_payload` \
                 FROM {quoted} WHERE `_sync_partition` = ? AND `_sync_row_id` > ? \
                 ORDER BY `_sync_row_id` LIMIT ?"
            ),
            materialized: table.materialize,
            scope_variables: table.declared_variables.len(),
            name: table.name.clone(),
            quoted,
        }
    }
}
