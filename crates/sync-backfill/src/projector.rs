//! The projection a backfill maintains, and helpers to write it.

use sync_core::{NewChange, Result, StorageTransaction, StoredRow, StoredScopes};

/// One source row to re-derive.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SourceRowRef {
    /// Source table.
    pub table: String,
    /// Row id.
    pub row_id: String,
}

/// A derived projection (a column or a table) computed from source tables.
pub trait Projector: Send + Sync {
    /// Source tables the projection is derived from (the coverage set).
    fn sources(&self) -> &[String];

    /// Re-derives the projection for `rows` inside `tx` (the partition lock is
    /// held): reads the current source state through `tx` (absent = deleted),
    /// writes or deletes projection rows through `tx`, and returns the changes
    /// to log (possibly none).
    fn project(
        &self,
        tx: &mut dyn StorageTransaction,
        rows: &[SourceRowRef],
    ) -> Result<Vec<NewChange>>;

    /// Re-derives the projection for rows of `table` that the full pass has
    /// just read through `tx` (`scan_partition_rows`, under the partition
    /// lock, so they are the current state). The default passes their ids
    /// to [`Projector::project`], which reads them again; a projector that
    /// derives from the row alone can use `rows` as read and save that read.
    fn project_scanned(
        &self,
        tx: &mut dyn StorageTransaction,
        table: &str,
        rows: &[StoredRow],
    ) -> Result<Vec<NewChange>> {
        let refs: Vec<SourceRowRef> = rows
            .iter()
            .map(|row| SourceRowRef {
                table: table.to_owned(),
                row_id: row.row_id.clone(),
            })
            .collect();
        self.project(tx, &refs)
    }
}

/// Writes a projection row with `server_version = old + 1` (or 1) and returns
/// the upsert change to log.
pub fn project_upsert(
    tx: &mut dyn StorageTransaction,
    table: &str,
    row_id: &str,
    payload: Vec<u8>,
    scopes: StoredScopes,
) -> Result<NewChange> {
    let current = tx.get_row(table, row_id)?.map(|row| row.server_version);
    write_projection(tx, table, row_id, current, payload, scopes)
}

/// [`project_upsert`] for a caller that already read the row in this
/// transaction (`current` = its stored version, `None` when absent): the
/// same write without reading the row again.
pub(crate) fn write_projection(
    tx: &mut dyn StorageTransaction,
    table: &str,
    row_id: &str,
    current: Option<i64>,
    payload: Vec<u8>,
    scopes: StoredScopes,
) -> Result<NewChange> {
    let (row, change) = projection_row(table, row_id, current, payload, scopes);
    tx.upsert_row(table, &row, None)?;
    Ok(change)
}

/// The row [`write_projection`] writes (`server_version = current + 1`, or 1)
/// and the upsert change to log, for a caller that writes a batch of them
/// with `upsert_rows`.
pub(crate) fn projection_row(
    table: &str,
    row_id: &str,
    current: Option<i64>,
    payload: Vec<u8>,
    scopes: StoredScopes,
) -> (StoredRow, NewChange) {
    let version = current.map_or(1, |v| v.saturating_add(1));
    let change = NewChange::upsert(table, row_id, version, scopes.clone(), payload.clone());
    let row = StoredRow {
        row_id: row_id.to_owned(),
        server_version: version,
        scopes,
        payload,
        column_versions: None,
    };
    (row, change)
}

/// The distinct ids of `rows` from `table`, in first-occurrence order (a
/// repeated source row is re-derived once: the second pass of the per-row
/// projection found nothing left to change).
pub(crate) fn distinct_ids(rows: &[SourceRowRef], table: &str) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    rows.iter()
        .filter(|r| r.table == table && seen.insert(r.row_id.as_str()))
        .map(|r| r.row_id.clone())
        .collect()
}

/// Deletes a projection row; returns the delete change carrying its stored
/// scopes, or `None` when the row was absent.
pub fn project_delete(
    tx: &mut dyn StorageTransaction,
    table: &str,
    row_id: &str,
) -> Result<Option<NewChange>> {
    let Some(row) = tx.get_row(table, row_id)? else {
        return Ok(None);
    };
    tx.delete_row(table, row_id)?;
    Ok(Some(NewChange::delete(table, row_id, row.scopes)))
}

#[cfg(test)]
mod tests {
    use super::{distinct_ids, SourceRowRef};

    fn r(table: &str, row_id: &str) -> SourceRowRef {
        SourceRowRef {
            table: table.to_owned(),
            row_id: row_id.to_owned(),
        }
    }

    /// A catch-up may name a source row twice and rows of several tables:
    /// each row of the asked table is re-derived once, in first-occurrence
    /// order, and no other table's id leaks in.
    #[test]
    fn distinct_ids_keep_the_table_and_the_first_occurrence() {
        let rows = [
            r("items", "b"),
            r("notes", "x"),
            r("items", "a"),
            r("items", "b"),
            r("notes", "a"),
            r("items", "c"),
            r("items", "a"),
        ];
        assert_eq!(distinct_ids(&rows, "items"), ["b", "a", "c"]);
        assert_eq!(distinct_ids(&rows, "notes"), ["x", "a"]);
        assert!(distinct_ids(&rows, "other").is_empty());
    }
}
