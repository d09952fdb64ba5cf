//! The schema ensured on one storage instance: the compiled schema, its
//! fingerprint and the per-table SQL text derived from it once, so the hot
//! paths only look statements up in the connection's statement cache.

use std::collections::HashMap;
use std::fmt::Write;
use std::sync::Arc;

use sync_core::{CompiledSchema, CompiledTable};

use crate::sql::{placeholders, quote};

/// What `ensure_schema` recorded on the instance.
#[derive(Debug)]
pub struct Ensured {
    /// The compiled schema (the running version is `schema.version`).
    pub(crate) schema: Arc<CompiledSchema>,
    /// [`fingerprint`] of `schema`.
    pub(crate) fingerprint: String,
    tables: HashMap<String, Arc<TableSql>>,
}

impl Ensured {
    /// Derives the per-table SQL of `schema`.
    pub(crate) fn new(schema: Arc<CompiledSchema>) -> Self {
        let tables = schema
            .tables
            .iter()
            .map(|t| (t.name.clone(), Arc::new(TableSql::new(t))))
            .collect();
        Self {
            fingerprint: fingerprint(&schema),
            schema,
            tables,
        }
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
        self.tables.get(name).map(|t| (&t.table, t))
    }
}

/// Identity of a schema for the memoized fast path: the layouts (names,
/// types, nullability in order) plus materialization flags and index
/// definitions of every table (`storage-contract.md` §4.1).
pub(crate) fn fingerprint(schema: &CompiledSchema) -> String {
    let mut out = format!("v{}", schema.version);
    for table in &schema.tables {
        let _ = write!(out, "|{:?}:m={}", table.name, table.materialize);
        for c in &table.columns {
            let _ = write!(
                out,
                ",{:?}/{}/{}",
                c.name,
                c.column_type.as_str(),
                c.nullable
            );
        }
        for index in &table.indexes {
            let _ = write!(
                out,
                ",ix{:?}{:?}u={}",
                index.name, index.columns, index.unique
            );
        }
    }
    out
}

/// SQL text of one application table.
#[derive(Debug)]
pub struct TableSql {
    /// The compiled table.
    pub(crate) table: CompiledTable,
    /// The quoted table name.
    pub(crate) quoted: String,
    /// Insert-or-replace of the whole row (projection when materialized).
    pub(crate) upsert: String,
    /// `(server_version, scopes, payload, column_versions)` of one row.
    pub(crate) select_row: String,
    /// The stored scopes text of one row.
    pub(crate) select_scopes: String,
    /// Delete of one row.
    pub(crate) delete_row: String,
    /// Keyset scan of one partition.
    pub(crate) partition_scan: String,
}

impl TableSql {
    fn new(table: &CompiledTable) -> Self {
        let quoted = quote(&table.name);
        let projection: Vec<String> = if table.materialize {
            table.columns.iter().map(|c| quote(&c.name)).collect()
        } else {
            Vec::new()
        };
        let mut columns = vec![quote("_sync_partition"), quote("_sync_row_id")];
        columns.extend(projection.iter().cloned());
        columns.extend([
            quote("_sync_server_version"),
            quote("_sync_scopes"),
            quote("_sync_payload"),
            quote("_sync_column_versions"),
        ]);
        let updates: Vec<String> = columns[2..]
            .iter()
            .map(|c| format!("{c} = excluded.{c}"))
            .collect();
        let upsert = format!(
            "INSERT INTO {quoted} ({}) VALUES ({}) ON CONFLICT (\"_sync_partition\", \"_sync_row_id\") DO UPDATE SET {}",
            columns.join(", "),
            placeholders(1, columns.len()),
            updates.join(", ")
        );
        let key = "\"_sync_partition\" = ?1 AND \"_sync_row_id\" = ?2";
        Self {
            select_row: format!(
                "SELECT \"_sync_server_version\", \"_sync_scopes\", \"_sync_payload\", \"_sync_column_versions\" FROM {quoted} WHERE {key}"
            ),
            select_scopes: format!("SELECT \"_sync_scopes\" FROM {quoted} WHERE {key}"),
            delete_row: format!("DELETE FROM {quoted} WHERE {key}"),
            partition_scan: format!(
                "SELECT \"_sync_row_id\", \"_sync_server_version\", \"_sync_scopes\", \"_sync_payload\" FROM {quoted} \
                 WHERE \"_sync_partition\" = ?1 AND \"_sync_row_id\" > ?2 ORDER BY \"_sync_row_id\" LIMIT CAST(?3 AS INTEGER)"
            ),
            upsert,
            quoted,
            table: table.clone(),
        }
    }

    /// The table name.
    pub(crate) fn name(&self) -> &str {
        &self.table.name
    }
}
