//! Durable after-commit reactions (`storage-contract.md` §4.10): enqueue in
//! the push transaction, single-winner claims under the writer lock,
//! owner-guarded transitions.

use rusqlite::{Connection, OptionalExtension, Row};
use sync_core::front::{Partition, ReactionsBackend, Request};
use sync_core::limits::MAX_SAFE_INTEGER;
use sync_core::{
    NewReaction, PrunedReactionCounts, ReactionClaimQuery, ReactionFailure, ReactionFailureUpdate,
    ReactionListQuery, ReactionPruneQuery, ReactionStatus, Result, StoredReaction,
};

use crate::errors::{corrupt, Context, DbResultExt};
use crate::seam;
use crate::values::{parse_json, string_list_json, to_i32};
use crate::SqliteStorage;

const COLUMNS: &str =
    "idempotency_key, type, version, payload, source_client_id, source_client_commit_id, \
source_commit_seq, created_at_ms, max_attempts, status, attempts, available_at_ms, lease_owner, \
lease_expires_at_ms, completed_at_ms, last_failure";

type RawReaction = (
    String,
    String,
    i64,
    String,
    String,
    String,
    i64,
    i64,
    i64,
    String,
    i64,
    i64,
    Option<String>,
    Option<i64>,
    Option<i64>,
    Option<String>,
);

fn raw(row: &Row<'_>) -> rusqlite::Result<RawReaction> {
    Ok((
        row.get(0)?,
        row.get(1)?,
        row.get(2)?,
        row.get(3)?,
        row.get(4)?,
        row.get(5)?,
        row.get(6)?,
        row.get(7)?,
        row.get(8)?,
        row.get(9)?,
        row.get(10)?,
        row.get(11)?,
        row.get(12)?,
        row.get(13)?,
        row.get(14)?,
        row.get(15)?,
    ))
}

fn reaction(raw: RawReaction) -> Result<StoredReaction> {
    let last_failure = match raw.15 {
        None => None,
        Some(text) => Some(
            ReactionFailure::from_value(&parse_json(&text)?)
                .ok_or_else(|| corrupt("reaction_failure_unreadable"))?,
        ),
    };
    Ok(StoredReaction {
        idempotency_key: raw.0,
        kind: raw.1,
        version: to_i32(raw.2)?,
        payload: parse_json(&raw.3)?,
        source_client_id: raw.4,
        source_client_commit_id: raw.5,
        source_commit_seq: raw.6,
        created_at_ms: raw.7,
        max_attempts: to_i32(raw.8)?,
        status: ReactionStatus::parse(&raw.9).ok_or_else(|| corrupt("reaction_status_unknown"))?,
        attempts: to_i32(raw.10)?,
        available_at_ms: raw.11,
        lease_owner: raw.12,
        lease_expires_at_ms: raw.13,
        completed_at_ms: raw.14,
        last_failure,
    })
}

fn collect(rows: Vec<RawReaction>) -> Result<Vec<StoredReaction>> {
    rows.into_iter().map(reaction).collect()
}

/// Inserts one pending reaction (executed once per reaction).
const ENQUEUE: &str = "INSERT INTO sync_reactions (partition, idempotency_key, type, version, payload, source_client_id, \
             source_client_commit_id, source_commit_seq, created_at_ms, available_at_ms, status, attempts, max_attempts) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9, 'pending', 0, ?10)";

/// Inserts each reaction as `pending` in the caller's transaction; an
/// existing key is `duplicate_reaction`.
pub(crate) fn enqueue(conn: &Connection, partition: &str, reactions: &[NewReaction]) -> Result<()> {
    let mut stmt = conn.prepare_cached(ENQUEUE).db()?;
    for r in reactions {
        seam::check(conn, ENQUEUE).db()?;
        stmt.execute((
            partition,
            &r.idempotency_key,
            &r.kind,
            r.version,
            r.payload.to_string(),
            &r.source_client_id,
            &r.source_client_commit_id,
            r.source_commit_seq,
            r.created_at_ms,
            r.max_attempts,
        ))
        .db_in(Context::EnqueueReactions)?;
    }
    Ok(())
}

/// Leases due reactions in one statement under the writer lock.
pub(crate) fn claim(
    conn: &Connection,
    partition: &str,
    q: &ReactionClaimQuery,
) -> Result<Vec<StoredReaction>> {
    let expires = q
        .now_ms
        .saturating_add(q.lease_duration_ms)
        .min(MAX_SAFE_INTEGER);
    let mut stmt = seam::cached(conn, &format!(
            "UPDATE sync_reactions SET status = 'leased', attempts = attempts + 1, lease_owner = ?2, \
             lease_expires_at_ms = ?3, completed_at_ms = NULL \
             WHERE partition = ?1 AND idempotency_key IN ( \
               SELECT idempotency_key FROM sync_reactions \
               WHERE partition = ?1 AND type IN (SELECT value FROM json_each(?4)) \
               AND ((status = 'pending' AND available_at_ms <= ?5) OR (status = 'leased' AND lease_expires_at_ms <= ?5)) \
               ORDER BY CASE WHEN status = 'leased' THEN lease_expires_at_ms ELSE available_at_ms END, \
               created_at_ms, idempotency_key LIMIT CAST(?6 AS INTEGER)) \
             RETURNING {COLUMNS}"
        ))
        .db()?;
    let rows: Vec<RawReaction> = stmt
        .query_map(
            (
                partition,
                &q.lease_owner,
                expires,
                string_list_json(&q.kinds),
                q.now_ms,
                q.limit,
            ),
            raw,
        )
        .db()?
        .collect::<rusqlite::Result<_>>()
        .db()?;
    let mut claimed = collect(rows)?;
    claimed.sort_by(|a, b| {
        (a.created_at_ms, &a.idempotency_key).cmp(&(b.created_at_ms, &b.idempotency_key))
    });
    Ok(claimed)
}

/// Owner-guarded completion.
pub(crate) fn complete(
    conn: &Connection,
    partition: &str,
    key: &str,
    owner: &str,
    at_ms: i64,
) -> Result<bool> {
    let changed = seam::cached(conn,
            "UPDATE sync_reactions SET status = 'completed', completed_at_ms = ?4, lease_owner = NULL, \
             lease_expires_at_ms = NULL WHERE partition = ?1 AND idempotency_key = ?2 \
             AND status = 'leased' AND lease_owner = ?3",
        )
        .db()?
        .execute((partition, key, owner, at_ms))
        .db()?;
    Ok(changed == 1)
}

/// Owner-guarded lease extension.
pub(crate) fn extend(
    conn: &Connection,
    partition: &str,
    key: &str,
    owner: &str,
    expires_ms: i64,
) -> Result<bool> {
    let changed = seam::cached(conn,
            "UPDATE sync_reactions SET lease_expires_at_ms = ?4 WHERE partition = ?1 AND idempotency_key = ?2 \
             AND status = 'leased' AND lease_owner = ?3",
        )
        .db()?
        .execute((partition, key, owner, expires_ms))
        .db()?;
    Ok(changed == 1)
}

/// Owner-guarded failure: retry (pending at `retry_at_ms`) or dead-letter.
pub(crate) fn fail(
    conn: &Connection,
    partition: &str,
    key: &str,
    update: &ReactionFailureUpdate,
) -> Result<bool> {
    let (status, available) = match update.retry_at_ms {
        Some(at) => (ReactionStatus::Pending, at),
        None => (ReactionStatus::DeadLetter, update.failure.at_ms),
    };
    let changed = seam::cached(conn,
            "UPDATE sync_reactions SET status = ?4, available_at_ms = ?5, last_failure = ?6, \
             lease_owner = NULL, lease_expires_at_ms = NULL \
             WHERE partition = ?1 AND idempotency_key = ?2 AND status = 'leased' AND lease_owner = ?3",
        )
        .db()?
        .execute((
            partition,
            key,
            &update.lease_owner,
            status.as_str(),
            available,
            update.failure.to_json(),
        ))
        .db()?;
    Ok(changed == 1)
}

/// Re-queues a dead-letter reaction.
pub(crate) fn retry(conn: &Connection, partition: &str, key: &str, now_ms: i64) -> Result<bool> {
    let changed = seam::cached(conn,
            "UPDATE sync_reactions SET status = 'pending', attempts = 0, available_at_ms = ?3, last_failure = NULL, \
             lease_owner = NULL, lease_expires_at_ms = NULL, completed_at_ms = NULL \
             WHERE partition = ?1 AND idempotency_key = ?2 AND status = 'dead-letter'",
        )
        .db()?
        .execute((partition, key, now_ms))
        .db()?;
    Ok(changed == 1)
}

/// One reaction.
pub(crate) fn get(conn: &Connection, partition: &str, key: &str) -> Result<Option<StoredReaction>> {
    seam::cached(
        conn,
        &format!(
            "SELECT {COLUMNS} FROM sync_reactions WHERE partition = ?1 AND idempotency_key = ?2"
        ),
    )
    .db()?
    .query_row((partition, key), raw)
    .optional()
    .db()?
    .map(reaction)
    .transpose()
}

/// Filtered listing, newest first.
pub(crate) fn list(
    conn: &Connection,
    partition: &str,
    q: &ReactionListQuery,
) -> Result<Vec<StoredReaction>> {
    if q.limit <= 0 {
        return Ok(Vec::new());
    }
    let statuses: Vec<&str> = q.statuses.iter().map(|s| s.as_str()).collect();
    let mut stmt = seam::cached(
        conn,
        &format!(
            "SELECT {COLUMNS} FROM sync_reactions WHERE partition = ?1 \
             AND (?2 = 0 OR status IN (SELECT value FROM json_each(?3))) \
             AND (?4 = 0 OR type IN (SELECT value FROM json_each(?5))) \
             ORDER BY created_at_ms DESC, idempotency_key DESC LIMIT CAST(?6 AS INTEGER)"
        ),
    )
    .db()?;
    let rows: Vec<RawReaction> = stmt
        .query_map(
            (
                partition,
                statuses.len() as i64,
                string_list_json(&statuses),
                q.kinds.len() as i64,
                string_list_json(&q.kinds),
                q.limit,
            ),
            raw,
        )
        .db()?
        .collect::<rusqlite::Result<_>>()
        .db()?;
    collect(rows)
}

/// Deletes at most `limit` aged completed / dead-letter rows, oldest first.
pub(crate) fn prune(
    conn: &Connection,
    partition: &str,
    q: &ReactionPruneQuery,
) -> Result<PrunedReactionCounts> {
    let mut stmt = seam::cached(
        conn,
        "DELETE FROM sync_reactions WHERE partition = ?1 AND idempotency_key IN ( \
               SELECT idempotency_key FROM ( \
                 SELECT idempotency_key, completed_at_ms AS due, 0 AS pri FROM sync_reactions \
                 WHERE partition = ?1 AND status = 'completed' AND completed_at_ms < ?2 \
                 UNION ALL \
                 SELECT idempotency_key, available_at_ms, 1 FROM sync_reactions \
                 WHERE partition = ?1 AND status = 'dead-letter' AND available_at_ms < ?3) \
               ORDER BY due, pri, idempotency_key LIMIT CAST(?4 AS INTEGER)) \
             RETURNING status",
    )
    .db()?;
    let statuses: Vec<String> = stmt
        .query_map(
            (
                partition,
                q.completed_before_ms,
                q.dead_letter_before_ms,
                q.limit,
            ),
            |row| row.get(0),
        )
        .db()?
        .collect::<rusqlite::Result<_>>()
        .db()?;
    let mut counts = PrunedReactionCounts::default();
    for status in statuses {
        if status == ReactionStatus::Completed.as_str() {
            counts.completed += 1;
        } else {
            counts.dead_letter += 1;
        }
    }
    Ok(counts)
}

impl ReactionsBackend for SqliteStorage {
    fn claim_reactions(
        &self,
        p: Partition<'_>,
        query: Request<'_, ReactionClaimQuery>,
    ) -> Result<Vec<StoredReaction>> {
        self.pools().write_once(|conn| claim(conn, &p, &query))
    }

    fn complete_reaction(
        &self,
        p: Partition<'_>,
        key: &str,
        owner: &str,
        at_ms: i64,
    ) -> Result<bool> {
        self.pools()
            .write_once(|conn| complete(conn, &p, key, owner, at_ms))
    }

    fn extend_reaction_lease(
        &self,
        p: Partition<'_>,
        key: &str,
        owner: &str,
        expires_ms: i64,
    ) -> Result<bool> {
        self.pools()
            .write_once(|conn| extend(conn, &p, key, owner, expires_ms))
    }

    fn fail_reaction(
        &self,
        p: Partition<'_>,
        key: &str,
        update: &ReactionFailureUpdate,
    ) -> Result<bool> {
        self.pools().write_once(|conn| fail(conn, &p, key, update))
    }

    fn retry_reaction(&self, p: Partition<'_>, key: &str, now_ms: i64) -> Result<bool> {
        self.pools().write_once(|conn| retry(conn, &p, key, now_ms))
    }

    fn get_reaction(&self, p: Partition<'_>, key: &str) -> Result<Option<StoredReaction>> {
        self.pools().read(|conn| get(conn, &p, key))
    }

    fn list_reactions(
        &self,
        p: Partition<'_>,
        query: &ReactionListQuery,
    ) -> Result<Vec<StoredReaction>> {
        self.pools().read(|conn| list(conn, &p, query))
    }

    fn prune_reactions(
        &self,
        p: Partition<'_>,
        query: Request<'_, ReactionPruneQuery>,
    ) -> Result<PrunedReactionCounts> {
        self.pools().write_once(|conn| prune(conn, &p, &query))
    }
}
