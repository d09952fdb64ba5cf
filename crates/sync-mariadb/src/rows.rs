//! Current rows: reads, the two-statement upsert with projections and
//! scope-index maintenance, deletes and tombstones
//! (`docs/design/mariadb.md` §9.1, §9.5).

use mysql::Value;
use sync_core::{Result, RowValue, StoredRow, StoredScopes};

use crate::ensured::TableSql;
use crate::errors::Site;
use crate::pool::Conn;
use crate::values::{parse_scopes, projection_value, scopes_json};

/// Most rows of one multi-row insert (5 parameters each: far below the
/// 65 535 placeholders of one prepared statement).
const ENTRY_BATCH: usize = 1000;

/// `(server_version, scopes, payload, column_versions)` of one row.
pub(crate) type RowColumns = (i64, String, Vec<u8>, Option<Vec<u8>>);

/// The stored row, or `None`.
pub(crate) fn get(
    conn: &mut Conn,
    table: &TableSql,
    partition: &str,
    row_id: &str,
) -> Result<Option<StoredRow>> {
    let found: Option<RowColumns> = conn.first(&table.select_row, (partition, row_id))?;
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

/// Builds a [`StoredRow`] from `(row_id, version, scopes, payload)`.
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

/// Writes the row: `UPDATE` by key, then `INSERT` when no row matched —
/// never `ON DUPLICATE KEY UPDATE`, which would update another row that
/// collides on a unique index. The scope index is replaced only when the
/// scope map changed. A constraint error of either statement is
/// `constraint_violation` with `op_index`. `known_scopes` is the stored
/// scopes text as this transaction already read it under the partition
/// lock (`Some(None)`: no row), which spares the statement reading it.
pub(crate) fn upsert(
    conn: &mut Conn,
    table: &TableSql,
    partition: &str,
    row: &StoredRow,
    values: Option<&[RowValue]>,
    op_index: Option<u32>,
    known_scopes: Option<Option<String>>,
) -> Result<()> {
    let new_scopes = scopes_json(&row.scopes);
    let old_scopes: Option<String> = match known_scopes {
        Some(known) => known,
        None => conn.first(&table.select_scopes, (partition, &row.row_id))?,
    };
    let unchanged = old_scopes.as_deref().is_some_and(|old| {
        old == new_scopes || parse_scopes(old).is_ok_and(|parsed| parsed == row.scopes)
    });
    if old_scopes.is_some() && !unchanged {
        delete_entries(conn, partition, &table.name, &row.row_id)?;
    }
    let projection: Vec<Value> = if table.materialized {
        values
            .unwrap_or_default()
            .iter()
            .map(projection_value)
            .collect()
    } else {
        Vec::new()
    };
    let trailing = [
        Value::Int(row.server_version),
        Value::Bytes(new_scopes.clone().into_bytes()),
        Value::Bytes(row.payload.clone()),
        row.column_versions
            .as_ref()
            .map_or(Value::NULL, |v| Value::Bytes(v.clone())),
    ];
    let key = [
        Value::Bytes(partition.as_bytes().to_vec()),
        Value::Bytes(row.row_id.as_bytes().to_vec()),
    ];
    let site = Site::UpsertRow(op_index);
    let mut matched = 0;
    if old_scopes.is_some() {
        let params: Vec<Value> = projection
            .iter()
            .chain(&trailing)
            .chain(&key)
            .cloned()
            .collect();
        matched = conn.exec_at(&table.update, params, site)?;
    }
    if matched == 0 {
        let params: Vec<Value> = key
            .iter()
            .chain(&projection)
            .chain(&trailing)
            .cloned()
            .collect();
        conn.exec_at(&table.insert, params, site)?;
    }
    if !unchanged {
        insert_entries(conn, partition, &table.name, &row.row_id, row)?;
    }
    Ok(())
}

fn delete_entries(conn: &mut Conn, partition: &str, table: &str, row_id: &str) -> Result<()> {
    conn.exec(
        "DELETE FROM `sync_row_scopes` WHERE `partition` = ? AND `tbl` = ? AND `row_id` = ?",
        (partition, table, row_id),
    )?;
    Ok(())
}

fn insert_entries(
    conn: &mut Conn,
    partition: &str,
    table: &str,
    row_id: &str,
    row: &StoredRow,
) -> Result<()> {
    let entries: Vec<(&String, &String)> = row.scopes.iter().collect();
    for chunk in entries.chunks(ENTRY_BATCH) {
        let marks = vec!["(?, ?, ?, ?, ?)"; chunk.len()].join(", ");
        let mut params: Vec<Value> = Vec::with_capacity(chunk.len() * 5);
        for (variable, value) in chunk {
            params.extend([
                Value::from(partition),
                Value::from(table),
                Value::from(variable.as_str()),
                Value::from(value.as_str()),
                Value::from(row_id),
            ]);
        }
        conn.exec(
            &format!(
                "INSERT INTO `sync_row_scopes` (`partition`, `tbl`, `var`, `value`, `row_id`) \
                 VALUES {marks} ON DUPLICATE KEY UPDATE `row_id` = `row_id`"
            ),
            params,
        )?;
    }
    Ok(())
}

/// Removes the row, its scope-index entries and its blob references.
pub(crate) fn delete(
    conn: &mut Conn,
    table: &TableSql,
    partition: &str,
    row_id: &str,
) -> Result<()> {
    delete_entries(conn, partition, &table.name, row_id)?;
    conn.exec(&table.delete_row, (partition, row_id))?;
    conn.exec(
        "DELETE FROM `sync_blob_refs` WHERE `partition` = ? AND `tbl` = ? AND `row_id` = ?",
        (partition, &table.name, row_id),
    )?;
    Ok(())
}

/// `commit_seq` of the newest retained delete of the row.
pub(crate) fn tombstone_seq(
    conn: &mut Conn,
    partition: &str,
    table: &str,
    row_id: &str,
) -> Result<Option<i64>> {
    conn.first(
        "SELECT `commit_seq` FROM `sync_tombstones` WHERE `partition` = ? AND `tbl` = ? AND `row_id` = ?",
        (partition, table, row_id),
    )
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
    let text: Option<String> = conn.first(
        "SELECT `scopes` FROM `sync_changes` WHERE `partition` = ? AND `commit_seq` = ? \
         AND `tbl` = ? AND `row_id` = ? AND `op` = 2 ORDER BY `idx` DESC LIMIT 1",
        (partition, commit_seq, table, row_id),
    )?;
    text.as_deref().map(parse_scopes).transpose()
}

/// Removes the row's tombstone.
pub(crate) fn clear_tombstone(
    conn: &mut Conn,
    partition: &str,
    table: &str,
    row_id: &str,
) -> Result<()> {
    conn.exec(
        "DELETE FROM `sync_tombstones` WHERE `partition` = ? AND `tbl` = ? AND `row_id` = ?",
        (partition, table, row_id),
    )?;
    Ok(())
}

/// One keyset page of the partition's rows in row-id order.
pub(crate) fn partition_scan(
    conn: &mut Conn,
    table: &TableSql,
    partition: &str,
    after: Option<&str>,
    limit: i64,
) -> Result<Vec<StoredRow>> {
    let raw: Vec<(String, i64, String, Vec<u8>)> = conn.rows(
        &table.partition_scan,
        (partition, after.unwrap_or(""), limit),
    )?;
    raw.into_iter().map(build_row).collect()
}
