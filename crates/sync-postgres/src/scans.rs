//! Row scans: scope-indexed scans, trusted index lookups and keyset
//! partition scans (`storage-contract.md` §4.7–§4.8).

use postgres::types::ToSql;
use sync_core::front::IndexLookup;
use sync_core::front::{Handle, IndexScanBackend, Partition};
use sync_core::limits::MIN_CANDIDATE_PAGE;
use sync_core::{
    candidate_variable, CompiledTable, Error, ErrorCode, FilterMatcher, Result, RowScanQuery,
    ScanOutput, StoredRow,
};

use crate::json::parse_scopes;
use crate::pool::{col, Conn};
use crate::rows::{payload_or_corrupt, rows_from};
use crate::state::Ensured;
use crate::table_sql::{TableSql, MERGED_SCAN_VALUES, SCAN_DENSE_MATCHES, SCAN_PROBE_ROWS};
use crate::values::{column_value, param_refs, Param};
use crate::PostgresStorage;

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

impl<'e> ScanPlan<'e> {
    /// The scan of a query the front checked: its filter's candidate
    /// variable has values and its limit is positive.
    pub(crate) fn checked(table: &'e TableSql, q: &'e RowScanQuery) -> Self {
        match candidate_variable(&q.scope_filter) {
            Some(variable) => ScanPlan::Scan { table, variable },
            None => ScanPlan::Empty,
        }
    }
}

/// Runs a planned scope scan. With `max_pages`, gives up (`None`) when the
/// scan would need more statements that return rows than that, so a pool
/// caller can run the common single-page scan in autocommit and redo a
/// longer one inside a read snapshot (`storage-contract.md` §1 rule 3).
///
/// For 2 to [`MERGED_SCAN_VALUES`] values the scan first walks the table
/// where the filter is dense (see [`crate::table_sql::scan_walk_sql`]), then merges the
/// values' ranges above the last walked row (`docs/decisions.md`, "Many-value
/// row scans").
///
/// `R` is what a kept candidate becomes (a [`StoredRow`] for `scan_rows`,
/// a [`sync_core::ScannedRow`] for `scan_row_payloads`).
pub(crate) fn scan_rows<R: ScanOutput>(
    conn: &mut Conn,
    partition: &str,
    q: &RowScanQuery,
    plan: ScanPlan<'_>,
    max_pages: Option<usize>,
) -> Result<Option<Vec<R>>> {
    let ScanPlan::Scan { table, variable } = plan else {
        return Ok(Some(Vec::new()));
    };
    let values = q
        .scope_filter
        .get(variable)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let mut scan = Scan {
        partition,
        query: q,
        matcher: FilterMatcher::new(&q.scope_filter),
        table,
        variable,
        values,
        page: q.limit.max(MIN_CANDIDATE_PAGE),
        limit: usize::try_from(q.limit).unwrap_or(usize::MAX),
        max_pages,
        pages: 0,
        after: q.after_row_id.clone().unwrap_or_default(),
        out: Vec::new(),
    };
    if (2..=MERGED_SCAN_VALUES).contains(&values.len()) {
        match scan.walk(conn)? {
            Step::Done => return Ok(Some(scan.out)),
            Step::GaveUp => return Ok(None),
            Step::Continue => {}
        }
    }
    Ok(match scan.merge(conn)? {
        Step::GaveUp => None,
        Step::Done | Step::Continue => Some(scan.out),
    })
}

/// A scan through the pool: the common single-statement scan in
/// autocommit, a longer one again inside one read snapshot
/// (`storage-contract.md` §1 rule 3).
pub(crate) fn pooled_scan<R: ScanOutput>(
    storage: &PostgresStorage,
    partition: &str,
    table: &TableSql,
    q: &RowScanQuery,
) -> Result<Vec<R>> {
    let plan = ScanPlan::checked(table, q);
    if let Some(rows) = storage.with_conn(|c| scan_rows(c, partition, q, plan, Some(1)))? {
        return Ok(rows);
    }
    storage
        .with_snapshot(|c| scan_rows(c, partition, q, plan, None))
        .map(Option::unwrap_or_default)
}

/// Where a part of a scan left it.
enum Step {
    /// The page is complete (or the table is exhausted).
    Done,
    /// More statements are needed than `max_pages` allows.
    GaveUp,
    /// The next part continues from the cursor.
    Continue,
}

/// A scope scan in progress: its query, cursor and rows so far.
struct Scan<'a, R> {
    partition: &'a str,
    query: &'a RowScanQuery,
    /// The query's filter, prepared for verifying candidates.
    matcher: FilterMatcher<'a>,
    table: &'a TableSql,
    variable: &'a str,
    values: &'a [String],
    page: i64,
    limit: usize,
    max_pages: Option<usize>,
    pages: usize,
    after: String,
    out: Vec<R>,
}

impl<R: ScanOutput> Scan<'_, R> {
    /// Counts one more statement that returns rows; `false` past `max_pages`.
    fn next_page(&mut self) -> bool {
        if self.max_pages.is_some_and(|max| self.pages >= max) {
            return false;
        }
        self.pages += 1;
        true
    }

    /// Keeps the candidate when its stored scopes (`None`: SQL `NULL`, an
    /// empty map) match the whole filter; `true` once the page is full.
    fn offer(
        &mut self,
        row_id: &str,
        version: i64,
        scopes: Option<&str>,
        payload: Vec<u8>,
    ) -> Result<bool> {
        let scopes = scopes.unwrap_or("{}");
        if let Some(row) = R::verified(
            &self.matcher,
            row_id,
            version,
            scopes,
            payload,
            parse_scopes,
        )? {
            self.out.push(row);
        }
        Ok(self.out.len() >= self.limit)
    }

    /// Records `row_id` as the last candidate read (the cursor).
    fn passed(&mut self, row_id: &str) {
        self.after.clear();
        self.after.push_str(row_id);
    }

    /// Walks the table's primary key while the filter is dense: the first
    /// walk behind its probe (sized by the probe's density), further walks
    /// sized by the density seen.
    /// `Continue` hands the rest (from the last walked row) to the merge.
    fn walk(&mut self, conn: &mut Conn) -> Result<Step> {
        let mut size = self.page;
        let mut gated = true;
        loop {
            // A further walk returns rows: it needs the budget first.
            if !gated && !self.next_page() {
                return Ok(Step::GaveUp);
            }
            let sql = if gated {
                &self.table.scan_walk_gated
            } else {
                &self.table.scan_walk
            };
            let rows = conn.query(
                sql.as_str(),
                &[
                    &self.partition,
                    &self.after,
                    &self.variable,
                    &self.values,
                    &size,
                ],
            )?;
            if gated {
                if rows.is_empty() {
                    // The probe found the filter sparse (or nothing is
                    // left): no row was read for the result, so no
                    // statement is counted.
                    return Ok(Step::Continue);
                }
                if !self.next_page() {
                    return Ok(Step::GaveUp);
                }
                gated = false;
            }
            // What this statement walked at most (the gated one sizes its
            // walk by the probe's density).
            size = match rows.first() {
                Some(row) => col(row, 4)?,
                None => size,
            };
            let mut hits = 0i64;
            for row in &rows {
                let row_id: &str = col(row, 0)?;
                self.passed(row_id);
                let Some(payload) = col::<Option<Vec<u8>>>(row, 3)? else {
                    continue;
                };
                hits += 1;
                let scopes: Option<&str> = col(row, 2)?;
                if self.offer(row_id, col(row, 1)?, scopes, payload)? {
                    return Ok(Step::Done);
                }
            }
            let walked = i64::try_from(rows.len()).unwrap_or(i64::MAX);
            if walked < size {
                return Ok(Step::Done);
            }
            if hits * SCAN_PROBE_ROWS < walked * SCAN_DENSE_MATCHES {
                return Ok(Step::Continue);
            }
            let wanted = i64::try_from(self.limit - self.out.len()).unwrap_or(i64::MAX);
            size = wanted
                .saturating_mul(walked)
                .checked_div(hits)
                .unwrap_or(i64::MAX)
                .saturating_add(SCAN_PROBE_ROWS)
                .clamp(SCAN_PROBE_ROWS, self.page.saturating_mul(4));
        }
    }

    /// Merges the values' ranges (one range for one value) from the cursor.
    fn merge(&mut self, conn: &mut Conn) -> Result<Step> {
        loop {
            if !self.next_page() {
                return Ok(Step::GaveUp);
            }
            let rows = conn.query(
                self.table
                    .scan_pages
                    .get(&self.table.quoted, self.values.len()),
                &[
                    &self.partition,
                    &self.query.table,
                    &self.variable,
                    &self.values,
                    &self.after,
                    &self.page,
                ],
            )?;
            for row in &rows {
                let row_id: &str = col(row, 0)?;
                self.passed(row_id);
                let Some(version) = col::<Option<i64>>(row, 1)? else {
                    continue;
                };
                let scopes: Option<&str> = col(row, 2)?;
                let payload = payload_or_corrupt(col(row, 3)?)?;
                if self.offer(row_id, version, scopes, payload)? {
                    return Ok(Step::Done);
                }
            }
            if i64::try_from(rows.len()).unwrap_or(i64::MAX) < self.page {
                return Ok(Step::Done);
            }
        }
    }
}

/// A checked index lookup: SQL text and its value parameters.
pub(crate) struct IndexPlan {
    sql: String,
    values: Vec<Param>,
}

impl IndexPlan {
    /// The statement of a lookup the front checked (`storage-contract.md`
    /// §4.8 step 1): `IS NULL` for each null value, a typed parameter for
    /// each other.
    pub(crate) fn checked(lookup: IndexLookup<'_, TableSql>) -> Result<Self> {
        let table = lookup.table();
        let index = lookup.index();
        let columns = index_columns(table.compiled(), &index.columns)?;
        let mut nulls = Vec::with_capacity(columns.len());
        let mut values = Vec::new();
        for ((_, column_type), value) in columns.iter().zip(lookup.values()) {
            nulls.push(value.is_null());
            if !value.is_null() {
                values.push(column_value(*column_type, value.clone())?);
            }
        }
        Ok(Self {
            sql: table.index_lookup_sql(&columns, &nulls, index.unique),
            values,
        })
    }
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

/// Runs a checked index lookup: rows after `after`, at most `limit`.
pub(crate) fn scan_rows_by_index(
    conn: &mut Conn,
    partition: &str,
    after: Option<&str>,
    limit: i64,
    plan: &IndexPlan,
) -> Result<Vec<StoredRow>> {
    let after = after.unwrap_or_default();
    let mut params: Vec<&(dyn ToSql + Sync)> = vec![&partition, &after, &limit];
    params.extend(param_refs(&plan.values));
    let rows = conn.query(&plan.sql, &params)?;
    rows_from(&rows)
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

impl IndexScanBackend<Ensured> for PostgresStorage {
    fn scan_rows_by_index(
        &self,
        p: Partition<'_>,
        lookup: IndexLookup<'_, Handle<Self>>,
    ) -> Result<Vec<StoredRow>> {
        let plan = IndexPlan::checked(lookup)?;
        let (after, limit) = (lookup.after_row_id(), lookup.limit());
        self.with_conn(|c| scan_rows_by_index(c, &p, after, limit, &plan))
    }
}
