//! The per-client record written after a round (`engine.md` §5.8).

use sync_core::{ClientRecord, ClientSubscription};

use crate::round::abort::Abort;
use crate::round::Round;

/// Writes the record. `active` = the `nextCursor`s of the pull's active
/// sections, `None` when the request had no pull. Nothing is written when
/// the last push's transaction already committed it (`Round::record_staged`).
pub(crate) fn write(round: &Round<'_>, active: Option<&[i64]>) -> Result<(), Abort> {
    if round.record_staged || round.foreign_replay {
        return Ok(());
    }
    let record = record(round, active);
    if !needs_write(round, &record) {
        return Ok(());
    }
    round
        .engine
        .storage
        .put_client_record(&round.ctx.partition, &record)
        .map_err(Abort::storage)
}

/// Whether `record` must be written: it differs from the stored one in more
/// than `updated_at_ms`, or the stored time is older than the activity
/// refresh interval (`EngineConfig::activity_refresh_ms`; `0`: always).
pub(crate) fn needs_write(round: &Round<'_>, record: &ClientRecord) -> bool {
    let interval = round.engine.config.activity_refresh_ms;
    match round.record.as_ref() {
        Some(stored) if interval > 0 => {
            let same = ClientRecord {
                updated_at_ms: record.updated_at_ms,
                ..stored.clone()
            } == *record;
            let fresh = stored.updated_at_ms > record.updated_at_ms.saturating_sub(interval);
            !(same && fresh)
        }
        _ => true,
    }
}

/// The record §5.8 writes after this round.
pub(crate) fn record(round: &Round<'_>, active: Option<&[i64]>) -> ClientRecord {
    let previous = round.record.as_ref();
    let subscriptions = match active {
        Some(_) => round
            .req
            .subscriptions
            .iter()
            .map(|s| ClientSubscription {
                id: s.id.clone(),
                table: s.table.clone(),
                scopes: s.scopes.clone(),
            })
            .collect(),
        None => previous
            .map(|r| r.subscriptions.clone())
            .unwrap_or_default(),
    };
    let cursor = active
        .and_then(|cursors| cursors.iter().copied().min())
        .or_else(|| previous.map(|r| r.cursor))
        .unwrap_or(-1);
    ClientRecord {
        client_id: round.req.header.client_id.clone(),
        actor_id: round.ctx.actor_id.clone(),
        wire_version: i32::from(round.req.wire_version),
        cursor,
        updated_at_ms: round.engine.config.clock.now_ms(),
        subscriptions,
    }
}
