//! Current rows: reads, the upsert with its scope-index maintenance, deletes,
//! tombstones and blob references (`dialects.md` §6).

use postgres::types::ToSql;
use sync_core::{codec, CompiledTable, Error, Result, StoredRow, StoredScopes};

use crate::errors::{classify, Site};
use crate::json::{parse_scopes, scopes_json};
use crate::pool::{col, Conn};
use crate::table_sql::TableSql;
use crate::values::{column_value, param_refs, Param};

const TOMBSTONE_SQL: &str =
    "SELECT commit_seq FROM sync_tombstones WHERE partition = $1 AND tbl = $2 AND row_id = $3";
const CLEAR_TOMBSTONE_SQL: &str =
    "DELETE FROM sync_tombstones WHERE partition = $1 AND tbl = $2 AND row_id = $3";
const SET_BLOB_REFS_SQL: &str =
    "WITH wanted AS (SELECT DISTINCT b.blob_id FROM unnest($4::text[]) AS b(blob_id)), \
    removed AS (DELETE FROM sync_blob_refs r WHERE r.partition = $1::text AND r.tbl = $2::text \
      AND r.row_id = $3::text AND NOT EXISTS (SELECT 1 FROM wanted w WHERE w.blob_id = r.blob_id)) \
    INSERT INTO sync_blob_refs (partition, tbl, row_id, blob_id) \
    SELECT $1::text, $2::text, $3::text, w.blob_id FROM wanted w ON CONFLICT DO NOTHING";

/// Builds a [`StoredRow`]; a NULL payload is a corrupt row (`backend`).
pub(crate) fn stored_row(
    row_id: String,
    server_version: i64,
    scopes: Option<&str>,
    payload: Option<Vec<u8>>,
) -> Result<StoredRow> {
    let payload = payload.ok_or_else(|| {
        Error::new(sync_core::ErrorCode::Backend).detail("reason", "payload_null")
    })?;
    Ok(StoredRow {
        row_id,
        server_version,
        scopes: crate::json::parse_scopes_opt(scopes)?,
        payload,
    })
}

/// Reads `row_id, version, scopes, payload` rows (columns 0–3).
pub(crate) fn rows_from(rows: &[postgres::Row]) -> Result<Vec<StoredRow>> {
    rows.iter()
        .map(|r| {
            let scopes: Option<String> = col(r, 2)?;
            stored_row(col(r, 0)?, col(r, 1)?, scopes.as_deref(), col(r, 3)?)
        })
        .collect()
}

/// The current row.
pub(crate) fn get_row(
    conn: &mut Conn,
    sql: &TableSql,
    partition: &str,
    row_id: &str,
) -> Result<Option<StoredRow>> {
    let Some(row) = conn.query_opt(&sql.get_row, &[&partition, &row_id])? else {
        return Ok(None);
    };
    let scopes: Option<String> = col(&row, 1)?;
    stored_row(
        row_id.to_owned(),
        col(&row, 0)?,
        scopes.as_deref(),
        col(&row, 2)?,
    )
    .map(Some)
}

/// `(server_version, scopes)` without the payload.
pub(crate) fn get_row_scopes(
    conn: &mut Conn,
    sql: &TableSql,
    partition: &str,
    row_id: &str,
) -> Result<Option<(i64, StoredScopes)>> {
    let Some(row) = conn.query_opt(&sql.row_scopes, &[&partition, &row_id])? else {
        return Ok(None);
    };
    let scopes: String = col(&row, 1)?;
    Ok(Some((col(&row, 0)?, parse_scopes(&scopes)?)))
}

/// Validates an upsert (row id, then payload under the table's columns) and
/// returns the projection parameters (empty for non-materialized tables).
pub(crate) fn prepare_upsert(
    table: &CompiledTable,
    sql: &TableSql,
    row: &StoredRow,
) -> Result<Vec<Param>> {
    sync_core::validate::row_id(&row.row_id)?;
    if !table.materialize {
        codec::validate_row(table, &row.payload)?;
        return Ok(Vec::new());
    }
    let values = codec::decode_row(table, &row.payload)?;
    sql.projection
        .iter()
        .zip(values)
        .map(|(column_type, value)| column_value(*column_type, value))
        .collect()
}

/// Writes the row, its projection and exactly its scope-index entries in one
/// statement. Constraint errors are `constraint_violation` with `op_index`.
pub(crate) fn upsert_row(
    conn: &mut Conn,
    table: &CompiledTable,
    sql: &TableSql,
    partition: &str,
    row: &StoredRow,
    projection: &[Param],
    op_index: Option<u32>,
) -> Result<()> {
    let vars: Vec<&str> = row.scopes.keys().map(String::as_str).collect();
    let values: Vec<&str> = row.scopes.values().map(String::as_str).collect();
    let scopes = scopes_json(&row.scopes);
    let payload: &[u8] = &row.payload;
    let mut params: Vec<&(dyn ToSql + Sync)> = vec![
        &partition,
        &row.row_id,
        &table.name,
        &vars,
        &values,
        &row.server_version,
        &scopes,
        &payload,
    ];
    params.extend(param_refs(projection));
    conn.query_raw(&sql.upsert, &params)
        .map(|_| ())
        .map_err(|e| classify(e, Site::UpsertRow(op_index)))
}

/// Deletes the row, its scope-index entries and its blob references.
pub(crate) fn delete_row(
    conn: &mut Conn,
    table: &str,
    sql: &TableSql,
    partition: &str,
    row_id: &str,
) -> Result<()> {
    conn.execute(&sql.delete, &[&partition, &row_id, &table])
        .map(|_| ())
}

/// The newest retained delete of the row.
pub(crate) fn tombstone_seq(
    conn: &mut Conn,
    partition: &str,
    table: &str,
    row_id: &str,
) -> Result<Option<i64>> {
    match conn.query_opt(TOMBSTONE_SQL, &[&partition, &table, &row_id])? {
        Some(row) => col(&row, 0).map(Some),
        None => Ok(None),
    }
}

/// Removes the row's tombstone.
pub(crate) fn clear_tombstone(
    conn: &mut Conn,
    partition: &str,
    table: &str,
    row_id: &str,
) -> Result<()> {
    conn.execute(CLEAR_TOMBSTONE_SQL, &[&partition, &table, &row_id])
        .map(|_| ())
}

/// Replaces the row's blob reference set (duplicates collapse).
pub(crate) fn set_blob_refs(
    conn: &mut Conn,
    partition: &str,
    table: &str,
    row_id: &str,
    blob_ids: &[String],
) -> Result<()> {
    conn.execute(SET_BLOB_REFS_SQL, &[&partition, &table, &row_id, &blob_ids])
        .map(|_| ())
}
