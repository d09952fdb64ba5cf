//! Client records and cursors (`storage-contract.md` §4.9, admin §4.12).

use postgres::types::ToSql;
use postgres::Row;
use sync_core::{ClientCursorInfo, ClientRecord, Result};

use crate::json::{parse_subscriptions, subscriptions_json};
use crate::pool::{col, Conn};
use crate::sql::quote_literal;

const RECORD_COLUMNS: &str =
    "client_id, actor_id, wire_version, cursor, updated_at_ms, subscriptions::text";
pub(crate) const PUT_SQL: &str = "INSERT INTO sync_clients \
    (partition, client_id, actor_id, wire_version, cursor, subscriptions, updated_at_ms) \
    VALUES ($1, $2, $3, $4, $5, ($6::text)::jsonb, $7) \
    ON CONFLICT (partition, client_id) DO UPDATE SET actor_id = excluded.actor_id, \
      wire_version = excluded.wire_version, cursor = excluded.cursor, \
      subscriptions = excluded.subscriptions, updated_at_ms = excluded.updated_at_ms";
/// The first term of a soft write's statement: `synchronous_commit` set to
/// the parameter `$p` (`off`, or the session's own level when null) for the
/// statement's own transaction only (`set_config(…, true)`), so with `off`
/// the commit does not wait for its WAL flush while the session keeps its
/// level (`docs/decisions.md`, "Client records without an fsync per pull").
macro_rules! soft_commit {
    ($p:literal) => {
        concat!(
            "WITH soft AS MATERIALIZED (SELECT set_config('synchronous_commit', COALESCE(",
            $p,
            "::text, current_setting('synchronous_commit')), true) AS level) "
        )
    };
}
/// Replaces an existing record of the same actor, as a soft write.
const REFRESH_SQL: &str = concat!(
    soft_commit!("$8"),
    "UPDATE sync_clients c SET wire_version = $4, cursor = $5, \
      subscriptions = ($6::text)::jsonb, updated_at_ms = $7 \
    FROM soft WHERE c.partition = $1 AND c.client_id = $2 AND c.actor_id = $3 RETURNING 1"
);
const ADVANCE_SQL: &str = concat!(
    soft_commit!("$7"),
    "UPDATE sync_clients c SET cursor = GREATEST(c.cursor, $5), \
      updated_at_ms = GREATEST(c.updated_at_ms, $6) \
    FROM soft WHERE c.partition = $1 AND c.client_id = $2 AND c.actor_id = $3 \
      AND EXISTS (SELECT 1 FROM sync_partition_registry r \
                  WHERE r.partition = $1 AND r.log_epoch = $4) \
    RETURNING 1"
);
const UPDATE_SQL: &str = "UPDATE sync_clients c SET cursor = GREATEST(c.cursor, $3), \
      updated_at_ms = GREATEST(c.updated_at_ms, $4) \
    WHERE c.partition = $1 AND c.client_id = $2 RETURNING 1";
const FLOOR_SQL: &str =
    "SELECT min(cursor) FROM sync_clients WHERE partition = $1 AND updated_at_ms >= $2";
const CURSORS_SQL: &str = "SELECT client_id, cursor, updated_at_ms FROM sync_clients \
    WHERE partition = $1 ORDER BY client_id COLLATE \"C\"";

fn get_sql() -> String {
    format!("SELECT {RECORD_COLUMNS} FROM sync_clients WHERE partition = $1 AND client_id = $2")
}

fn list_sql() -> String {
    format!(
        "SELECT {RECORD_COLUMNS} FROM sync_clients WHERE partition = $1 \
         ORDER BY updated_at_ms DESC, client_id COLLATE \"C\""
    )
}

fn record(row: &Row) -> Result<ClientRecord> {
    let subscriptions: String = col(row, 5)?;
    Ok(ClientRecord {
        client_id: col(row, 0)?,
        actor_id: col(row, 1)?,
        wire_version: col(row, 2)?,
        cursor: col(row, 3)?,
        updated_at_ms: col(row, 4)?,
        subscriptions: parse_subscriptions(&subscriptions)?,
    })
}

/// One record.
pub(crate) fn get(
    conn: &mut Conn,
    partition: &str,
    client_id: &str,
) -> Result<Option<ClientRecord>> {
    conn.query_opt(&get_sql(), &[&partition, &client_id])?
        .as_ref()
        .map(record)
        .transpose()
}

/// The arguments of [`PUT_SQL`] as literals, for an `EXECUTE` of
/// `named::PUT_CLIENT_RECORD` that travels in the `COMMIT` message; `None`
/// when a value holds NUL (no text literal can) — the caller then uses
/// [`put`].
pub(crate) fn put_args(partition: &str, r: &ClientRecord) -> Option<Vec<String>> {
    Some(vec![
        quote_literal(partition)?,
        quote_literal(&r.client_id)?,
        quote_literal(&r.actor_id)?,
        format!("({})::int4", r.wire_version),
        format!("({})::int8", r.cursor),
        quote_literal(&subscriptions_json(&r.subscriptions))?,
        format!("({})::int8", r.updated_at_ms),
    ])
}

/// Inserts or fully replaces a record.
pub(crate) fn put(conn: &mut Conn, partition: &str, r: &ClientRecord) -> Result<()> {
    let subscriptions = subscriptions_json(&r.subscriptions);
    conn.execute(PUT_SQL, &record_params(&partition, r, &subscriptions))
        .map(drop)
}

/// Replaces an existing record of the same actor without waiting for its
/// WAL flush; whether one was there (a new record or another actor's goes
/// through [`put`]). Idempotent: it sets every column to the given values.
pub(crate) fn refresh(
    conn: &mut Conn,
    partition: &str,
    r: &ClientRecord,
    level: Option<&str>,
) -> Result<bool> {
    let subscriptions = subscriptions_json(&r.subscriptions);
    let mut params = record_params(&partition, r, &subscriptions).to_vec();
    params.push(&level);
    Ok(conn.query_opt(REFRESH_SQL, &params)?.is_some())
}

/// The record's columns as `$1`…`$7` (partition, client, actor, wire
/// version, cursor, subscriptions as JSON text, time).
fn record_params<'a>(
    partition: &'a &'a str,
    r: &'a ClientRecord,
    subscriptions: &'a String,
) -> [&'a (dyn ToSql + Sync); 7] {
    [
        partition,
        &r.client_id,
        &r.actor_id,
        &r.wire_version,
        &r.cursor,
        subscriptions,
        &r.updated_at_ms,
    ]
}

/// Cursor summaries ordered by client id.
pub(crate) fn cursors(conn: &mut Conn, partition: &str) -> Result<Vec<ClientCursorInfo>> {
    conn.query(CURSORS_SQL, &[&partition])?
        .iter()
        .map(|row| {
            Ok(ClientCursorInfo {
                client_id: col(row, 0)?,
                cursor: col(row, 1)?,
                updated_at_ms: col(row, 2)?,
            })
        })
        .collect()
}

/// The guarded cursor move of an acknowledgement.
pub(crate) struct Advance<'a> {
    pub client_id: &'a str,
    pub actor_id: &'a str,
    pub log_epoch: &'a str,
    pub cursor: i64,
    pub at_ms: i64,
}

/// Actor- and epoch-guarded monotonic update, a soft write at `level`
/// (see [`refresh`]); whether the guard matched.
pub(crate) fn advance(
    conn: &mut Conn,
    partition: &str,
    a: &Advance<'_>,
    level: Option<&str>,
) -> Result<bool> {
    let rows = conn.query(
        ADVANCE_SQL,
        &[
            &partition,
            &a.client_id,
            &a.actor_id,
            &a.log_epoch,
            &a.cursor,
            &a.at_ms,
            &level,
        ],
    )?;
    Ok(rows.len() == 1)
}

/// Unguarded monotonic update; false for a missing record.
pub(crate) fn update(
    conn: &mut Conn,
    partition: &str,
    client_id: &str,
    cursor: i64,
    at_ms: i64,
) -> Result<bool> {
    let rows = conn.query(UPDATE_SQL, &[&partition, &client_id, &cursor, &at_ms])?;
    Ok(rows.len() == 1)
}

/// Minimum cursor of records updated at or after the cutoff.
pub(crate) fn floor(conn: &mut Conn, partition: &str, cutoff_ms: i64) -> Result<Option<i64>> {
    let row = conn.query_one(FLOOR_SQL, &[&partition, &cutoff_ms])?;
    col(&row, 0)
}

/// Every record, newest update first (admin).
pub(crate) fn list(conn: &mut Conn, partition: &str) -> Result<Vec<ClientRecord>> {
    conn.query(&list_sql(), &[&partition])?
        .iter()
        .map(record)
        .collect()
}
