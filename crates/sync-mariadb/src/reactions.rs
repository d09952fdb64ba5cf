//! Durable after-commit reactions (`storage-contract.md` §4.10,
//! `docs/design/mariadb.md` §9.4): enqueue in the push transaction;
//! claims and prunes pick their rows with `FOR UPDATE SKIP LOCKED`, so two
//! claimers never take the same reaction; owner-guarded transitions are
//! single `UPDATE`s whose matched-row count (`CLIENT_FOUND_ROWS`) says
//! whether they applied.

use mysql::Value;
use sync_core::front::{Partition, ReactionsBackend, Request};
use sync_core::limits::MAX_SAFE_INTEGER;
use sync_core::{
    NewReaction, PrunedReactionCounts, ReactionClaimQuery, ReactionFailure, ReactionFailureUpdate,
    ReactionListQuery, ReactionPruneQuery, ReactionStatus, Result, StoredReaction,
};

use crate::errors::Site;
use crate::pool::Conn;
use crate::values::corrupt;
use crate::MariadbStorage;

const COLUMNS: &str = "`idempotency_key`, `type`, `version`, `payload`, `source_client_id`, \
`source_client_commit_id`, `source_commit_seq`, `created_at_ms`, `max_attempts`, `status`, \
`attempts`, `available_at_ms`, `lease_owner`, `lease_expires_at_ms`, `completed_at_ms`, \
`last_failure`";

fn reaction(row: mysql::Row) -> Result<StoredReaction> {
    fn get<T: mysql::prelude::FromValue>(row: &mysql::Row, i: usize) -> Result<T> {
        match row.get_opt::<T, usize>(i) {
            Some(Ok(value)) => Ok(value),
            _ => Err(corrupt("reaction_column")),
        }
    }
    let json = |text: String| -> Result<serde_json::Value> {
        serde_json::from_str(&text).map_err(|_| corrupt("reaction_json"))
    };
    let last_failure = match get::<Option<String>>(&row, 15)? {
        None => None,
        Some(text) => Some(
            ReactionFailure::from_value(&json(text)?)
                .ok_or_else(|| corrupt("reaction_failure_unreadable"))?,
        ),
    };
    let status: String = get(&row, 9)?;
    Ok(StoredReaction {
        idempotency_key: get(&row, 0)?,
        kind: get(&row, 1)?,
        version: get(&row, 2)?,
        payload: json(get(&row, 3)?)?,
        source_client_id: get(&row, 4)?,
        source_client_commit_id: get(&row, 5)?,
        source_commit_seq: get(&row, 6)?,
        created_at_ms: get(&row, 7)?,
        max_attempts: get(&row, 8)?,
        status: ReactionStatus::parse(&status).ok_or_else(|| corrupt("reaction_status_unknown"))?,
        attempts: get(&row, 10)?,
        available_at_ms: get(&row, 11)?,
        lease_owner: get(&row, 12)?,
        lease_expires_at_ms: get(&row, 13)?,
        completed_at_ms: get(&row, 14)?,
        last_failure,
    })
}

/// Inserts the reactions in the push transaction; a key that exists is
/// `sync.storage.duplicate_reaction`.
pub(crate) fn enqueue(conn: &mut Conn, partition: &str, reactions: &[NewReaction]) -> Result<()> {
    for r in reactions {
        conn.exec_at(
            "INSERT INTO `sync_reactions` (`partition`, `idempotency_key`, `type`, `version`, \
             `payload`, `source_client_id`, `source_client_commit_id`, `source_commit_seq`, \
             `created_at_ms`, `available_at_ms`, `status`, `attempts`, `max_attempts`) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', 0, ?)",
            vec![
                Value::from(partition),
                r.idempotency_key.as_str().into(),
                r.kind.as_str().into(),
                r.version.into(),
                r.payload.to_string().into(),
                r.source_client_id.as_str().into(),
                r.source_client_commit_id.as_str().into(),
                r.source_commit_seq.into(),
                r.created_at_ms.into(),
                r.created_at_ms.into(),
                r.max_attempts.into(),
            ],
            Site::EnqueueReactions,
        )?;
    }
    Ok(())
}

fn marks(count: usize) -> String {
    vec!["?"; count].join(", ")
}

fn by_keys(conn: &mut Conn, partition: &str, keys: &[String]) -> Result<Vec<StoredReaction>> {
    if keys.is_empty() {
        return Ok(Vec::new());
    }
    let mut params: Vec<Value> = vec![partition.into()];
    params.extend(keys.iter().map(|k| Value::from(k.as_str())));
    let rows: Vec<mysql::Row> = conn.rows(
        &format!(
            "SELECT {COLUMNS} FROM `sync_reactions` WHERE `partition` = ? \
             AND `idempotency_key` IN ({}) ORDER BY `created_at_ms`, `idempotency_key`",
            marks(keys.len())
        ),
        params,
    )?;
    rows.into_iter().map(reaction).collect()
}

/// Claims due reactions (the caller runs it in a transaction): the due keys
/// locked with `SKIP LOCKED`, leased, then read back.
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
    let mut params: Vec<Value> = vec![partition.into()];
    params.extend(q.kinds.iter().map(|k| Value::from(k.as_str())));
    params.extend([q.now_ms.into(), q.now_ms.into(), q.limit.into()]);
    let keys: Vec<String> = conn.rows(
        &format!(
            "SELECT `idempotency_key` FROM `sync_reactions` WHERE `partition` = ? AND `type` IN ({}) \
             AND ((`status` = 'pending' AND `available_at_ms` <= ?) \
               OR (`status` = 'leased' AND `lease_expires_at_ms` <= ?)) \
             ORDER BY CASE WHEN `status` = 'leased' THEN `lease_expires_at_ms` ELSE `available_at_ms` END, \
             `created_at_ms`, `idempotency_key` LIMIT ? FOR UPDATE SKIP LOCKED",
            marks(q.kinds.len())
        ),
        params,
    )?;
    if keys.is_empty() {
        return Ok(Vec::new());
    }
    let mut params: Vec<Value> = vec![
        q.lease_owner.as_str().into(),
        expires.into(),
        partition.into(),
    ];
    params.extend(keys.iter().map(|k| Value::from(k.as_str())));
    conn.exec(
        &format!(
            "UPDATE `sync_reactions` SET `status` = 'leased', `attempts` = `attempts` + 1, \
             `lease_owner` = ?, `lease_expires_at_ms` = ?, `completed_at_ms` = NULL \
             WHERE `partition` = ? AND `idempotency_key` IN ({})",
            marks(keys.len())
        ),
        params,
    )?;
    by_keys(conn, partition, &keys)
}

/// `leased` by `owner` → `completed`.
pub(crate) fn complete(
    conn: &mut Conn,
    partition: &str,
    key: &str,
    owner: &str,
    at_ms: i64,
) -> Result<bool> {
    Ok(conn.exec(
        "UPDATE `sync_reactions` SET `status` = 'completed', `completed_at_ms` = ?, \
         `lease_owner` = NULL, `lease_expires_at_ms` = NULL WHERE `partition` = ? \
         AND `idempotency_key` = ? AND `status` = 'leased' AND `lease_owner` = ?",
        (at_ms, partition, key, owner),
    )? == 1)
}

/// Moves the lease of `owner` to `expires_ms`.
pub(crate) fn extend(
    conn: &mut Conn,
    partition: &str,
    key: &str,
    owner: &str,
    expires_ms: i64,
) -> Result<bool> {
    Ok(conn.exec(
        "UPDATE `sync_reactions` SET `lease_expires_at_ms` = ? WHERE `partition` = ? \
         AND `idempotency_key` = ? AND `status` = 'leased' AND `lease_owner` = ?",
        (expires_ms, partition, key, owner),
    )? == 1)
}

/// A failed attempt: back to `pending` at the retry time, or `dead-letter`.
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
    Ok(conn.exec(
        "UPDATE `sync_reactions` SET `status` = ?, `available_at_ms` = ?, `last_failure` = ?, \
         `lease_owner` = NULL, `lease_expires_at_ms` = NULL WHERE `partition` = ? \
         AND `idempotency_key` = ? AND `status` = 'leased' AND `lease_owner` = ?",
        (
            status.as_str(),
            available,
            update.failure.to_json(),
            partition,
            key,
            &update.lease_owner,
        ),
    )? == 1)
}

/// A dead letter back to `pending` with its attempts reset.
pub(crate) fn retry(conn: &mut Conn, partition: &str, key: &str, now_ms: i64) -> Result<bool> {
    Ok(conn.exec(
        "UPDATE `sync_reactions` SET `status` = 'pending', `attempts` = 0, `available_at_ms` = ?, \
         `last_failure` = NULL, `lease_owner` = NULL, `lease_expires_at_ms` = NULL, \
         `completed_at_ms` = NULL WHERE `partition` = ? AND `idempotency_key` = ? \
         AND `status` = 'dead-letter'",
        (now_ms, partition, key),
    )? == 1)
}

/// One reaction.
pub(crate) fn get(conn: &mut Conn, partition: &str, key: &str) -> Result<Option<StoredReaction>> {
    Ok(by_keys(conn, partition, &[key.to_owned()])?
        .into_iter()
        .next())
}

/// Reactions, newest first, filtered by status and kind.
pub(crate) fn list(
    conn: &mut Conn,
    partition: &str,
    q: &ReactionListQuery,
) -> Result<Vec<StoredReaction>> {
    if q.limit <= 0 {
        return Ok(Vec::new());
    }
    let mut sql = format!("SELECT {COLUMNS} FROM `sync_reactions` WHERE `partition` = ?");
    let mut params: Vec<Value> = vec![partition.into()];
    if !q.statuses.is_empty() {
        sql.push_str(&format!(" AND `status` IN ({})", marks(q.statuses.len())));
        params.extend(q.statuses.iter().map(|s| Value::from(s.as_str())));
    }
    if !q.kinds.is_empty() {
        sql.push_str(&format!(" AND `type` IN ({})", marks(q.kinds.len())));
        params.extend(q.kinds.iter().map(|k| Value::from(k.as_str())));
    }
    sql.push_str(" ORDER BY `created_at_ms` DESC, `idempotency_key` DESC LIMIT ?");
    params.push(q.limit.into());
    let rows: Vec<mysql::Row> = conn.rows(&sql, params)?;
    rows.into_iter().map(reaction).collect()
}

/// Deletes a bounded batch of old completed and dead-letter reactions (the
/// caller runs it in a transaction).
pub(crate) fn prune(
    conn: &mut Conn,
    partition: &str,
    q: &ReactionPruneQuery,
) -> Result<PrunedReactionCounts> {
    if q.limit <= 0 {
        return Ok(PrunedReactionCounts::default());
    }
    let keys: Vec<(String, String)> = conn.rows(
        "SELECT `idempotency_key`, `status` FROM ( \
           SELECT `idempotency_key`, `status`, `completed_at_ms` AS due, 0 AS pri FROM `sync_reactions` \
           WHERE `partition` = ? AND `status` = 'completed' AND `completed_at_ms` < ? \
           UNION ALL \
           SELECT `idempotency_key`, `status`, `available_at_ms`, 1 FROM `sync_reactions` \
           WHERE `partition` = ? AND `status` = 'dead-letter' AND `available_at_ms` < ?) AS d \
         ORDER BY due, pri, `idempotency_key` LIMIT ?",
        (
            partition,
            q.completed_before_ms,
            partition,
            q.dead_letter_before_ms,
            q.limit,
        ),
    )?;
    let mut counts = PrunedReactionCounts::default();
    for (key, status) in keys {
        let deleted = conn.exec(
            "DELETE FROM `sync_reactions` WHERE `partition` = ? AND `idempotency_key` = ? \
             AND `status` = ?",
            (partition, &key, &status),
        )?;
        if deleted == 1 {
            if status == ReactionStatus::Completed.as_str() {
                counts.completed += 1;
            } else {
                counts.dead_letter += 1;
            }
        }
    }
    Ok(counts)
}

impl ReactionsBackend for MariadbStorage {
    fn claim_reactions(
        &self,
        p: Partition<'_>,
        query: Request<'_, sync_core::ReactionClaimQuery>,
    ) -> Result<Vec<sync_core::StoredReaction>> {
        self.with_write(|c| claim(c, p.as_str(), query.get()))
    }

    fn complete_reaction(
        &self,
        p: Partition<'_>,
        key: &str,
        lease_owner: &str,
        completed_at_ms: i64,
    ) -> Result<bool> {
        self.with_conn(|c| complete(c, p.as_str(), key, lease_owner, completed_at_ms))
    }

    fn extend_reaction_lease(
        &self,
        p: Partition<'_>,
        key: &str,
        lease_owner: &str,
        lease_expires_at_ms: i64,
    ) -> Result<bool> {
        self.with_conn(|c| extend(c, p.as_str(), key, lease_owner, lease_expires_at_ms))
    }

    fn fail_reaction(
        &self,
        p: Partition<'_>,
        key: &str,
        update: &sync_core::ReactionFailureUpdate,
    ) -> Result<bool> {
        self.with_conn(|c| fail(c, p.as_str(), key, update))
    }

    fn retry_reaction(&self, p: Partition<'_>, key: &str, now_ms: i64) -> Result<bool> {
        self.with_conn(|c| retry(c, p.as_str(), key, now_ms))
    }

    fn get_reaction(
        &self,
        p: Partition<'_>,
        key: &str,
    ) -> Result<Option<sync_core::StoredReaction>> {
        self.with_conn(|c| get(c, p.as_str(), key))
    }

    fn list_reactions(
        &self,
        p: Partition<'_>,
        query: &sync_core::ReactionListQuery,
    ) -> Result<Vec<sync_core::StoredReaction>> {
        self.with_conn(|c| list(c, p.as_str(), query))
    }

    fn prune_reactions(
        &self,
        p: Partition<'_>,
        query: Request<'_, sync_core::ReactionPruneQuery>,
    ) -> Result<sync_core::PrunedReactionCounts> {
        self.with_write(|c| prune(c, p.as_str(), query.get()))
    }
}
