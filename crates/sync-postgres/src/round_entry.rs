//! The round entry (`ServerStorage::enter_round`) in one round trip: the
//! serve gate, the client record, the stored push results and the log
//! bounds read beside the registry entry — instead of three round trips
//! plus one per pushed commit.
//!
//! With a refresh interval (the engine's default) the common case is a
//! plain read: a fresh registry entry is returned as stored, and only a
//! missing or stale one costs a second round trip, the touch (about once a
//! second on a busy partition). A read takes no transaction id and waits
//! for no WAL flush. Without an interval the touch is a data-modifying CTE
//! of the same statement.

use postgres::Row;
use sync_core::{
    ClientRecord, Error, LogBounds, PartitionRegistryEntry, Result, RoundEntry, RoundEntryRequest,
    ServeGate, StoredPushResult,
};

use crate::gate;
use crate::json::parse_subscriptions;
use crate::pool::{col, Conn};
use crate::registry;

/// Every column after the registry entry's four, over `$p` partition, `$v`
/// running version, `$c` client and `$i` commit ids: marker, pending
/// checkpoints, the client record's six columns (from `k`), the push
/// results as a `text[]` in the ids' order (`NULL`: none stored), the log
/// bounds. The array constructor costs a third of the `json_agg` it
/// replaced (about 3 against 12 µs of server time per execution, measured
/// in a PL/pgSQL loop). Each push result is a scalar subquery on the whole
/// primary key: an `= ANY(array)` on its last column was planned as a
/// filter over all of the client's results while the table had no
/// statistics, so the entry slowed down with every push until the next
/// `ANALYZE`.
///
/// The `LIMIT cardinality(…)` never cuts the list; it is there for the
/// planner. Without it a generic plan assumes ten ids where a custom plan
/// sees the real count, so the generic plan always looked ten times dearer
/// and the server planned the statement anew on every round (in the
/// statement log, its bind — where the planning happens — took 0.22 ms
/// against 0.07 ms of execution). With it both
/// estimate one id and the server keeps the generic plan after its fifth
/// execution. Every table this statement reads has its primary key as its
/// only index, so a generic plan made on an empty table is the same plan.
fn entry_columns(p: &str, v: &str, c: &str, i: &str, bounds: bool) -> String {
    let bounds = if bounds {
        format!(
            "coalesce((SELECT s.max_commit_seq FROM sync_partitions s WHERE s.partition = {p}), 0), \
             coalesce((SELECT s.horizon_seq FROM sync_partitions s WHERE s.partition = {p}), 0)"
        )
    } else {
        "NULL::int8, NULL::int8".to_owned()
    };
    format!(
        "(SELECT schema_version FROM sync_schema_meta WHERE id = 1)::text, \
      (SELECT coalesce(json_agg(b.name ORDER BY b.name), '[]'::json) \
         FROM sync_backfill_checkpoints b WHERE b.partition = {p} \
           AND b.schema_version = {v}::int4 AND b.state <> 'activated')::text, \
      k.client_id, k.actor_id, k.wire_version, k.cursor, k.updated_at_ms, \
      k.subscriptions::text, \
      ARRAY(SELECT (SELECT r.result::text FROM sync_push_results r \
           WHERE r.partition = {p} AND r.client_id = {c} AND r.client_commit_id = i.id) \
         FROM (SELECT * FROM unnest({i}::text[]) WITH ORDINALITY AS u(id, n) \
               LIMIT cardinality({i}::text[])) i ORDER BY i.n), {bounds}"
    )
}

/// The read: `$1` partition, `$2` running version, `$3` client, `$4` commit
/// ids. The registry columns are NULL for an unregistered partition.
/// With `bounds`, also the log bounds (a round that pulls).
pub fn entry_read_sql(bounds: bool) -> String {
    format!(
        "SELECT g.partition, g.log_epoch, g.epoch_required, g.last_authenticated_at_ms, {} \
         FROM (SELECT $1::text AS partition) p \
         LEFT JOIN sync_partition_registry g ON g.partition = p.partition \
         LEFT JOIN sync_clients k ON k.partition = p.partition AND k.client_id = $3",
        entry_columns("$1", "$2", "$3", "$4", bounds)
    )
}

/// [`entry_read_sql`] with the log bounds (a round that pulls).
static READ_WITH_BOUNDS_SQL: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| entry_read_sql(true));

/// [`entry_read_sql`] without them (a push-only round): the partition's counter
/// row is updated by every push, and its two reads measured about 15 µs of
/// the statement's 150 µs round trip (`pgbench`, one client, after 5 000
/// updates of the row).
static READ_SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| entry_read_sql(false));

/// The touch and the read in one statement: `$1` partition, `$2` initial
/// epoch, `$3` time, `$4` running version, `$5` client, `$6` commit ids.
/// The gate's epoch is the touched row's (a separate gate read after the
/// touch reads the same committed epoch).
static TOUCH_AND_READ_SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "WITH touched AS ( \
           INSERT INTO sync_partition_registry \
             (partition, log_epoch, epoch_required, last_authenticated_at_ms) \
           VALUES ($1, $2, FALSE, $3) \
           ON CONFLICT (partition) DO UPDATE \
           SET last_authenticated_at_ms = excluded.last_authenticated_at_ms \
           RETURNING partition, log_epoch, epoch_required, last_authenticated_at_ms) \
         SELECT g.partition, g.log_epoch, g.epoch_required, g.last_authenticated_at_ms, {} \
         FROM touched g \
         LEFT JOIN sync_clients k ON k.partition = $1 AND k.client_id = $5",
        entry_columns("$1", "$4", "$5", "$6", true)
    )
});

/// Runs the entry: one statement, plus the touch when a read found the
/// registry entry missing or stale.
pub(crate) fn enter(conn: &mut Conn, request: &RoundEntryRequest) -> Result<RoundEntry> {
    if request.refresh_after_ms <= 0 {
        let row = conn.query_one(
            &TOUCH_AND_READ_SQL,
            &[
                &request.partition,
                &request.initial_log_epoch,
                &request.authenticated_at_ms,
                &request.running_schema_version,
                &request.client_id,
                &request.client_commit_ids,
            ],
        )?;
        let mut read = EntryRead::parse(&row, request)?;
        return match read.registry.take() {
            Some(registry) => Ok(read.finish(registry)),
            None => Err(Error::backend("the registry touch returned no row")),
        };
    }
    let sql = if request.log_bounds {
        &READ_WITH_BOUNDS_SQL
    } else {
        &READ_SQL
    };
    let row = conn.query_one(
        sql.as_str(),
        &[
            &request.partition,
            &request.running_schema_version,
            &request.client_id,
            &request.client_commit_ids,
        ],
    )?;
    let fresh_after = request
        .authenticated_at_ms
        .saturating_sub(request.refresh_after_ms);
    let mut read = EntryRead::parse(&row, request)?;
    match read.registry.take() {
        Some(stored) if stored.last_authenticated_at_ms > fresh_after => Ok(read.finish(stored)),
        _ => {
            let touched = registry::touch(
                conn,
                &request.partition,
                request.authenticated_at_ms,
                &request.initial_log_epoch,
            )?;
            Ok(read.finish(touched))
        }
    }
}

/// One row of either statement, parsed and validated (before the touch can
/// write).
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

    fn parse(row: &Row, request: &RoundEntryRequest) -> Result<Self> {
        let registered: Option<String> = col(row, 0)?;
        let stored_registry = match registered {
            Some(_) => Some(registry::entry(row)?),
            None => None,
        };
        let marker: Option<String> = col(row, 4)?;
        let pending: Option<String> = col(row, 5)?;
        let client_id: Option<String> = col(row, 6)?;
        let client_record = match client_id {
            None => None,
            Some(client_id) => {
                let subscriptions: String = col(row, 11)?;
                Some(ClientRecord {
                    client_id,
                    actor_id: col(row, 7)?,
                    wire_version: col(row, 8)?,
                    cursor: col(row, 9)?,
                    updated_at_ms: col(row, 10)?,
                    subscriptions: parse_subscriptions(&subscriptions)?,
                })
            }
        };
        let stored_results: Vec<Option<String>> = col(row, 12)?;
        if stored_results.len() != request.client_commit_ids.len() {
            return Err(Error::backend(
                "the entry returned another number of push results",
            ));
        }
        let push_results = stored_results
            .iter()
            .map(|text| text.as_deref().map(StoredPushResult::from_json).transpose())
            .collect();
        let log_bounds = if request.log_bounds {
            Some(LogBounds {
                max_commit_seq: col(row, 13)?,
                horizon_seq: col(row, 14)?,
            })
        } else {
            None
        };
        let gate = gate::gate_from_text(
            &request.partition,
            marker.as_deref(),
            None,
            pending.as_deref(),
        )?;
        Ok(Self {
            registry: stored_registry,
            gate,
            client_record,
            push_results,
            log_bounds,
        })
    }
}
