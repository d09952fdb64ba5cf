//! The per-partition commit log: dense allocation, appends, counters and
//! the horizon (`storage-contract.md` §4.4, §5.4, `dialects.md` §5).

use std::collections::BTreeSet;

use rusqlite::{Connection, OptionalExtension};
use sync_core::{NewCommit, Result};

use crate::errors::DbResultExt;
use crate::seam;
use crate::values::scopes_json;

/// Allocates the next `commit_seq` (counter created at 0 if absent).
const ALLOCATE_SEQ: &str =
    "INSERT INTO sync_partitions (partition, max_commit_seq) VALUES (?1, 1) \
ON CONFLICT (partition) DO UPDATE SET max_commit_seq = max_commit_seq + 1 RETURNING max_commit_seq";

const INSERT_COMMIT: &str = "INSERT INTO sync_commits \
(partition, commit_seq, client_id, client_commit_id, actor_id, created_at_ms, writer_version) \
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)";

const INSERT_CHANGE: &str = "INSERT INTO sync_changes \
(partition, commit_seq, idx, tbl, row_id, op, row_version, scopes, payload) \
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)";

const INSERT_CHANGE_SCOPE: &str = "INSERT OR IGNORE INTO sync_change_scopes \
(partition, tbl, var, value, commit_seq) VALUES (?1, ?2, ?3, ?4, ?5)";

const UPSERT_TOMBSTONE: &str = "INSERT INTO sync_tombstones (partition, tbl, row_id, commit_seq) \
VALUES (?1, ?2, ?3, ?4) ON CONFLICT (partition, tbl, row_id) DO UPDATE SET commit_seq = excluded.commit_seq";

/// Appends a validated commit under the writer lock; returns its `commit_seq`.
/// The fence trigger fires on the commit insert, before any change is written.
pub(crate) fn append(
    conn: &Connection,
    partition: &str,
    writer_version: i32,
    commit: &NewCommit,
) -> Result<i64> {
    let seq: i64 = seam::cached(conn, ALLOCATE_SEQ)
        .db()?
        .query_row([partition], |row| row.get(0))
        .db()?;
    seam::cached(conn, INSERT_COMMIT)
        .db()?
        .execute((
            partition,
            seq,
            &commit.client_id,
            &commit.client_commit_id,
            &commit.actor_id,
            commit.created_at_ms,
            writer_version,
        ))
        .db()?;
    if commit.changes.is_empty() {
        return Ok(seq);
    }

    let mut insert_change = conn.prepare_cached(INSERT_CHANGE).db()?;
    let mut scope_keys: BTreeSet<(&str, &str, &str)> = BTreeSet::new();
    let mut tombstones: Vec<(&str, &str)> = Vec::new();
    let leaves_tombstone = commit.tombstones();
    for (idx, change) in commit.changes.iter().enumerate() {
        seam::check(conn, INSERT_CHANGE).db()?;
        insert_change
            .execute((
                partition,
                seq,
                idx as i64,
                &change.table,
                &change.row_id,
                i64::from(change.op.as_i16()),
                change.row_version,
                scopes_json(&change.scopes),
                change.payload.as_deref(),
            ))
            .db()?;
        for (variable, value) in &change.scopes {
            scope_keys.insert((change.table.as_str(), variable.as_str(), value.as_str()));
        }
        if leaves_tombstone[idx] {
            tombstones.push((change.table.as_str(), change.row_id.as_str()));
        }
    }
    drop(insert_change);

    if !scope_keys.is_empty() {
        let mut insert_scope = conn.prepare_cached(INSERT_CHANGE_SCOPE).db()?;
        for (table, variable, value) in scope_keys {
            seam::check(conn, INSERT_CHANGE_SCOPE).db()?;
            insert_scope
                .execute((partition, table, variable, value, seq))
                .db()?;
        }
    }
    if !tombstones.is_empty() {
        let mut upsert_tombstone = conn.prepare_cached(UPSERT_TOMBSTONE).db()?;
        for (table, row_id) in tombstones {
            seam::check(conn, UPSERT_TOMBSTONE).db()?;
            upsert_tombstone
                .execute((partition, table, row_id, seq))
                .db()?;
        }
    }
    Ok(seq)
}

/// The allocated counter (0 for an unknown partition).
pub(crate) fn max_commit_seq(conn: &Connection, partition: &str) -> Result<i64> {
    counter(
        conn,
        partition,
        "SELECT max_commit_seq FROM sync_partitions WHERE partition = ?1",
    )
}

/// The horizon (0 by default).
pub(crate) fn horizon_seq(conn: &Connection, partition: &str) -> Result<i64> {
    counter(
        conn,
        partition,
        "SELECT horizon_seq FROM sync_partitions WHERE partition = ?1",
    )
}

fn counter(conn: &Connection, partition: &str, sql: &str) -> Result<i64> {
    Ok(seam::cached(conn, sql)
        .db()?
        .query_row([partition], |row| row.get::<_, i64>(0))
        .optional()
        .db()?
        .unwrap_or(0))
}

/// Raises the horizon to `max(current, seq)`, creating the counter row.
pub(crate) fn raise_horizon(conn: &Connection, partition: &str, seq: i64) -> Result<()> {
    seam::cached(conn,
        "INSERT INTO sync_partitions (partition, horizon_seq) VALUES (?1, ?2) \
         ON CONFLICT (partition) DO UPDATE SET horizon_seq = max(horizon_seq, excluded.horizon_seq)",
    )
    .db()?
    .execute((partition, seq))
    .db()?;
    Ok(())
}

/// Newest retained `commit_seq` created strictly before the bound; 0 if none.
pub(crate) fn commit_seq_before(
    conn: &Connection,
    partition: &str,
    created_before_ms: i64,
) -> Result<i64> {
    let seq: Option<i64> = seam::cached(
        conn,
        "SELECT max(commit_seq) FROM sync_commits WHERE partition = ?1 AND created_at_ms < ?2",
    )
    .db()?
    .query_row((partition, created_before_ms), |row| row.get(0))
    .db()?;
    Ok(seq.unwrap_or(0))
}
