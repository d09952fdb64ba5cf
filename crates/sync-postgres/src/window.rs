//! Scope-indexed reads of the commit log (`storage-contract.md` §4.7,
//! `dialects.md` §7): commit windows and the latest scoped change.
//!
//! Candidates always come from the inverted index `sync_change_scopes`; each
//! page is one statement joining the candidate commits to their headers and
//! to the queried table's changes.

use std::sync::{LazyLock, OnceLock};

use postgres::Row;
use sync_core::limits::MIN_CANDIDATE_PAGE;
use sync_core::{
    candidate_variable, ChangeOp, CommitWindowQuery, FilterMatcher, Result, ScopeFilter,
    StoredChange, StoredCommit,
};

use crate::json::parse_scopes;
use crate::pool::{col, Conn};

/// Most values a window page merges range by range (see [`window_page_sql`]);
/// larger lists use the `= ANY` form.
pub const MERGED_WINDOW_VALUES: usize = 128;

/// The page query around a candidate subquery: each candidate's commit
/// header and its changes of the table, as `LEFT JOIN LATERAL` subqueries.
///
/// The `LIMIT 1` (a primary-key lookup returns at most one row anyway) and
/// the `ORDER BY ch.idx` keep the planner from flattening them into plain
/// joins, so each candidate costs one index probe per table whatever the
/// statistics say: on a table that was never analyzed, the plain joins were
/// planned as a sort of every commit of the partition and a materialized
/// scan of every change of the table per candidate (seconds per page at
/// 25 000 commits).
fn page_around(candidates: &str) -> String {
    format!(
        "SELECT c.commit_seq, m.created_at_ms, m.actor_id, \
           ch.idx, ch.row_id, ch.op, ch.row_version, ch.scopes, ch.payload \
         FROM ({candidates}) AS c \
         LEFT JOIN LATERAL (SELECT h.created_at_ms, h.actor_id FROM sync_commits h \
           WHERE h.partition = $1 AND h.commit_seq = c.commit_seq LIMIT 1) AS m ON true \
         LEFT JOIN LATERAL (SELECT x.idx, x.row_id, x.op, x.row_version, x.scopes::text AS scopes, x.payload \
           FROM sync_changes x WHERE x.partition = $1 AND x.commit_seq = c.commit_seq AND x.tbl = $2 \
           ORDER BY x.idx) AS ch ON true \
         ORDER BY c.commit_seq, ch.idx"
    )
}

/// One window page in the shape of `dialects.md` §7: `$1` partition, `$2`
/// table, `$3` variable, `$4` values, `$5` after seq, `$6` through seq,
/// `$7` candidate page size.
pub(crate) static WINDOW_PAGE_SQL: LazyLock<String> = LazyLock::new(|| {
    page_around(
        "SELECT DISTINCT s.commit_seq FROM sync_change_scopes s \
         WHERE s.partition = $1 AND s.tbl = $2 AND s.var = $3 AND s.value = ANY($4::text[]) \
           AND s.commit_seq > $5 AND s.commit_seq <= $6 \
         ORDER BY s.commit_seq LIMIT $7",
    )
});

/// Merged page texts by value count, built on first use.
static MERGED_PAGE_SQL: [OnceLock<String>; MERGED_WINDOW_VALUES + 1] =
    [const { OnceLock::new() }; MERGED_WINDOW_VALUES + 1];

/// The window page for `values` values, with the parameters of
/// `WINDOW_PAGE_SQL`.
///
/// For 2 to [`MERGED_WINDOW_VALUES`] values the candidates come from one
/// ordered primary-key range per value (`s.value = ($4)[k]`), combined by
/// `UNION ALL` and made distinct by `DISTINCT` — which Postgres runs as a
/// `Unique` over a `Merge Append` that stops after the page. The `= ANY` form of `dialects.md` §7 must instead collect
/// and sort every matching entry above the cursor, so its page time grows
/// with the log; this one does not. Both return the same candidates
/// (`docs/decisions.md`). One value, or more than [`MERGED_WINDOW_VALUES`],
/// use `WINDOW_PAGE_SQL`.
pub fn window_page_sql(values: usize) -> &'static str {
    match MERGED_PAGE_SQL.get(values) {
        Some(cell) if values >= 2 => cell.get_or_init(|| merged_page_sql(values)),
        _ => &WINDOW_PAGE_SQL,
    }
}

/// Each value's range is cut at the page size: the first `$7` distinct
/// sequences of the page come from the first `$7` of each value, so the
/// cut never changes the page, and it bounds what any plan reads.
///
/// Every limit is written `LIMIT (SELECT $7::int8)`, which no plan can
/// read while planning, so custom and generic plans alike see a page of
/// unknown size and stream it (`Limit` → `Unique` → `Merge Append`),
/// reading about the page plus one entry per value. With a bound `LIMIT
/// $7` a custom plan that saw the page size and each value's whole range
/// chose a `HashAggregate` of every range and a `Sort`; with a window
/// function (`lag()`) for distinctness instead of `DISTINCT`, the generic
/// plan sorted values × page entries (50 000 for 100 values, 85 ms a page
/// on an analyzed, unvacuumed index; `tests/window_plans.rs`).
fn merged_page_sql(values: usize) -> String {
    let arms: Vec<String> = (1..=values)
        .map(|k| {
            format!(
                "(SELECT s.commit_seq FROM sync_change_scopes s \
                  WHERE s.partition = $1 AND s.tbl = $2 AND s.var = $3 AND s.value = ($4::text[])[{k}] \
                    AND s.commit_seq > $5 AND s.commit_seq <= $6 ORDER BY s.commit_seq LIMIT (SELECT $7::int8))"
            )
        })
        .collect();
    page_around(&format!(
        "SELECT DISTINCT u.commit_seq FROM ({}) AS u \
         ORDER BY u.commit_seq LIMIT (SELECT $7::int8)",
        arms.join(" UNION ALL ")
    ))
}

/// Newest matching entry, one index probe per value.
const LATEST_SQL: &str = "SELECT coalesce(max(x.m), 0) FROM unnest($4::text[]) AS v(value), \
    LATERAL (SELECT max(s.commit_seq) AS m FROM sync_change_scopes s \
             WHERE s.partition = $1 AND s.tbl = $2 AND s.var = $3 AND s.value = v.value) AS x";

/// `read_commit_window` after validation (partition and table checked by the caller).
pub(crate) fn read_commit_window(
    conn: &mut Conn,
    partition: &str,
    q: &CommitWindowQuery,
) -> Result<Vec<StoredCommit>> {
    let Some(variable) = candidate_variable(&q.scope_filter) else {
        return Ok(Vec::new());
    };
    let values = q
        .scope_filter
        .get(variable)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    if values.is_empty() || q.limit_changes <= 0 || q.through_seq <= q.after_seq {
        return Ok(Vec::new());
    }
    let page = q.limit_changes.max(MIN_CANDIDATE_PAGE);
    let mut window = Window {
        filter: FilterMatcher::new(&q.scope_filter),
        table: &q.table,
        limit: q.limit_changes,
        matched: 0,
        commits: Vec::new(),
    };
    let mut cursor = q.after_seq;
    let sql = window_page_sql(values.len());
    loop {
        let rows = conn.query(
            sql,
            &[
                &partition,
                &q.table,
                &variable,
                &values,
                &cursor,
                &q.through_seq,
                &page,
            ],
        )?;
        let mut candidates = 0;
        let mut start = 0;
        while start < rows.len() {
            let seq: i64 = col(&rows[start], 0)?;
            let end = start
                + rows[start..]
                    .iter()
                    .take_while(|r| col::<i64>(r, 0).is_ok_and(|s| s == seq))
                    .count();
            candidates += 1;
            cursor = seq;
            if window.add(seq, &rows[start..end])? {
                return Ok(window.commits);
            }
            start = end;
        }
        if candidates < page {
            return Ok(window.commits);
        }
    }
}

struct Window<'q> {
    /// The query's filter, prepared for verifying changes.
    filter: FilterMatcher<'q>,
    table: &'q str,
    limit: i64,
    matched: i64,
    commits: Vec<StoredCommit>,
}

impl Window<'_> {
    /// Adds one candidate's rows; true when the limit is reached.
    fn add(&mut self, seq: i64, rows: &[Row]) -> Result<bool> {
        let Some(first) = rows.first() else {
            return Ok(false);
        };
        let created: Option<i64> = col(first, 1)?;
        let actor: Option<String> = col(first, 2)?;
        let (Some(created_at_ms), Some(actor_id)) = (created, actor) else {
            return Ok(false);
        };
        let mut changes = Vec::new();
        for row in rows {
            if let Some(change) = self.change(row)? {
                changes.push(change);
            }
        }
        if changes.is_empty() {
            return Ok(false);
        }
        self.matched += i64::try_from(changes.len()).unwrap_or(i64::MAX);
        self.commits.push(StoredCommit {
            commit_seq: seq,
            created_at_ms,
            actor_id,
            changes,
        });
        Ok(self.matched >= self.limit)
    }

    fn change(&self, row: &Row) -> Result<Option<StoredChange>> {
        let Some(row_id) = col::<Option<String>>(row, 4)? else {
            return Ok(None);
        };
        let scopes: &str = col(row, 7)?;
        let scopes = parse_scopes(scopes)?;
        if !self.filter.matches(&scopes) {
            return Ok(None);
        }
        let op: i16 = col(row, 5)?;
        Ok(Some(StoredChange {
            table: self.table.to_owned(),
            row_id,
            op: ChangeOp::from_stored(i64::from(op)),
            row_version: col(row, 6)?,
            scopes,
            payload: col(row, 8)?,
        }))
    }
}

/// `latest_scoped_change_seq` after validation.
pub(crate) fn latest_scoped_change_seq(
    conn: &mut Conn,
    partition: &str,
    table: &str,
    filter: &ScopeFilter,
) -> Result<i64> {
    let Some(variable) = candidate_variable(filter) else {
        return Ok(0);
    };
    let values = filter.get(variable).map(Vec::as_slice).unwrap_or(&[]);
    if values.is_empty() {
        return Ok(0);
    }
    let row = conn.query_one(LATEST_SQL, &[&partition, &table, &variable, &values])?;
    col(&row, 0)
}
