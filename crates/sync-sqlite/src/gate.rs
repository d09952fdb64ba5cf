//! The serve-gate token (`storage-contract.md` §4.14,
//! `rfc0007-migration-barrier.md` §7.1), read in one statement so the three
//! values come from one snapshot on a reader and on the writer alike.

use rusqlite::Connection;
use sync_core::{Result, ServeGate};

use crate::errors::{corrupt, DbResultExt};
use crate::seam;

/// Marker version, the partition's epoch and its pending checkpoint names
/// at the running version.
pub const SERVE_GATE: &str = "SELECT \
(SELECT schema_version FROM sync_schema_meta WHERE id = 1), \
(SELECT log_epoch FROM sync_partition_registry WHERE partition = ?1), \
(SELECT json_group_array(name) FROM (SELECT name FROM sync_backfill_checkpoints \
  WHERE partition = ?1 AND schema_version = ?2 AND state <> 'activated' ORDER BY name))";

/// Reads the gate token. Never cached.
pub(crate) fn read(conn: &Connection, partition: &str, running: i32) -> Result<ServeGate> {
    let (stored, log_epoch, pending): (Option<i64>, Option<String>, String) =
        seam::cached(conn, SERVE_GATE)
            .db()?
            .query_row((partition, running), |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })
            .db()?;
    let mut pending: Vec<String> =
        serde_json::from_str(&pending).map_err(|_| corrupt("pending_unreadable"))?;
    pending.sort();
    Ok(ServeGate {
        partition: partition.to_owned(),
        stored_schema_version: stored.unwrap_or(0),
        log_epoch,
        pending,
    })
}
