//! Operator reads that need no ensured schema **(decision: added for the
//! operator tool)**: whole commits with every change (`read_commits`), the
//! rows of a table named in the stored layouts (`inspect_table_rows`), and
//! read-only introspection for plan previews
//! ([`sync_schema::ObserveTables`] of [`PostgresStorage`]).
//!
//! Both reads run in one `REPEATABLE READ READ ONLY` snapshot. Row ids are
//! compared and ordered `COLLATE "C"` explicitly, so tables still carrying a
//! legacy default collation page in byte order too.

use sync_core::{ChangeOp, CommitRecord, Error, Result, StoredChange, StoredRow};
use sync_schema::ObservedTables;

use crate::instance::PostgresStorage;
use crate::introspect::{names_with_internal, observe};
use crate::json::parse_scopes;
use crate::pool::{col, Conn};
use crate::rows::rows_from;
use crate::sql::quote_ident;

/// `$1` partition, `$2` after seq, `$3` limit.
const COMMITS_PAGE_SQL: &str = "SELECT commit_seq::int8, client_id, client_commit_id, actor_id, \
      created_at_ms::int8, writer_version::int4 \
    FROM sync_commits WHERE partition = $1 AND commit_seq > $2 ORDER BY commit_seq LIMIT $3";

/// `$1` partition, `$2` after seq, `$3` last seq of the page.
const CHANGES_OF_PAGE_SQL: &str =
    "SELECT commit_seq::int8, tbl, row_id, op::int4, row_version::int8, \
      scopes::text, payload \
    FROM sync_changes WHERE partition = $1 AND commit_seq > $2 AND commit_seq <= $3 \
    ORDER BY commit_seq, idx";

/// Retained commits above `after_seq`, oldest first, each with every change
/// in index order.
pub(crate) fn read_commits(
    conn: &mut Conn,
    partition: &str,
    after_seq: i64,
    limit: i64,
) -> Result<Vec<CommitRecord>> {
    let heads = conn.query(COMMITS_PAGE_SQL, &[&partition, &after_seq, &limit])?;
    let mut commits = heads
        .iter()
        .map(|row| {
            Ok(CommitRecord {
                commit_seq: col(row, 0)?,
                client_id: col(row, 1)?,
                client_commit_id: col(row, 2)?,
                actor_id: col(row, 3)?,
                created_at_ms: col(row, 4)?,
                writer_version: col(row, 5)?,
                changes: Vec::new(),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let Some(last) = commits.last().map(|c| c.commit_seq) else {
        return Ok(commits);
    };
    let changes = conn.query(CHANGES_OF_PAGE_SQL, &[&partition, &after_seq, &last])?;
    let mut slot = 0;
    for row in &changes {
        let commit_seq: i64 = col(row, 0)?;
        while commits.get(slot).is_some_and(|c| c.commit_seq < commit_seq) {
            slot += 1;
        }
        let Some(commit) = commits.get_mut(slot).filter(|c| c.commit_seq == commit_seq) else {
            continue;
        };
        let op: i32 = col(row, 3)?;
        let scopes: String = col(row, 5)?;
        commit.changes.push(StoredChange {
            table: col(row, 1)?,
            row_id: col(row, 2)?,
            op: ChangeOp::from_stored(i64::from(op)),
            row_version: col(row, 4)?,
            scopes: parse_scopes(&scopes)?,
            payload: col(row, 6)?,
        });
    }
    Ok(commits)
}

/// Keyset scan of a table named in the stored layouts (other names →
/// `sync.storage.unknown_table`), rows with `row_id > after`, byte order.
pub(crate) fn inspect_rows(
    conn: &mut Conn,
    partition: &str,
    table: &str,
    after: Option<&str>,
    limit: i64,
) -> Result<Vec<StoredRow>> {
    let layouts = crate::marker::read(conn)?.map(|m| m.layouts);
    let stored = sync_schema::parse_layouts(layouts.as_deref())?;
    if stored.get(table).is_none() {
        return Err(Error::unknown_table(table));
    }
    let sql = format!(
        "SELECT \"_sync_row_id\"::text, \"_sync_server_version\"::int8, \"_sync_scopes\"::text, \
         \"_sync_payload\" FROM {} \
         WHERE \"_sync_partition\" = $1 AND \"_sync_row_id\" COLLATE \"C\" > $2 \
         ORDER BY \"_sync_row_id\" COLLATE \"C\" LIMIT $3",
        quote_ident(table)
    );
    let rows = conn.query(&sql, &[&partition, &after.unwrap_or(""), &limit])?;
    rows_from(&rows)
}

impl sync_schema::ObserveTables for PostgresStorage {
    /// Read-only introspection of the named application tables (absent ones
    /// recorded as absent) plus the internal tables whose key collations the
    /// legacy upgrade inspects, exactly as `ensure_schema` observes them
    /// (`schema-and-migrations.md` §7.1), in one read snapshot. Lets operator
    /// tools preview a migration plan without applying it.
    fn observe_tables(&self, tables: &[String]) -> Result<ObservedTables> {
        let names = names_with_internal(tables.iter().cloned());
        self.with_snapshot(|conn| observe(conn, &names))
    }

    /// `count(*)` of the table when `to_regclass` of its quoted name
    /// resolves (the `search_path`, as every query), else 0.
    fn count_table_rows(&self, table: &str) -> Result<Option<u64>> {
        self.with_snapshot(|conn| count_table_rows(conn, table))
            .map(Some)
    }
}

/// Rows of the table, all partitions; 0 when it does not resolve. The name
/// is bound to resolve the table and only then quoted into the count.
fn count_table_rows(conn: &mut Conn, table: &str) -> Result<u64> {
    let exists: bool = col(
        &conn.query_one("SELECT to_regclass(quote_ident($1)) IS NOT NULL", &[&table])?,
        0,
    )?;
    if !exists {
        return Ok(0);
    }
    let sql = format!("SELECT count(*)::int8 FROM {}", quote_ident(table));
    let count: i64 = col(&conn.query_one(&sql, &[])?, 0)?;
    Ok(u64::try_from(count).unwrap_or(0))
}
