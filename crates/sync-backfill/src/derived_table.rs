//! A ready projector: a derived **table** with one projection row per source
//! row (e.g. a search index `task_search` derived from `tasks`).
//!
//! The projection row has the source row's id and stored scopes, so clients
//! pull it with the same filters. A deleted source row, or one the derive
//! function maps to `None`, removes its projection row.

use std::fmt;
use std::sync::Arc;

use sync_core::{
    codec, CompiledSchema, CompiledTable, NewChange, Result, RowValue, StorageTransaction,
};

use crate::projector::{distinct_ids, project_delete, projection_row, Projector, SourceRowRef};

/// Maps a source row's decoded values to the projection row's values
/// (`None` = no projection row).
pub type DeriveRow =
    Arc<dyn Fn(&CompiledTable, &[RowValue]) -> Result<Option<Vec<RowValue>>> + Send + Sync>;

/// Maintains a projection table derived from one source table.
///
/// ```no_run
/// # use std::sync::Arc;
/// # use sync_backfill::{DerivedTable, CheckpointRunner};
/// # use sync_core::{RowValue, ServerStorage};
/// # fn demo(storage: &dyn ServerStorage) -> sync_core::Result<()> {
/// let schema = storage.ensured_schema().expect("ensured");
/// // task_search(id, project_id, terms): one row per task.
/// let projector = DerivedTable::new(schema, "tasks", "task_search", Arc::new(|source, values| {
///     let get = |name: &str| source.column_index.get(name).and_then(|&i| values.get(i)).cloned();
///     let terms = match get("title") {
///         Some(RowValue::String(t)) => RowValue::String(t.to_lowercase()),
///         _ => RowValue::Null,
///     };
///     Ok(Some(vec![get("id").unwrap_or(RowValue::Null), get("project_id").unwrap_or(RowValue::Null), terms]))
/// }))?;
/// let outcome = CheckpointRunner::new(storage, "acme", "task_search_v2", 2, &projector).run()?;
/// # Ok(()) }
/// ```
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
        // One read of the sources, one of the current projection rows and
        // one write of the changed ones; deletions stay per row.
        let ids = distinct_ids(rows, &self.source.name);
        let sources = tx.get_rows(&self.source.name, &ids)?;
        let mut derived = Vec::with_capacity(ids.len());
        for source in sources {
            derived.push(match source {
                Some(row) => {
                    let values = codec::decode_row(&self.source, &row.payload)?;
                    match (self.derive)(&self.source, &values)? {
                        Some(values) => {
                            Some((codec::encode_row(&self.target, &values)?, row.scopes))
                        }
                        None => None,
                    }
                }
                None => None,
            });
        }
        let upsert_ids: Vec<String> = ids
            .iter()
            .zip(&derived)
            .filter(|(_, d)| d.is_some())
            .map(|(id, _)| id.clone())
            .collect();
        let mut targets = tx.get_rows(&self.target.name, &upsert_ids)?.into_iter();
        // `changes` keeps the source order: an upsert's change takes its
        // place although the batch is written after the deletions.
        let mut changes = Vec::new();
        let mut writes = Vec::new();
        for (row_id, derived) in ids.iter().zip(derived) {
            match derived {
                Some((payload, scopes)) => {
                    let current = targets.next().flatten();
                    if current
                        .as_ref()
                        .is_some_and(|c| c.payload == payload && c.scopes == scopes)
                    {
                        continue;
                    }
                    let (write, change) = projection_row(
                        &self.target.name,
                        row_id,
                        current.map(|c| c.server_version),
                        payload,
                        scopes,
                    );
                    writes.push(write);
                    changes.push(change);
                }
                None => {
                    if let Some(change) = project_delete(tx, &self.target.name, row_id)? {
                        changes.push(change);
                    }
                }
            }
        }
        tx.upsert_rows(&self.target.name, &writes)?;
        Ok(changes)
    }
}
