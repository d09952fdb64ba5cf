//! The blob reference index (`storage-contract.md` §4.11) and the admin
//! read surface (§4.12), with the operator reads `read_commits` and
//! `inspect_table_rows`.

use std::collections::BTreeSet;

use mysql::Value;
use sync_core::front::EnsuredSchema;
use sync_core::front::{AdminBackend, BlobRefsBackend, Checked, Handle, Partition, Table};
use sync_core::{
    BlobReferencingRow, ChangeOp, ClientRecord, CommitMetadata, CommitMetadataQuery, CommitRecord,
    Error, Result, ScopeActivityQuery, ScopeCommitActivity, StoredChange, StoredRow, StoredScopes,
};

use crate::dialect::quote_ident as q;
use crate::ensured::{Ensured, TableSql};
use crate::pool::Conn;
use crate::values::{corrupt, parse_scopes};
use crate::MariadbStorage;

/// Replaces the blob references of one row.
pub(crate) fn set_blob_refs(
    conn: &mut Conn,
    partition: &str,
    table: &str,
    row_id: &str,
    blob_ids: &[String],
) -> Result<()> {
    conn.exec(
        "DELETE FROM `sync_blob_refs` WHERE `partition` = ? AND `tbl` = ? AND `row_id` = ?",
        (partition, table, row_id),
    )?;
    let ids: Vec<&String> = blob_ids
        .iter()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    for chunk in ids.chunks(1000) {
        let marks = vec!["(?, ?, ?, ?)"; chunk.len()].join(", ");
        let mut params: Vec<Value> = Vec::with_capacity(chunk.len() * 4);
        for blob_id in chunk {
            params.extend([
                Value::from(partition),
                Value::from(table),
                Value::from(row_id),
                Value::from(blob_id.as_str()),
            ]);
        }
        conn.exec(
            &format!(
                "INSERT INTO `sync_blob_refs` (`partition`, `tbl`, `row_id`, `blob_id`) \
                 VALUES {marks} ON DUPLICATE KEY UPDATE `blob_id` = `blob_id`"
            ),
            params,
        )?;
    }
    Ok(())
}

/// The current rows referencing a blob (with their scopes).
pub(crate) fn rows_referencing(
    conn: &mut Conn,
    ensured: Option<&Ensured>,
    partition: &str,
    blob_id: &str,
) -> Result<Vec<BlobReferencingRow>> {
    let candidates: Vec<(String, String)> = conn.rows(
        "SELECT DISTINCT `tbl`, `row_id` FROM `sync_blob_refs` \
         WHERE `partition` = ? AND `blob_id` = ? ORDER BY `tbl`, `row_id`",
        (partition, blob_id),
    )?;
    let Some(ensured) = ensured else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for (table, row_id) in candidates {
        let Some((_, sql)) = EnsuredSchema::table(ensured, &table) else {
            continue;
        };
        let scopes: Option<String> =
            conn.first(&sql.select_scopes, (partition, row_id.as_str()))?;
        if let Some(scopes) = scopes {
            out.push(BlobReferencingRow {
                table,
                row_id,
                scopes: parse_scopes(&scopes)?,
            });
        }
    }
    Ok(out)
}

/// Every blob id referenced in the partition, byte-ordered.
pub(crate) fn referenced_ids(conn: &mut Conn, partition: &str) -> Result<Vec<String>> {
    conn.rows(
        "SELECT DISTINCT `blob_id` FROM `sync_blob_refs` WHERE `partition` = ? ORDER BY `blob_id`",
        (partition,),
    )
}

/// Every client record of the partition, most recent first.
pub(crate) fn client_records(conn: &mut Conn, partition: &str) -> Result<Vec<ClientRecord>> {
    let ids: Vec<String> = conn.rows(
        "SELECT `client_id` FROM `sync_clients` WHERE `partition` = ? \
         ORDER BY `updated_at_ms` DESC, `client_id` ASC",
        (partition,),
    )?;
    ids.iter()
        .filter_map(|id| crate::records::get_client(conn, partition, id).transpose())
        .collect()
}

/// Commit headers, newest first.
pub(crate) fn commit_metadata(
    conn: &mut Conn,
    partition: &str,
    q: &CommitMetadataQuery,
) -> Result<Vec<CommitMetadata>> {
    if q.limit <= 0 {
        return Ok(Vec::new());
    }
    type Raw = (i64, String, String, String, i64, i64, Option<String>);
    let rows: Vec<Raw> = conn.rows(
        "SELECT c.`commit_seq`, c.`client_id`, c.`client_commit_id`, c.`actor_id`, c.`created_at_ms`, \
         (SELECT COUNT(*) FROM `sync_changes` AS ch WHERE ch.`partition` = c.`partition` \
           AND ch.`commit_seq` = c.`commit_seq`), \
         (SELECT JSON_ARRAYAGG(DISTINCT CAST(ch.`tbl` AS CHAR)) FROM `sync_changes` AS ch \
           WHERE ch.`partition` = c.`partition` AND ch.`commit_seq` = c.`commit_seq`) \
         FROM `sync_commits` AS c WHERE c.`partition` = ? AND c.`commit_seq` > ? \
         AND (? IS NULL OR c.`commit_seq` < ?) \
         AND (? IS NULL OR EXISTS (SELECT 1 FROM `sync_changes` AS ch \
           WHERE ch.`partition` = c.`partition` AND ch.`commit_seq` = c.`commit_seq` AND ch.`tbl` = ?)) \
         ORDER BY c.`commit_seq` DESC LIMIT ?",
        (
            partition,
            q.after_seq,
            q.before_seq,
            q.before_seq,
            q.table.as_deref(),
            q.table.as_deref(),
            q.limit,
        ),
    )?;
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
                let mut tables: Vec<String> = match tables {
                    Some(text) => {
                        serde_json::from_str(&text).map_err(|_| corrupt("tables_unreadable"))?
                    }
                    None => Vec::new(),
                };
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

/// Commits that touched one scope value, newest first.
pub(crate) fn scope_activity(
    conn: &mut Conn,
    partition: &str,
    q: &ScopeActivityQuery,
) -> Result<Vec<ScopeCommitActivity>> {
    if q.limit <= 0 {
        return Ok(Vec::new());
    }
    let rows: Vec<(i64, String, i64, String, i64)> = conn.rows(
        "SELECT s.`commit_seq`, s.`tbl`, c.`created_at_ms`, c.`actor_id`, \
         (SELECT COUNT(*) FROM `sync_changes` AS ch WHERE ch.`partition` = s.`partition` \
           AND ch.`commit_seq` = s.`commit_seq` AND ch.`tbl` = s.`tbl`) \
         FROM `sync_change_scopes` AS s \
         JOIN `sync_commits` AS c ON c.`partition` = s.`partition` AND c.`commit_seq` = s.`commit_seq` \
         WHERE s.`partition` = ? AND s.`var` = ? AND s.`value` = ? \
         ORDER BY s.`commit_seq` DESC, s.`tbl` LIMIT ?",
        (partition, &q.variable, &q.value, q.limit),
    )?;
    Ok(rows
        .into_iter()
        .map(
            |(commit_seq, table, created_at_ms, actor_id, change_count)| ScopeCommitActivity {
                commit_seq,
                table,
                created_at_ms,
                actor_id,
                change_count,
            },
        )
        .collect())
}

/// A row's version and scopes.
pub(crate) fn row_scopes(
    conn: &mut Conn,
    table: &TableSql,
    partition: &str,
    row_id: &str,
) -> Result<Option<(i64, StoredScopes)>> {
    let found: Option<crate::rows::RowColumns> =
        conn.first(&table.select_row, (partition, row_id))?;
    found
        .map(|(version, scopes, ..)| Ok((version, parse_scopes(&scopes)?)))
        .transpose()
}

/// Whole commits with every change, in order.
pub(crate) fn read_commits(
    conn: &mut Conn,
    partition: &str,
    after_seq: i64,
    limit: i64,
) -> Result<Vec<CommitRecord>> {
    type Head = (i64, String, String, String, i64, Option<i32>);
    let heads: Vec<Head> = conn.rows(
        "SELECT `commit_seq`, `client_id`, `client_commit_id`, `actor_id`, `created_at_ms`, \
         `writer_version` FROM `sync_commits` WHERE `partition` = ? AND `commit_seq` > ? \
         ORDER BY `commit_seq` LIMIT ?",
        (partition, after_seq, limit),
    )?;
    let Some(last) = heads.last().map(|h| h.0) else {
        return Ok(Vec::new());
    };
    let mut commits: Vec<CommitRecord> = heads
        .into_iter()
        .map(
            |(commit_seq, client_id, client_commit_id, actor_id, created_at_ms, writer_version)| {
                CommitRecord {
                    commit_seq,
                    client_id,
                    client_commit_id,
                    actor_id,
                    created_at_ms,
                    writer_version,
                    changes: Vec::new(),
                }
            },
        )
        .collect();
    type Raw = (
        i64,
        String,
        String,
        i64,
        Option<i64>,
        String,
        Option<Vec<u8>>,
    );
    let changes: Vec<Raw> = conn.rows(
        "SELECT `commit_seq`, `tbl`, `row_id`, `op`, `row_version`, `scopes`, `payload` \
         FROM `sync_changes` WHERE `partition` = ? AND `commit_seq` > ? AND `commit_seq` <= ? \
         ORDER BY `commit_seq`, `idx`",
        (partition, after_seq, last),
    )?;
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

/// Rows of a table named in the stored layouts (no ensured schema needed).
pub(crate) fn inspect_rows(
    conn: &mut Conn,
    partition: &str,
    table: &str,
    after: Option<&str>,
    limit: i64,
) -> Result<Vec<StoredRow>> {
    let layouts = crate::ensure::read_marker(conn)?
        .filter(|m| m.version > 0)
        .map(|m| m.layouts);
    let stored = sync_schema::parse_layouts(layouts.as_deref())?;
    if stored.get(table).is_none() {
        return Err(Error::unknown_table(table));
    }
    let raw: Vec<(String, i64, String, Vec<u8>)> = conn.rows(
        &format!(
            "SELECT `_sync_row_id`, `_sync_server_version`, `_sync_scopes`, `_sync_payload` FROM {} \
             WHERE `_sync_partition` = ? AND `_sync_row_id` > ? ORDER BY `_sync_row_id` LIMIT ?",
            q(table)
        ),
        (partition, after.unwrap_or(""), limit),
    )?;
    raw.into_iter().map(crate::rows::build_row).collect()
}

impl AdminBackend<Ensured> for MariadbStorage {
    fn list_client_records(&self, p: Partition<'_>) -> Result<Vec<ClientRecord>> {
        self.with_conn(|c| client_records(c, p.as_str()))
    }

    fn list_commit_metadata(
        &self,
        p: Partition<'_>,
        query: &sync_core::CommitMetadataQuery,
    ) -> Result<Vec<sync_core::CommitMetadata>> {
        self.with_conn(|c| commit_metadata(c, p.as_str(), query))
    }

    fn scope_activity(
        &self,
        p: Partition<'_>,
        query: &sync_core::ScopeActivityQuery,
    ) -> Result<Vec<sync_core::ScopeCommitActivity>> {
        self.with_conn(|c| scope_activity(c, p.as_str(), query))
    }

    fn get_row_scopes(
        &self,
        p: Partition<'_>,
        t: Table<'_, Handle<Self>>,
        row_id: &str,
    ) -> Result<Option<(i64, sync_core::StoredScopes)>> {
        self.with_conn(|c| row_scopes(c, t.handle(), p.as_str(), row_id))
    }

    fn read_commits(
        &self,
        p: Partition<'_>,
        after: Checked<i64>,
        limit: Checked<i64>,
    ) -> Result<Vec<sync_core::CommitRecord>> {
        self.with_read(|c| read_commits(c, p.as_str(), after.get(), limit.get()))
    }

    fn inspect_table_rows(
        &self,
        p: Partition<'_>,
        table: &str,
        after: Option<&str>,
        limit: Checked<i64>,
    ) -> Result<Vec<StoredRow>> {
        self.with_conn(|c| inspect_rows(c, p.as_str(), table, after, limit.get()))
    }
}

impl BlobRefsBackend for MariadbStorage {
    fn list_rows_referencing_blob(
        &self,
        p: Partition<'_>,
        blob_id: &str,
    ) -> Result<Vec<sync_core::BlobReferencingRow>> {
        let ensured = self.ensured_schema();
        self.with_conn(|c| rows_referencing(c, ensured.as_deref(), p.as_str(), blob_id))
    }

    fn list_referenced_blob_ids(&self, p: Partition<'_>) -> Result<Vec<String>> {
        self.with_conn(|c| referenced_ids(c, p.as_str()))
    }
}
