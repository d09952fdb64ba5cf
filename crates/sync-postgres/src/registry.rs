//! The partition registry and log epochs (`storage-contract.md` §4.2).

use postgres::Row;
use sync_core::{PartitionRegistryEntry, Result};

use crate::instance::{Finish, PostgresStorage};
use crate::partition_lock;
use crate::pool::{col, Conn};

const TOUCH_SQL: &str = "INSERT INTO sync_partition_registry \
    (partition, log_epoch, epoch_required, last_authenticated_at_ms) VALUES ($1, $2, FALSE, $3) \
    ON CONFLICT (partition) DO UPDATE \
    SET last_authenticated_at_ms = excluded.last_authenticated_at_ms \
    RETURNING partition, log_epoch, epoch_required, last_authenticated_at_ms";
const ROTATE_SQL: &str = "INSERT INTO sync_partition_registry \
    (partition, log_epoch, epoch_required, last_authenticated_at_ms) VALUES ($1, $2, TRUE, $3) \
    ON CONFLICT (partition) DO UPDATE SET log_epoch = excluded.log_epoch, \
      epoch_required = TRUE, last_authenticated_at_ms = excluded.last_authenticated_at_ms \
    RETURNING partition, log_epoch, epoch_required, last_authenticated_at_ms";
const DELETE_CLIENTS_SQL: &str = "DELETE FROM sync_clients WHERE partition = $1";
const EPOCH_SQL: &str = "SELECT log_epoch FROM sync_partition_registry WHERE partition = $1";
const LIST_SQL: &str = "SELECT partition, log_epoch, epoch_required, last_authenticated_at_ms \
    FROM sync_partition_registry ORDER BY partition COLLATE \"C\"";
const NAMES_SQL: &str =
    "SELECT partition FROM sync_partition_registry ORDER BY partition COLLATE \"C\"";

pub(crate) fn entry(row: &Row) -> Result<PartitionRegistryEntry> {
    Ok(PartitionRegistryEntry {
        partition: col(row, 0)?,
        log_epoch: col(row, 1)?,
        epoch_required: col(row, 2)?,
        last_authenticated_at_ms: col(row, 3)?,
    })
}

/// One atomic upsert; an existing entry keeps its epoch.
pub(crate) fn touch(
    conn: &mut Conn,
    partition: &str,
    at_ms: i64,
    initial_epoch: &str,
) -> Result<PartitionRegistryEntry> {
    let row = conn.query_one(TOUCH_SQL, &[&partition, &initial_epoch, &at_ms])?;
    entry(&row)
}

/// Under the partition lock: new epoch, `epoch_required`, client records deleted.
pub(crate) fn rotate(
    storage: &PostgresStorage,
    partition: &str,
    epoch: &str,
    at_ms: i64,
) -> Result<PartitionRegistryEntry> {
    storage.with_write(|conn| {
        partition_lock::lock(conn, partition, storage.config().push_lock_timeout_ms)?;
        let row = conn.query_one(ROTATE_SQL, &[&partition, &epoch, &at_ms])?;
        conn.execute(DELETE_CLIENTS_SQL, &[&partition])?;
        entry(&row).map(Finish::Commit)
    })
}

/// The registry epoch, if registered.
pub(crate) fn log_epoch(conn: &mut Conn, partition: &str) -> Result<Option<String>> {
    match conn.query_opt(EPOCH_SQL, &[&partition])? {
        Some(row) => col(&row, 0).map(Some),
        None => Ok(None),
    }
}

/// Every entry, byte-ordered.
pub(crate) fn list(conn: &mut Conn) -> Result<Vec<PartitionRegistryEntry>> {
    conn.query(LIST_SQL, &[])?.iter().map(entry).collect()
}

/// Every registered partition name, byte-ordered.
pub(crate) fn names(conn: &mut Conn) -> Result<Vec<String>> {
    conn.query(NAMES_SQL, &[])?
        .iter()
        .map(|r| col(r, 0))
        .collect()
}
