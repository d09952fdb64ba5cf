//! §6 Idempotency, C-120…C-128.

use sync_core::{
    ErrorCode, PushOperationResult, PushStatus, RejectionDetails, ServerStorage, StoredPushResult,
};

use crate::check::{expect_code, CheckDef, CheckResult, Failure};
use crate::context::{Ctx, NOW};
use crate::fixtures::{fix1, push, task, Op, PushOutcome};
use crate::registry::check;
use crate::{check, check_eq};

use super::support_rows::commit_of;

/// Group name.
pub(crate) const GROUP: &str = "idempotency";

/// The checks of this group.
pub(crate) const CHECKS: &[CheckDef] = &[
    check(
        GROUP,
        "C-120",
        "every field of a stored push result round-trips; unknown key is None",
        c120_push_result_round_trip,
    ),
    check(
        GROUP,
        "C-121",
        "a later put_push_result for the same key is ignored",
        c121_first_writer_wins,
    ),
    check(
        GROUP,
        "C-122",
        "conflict server_version and server_row bytes round-trip",
        c122_conflict_round_trip,
    ),
    check(
        GROUP,
        "C-123",
        "stored text `not json` is idempotency_cache_miss (pool and tx)",
        c123_not_json_cache_miss,
    ),
    check(
        GROUP,
        "C-124",
        "status maybe / applied without commitSeq is idempotency_cache_miss",
        c124_invalid_result_cache_miss,
    ),
    check(
        GROUP,
        "C-125",
        "commit_rejected_push_result discards the staged upsert and stores the result",
        c125_rejection_discards_rows,
    ),
    check(
        GROUP,
        "C-126",
        "commit_rejected_push_result without the push lock is push_lock_required",
        c126_rejection_requires_lock,
    ),
    check(
        GROUP,
        "C-127",
        "a unique collision at op_index 2 is finalized as a rejection",
        c127_constraint_violation_rejection,
    ),
    check(
        GROUP,
        "C-128",
        "a rejected push does not advance max_commit_seq",
        c128_rejection_keeps_counter,
    ),
];

/// A rejection result with one error entry at `op_index`.
fn rejection(op_index: u32) -> StoredPushResult {
    StoredPushResult {
        status: PushStatus::Rejected,
        commit_seq: None,
        recorded_at_ms: Some(NOW),
        cache_identity: Some("rejection-identity".to_owned()),
        results: vec![PushOperationResult::Error {
            op_index,
            code: "sync.constraint_violation".to_owned(),
            message: "rejected".to_owned(),
            retryable: false,
            details: None,
        }],
        actor_id: None,
    }
}

/// Stores `result` under `(client-1, ccid)` in its own transaction.
fn put(
    storage: &dyn ServerStorage,
    partition: &str,
    ccid: &str,
    result: &StoredPushResult,
) -> CheckResult {
    let mut tx = storage.begin(partition)?;
    tx.put_push_result("client-1", ccid, result)?;
    tx.commit()?;
    Ok(())
}

/// Reads `(client-1, ccid)` through a fresh transaction.
fn tx_get(
    storage: &dyn ServerStorage,
    partition: &str,
    ccid: &str,
) -> sync_core::Result<Option<StoredPushResult>> {
    let mut tx = storage.begin(partition)?;
    let result = tx.get_push_result("client-1", ccid);
    tx.rollback()?;
    result
}

fn c120_push_result_round_trip(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.ensured(&fix1()?)?;
    let result = StoredPushResult {
        status: PushStatus::Applied,
        commit_seq: Some(5),
        recorded_at_ms: Some(NOW),
        cache_identity: Some("5f0c-identity".to_owned()),
        results: vec![
            PushOperationResult::Applied { op_index: 0 },
            PushOperationResult::Conflict {
                op_index: 1,
                code: "sync.version_conflict".to_owned(),
                message: "stale".to_owned(),
                server_version: 3,
                server_row: vec![0x00, 0x01, 0x02],
                conflict_columns: None,
            },
            PushOperationResult::Error {
                op_index: 2,
                code: "sync.forbidden".to_owned(),
                message: "no".to_owned(),
                retryable: true,
                details: Some(RejectionDetails {
                    field_paths: Some(vec!["/title".to_owned(), "/done".to_owned()]),
                    reason: Some("x".to_owned()),
                    required_action: Some("reauthenticate".to_owned()),
                    references: Some([("row".to_owned(), "t1".to_owned())].into()),
                }),
            },
        ],
        actor_id: None,
    };
    put(storage.as_ref(), "p1", "cc-1", &result)?;
    check_eq!(
        storage.get_push_result("p1", "client-1", "cc-1")?,
        Some(result.clone()),
        "pool get_push_result"
    );
    check_eq!(
        tx_get(storage.as_ref(), "p1", "cc-1")?,
        Some(result),
        "tx get_push_result"
    );
    check_eq!(
        storage.get_push_result("p1", "client-1", "cc-2")?,
        None,
        "unknown client_commit_id"
    );
    check_eq!(
        storage.get_push_result("p1", "client-2", "cc-1")?,
        None,
        "unknown client_id"
    );
    check_eq!(
        storage.get_push_result("p2", "client-1", "cc-1")?,
        None,
        "other partition"
    );
    Ok(())
}

fn c121_first_writer_wins(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.ensured(&fix1()?)?;
    let first = StoredPushResult {
        recorded_at_ms: Some(NOW),
        ..StoredPushResult::applied(1)
    };
    put(storage.as_ref(), "p1", "cc-1", &first)?;
    put(storage.as_ref(), "p1", "cc-1", &rejection(0))?;
    check_eq!(
        storage.get_push_result("p1", "client-1", "cc-1")?,
        Some(first.clone()),
        "pool get_push_result"
    );
    check_eq!(
        tx_get(storage.as_ref(), "p1", "cc-1")?,
        Some(first),
        "tx get_push_result"
    );
    Ok(())
}

fn c122_conflict_round_trip(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.ensured(&fix1()?)?;
    let server_row: Vec<u8> = (0..=255u8).rev().chain([0x00, 0xc3, 0x28]).collect();
    let conflict = PushOperationResult::Conflict {
        op_index: 0,
        code: "sync.version_conflict".to_owned(),
        message: "stale".to_owned(),
        server_version: (1 << 53) - 1,
        server_row,
        // A wire-version-3 conflict keeps its bitmap through storage.
        conflict_columns: Some(vec![0b1000_0001, 0x00]),
    };
    let result = StoredPushResult {
        status: PushStatus::Rejected,
        commit_seq: None,
        recorded_at_ms: None,
        cache_identity: None,
        results: vec![conflict.clone()],
        actor_id: None,
    };
    put(storage.as_ref(), "p1", "cc-1", &result)?;
    let stored = storage
        .get_push_result("p1", "client-1", "cc-1")?
        .ok_or_else(|| Failure::new("push result missing"))?;
    check_eq!(stored.results, [conflict], "conflict entry");
    check_eq!(stored, result, "whole record");
    Ok(())
}

fn expect_cache_miss(storage: &dyn ServerStorage, ccid: &str, what: &str) -> CheckResult {
    let pool = expect_code(
        storage.get_push_result("p1", "client-1", ccid),
        ErrorCode::IdempotencyCacheMiss,
        &format!("pool get_push_result, {what}"),
    )?;
    check!(pool.retryable(), "{what}: the cache miss must be retryable");
    let tx = expect_code(
        tx_get(storage, "p1", ccid),
        ErrorCode::IdempotencyCacheMiss,
        &format!("tx get_push_result, {what}"),
    )?;
    check!(
        tx.retryable(),
        "{what}: the tx cache miss must be retryable"
    );
    Ok(())
}

fn c123_not_json_cache_miss(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.ensured(&fix1()?)?;
    ctx.raw()?
        .set_push_result_text("p1", "client-1", "cc-1", "not json")?;
    expect_cache_miss(storage.as_ref(), "cc-1", "text `not json`")
}

fn c124_invalid_result_cache_miss(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.ensured(&fix1()?)?;
    let raw = ctx.raw()?;
    let cases = [
        (
            "cc-maybe",
            r#"{"status":"maybe","results":[]}"#,
            "status maybe",
        ),
        (
            "cc-noseq",
            r#"{"status":"applied","results":[]}"#,
            "applied without commitSeq",
        ),
    ];
    for (ccid, text, _) in cases {
        raw.set_push_result_text("p1", "client-1", ccid, text)?;
    }
    for (ccid, _, what) in cases {
        expect_cache_miss(storage.as_ref(), ccid, what)?;
    }
    Ok(())
}

fn c125_rejection_discards_rows(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let storage = ctx.ensured(&schema)?;
    let result = rejection(0);
    let mut tx = storage.begin("p1")?;
    tx.lock_partition_for_push()?;
    tx.upsert_row("tasks", &task(&schema, "t1", "pA", "candidate")?, Some(0))?;
    tx.commit_rejected_push_result("client-1", "cc-1", &result)?;
    check_eq!(storage.get_row("p1", "tasks", "t1")?, None, "candidate row");
    check_eq!(
        storage.get_push_result("p1", "client-1", "cc-1")?,
        Some(result),
        "stored rejection"
    );
    check_eq!(storage.get_max_commit_seq("p1")?, 0, "get_max_commit_seq");
    Ok(())
}

fn c126_rejection_requires_lock(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let storage = ctx.ensured(&schema)?;
    let mut tx = storage.begin("p1")?;
    tx.upsert_row("tasks", &task(&schema, "t1", "pA", "candidate")?, Some(0))?;
    expect_code(
        tx.commit_rejected_push_result("client-1", "cc-1", &rejection(0)),
        ErrorCode::PushLockRequired,
        "rejection without lock_partition_for_push",
    )?;
    check_eq!(storage.get_row("p1", "tasks", "t1")?, None, "staged row");
    check_eq!(
        storage.get_push_result("p1", "client-1", "cc-1")?,
        None,
        "push result"
    );
    let mut tx = storage.begin("p1")?;
    tx.lock_partition_for_push()?;
    check_eq!(
        tx.append_commit(&commit_of("cc-2", Vec::new()))?,
        1,
        "append in the next transaction"
    );
    tx.commit()?;
    Ok(())
}

fn c127_constraint_violation_rejection(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let storage = ctx.ensured(&schema)?;
    push(
        storage.as_ref(),
        "p1",
        "client-1",
        "cc-0",
        &[Op::upsert("tasks", task(&schema, "t0", "pA", "dup")?)],
    )?;

    let mut tx = storage.begin("p1")?;
    tx.lock_partition_for_push()?;
    tx.upsert_row("tasks", &task(&schema, "ta", "pA", "a")?, Some(0))?;
    tx.upsert_row("tasks", &task(&schema, "tb", "pA", "b")?, Some(1))?;
    let error = expect_code(
        tx.upsert_row("tasks", &task(&schema, "tc", "pA", "dup")?, Some(2)),
        ErrorCode::ConstraintViolation,
        "unique collision on tasks_by_project_title",
    )?;
    check_eq!(error.op_index_value(), Some(2), "op_index of the violation");
    let result = rejection(2);
    tx.commit_rejected_push_result("client-1", "cc-1", &result)?;

    check_eq!(
        storage.get_push_result("p1", "client-1", "cc-1")?,
        Some(result),
        "stored rejection"
    );
    for id in ["ta", "tb", "tc"] {
        check_eq!(
            storage.get_row("p1", "tasks", id)?,
            None,
            "candidate row {id}"
        );
    }
    check!(
        storage.get_row("p1", "tasks", "t0")?.is_some(),
        "the earlier row t0 must remain"
    );
    Ok(())
}

fn c128_rejection_keeps_counter(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let storage = ctx.ensured(&schema)?;
    let first = push(
        storage.as_ref(),
        "p1",
        "client-1",
        "cc-0",
        &[Op::upsert("tasks", task(&schema, "t0", "pA", "dup")?)],
    )?;
    check_eq!(first, PushOutcome::Applied(1), "first push");
    let rejected = push(
        storage.as_ref(),
        "p1",
        "client-1",
        "cc-1",
        &[
            Op::upsert("tasks", task(&schema, "t1", "pA", "fresh")?),
            Op::upsert("tasks", task(&schema, "t2", "pA", "dup")?),
        ],
    )?;
    check!(
        matches!(rejected, PushOutcome::Rejected(_)),
        "colliding push must be rejected, got {rejected:?}"
    );
    check_eq!(
        storage.get_max_commit_seq("p1")?,
        1,
        "get_max_commit_seq after the rejection"
    );
    let next = push(
        storage.as_ref(),
        "p1",
        "client-1",
        "cc-2",
        &[Op::upsert("tasks", task(&schema, "t3", "pA", "next")?)],
    )?;
    check_eq!(next, PushOutcome::Applied(2), "next applied push");
    Ok(())
}
