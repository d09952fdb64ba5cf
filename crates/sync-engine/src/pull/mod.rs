//! Pull (`engine.md` §5): gate bracketing (L1–L4) and the section decision.

mod bootstrap;
mod budget;
pub(crate) mod client_record;
pub(crate) mod incremental;
mod limits;
mod token;

use sync_core::{serve_gate_refusal, serve_gate_token_changed, serve_not_ready_error, ServeGate};

use crate::round::abort::Abort;
use crate::round::emitter::Emitter;
use crate::round::Round;
use crate::scopes::effective_scopes;
use crate::wire::request::{PullHeader, Subscription};
use crate::wire::response::{ResponseItem, SectionStatus, SubEnd, SubStart};
use crate::wire::wire_error::WireError;

use limits::PullLimits;

/// Reads shared by every section of the pull.
pub(crate) struct PullState {
    /// L1's gate, compared with every later gate read.
    gate: ServeGate,
    /// L2's `max_commit_seq`.
    max_seq: i64,
    /// L2's horizon.
    horizon: i64,
    limits: PullLimits,
    /// The round's response byte budget.
    budget: budget::Budget,
}

/// How a section ended, for the client record (`engine.md` §5.8).
pub(crate) enum SectionEnd {
    /// An active section's `nextCursor` (the pin for bootstraps).
    Active(i64),
    /// Revoked or reset: not counted.
    Inactive,
}

/// Runs L1–L4 and every section; returns the `nextCursor`s of the
/// active sections.
pub(crate) fn run_pull(
    round: &Round<'_>,
    pull: &PullHeader,
    out: &mut Emitter<'_>,
) -> Result<Vec<i64>, Abort> {
    let storage = round.engine.storage.as_ref();
    let partition = &round.ctx.partition;
    // A round without pushes reaches L1 straight from its entry: the gate
    // checked at E3 and the bounds read with it serve (decisions.md).
    let start = round.pull_start.as_ref();
    let gate = match start {
        Some(start) => start.gate.clone(),
        None => read_gate(round)?,
    }; // L1
    let (max_seq, horizon) = match start.and_then(|s| s.log_bounds) {
        Some(bounds) => (bounds.max_commit_seq, bounds.horizon_seq),
        None => (
            storage
                .get_max_commit_seq(partition)
                .map_err(Abort::storage)?, // L2
            storage.get_horizon_seq(partition).map_err(Abort::storage)?,
        ),
    };
    #[cfg(feature = "test-hooks")]
    if let Some(hook) = &round.engine.config.test_hooks.after_l2 {
        hook();
    }
    let state = PullState {
        gate,
        max_seq,
        horizon,
        limits: PullLimits::of(pull),
        budget: budget::Budget::new(round.engine.config.limits.response_budget_bytes),
    };
    let mut active = Vec::new();
    for (index, sub) in round.req.subscriptions.iter().enumerate() {
        #[cfg(feature = "test-hooks")]
        if index > 0 {
            if let Some(hook) = &round.engine.config.test_hooks.between_sections {
                hook(index);
            }
        }
        let _ = index;
        if let SectionEnd::Active(cursor) = section(round, &state, sub, out)? {
            active.push(cursor);
        }
    }
    Ok(active)
}

/// The gate read with its refusal check (L1).
fn read_gate(round: &Round<'_>) -> Result<ServeGate, Abort> {
    let gate = round
        .engine
        .storage
        .read_serve_gate(&round.ctx.partition, round.running())
        .map_err(Abort::storage)?;
    if let Some(refusal) = serve_gate_refusal(&gate, round.running(), &round.serve_context()) {
        return Err(Abort::Request(WireError::from_storage(
            &serve_not_ready_error(&refusal),
        )));
    }
    Ok(gate)
}

/// L4 then `SubEnd`.
fn end_section(
    round: &Round<'_>,
    state: &PullState,
    out: &mut Emitter<'_>,
    end: SubEnd,
) -> Result<(), Abort> {
    let gate = read_gate(round)?;
    if let Some(refusal) = serve_gate_token_changed(&state.gate, &gate) {
        return Err(Abort::Request(WireError::from_storage(
            &serve_not_ready_error(&refusal),
        )));
    }
    out.emit(ResponseItem::SubEnd(end))?;
    Ok(())
}

/// A data-less section (revoked or reset) echoing the cursor.
fn inactive(
    round: &Round<'_>,
    state: &PullState,
    sub: &Subscription,
    status: SectionStatus,
    out: &mut Emitter<'_>,
) -> Result<SectionEnd, Abort> {
    let reason = match status {
        SectionStatus::Reset => "sync.cursor_expired",
        _ => "sync.scope_revoked",
    };
    out.emit(ResponseItem::SubStart(SubStart {
        id: sub.id.clone(),
        status,
        reason_code: reason.to_owned(),
        effective_scopes: Default::default(),
        bootstrap: false,
    }))?;
    end_section(
        round,
        state,
        out,
        SubEnd {
            next_cursor: sub.cursor,
            bootstrap_state: None,
        },
    )?;
    Ok(SectionEnd::Inactive)
}

/// The section decision of §5.3 (first match).
fn section(
    round: &Round<'_>,
    state: &PullState,
    sub: &Subscription,
    out: &mut Emitter<'_>,
) -> Result<SectionEnd, Abort> {
    let table = round.engine.schema.table(&sub.table);
    let effective = table.and_then(|t| effective_scopes(t, &sub.scopes, &round.resolved));
    let Some(effective) = effective else {
        return inactive(round, state, sub, SectionStatus::Revoked, out);
    };
    if sub.bootstrap_state.is_none() && (0..state.horizon).contains(&sub.cursor) {
        return inactive(round, state, sub, SectionStatus::Reset, out);
    }
    if sub.bootstrap_state.is_some() || sub.cursor < 0 || sub.cursor > state.max_seq {
        return bootstrap::run(round, state, sub, effective, out);
    }
    incremental::run(round, state, sub, effective, out)
}
