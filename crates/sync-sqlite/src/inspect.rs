//! Operator reads that need no ensured schema **(decision: added for the
//! operator tool)**: whole commits with every change (`read_commits`), the
//! rows of a table named in the stored layouts (`inspect_table_rows`), and
//! read-only introspection of application tables for plan previews
//! ([`sync_schema::ObserveTables`] of [`crate::SqliteStorage`]).

use rusqlite::Connection;
use sync_core::{ChangeOp, CommitRecord, Error, Result, StoredChange, StoredRow};
use sync_schema::ObservedTables;

use crate::ensure::read_marker;
use crate::errors::DbResultExt;
use crate::introspect;
use crate::rows::{build_row, stored_row_from};
use crate::seam;
use crate::sql::quote;
use crate::values::{parse_scopes, to_i32};

const COMMITS_PAGE: &str =
    "SELECT commit_seq, client_id, client_commit_id, actor_id, created_at_ms, writer_version \
     FROM sync_commits WHERE partition = ?1 AND commit_seq > ?2 ORDER BY commit_seq LIMIT CAST(?3 AS INTEGER)";

const CHANGES_OF_PAGE: &str = "SELECT commit_seq, tbl, row_id, op, row_version, scopes, payload \
     FROM sync_changes WHERE partition = ?1 AND commit_seq > ?2 AND commit_seq <= ?3 \
     ORDER BY commit_seq, idx";

/// Retained commits above `after_seq`, oldest first, each with every change
/// in index order. Runs inside one read snapshot.
pub(crate) fn read_commits(
    conn: &Connection,
    partition: &str,
    after_seq: i64,
    limit: i64,
) -> Result<Vec<CommitRecord>> {
    type Head = (i64, String, String, String, i64, Option<i64>);
    let heads: Vec<Head> = seam::cached(conn, COMMITS_PAGE)
        .db()?
        .query_map((partition, after_seq, limit), |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
            ))
        })
        .db()?
        .collect::<rusqlite::Result<_>>()
        .db()?;
    let Some(last) = heads.last().map(|h| h.0) else {
        return Ok(Vec::new());
    };
    let mut commits = heads
        .into_iter()
        .map(
            |(commit_seq, client_id, client_commit_id, actor_id, created_at_ms, writer)| {
                Ok(CommitRecord {
                    commit_seq,
                    client_id,
                    client_commit_id,
                    actor_id,
                    created_at_ms,
                    writer_version: writer.map(to_i32).transpose()?,
                    changes: Vec::new(),
                })
            },
        )
        .collect::<Result<Vec<_>>>()?;
    type Raw = (
        i64,
        String,
        String,
        i64,
        Option<i64>,
        String,
        Option<Vec<u8>>,
    );
    let changes: Vec<Raw> = seam::cached(conn, CHANGES_OF_PAGE)
        .db()?
        .query_map((partition, after_seq, last), |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
                r.get(6)?,
            ))
        })
        .db()?
        .collect::<rusqlite::Result<_>>()
        .db()?;
    let mut slot = 0;
    for (commit_seq, table, row_id, op, row_version, scopes, payload) in changes {
        while commits.get(slot).is_some_and(|c| c.commit_seq < commit_seq) {
            slot += 1;
        }
        if let Some(commit) = commits.get_mut(slot).filter(|c| c.commit_seq == commit_seq) {
            commit.changes.push(StoredChange {
                table,
                row_id,
                op: ChangeOp::from_stored(op),
                row_version,
                scopes: parse_scopes(&scopes)?,
                payload,
            });
        }
    }
    Ok(commits)
}

/// Keyset scan of a table named in the stored layouts (other names →
/// `sync.storage.unknown_table`), rows with `row_id > after`, byte order.
pub(crate) fn inspect_rows(
    conn: &Connection,
    partition: &str,
    table: &str,
    after: Option<&str>,
    limit: i64,
) -> Result<Vec<StoredRow>> {
    let layouts = read_marker(conn)?.and_then(|m| m.layouts);
    let stored = sync_schema::parse_layouts(layouts.as_deref())?;
    if stored.get(table).is_none() {
        return Err(Error::unknown_table(table));
    }
    let sql = format!(
        "SELECT \"_sync_row_id\", \"_sync_server_version\", \"_sync_scopes\", \"_sync_payload\" FROM {} \
         WHERE \"_sync_partition\" = ?1 AND \"_sync_row_id\" > ?2 ORDER BY \"_sync_row_id\" LIMIT CAST(?3 AS INTEGER)",
        quote(table)
    );
    let raw: Vec<_> = seam::uncached(conn, &sql)
        .db()?
        .query_map((partition, after.unwrap_or(""), limit), |r| {
            stored_row_from(r, 0)
        })
        .db()?
        .collect::<rusqlite::Result<_>>()
        .db()?;
    raw.into_iter().map(build_row).collect()
}

/// Observed state of the named tables, in one read snapshot.
pub(crate) fn observe_tables(conn: &Connection, tables: &[String]) -> Result<ObservedTables> {
    tables
        .iter()
        .map(|t| introspect::observe(conn, t))
        .collect()
}

/// Rows of the table, all partitions; 0 when no such table exists (SQLite
/// table names match case-insensitively). The name is bound to find the
/// table and only then quoted into the count.
pub(crate) fn count_table_rows(conn: &Connection, table: &str) -> Result<u64> {
    let exists: bool = conn
        .query_row(
            "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' \
             AND name = ?1 COLLATE NOCASE)",
            [table],
            |row| row.get(0),
        )
        .db()?;
    if !exists {
        return Ok(0);
    }
    let count: i64 = conn
        .query_row(
            &format!("SELECT COUNT(*) FROM {}", quote(table)),
            [],
            |row| row.get(0),
        )
        .db()?;
    Ok(u64::try_from(count).unwrap_or(0))
}
