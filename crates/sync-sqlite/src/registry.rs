//! The partition registry and log epochs (`storage-contract.md` §4.2).

use rusqlite::{Connection, OptionalExtension, Row};
use sync_core::{PartitionRegistryEntry, Result};

use crate::errors::DbResultExt;
use crate::seam;

const COLUMNS: &str = "partition, log_epoch, epoch_required, last_authenticated_at_ms";

fn entry(row: &Row<'_>) -> rusqlite::Result<PartitionRegistryEntry> {
    Ok(PartitionRegistryEntry {
        partition: row.get(0)?,
        log_epoch: row.get(1)?,
        epoch_required: row.get::<_, i64>(2)? != 0,
        last_authenticated_at_ms: row.get(3)?,
    })
}

/// Registers the partition or refreshes only its activity; one upsert
/// returning the persisted entry.
pub(crate) fn touch(
    conn: &Connection,
    partition: &str,
    at_ms: i64,
    initial_epoch: &str,
) -> Result<PartitionRegistryEntry> {
    seam::cached(conn, &format!(
        "INSERT INTO sync_partition_registry ({COLUMNS}) VALUES (?1, ?2, 0, ?3) \
         ON CONFLICT (partition) DO UPDATE SET last_authenticated_at_ms = excluded.last_authenticated_at_ms \
         RETURNING {COLUMNS}"
    ))
    .db()?
    .query_row((partition, initial_epoch, at_ms), entry)
    .db()
}

/// Inside the writer transaction: new epoch, `epoch_required`, new time,
/// and every client record of the partition deleted.
pub(crate) fn rotate(
    conn: &Connection,
    partition: &str,
    epoch: &str,
    at_ms: i64,
) -> Result<PartitionRegistryEntry> {
    let entry = seam::cached(conn, &format!(
            "INSERT INTO sync_partition_registry ({COLUMNS}) VALUES (?1, ?2, 1, ?3) \
             ON CONFLICT (partition) DO UPDATE SET log_epoch = excluded.log_epoch, epoch_required = 1, \
             last_authenticated_at_ms = excluded.last_authenticated_at_ms RETURNING {COLUMNS}"
        ))
        .db()?
        .query_row((partition, epoch, at_ms), entry)
        .db()?;
    seam::cached(conn, "DELETE FROM sync_clients WHERE partition = ?1")
        .db()?
        .execute([partition])
        .db()?;
    Ok(entry)
}

/// One entry, as stored.
pub(crate) fn get(conn: &Connection, partition: &str) -> Result<Option<PartitionRegistryEntry>> {
    seam::cached(
        conn,
        &format!("SELECT {COLUMNS} FROM sync_partition_registry WHERE partition = ?1"),
    )
    .db()?
    .query_row([partition], entry)
    .optional()
    .db()
}

/// The registry epoch.
pub(crate) fn log_epoch(conn: &Connection, partition: &str) -> Result<Option<String>> {
    seam::cached(
        conn,
        "SELECT log_epoch FROM sync_partition_registry WHERE partition = ?1",
    )
    .db()?
    .query_row([partition], |row| row.get(0))
    .optional()
    .db()
}

/// Every entry, byte-ordered.
pub(crate) fn list(conn: &Connection) -> Result<Vec<PartitionRegistryEntry>> {
    let mut stmt = seam::cached(
        conn,
        &format!("SELECT {COLUMNS} FROM sync_partition_registry ORDER BY partition"),
    )
    .db()?;
    let rows = stmt.query_map([], entry).db()?;
    rows.collect::<rusqlite::Result<_>>().db()
}

/// Registered partition names, byte-ordered.
pub(crate) fn partitions(conn: &Connection) -> Result<Vec<String>> {
    let mut stmt = seam::cached(
        conn,
        "SELECT partition FROM sync_partition_registry ORDER BY partition",
    )
    .db()?;
    let rows = stmt.query_map([], |row| row.get(0)).db()?;
    rows.collect::<rusqlite::Result<_>>().db()
}
