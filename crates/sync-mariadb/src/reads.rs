//! Scoped reads besides scans (`scans.rs`) and windows (`windows.rs`):
//! the serve gate and the newest scoped change (`docs/design/mariadb.md`
//! §13, `dialects.md` §7).

use mysql::Value;
use sync_core::{candidate_variable, Result, ScopeFilter, ServeGate};

use crate::pool::Conn;
use crate::values::corrupt;

/// The gate token: marker version (with an open migration's rule), the
/// partition's epoch and its pending checkpoint names at `running`.
pub(crate) fn serve_gate(conn: &mut Conn, partition: &str, running: i32) -> Result<ServeGate> {
    type Raw = (Option<i64>, Option<i64>, Option<String>, Option<String>);
    let raw: Option<Raw> = conn.first(
        "SELECT (SELECT `schema_version` FROM `sync_schema_meta` WHERE `id` = 1), \
         (SELECT `migrating_to` FROM `sync_schema_meta` WHERE `id` = 1), \
         (SELECT `log_epoch` FROM `sync_partition_registry` WHERE `partition` = ?), \
         (SELECT JSON_ARRAYAGG(CAST(`name` AS CHAR)) FROM `sync_backfill_checkpoints` \
          WHERE `partition` = ? AND `schema_version` = ? AND `state` <> 'activated')",
        (partition, partition, running),
    )?;
    let (stored, migrating_to, log_epoch, pending) = raw.unwrap_or_default();
    let mut pending: Vec<String> = match pending {
        Some(text) => serde_json::from_str(&text).map_err(|_| corrupt("pending_unreadable"))?,
        None => Vec::new(),
    };
    pending.sort();
    Ok(ServeGate {
        partition: partition.to_owned(),
        stored_schema_version: gate_version(stored.unwrap_or(0), migrating_to, running),
        log_epoch,
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

fn candidate(filter: &ScopeFilter) -> Option<(&str, &[String])> {
    let variable = candidate_variable(filter)?;
    let values = filter.get(variable)?;
    (!values.is_empty()).then_some((variable, values.as_slice()))
}

/// Values whose newest entries one statement reads.
const LATEST_VALUES_PER_STATEMENT: usize = 128;

/// The newest sequence among `values` values: one backward primary-key
/// lookup per value (`ORDER BY … DESC LIMIT 1`), as a `UNION ALL` whose
/// largest arm is the answer. Parameters per value: partition, table,
/// variable, value.
fn latest_sql(values: usize) -> String {
    let arm = "(SELECT `commit_seq` FROM `sync_change_scopes` WHERE `partition` = ? \
               AND `tbl` = ? AND `var` = ? AND `value` = ? ORDER BY `commit_seq` DESC LIMIT 1)";
    format!(
        "SELECT MAX(`commit_seq`) FROM ({}) AS newest",
        vec![arm; values].join(" UNION ALL ")
    )
}

/// Newest `commit_seq` of any value of the filter's candidate variable:
/// one statement per [`LATEST_VALUES_PER_STATEMENT`] values.
pub(crate) fn latest_scoped_seq(
    conn: &mut Conn,
    partition: &str,
    table: &str,
    filter: &ScopeFilter,
) -> Result<i64> {
    let Some((variable, values)) = candidate(filter) else {
        return Ok(0);
    };
    let mut latest = 0;
    for chunk in values.chunks(LATEST_VALUES_PER_STATEMENT) {
        let params: Vec<Value> = chunk
            .iter()
            .flat_map(|value| {
                [
                    Value::from(partition),
                    table.into(),
                    variable.into(),
                    value.as_str().into(),
                ]
            })
            .collect();
        let seq: Option<Option<i64>> = conn.first(&latest_sql(chunk.len()), params)?;
        latest = latest.max(seq.flatten().unwrap_or(0));
    }
    Ok(latest)
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
