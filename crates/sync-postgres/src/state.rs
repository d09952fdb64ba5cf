//! What `ensure_schema` records on an instance: the running version, the
//! compiled schema, its fingerprint and the prepared SQL of every table.

use std::collections::HashMap;
use std::sync::Arc;

use sync_core::{CompiledSchema, CompiledTable, Error, Result};

use crate::table_sql::TableSql;

/// The schema last ensured on an instance.
#[derive(Debug)]
pub struct Ensured {
    /// The running (writer) version.
    pub version: i32,
    /// The compiled schema.
    pub schema: Arc<CompiledSchema>,
    /// Memo key of the fast path (`schema-and-migrations.md` §9 step 1).
    pub fingerprint: String,
    tables: HashMap<String, TableSql>,
}

impl Ensured {
    /// Records `schema` with its fingerprint.
    pub(crate) fn new(schema: Arc<CompiledSchema>, fingerprint: String) -> Self {
        let tables = schema
            .tables
            .iter()
            .map(|t| (t.name.clone(), TableSql::new(t)))
            .collect();
        Self {
            version: schema.version,
            schema,
            fingerprint,
            tables,
        }
    }

    /// The compiled table and its statements, or `sync.storage.unknown_table`.
    pub(crate) fn table(&self, name: &str) -> Result<(&CompiledTable, &TableSql)> {
        match (self.schema.table(name), self.tables.get(name)) {
            (Some(table), Some(sql)) => Ok((table, sql)),
            _ => Err(Error::unknown_table(name)),
        }
    }
}

impl sync_core::front::EnsuredSchema for Ensured {
    type Handle = TableSql;

    fn schema(&self) -> &Arc<CompiledSchema> {
        &self.schema
    }

    fn table(&self, name: &str) -> Option<(&CompiledTable, &TableSql)> {
        self.schema.table(name).zip(self.tables.get(name))
    }
}

/// Resolves a table against an optional ensured schema (none → unknown).
pub(crate) fn resolve<'e>(
    ensured: Option<&'e Ensured>,
    name: &str,
) -> Result<(&'e CompiledTable, &'e TableSql)> {
    ensured
        .ok_or_else(|| Error::unknown_table(name))?
        .table(name)
}
