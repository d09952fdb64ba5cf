//! Scoped reads besides scans (`scans.rs`) and windows (`windows.rs`):
//! the serve gate and the newest scoped change (`docs/design/mariadb.md`
//! §13, `dialects.md` §7).

use mysql::Value;
use sync_core::{candidate_variable, Result, ScopeFilter, ServeGate};

use crate::gate::GateColumns;
use crate::pool::Conn;

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
    let columns = GateColumns {
        stored,
        migrating_to,
        log_epoch,
        pending,
    };
    crate::gate::decode(partition, columns, running)
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
