//! The admin read surface (`storage-contract.md` §4.12).

use rusqlite::{Connection, OptionalExtension};
use sync_core::front::{AdminBackend, Checked, Handle, Partition, Table};
use sync_core::{ClientRecord, CommitRecord, StoredRow};
use sync_core::{
    CommitMetadata, CommitMetadataQuery, Result, ScopeActivityQuery, ScopeCommitActivity,
    StoredScopes,
};

use crate::clients;
use crate::errors::{corrupt, DbResultExt};
use crate::inspect;
use crate::seam;
use crate::state::{Ensured, TableSql};
use crate::values::parse_scopes;
use crate::SqliteStorage;

/// Commit metadata, newest first, optionally only commits touching a table
/// (not checked against the ensured schema).
pub(crate) fn commit_metadata(
    conn: &Connection,
    partition: &str,
    q: &CommitMetadataQuery,
) -> Result<Vec<CommitMetadata>> {
    if q.limit <= 0 {
        return Ok(Vec::new());
    }
    let mut stmt = seam::cached(conn,
            "SELECT c.commit_seq, c.client_id, c.client_commit_id, c.actor_id, c.created_at_ms, \
             (SELECT count(*) FROM sync_changes AS ch WHERE ch.partition = ?1 AND ch.commit_seq = c.commit_seq), \
             (SELECT json_group_array(tbl) FROM (SELECT DISTINCT tbl FROM sync_changes AS ch \
               WHERE ch.partition = ?1 AND ch.commit_seq = c.commit_seq ORDER BY tbl)) \
             FROM sync_commits AS c WHERE c.partition = ?1 AND c.commit_seq > ?2 \
             AND (?3 IS NULL OR c.commit_seq < ?3) \
             AND (?4 IS NULL OR EXISTS (SELECT 1 FROM sync_changes AS ch \
               WHERE ch.partition = ?1 AND ch.commit_seq = c.commit_seq AND ch.tbl = ?4)) \
             ORDER BY c.commit_seq DESC LIMIT CAST(?5 AS INTEGER)",
        )
        .db()?;
    type Raw = (i64, String, String, String, i64, i64, String);
    let rows: Vec<Raw> = stmt
        .query_map(
            (
                partition,
                q.after_seq,
                q.before_seq,
                q.table.as_deref(),
                q.limit,
            ),
            |r| {
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    r.get(5)?,
                    r.get(6)?,
                ))
            },
        )
        .db()?
        .collect::<rusqlite::Result<_>>()
        .db()?;
    rows.into_iter()
        .map(
            |(
                commit_seq,
                client_id,
                client_commit_id,
                actor_id,
                created_at_ms,
                change_count,
                tables,
            )| {
                let mut tables: Vec<String> =
                    serde_json::from_str(&tables).map_err(|_| corrupt("tables_unreadable"))?;
                tables.sort();
                tables.dedup();
                Ok(CommitMetadata {
                    commit_seq,
                    client_id,
                    client_commit_id,
                    actor_id,
                    created_at_ms,
                    change_count,
                    tables,
                })
            },
        )
        .collect()
}

/// Distinct `(commit_seq, table)` pairs of one scope value, newest first.
pub(crate) fn scope_activity(
    conn: &Connection,
    partition: &str,
    q: &ScopeActivityQuery,
) -> Result<Vec<ScopeCommitActivity>> {
    if q.limit <= 0 {
        return Ok(Vec::new());
    }
    let mut stmt = seam::cached(
        conn,
        "SELECT s.commit_seq, s.tbl, c.created_at_ms, c.actor_id, \
             (SELECT count(*) FROM sync_changes AS ch \
               WHERE ch.partition = ?1 AND ch.commit_seq = s.commit_seq AND ch.tbl = s.tbl) \
             FROM sync_change_scopes AS s \
             JOIN sync_commits AS c ON c.partition = ?1 AND c.commit_seq = s.commit_seq \
             WHERE s.partition = ?1 AND s.var = ?2 AND s.value = ?3 \
             ORDER BY s.commit_seq DESC, s.tbl LIMIT CAST(?4 AS INTEGER)",
    )
    .db()?;
    let rows = stmt
        .query_map((partition, &q.variable, &q.value, q.limit), |r| {
            Ok(ScopeCommitActivity {
                commit_seq: r.get(0)?,
                table: r.get(1)?,
                created_at_ms: r.get(2)?,
                actor_id: r.get(3)?,
                change_count: r.get(4)?,
            })
        })
        .db()?;
    rows.collect::<rusqlite::Result<_>>().db()
}

/// `(server_version, scopes)` of a row without reading its payload.
pub(crate) fn row_scopes(
    conn: &Connection,
    table: &TableSql,
    partition: &str,
    row_id: &str,
) -> Result<Option<(i64, StoredScopes)>> {
    let sql = format!(
        "SELECT \"_sync_server_version\", \"_sync_scopes\" FROM {} WHERE \"_sync_partition\" = ?1 AND \"_sync_row_id\" = ?2",
        table.quoted
    );
    let found: Option<(i64, String)> = seam::cached(conn, &sql)
        .db()?
        .query_row((partition, row_id), |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()
        .db()?;
    found
        .map(|(version, scopes)| Ok((version, parse_scopes(&scopes)?)))
        .transpose()
}

impl AdminBackend<Ensured> for SqliteStorage {
    fn list_client_records(&self, p: Partition<'_>) -> Result<Vec<ClientRecord>> {
        self.pools().read(|conn| clients::list(conn, &p))
    }

    fn list_commit_metadata(
        &self,
        p: Partition<'_>,
        query: &CommitMetadataQuery,
    ) -> Result<Vec<CommitMetadata>> {
        self.pools().read(|conn| commit_metadata(conn, &p, query))
    }

    fn scope_activity(
        &self,
        p: Partition<'_>,
        query: &ScopeActivityQuery,
    ) -> Result<Vec<ScopeCommitActivity>> {
        self.pools().read(|conn| scope_activity(conn, &p, query))
    }

    fn get_row_scopes(
        &self,
        p: Partition<'_>,
        table: Table<'_, Handle<Self>>,
        row_id: &str,
    ) -> Result<Option<(i64, StoredScopes)>> {
        self.pools()
            .read(|conn| row_scopes(conn, &table, &p, row_id))
    }

    fn read_commits(
        &self,
        p: Partition<'_>,
        after: Checked<i64>,
        limit: Checked<i64>,
    ) -> Result<Vec<CommitRecord>> {
        self.pools()
            .read_snapshot(|conn| inspect::read_commits(conn, &p, after.get(), limit.get()))
    }

    fn inspect_table_rows(
        &self,
        p: Partition<'_>,
        table: &str,
        after: Option<&str>,
        limit: Checked<i64>,
    ) -> Result<Vec<StoredRow>> {
        self.pools()
            .read_snapshot(|conn| inspect::inspect_rows(conn, &p, table, after, limit.get()))
    }
}
