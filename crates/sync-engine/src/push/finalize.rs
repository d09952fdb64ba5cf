//! Finalization of one push (`engine.md` §4.10): applied (P12–P15) or
//! rejected (R1–R4).

use sync_core::{
    NewChange, NewCommit, PushCommitOutcome, PushOperationResult, PushStatus, StorageTransaction,
    StoredPushResult,
};

use super::reaction_plan::{self, Source};
use super::{records, CommitKey};
use crate::hooks::reactions::ReactionPlan;
use crate::outcome::AppliedCommit;
use crate::round::abort::{Abort, InternalFailure};
use crate::round::Round;
use crate::wire::response::PushResult;

/// The state of a commit whose operations all applied.
pub(crate) struct Applied {
    pub(crate) now: i64,
    pub(crate) op_count: usize,
    pub(crate) changes: Vec<NewChange>,
    pub(crate) reactions: Vec<ReactionPlan>,
}

/// P12–P15: append, enqueue, record, commit. A row write whose violation
/// the dialect reports only now (it sent the write with these statements)
/// rejects the commit instead (R1–R4).
pub(crate) fn applied(
    round: &mut Round<'_>,
    key: &CommitKey<'_>,
    mut tx: Box<dyn StorageTransaction + '_>,
    applied: Applied,
) -> Result<PushResult, Abort> {
    let (seq, stored, staged) = match write_and_stage(round, key, tx.as_mut(), &applied) {
        Ok(written) => written,
        Err(abort) => {
            return match abort.violation() {
                Some(i) => rejected(
                    round,
                    key,
                    tx,
                    records::constraint_violation(i),
                    applied.now,
                ),
                None => {
                    let _ = tx.rollback();
                    Err(abort)
                }
            }
        }
    };
    let rejection = |i: u32| rejection_result(round, records::constraint_violation(i), applied.now);
    let outcome = tx
        .commit_push(key.client_id, key.client_commit_id, &rejection)
        .map_err(Abort::storage)?; // P15
    match outcome {
        PushCommitOutcome::Committed => {
            round.record_staged = staged;
            round.outcome.applied.push(AppliedCommit {
                commit_seq: seq,
                created_at_ms: applied.now,
                actor_id: round.ctx.actor_id.clone(),
                changes: applied.changes,
            });
            Ok(records::from_stored(key.client_commit_id, stored, true))
        }
        PushCommitOutcome::Rejected { .. } => canonical_rejection(round, key),
    }
}

/// P12–P14 and the staged client record: the sequence, the stored result
/// and whether the record was staged.
fn write_and_stage(
    round: &Round<'_>,
    key: &CommitKey<'_>,
    tx: &mut (dyn StorageTransaction + '_),
    applied: &Applied,
) -> Result<(i64, StoredPushResult, bool), Abort> {
    let (seq, stored) = write_applied(round, key, tx, applied)?;
    // The last push of a round without a pull carries the round's client
    // record (§5.8) when the dialect stages it.
    let record = (round.stage_record && !round.foreign_replay)
        .then(|| crate::pull::client_record::record(round, None))
        .filter(|r| crate::pull::client_record::needs_write(round, r));
    let staged = match record {
        Some(record) => tx.stage_client_record(&record).map_err(Abort::storage)?,
        None => false,
    };
    Ok((seq, stored, staged))
}

fn write_applied(
    round: &Round<'_>,
    key: &CommitKey<'_>,
    tx: &mut (dyn StorageTransaction + '_),
    applied: &Applied,
) -> Result<(i64, StoredPushResult), Abort> {
    let seq = tx
        .append_commit(&NewCommit {
            client_id: key.client_id.to_owned(),
            client_commit_id: key.client_commit_id.to_owned(),
            actor_id: round.ctx.actor_id.clone(),
            created_at_ms: applied.now,
            changes: applied.changes.clone(),
        })
        .map_err(Abort::storage)?; // P12
    if !applied.reactions.is_empty() {
        let records = reaction_plan::to_records(
            &applied.reactions,
            &Source {
                partition: &round.ctx.partition,
                client_id: key.client_id,
                client_commit_id: key.client_commit_id,
                commit_seq: seq,
                now: applied.now,
            },
        );
        tx.enqueue_reactions(&records).map_err(Abort::storage)?; // P13
    }
    let results = (0..applied.op_count)
        .map(|i| PushOperationResult::Applied {
            op_index: u32::try_from(i).unwrap_or(u32::MAX),
        })
        .collect();
    let stored = StoredPushResult {
        status: PushStatus::Applied,
        commit_seq: Some(seq),
        recorded_at_ms: Some(applied.now),
        cache_identity: Some(round.engine.config.ids.new_id()),
        results,
        actor_id: Some(round.ctx.actor_id.clone()),
    };
    tx.put_push_result(key.client_id, key.client_commit_id, &stored)
        .map_err(Abort::storage)?; // P14
    Ok((seq, stored))
}

/// R1–R4: persist the rejection under the lock, then answer with the
/// canonical stored result.
pub(crate) fn rejected(
    round: &Round<'_>,
    key: &CommitKey<'_>,
    tx: Box<dyn StorageTransaction + '_>,
    record: PushOperationResult,
    now: i64,
) -> Result<PushResult, Abort> {
    let result = rejection_result(round, record, now); // R1
    tx.commit_rejected_push_result(key.client_id, key.client_commit_id, &result)
        .map_err(Abort::storage)?; // R2
    canonical_rejection(round, key)
}

/// R1: the rejection stored for `record`.
fn rejection_result(round: &Round<'_>, record: PushOperationResult, now: i64) -> StoredPushResult {
    StoredPushResult {
        status: PushStatus::Rejected,
        commit_seq: None,
        recorded_at_ms: Some(now),
        cache_identity: Some(round.engine.config.ids.new_id()),
        results: vec![record],
        actor_id: Some(round.ctx.actor_id.clone()),
    }
}

/// R3–R4: the canonical stored result (first writer wins).
fn canonical_rejection(round: &Round<'_>, key: &CommitKey<'_>) -> Result<PushResult, Abort> {
    let canonical = round.engine.storage.get_push_result(
        &round.ctx.partition,
        key.client_id,
        key.client_commit_id,
    ); // R3
    match canonical {
        Ok(Some(stored)) => Ok(records::from_stored(key.client_commit_id, stored, true)), // R4
        Ok(None) => Err(Abort::internal(InternalFailure(
            "rejected push result vanished",
        ))),
        Err(e) if e.is(sync_core::ErrorCode::IdempotencyCacheMiss) => {
            Ok(records::cache_miss(key.client_commit_id))
        }
        Err(e) => Err(Abort::storage(e)),
    }
}
