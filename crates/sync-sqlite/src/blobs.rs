//! The blob reference index (`storage-contract.md` §4.11, `tables.md` §3.12).

use std::collections::BTreeSet;
use sync_core::front::EnsuredSchema;

use rusqlite::{Connection, OptionalExtension};
use sync_core::front::{BlobRefsBackend, Partition};
use sync_core::{BlobReferencingRow, Result};

use crate::errors::DbResultExt;
use crate::seam;
use crate::state::Ensured;
use crate::values::parse_scopes;
use crate::SqliteStorage;

/// Candidate rows of one blob (served by `sync_blob_refs_by_blob`).
pub const BLOB_CANDIDATES: &str = "SELECT DISTINCT tbl, row_id FROM sync_blob_refs \
WHERE partition = ?1 AND blob_id = ?2 ORDER BY tbl, row_id";

/// Adds one reference (executed once per blob id).
const INSERT_REF: &str =
    "INSERT OR IGNORE INTO sync_blob_refs (partition, tbl, row_id, blob_id) VALUES (?1, ?2, ?3, ?4)";

/// Removes every reference of one row.
pub(crate) fn clear(conn: &Connection, partition: &str, table: &str, row_id: &str) -> Result<()> {
    seam::cached(
        conn,
        "DELETE FROM sync_blob_refs WHERE partition = ?1 AND tbl = ?2 AND row_id = ?3",
    )
    .db()?
    .execute((partition, table, row_id))
    .db()?;
    Ok(())
}

/// Replaces the row's reference set (duplicates collapse).
pub(crate) fn set(
    conn: &Connection,
    partition: &str,
    table: &str,
    row_id: &str,
    blob_ids: &[String],
) -> Result<()> {
    clear(conn, partition, table, row_id)?;
    if blob_ids.is_empty() {
        return Ok(());
    }
    let mut insert = conn.prepare_cached(INSERT_REF).db()?;
    for blob_id in blob_ids.iter().collect::<BTreeSet<_>>() {
        seam::check(conn, INSERT_REF).db()?;
        insert.execute((partition, table, row_id, blob_id)).db()?;
    }
    Ok(())
}

/// Rows whose current set contains the blob, with their current scopes;
/// rows of tables outside the ensured schema and vanished rows are skipped.
pub(crate) fn rows_referencing(
    conn: &Connection,
    ensured: Option<&Ensured>,
    partition: &str,
    blob_id: &str,
) -> Result<Vec<BlobReferencingRow>> {
    let candidates: Vec<(String, String)> = {
        let mut stmt = seam::cached(conn, BLOB_CANDIDATES).db()?;
        let rows = stmt
            .query_map((partition, blob_id), |row| Ok((row.get(0)?, row.get(1)?)))
            .db()?;
        rows.collect::<rusqlite::Result<_>>().db()?
    };
    let Some(ensured) = ensured else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for (table, row_id) in candidates {
        let Some((_, sql)) = EnsuredSchema::table(ensured, &table) else {
            continue;
        };
        let scopes: Option<String> = seam::cached(conn, &sql.select_scopes)
            .db()?
            .query_row((partition, row_id.as_str()), |row| row.get(0))
            .optional()
            .db()?;
        if let Some(scopes) = scopes {
            out.push(BlobReferencingRow {
                table,
                row_id,
                scopes: parse_scopes(&scopes)?,
            });
        }
    }
    Ok(out)
}

/// Distinct referenced blob ids, byte-ordered.
pub(crate) fn referenced_ids(conn: &Connection, partition: &str) -> Result<Vec<String>> {
    let mut stmt = seam::cached(
        conn,
        "SELECT DISTINCT blob_id FROM sync_blob_refs WHERE partition = ?1 ORDER BY blob_id",
    )
    .db()?;
    let rows = stmt.query_map([partition], |row| row.get(0)).db()?;
    rows.collect::<rusqlite::Result<_>>().db()
}

impl BlobRefsBackend for SqliteStorage {
    fn list_rows_referencing_blob(
        &self,
        p: Partition<'_>,
        blob_id: &str,
    ) -> Result<Vec<BlobReferencingRow>> {
        let ensured = self.ensured_state();
        self.pools()
            .read_snapshot(|conn| rows_referencing(conn, ensured.as_deref(), &p, blob_id))
    }

    fn list_referenced_blob_ids(&self, p: Partition<'_>) -> Result<Vec<String>> {
        self.pools().read(|conn| referenced_ids(conn, &p))
    }
}
