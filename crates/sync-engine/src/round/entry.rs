//! Entry steps E1–E14 (`engine.md` §3.1) up to scope resolution.

use std::collections::BTreeSet;

use sync_core::{serve_gate_refusal, serve_not_ready_error, RoundEntry, RoundEntryRequest};

use super::abort::Abort;
use super::emitter::Emitter;
use super::{invariants, request_limits, serve_context, PullStart, Round};
use crate::context::RequestContext;
use crate::engine::Engine;
use crate::hooks::scope_resolver::ResolveError;
use crate::outcome::RoundOutcome;
use crate::scopes::{Resolved, ANY};
use crate::wire::request::SyncRequest;
use crate::wire::response::{RespHeader, ResponseItem};
use crate::wire::wire_error::WireError;

/// The clientId namespace of server-built commands.
pub(crate) const COMMAND_CLIENT_PREFIX: &str = "[\"remote-command\",";

/// Runs E1–E14. `Ok(None)`: a floor or reset response was emitted and the
/// round is over.
pub(crate) fn enter<'a>(
    engine: &'a Engine,
    ctx: &'a RequestContext,
    req: &'a SyncRequest,
    out: &mut Emitter<'_>,
) -> Result<Option<Round<'a>>, Abort> {
    invariants::check(req).map_err(Abort::Request)?; // E1
    request_limits::check(&engine.config.limits, req).map_err(Abort::Request)?;
    let storage = engine.storage.as_ref();
    let running = engine.schema.version;
    let now = engine.config.clock.now_ms();
    // E2, E3, the client record of E10 and each push's P1, read at once
    // (one round trip on a dialect that batches them); the decisions below
    // keep the order of engine.md.
    let request = RoundEntryRequest {
        partition: ctx.partition.clone(),
        authenticated_at_ms: now,
        initial_log_epoch: engine.config.ids.new_id(),
        refresh_after_ms: engine.config.activity_refresh_ms,
        running_schema_version: running,
        client_id: req.header.client_id.clone(),
        client_commit_ids: req
            .pushes
            .iter()
            .map(|c| c.client_commit_id.clone())
            .collect(),
        log_bounds: pull_only(req),
    };
    let RoundEntry {
        registry: reg,
        gate,
        client_record: record,
        push_results,
        log_bounds,
    } = storage.enter_round(&request).map_err(Abort::storage)?;
    let prefetched = request
        .client_commit_ids
        .into_iter()
        .zip(push_results)
        .collect();
    if let Some(refusal) = serve_gate_refusal(&gate, running, &serve_context(engine, &reg)) {
        return Err(Abort::Request(WireError::from_storage(
            &serve_not_ready_error(&refusal),
        )));
    }
    if req.wire_version == 1 && reg.epoch_required {
        return Err(Abort::Request(WireError::new(
            "sync.client_wire_unsupported",
            "the partition's log epoch rotated; wire version 2 is required",
        ))); // E4
    }
    let v2 = req.wire_version >= 2;
    if v2 && req.header.log_epoch.is_none() && !req.pushes.is_empty() {
        return Err(Abort::Request(WireError::invalid_request(
            "push_without_log_epoch",
        ))); // E5
    }
    let epoch_reset = v2 && req.header.log_epoch.as_deref() != Some(reg.log_epoch.as_str()); // E6
    let epoch = v2.then(|| reg.log_epoch.clone());
    if req.header.schema_version != running {
        out.emit(ResponseItem::Header(RespHeader {
            required_schema_version: Some(running),
            latest_schema_version: Some(running),
            log_epoch: epoch,
            reset_required: epoch_reset,
        }))?; // E7
        out.emit(ResponseItem::End)?;
        return Ok(None);
    }
    if epoch_reset {
        out.emit(ResponseItem::Header(RespHeader {
            required_schema_version: None,
            latest_schema_version: Some(running),
            log_epoch: epoch,
            reset_required: true,
        }))?; // E8
        out.emit(ResponseItem::End)?;
        return Ok(None);
    }
    let client_id = &req.header.client_id;
    let invalid_client = || {
        Abort::Request(WireError::new(
            "sync.invalid_client_id",
            "clientId is bound to another actor or reserved",
        ))
    };
    if client_id.starts_with(COMMAND_CLIENT_PREFIX) {
        return Err(invalid_client()); // E9
    }
    if record.as_ref().is_some_and(|r| r.actor_id != ctx.actor_id) {
        return Err(invalid_client()); // E10
    }
    let operations: usize = req.pushes.iter().map(|c| c.operations.len()).sum();
    if operations > engine.config.limits.max_operations_per_request {
        return Err(Abort::Request(WireError::new(
            "sync.too_many_operations",
            "push exceeds the operation cap",
        ))); // E11
    }
    if req.pull.is_some_and(|p| p.accept & 0b11 == 0) {
        return Err(Abort::Request(WireError::invalid_request(
            "accept_without_rows",
        ))); // E12
    }
    check_subscriptions(engine, req)?; // E13
    let resolved = resolve(engine, ctx, &req.header.client_id)?; // E14
    Ok(Some(Round {
        engine,
        ctx,
        req,
        reg,
        record,
        prefetched,
        pull_start: pull_only(req).then_some(PullStart { gate, log_bounds }),
        resolved,
        outcome: RoundOutcome::default(),
        stage_record: false,
        record_staged: false,
        foreign_replay: false,
    }))
}

/// A round whose pull follows its entry with no push in between: its L1 and
/// L2 may use what the entry read (nothing of this round ran between them).
fn pull_only(req: &SyncRequest) -> bool {
    req.pushes.is_empty() && req.pull.is_some()
}

fn invalid_subscription(reason: &str) -> Abort {
    Abort::Request(
        WireError::new("sync.invalid_subscription", "subscription is invalid")
            .with_detail("reason", reason),
    )
}

/// E13: duplicate ids, unknown tables, undeclared keys, `"*"` values.
fn check_subscriptions(engine: &Engine, req: &SyncRequest) -> Result<(), Abort> {
    let mut ids = BTreeSet::new();
    for sub in &req.subscriptions {
        if !ids.insert(sub.id.as_str()) {
            return Err(invalid_subscription("duplicate_id"));
        }
        let Some(table) = engine.schema.table(&sub.table) else {
            return Err(Abort::Request(
                WireError::new("sync.unknown_table", "subscription names an unknown table")
                    .with_detail("table", sub.table.clone()),
            ));
        };
        if sub
            .scopes
            .keys()
            .any(|k| !table.declared_variables.contains(k))
        {
            return Err(invalid_subscription("undeclared_scope_key"));
        }
        if sub.scopes.values().flatten().any(|v| v == ANY) {
            return Err(invalid_subscription("wildcard_requested"));
        }
    }
    Ok(())
}

/// E14 / §3.2 items 1–3.
pub(crate) fn resolve(
    engine: &Engine,
    ctx: &RequestContext,
    client_id: &str,
) -> Result<Resolved, Abort> {
    match engine
        .config
        .resolver
        .resolve(&ctx.partition, &ctx.actor_id, client_id)
    {
        Err(ResolveError::Failed(_)) => Ok(Resolved::Failed),
        Err(ResolveError::Request(e)) => Err(Abort::Request(e)),
        Ok(allowed) => {
            let declared = &engine.schema.declared_variables;
            if allowed.keys().any(|k| !declared.contains(k)) {
                return Err(invalid_subscription("undeclared_resolved_key"));
            }
            Ok(Resolved::Allowed(allowed))
        }
    }
}
