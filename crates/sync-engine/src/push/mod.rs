//! Push (`engine.md` §4): the per-commit pipeline P1–P15.

mod apply;
mod conflict;
mod finalize;
mod reaction_plan;
mod records;
mod replay;
mod row_values;
mod semantics;
mod storable;
pub(crate) mod tx_reader;

use sync_core::{
    serve_gate_refusal, serve_not_ready_error, ErrorCode, PushOperationResult, PushPreludeRequest,
    StorageTransaction,
};

use crate::hooks::validators::CommitInput;
use crate::round::abort::Abort;
use crate::round::Round;
use crate::wire::request::{Operation, PushCommit};
use crate::wire::response::PushResult;
use crate::wire::wire_error::WireError;

use apply::{Applier, OpOutcome, Prefetched};
use replay::Replay;
use semantics::WriteSemantics;
use tx_reader::TxReader;

/// The idempotency identity of one commit.
pub(crate) struct CommitKey<'a> {
    pub(crate) client_id: &'a str,
    pub(crate) client_commit_id: &'a str,
}

/// Builds a command's operations under the lock (`engine.md` §4.13, P7).
pub(crate) type Builder<'b> =
    dyn FnMut(&mut dyn crate::command::CommandReader) -> Result<Vec<Operation>, WireError> + 'b;

/// Where a commit's operations come from.
pub(crate) enum Ops<'c, 'b> {
    /// A client's `PUSH_COMMIT`.
    Given(&'c [Operation]),
    /// Built by a server command at P7.
    Built(&'c mut Builder<'b>),
}

impl Ops<'_, '_> {
    /// A client's operations (a command's are built only under the lock).
    fn given(&self) -> Option<&[Operation]> {
        match self {
            Ops::Given(given) => Some(given),
            Ops::Built(_) => None,
        }
    }
}

/// The write rules of the round's pushes.
pub(crate) fn semantics(round: &Round<'_>) -> WriteSemantics {
    WriteSemantics::of(round.req.wire_version, round.engine.config.delete_policy)
}

/// Runs P1–P15 for one client commit and returns its result.
pub(crate) fn push_commit(round: &mut Round<'_>, commit: &PushCommit) -> Result<PushResult, Abort> {
    let client_id = round.req.header.client_id.clone();
    let key = CommitKey {
        client_id: &client_id,
        client_commit_id: &commit.client_commit_id,
    };
    run_pipeline(round, &key, Ops::Given(&commit.operations))
}

/// Runs P1–P15 for one commit identity and operation source.
pub(crate) fn run_pipeline(
    round: &mut Round<'_>,
    key: &CommitKey<'_>,
    ops: Ops<'_, '_>,
) -> Result<PushResult, Abort> {
    let storage = round.engine.storage.as_ref();
    // P1 (read at round entry for the round's own pushes)
    let stored = match round.take_prefetched(key.client_id, key.client_commit_id) {
        Some(read) => read,
        None => storage.get_push_result(&round.ctx.partition, key.client_id, key.client_commit_id),
    };
    match stored {
        Ok(Some(stored)) => return Ok(replay::judge(round, key, stored, ops.given()).answer(round)),
        Ok(None) => {}
        Err(e) if e.is(ErrorCode::IdempotencyCacheMiss) => {
            return Ok(records::cache_miss(key.client_commit_id))
        }
        Err(e) => return Err(Abort::storage(e)),
    }
    #[cfg(feature = "test-hooks")]
    if let Some(hook) = &round.engine.config.test_hooks.after_p1 {
        hook(key.client_commit_id);
    }
    let mut tx = storage
        .begin(&round.ctx.partition)
        .map_err(Abort::storage)?; // P2
    match locked_pipeline(round, key, ops, tx.as_mut()) {
        Ok(Step::Replay(replay)) => {
            rollback(tx);
            Ok(replay.answer(round))
        }
        Ok(Step::Apply(applied)) => finalize::applied(round, key, tx, applied),
        Ok(Step::Reject(record, now)) => finalize::rejected(round, key, tx, record, now),
        Err(abort) => {
            rollback(tx);
            Err(abort)
        }
    }
}

/// What the locked part decided.
enum Step {
    /// A stored result found under the lock (P6).
    Replay(Replay),
    /// Every operation applied; finalize P12–P15.
    Apply(finalize::Applied),
    /// The terminating record and the commit's time; finalize R1–R4.
    Reject(PushOperationResult, i64),
}

fn rollback(tx: Box<dyn StorageTransaction + '_>) {
    // Nothing was written that must survive; a failed rollback is
    // reported by storage by discarding the connection.
    let _ = tx.rollback();
}

/// P3–P10 inside the transaction.
fn locked_pipeline(
    round: &Round<'_>,
    key: &CommitKey<'_>,
    ops: Ops<'_, '_>,
    tx: &mut (dyn StorageTransaction + '_),
) -> Result<Step, Abort> {
    let engine = round.engine;
    let request = prelude_request(round, key, &ops);
    let prelude = tx.begin_push(&request).map_err(Abort::storage)?; // P3
    let now = engine.config.clock.now_ms(); // P4
    let gate = &prelude.gate; // P5
    if let Some(refusal) = serve_gate_refusal(gate, round.running(), &round.serve_context()) {
        return Err(Abort::Request(WireError::from_storage(
            &serve_not_ready_error(&refusal),
        )));
    }
    match prelude.push_result {
        Ok(Some(stored)) => {
            return Ok(Step::Replay(replay::judge(round, key, stored, ops.given())))
        }
        Ok(None) => {}
        Err(e) if e.is(ErrorCode::IdempotencyCacheMiss) => {
            return Ok(Step::Replay(Replay::own(records::cache_miss(
                key.client_commit_id,
            ))))
        }
        Err(e) => return Err(Abort::storage(e)),
    } // P6
    let step = apply_locked(round, key, ops, tx, request, prelude.rows, now);
    // A row write's violation may be reported by any later call (the
    // dialect sent the write with it): the rejection of that operation.
    match step {
        Err(abort) => match abort.violation() {
            Some(i) => Ok(Step::Reject(records::constraint_violation(i), now)),
            None => Err(abort),
        },
        step => step,
    }
}

/// P7–P10: the operations, the whole-commit validator, the reactions.
fn apply_locked(
    round: &Round<'_>,
    key: &CommitKey<'_>,
    ops: Ops<'_, '_>,
    tx: &mut (dyn StorageTransaction + '_),
    request: PushPreludeRequest,
    rows: Option<Vec<Vec<Option<sync_core::StoredRow>>>>,
    now: i64,
) -> Result<Step, Abort> {
    let engine = round.engine;
    let prefetched = Prefetched::new(request, rows);
    let built;
    let operations: &[Operation] = match ops {
        Ops::Given(given) => given,
        Ops::Built(builder) => {
            built = build_operations(round, builder, tx)?; // P7
            &built
        }
    };
    let mut applier = Applier {
        engine,
        partition: &round.ctx.partition,
        actor_id: &round.ctx.actor_id,
        resolved: &round.resolved,
        semantics: semantics(round),
        tx: &mut *tx,
        prefetched,
        changes: Vec::new(),
        evidence: Vec::new(),
    };
    if let OpOutcome::Terminal(record) = applier.apply_all(operations)? {
        return Ok(Step::Reject(record, now)); // P8
    }
    let (changes, evidence) = (applier.changes, applier.evidence);
    let input = CommitInput {
        client_id: key.client_id.to_owned(),
        client_commit_id: key.client_commit_id.to_owned(),
        actor_id: round.ctx.actor_id.clone(),
        partition: round.ctx.partition.clone(),
        operations: evidence,
    };
    let op_count = operations.len();
    if let Some(record) = commit_validator(round, &input, op_count, tx)? {
        return Ok(Step::Reject(record, now)); // P9
    }
    let reactions = plan_reactions(round, &input, tx)?; // P10
    Ok(Step::Apply(finalize::Applied {
        now,
        op_count,
        changes,
        reactions,
    }))
}

/// P3–P6 asked for at once: the lock, the gate, the idempotency record
/// and the rows a client's operations name (each first read of a row at
/// A3 is then served from the prelude; a command's operations are only
/// known at P7, so it names none).
fn prelude_request(
    round: &Round<'_>,
    key: &CommitKey<'_>,
    ops: &Ops<'_, '_>,
) -> PushPreludeRequest {
    let mut rows: Vec<(String, Vec<String>)> = Vec::new();
    if let Ops::Given(operations) = ops {
        for op in operations.iter() {
            if round.engine.schema.table(&op.table).is_none()
                || storable::row_id_problem(&op.row_id).is_some()
            {
                continue;
            }
            let at = match rows.iter().position(|(t, _)| *t == op.table) {
                Some(at) => at,
                None => {
                    rows.push((op.table.clone(), Vec::new()));
                    rows.len() - 1
                }
            };
            let ids = &mut rows[at].1;
            if !ids.contains(&op.row_id) {
                ids.push(op.row_id.clone());
            }
        }
    }
    PushPreludeRequest {
        running_schema_version: round.running(),
        client_id: key.client_id.to_owned(),
        client_commit_id: key.client_commit_id.to_owned(),
        rows,
        deferred_violations: true,
    }
}

/// P7: the command builder reads through the transaction.
fn build_operations(
    round: &Round<'_>,
    builder: &mut Builder<'_>,
    tx: &mut (dyn StorageTransaction + '_),
) -> Result<Vec<Operation>, Abort> {
    let mut reader = TxReader::new(tx, &round.engine.schema);
    let built = builder(&mut reader);
    if let Some(poison) = reader.into_poison() {
        return Err(Abort::storage(poison));
    }
    built.map_err(Abort::Request)
}

/// P9: the whole-commit validator (`engine.md` §4.8).
fn commit_validator(
    round: &Round<'_>,
    input: &CommitInput,
    op_count: usize,
    tx: &mut (dyn StorageTransaction + '_),
) -> Result<Option<PushOperationResult>, Abort> {
    let Some(validator) = &round.engine.config.commit_validator else {
        return Ok(None);
    };
    let mut reader = TxReader::new(tx, &round.engine.schema);
    let verdict = validator.validate(input, &mut reader);
    if let Some(poison) = reader.into_poison() {
        return Err(Abort::storage(poison));
    }
    let first = input.operations.first().map_or(0, |e| e.op_index);
    Ok(match verdict {
        Ok(()) => None,
        Err(crate::hooks::validators::ValidationFailure::Reject(r)) => Some(match r.op_index() {
            Some(i) if (i as usize) < op_count => apply::failure_record(i, r.into()),
            Some(_) => records::error(
                0,
                "sync.constraint_violation",
                "validator named no operation",
            ),
            None => apply::failure_record(first, r.into()),
        }),
        Err(failure) => Some(apply::failure_record(first, failure)),
    })
}

/// P10: reaction planning and validation (`engine.md` §4.9).
fn plan_reactions(
    round: &Round<'_>,
    input: &CommitInput,
    tx: &mut (dyn StorageTransaction + '_),
) -> Result<Vec<crate::hooks::reactions::ReactionPlan>, Abort> {
    let Some(planner) = &round.engine.config.reaction_planner else {
        return Ok(Vec::new());
    };
    let mut reader = TxReader::new(tx, &round.engine.schema);
    let planned = planner.plan(input, &mut reader);
    if let Some(poison) = reader.into_poison() {
        return Err(Abort::storage(poison));
    }
    let plans = planned.map_err(Abort::internal)?;
    reaction_plan::validate(&plans).map_err(Abort::internal)?;
    Ok(plans)
}
