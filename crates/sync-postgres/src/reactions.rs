//! Durable reactions (`storage-contract.md` §4.10): enqueue inside a push,
//! single-winner claims with `FOR UPDATE SKIP LOCKED`, owner-guarded
//! transitions through `RETURNING`.

use postgres::Row;
use sync_core::front::{Partition, ReactionsBackend, Request};
use sync_core::limits::MAX_SAFE_INTEGER;
use sync_core::{
    Error, ErrorCode, NewReaction, PrunedReactionCounts, ReactionClaimQuery, ReactionFailure,
    ReactionFailureUpdate, ReactionListQuery, ReactionPruneQuery, ReactionStatus, Result,
    StoredReaction,
};

use crate::errors::{classify, Site};
use crate::json::{parse_value, read_json};
use crate::pool::{col, Conn};
use crate::PostgresStorage;

const COLUMNS: &str = "r.idempotency_key, r.type, r.version, r.payload::text, r.source_client_id, \
    r.source_client_commit_id, r.source_commit_seq, r.created_at_ms, r.max_attempts, r.status, \
    r.attempts, r.available_at_ms, r.lease_owner, r.lease_expires_at_ms, r.completed_at_ms, \
    r.last_failure::text";

const ENQUEUE_SQL: &str = "INSERT INTO sync_reactions (partition, idempotency_key, type, version, \
      payload, source_client_id, source_client_commit_id, source_commit_seq, created_at_ms, \
      available_at_ms, status, attempts, max_attempts) \
    SELECT $1::text, u.k, u.t, u.v, u.p::jsonb, u.sc, u.scc, u.ss, u.ca, u.ca, 'pending', 0, u.ma \
    FROM unnest($2::text[], $3::text[], $4::int4[], $5::text[], $6::text[], $7::text[], \
      $8::int8[], $9::int8[], $10::int4[]) AS u(k, t, v, p, sc, scc, ss, ca, ma)";

fn claim_sql() -> String {
    format!(
        "WITH due AS (SELECT d.idempotency_key FROM sync_reactions d \
           WHERE d.partition = $1 AND d.type = ANY($2::text[]) \
             AND ((d.status = 'pending' AND d.available_at_ms <= $3) \
               OR (d.status = 'leased' AND d.lease_expires_at_ms <= $3)) \
           ORDER BY CASE WHEN d.status = 'leased' THEN d.lease_expires_at_ms ELSE d.available_at_ms END, \
             d.created_at_ms, d.idempotency_key COLLATE \"C\" \
           LIMIT $4 FOR UPDATE SKIP LOCKED) \
         UPDATE sync_reactions r SET status = 'leased', attempts = r.attempts + 1, \
           lease_owner = $5, lease_expires_at_ms = $6, completed_at_ms = NULL \
         FROM due WHERE r.partition = $1 AND r.idempotency_key = due.idempotency_key \
           AND ((r.status = 'pending' AND r.available_at_ms <= $3) \
             OR (r.status = 'leased' AND r.lease_expires_at_ms <= $3)) \
         RETURNING {COLUMNS}"
    )
}

fn select_sql(filter: &str) -> String {
    format!("SELECT {COLUMNS} FROM sync_reactions r WHERE r.partition = $1 {filter}")
}

const COMPLETE_SQL: &str = "UPDATE sync_reactions SET status = 'completed', completed_at_ms = $4, \
      lease_owner = NULL, lease_expires_at_ms = NULL \
    WHERE partition = $1 AND idempotency_key = $2 AND status = 'leased' AND lease_owner = $3 \
    RETURNING 1";
const EXTEND_SQL: &str = "UPDATE sync_reactions SET lease_expires_at_ms = $4 \
    WHERE partition = $1 AND idempotency_key = $2 AND status = 'leased' AND lease_owner = $3 \
    RETURNING 1";
const FAIL_SQL: &str = "UPDATE sync_reactions SET status = $4, available_at_ms = $5, \
      last_failure = ($6::text)::jsonb, lease_owner = NULL, lease_expires_at_ms = NULL \
    WHERE partition = $1 AND idempotency_key = $2 AND status = 'leased' AND lease_owner = $3 \
    RETURNING 1";
const RETRY_SQL: &str = "UPDATE sync_reactions SET status = 'pending', attempts = 0, \
      available_at_ms = $3, last_failure = NULL, lease_owner = NULL, lease_expires_at_ms = NULL, \
      completed_at_ms = NULL \
    WHERE partition = $1 AND idempotency_key = $2 AND status = 'dead-letter' RETURNING 1";
const PRUNE_SQL: &str = "WITH victims AS (SELECT v.idempotency_key FROM sync_reactions v \
      WHERE v.partition = $1 AND ((v.status = 'completed' AND v.completed_at_ms < $2) \
        OR (v.status = 'dead-letter' AND v.available_at_ms < $3)) \
      ORDER BY CASE WHEN v.status = 'completed' THEN v.completed_at_ms ELSE v.available_at_ms END, \
        v.status COLLATE \"C\", v.idempotency_key COLLATE \"C\" \
      LIMIT $4 FOR UPDATE SKIP LOCKED) \
    DELETE FROM sync_reactions r USING victims \
    WHERE r.partition = $1 AND r.idempotency_key = victims.idempotency_key \
      AND ((r.status = 'completed' AND r.completed_at_ms < $2) \
        OR (r.status = 'dead-letter' AND r.available_at_ms < $3)) \
    RETURNING r.status";

fn reaction(row: &Row) -> Result<StoredReaction> {
    let payload: String = col(row, 3)?;
    let status: String = col(row, 9)?;
    let failure: Option<String> = col(row, 15)?;
    Ok(StoredReaction {
        idempotency_key: col(row, 0)?,
        kind: col(row, 1)?,
        version: col(row, 2)?,
        payload: parse_value(&payload, "payload")?,
        source_client_id: col(row, 4)?,
        source_client_commit_id: col(row, 5)?,
        source_commit_seq: col(row, 6)?,
        created_at_ms: col(row, 7)?,
        max_attempts: col(row, 8)?,
        status: ReactionStatus::parse(&status).ok_or_else(|| {
            Error::new(ErrorCode::Backend).detail("reason", "unknown_reaction_status")
        })?,
        attempts: col(row, 10)?,
        available_at_ms: col(row, 11)?,
        lease_owner: col(row, 12)?,
        lease_expires_at_ms: col(row, 13)?,
        completed_at_ms: col(row, 14)?,
        last_failure: failure
            .as_deref()
            .and_then(read_json)
            .and_then(|v| ReactionFailure::from_value(&v)),
    })
}

/// Inserts pending reactions; an existing key is `duplicate_reaction`.
pub(crate) fn enqueue(conn: &mut Conn, partition: &str, reactions: &[NewReaction]) -> Result<()> {
    if reactions.is_empty() {
        return Ok(());
    }
    let keys: Vec<&str> = reactions
        .iter()
        .map(|r| r.idempotency_key.as_str())
        .collect();
    let kinds: Vec<&str> = reactions.iter().map(|r| r.kind.as_str()).collect();
    let versions: Vec<i32> = reactions.iter().map(|r| r.version).collect();
    let payloads: Vec<String> = reactions.iter().map(|r| r.payload.to_string()).collect();
    let clients: Vec<&str> = reactions
        .iter()
        .map(|r| r.source_client_id.as_str())
        .collect();
    let commits: Vec<&str> = reactions
        .iter()
        .map(|r| r.source_client_commit_id.as_str())
        .collect();
    let seqs: Vec<i64> = reactions.iter().map(|r| r.source_commit_seq).collect();
    let created: Vec<i64> = reactions.iter().map(|r| r.created_at_ms).collect();
    let max_attempts: Vec<i32> = reactions.iter().map(|r| r.max_attempts).collect();
    conn.query_raw(
        ENQUEUE_SQL,
        &[
            &partition,
            &keys,
            &kinds,
            &versions,
            &payloads,
            &clients,
            &commits,
            &seqs,
            &created,
            &max_attempts,
        ],
    )
    .map(|_| ())
    .map_err(|e| classify(e, Site::EnqueueReactions))
}

/// Leases due reactions; returned ordered by `(created_at_ms, key)`.
pub(crate) fn claim(
    conn: &mut Conn,
    partition: &str,
    q: &ReactionClaimQuery,
) -> Result<Vec<StoredReaction>> {
    if q.kinds.is_empty() || q.limit <= 0 {
        return Ok(Vec::new());
    }
    let expires = q
        .now_ms
        .saturating_add(q.lease_duration_ms)
        .min(MAX_SAFE_INTEGER);
    let rows = conn.query(
        &claim_sql(),
        &[
            &partition,
            &q.kinds,
            &q.now_ms,
            &q.limit,
            &q.lease_owner,
            &expires,
        ],
    )?;
    let mut claimed = rows.iter().map(reaction).collect::<Result<Vec<_>>>()?;
    claimed.sort_by(|a, b| {
        (a.created_at_ms, a.idempotency_key.as_bytes())
            .cmp(&(b.created_at_ms, b.idempotency_key.as_bytes()))
    });
    Ok(claimed)
}

/// Owner-guarded completion.
pub(crate) fn complete(
    conn: &mut Conn,
    partition: &str,
    key: &str,
    owner: &str,
    at_ms: i64,
) -> Result<bool> {
    Ok(conn
        .query(COMPLETE_SQL, &[&partition, &key, &owner, &at_ms])?
        .len()
        == 1)
}

/// Owner-guarded lease extension.
pub(crate) fn extend(
    conn: &mut Conn,
    partition: &str,
    key: &str,
    owner: &str,
    expires_ms: i64,
) -> Result<bool> {
    Ok(conn
        .query(EXTEND_SQL, &[&partition, &key, &owner, &expires_ms])?
        .len()
        == 1)
}

/// Owner-guarded failure: retry (pending at `retry_at_ms`) or dead-letter.
pub(crate) fn fail(
    conn: &mut Conn,
    partition: &str,
    key: &str,
    update: &ReactionFailureUpdate,
) -> Result<bool> {
    let (status, available) = match update.retry_at_ms {
        Some(at) => (ReactionStatus::Pending, at),
        None => (ReactionStatus::DeadLetter, update.failure.at_ms),
    };
    let failure = update.failure.to_json();
    let rows = conn.query(
        FAIL_SQL,
        &[
            &partition,
            &key,
            &update.lease_owner,
            &status.as_str(),
            &available,
            &failure,
        ],
    )?;
    Ok(rows.len() == 1)
}

/// Re-queues a dead-letter reaction.
pub(crate) fn retry(conn: &mut Conn, partition: &str, key: &str, now_ms: i64) -> Result<bool> {
    Ok(conn.query(RETRY_SQL, &[&partition, &key, &now_ms])?.len() == 1)
}

/// One reaction.
pub(crate) fn get(conn: &mut Conn, partition: &str, key: &str) -> Result<Option<StoredReaction>> {
    conn.query_opt(
        &select_sql("AND r.idempotency_key = $2"),
        &[&partition, &key],
    )?
    .as_ref()
    .map(reaction)
    .transpose()
}

/// Filtered listing, newest first.
pub(crate) fn list(
    conn: &mut Conn,
    partition: &str,
    q: &ReactionListQuery,
) -> Result<Vec<StoredReaction>> {
    if q.limit <= 0 {
        return Ok(Vec::new());
    }
    let statuses: Option<Vec<&str>> =
        (!q.statuses.is_empty()).then(|| q.statuses.iter().map(|s| s.as_str()).collect());
    let kinds: Option<&Vec<String>> = (!q.kinds.is_empty()).then_some(&q.kinds);
    let sql = select_sql(
        "AND ($2::text[] IS NULL OR r.status = ANY($2::text[])) \
         AND ($3::text[] IS NULL OR r.type = ANY($3::text[])) \
         ORDER BY r.created_at_ms DESC, r.idempotency_key COLLATE \"C\" DESC LIMIT $4",
    );
    conn.query(&sql, &[&partition, &statuses, &kinds, &q.limit])?
        .iter()
        .map(reaction)
        .collect()
}

/// Deletes at most `limit` aged completed / dead-letter reactions, oldest first.
pub(crate) fn prune(
    conn: &mut Conn,
    partition: &str,
    q: &ReactionPruneQuery,
) -> Result<PrunedReactionCounts> {
    let mut counts = PrunedReactionCounts::default();
    if q.limit <= 0 {
        return Ok(counts);
    }
    let rows = conn.query(
        PRUNE_SQL,
        &[
            &partition,
            &q.completed_before_ms,
            &q.dead_letter_before_ms,
            &q.limit,
        ],
    )?;
    for row in &rows {
        let status: String = col(row, 0)?;
        match ReactionStatus::parse(&status) {
            Some(ReactionStatus::Completed) => counts.completed += 1,
            Some(ReactionStatus::DeadLetter) => counts.dead_letter += 1,
            _ => {}
        }
    }
    Ok(counts)
}

impl ReactionsBackend for PostgresStorage {
    fn claim_reactions(
        &self,
        p: Partition<'_>,
        query: Request<'_, ReactionClaimQuery>,
    ) -> Result<Vec<StoredReaction>> {
        self.with_conn_write(|c| claim(c, &p, &query))
    }

    fn complete_reaction(
        &self,
        p: Partition<'_>,
        key: &str,
        owner: &str,
        at_ms: i64,
    ) -> Result<bool> {
        self.with_conn_write(|c| complete(c, &p, key, owner, at_ms))
    }

    fn extend_reaction_lease(
        &self,
        p: Partition<'_>,
        key: &str,
        owner: &str,
        expires_ms: i64,
    ) -> Result<bool> {
        self.with_conn_write(|c| extend(c, &p, key, owner, expires_ms))
    }

    fn fail_reaction(
        &self,
        p: Partition<'_>,
        key: &str,
        update: &ReactionFailureUpdate,
    ) -> Result<bool> {
        self.with_conn_write(|c| fail(c, &p, key, update))
    }

    fn retry_reaction(&self, p: Partition<'_>, key: &str, now_ms: i64) -> Result<bool> {
        self.with_conn_write(|c| retry(c, &p, key, now_ms))
    }

    fn get_reaction(&self, p: Partition<'_>, key: &str) -> Result<Option<StoredReaction>> {
        self.with_conn(|c| get(c, &p, key))
    }

    fn list_reactions(
        &self,
        p: Partition<'_>,
        query: &ReactionListQuery,
    ) -> Result<Vec<StoredReaction>> {
        self.with_conn(|c| list(c, &p, query))
    }

    fn prune_reactions(
        &self,
        p: Partition<'_>,
        query: Request<'_, ReactionPruneQuery>,
    ) -> Result<PrunedReactionCounts> {
        self.with_conn_write(|c| prune(c, &p, &query))
    }
}
