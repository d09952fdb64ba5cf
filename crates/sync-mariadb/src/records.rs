//! Small keyed records: push results (first writer wins), client records
//! and the partition registry.

use sync_core::{
    ClientCursorInfo, ClientRecord, Error, PartitionRegistryEntry, Result, StoredPushResult,
};

use crate::pool::Conn;
use crate::values::{corrupt, parse_subscriptions, subscriptions_json};

/// The stored push result text.
pub(crate) fn push_result_text(
    conn: &mut Conn,
    partition: &str,
    client_id: &str,
    client_commit_id: &str,
) -> Result<Option<String>> {
    conn.first(
        "SELECT `result` FROM `sync_push_results` \
         WHERE `partition` = ? AND `client_id` = ? AND `client_commit_id` = ?",
        (partition, client_id, client_commit_id),
    )
}

/// Parses a stored push result (outside the statement).
pub(crate) fn parse_push_result(text: Option<String>) -> Result<Option<StoredPushResult>> {
    text.map(|t| StoredPushResult::from_json(&t)).transpose()
}

/// Inserts the push result unless its key exists.
pub(crate) fn put_push_result(
    conn: &mut Conn,
    partition: &str,
    client_id: &str,
    client_commit_id: &str,
    result: &StoredPushResult,
) -> Result<()> {
    conn.exec(
        "INSERT INTO `sync_push_results` (`partition`, `client_id`, `client_commit_id`, `result`) \
         VALUES (?, ?, ?, ?) ON DUPLICATE KEY UPDATE `partition` = `partition`",
        (partition, client_id, client_commit_id, result.to_json()),
    )?;
    Ok(())
}

const CLIENT_COLUMNS: &str =
    "`client_id`, `actor_id`, `wire_version`, `cursor`, `updated_at_ms`, `subscriptions`";

/// A client record's columns: id, actor, wire version, cursor, update
/// time, subscriptions.
pub(crate) type RawClient = (String, String, i64, i64, i64, String);

/// The record of a [`RawClient`] (unreadable subscriptions fail).
pub(crate) fn client(raw: RawClient) -> Result<ClientRecord> {
    let (client_id, actor_id, wire_version, cursor, updated_at_ms, subscriptions) = raw;
    Ok(ClientRecord {
        client_id,
        actor_id,
        wire_version: i32::try_from(wire_version).map_err(|_| corrupt("wire_version"))?,
        cursor,
        updated_at_ms,
        subscriptions: parse_subscriptions(&subscriptions)?,
    })
}

/// One client record.
pub(crate) fn get_client(
    conn: &mut Conn,
    partition: &str,
    client_id: &str,
) -> Result<Option<ClientRecord>> {
    let raw: Option<RawClient> = conn.first(
        &format!(
            "SELECT {CLIENT_COLUMNS} FROM `sync_clients` WHERE `partition` = ? AND `client_id` = ?"
        ),
        (partition, client_id),
    )?;
    raw.map(client).transpose()
}

/// Inserts or fully replaces a client record.
pub(crate) fn put_client(conn: &mut Conn, partition: &str, r: &ClientRecord) -> Result<()> {
    conn.exec(
        "INSERT INTO `sync_clients` (`partition`, `client_id`, `actor_id`, `wire_version`, \
         `cursor`, `subscriptions`, `updated_at_ms`) VALUES (?, ?, ?, ?, ?, ?, ?) \
         ON DUPLICATE KEY UPDATE `actor_id` = VALUE(`actor_id`), \
         `wire_version` = VALUE(`wire_version`), `cursor` = VALUE(`cursor`), \
         `subscriptions` = VALUE(`subscriptions`), `updated_at_ms` = VALUE(`updated_at_ms`)",
        (
            partition,
            &r.client_id,
            &r.actor_id,
            r.wire_version,
            r.cursor,
            subscriptions_json(&r.subscriptions),
            r.updated_at_ms,
        ),
    )?;
    Ok(())
}

/// Every cursor of the partition, by client id.
pub(crate) fn cursors(conn: &mut Conn, partition: &str) -> Result<Vec<ClientCursorInfo>> {
    let rows: Vec<(String, i64, i64)> = conn.rows(
        "SELECT `client_id`, `cursor`, `updated_at_ms` FROM `sync_clients` \
         WHERE `partition` = ? ORDER BY `client_id`",
        (partition,),
    )?;
    Ok(rows
        .into_iter()
        .map(|(client_id, cursor, updated_at_ms)| ClientCursorInfo {
            client_id,
            cursor,
            updated_at_ms,
        })
        .collect())
}

/// Moves an existing record's cursor forward when the actor and the
/// partition's log epoch match; whether it matched.
pub(crate) fn advance_cursor(
    conn: &mut Conn,
    partition: &str,
    client_id: &str,
    actor_id: &str,
    log_epoch: &str,
    cursor: i64,
    updated_at_ms: i64,
) -> Result<bool> {
    let matched = conn.exec(
        "UPDATE `sync_clients` SET `cursor` = GREATEST(`cursor`, ?), \
         `updated_at_ms` = GREATEST(`updated_at_ms`, ?) \
         WHERE `partition` = ? AND `client_id` = ? AND `actor_id` = ? \
         AND EXISTS (SELECT 1 FROM `sync_partition_registry` r \
                     WHERE r.`partition` = ? AND r.`log_epoch` = ?)",
        (
            cursor,
            updated_at_ms,
            partition,
            client_id,
            actor_id,
            partition,
            log_epoch,
        ),
    )?;
    Ok(matched == 1)
}

/// Moves an existing record's cursor forward; whether it matched.
pub(crate) fn update_cursor(
    conn: &mut Conn,
    partition: &str,
    client_id: &str,
    cursor: i64,
    updated_at_ms: i64,
) -> Result<bool> {
    let matched = conn.exec(
        "UPDATE `sync_clients` SET `cursor` = GREATEST(`cursor`, ?), \
         `updated_at_ms` = GREATEST(`updated_at_ms`, ?) WHERE `partition` = ? AND `client_id` = ?",
        (cursor, updated_at_ms, partition, client_id),
    )?;
    Ok(matched == 1)
}

/// The lowest cursor of clients active since `cutoff_ms`.
pub(crate) fn active_floor(
    conn: &mut Conn,
    partition: &str,
    cutoff_ms: i64,
) -> Result<Option<i64>> {
    let floor: Option<Option<i64>> = conn.first(
        "SELECT MIN(`cursor`) FROM `sync_clients` WHERE `partition` = ? AND `updated_at_ms` >= ?",
        (partition, cutoff_ms),
    )?;
    Ok(floor.flatten())
}

const REGISTRY_COLUMNS: &str =
    "`partition`, `log_epoch`, `epoch_required`, `last_authenticated_at_ms`";

/// A registry entry's columns: partition, epoch, epoch required, time.
pub(crate) type RawEntry = (String, String, i64, i64);

/// The entry of a [`RawEntry`].
pub(crate) fn entry(raw: RawEntry) -> PartitionRegistryEntry {
    let (partition, log_epoch, epoch_required, last_authenticated_at_ms) = raw;
    PartitionRegistryEntry {
        partition,
        log_epoch,
        epoch_required: epoch_required != 0,
        last_authenticated_at_ms,
    }
}

fn no_row() -> Error {
    Error::backend(crate::session::SessionRefused(
        "RETURNING gave no row".into(),
    ))
}

/// Registers the partition with `initial_epoch` or refreshes its activity;
/// the persisted entry.
pub(crate) fn touch(
    conn: &mut Conn,
    partition: &str,
    at_ms: i64,
    initial_epoch: &str,
) -> Result<PartitionRegistryEntry> {
    let raw: Option<RawEntry> = conn.first(
        &format!(
            "INSERT INTO `sync_partition_registry` ({REGISTRY_COLUMNS}) VALUES (?, ?, FALSE, ?) \
             ON DUPLICATE KEY UPDATE `last_authenticated_at_ms` = VALUE(`last_authenticated_at_ms`) \
             RETURNING {REGISTRY_COLUMNS}"
        ),
        (partition, initial_epoch, at_ms),
    )?;
    raw.map(entry).ok_or_else(no_row)
}

/// Replaces the epoch (epoch now required) and deletes the partition's
/// client records.
pub(crate) fn rotate(
    conn: &mut Conn,
    partition: &str,
    epoch: &str,
    at_ms: i64,
) -> Result<PartitionRegistryEntry> {
    let raw: Option<RawEntry> = conn.first(
        &format!(
            "INSERT INTO `sync_partition_registry` ({REGISTRY_COLUMNS}) VALUES (?, ?, TRUE, ?) \
             ON DUPLICATE KEY UPDATE `log_epoch` = VALUE(`log_epoch`), `epoch_required` = TRUE, \
             `last_authenticated_at_ms` = VALUE(`last_authenticated_at_ms`) \
             RETURNING {REGISTRY_COLUMNS}"
        ),
        (partition, epoch, at_ms),
    )?;
    conn.exec(
        "DELETE FROM `sync_clients` WHERE `partition` = ?",
        (partition,),
    )?;
    raw.map(entry).ok_or_else(no_row)
}

/// The registry epoch.
pub(crate) fn log_epoch(conn: &mut Conn, partition: &str) -> Result<Option<String>> {
    conn.first(
        "SELECT `log_epoch` FROM `sync_partition_registry` WHERE `partition` = ?",
        (partition,),
    )
}

/// Every registry entry, byte-ordered.
pub(crate) fn list_registry(conn: &mut Conn) -> Result<Vec<PartitionRegistryEntry>> {
    let raw: Vec<RawEntry> = conn.rows(
        &format!("SELECT {REGISTRY_COLUMNS} FROM `sync_partition_registry` ORDER BY `partition`"),
        (),
    )?;
    Ok(raw.into_iter().map(entry).collect())
}
