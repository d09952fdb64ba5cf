//! Row scans through the scope index (`docs/design/mariadb.md` §13,
//! `dialects.md` §7, `docs/decisions.md` "Many-value scope reads on
//! MariaDB").
//!
//! - One value reads its primary-key range of `sync_row_scopes`, joined
//!   row by row: one statement a page.
//! - Two to [`MERGED_SCAN_VALUES`] values first **walk** the covering
//!   `sync_row_scopes_by_row` index in row-id order from the cursor,
//!   checking each entry's variable and value. Where the filter is dense
//!   that reads the page's entries and little more, in one statement. The
//!   walk is bounded by `LIMIT … ROWS EXAMINED` ([`walk_budget`]): where
//!   fewer than about a quarter of the rows match, it stops early (warning
//!   1931) with the rows it found, a prefix of the answer, and the scan
//!   goes on from the last of them by **merging** the values' ranges.
//! - The merge reads one primary-key range per value, each cut at the page
//!   size, and then the rows of the first page of ids by primary key: two
//!   statements a page whatever the filter's density.
//! - More values read every entry of the values above the cursor, sorted
//!   by the server (a statement of thousands of ranges would bind six
//!   parameters each; MariaDB takes at most 65 535).

use std::collections::HashMap;

use mysql::Value;
use sync_core::limits::MIN_CANDIDATE_PAGE;
use sync_core::{candidate_variable, FilterMatcher, Result, RowScanQuery, ScanOutput};

use crate::ensured::TableSql;
use crate::pool::Conn;
use crate::values::parse_scopes;

/// Most values a scan page walks or merges range by range; a longer list
/// takes the sorted candidates, as Postgres and SQLite do above the same
/// count.
pub(crate) const MERGED_SCAN_VALUES: usize = 128;

/// The rows a walk may examine for a page of `page` rows of a table whose
/// rows carry `variables` scope entries each: four times what a page costs
/// when every row matches (each row's entries, then the joined row). A walk
/// that runs out of it has found fewer than about a quarter of its rows
/// matching, where the merge reads less.
pub(crate) fn walk_budget(page: i64, variables: usize) -> i64 {
    let per_row = i64::try_from(variables.max(1)).unwrap_or(i64::MAX);
    page.saturating_mul(per_row.saturating_add(1))
        .saturating_mul(4)
}

fn marks(count: usize) -> String {
    vec!["?"; count].join(", ")
}

/// The parameters of one per-value range of a scan page: partition,
/// table, variable, value, cursor, page size.
fn range_params(
    partition: &str,
    table: &str,
    variable: &str,
    value: &str,
    cursor: &str,
    page: i64,
) -> [Value; 6] {
    [
        partition.into(),
        table.into(),
        variable.into(),
        value.into(),
        cursor.into(),
        Value::Int(page),
    ]
}

/// One scan page of a single value: one primary-key range of
/// `sync_row_scopes` read in row-id order and joined row by row, so the page
/// streams and stops after `page` entries whatever the table's size.
/// Parameters: [`range_params`].
pub(crate) fn single_value_page_sql(quoted_table: &str) -> String {
    format!(
        "SELECT s.`row_id`, t.`_sync_server_version`, t.`_sync_scopes`, t.`_sync_payload` \
         FROM `sync_row_scopes` AS s \
         LEFT JOIN {quoted_table} AS t \
           ON t.`_sync_partition` = s.`partition` AND t.`_sync_row_id` = s.`row_id` \
         WHERE s.`partition` = ? AND s.`tbl` = ? AND s.`var` = ? AND s.`value` = ? \
           AND s.`row_id` > ? ORDER BY s.`row_id` LIMIT ?"
    )
}

/// The walk of a scan of `values` values: the covering
/// `sync_row_scopes_by_row` index read in row-id order from the cursor
/// (`range`, no sort), each entry whose variable and value match joined to
/// its row by primary key; at most `page` entries and `budget` examined
/// rows. Parameters: partition, table, cursor, variable, the values, page
/// size, budget.
pub(crate) fn walk_sql(quoted_table: &str, values: usize) -> String {
    format!(
        "SELECT s.`row_id`, t.`_sync_server_version`, t.`_sync_scopes`, t.`_sync_payload` \
         FROM `sync_row_scopes` AS s FORCE INDEX (`sync_row_scopes_by_row`) \
         LEFT JOIN {quoted_table} AS t \
           ON t.`_sync_partition` = s.`partition` AND t.`_sync_row_id` = s.`row_id` \
         WHERE s.`partition` = ? AND s.`tbl` = ? AND s.`row_id` > ? AND s.`var` = ? \
           AND s.`value` IN ({}) \
         ORDER BY s.`row_id` LIMIT ? ROWS EXAMINED ?",
        marks(values)
    )
}

/// The candidates of a merged scan page (`docs/design/mariadb.md` §13):
/// one primary-key range per value, each cut at the page size (the first
/// `page` distinct ids lie within the first `page` of every range), as a
/// `UNION ALL` without an outer `ORDER BY` — MariaDB streams it, where an
/// outer sort would materialize the union; the caller merges the sorted
/// runs. Parameters: [`range_params`] per value.
pub(crate) fn multi_value_candidates_sql(values: usize) -> String {
    let arm = "(SELECT `row_id` FROM `sync_row_scopes` \
               WHERE `partition` = ? AND `tbl` = ? AND `var` = ? AND `value` = ? \
               AND `row_id` > ? ORDER BY `row_id` LIMIT ?)";
    vec![arm; values].join(" UNION ALL ")
}

/// The candidates of a scan page of more than [`MERGED_SCAN_VALUES`]
/// values: every entry of the values above the cursor, de-duplicated and
/// sorted by the server. Parameters: partition, table, variable, the
/// values, cursor, page size.
fn sorted_candidates_sql(values: usize) -> String {
    format!(
        "SELECT DISTINCT `row_id` FROM `sync_row_scopes` \
         WHERE `partition` = ? AND `tbl` = ? AND `var` = ? AND `value` IN ({}) \
         AND `row_id` > ? ORDER BY `row_id` LIMIT ?",
        marks(values)
    )
}

/// The rows of `count` row ids of the table, by primary key. Parameters:
/// partition, the ids.
fn rows_by_id_sql(quoted_table: &str, count: usize) -> String {
    format!(
        "SELECT `_sync_row_id`, `_sync_server_version`, `_sync_scopes`, `_sync_payload` \
         FROM {quoted_table} WHERE `_sync_partition` = ? AND `_sync_row_id` IN ({})",
        marks(count)
    )
}

/// A candidate row id with its row (`None` columns for an entry whose row
/// is gone).
type ScanRow = (String, Option<i64>, Option<String>, Option<Vec<u8>>);

/// How a scan reads its next candidates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// One value's range.
    Single,
    /// The walk of the by-row index, bounded by examined rows.
    Walk,
    /// Per-value ranges merged, then the rows by id.
    Merge,
    /// Sorted candidates of a long value list, then the rows by id.
    Sorted,
}

/// Runs a scope scan. With `max_statements`, gives up (`None`) when the
/// scan would need more statements than that, so a pool caller can run the
/// common single-statement page in autocommit and redo a longer scan inside
/// a read snapshot (`storage-contract.md` §1 rule 3). Generic over what a
/// kept candidate becomes: `StoredRow` for `scan_rows`, `ScannedRow` (no
/// scope map built) for `scan_row_payloads`.
pub(crate) fn scan_rows<R: ScanOutput>(
    conn: &mut Conn,
    table: &TableSql,
    partition: &str,
    query: &RowScanQuery,
    max_statements: Option<usize>,
) -> Result<Option<Vec<R>>> {
    let Some(variable) = candidate_variable(&query.scope_filter) else {
        return Ok(Some(Vec::new()));
    };
    let values = query
        .scope_filter
        .get(variable)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let shape = match values.len() {
        0 => return Ok(Some(Vec::new())),
        1 => Shape::Single,
        n if n <= MERGED_SCAN_VALUES => Shape::Walk,
        _ => Shape::Sorted,
    };
    let mut scan = Scan {
        conn,
        table,
        partition,
        query,
        matcher: FilterMatcher::new(&query.scope_filter),
        variable,
        values,
        page: query.limit.max(MIN_CANDIDATE_PAGE),
        limit: usize::try_from(query.limit).unwrap_or(usize::MAX),
        max_statements,
        statements: 0,
        cursor: query.after_row_id.clone().unwrap_or_default(),
        out: Vec::new(),
    };
    let mut shape = shape;
    loop {
        let step = match shape {
            Shape::Single => scan.single()?,
            Shape::Walk => scan.walk()?,
            Shape::Merge | Shape::Sorted => scan.by_candidates(shape)?,
        };
        match step {
            Step::Done => return Ok(Some(scan.out)),
            Step::GaveUp => return Ok(None),
            Step::More => {}
            Step::Sparse => shape = Shape::Merge,
        }
    }
}

/// Where one statement (or pair) of a scan left it.
enum Step {
    /// The page is complete, or nothing is left.
    Done,
    /// More statements are needed than the caller allows.
    GaveUp,
    /// Go on from the cursor in the same shape.
    More,
    /// The walk stopped on its budget: go on from the cursor by merging.
    Sparse,
}

/// A scope scan in progress: its query, cursor and rows so far.
struct Scan<'a, 'c, R> {
    conn: &'c mut Conn,
    table: &'a TableSql,
    partition: &'a str,
    query: &'a RowScanQuery,
    /// The query's filter, prepared for verifying candidates.
    matcher: FilterMatcher<'a>,
    variable: &'a str,
    values: &'a [String],
    page: i64,
    limit: usize,
    max_statements: Option<usize>,
    statements: usize,
    cursor: String,
    out: Vec<R>,
}

impl<R: ScanOutput> Scan<'_, '_, R> {
    /// Counts `count` more statements; `false` past `max_statements`.
    fn spend(&mut self, count: usize) -> bool {
        if self
            .max_statements
            .is_some_and(|max| self.statements + count > max)
        {
            return false;
        }
        self.statements += count;
        true
    }

    /// Offers candidates in row-id order; `true` once the page is full.
    fn offer(&mut self, rows: Vec<ScanRow>) -> Result<bool> {
        for (row_id, version, scopes, payload) in rows {
            if row_id <= self.cursor {
                continue;
            }
            self.cursor.clone_from(&row_id);
            let (Some(server_version), Some(scopes), Some(payload)) = (version, scopes, payload)
            else {
                continue;
            };
            let Some(row) = R::verified(
                &self.matcher,
                &row_id,
                server_version,
                &scopes,
                payload,
                parse_scopes,
            )?
            else {
                continue;
            };
            self.out.push(row);
            if self.out.len() >= self.limit {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// `Done` when `found` candidates fill less than a page: nothing is left.
    fn after_page(&self, found: usize) -> Step {
        if i64::try_from(found).unwrap_or(i64::MAX) < self.page {
            Step::Done
        } else {
            Step::More
        }
    }

    fn single(&mut self) -> Result<Step> {
        if !self.spend(1) {
            return Ok(Step::GaveUp);
        }
        let params = range_params(
            self.partition,
            &self.query.table,
            self.variable,
            &self.values[0],
            &self.cursor,
            self.page,
        );
        let rows: Vec<ScanRow> = self
            .conn
            .rows(&single_value_page_sql(&self.table.quoted), params.to_vec())?;
        let found = rows.len();
        if self.offer(rows)? {
            return Ok(Step::Done);
        }
        Ok(self.after_page(found))
    }

    fn walk(&mut self) -> Result<Step> {
        let mut params: Vec<Value> = vec![
            self.partition.into(),
            self.query.table.as_str().into(),
            self.cursor.as_str().into(),
            self.variable.into(),
        ];
        params.extend(self.values.iter().map(|v| Value::from(v.as_str())));
        params.extend([
            Value::Int(self.page),
            Value::Int(walk_budget(self.page, self.table.scope_variables)),
        ]);
        // A walk that finds nothing before its budget runs out returned no
        // row of the answer: it is not counted, as Postgres does not count
        // its probe.
        let sql = walk_sql(&self.table.quoted, self.values.len());
        if self
            .max_statements
            .is_some_and(|max| self.statements >= max)
        {
            return Ok(Step::GaveUp);
        }
        let (rows, warned): (Vec<ScanRow>, bool) = self.conn.rows_warned(&sql, params)?;
        let found = rows.len();
        let stopped = warned && i64::try_from(found).unwrap_or(i64::MAX) < self.page;
        if found == 0 && stopped {
            return Ok(Step::Sparse);
        }
        if !self.spend(1) {
            return Ok(Step::GaveUp);
        }
        if self.offer(rows)? {
            return Ok(Step::Done);
        }
        if stopped {
            return Ok(Step::Sparse);
        }
        Ok(self.after_page(found))
    }

    /// One page through candidate ids (merged ranges or sorted), then the
    /// rows of those ids.
    fn by_candidates(&mut self, shape: Shape) -> Result<Step> {
        if !self.spend(2) {
            return Ok(Step::GaveUp);
        }
        let table = self.query.table.as_str();
        let ids: Vec<String> = if shape == Shape::Merge {
            let params: Vec<Value> = self
                .values
                .iter()
                .flat_map(|v| {
                    range_params(
                        self.partition,
                        table,
                        self.variable,
                        v,
                        &self.cursor,
                        self.page,
                    )
                })
                .collect();
            let mut ids: Vec<String> = self
                .conn
                .rows(&multi_value_candidates_sql(self.values.len()), params)?;
            ids.sort_unstable();
            ids.dedup();
            ids.truncate(usize::try_from(self.page).unwrap_or(usize::MAX));
            ids
        } else {
            let mut params: Vec<Value> =
                vec![self.partition.into(), table.into(), self.variable.into()];
            params.extend(self.values.iter().map(|v| Value::from(v.as_str())));
            params.extend([Value::from(self.cursor.as_str()), Value::Int(self.page)]);
            self.conn
                .rows(&sorted_candidates_sql(self.values.len()), params)?
        };
        let found = ids.len();
        if ids.is_empty() {
            return Ok(Step::Done);
        }
        let rows = self.rows_of(ids)?;
        if self.offer(rows)? {
            return Ok(Step::Done);
        }
        Ok(self.after_page(found))
    }

    /// The rows of `ids` (in the same order; `None` columns for a row that
    /// is gone).
    fn rows_of(&mut self, ids: Vec<String>) -> Result<Vec<ScanRow>> {
        let mut params: Vec<Value> = vec![self.partition.into()];
        params.extend(ids.iter().map(|id| Value::from(id.as_str())));
        let found: Vec<(String, i64, String, Vec<u8>)> = self
            .conn
            .rows(&rows_by_id_sql(&self.table.quoted, ids.len()), params)?;
        let mut found: HashMap<String, (i64, String, Vec<u8>)> = found
            .into_iter()
            .map(|(id, version, scopes, payload)| (id, (version, scopes, payload)))
            .collect();
        Ok(ids
            .into_iter()
            .map(|id| match found.remove(&id) {
                Some((version, scopes, payload)) => {
                    (id, Some(version), Some(scopes), Some(payload))
                }
                None => (id, None, None, None),
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::walk_budget;

    #[test]
    fn the_walk_budget_is_four_dense_pages() {
        assert_eq!(walk_budget(500, 1), 4_000);
        assert_eq!(walk_budget(500, 3), 8_000);
        assert_eq!(
            walk_budget(64, 0),
            512,
            "a table without variables counts one"
        );
        assert_eq!(walk_budget(i64::MAX, 2), i64::MAX);
    }
}
