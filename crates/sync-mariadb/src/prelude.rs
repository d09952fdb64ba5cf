//! The push prelude's reads (`StorageTransaction::begin_push`) in one
//! statement, sent after the partition lock and the savepoint: the serve
//! gate, the stored push result of the key and the candidate rows of every
//! requested table — instead of one statement each plus one per row.
//!
//! The statement is a `UNION ALL`: a first branch, one row, reads the gate
//! and the push result; then one branch per table with row ids joins the
//! table's primary key to the ids, passed as one JSON array parameter and
//! expanded by `JSON_TABLE`. Each row says which branch it came from, and
//! the two kinds fill disjoint columns, so no column mixes types. Read
//! after the lock was granted, at `READ COMMITTED`, the statement sees
//! every push that held the lock before (`docs/design/mariadb.md` §8.2).

use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

use mysql::prelude::FromValue;
use mysql::{Row, Value};
use sync_core::front::EnsuredSchema;
use sync_core::{PushPrelude, PushPreludeRequest, Result, ServeGate, StoredPushResult, StoredRow};

use crate::ensured::{Ensured, TableSql};
use crate::gate::{self, GateColumns, MARKER_AND_PENDING};
use crate::pool::Conn;
use crate::records;
use crate::values::{corrupt, parse_scopes};

/// The first branch over `(partition, running, partition, partition,
/// client, commit id)`: branch 0, the marker and pending names (1–3), the
/// registry's epoch (4), the stored push result (5), then the row columns
/// (6–10) left NULL.
static HEAD: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT 0, {MARKER_AND_PENDING}, \
         (SELECT `log_epoch` FROM `sync_partition_registry` WHERE `partition` = ?), \
         (SELECT `result` FROM `sync_push_results` \
          WHERE `partition` = ? AND `client_id` = ? AND `client_commit_id` = ?), \
         NULL, NULL, NULL, NULL, NULL"
    )
});

/// One table's branch over `(ids, partition)`: its index in the request
/// (from 1), the head columns (1–5) left NULL, then row id, scopes,
/// version, payload and column versions (6–10). `STRAIGHT_JOIN` keeps the
/// ids first, each looked up on the primary key (`eq_ref`), whatever the
/// statistics say: left to choose, the optimizer read a one-row partition's
/// key range and matched the ids in a join buffer (on 5 000 rows it chose
/// `eq_ref`), a plan whose cost would grow with the partition had the
/// statistics been stale. An id is compared as at most 1 025
/// bytes: a longer one is cut to 1 025, which no stored row id (at most
/// 1 024) equals.
fn table_branch(index: usize, table: &TableSql) -> String {
    format!(
        "SELECT {index}, NULL, NULL, NULL, NULL, NULL, t.`_sync_row_id`, t.`_sync_scopes`, \
         t.`_sync_server_version`, t.`_sync_payload`, t.`_sync_column_versions` \
         FROM JSON_TABLE(?, '$[*]' COLUMNS (`id` VARBINARY(1025) PATH '$')) j \
         STRAIGHT_JOIN {} t ON t.`_sync_partition` = ? AND t.`_sync_row_id` = j.`id`",
        table.quoted
    )
}

/// The reads of one prelude, rendered.
#[derive(Debug)]
pub(crate) struct Plan {
    sql: String,
    params: Vec<Value>,
}

/// Renders the prelude's read; `None` when a requested table is not in the
/// ensured schema (the caller then leaves the prelude to the single calls,
/// which report it).
pub(crate) fn plan(
    ensured: Option<&Arc<Ensured>>,
    partition: &str,
    request: &PushPreludeRequest,
    running: i32,
) -> Option<Plan> {
    let mut sql = HEAD.clone();
    let mut params: Vec<Value> = vec![
        partition.into(),
        running.into(),
        partition.into(),
        partition.into(),
        request.client_id.as_str().into(),
        request.client_commit_id.as_str().into(),
    ];
    for (index, (table, ids)) in request.rows.iter().enumerate() {
        let (_, table) = ensured?.table(table)?;
        if ids.is_empty() {
            continue;
        }
        sql.push_str(" UNION ALL ");
        sql.push_str(&table_branch(index + 1, table));
        params.push(serde_json::to_string(ids).ok()?.into());
        params.push(partition.into());
    }
    Some(Plan { sql, params })
}

/// The stored scopes text of requested rows by `(table, row id)`, `None`
/// when the row is absent: what a row write of this transaction would
/// read first, until it writes the row.
pub(crate) type KnownScopes = HashMap<(String, String), Option<String>>;

/// One table's candidate rows by id: each decoded, or its decoding error.
type Found = HashMap<String, Result<(StoredRow, String)>>;

/// Runs the plan's statement and decodes it into the prelude (rows only
/// when no push result is stored, as the single calls read them) and the
/// scopes of the rows it read.
pub(crate) fn read(
    conn: &mut Conn,
    plan: Plan,
    partition: &str,
    request: &PushPreludeRequest,
    running: i32,
) -> Result<(PushPrelude, KnownScopes)> {
    let rows: Vec<Row> = conn.rows(&plan.sql, plan.params)?;
    let mut head = None;
    let mut found: Vec<Found> = request.rows.iter().map(|_| HashMap::new()).collect();
    for row in &rows {
        let branch: u64 = get(row, 0)?;
        match usize::try_from(branch).ok().and_then(|b| b.checked_sub(1)) {
            None => head = Some(decode_head(row, partition, running)?),
            Some(table) => {
                let row_id: String = get(row, 6)?;
                found
                    .get_mut(table)
                    .ok_or_else(|| corrupt("prelude_branch"))?
                    .insert(row_id.clone(), decode_row(row, row_id));
            }
        }
    }
    let (gate, push_result) = head.ok_or_else(|| corrupt("prelude_no_head"))?;
    let mut scopes = KnownScopes::new();
    if !matches!(push_result, Ok(None)) {
        // A replay or an unreadable result: the push reads no row.
        let prelude = PushPrelude {
            gate,
            push_result,
            rows: None,
        };
        return Ok((prelude, scopes));
    }
    let mut in_order = Vec::with_capacity(request.rows.len());
    for ((table, ids), mut found) in request.rows.iter().zip(found) {
        let mut table_rows = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(Err(_)) = found.get(id) {
                if let Some(Err(error)) = found.remove(id) {
                    return Err(error);
                }
            }
            let hit = found.get(id).and_then(|hit| hit.as_ref().ok());
            scopes.insert(
                (table.clone(), id.clone()),
                hit.map(|(_, text)| text.clone()),
            );
            table_rows.push(hit.map(|(row, _)| row.clone()));
        }
        in_order.push(table_rows);
    }
    let prelude = PushPrelude {
        gate,
        push_result,
        rows: Some(in_order),
    };
    Ok((prelude, scopes))
}

fn get<T: FromValue>(row: &Row, i: usize) -> Result<T> {
    match row.get_opt::<T, usize>(i) {
        Some(Ok(value)) => Ok(value),
        _ => Err(corrupt("prelude_column")),
    }
}

type Head = (ServeGate, Result<Option<StoredPushResult>>);

fn decode_head(row: &Row, partition: &str, running: i32) -> Result<Head> {
    let gate = gate::decode(
        partition,
        GateColumns {
            stored: get(row, 1)?,
            migrating_to: get(row, 2)?,
            pending: get(row, 3)?,
            log_epoch: get(row, 4)?,
        },
        running,
    )?;
    let push_result = records::parse_push_result(get(row, 5)?);
    Ok((gate, push_result))
}

/// A candidate row (`row_id`, already read) and its stored scopes text.
fn decode_row(row: &Row, row_id: String) -> Result<(StoredRow, String)> {
    let scopes: String = get(row, 7)?;
    let stored = StoredRow {
        row_id,
        scopes: parse_scopes(&scopes)?,
        server_version: get(row, 8)?,
        payload: get(row, 9)?,
        column_versions: get(row, 10)?,
    };
    Ok((stored, scopes))
}
