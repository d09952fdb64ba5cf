//! Current rows: reads, upserts with projections and scope-index
//! maintenance, deletes and tombstones (`storage-contract.md` §4.5, §5.4,
//! `dialects.md` §6).

use rusqlite::{Connection, OptionalExtension, Row, ToSql};
use sync_core::{Result, RowValue, StoredRow, StoredScopes};

use crate::errors::{Context, DbResultExt};
use crate::seam;
use crate::state::TableSql;
use crate::values::{parse_scopes, scopes_json, BindRow};
use crate::{blobs, scopes};

/// The stored row, or `None`.
pub(crate) fn get(
    conn: &Connection,
    table: &TableSql,
    partition: &str,
    row_id: &str,
) -> Result<Option<StoredRow>> {
    let mut stmt = seam::cached(conn, &table.select_row).db()?;
    let found = stmt
        .query_row((partition, row_id), |row| {
            Ok((
                row.get::<_, i64>(0)?,
                row.get::<_, String>(1)?,
                row.get::<_, Vec<u8>>(2)?,
                row.get::<_, Option<Vec<u8>>>(3)?,
            ))
        })
        .optional()
        .db()?;
    found
        .map(|(server_version, scopes, payload, column_versions)| {
            Ok(StoredRow {
                row_id: row_id.to_owned(),
                server_version,
                scopes: parse_scopes(&scopes)?,
                payload,
                column_versions,
            })
        })
        .transpose()
}

/// `(row_id, server_version, scopes, payload)` columns 0..=3 of a row.
pub(crate) fn stored_row_from(
    row: &Row<'_>,
    offset: usize,
) -> rusqlite::Result<(String, i64, String, Vec<u8>)> {
    Ok((
        row.get(offset)?,
        row.get(offset + 1)?,
        row.get(offset + 2)?,
        row.get(offset + 3)?,
    ))
}

/// Builds a [`StoredRow`] from raw columns.
pub(crate) fn build_row(raw: (String, i64, String, Vec<u8>)) -> Result<StoredRow> {
    let (row_id, server_version, scopes, payload) = raw;
    Ok(StoredRow {
        row_id,
        server_version,
        scopes: parse_scopes(&scopes)?,
        payload,
        column_versions: None,
    })
}

/// The stored scopes text of a row.
fn stored_scopes_text(
    conn: &Connection,
    table: &TableSql,
    partition: &str,
    row_id: &str,
) -> Result<Option<String>> {
    seam::cached(conn, &table.select_scopes)
        .db()?
        .query_row((partition, row_id), |row| row.get(0))
        .optional()
        .db()
}

/// Inserts or replaces the row and replaces its scope-index entries.
/// `values` are the decoded projection values of a materialized table.
pub(crate) fn upsert(
    conn: &Connection,
    table: &TableSql,
    partition: &str,
    row: &StoredRow,
    values: Option<&[RowValue]>,
    op_index: Option<u32>,
) -> Result<()> {
    let new_scopes = scopes_json(&row.scopes);
    let old_scopes = stored_scopes_text(conn, table, partition, &row.row_id)?;
    let unchanged = old_scopes.as_deref().is_some_and(|old| {
        old == new_scopes || parse_scopes(old).is_ok_and(|parsed| parsed == row.scopes)
    });
    if !unchanged {
        if let Some(old) = &old_scopes {
            scopes::delete_entries(conn, partition, table.name(), &row.row_id, old)?;
        }
    }

    let projection: Vec<BindRow<'_>> = values.unwrap_or_default().iter().map(BindRow).collect();
    let mut params: Vec<&dyn ToSql> = Vec::with_capacity(projection.len() + 6);
    params.push(&partition);
    params.push(&row.row_id);
    params.extend(projection.iter().map(|v| v as &dyn ToSql));
    params.push(&row.server_version);
    params.push(&new_scopes);
    params.push(&row.payload);
    params.push(&row.column_versions);
    seam::cached(conn, &table.upsert)
        .db()?
        .execute(params.as_slice())
        .db_in(Context::UpsertRow(op_index))?;

    if !unchanged {
        scopes::insert_entries(conn, partition, table.name(), &row.row_id, &new_scopes)?;
    }
    Ok(())
}

/// Removes the row, its scope-index entries and its blob references.
pub(crate) fn delete(
    conn: &Connection,
    table: &TableSql,
    partition: &str,
    row_id: &str,
) -> Result<()> {
    let Some(old_scopes) = stored_scopes_text(conn, table, partition, row_id)? else {
        return blobs::clear(conn, partition, table.name(), row_id);
    };
    scopes::delete_entries(conn, partition, table.name(), row_id, &old_scopes)?;
    seam::cached(conn, &table.delete_row)
        .db()?
        .execute((partition, row_id))
        .db()?;
    blobs::clear(conn, partition, table.name(), row_id)
}

/// `commit_seq` of the newest retained delete of the row.
pub(crate) fn tombstone_seq(
    conn: &Connection,
    partition: &str,
    table: &str,
    row_id: &str,
) -> Result<Option<i64>> {
    seam::cached(
        conn,
        "SELECT commit_seq FROM sync_tombstones WHERE partition = ?1 AND tbl = ?2 AND row_id = ?3",
    )
    .db()?
    .query_row((partition, table, row_id), |row| row.get(0))
    .optional()
    .db()
}

/// The stored scopes of the row's last delete change in `commit_seq`
/// (through `sync_changes_by_table`).
pub(crate) fn delete_scopes(
    conn: &Connection,
    partition: &str,
    table: &str,
    row_id: &str,
    commit_seq: i64,
) -> Result<Option<StoredScopes>> {
    let text: Option<String> = seam::cached(
        conn,
        "SELECT scopes FROM sync_changes \
         WHERE partition = ?1 AND commit_seq = ?2 AND tbl = ?3 AND row_id = ?4 AND op = 2 \
         ORDER BY idx DESC LIMIT 1",
    )
    .db()?
    .query_row((partition, commit_seq, table, row_id), |row| row.get(0))
    .optional()
    .db()?;
    text.as_deref().map(parse_scopes).transpose()
}

/// Removes the row's tombstone.
pub(crate) fn clear_tombstone(
    conn: &Connection,
    partition: &str,
    table: &str,
    row_id: &str,
) -> Result<()> {
    seam::cached(
        conn,
        "DELETE FROM sync_tombstones WHERE partition = ?1 AND tbl = ?2 AND row_id = ?3",
    )
    .db()?
    .execute((partition, table, row_id))
    .db()?;
    Ok(())
}
