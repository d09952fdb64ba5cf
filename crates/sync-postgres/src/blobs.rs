//! The blob reference index (`storage-contract.md` §4.11).

use std::collections::BTreeMap;

use sync_core::front::{BlobRefsBackend, Partition};
use sync_core::{BlobReferencingRow, Result};

use crate::json::parse_scopes;
use crate::pool::{col, Conn};
use crate::state::Ensured;
use crate::PostgresStorage;

/// Candidates of one blob: `$1` partition, `$2` blob id.
pub(crate) const BLOB_CANDIDATES_SQL: &str = "SELECT tbl, row_id FROM sync_blob_refs \
    WHERE partition = $1 AND blob_id = $2 ORDER BY tbl COLLATE \"C\", row_id COLLATE \"C\"";
const BLOB_IDS_SQL: &str = "SELECT DISTINCT blob_id COLLATE \"C\" FROM sync_blob_refs \
    WHERE partition = $1 ORDER BY 1";

/// Rows referencing the blob with their current scopes, ordered
/// `(table, row_id)`; retired tables and vanished rows are skipped. Runs in
/// the caller's snapshot.
pub(crate) fn rows_referencing(
    conn: &mut Conn,
    ensured: Option<&Ensured>,
    partition: &str,
    blob_id: &str,
) -> Result<Vec<BlobReferencingRow>> {
    let mut by_table: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for row in conn.query(BLOB_CANDIDATES_SQL, &[&partition, &blob_id])? {
        let table: String = col(&row, 0)?;
        let row_id: String = col(&row, 1)?;
        by_table.entry(table).or_default().push(row_id);
    }
    let mut out = Vec::new();
    for (table, row_ids) in by_table {
        let Some(sql) = ensured
            .and_then(|e| e.table(&table).ok())
            .map(|(_, sql)| sql)
        else {
            continue;
        };
        let mut scopes = BTreeMap::new();
        for row in conn.query(&sql.scopes_of_rows, &[&partition, &row_ids])? {
            let row_id: String = col(&row, 0)?;
            let text: String = col(&row, 1)?;
            scopes.insert(row_id, parse_scopes(&text)?);
        }
        for row_id in row_ids {
            if let Some(scopes) = scopes.remove(&row_id) {
                out.push(BlobReferencingRow {
                    table: table.clone(),
                    row_id,
                    scopes,
                });
            }
        }
    }
    out.sort_by(|a, b| {
        (a.table.as_bytes(), a.row_id.as_bytes()).cmp(&(b.table.as_bytes(), b.row_id.as_bytes()))
    });
    Ok(out)
}

/// Distinct referenced blob ids, byte-ordered.
pub(crate) fn blob_ids(conn: &mut Conn, partition: &str) -> Result<Vec<String>> {
    conn.query(BLOB_IDS_SQL, &[&partition])?
        .iter()
        .map(|r| col(r, 0))
        .collect()
}

impl BlobRefsBackend for PostgresStorage {
    fn list_rows_referencing_blob(
        &self,
        p: Partition<'_>,
        blob_id: &str,
    ) -> Result<Vec<BlobReferencingRow>> {
        let ensured = PostgresStorage::ensured(self);
        self.with_snapshot(|c| rows_referencing(c, ensured.as_deref(), &p, blob_id))
    }

    fn list_referenced_blob_ids(&self, p: Partition<'_>) -> Result<Vec<String>> {
        self.with_conn(|c| blob_ids(c, &p))
    }
}
