//! Row scans: scope-indexed scans, trusted index lookups and keyset
//! partition scans (`storage-contract.md` §4.7–§4.8).

use postgres::types::ToSql;
use sync_core::limits::MIN_CANDIDATE_PAGE;
use sync_core::{
    candidate_variable, matches_filter, validate, CompiledTable, Error, ErrorCode,
    IndexRowScanQuery, Result, RowScanQuery, StoredRow,
};

use crate::pool::{col, Conn};
use crate::rows::{rows_from, stored_row};
use crate::state::{resolve, Ensured};
use crate::table_sql::TableSql;
use crate::values::{column_value, param_refs, Param};

/// What `scan_rows` does after its validation.
#[derive(Debug, Clone, Copy)]
pub(crate) enum ScanPlan<'e> {
    /// Nothing can match (empty value list or non-positive limit).
    Empty,
    /// Scan this table for this variable.
    Scan {
        table: &'e TableSql,
        variable: &'e str,
    },
}

/// `scan_rows` validation in its normative order: partition, empty filter,
/// empty candidate list, table, limit.
pub(crate) fn plan_scan<'e>(
    ensured: Option<&'e Ensured>,
    partition: &str,
    q: &'e RowScanQuery,
) -> Result<ScanPlan<'e>> {
    validate::partition(partition)?;
    let variable = candidate_variable(&q.scope_filter)
        .ok_or_else(|| Error::new(ErrorCode::ScanRequiresScope))?;
    if q.scope_filter.get(variable).is_none_or(Vec::is_empty) {
        return Ok(ScanPlan::Empty);
    }
    let (_, table) = resolve(ensured, &q.table)?;
    if q.limit <= 0 {
        return Ok(ScanPlan::Empty);
    }
    Ok(ScanPlan::Scan { table, variable })
}

/// Runs a planned scope scan. With `max_pages`, gives up (`None`) when the
/// scan would need more candidate pages than that, so a pool caller can run
/// the common single-page scan in autocommit and redo a longer one inside a
/// read snapshot (`storage-contract.md` §1 rule 3).
pub(crate) fn scan_rows(
    conn: &mut Conn,
    partition: &str,
    q: &RowScanQuery,
    plan: ScanPlan<'_>,
    max_pages: Option<usize>,
) -> Result<Option<Vec<StoredRow>>> {
    let ScanPlan::Scan { table, variable } = plan else {
        return Ok(Some(Vec::new()));
    };
    let values = q
        .scope_filter
        .get(variable)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let page = q.limit.max(MIN_CANDIDATE_PAGE);
    let limit = usize::try_from(q.limit).unwrap_or(usize::MAX);
    let mut after = q.after_row_id.clone().unwrap_or_default();
    let mut out = Vec::new();
    let mut pages = 0;
    loop {
        if max_pages.is_some_and(|max| pages >= max) {
            return Ok(None);
        }
        pages += 1;
        let rows = conn.query(
            table.scan_pages.get(&table.quoted, values.len()),
            &[&partition, &q.table, &variable, &values, &after, &page],
        )?;
        for row in &rows {
            let row_id: String = col(row, 0)?;
            after.clone_from(&row_id);
            let Some(version) = col::<Option<i64>>(row, 1)? else {
                continue;
            };
            let scopes: Option<String> = col(row, 2)?;
            let stored = stored_row(row_id, version, scopes.as_deref(), col(row, 3)?)?;
            if matches_filter(&stored.scopes, &q.scope_filter) {
                out.push(stored);
                if out.len() >= limit {
                    return Ok(Some(out));
                }
            }
        }
        if i64::try_from(rows.len()).unwrap_or(i64::MAX) < page {
            return Ok(Some(out));
        }
    }
}

/// A validated index lookup: SQL text and its value parameters.
pub(crate) struct IndexLookup {
    sql: String,
    values: Vec<Param>,
}

/// `scan_rows_by_index` validation in its normative order: partition, table,
/// limit, materialized, index, value count, value types.
pub(crate) fn plan_index_lookup(
    ensured: Option<&Ensured>,
    partition: &str,
    q: &IndexRowScanQuery,
) -> Result<IndexLookup> {
    validate::partition(partition)?;
    let (table, sql) = resolve(ensured, &q.table)?;
    validate::lookup_limit(q.limit)?;
    if !table.materialize {
        return Err(Error::new(ErrorCode::IndexNotMaterialized).detail("table", &table.name));
    }
    let index = table.index(&q.index).ok_or_else(|| {
        Error::new(ErrorCode::IndexNotFound)
            .detail("table", &table.name)
            .detail("index", &q.index)
    })?;
    if q.values.len() != index.columns.len() {
        return Err(Error::new(ErrorCode::IndexValueCountMismatch)
            .detail("expected", index.columns.len())
            .detail("actual", q.values.len()));
    }
    let columns = index_columns(table, &index.columns)?;
    let mut nulls = Vec::with_capacity(columns.len());
    let mut values = Vec::new();
    for (position, ((_, column_type), value)) in columns.iter().zip(&q.values).enumerate() {
        if value.is_null() {
            nulls.push(true);
            continue;
        }
        if value.column_type() != Some(*column_type) {
            return Err(Error::new(ErrorCode::IndexValueTypeMismatch).detail("position", position));
        }
        nulls.push(false);
        values.push(column_value(*column_type, value.clone())?);
    }
    Ok(IndexLookup {
        sql: sql.index_lookup_sql(&columns, &nulls),
        values,
    })
}

fn index_columns(
    table: &CompiledTable,
    names: &[String],
) -> Result<Vec<(String, sync_core::ColumnType)>> {
    names
        .iter()
        .map(|name| {
            table
                .column(name)
                .map(|c| (c.name.clone(), c.column_type))
                .ok_or_else(|| Error::new(ErrorCode::IndexNotFound).detail("table", &table.name))
        })
        .collect()
}

/// Runs a validated index lookup.
pub(crate) fn scan_rows_by_index(
    conn: &mut Conn,
    partition: &str,
    q: &IndexRowScanQuery,
    lookup: IndexLookup,
) -> Result<Vec<StoredRow>> {
    let after = q.after_row_id.clone().unwrap_or_default();
    let mut params: Vec<&(dyn ToSql + Sync)> = vec![&partition, &after, &q.limit];
    params.extend(param_refs(&lookup.values));
    let rows = conn.query(&lookup.sql, &params)?;
    rows_from(&rows)
}

/// `scan_partition_rows` validation: partition, table, limit.
pub(crate) fn plan_partition_scan<'e>(
    ensured: Option<&'e Ensured>,
    partition: &str,
    table: &str,
    limit: i64,
) -> Result<&'e TableSql> {
    validate::partition(partition)?;
    let (_, sql) = resolve(ensured, table)?;
    validate::lookup_limit(limit)?;
    Ok(sql)
}

/// Runs a validated keyset partition scan.
pub(crate) fn scan_partition_rows(
    conn: &mut Conn,
    sql: &TableSql,
    partition: &str,
    after_row_id: Option<&str>,
    limit: i64,
) -> Result<Vec<StoredRow>> {
    let after = after_row_id.unwrap_or_default();
    let rows = conn.query(&sql.partition_scan, &[&partition, &after, &limit])?;
    rows_from(&rows)
}
