//! Scoped reads: the serve gate, row scans through the scope index, the
//! commit window and the newest scoped change (`docs/design/mariadb.md`
//! §13, `dialects.md` §7). Each is one statement per page, so it reads one
//! consistent snapshot in autocommit.

use std::collections::BTreeMap;

use mysql::Value;
use sync_core::limits::MIN_CANDIDATE_PAGE;
use sync_core::{
    candidate_variable, matches_filter, ChangeOp, CommitWindowQuery, Result, RowScanQuery,
    ScopeFilter, ServeGate, StoredChange, StoredCommit, StoredRow,
};

use crate::ensured::TableSql;
use crate::gate::GateColumns;
use crate::pool::Conn;
use crate::values::parse_scopes;

/// The gate token: marker version (with an open migration's rule), the
/// partition's epoch and its pending checkpoint names at `running`.
pub(crate) fn serve_gate(conn: &mut Conn, partition: &str, running: i32) -> Result<ServeGate> {
    type Raw = (Option<i64>, Option<i64>, Option<String>, Option<String>);
    let raw: Option<Raw> = conn.first(
        "SELECT (SELECT `schema_version` FROM `sync_schema_meta` WHERE `id` = 1), \
         (SELECT `migrating_to` FROM `sync_schema_meta` WHERE `id` = 1), \
         (SELECT `log_epoch` FROM `sync_partition_registry` WHERE `partition` = ?), \
         (SELECT JSON_ARRAYAGG(CAST(`name` AS CHAR)) FROM `sync_backfill_checkpoints` \
          WHERE `partition` = ? AND `schema_version` = ? AND `state` <> 'activated')",
        (partition, partition, running),
    )?;
    let (stored, migrating_to, log_epoch, pending) = raw.unwrap_or_default();
    let columns = GateColumns {
        stored,
        migrating_to,
        log_epoch,
        pending,
    };
    crate::gate::decode(partition, columns, running)
}

fn candidate(filter: &ScopeFilter) -> Option<(&str, &[String])> {
    let variable = candidate_variable(filter)?;
    let values = filter.get(variable)?;
    (!values.is_empty()).then_some((variable, values.as_slice()))
}

fn value_marks(count: usize) -> String {
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

/// The candidates of a scan page of several values (`docs/design/mariadb.md`
/// §13): one primary-key range per value, each cut at the page size (the
/// first `page` distinct ids lie within the first `page` of every range),
/// as a `UNION ALL` without an outer `ORDER BY` — MariaDB streams it,
/// where an outer sort would materialize the union; the caller merges the
/// sorted runs. Parameters: [`range_params`] per value.
pub(crate) fn multi_value_candidates_sql(values: usize) -> String {
    let arm = "(SELECT `row_id` FROM `sync_row_scopes` \
               WHERE `partition` = ? AND `tbl` = ? AND `var` = ? AND `value` = ? \
               AND `row_id` > ? ORDER BY `row_id` LIMIT ?)";
    vec![arm; values].join(" UNION ALL ")
}

/// Most values a scan page reads range by range
/// ([`multi_value_candidates_sql`]); a longer list takes the candidates
/// of [`sorted_candidates_sql`], as Postgres and SQLite do above the same
/// count: a statement of thousands of ranges would bind six parameters
/// each, and MariaDB takes at most 65 535.
pub(crate) const MERGED_SCAN_VALUES: usize = 128;

/// The candidates of a scan page of more than [`MERGED_SCAN_VALUES`]
/// values: every entry of the values above the cursor, de-duplicated and
/// sorted by the server. Parameters: partition, table, variable, the
/// values, cursor, page size.
fn sorted_candidates_sql(values: usize) -> String {
    format!(
        "SELECT DISTINCT `row_id` FROM `sync_row_scopes` \
         WHERE `partition` = ? AND `tbl` = ? AND `var` = ? AND `value` IN ({}) \
         AND `row_id` > ? ORDER BY `row_id` LIMIT ?",
        value_marks(values)
    )
}

/// The rows of `count` row ids of the table, by primary key. Parameters:
/// partition, the ids.
fn rows_by_id_sql(quoted_table: &str, count: usize) -> String {
    format!(
        "SELECT `_sync_row_id`, `_sync_server_version`, `_sync_scopes`, `_sync_payload` \
         FROM {quoted_table} WHERE `_sync_partition` = ? AND `_sync_row_id` IN ({})",
        value_marks(count)
    )
}

type ScanRow = (String, Option<i64>, Option<String>, Option<Vec<u8>>);

/// One scan page: the first `page` row ids of the values after `cursor`,
/// in row-id order, each with its row (`None` columns for an entry whose
/// row is gone).
fn scan_page(
    conn: &mut Conn,
    table: &TableSql,
    partition: &str,
    query: &RowScanQuery,
    (variable, values): (&str, &[String]),
    cursor: &str,
    page: i64,
) -> Result<Vec<ScanRow>> {
    let tbl = query.table.as_str();
    if let [value] = values {
        let params = range_params(partition, tbl, variable, value, cursor, page);
        return conn.rows(&single_value_page_sql(&table.quoted), params.to_vec());
    }
    let ids: Vec<String> = if values.len() <= MERGED_SCAN_VALUES {
        let params: Vec<Value> = values
            .iter()
            .flat_map(|v| range_params(partition, tbl, variable, v, cursor, page))
            .collect();
        let mut ids: Vec<String> = conn.rows(&multi_value_candidates_sql(values.len()), params)?;
        ids.sort_unstable();
        ids.dedup();
        ids.truncate(usize::try_from(page).unwrap_or(usize::MAX));
        ids
    } else {
        let mut params: Vec<Value> = vec![partition.into(), tbl.into(), variable.into()];
        params.extend(values.iter().map(|v| Value::from(v.as_str())));
        params.extend([Value::from(cursor), Value::Int(page)]);
        conn.rows(&sorted_candidates_sql(values.len()), params)?
    };
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut params: Vec<Value> = vec![partition.into()];
    params.extend(ids.iter().map(|id| Value::from(id.as_str())));
    let found: Vec<(String, i64, String, Vec<u8>)> =
        conn.rows(&rows_by_id_sql(&table.quoted, ids.len()), params)?;
    let mut found: std::collections::HashMap<String, (i64, String, Vec<u8>)> = found
        .into_iter()
        .map(|(id, version, scopes, payload)| (id, (version, scopes, payload)))
        .collect();
    Ok(ids
        .into_iter()
        .map(|id| match found.remove(&id) {
            Some((version, scopes, payload)) => (id, Some(version), Some(scopes), Some(payload)),
            None => (id, None, None, None),
        })
        .collect())
}

/// One window page: candidate commits of one scope variable's values in
/// the window, joined to their headers and their changes of the table.
/// Parameters: partition, table, variable, the values, after, through, the
/// page size, partition, partition, table.
pub(crate) fn window_page_sql(values: usize) -> String {
    format!(
        "SELECT c.`commit_seq`, m.`created_at_ms`, m.`actor_id`, ch.`row_id`, ch.`op`, \
         ch.`row_version`, ch.`scopes`, ch.`payload` \
         FROM (SELECT DISTINCT `commit_seq` FROM `sync_change_scopes` \
               WHERE `partition` = ? AND `tbl` = ? AND `var` = ? AND `value` IN ({}) \
               AND `commit_seq` > ? AND `commit_seq` <= ? ORDER BY `commit_seq` LIMIT ?) AS c \
         LEFT JOIN `sync_commits` AS m ON m.`partition` = ? AND m.`commit_seq` = c.`commit_seq` \
         LEFT JOIN `sync_changes` AS ch ON ch.`partition` = ? AND ch.`commit_seq` = c.`commit_seq` \
           AND ch.`tbl` = ? \
         ORDER BY c.`commit_seq`, ch.`idx`",
        value_marks(values)
    )
}

/// Pages through scope candidates, verifying each row against the full filter.
pub(crate) fn scan_rows(
    conn: &mut Conn,
    table: &TableSql,
    partition: &str,
    query: &RowScanQuery,
) -> Result<Vec<StoredRow>> {
    let Some((variable, values)) = candidate(&query.scope_filter) else {
        return Ok(Vec::new());
    };
    let page = query.limit.max(MIN_CANDIDATE_PAGE);
    let limit = usize::try_from(query.limit).unwrap_or(usize::MAX);
    let mut out = Vec::new();
    let mut cursor = query.after_row_id.clone().unwrap_or_default();
    loop {
        let rows = scan_page(
            conn,
            table,
            partition,
            query,
            (variable, values),
            &cursor,
            page,
        )?;
        let candidates = rows.len() as i64;
        for (row_id, version, scopes, payload) in rows {
            cursor.clone_from(&row_id);
            let (Some(server_version), Some(scopes), Some(payload)) = (version, scopes, payload)
            else {
                continue;
            };
            let scopes = parse_scopes(&scopes)?;
            if !matches_filter(&scopes, &query.scope_filter) {
                continue;
            }
            out.push(StoredRow {
                row_id,
                server_version,
                scopes,
                payload,
                column_versions: None,
            });
            if out.len() >= limit {
                return Ok(out);
            }
        }
        if candidates < page {
            return Ok(out);
        }
    }
}

type WindowRow = (
    i64,
    Option<i64>,
    Option<String>,
    Option<String>,
    Option<i64>,
    Option<i64>,
    Option<String>,
    Option<Vec<u8>>,
);

/// Pages through the commits of the window whose changes of the table
/// match the filter, until `limit_changes` matching changes.
pub(crate) fn commit_window(
    conn: &mut Conn,
    partition: &str,
    query: &CommitWindowQuery,
) -> Result<Vec<StoredCommit>> {
    let Some((variable, values)) = candidate(&query.scope_filter) else {
        return Ok(Vec::new());
    };
    let page = query.limit_changes.max(MIN_CANDIDATE_PAGE);
    let sql = window_page_sql(values.len());
    let mut out = Vec::new();
    let mut matched = 0i64;
    let mut cursor = query.after_seq;
    loop {
        let mut params: Vec<Value> = vec![
            partition.into(),
            query.table.as_str().into(),
            variable.into(),
        ];
        params.extend(values.iter().map(|v| Value::from(v.as_str())));
        params.extend([
            Value::Int(cursor),
            Value::Int(query.through_seq),
            Value::Int(page),
            partition.into(),
            partition.into(),
            query.table.as_str().into(),
        ]);
        let rows: Vec<WindowRow> = conn.rows(&sql, params)?;
        let mut groups: BTreeMap<i64, Vec<WindowRow>> = BTreeMap::new();
        for row in rows {
            groups.entry(row.0).or_default().push(row);
        }
        let candidates = groups.len() as i64;
        for (seq, group) in groups {
            cursor = seq;
            if let Some(commit) = build_commit(&query.table, &query.scope_filter, group)? {
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

fn build_commit(
    table: &str,
    filter: &ScopeFilter,
    group: Vec<WindowRow>,
) -> Result<Option<StoredCommit>> {
    let Some(head) = group.first() else {
        return Ok(None);
    };
    let (commit_seq, Some(created_at_ms), Some(actor_id)) = (head.0, head.1, head.2.clone()) else {
        return Ok(None);
    };
    let mut changes = Vec::new();
    for (_, _, _, row_id, op, row_version, scopes, payload) in group {
        let (Some(row_id), Some(op), Some(scopes)) = (row_id, op, scopes) else {
            continue;
        };
        let scopes = parse_scopes(&scopes)?;
        if !matches_filter(&scopes, filter) {
            continue;
        }
        changes.push(StoredChange {
            table: table.to_owned(),
            row_id,
            op: ChangeOp::from_stored(op),
            row_version,
            scopes,
            payload,
        });
    }
    if changes.is_empty() {
        return Ok(None);
    }
    Ok(Some(StoredCommit {
        commit_seq,
        created_at_ms,
        actor_id,
        changes,
    }))
}

/// Newest `commit_seq` of any value of the filter's candidate variable.
pub(crate) fn latest_scoped_seq(
    conn: &mut Conn,
    partition: &str,
    table: &str,
    filter: &ScopeFilter,
) -> Result<i64> {
    let Some((variable, values)) = candidate(filter) else {
        return Ok(0);
    };
    let mut latest = 0;
    for value in values {
        let seq: Option<i64> = conn.first(
            "SELECT `commit_seq` FROM `sync_change_scopes` WHERE `partition` = ? AND `tbl` = ? \
             AND `var` = ? AND `value` = ? ORDER BY `commit_seq` DESC LIMIT 1",
            (partition, table, variable, value),
        )?;
        latest = latest.max(seq.unwrap_or(0));
    }
    Ok(latest)
}
