//! The per-client record written after a round (`engine.md` §5.8).

use sync_core::{ClientRecord, ClientSubscription};

use crate::round::abort::Abort;
use crate::round::Round;

/// Writes the record. `active` = the `nextCursor`s of the pull's active
/// sections, `None` when the request had no pull. Nothing is written when
/// the last push's transaction already committed it (`Round::record_staged`).
pub(crate) fn write(round: &Round<'_>, active: Option<&[i64]>) -> Result<(), Abort> {
    if round.record_staged {
        return Ok(());
    }
    round
        .engine
        .storage
        .put_client_record(&round.ctx.partition, &record(round, active))
        .map_err(Abort::storage)
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
