//! The round entry (`ServerStorage::enter_round`) in one statement: the
//! registry entry, the serve gate, the client record, the stored push
//! results of the round's commit ids and, when asked, the log bounds —
//! instead of four statements plus one per commit id.
//!
//! With a refresh interval (the engine's default) a fresh registry entry is
//! returned as read, and only a missing or stale one costs the touch, a
//! second statement (about once a second on a busy partition). The read is
//! a consistent read in autocommit: no lock, no write, no redo-log flush.
//! Without an interval the touch comes first and the read follows it, as
//! the single methods run.
//!
//! The commit ids travel as one JSON array parameter, expanded by
//! `JSON_TABLE` with their positions; the statement returns one row per id
//! (one row when there is none), each with the entry's columns and that
//! id's stored result, so no result passes through an aggregate (whose
//! text `group_concat_max_len` would cut).

use std::sync::LazyLock;

use mysql::prelude::FromValue;
use mysql::{Row, Value};
use sync_core::{
    ClientRecord, Error, LogBounds, PartitionRegistryEntry, Result, RoundEntry, RoundEntryRequest,
    ServeGate, StoredPushResult,
};

use crate::gate::{self, GateColumns, MARKER_AND_PENDING};
use crate::pool::Conn;
use crate::records;
use crate::values::corrupt;

/// The entry read over `(partition, running, partition, client, ids,
/// client)`: registry (0–3), marker and pending names (4–6), client record
/// (7–12), log bounds (13–14, NULL when not asked), then the id's position
/// and stored result (15–16), in no particular order (the positions place
/// them; an `ORDER BY` cost a temporary table and a sort). An id is
/// compared as at most 256 bytes: a longer one is cut to 256, which no
/// stored id (at most 255) equals.
fn entry_sql(bounds: bool) -> String {
    let bounds = if bounds {
        "COALESCE((SELECT s.`max_commit_seq` FROM `sync_partitions` s \
           WHERE s.`partition` = x.`p`), 0), \
         COALESCE((SELECT s.`horizon_seq` FROM `sync_partitions` s \
           WHERE s.`partition` = x.`p`), 0)"
    } else {
        "NULL, NULL"
    };
    format!(
        "SELECT g.`partition`, g.`log_epoch`, g.`epoch_required`, g.`last_authenticated_at_ms`, \
         {MARKER_AND_PENDING}, \
         k.`client_id`, k.`actor_id`, k.`wire_version`, k.`cursor`, k.`updated_at_ms`, \
         k.`subscriptions`, {bounds}, j.`n`, r.`result` \
         FROM (SELECT ? AS `p`) x \
         LEFT JOIN `sync_partition_registry` g ON g.`partition` = x.`p` \
         LEFT JOIN `sync_clients` k ON k.`partition` = x.`p` AND k.`client_id` = ? \
         LEFT JOIN JSON_TABLE(?, '$[*]' COLUMNS (`n` FOR ORDINALITY, \
           `id` VARBINARY(256) PATH '$')) j ON TRUE \
         LEFT JOIN `sync_push_results` r ON r.`partition` = x.`p` AND r.`client_id` = ? \
           AND r.`client_commit_id` = j.`id`"
    )
}

/// [`entry_sql`] with the log bounds (a round that pulls).
static WITH_BOUNDS_SQL: LazyLock<String> = LazyLock::new(|| entry_sql(true));

/// [`entry_sql`] without them (a push round).
static WITHOUT_BOUNDS_SQL: LazyLock<String> = LazyLock::new(|| entry_sql(false));

/// Runs the entry: the read, plus the touch when the request refreshes on
/// every call or the read found the registry entry missing or stale.
pub(crate) fn enter(conn: &mut Conn, request: &RoundEntryRequest) -> Result<RoundEntry> {
    if request.refresh_after_ms <= 0 {
        let touched = touch(conn, request)?;
        let read = read(conn, request)?;
        return Ok(read.finish(touched));
    }
    let mut read = read(conn, request)?;
    let fresh_after = request
        .authenticated_at_ms
        .saturating_sub(request.refresh_after_ms);
    match read.registry.take() {
        Some(stored) if stored.last_authenticated_at_ms > fresh_after => Ok(read.finish(stored)),
        _ => {
            let touched = touch(conn, request)?;
            Ok(read.finish(touched))
        }
    }
}

fn touch(conn: &mut Conn, request: &RoundEntryRequest) -> Result<PartitionRegistryEntry> {
    records::touch(
        conn,
        &request.partition,
        request.authenticated_at_ms,
        &request.initial_log_epoch,
    )
}

/// The one statement, decoded.
fn read(conn: &mut Conn, request: &RoundEntryRequest) -> Result<EntryRead> {
    let sql = if request.log_bounds {
        &WITH_BOUNDS_SQL
    } else {
        &WITHOUT_BOUNDS_SQL
    };
    let ids = serde_json::to_string(&request.client_commit_ids).map_err(Error::backend)?;
    let params: Vec<Value> = vec![
        request.partition.as_str().into(),
        request.running_schema_version.into(),
        request.partition.as_str().into(),
        request.client_id.as_str().into(),
        ids.into(),
        request.client_id.as_str().into(),
    ];
    let rows: Vec<Row> = conn.rows(sql.as_str(), params)?;
    EntryRead::decode(&rows, request)
}

fn get<T: FromValue>(row: &Row, i: usize) -> Result<T> {
    match row.get_opt::<T, usize>(i) {
        Some(Ok(value)) => Ok(value),
        _ => Err(corrupt("round_entry_column")),
    }
}

/// What the statement read, decoded (before the touch can write).
struct EntryRead {
    /// The registry entry as read (`None`: unregistered).
    registry: Option<PartitionRegistryEntry>,
    gate: ServeGate,
    client_record: Option<ClientRecord>,
    push_results: Vec<Result<Option<StoredPushResult>>>,
    log_bounds: Option<LogBounds>,
}

impl EntryRead {
    /// The entry returned with `registry`: the gate's epoch is that entry's.
    fn finish(self, registry: PartitionRegistryEntry) -> RoundEntry {
        let gate = ServeGate {
            log_epoch: Some(registry.log_epoch.clone()),
            ..self.gate
        };
        RoundEntry {
            registry,
            gate,
            client_record: self.client_record,
            push_results: self.push_results,
            log_bounds: self.log_bounds,
        }
    }

    fn decode(rows: &[Row], request: &RoundEntryRequest) -> Result<Self> {
        let Some(first) = rows.first() else {
            return Err(corrupt("round_entry_no_row"));
        };
        let registry = match get::<Option<String>>(first, 0)? {
            None => None,
            Some(partition) => Some(records::entry((
                partition,
                get(first, 1)?,
                get(first, 2)?,
                get(first, 3)?,
            ))),
        };
        let gate = gate::decode(
            &request.partition,
            GateColumns {
                stored: get(first, 4)?,
                migrating_to: get(first, 5)?,
                log_epoch: registry.as_ref().map(|r| r.log_epoch.clone()),
                pending: get(first, 6)?,
            },
            request.running_schema_version,
        )?;
        let client_record = match get::<Option<String>>(first, 7)? {
            None => None,
            Some(client_id) => Some(records::client((
                client_id,
                get(first, 8)?,
                get(first, 9)?,
                get(first, 10)?,
                get(first, 11)?,
                get(first, 12)?,
            ))?),
        };
        let log_bounds = if request.log_bounds {
            Some(LogBounds {
                max_commit_seq: get(first, 13)?,
                horizon_seq: get(first, 14)?,
            })
        } else {
            None
        };
        Ok(Self {
            registry,
            gate,
            client_record,
            push_results: push_results(rows, request.client_commit_ids.len())?,
            log_bounds,
        })
    }
}

/// One stored result per requested id, in the request's order, each
/// parsed on its own (an unreadable one is that id's error).
fn push_results(rows: &[Row], count: usize) -> Result<Vec<Result<Option<StoredPushResult>>>> {
    let mut texts: Vec<Option<Option<String>>> = vec![None; count];
    for row in rows {
        let Some(n) = get::<Option<u64>>(row, 15)? else {
            continue;
        };
        let slot = usize::try_from(n)
            .ok()
            .and_then(|n| n.checked_sub(1))
            .and_then(|i| texts.get_mut(i))
            .ok_or_else(|| corrupt("round_entry_position"))?;
        *slot = Some(get(row, 16)?);
    }
    texts
        .into_iter()
        .map(|text| {
            let text = text.ok_or_else(|| corrupt("round_entry_missing_id"))?;
            Ok(records::parse_push_result(text))
        })
        .collect()
}
