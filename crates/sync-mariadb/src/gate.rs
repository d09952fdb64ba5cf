//! The serve gate token built from what a statement read: the marker
//! version with an open migration's rule, the partition's epoch and its
//! pending checkpoint names (`storage-contract.md` §4.9). Shared by the
//! gate read, the round entry and the push prelude, which read the same
//! columns in their own statements.

use sync_core::{Result, ServeGate};

use crate::values::corrupt;

/// The gate's marker columns and pending names as scalar subqueries, with
/// two placeholders: the partition, then the running version. The
/// registry's epoch, the gate's fourth column, is read by each statement
/// its own way.
pub(crate) const MARKER_AND_PENDING: &str =
    "(SELECT `schema_version` FROM `sync_schema_meta` WHERE `id` = 1), \
(SELECT `migrating_to` FROM `sync_schema_meta` WHERE `id` = 1), \
(SELECT JSON_ARRAYAGG(CAST(`name` AS CHAR)) FROM `sync_backfill_checkpoints` \
WHERE `partition` = ? AND `schema_version` = ? AND `state` <> 'activated')";

/// The gate's columns as a statement read them.
#[derive(Debug, Default)]
pub(crate) struct GateColumns {
    /// `sync_schema_meta.schema_version` (`None`: no marker row).
    pub(crate) stored: Option<i64>,
    /// `sync_schema_meta.migrating_to`.
    pub(crate) migrating_to: Option<i64>,
    /// The registry's `log_epoch` (`None`: unregistered).
    pub(crate) log_epoch: Option<String>,
    /// `JSON_ARRAYAGG` of the pending checkpoint names (`None`: none).
    pub(crate) pending: Option<String>,
}

/// The gate of `partition` for a writer `running`.
pub(crate) fn decode(partition: &str, columns: GateColumns, running: i32) -> Result<ServeGate> {
    let mut pending: Vec<String> = match columns.pending {
        Some(text) => serde_json::from_str(&text).map_err(|_| corrupt("pending_unreadable"))?,
        None => Vec::new(),
    };
    pending.sort();
    Ok(ServeGate {
        partition: partition.to_owned(),
        stored_schema_version: gate_version(
            columns.stored.unwrap_or(0),
            columns.migrating_to,
            running,
        ),
        log_epoch: columns.log_epoch,
        pending,
    })
}

/// While a migration to `M` is open, a caller running below `M` sees `M`
/// (another process migrated the database: `schema_ahead`), one running at
/// or above it sees 0 (no complete schema yet: `schema_behind`).
fn gate_version(stored: i64, migrating_to: Option<i64>, running: i32) -> i64 {
    match migrating_to {
        Some(target) if i64::from(running) < target => target,
        Some(_) => 0,
        None => stored,
    }
}

#[cfg(test)]
mod tests {
    use super::gate_version;

    #[test]
    fn an_open_migration_refuses_every_caller() {
        assert_eq!(gate_version(1, None, 1), 1);
        assert_eq!(gate_version(1, Some(2), 1), 2, "older code sees the target");
        assert_eq!(
            gate_version(1, Some(2), 2),
            0,
            "the target's code sees no schema"
        );
    }
}
