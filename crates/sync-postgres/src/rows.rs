//! Current rows: reads, the upsert with its scope-index maintenance, deletes,
//! tombstones and blob references (`dialects.md` §6).

use std::collections::HashMap;

use postgres::types::ToSql;
use sync_core::front::CheckedRow;
use sync_core::{CompiledTable, Error, Result, StoredRow, StoredScopes};

use crate::commit_log::{literal_array, MAX_LITERAL_SQL};
use crate::errors::{classify, Site};
use crate::json::{parse_scopes, scopes_json};
use crate::pool::{col, Conn};
use crate::sql::{bytea_literal, quote_literal};
use crate::table_sql::TableSql;
use crate::values::{param_refs, typed_value, ColumnArray, Param, Typed};

const TOMBSTONE_SQL: &str =
    "SELECT commit_seq FROM sync_tombstones WHERE partition = $1 AND tbl = $2 AND row_id = $3";
const DELETE_SCOPES_SQL: &str = "SELECT scopes::text FROM sync_changes \
     WHERE partition = $1 AND commit_seq = $2 AND tbl = $3 AND row_id = $4 AND op = 2 \
     ORDER BY idx DESC LIMIT 1";
const CLEAR_TOMBSTONE_SQL: &str =
    "DELETE FROM sync_tombstones WHERE partition = $1 AND tbl = $2 AND row_id = $3";
const SET_BLOB_REFS_SQL: &str =
    "WITH wanted AS (SELECT DISTINCT b.blob_id FROM unnest($4::text[]) AS b(blob_id)), \
    removed AS (DELETE FROM sync_blob_refs r WHERE r.partition = $1::text AND r.tbl = $2::text \
      AND r.row_id = $3::text AND NOT EXISTS (SELECT 1 FROM wanted w WHERE w.blob_id = r.blob_id)) \
    INSERT INTO sync_blob_refs (partition, tbl, row_id, blob_id) \
    SELECT $1::text, $2::text, $3::text, w.blob_id FROM wanted w ON CONFLICT DO NOTHING";

/// A row's payload; SQL `NULL` is a corrupt row (`backend`).
pub(crate) fn payload_or_corrupt(payload: Option<Vec<u8>>) -> Result<Vec<u8>> {
    payload
        .ok_or_else(|| Error::new(sync_core::ErrorCode::Backend).detail("reason", "payload_null"))
}

/// Builds a [`StoredRow`]; a NULL payload is a corrupt row (`backend`).
pub(crate) fn stored_row(
    row_id: String,
    server_version: i64,
    scopes: Option<&str>,
    payload: Option<Vec<u8>>,
    column_versions: Option<Vec<u8>>,
) -> Result<StoredRow> {
    let payload = payload_or_corrupt(payload)?;
    Ok(StoredRow {
        row_id,
        server_version,
        scopes: crate::json::parse_scopes_opt(scopes)?,
        payload,
        column_versions,
    })
}

/// Reads `row_id, version, scopes, payload` rows (columns 0–3), the rows
/// of reads that serve pulls, which leave column versions out.
pub(crate) fn rows_from(rows: &[postgres::Row]) -> Result<Vec<StoredRow>> {
    read_rows(rows, false)
}

/// Reads rows of columns 0–3, and column versions from column 4 when
/// `with_versions` (the reads of the push path).
fn read_rows(rows: &[postgres::Row], with_versions: bool) -> Result<Vec<StoredRow>> {
    rows.iter()
        .map(|r| {
            // Borrowed from the row: parsed in place, never copied.
            let scopes: Option<&str> = col(r, 2)?;
            let versions = if with_versions { col(r, 4)? } else { None };
            stored_row(col(r, 0)?, col(r, 1)?, scopes, col(r, 3)?, versions)
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
        col(&row, 3)?,
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

/// The typed projection values of a row the front checked (empty for a
/// non-materialized table): the decoded values in the table's column types.
pub(crate) fn typed(sql: &TableSql, row: CheckedRow<'_>) -> Result<Vec<Typed>> {
    let Some(values) = row.into_projection() else {
        return Ok(Vec::new());
    };
    sql.projection
        .iter()
        .zip(values)
        .map(|(column_type, value)| typed_value(*column_type, value))
        .collect()
}

/// [`typed`] of a row that did not come through the front: its payload
/// decoded here (the explain fixture and unit tests).
#[cfg(any(test, feature = "conformance"))]
pub(crate) fn typed_of(
    table: &CompiledTable,
    sql: &TableSql,
    row: &StoredRow,
) -> Result<Vec<Typed>> {
    if !table.materialize {
        return Ok(Vec::new());
    }
    let values = sync_core::codec::decode_row(table, &row.payload)?;
    sql.projection
        .iter()
        .zip(values)
        .map(|(column_type, value)| typed_value(*column_type, value))
        .collect()
}

/// The projection values as parameters.
pub(crate) fn params(typed: Vec<Typed>) -> Vec<Param> {
    typed.into_iter().map(Typed::into_param).collect()
}

/// An upsert rendered as the literal arguments of the table's named upsert
/// ([`TableSql::upsert_name`]), in [`TableSql::upsert`]'s parameter order.
/// `None` when a value cannot be a literal (a NUL in text) or the
/// arguments exceed [`MAX_LITERAL_SQL`]: the caller then runs the upsert at
/// once.
pub(crate) fn deferred_upsert_args(
    table: &CompiledTable,
    partition: &str,
    row: &StoredRow,
    typed: &[Typed],
) -> Option<Vec<String>> {
    if 2 * row.payload.len() > MAX_LITERAL_SQL {
        return None;
    }
    upsert_literals(table, partition, row, typed)
}

fn upsert_literals(
    table: &CompiledTable,
    partition: &str,
    row: &StoredRow,
    typed: &[Typed],
) -> Option<Vec<String>> {
    let text = |v: &&String| quote_literal(v);
    let vars: Vec<&String> = row.scopes.keys().collect();
    let values: Vec<&String> = row.scopes.values().collect();
    let mut args = vec![
        quote_literal(partition)?,
        quote_literal(&row.row_id)?,
        quote_literal(&table.name)?,
        literal_array(&vars, "text", text)?,
        literal_array(&values, "text", text)?,
        format!("'{}'", row.server_version),
        quote_literal(&scopes_json(&row.scopes))?,
        bytea_literal(&row.payload),
    ];
    for value in typed {
        args.push(typed_literal(value)?);
    }
    args.push(
        row.column_versions
            .as_deref()
            .map_or_else(|| "NULL".to_owned(), bytea_literal),
    );
    let size: usize = args.iter().map(String::len).sum();
    (size <= MAX_LITERAL_SQL).then_some(args)
}

/// One projected value as a literal (`NULL` for an absent one).
fn typed_literal(value: &Typed) -> Option<String> {
    Some(match value {
        Typed::Text(Some(text)) => quote_literal(text)?,
        // Quoted: read by the parameter's type (`i64::MIN` is no literal).
        Typed::Int(Some(i)) => format!("'{i}'"),
        Typed::Float(Some(f)) if f.is_nan() => "'NaN'".to_owned(),
        Typed::Float(Some(f)) if f.is_infinite() && *f > 0.0 => "'Infinity'".to_owned(),
        Typed::Float(Some(f)) if f.is_infinite() => "'-Infinity'".to_owned(),
        // The shortest text that reads back as the same double.
        Typed::Float(Some(f)) => format!("'{f:?}'"),
        Typed::Bool(Some(b)) => b.to_string(),
        Typed::Bytes(Some(bytes)) => bytea_literal(bytes),
        Typed::Text(None)
        | Typed::Int(None)
        | Typed::Float(None)
        | Typed::Bool(None)
        | Typed::Bytes(None) => "NULL".to_owned(),
    })
}

/// The current rows of `row_ids`, in their order, with one statement.
pub(crate) fn get_rows(
    conn: &mut Conn,
    sql: &TableSql,
    partition: &str,
    row_ids: &[String],
) -> Result<Vec<Option<StoredRow>>> {
    if row_ids.is_empty() {
        return Ok(Vec::new());
    }
    let found = read_rows(&conn.query(&sql.get_rows, &[&partition, &row_ids])?, true)?;
    Ok(in_order(found, row_ids))
}

/// The rows `found` for `row_ids`, in their order (`None` = absent); a
/// repeated id gets a copy.
pub(crate) fn in_order(found: Vec<StoredRow>, row_ids: &[String]) -> Vec<Option<StoredRow>> {
    let mut by_id: HashMap<String, StoredRow> =
        found.into_iter().map(|r| (r.row_id.clone(), r)).collect();
    let last: HashMap<&str, usize> = row_ids
        .iter()
        .enumerate()
        .map(|(i, id)| (id.as_str(), i))
        .collect();
    row_ids
        .iter()
        .enumerate()
        .map(|(i, row_id)| {
            // A repeated id gets a copy; its last occurrence takes the row.
            if last.get(row_id.as_str()) == Some(&i) {
                by_id.remove(row_id)
            } else {
                by_id.get(row_id).cloned()
            }
        })
        .collect()
}

/// A validated batch for [`upsert_rows`]: the rows distinct by id (a later
/// row with the same id replaces an earlier one, as consecutive upserts
/// would), in order, with their projection values.
pub(crate) struct PreparedBatch<'r> {
    rows: Vec<(&'r StoredRow, Vec<Typed>)>,
}

/// The batch of rows the front checked, distinct by id, with their
/// projection values.
pub(crate) fn prepare_batch<'r>(
    sql: &TableSql,
    rows: Vec<CheckedRow<'r>>,
) -> Result<PreparedBatch<'r>> {
    let mut last: HashMap<&str, usize> = HashMap::with_capacity(rows.len());
    for (i, row) in rows.iter().enumerate() {
        last.insert(row.row().row_id.as_str(), i);
    }
    let mut prepared = Vec::with_capacity(last.len());
    for (i, row) in rows.into_iter().enumerate() {
        let stored = row.row();
        let typed = typed(sql, row)?;
        if last.get(stored.row_id.as_str()) == Some(&i) {
            prepared.push((stored, typed));
        }
    }
    Ok(PreparedBatch { rows: prepared })
}

/// Writes a prepared batch — rows, projections and exactly their
/// scope-index entries — in one statement. Constraint errors are
/// `constraint_violation` without `op_index`.
pub(crate) fn upsert_rows(
    conn: &mut Conn,
    table: &CompiledTable,
    sql: &TableSql,
    partition: &str,
    batch: PreparedBatch<'_>,
) -> Result<()> {
    if batch.rows.is_empty() {
        return Ok(());
    }
    let n = batch.rows.len();
    let mut row_ids: Vec<&str> = Vec::with_capacity(n);
    let mut versions: Vec<i64> = Vec::with_capacity(n);
    let mut scopes: Vec<String> = Vec::with_capacity(n);
    let mut payloads: Vec<&[u8]> = Vec::with_capacity(n);
    let mut column_versions: Vec<Option<&[u8]>> = Vec::with_capacity(n);
    let mut scope_rows: Vec<&str> = Vec::new();
    let mut scope_vars: Vec<&str> = Vec::new();
    let mut scope_values: Vec<&str> = Vec::new();
    let mut projection: Vec<ColumnArray> = sql
        .projection
        .iter()
        .map(|column_type| ColumnArray::new(*column_type, n))
        .collect();
    for (row, typed) in batch.rows {
        row_ids.push(&row.row_id);
        versions.push(row.server_version);
        scopes.push(scopes_json(&row.scopes));
        payloads.push(&row.payload);
        column_versions.push(row.column_versions.as_deref());
        for (var, value) in &row.scopes {
            scope_rows.push(&row.row_id);
            scope_vars.push(var);
            scope_values.push(value);
        }
        for (array, value) in projection.iter_mut().zip(typed) {
            array.push(value)?;
        }
    }
    let projection: Vec<Param> = projection
        .into_iter()
        .map(ColumnArray::into_param)
        .collect();
    let mut params: Vec<&(dyn ToSql + Sync)> = vec![
        &partition,
        &table.name,
        &row_ids,
        &versions,
        &scopes,
        &payloads,
        &scope_rows,
        &scope_vars,
        &scope_values,
    ];
    params.extend(param_refs(&projection));
    params.push(&column_versions);
    conn.query_raw(&sql.upsert_batch, &params)
        .map(|_| ())
        .map_err(|e| classify(e, Site::UpsertRow(None)))
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
    params.push(&row.column_versions);
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

/// The stored scopes of the row's last delete change in `commit_seq`
/// (through `sync_changes_by_table`).
pub(crate) fn delete_scopes(
    conn: &mut Conn,
    partition: &str,
    table: &str,
    row_id: &str,
    commit_seq: i64,
) -> Result<Option<StoredScopes>> {
    match conn.query_opt(
        DELETE_SCOPES_SQL,
        &[&partition, &commit_seq, &table, &row_id],
    )? {
        Some(row) => parse_scopes(&col::<String>(&row, 0)?).map(Some),
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

#[cfg(test)]
mod tests {
    use super::*;
    use sync_core::{codec, RowValue};

    fn table() -> (CompiledTable, TableSql) {
        let schema = sync_schema::compile(
            &sync_schema::parse_schema_json(
                r#"{"version": 1, "tables": [{"name": "t", "primaryKey": "id",
                    "columns": [{"name": "id", "type": "string"},
                                {"name": "n", "type": "integer", "nullable": true},
                                {"name": "f", "type": "float", "nullable": true}],
                    "scopes": ["s:{id}"]}]}"#,
            )
            .expect("schema"),
        )
        .expect("compile");
        let table = schema.table("t").expect("table t").clone();
        let sql = TableSql::new(&table);
        (table, sql)
    }

    fn row(table: &CompiledTable, id: &str, scope: &str, values: Vec<RowValue>) -> StoredRow {
        StoredRow {
            row_id: id.into(),
            server_version: -3,
            scopes: [("s".to_owned(), scope.to_owned())].into(),
            payload: codec::encode_row(table, &values).expect("encode"),
            column_versions: None,
        }
    }

    #[test]
    fn a_deferred_upsert_renders_every_argument_in_parameter_order() {
        let (table, sql) = table();
        let written = row(
            &table,
            "it's",
            "a\\b",
            vec![
                RowValue::String("it's".into()),
                RowValue::Integer(-7),
                RowValue::Float(f64::NEG_INFINITY),
            ],
        );
        let typed = typed_of(&table, &sql, &written).expect("valid");
        let args = deferred_upsert_args(&table, "p'1", &written, &typed).expect("literal");
        assert_eq!(
            args.len(),
            8 + 3 + 1,
            "eight fixed arguments, one per column, then the column versions"
        );
        assert_eq!(args[0], "E'p''1'");
        assert_eq!(args[1], "E'it''s'");
        assert_eq!(args[2], "E't'");
        assert_eq!(args[3], "ARRAY[E's']::text[]");
        assert_eq!(args[4], "ARRAY[E'a\\\\b']::text[]");
        assert_eq!(args[5], "'-3'");
        assert_eq!(args[6], r#"E'{"s":"a\\\\b"}'"#);
        assert!(args[7].starts_with("E'\\\\x") && args[7].ends_with("'::bytea"));
        assert_eq!(args[8..], ["E'it''s'", "'-7'", "'-Infinity'", "NULL"]);
    }

    #[test]
    fn floats_render_as_the_shortest_text_that_reads_back() {
        for (value, text) in [
            (0.1, "'0.1'"),
            (-0.0, "'-0.0'"),
            (1e300, "'1e300'"),
            (5e-324, "'5e-324'"),
            (f64::NAN, "'NaN'"),
            (f64::INFINITY, "'Infinity'"),
        ] {
            assert_eq!(
                typed_literal(&Typed::Float(Some(value))).as_deref(),
                Some(text)
            );
        }
        assert_eq!(typed_literal(&Typed::Bool(None)).as_deref(), Some("NULL"));
        assert_eq!(
            typed_literal(&Typed::Bool(Some(true))).as_deref(),
            Some("true")
        );
    }

    #[test]
    fn a_value_that_cannot_be_a_literal_leaves_the_write_immediate() {
        let (table, sql) = table();
        let values = |id: &str| vec![RowValue::String(id.into()), RowValue::Null, RowValue::Null];
        // A NUL in a scope value: no text literal can hold it.
        let nul = row(&table, "r", "a\0b", values("r"));
        let typed = typed_of(&table, &sql, &nul).expect("valid");
        assert_eq!(deferred_upsert_args(&table, "p", &nul, &typed), None);
        // Arguments over the literal bound.
        let long = "x".repeat(MAX_LITERAL_SQL);
        let big = row(&table, "r", &long, values("r"));
        let typed = typed_of(&table, &sql, &big).expect("valid");
        assert_eq!(deferred_upsert_args(&table, "p", &big, &typed), None);
    }
}
