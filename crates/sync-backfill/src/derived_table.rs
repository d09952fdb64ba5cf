//! A ready projector: a derived **table** with one projection row per source
//! row (e.g. a search index `task_search` derived from `tasks`).
//!
//! The projection row has the source row's id and stored scopes, so clients
//! pull it with the same filters. A deleted source row, or one the derive
//! function maps to `None`, removes its projection row.
//!
//! ```no_run
//! # use std::sync::Arc;
//! # use sync_backfill::{DerivedTable, CheckpointRunner};
//! # use sync_core::{RowValue, ServerStorage};
//! # fn demo(storage: &dyn ServerStorage) -> sync_core::Result<()> {
//! let schema = storage.ensured_schema().expect("ensured");
//! // task_search(id, project_id, terms): one row per task.
//! let projector = DerivedTable::new(schema, "tasks", "task_search", Arc::new(|source, values| {
//!     let get = |name: &str| source.column_index.get(name).and_then(|&i| values.get(i)).cloned();
//!     let terms = match get("title") {
//!         Some(RowValue::String(t)) => RowValue::String(t.to_lowercase()),
//!         _ => RowValue::Null,
//!     };
//!     Ok(Some(vec![get("id").unwrap_or(RowValue::Null), get("project_id").unwrap_or(RowValue::Null), terms]))
//! }))?;
//! let outcome = CheckpointRunner::new(storage, "acme", "task_search_v2", 2, &projector).run()?;
//! # Ok(()) }
//! ```

use std::fmt;
use std::sync::Arc;

use sync_core::{
    codec, CompiledSchema, CompiledTable, NewChange, Result, RowValue, StorageTransaction,
};

use crate::projector::{project_delete, project_upsert, Projector, SourceRowRef};

/// Maps a source row's decoded values to the projection row's values
/// (`None` = no projection row).
pub type DeriveRow =
    Arc<dyn Fn(&CompiledTable, &[RowValue]) -> Result<Option<Vec<RowValue>>> + Send + Sync>;

/// Maintains a projection table derived from one source table.
pub struct DerivedTable {
    source: CompiledTable,
    target: CompiledTable,
    sources: Vec<String>,
    derive: DeriveRow,
}

impl fmt::Debug for DerivedTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DerivedTable")
            .field("source", &self.source.name)
            .field("target", &self.target.name)
            .finish_non_exhaustive()
    }
}

impl DerivedTable {
    /// A projector writing `target` from `source` of the ensured `schema`.
    pub fn new(
        schema: Arc<CompiledSchema>,
        source: &str,
        target: &str,
        derive: DeriveRow,
    ) -> Result<Self> {
        let source = schema.require_table(source)?.clone();
        let target = schema.require_table(target)?.clone();
        Ok(Self {
            sources: vec![source.name.clone()],
            source,
            target,
            derive,
        })
    }
}

impl Projector for DerivedTable {
    fn sources(&self) -> &[String] {
        &self.sources
    }

    fn project(
        &self,
        tx: &mut dyn StorageTransaction,
        rows: &[SourceRowRef],
    ) -> Result<Vec<NewChange>> {
        let mut changes = Vec::new();
        for source in rows.iter().filter(|r| r.table == self.source.name) {
            let derived = match tx.get_row(&self.source.name, &source.row_id)? {
                Some(row) => {
                    let values = codec::decode_row(&self.source, &row.payload)?;
                    (self.derive)(&self.source, &values)?.map(|v| (v, row.scopes))
                }
                None => None,
            };
            match derived {
                Some((values, scopes)) => {
                    let payload = codec::encode_row(&self.target, &values)?;
                    let current = tx.get_row(&self.target.name, &source.row_id)?;
                    if current.is_some_and(|c| c.payload == payload && c.scopes == scopes) {
                        continue;
                    }
                    changes.push(project_upsert(
                        tx,
                        &self.target.name,
                        &source.row_id,
                        payload,
                        scopes,
                    )?);
                }
                None => {
                    if let Some(change) = project_delete(tx, &self.target.name, &source.row_id)? {
                        changes.push(change);
                    }
                }
            }
        }
        Ok(changes)
    }
}
