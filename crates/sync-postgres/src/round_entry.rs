//! The round entry in one statement (`ServerStorage::enter_round`): the
//! registry touch as a data-modifying CTE, and the serve gate, the client
//! record and the stored push results read beside it — one round trip
//! instead of three plus one per pushed commit.

use std::collections::BTreeMap;

use sync_core::{
    validate, ClientRecord, Error, LogBounds, Result, RoundEntry, RoundEntryRequest,
    StoredPushResult,
};

use crate::gate;
use crate::json::parse_subscriptions;
use crate::pool::{col, Conn};
use crate::registry;

/// `$1` partition, `$2` initial epoch, `$3` time, `$4` running version,
/// `$5` client, `$6` commit ids, `$7` freshness bound (`NULL`: refresh);
/// the last two columns are the log bounds.
///
/// The touch inserts nothing when the stored entry is fresh (newer than
/// `$7`): no row is written or locked, so the statement
/// assigns no transaction id and its commit waits for no WAL flush. Else it
/// is the upsert of `touch_partition`; a concurrent first contact's row,
/// invisible to the snapshot, is updated through the conflict and returned.
/// The gate's epoch is the entry's (a separate gate read after the touch
/// reads the same committed epoch); the marker and the pending checkpoints
/// are read in the statement's snapshot.
const ENTRY_SQL: &str = "WITH existing AS ( \
      SELECT partition, log_epoch, epoch_required, last_authenticated_at_ms \
      FROM sync_partition_registry WHERE partition = $1), \
    touched AS ( \
      INSERT INTO sync_partition_registry \
        (partition, log_epoch, epoch_required, last_authenticated_at_ms) \
      SELECT $1::text, $2::text, FALSE, $3::int8 \
      WHERE NOT EXISTS (SELECT 1 FROM existing e \
        WHERE e.last_authenticated_at_ms > $7::int8) \
      ON CONFLICT (partition) DO UPDATE \
      SET last_authenticated_at_ms = excluded.last_authenticated_at_ms \
      RETURNING partition, log_epoch, epoch_required, last_authenticated_at_ms), \
    entry AS ( \
      SELECT * FROM touched \
      UNION ALL SELECT * FROM existing WHERE NOT EXISTS (SELECT 1 FROM touched)) \
    SELECT t.partition, t.log_epoch, t.epoch_required, t.last_authenticated_at_ms, \
      (SELECT schema_version FROM sync_schema_meta WHERE id = 1)::text, \
      (SELECT coalesce(json_agg(c.name ORDER BY c.name), '[]'::json) \
         FROM sync_backfill_checkpoints c WHERE c.partition = $1 \
           AND c.schema_version = $4::int4 AND c.state <> 'activated')::text, \
      k.client_id, k.actor_id, k.wire_version, k.cursor, k.updated_at_ms, \
      k.subscriptions::text, \
      (SELECT coalesce(json_object_agg(p.client_commit_id, p.result::text), '{}'::json) \
         FROM sync_push_results p WHERE p.partition = $1 AND p.client_id = $5 \
           AND p.client_commit_id = ANY($6::text[]))::text, \
      coalesce((SELECT s.max_commit_seq FROM sync_partitions s WHERE s.partition = $1), 0), \
      coalesce((SELECT s.horizon_seq FROM sync_partitions s WHERE s.partition = $1), 0) \
    FROM entry t \
    LEFT JOIN sync_clients k ON k.partition = $1 AND k.client_id = $5";

/// Validates the request as the single methods would.
pub(crate) fn validate_request(request: &RoundEntryRequest) -> Result<()> {
    validate::partition(&request.partition)?;
    validate::log_epoch(&request.initial_log_epoch)?;
    gate::validate_args(&request.partition, request.running_schema_version)
}

/// Runs the entry statement.
pub(crate) fn enter(conn: &mut Conn, request: &RoundEntryRequest) -> Result<RoundEntry> {
    let fresh_after: Option<i64> = (request.refresh_after_ms > 0).then(|| {
        request
            .authenticated_at_ms
            .saturating_sub(request.refresh_after_ms)
    });
    let row = conn.query_one(
        ENTRY_SQL,
        &[
            &request.partition,
            &request.initial_log_epoch,
            &request.authenticated_at_ms,
            &request.running_schema_version,
            &request.client_id,
            &request.client_commit_ids,
            &fresh_after,
        ],
    )?;
    let registry = registry::entry(&row)?;
    let stored: Option<String> = col(&row, 4)?;
    let pending: Option<String> = col(&row, 5)?;
    let gate = gate::gate_from_text(
        &request.partition,
        stored.as_deref(),
        Some(registry.log_epoch.as_str()),
        pending.as_deref(),
    )?;
    let client_id: Option<String> = col(&row, 6)?;
    let client_record = match client_id {
        None => None,
        Some(client_id) => {
            let subscriptions: String = col(&row, 11)?;
            Some(ClientRecord {
                client_id,
                actor_id: col(&row, 7)?,
                wire_version: col(&row, 8)?,
                cursor: col(&row, 9)?,
                updated_at_ms: col(&row, 10)?,
                subscriptions: parse_subscriptions(&subscriptions)?,
            })
        }
    };
    let results: Option<String> = col(&row, 12)?;
    let stored_results: BTreeMap<String, String> = match results {
        Some(text) => serde_json::from_str(&text).map_err(Error::backend)?,
        None => BTreeMap::new(),
    };
    let push_results = request
        .client_commit_ids
        .iter()
        .map(|id| match stored_results.get(id) {
            Some(text) => StoredPushResult::from_json(text).map(Some),
            None => Ok(None),
        })
        .collect();
    // The log bounds cost two index lookups in the same statement: they
    // are returned whether asked for or not.
    let log_bounds = Some(LogBounds {
        max_commit_seq: col(&row, 13)?,
        horizon_seq: col(&row, 14)?,
    });
    Ok(RoundEntry {
        registry,
        gate,
        client_record,
        push_results,
        log_bounds,
    })
}
