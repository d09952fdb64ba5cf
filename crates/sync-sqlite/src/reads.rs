//! Scope-indexed reads, trusted index lookups and partition scans
//! (`storage-contract.md` §4.7–§4.8, `dialects.md` §7). Every page is one
//! statement: a candidate subquery on an inverted index, `LEFT JOIN`ed to
//! the data so vanished candidates still advance the cursor.

use std::sync::Arc;

use rusqlite::{Connection, ToSql};
use sync_core::front::IndexLookup;
use sync_core::front::{Handle, IndexScanBackend, Partition};
use sync_core::limits::MIN_CANDIDATE_PAGE;
use sync_core::{
    candidate_variable, ChangeOp, CommitWindowQuery, Error, FilterMatcher, Result, RowScanQuery,
    ScanOutput, ScopeFilter, StoredChange, StoredCommit, StoredRow,
};

use crate::errors::DbResultExt;
use crate::rows::{build_row, stored_row_from};
use crate::seam;
use crate::sql::{placeholders, quote};
use crate::state::{Ensured, TableSql};
use crate::values::{parse_scopes, BindRow};
use crate::SqliteStorage;

/// Above this many values, a candidate query binds the value list as one
/// JSON array read through `json_each`: SQLite refuses statements with more
/// than 32 766 parameters, and a scope filter has no size limit.
pub(crate) const MAX_BOUND_VALUES: usize = 30_000;

/// The value list of a candidate query from parameter `first` on: one
/// parameter per value, or one JSON array above [`MAX_BOUND_VALUES`].
fn value_list_sql(first: usize, values: usize) -> String {
    if values > MAX_BOUND_VALUES {
        format!("SELECT value FROM json_each(?{first})")
    } else {
        placeholders(first, values)
    }
}

/// The parameters of [`value_list_sql`]; `json` holds the array text.
fn bind_values<'v>(values: &'v [String], json: &'v mut String) -> Result<Vec<&'v dyn ToSql>> {
    if values.len() > MAX_BOUND_VALUES {
        *json = serde_json::to_string(values).map_err(Error::backend)?;
        return Ok(vec![json as &dyn ToSql]);
    }
    Ok(values.iter().map(|v| v as &dyn ToSql).collect())
}

/// Most values a commit-window candidate query merges range by range (see
/// [`window_candidates_sql`]); larger lists use the `IN` form. Well below
/// SQLite's limit of 500 terms in one compound `SELECT`.
pub const MERGED_WINDOW_VALUES: usize = 128;

/// Candidate page of a commit window: distinct `commit_seq` from the
/// change-scope primary key. Parameters: partition, table, variable, after,
/// through, page size, then one per value (or one JSON array of them).
///
/// For one value, or more than [`MERGED_WINDOW_VALUES`], this is the shape
/// of `dialects.md` §7 (`value IN (…)`): SQLite collects every matching
/// entry above the cursor before it can sort and cut the page, so a page
/// costs time in proportion to the log left above the cursor. For 2 to
/// [`MERGED_WINDOW_VALUES`] values it is a compound `UNION` of one
/// primary-key range per value with `ORDER BY … LIMIT`, which SQLite runs as
/// a merge of the ordered ranges that stops at the page size: a page costs
/// the same at any log size. Both return the same rows (`docs/decisions.md`).
pub fn window_candidates_sql(values: usize) -> String {
    if (2..=MERGED_WINDOW_VALUES).contains(&values) {
        return merged_candidates(
            "commit_seq",
            "sync_change_scopes",
            "commit_seq > ?4 AND commit_seq <= ?5",
            7,
            values,
            "CAST(?6 AS INTEGER)",
        );
    }
    format!(
        "SELECT DISTINCT commit_seq FROM sync_change_scopes \
         WHERE partition = ?1 AND tbl = ?2 AND var = ?3 AND value IN ({}) \
         AND commit_seq > ?4 AND commit_seq <= ?5 ORDER BY commit_seq LIMIT CAST(?6 AS INTEGER)",
        value_list_sql(7, values)
    )
}

/// A compound `SELECT` of one primary-key range of `index` per value
/// (value parameters from `?first` on), `UNION`ed and cut at `limit`:
/// SQLite runs it as a merge of the ordered ranges (`MERGE (UNION)`) that
/// stops at the page size, so a page costs the same at any index size.
/// Parameters 1–3 are the partition, table and variable.
fn merged_candidates(
    column: &str,
    index: &str,
    range: &str,
    first: usize,
    values: usize,
    limit: &str,
) -> String {
    let arms: Vec<String> = (first..first + values)
        .map(|param| {
            format!(
                "SELECT {column} FROM {index} \
                 WHERE partition = ?1 AND tbl = ?2 AND var = ?3 AND value = ?{param} AND {range}"
            )
        })
        .collect();
    format!("{} ORDER BY 1 LIMIT {limit}", arms.join(" UNION "))
}

/// One window page: candidates joined to their commit header and their
/// changes of the table, in `(commit_seq, idx)` order.
pub fn window_page_sql(values: usize) -> String {
    format!(
        "SELECT c.commit_seq, m.commit_seq IS NOT NULL, m.created_at_ms, m.actor_id, \
         ch.idx, ch.row_id, ch.op, ch.row_version, ch.scopes, ch.payload \
         FROM ({}) AS c \
         LEFT JOIN sync_commits AS m ON m.partition = ?1 AND m.commit_seq = c.commit_seq \
         LEFT JOIN sync_changes AS ch ON ch.partition = ?1 AND ch.commit_seq = c.commit_seq AND ch.tbl = ?2 \
         ORDER BY c.commit_seq, ch.idx",
        window_candidates_sql(values)
    )
}

/// Most values a row-scan candidate query serves with the walk and merged
/// ranges of [`scan_candidates_sql`]; larger lists use the `IN` form.
pub const MERGED_SCAN_VALUES: usize = 128;

/// Rows after the cursor a many-value scan page reads first, in row-id
/// order, to judge whether the filter matches densely there.
pub const SCAN_PROBE_ROWS: usize = 64;

/// Matches among the [`SCAN_PROBE_ROWS`] that make a many-value scan page
/// walk the table in row-id order (a quarter of them).
pub const SCAN_DENSE_MATCHES: usize = 16;

/// Candidate page of a row scan of the table `quoted_table`: distinct row
/// ids in order. Parameters: partition, table, variable, after, page size,
/// then one per value (or one JSON array of them).
///
/// For one value, or more than [`MERGED_SCAN_VALUES`], this is the shape of
/// `dialects.md` §7 (`value IN (…)`; one value is one ordered range). For 2
/// to [`MERGED_SCAN_VALUES`] values, the `IN` form collects every entry
/// above the cursor of every value and sorts them on every page, so the
/// page is instead served in two bounded parts (`docs/decisions.md`):
///
/// - **a walk of the table in row-id order** when the filter matches
///   densely after the cursor — at least [`SCAN_DENSE_MATCHES`] of the next
///   [`SCAN_PROBE_ROWS`] rows: the next page-size rows of the primary key,
///   each tested against the row's stored scope map (exactly the row's index
///   entries; see `scan_match_sql`);
/// - **one primary-key range of `sync_row_scopes` per value, merged**
///   (`MERGE (UNION)`, stopping at the page size) above the last walked row,
///   only when the walk found fewer matches than the page size — or, when
///   the probe found the filter sparse, from the cursor.
///
/// Either part reads at most a page (plus the probe) whatever the table's
/// size; a dense filter streams the table instead of merging a hundred
/// ranges. The rows are the pinned shape's: the walk's matches all lie at
/// or below its last row and the ranges' above it.
pub fn scan_candidates_sql(quoted_table: &str, values: usize) -> String {
    if (2..=MERGED_SCAN_VALUES).contains(&values) {
        return walk_or_merge_candidates(quoted_table, values);
    }
    format!(
        "SELECT DISTINCT row_id FROM sync_row_scopes \
         WHERE partition = ?1 AND tbl = ?2 AND var = ?3 AND value IN ({}) \
         AND row_id > ?4 ORDER BY row_id LIMIT CAST(?5 AS INTEGER)",
        value_list_sql(6, values)
    )
}

/// Whether the variable `?3` can be named as a JSON path label: ASCII
/// letters, digits and `_`, not starting with a digit (a constant of the
/// statement, evaluated once).
const PLAIN_VARIABLE: &str =
    "(?3 <> '' AND ?3 NOT GLOB '*[^A-Za-z0-9_]*' AND ?3 NOT GLOB '[0-9]*')";

/// Whether row `t` of the scanned table has an index entry for variable
/// `?3` with one of the values `?6…`: read from its stored scope map, whose
/// `json_each` pairs are exactly the entries the storage wrote
/// (`INSERT_ROW_SCOPES`; the text of a non-text value as SQLite's text
/// affinity stores it). A variable that is a plain label is read with one
/// `->>` lookup, the same value as its `json_each` pair (a map written by
/// the storage has each key once), at about half the cost per row; any
/// other name walks the pairs. A map that is not a JSON object asks the
/// index.
fn scan_match_sql(values: usize) -> String {
    let list = placeholders(6, values);
    format!(
        "CASE WHEN json_valid(t.\"_sync_scopes\") AND json_type(t.\"_sync_scopes\") = 'object' \
         THEN CASE WHEN {PLAIN_VARIABLE} \
           THEN CAST(t.\"_sync_scopes\" ->> ?3 AS TEXT) IN ({list}) \
           ELSE EXISTS (SELECT 1 FROM json_each(t.\"_sync_scopes\") AS j \
             WHERE j.key = ?3 AND CAST(j.value AS TEXT) IN ({list})) END \
         ELSE EXISTS (SELECT 1 FROM sync_row_scopes AS e WHERE e.partition = ?1 AND e.tbl = ?2 \
           AND e.var = ?3 AND e.value IN ({list}) AND e.row_id = t.\"_sync_row_id\") END"
    )
}

/// The two-part candidates of [`scan_candidates_sql`] for 2 to
/// [`MERGED_SCAN_VALUES`] values. `probe` decides whether to walk (as the
/// walk's `LIMIT`: the same test as a `WHERE` term made SQLite evaluate
/// the probe far more often, about 25 times slower a page); `w`
/// holds the walked rows and whether each matches; `hi` the last walked row
/// (the cursor when nothing was walked) and the matches; the merged ranges
/// run only while the matches fall short of the page.
fn walk_or_merge_candidates(quoted_table: &str, values: usize) -> String {
    let test = scan_match_sql(values);
    let ranges = merged_candidates(
        "row_id",
        "sync_row_scopes",
        "row_id > (SELECT v FROM hi) AND (SELECT n < ?5 FROM hi)",
        6,
        values,
        "?5 - (SELECT n FROM hi)",
    );
    format!(
        "WITH probe AS MATERIALIZED (SELECT coalesce(sum(q.hit), 0) >= {SCAN_DENSE_MATCHES} AS dense \
           FROM (SELECT {test} AS hit FROM {quoted_table} AS t \
             WHERE t.\"_sync_partition\" = ?1 AND t.\"_sync_row_id\" > ?4 \
             ORDER BY t.\"_sync_row_id\" LIMIT {SCAN_PROBE_ROWS}) AS q), \
         w AS MATERIALIZED (SELECT t.\"_sync_row_id\" AS row_id, {test} AS hit FROM {quoted_table} AS t \
           WHERE t.\"_sync_partition\" = ?1 AND t.\"_sync_row_id\" > ?4 \
           ORDER BY t.\"_sync_row_id\" LIMIT (SELECT CASE WHEN dense THEN ?5 ELSE 0 END FROM probe)), \
         hi AS MATERIALIZED (SELECT coalesce(max(row_id), ?4) AS v, coalesce(sum(hit), 0) AS n FROM w) \
         SELECT row_id FROM w WHERE hit \
         UNION ALL SELECT m.row_id FROM ({ranges}) AS m"
    )
}

/// One scan page: candidates joined to the application table.
pub fn scan_page_sql(quoted_table: &str, values: usize) -> String {
    format!(
        "SELECT c.row_id, t.\"_sync_row_id\" IS NOT NULL, t.\"_sync_server_version\", t.\"_sync_scopes\", t.\"_sync_payload\" \
         FROM ({}) AS c \
         LEFT JOIN {quoted_table} AS t ON t.\"_sync_partition\" = ?1 AND t.\"_sync_row_id\" = c.row_id \
         ORDER BY c.row_id",
        scan_candidates_sql(quoted_table, values)
    )
}

/// Newest `commit_seq` of one scope value (one primary-key probe).
const LATEST_SCOPED_SEQ: &str = "SELECT commit_seq FROM sync_change_scopes \
WHERE partition = ?1 AND tbl = ?2 AND var = ?3 AND value = ?4 ORDER BY commit_seq DESC LIMIT 1";

fn page_size(limit: i64) -> i64 {
    limit.max(MIN_CANDIDATE_PAGE)
}

/// Candidate variable and its values, `None` when the window/scan is empty by definition.
fn candidate(filter: &ScopeFilter) -> Option<(&str, &[String])> {
    let variable = candidate_variable(filter)?;
    let values = filter.get(variable)?;
    (!values.is_empty()).then_some((variable, values.as_slice()))
}

type WindowRow = (
    i64,
    bool,
    Option<i64>,
    Option<String>,
    Option<i64>,
    Option<String>,
    Option<i64>,
    Option<i64>,
    Option<String>,
    Option<Vec<u8>>,
);

/// Pages through a window the front checked (a candidate with values, a
/// positive limit, `through_seq > after_seq`).
pub(crate) fn commit_window(
    conn: &Connection,
    partition: &str,
    query: &CommitWindowQuery,
) -> Result<Vec<StoredCommit>> {
    let Some((variable, values)) = candidate(&query.scope_filter) else {
        return Ok(Vec::new());
    };
    let page = page_size(query.limit_changes);
    let sql = window_page_sql(values.len());
    let mut stmt = seam::cached(conn, &sql).db()?;
    let mut out = Vec::new();
    let mut matched = 0i64;
    let mut cursor = query.after_seq;
    let matcher = FilterMatcher::new(&query.scope_filter);
    let mut json = String::new();
    let bound = bind_values(values, &mut json)?;
    loop {
        let mut params: Vec<&dyn ToSql> = vec![
            &partition,
            &query.table,
            &variable,
            &cursor,
            &query.through_seq,
            &page,
        ];
        params.extend(bound.iter().copied());
        let rows: Vec<WindowRow> = stmt
            .query_map(params.as_slice(), |r| {
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    r.get(5)?,
                    r.get(6)?,
                    r.get(7)?,
                    r.get(8)?,
                    r.get(9)?,
                ))
            })
            .db()?
            .collect::<rusqlite::Result<_>>()
            .db()?;
        let mut candidates = 0i64;
        let mut rows = rows.into_iter().peekable();
        while let Some(first) = rows.next() {
            let seq = first.0;
            candidates += 1;
            cursor = seq;
            let mut group = vec![first];
            while rows.peek().is_some_and(|r| r.0 == seq) {
                group.extend(rows.next());
            }
            if let Some(commit) = build_commit(&query.table, &matcher, group)? {
                matched += commit.changes.len() as i64;
                out.push(commit);
                if matched >= query.limit_changes {
                    return Ok(out);
                }
            }
        }
        if candidates < page {
            return Ok(out);
        }
    }
}

/// One candidate's rows → the commit with its matching changes, or `None`.
fn build_commit(
    table: &str,
    filter: &FilterMatcher<'_>,
    group: Vec<WindowRow>,
) -> Result<Option<StoredCommit>> {
    let Some(head) = group.first() else {
        return Ok(None);
    };
    let (commit_seq, exists, created_at_ms, actor_id) = (head.0, head.1, head.2, head.3.clone());
    if !exists {
        return Ok(None);
    }
    let mut changes = Vec::new();
    for row in group {
        let (Some(_idx), Some(row_id), Some(op), Some(scopes)) = (row.4, row.5, row.6, row.8)
        else {
            continue;
        };
        let scopes = parse_scopes(&scopes)?;
        if !filter.matches(&scopes) {
            continue;
        }
        changes.push(StoredChange {
            table: table.to_owned(),
            row_id,
            op: ChangeOp::from_stored(op),
            row_version: row.7,
            scopes,
            payload: row.9,
        });
    }
    if changes.is_empty() {
        return Ok(None);
    }
    Ok(Some(StoredCommit {
        commit_seq,
        created_at_ms: created_at_ms.unwrap_or(0),
        actor_id: actor_id.unwrap_or_default(),
        changes,
    }))
}

/// Newest matching `commit_seq`: one index probe per value.
pub(crate) fn latest_scoped_seq(
    conn: &Connection,
    partition: &str,
    table: &str,
    filter: &ScopeFilter,
) -> Result<i64> {
    let Some((variable, values)) = candidate(filter) else {
        return Ok(0);
    };
    let mut stmt = conn.prepare_cached(LATEST_SCOPED_SEQ).db()?;
    let mut latest = 0;
    for value in values {
        seam::check(conn, LATEST_SCOPED_SEQ).db()?;
        let mut rows = stmt.query((partition, table, variable, value)).db()?;
        if let Some(row) = rows.next().db()? {
            latest = latest.max(row.get::<_, i64>(0).db()?);
        }
    }
    Ok(latest)
}

/// Pages through scope candidates, verifying each against the full filter;
/// `R` is what a kept candidate becomes (a [`StoredRow`] for `scan_rows`,
/// a [`sync_core::ScannedRow`] for `scan_row_payloads`).
pub(crate) fn scan_rows<R: ScanOutput>(
    conn: &Connection,
    table: &TableSql,
    partition: &str,
    query: &RowScanQuery,
) -> Result<Vec<R>> {
    let Some((variable, values)) = candidate(&query.scope_filter) else {
        return Ok(Vec::new());
    };
    let page = page_size(query.limit);
    let limit = usize::try_from(query.limit).unwrap_or(usize::MAX);
    let sql = scan_page_sql(&table.quoted, values.len());
    let mut stmt = seam::cached(conn, &sql).db()?;
    let mut out = Vec::new();
    let mut cursor = query.after_row_id.clone().unwrap_or_default();
    let matcher = FilterMatcher::new(&query.scope_filter);
    let mut json = String::new();
    let bound = bind_values(values, &mut json)?;
    // The row id of the page's last candidate, kept or not: the next
    // page's cursor (a buffer reused from row to row).
    let mut last = String::new();
    loop {
        let mut params: Vec<&dyn ToSql> = vec![&partition, &query.table, &variable, &cursor, &page];
        params.extend(bound.iter().copied());
        // Rows are read as the statement steps: no page of owned tuples
        // first, and the row id and scopes text are read where SQLite
        // holds them.
        let mut rows = stmt.query(params.as_slice()).db()?;
        let mut candidates = 0i64;
        while let Some(r) = rows.next().db()? {
            candidates += 1;
            let Some(row_id) = text_or_null(r, 0)? else {
                return Err(Error::backend("a scan candidate without a row id"));
            };
            last.clear();
            last.push_str(row_id);
            let (true, Some(version), Some(scopes), Some(payload)) = (
                r.get::<_, bool>(1).db()?,
                r.get::<_, Option<i64>>(2).db()?,
                text_or_null(r, 3)?,
                r.get::<_, Option<Vec<u8>>>(4).db()?,
            ) else {
                continue;
            };
            let Some(row) = R::verified(&matcher, row_id, version, scopes, payload, parse_scopes)?
            else {
                continue;
            };
            out.push(row);
            if out.len() >= limit {
                return Ok(out);
            }
        }
        drop(rows);
        if candidates < page {
            return Ok(out);
        }
        std::mem::swap(&mut cursor, &mut last);
    }
}

/// A text column borrowed from the row (`None` for SQL `NULL`).
fn text_or_null<'r>(row: &'r rusqlite::Row<'_>, index: usize) -> Result<Option<&'r str>> {
    row.get_ref(index)
        .db()?
        .as_str_or_null()
        .map_err(|e| {
            rusqlite::Error::FromSqlConversionFailure(
                index,
                rusqlite::types::Type::Text,
                Box::new(e),
            )
        })
        .db()
}

/// The lookup statement: exact equality (`IS NULL` where `nulls[i]`) on
/// every index column, keyset on the row id. Parameters: partition, after,
/// limit, then the non-null values in column order.
pub fn index_lookup_sql(quoted_table: &str, columns: &[String], nulls: &[bool]) -> String {
    let mut next = 4;
    let mut conditions = String::new();
    for (column, is_null) in columns.iter().zip(nulls) {
        if *is_null {
            conditions.push_str(&format!(" AND {} IS NULL", quote(column)));
        } else {
            conditions.push_str(&format!(" AND {} = ?{next}", quote(column)));
            next += 1;
        }
    }
    format!(
        "SELECT \"_sync_row_id\", \"_sync_server_version\", \"_sync_scopes\", \"_sync_payload\" FROM {quoted_table} \
         WHERE \"_sync_partition\" = ?1{conditions} AND \"_sync_row_id\" > ?2 ORDER BY \"_sync_row_id\" LIMIT CAST(?3 AS INTEGER)"
    )
}

/// Runs a lookup the front checked.
pub(crate) fn index_scan(
    conn: &Connection,
    partition: &str,
    lookup: IndexLookup<'_, Arc<TableSql>>,
) -> Result<Vec<StoredRow>> {
    let rows = IndexRows {
        columns: &lookup.index().columns,
        values: lookup.values(),
        after: lookup.after_row_id(),
        limit: lookup.limit(),
    };
    index_rows(conn, lookup.table().handle(), partition, &rows)
}

/// What an index lookup reads: equality on `columns`, keyset after `after`.
struct IndexRows<'a> {
    columns: &'a [String],
    values: &'a [sync_core::RowValue],
    after: Option<&'a str>,
    limit: i64,
}

fn index_rows(
    conn: &Connection,
    table: &TableSql,
    partition: &str,
    rows: &IndexRows<'_>,
) -> Result<Vec<StoredRow>> {
    let nulls: Vec<bool> = rows.values.iter().map(|v| v.is_null()).collect();
    let sql = index_lookup_sql(&table.quoted, rows.columns, &nulls);
    let after = rows.after.unwrap_or_default();
    let binds: Vec<BindRow<'_>> = rows
        .values
        .iter()
        .filter(|v| !v.is_null())
        .map(BindRow)
        .collect();
    let mut params: Vec<&dyn ToSql> = vec![&partition, &after, &rows.limit];
    params.extend(binds.iter().map(|b| b as &dyn ToSql));
    collect_rows(conn, &sql, params.as_slice())
}

/// Keyset scan of every row of one table in one partition.
pub(crate) fn partition_scan(
    conn: &Connection,
    table: &TableSql,
    partition: &str,
    after: Option<&str>,
    limit: i64,
) -> Result<Vec<StoredRow>> {
    collect_rows(
        conn,
        &table.partition_scan,
        &[&partition, &after.unwrap_or(""), &limit],
    )
}

fn collect_rows(conn: &Connection, sql: &str, params: &[&dyn ToSql]) -> Result<Vec<StoredRow>> {
    let mut stmt = seam::cached(conn, sql).db()?;
    let raw: Vec<_> = stmt
        .query_map(params, |r| stored_row_from(r, 0))
        .db()?
        .collect::<rusqlite::Result<_>>()
        .db()?;
    raw.into_iter().map(build_row).collect()
}

impl IndexScanBackend<Ensured> for SqliteStorage {
    fn scan_rows_by_index(
        &self,
        p: Partition<'_>,
        lookup: IndexLookup<'_, Handle<Self>>,
    ) -> Result<Vec<StoredRow>> {
        self.pools().read(|conn| index_scan(conn, &p, lookup))
    }
}
