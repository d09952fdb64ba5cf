//! The admin read surface over the commit log (`storage-contract.md` §4.12).

use sync_core::front::{AdminBackend, Checked, Handle, Partition, Table};
use sync_core::{ClientRecord, CommitRecord, StoredRow, StoredScopes};
use sync_core::{
    CommitMetadata, CommitMetadataQuery, Result, ScopeActivityQuery, ScopeCommitActivity,
};

use crate::clients;
use crate::inspect;
use crate::pool::{col, Conn};
use crate::rows;
use crate::state::Ensured;
use crate::PostgresStorage;

const METADATA_SQL: &str = "SELECT c.commit_seq, c.client_id, c.client_commit_id, c.actor_id, \
      c.created_at_ms, \
      (SELECT count(*) FROM sync_changes ch WHERE ch.partition = c.partition \
         AND ch.commit_seq = c.commit_seq), \
      ARRAY(SELECT DISTINCT ch.tbl COLLATE \"C\" FROM sync_changes ch \
         WHERE ch.partition = c.partition AND ch.commit_seq = c.commit_seq ORDER BY 1) \
    FROM sync_commits c \
    WHERE c.partition = $1 AND c.commit_seq > $2 AND ($3::int8 IS NULL OR c.commit_seq < $3) \
      AND ($4::text IS NULL OR EXISTS (SELECT 1 FROM sync_changes ch \
         WHERE ch.partition = c.partition AND ch.commit_seq = c.commit_seq AND ch.tbl = $4)) \
    ORDER BY c.commit_seq DESC LIMIT $5";

const ACTIVITY_SQL: &str = "SELECT s.commit_seq, s.tbl, c.created_at_ms, c.actor_id, \
      (SELECT count(*) FROM sync_changes ch WHERE ch.partition = $1 \
         AND ch.commit_seq = s.commit_seq AND ch.tbl = s.tbl) \
    FROM (SELECT DISTINCT e.commit_seq, e.tbl FROM sync_change_scopes e \
          WHERE e.partition = $1 AND e.var = $2 AND e.value = $3) AS s \
    JOIN sync_commits c ON c.partition = $1 AND c.commit_seq = s.commit_seq \
    ORDER BY s.commit_seq DESC, s.tbl COLLATE \"C\" LIMIT $4";

/// Commit metadata, newest first.
pub(crate) fn commit_metadata(
    conn: &mut Conn,
    partition: &str,
    q: &CommitMetadataQuery,
) -> Result<Vec<CommitMetadata>> {
    if q.limit <= 0 {
        return Ok(Vec::new());
    }
    let rows = conn.query(
        METADATA_SQL,
        &[&partition, &q.after_seq, &q.before_seq, &q.table, &q.limit],
    )?;
    rows.iter()
        .map(|row| {
            Ok(CommitMetadata {
                commit_seq: col(row, 0)?,
                client_id: col(row, 1)?,
                client_commit_id: col(row, 2)?,
                actor_id: col(row, 3)?,
                created_at_ms: col(row, 4)?,
                change_count: col(row, 5)?,
                tables: col(row, 6)?,
            })
        })
        .collect()
}

/// `(commit, table)` pairs touching one scope value, newest first.
pub(crate) fn scope_activity(
    conn: &mut Conn,
    partition: &str,
    q: &ScopeActivityQuery,
) -> Result<Vec<ScopeCommitActivity>> {
    if q.limit <= 0 {
        return Ok(Vec::new());
    }
    let rows = conn.query(ACTIVITY_SQL, &[&partition, &q.variable, &q.value, &q.limit])?;
    rows.iter()
        .map(|row| {
            Ok(ScopeCommitActivity {
                commit_seq: col(row, 0)?,
                table: col(row, 1)?,
                created_at_ms: col(row, 2)?,
                actor_id: col(row, 3)?,
                change_count: col(row, 4)?,
            })
        })
        .collect()
}

impl AdminBackend<Ensured> for PostgresStorage {
    fn list_client_records(&self, p: Partition<'_>) -> Result<Vec<ClientRecord>> {
        self.with_conn(|c| clients::list(c, &p))
    }

    fn list_commit_metadata(
        &self,
        p: Partition<'_>,
        query: &CommitMetadataQuery,
    ) -> Result<Vec<CommitMetadata>> {
        self.with_conn(|c| commit_metadata(c, &p, query))
    }

    fn scope_activity(
        &self,
        p: Partition<'_>,
        query: &ScopeActivityQuery,
    ) -> Result<Vec<ScopeCommitActivity>> {
        self.with_conn(|c| scope_activity(c, &p, query))
    }

    fn get_row_scopes(
        &self,
        p: Partition<'_>,
        table: Table<'_, Handle<Self>>,
        row_id: &str,
    ) -> Result<Option<(i64, StoredScopes)>> {
        self.with_conn(|c| rows::get_row_scopes(c, &table, &p, row_id))
    }

    fn read_commits(
        &self,
        p: Partition<'_>,
        after: Checked<i64>,
        limit: Checked<i64>,
    ) -> Result<Vec<CommitRecord>> {
        self.with_snapshot(|c| inspect::read_commits(c, &p, after.get(), limit.get()))
    }

    fn inspect_table_rows(
        &self,
        p: Partition<'_>,
        table: &str,
        after: Option<&str>,
        limit: Checked<i64>,
    ) -> Result<Vec<StoredRow>> {
        self.with_snapshot(|c| inspect::inspect_rows(c, &p, table, after, limit.get()))
    }
}
