//! Trusted index lookups (`storage-contract.md` §4.8, capability
//! `IndexScan`): equality on a declared index's columns (exact on the full
//! values; the prefix index is only an access path), in row-id order after
//! a keyset cursor.

use std::sync::Arc;

use mysql::Value;
use sync_core::front::IndexLookup;
use sync_core::front::{Handle, IndexScanBackend, Partition};
use sync_core::{Result, StoredRow};

use crate::dialect::quote_ident as q;
use crate::ensured::Ensured;
use crate::ensured::TableSql;
use crate::pool::Conn;
use crate::values::projection_value;
use crate::MariadbStorage;

/// The lookup statement: partition, one `= ?` (or `IS NULL`) per column,
/// the cursor, the limit — parameters in that order, NULLs not bound. The
/// statement reads through the declared index's lookup index
/// (`FORCE INDEX`): several declared indexes may start with the same
/// column, and the estimates of prefix indexes cannot tell which one
/// narrows the lookup.
pub fn index_lookup_sql(
    quoted_table: &str,
    index: &str,
    columns: &[String],
    nulls: &[bool],
) -> String {
    let conditions: String = columns
        .iter()
        .zip(nulls)
        .map(|(column, is_null)| {
            if *is_null {
                format!(" AND {} IS NULL", q(column))
            } else {
                format!(" AND {} = ?", q(column))
            }
        })
        .collect();
    format!(
        "SELECT `_sync_row_id`, `_sync_server_version`, `_sync_scopes`, `_sync_payload` \
         FROM {quoted_table} FORCE INDEX ({}) \
         WHERE `_sync_partition` = ?{conditions} AND `_sync_row_id` > ? \
         ORDER BY `_sync_row_id` LIMIT ?",
        q(&sync_schema::physical_index_name(index))
    )
}

/// Runs a lookup the front checked.
pub(crate) fn index_scan(
    conn: &mut Conn,
    partition: &str,
    lookup: IndexLookup<'_, Arc<TableSql>>,
) -> Result<Vec<StoredRow>> {
    let values = lookup.values();
    let nulls: Vec<bool> = values.iter().map(|v| v.is_null()).collect();
    let sql = index_lookup_sql(
        &lookup.table().handle().quoted,
        &lookup.index().name,
        &lookup.index().columns,
        &nulls,
    );
    let mut params: Vec<Value> = vec![partition.into()];
    params.extend(values.iter().filter(|v| !v.is_null()).map(projection_value));
    params.extend([
        Value::from(lookup.after_row_id().unwrap_or("")),
        Value::Int(lookup.limit()),
    ]);
    let raw: Vec<(String, i64, String, Vec<u8>)> = conn.rows(&sql, params)?;
    raw.into_iter().map(crate::rows::build_row).collect()
}

impl IndexScanBackend<Ensured> for MariadbStorage {
    fn scan_rows_by_index(
        &self,
        p: Partition<'_>,
        lookup: sync_core::front::IndexLookup<'_, Handle<Self>>,
    ) -> Result<Vec<StoredRow>> {
        self.with_conn(|c| index_scan(c, p.as_str(), lookup))
    }
}
