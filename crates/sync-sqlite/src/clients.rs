//! Client records and cursors (`storage-contract.md` §4.9).

use rusqlite::{Connection, OptionalExtension, Row};
use sync_core::{ClientCursorInfo, ClientRecord, Result};

use crate::errors::DbResultExt;
use crate::seam;
use crate::values::{parse_subscriptions, subscriptions_json, to_i32};

const COLUMNS: &str = "client_id, actor_id, wire_version, cursor, updated_at_ms, subscriptions";

type RawRecord = (String, String, i64, i64, i64, String);

fn raw(row: &Row<'_>) -> rusqlite::Result<RawRecord> {
    Ok((
        row.get(0)?,
        row.get(1)?,
        row.get(2)?,
        row.get(3)?,
        row.get(4)?,
        row.get(5)?,
    ))
}

fn record(raw: RawRecord) -> Result<ClientRecord> {
    let (client_id, actor_id, wire_version, cursor, updated_at_ms, subscriptions) = raw;
    Ok(ClientRecord {
        client_id,
        actor_id,
        wire_version: to_i32(wire_version)?,
        cursor,
        updated_at_ms,
        subscriptions: parse_subscriptions(&subscriptions)?,
    })
}

/// One record.
pub(crate) fn get(
    conn: &Connection,
    partition: &str,
    client_id: &str,
) -> Result<Option<ClientRecord>> {
    seam::cached(
        conn,
        &format!("SELECT {COLUMNS} FROM sync_clients WHERE partition = ?1 AND client_id = ?2"),
    )
    .db()?
    .query_row((partition, client_id), raw)
    .optional()
    .db()?
    .map(record)
    .transpose()
}

/// Inserts or fully replaces a record.
pub(crate) fn put(conn: &Connection, partition: &str, r: &ClientRecord) -> Result<()> {
    write(conn,
        "INSERT INTO sync_clients (partition, client_id, actor_id, wire_version, cursor, subscriptions, updated_at_ms) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT (partition, client_id) DO UPDATE SET \
         actor_id = excluded.actor_id, wire_version = excluded.wire_version, cursor = excluded.cursor, \
         subscriptions = excluded.subscriptions, updated_at_ms = excluded.updated_at_ms",
        partition,
        r,
    )
    .map(drop)
}

/// Replaces an existing record of the same actor (the soft write of a
/// pull); returns whether one was there. A new record or another actor's
/// goes through [`put`].
pub(crate) fn refresh(conn: &Connection, partition: &str, r: &ClientRecord) -> Result<bool> {
    write(conn,
        "UPDATE sync_clients SET wire_version = ?4, cursor = ?5, subscriptions = ?6, updated_at_ms = ?7 \
         WHERE partition = ?1 AND client_id = ?2 AND actor_id = ?3",
        partition,
        r,
    )
    .map(|changed| changed == 1)
}

/// Runs `sql` with the record's columns as `?1`…`?7` (partition, client,
/// actor, wire version, cursor, subscriptions, time); rows changed.
fn write(conn: &Connection, sql: &str, partition: &str, r: &ClientRecord) -> Result<usize> {
    seam::cached(conn, sql)
        .db()?
        .execute((
            partition,
            &r.client_id,
            &r.actor_id,
            r.wire_version,
            r.cursor,
            subscriptions_json(&r.subscriptions),
            r.updated_at_ms,
        ))
        .db()
}

/// Cursor summaries ordered by client id.
pub(crate) fn cursors(conn: &Connection, partition: &str) -> Result<Vec<ClientCursorInfo>> {
    let mut stmt = seam::cached(conn,
            "SELECT client_id, cursor, updated_at_ms FROM sync_clients WHERE partition = ?1 ORDER BY client_id",
        )
        .db()?;
    let rows = stmt
        .query_map([partition], |row| {
            Ok(ClientCursorInfo {
                client_id: row.get(0)?,
                cursor: row.get(1)?,
                updated_at_ms: row.get(2)?,
            })
        })
        .db()?;
    rows.collect::<rusqlite::Result<_>>().db()
}

/// Actor- and epoch-guarded monotonic update in one statement.
pub(crate) fn advance(
    conn: &Connection,
    partition: &str,
    client_id: &str,
    actor_id: &str,
    epoch: &str,
    cursor: i64,
    at_ms: i64,
) -> Result<bool> {
    let changed = seam::cached(conn,
            "UPDATE sync_clients SET cursor = max(cursor, ?5), updated_at_ms = max(updated_at_ms, ?6) \
             WHERE partition = ?1 AND client_id = ?2 AND actor_id = ?3 \
             AND EXISTS (SELECT 1 FROM sync_partition_registry WHERE partition = ?1 AND log_epoch = ?4)",
        )
        .db()?
        .execute((partition, client_id, actor_id, epoch, cursor, at_ms))
        .db()?;
    Ok(changed == 1)
}

/// Unguarded monotonic update.
pub(crate) fn update(
    conn: &Connection,
    partition: &str,
    client_id: &str,
    cursor: i64,
    at_ms: i64,
) -> Result<bool> {
    let changed = seam::cached(
        conn,
        "UPDATE sync_clients SET cursor = max(cursor, ?3), updated_at_ms = max(updated_at_ms, ?4) \
             WHERE partition = ?1 AND client_id = ?2",
    )
    .db()?
    .execute((partition, client_id, cursor, at_ms))
    .db()?;
    Ok(changed == 1)
}

/// Minimum cursor of records updated at or after the cutoff.
pub(crate) fn active_floor(
    conn: &Connection,
    partition: &str,
    cutoff_ms: i64,
) -> Result<Option<i64>> {
    seam::cached(
        conn,
        "SELECT min(cursor) FROM sync_clients WHERE partition = ?1 AND updated_at_ms >= ?2",
    )
    .db()?
    .query_row((partition, cutoff_ms), |row| row.get(0))
    .db()
}

/// Every record, newest update first, then by client id.
pub(crate) fn list(conn: &Connection, partition: &str) -> Result<Vec<ClientRecord>> {
    let mut stmt = seam::cached(conn, &format!(
            "SELECT {COLUMNS} FROM sync_clients WHERE partition = ?1 ORDER BY updated_at_ms DESC, client_id ASC"
        ))
        .db()?;
    let rows: Vec<RawRecord> = stmt
        .query_map([partition], raw)
        .db()?
        .collect::<rusqlite::Result<_>>()
        .db()?;
    rows.into_iter().map(record).collect()
}
