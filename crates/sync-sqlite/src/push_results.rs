//! Idempotency records (`storage-contract.md` §4.6, §5.4, §9.1): first
//! writer wins; unreadable records are `sync.idempotency_cache_miss`.

use rusqlite::{Connection, OptionalExtension};
use sync_core::{Result, StoredPushResult};

use crate::errors::DbResultExt;
use crate::seam;

/// The stored record text.
pub(crate) fn get_text(
    conn: &Connection,
    partition: &str,
    client_id: &str,
    client_commit_id: &str,
) -> Result<Option<String>> {
    seam::cached(conn,
        "SELECT result FROM sync_push_results WHERE partition = ?1 AND client_id = ?2 AND client_commit_id = ?3",
    )
    .db()?
    .query_row((partition, client_id, client_commit_id), |row| row.get(0))
    .optional()
    .db()
}

/// Parses a stored record (outside the statement, so a cache miss never
/// counts as a failed statement).
pub(crate) fn parse(text: Option<String>) -> Result<Option<StoredPushResult>> {
    text.map(|t| StoredPushResult::from_json(&t)).transpose()
}

/// Inserts the record unless its key exists.
pub(crate) fn put(
    conn: &Connection,
    partition: &str,
    client_id: &str,
    client_commit_id: &str,
    result: &StoredPushResult,
) -> Result<()> {
    seam::cached(conn,
        "INSERT INTO sync_push_results (partition, client_id, client_commit_id, result) VALUES (?1, ?2, ?3, ?4) \
         ON CONFLICT (partition, client_id, client_commit_id) DO NOTHING",
    )
    .db()?
    .execute((partition, client_id, client_commit_id, result.to_json()))
    .db()?;
    Ok(())
}
