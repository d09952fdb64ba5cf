//! The serve gate (`rfc0007-migration-barrier.md` §7): marker version,
//! partition log epoch and this partition's pending checkpoints at the
//! running version, read by one statement (one snapshot).

use sync_core::{Error, Result, ServeGate};

use crate::pool::{col, Conn};

/// The gate statement over two SQL expressions (a placeholder or a literal
/// for the partition, one for the running version). Every value comes back
/// as text so the simple and extended protocols share the parser.
pub(crate) fn gate_sql(partition: &str, running: &str) -> String {
    format!(
        "SELECT (SELECT schema_version FROM sync_schema_meta WHERE id = 1)::text, \
           (SELECT log_epoch FROM sync_partition_registry WHERE partition = {partition}), \
           (SELECT coalesce(json_agg(c.name ORDER BY c.name), '[]'::json) \
              FROM sync_backfill_checkpoints c WHERE c.partition = {partition} \
                AND c.schema_version = {running} AND c.state <> 'activated')::text"
    )
}

static GATE_SQL: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| gate_sql("$1::text", "$2::int4"));

/// Builds the gate from the statement's three text columns.
pub(crate) fn gate_from_text(
    partition: &str,
    stored: Option<&str>,
    log_epoch: Option<&str>,
    pending: Option<&str>,
) -> Result<ServeGate> {
    let stored_schema_version = match stored {
        Some(text) => text.parse().map_err(Error::backend)?,
        None => 0,
    };
    let pending: Vec<String> = match pending {
        Some(text) => serde_json::from_str(text).map_err(Error::backend)?,
        None => Vec::new(),
    };
    Ok(ServeGate {
        partition: partition.to_owned(),
        stored_schema_version,
        log_epoch: log_epoch.map(str::to_owned),
        pending,
    })
}

/// Reads the gate with one statement.
pub(crate) fn read(conn: &mut Conn, partition: &str, running: i32) -> Result<ServeGate> {
    let row = conn.query_one(&GATE_SQL, &[&partition, &running])?;
    let stored: Option<String> = col(&row, 0)?;
    let epoch: Option<String> = col(&row, 1)?;
    let pending: Option<String> = col(&row, 2)?;
    gate_from_text(
        partition,
        stored.as_deref(),
        epoch.as_deref(),
        pending.as_deref(),
    )
}
