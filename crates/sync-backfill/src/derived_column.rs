//! A ready projector: a derived **column** of the source table itself.
//!
//! The column (nullable, appended by the schema bump) is a function of the
//! row's other columns, e.g. `search_text = lower(title)`. The projector
//! re-derives it for each source row and writes the row back (version + 1)
//! only when the stored value differs, so re-running a batch is a no-op.

use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;

use sync_core::{
    codec, CompiledSchema, CompiledTable, Error, ErrorCode, NewChange, Result, RowValue,
    StorageTransaction, StoredRow, StoredScopes,
};

use crate::projector::{distinct_ids, projection_row, Projector, SourceRowRef};

/// Computes the derived value from the table and the row's decoded values.
pub type DeriveValue = Arc<dyn Fn(&CompiledTable, &[RowValue]) -> Result<RowValue> + Send + Sync>;

/// Maintains one derived column of a table.
///
/// ```no_run
/// # use std::sync::Arc;
/// # use sync_backfill::{DerivedColumn, CheckpointRunner};
/// # use sync_core::{RowValue, ServerStorage};
/// # fn demo(storage: &dyn ServerStorage) -> sync_core::Result<()> {
/// let schema = storage.ensured_schema().expect("ensured");
/// let projector = DerivedColumn::new(schema, "tasks", "search_text", Arc::new(|table, values| {
///     let title = table.column_index.get("title").and_then(|&i| values.get(i));
///     Ok(match title {
///         Some(RowValue::String(t)) => RowValue::String(t.to_lowercase()),
///         _ => RowValue::Null,
///     })
/// }))?;
/// let outcome = CheckpointRunner::new(storage, "acme", "search_v2", 2, &projector).run()?;
/// # Ok(()) }
/// ```
pub struct DerivedColumn {
    table: CompiledTable,
    column_index: usize,
    sources: Vec<String>,
    derive: DeriveValue,
}

impl fmt::Debug for DerivedColumn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DerivedColumn")
            .field("table", &self.table.name)
            .field("column_index", &self.column_index)
            .finish_non_exhaustive()
    }
}

impl DerivedColumn {
    /// A projector for `table.column` of the ensured `schema`.
    /// Unknown table → `sync.storage.unknown_table`; unknown column →
    /// `sync.storage.invalid_argument` (`argument = column`).
    pub fn new(
        schema: Arc<CompiledSchema>,
        table: &str,
        column: &str,
        derive: DeriveValue,
    ) -> Result<Self> {
        let table = schema.require_table(table)?.clone();
        let column_index = *table
            .column_index
            .get(column)
            .ok_or_else(|| Error::invalid_argument("column", "unknown_column"))?;
        if !table.columns[column_index].nullable {
            return Err(Error::invalid_argument(
                "column",
                "derived_column_not_nullable",
            ));
        }
        Ok(Self {
            sources: vec![table.name.clone()],
            table,
            column_index,
            derive,
        })
    }
}

impl Projector for DerivedColumn {
    fn sources(&self) -> &[String] {
        &self.sources
    }

    fn project(
        &self,
        tx: &mut dyn StorageTransaction,
        rows: &[SourceRowRef],
    ) -> Result<Vec<NewChange>> {
        // One read and one write for the whole batch (set-based on dialects
        // that override `get_rows` / `upsert_rows`).
        let ids = distinct_ids(rows, &self.table.name);
        let current = tx.get_rows(&self.table.name, &ids)?;
        // A deleted row took its derived value with it.
        self.rederive(
            tx,
            ids.iter().zip(current).filter_map(|(id, row)| {
                row.map(|row| (id.as_str(), row.server_version, row.scopes, row.payload))
            }),
        )
    }

    fn project_scanned(
        &self,
        tx: &mut dyn StorageTransaction,
        table: &str,
        rows: &[StoredRow],
    ) -> Result<Vec<NewChange>> {
        if table != self.table.name {
            return Ok(Vec::new());
        }
        // The full pass read these rows in this transaction under the
        // partition lock: they are current, no second read.
        let mut seen = HashSet::new();
        self.rederive(
            tx,
            rows.iter()
                .filter(|row| seen.insert(row.row_id.as_str()))
                .map(|row| {
                    (
                        row.row_id.as_str(),
                        row.server_version,
                        row.scopes.clone(),
                        row.payload.clone(),
                    )
                }),
        )
    }
}

impl DerivedColumn {
    /// Re-derives the column of each `(row id, version, scopes, payload)` —
    /// the row as stored now — and writes back, in one `upsert_rows`, the
    /// rows whose stored value differs; returns their changes.
    fn rederive<'r>(
        &self,
        tx: &mut dyn StorageTransaction,
        rows: impl Iterator<Item = (&'r str, i64, StoredScopes, Vec<u8>)>,
    ) -> Result<Vec<NewChange>> {
        let mut changes = Vec::new();
        let mut writes = Vec::new();
        for (row_id, version, scopes, payload) in rows {
            let mut values = codec::decode_row(&self.table, &payload)?;
            let derived = (self.derive)(&self.table, &values)?;
            let slot = values
                .get_mut(self.column_index)
                .ok_or_else(|| Error::new(ErrorCode::CodecDecodeFailed))?;
            if *slot == derived {
                continue;
            }
            *slot = derived;
            let payload = codec::encode_row(&self.table, &values)?;
            let (write, change) =
                projection_row(&self.table.name, row_id, Some(version), payload, scopes);
            writes.push(write);
            changes.push(change);
        }
        tx.upsert_rows(&self.table.name, &writes)?;
        Ok(changes)
    }
}
