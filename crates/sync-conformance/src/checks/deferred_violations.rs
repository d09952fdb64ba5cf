//! A push that defers its violations (`PushPreludeRequest::deferred_violations`),
//! C-354 (beyond the checklist, `docs/decisions.md`).
//!
//! A dialect may send a row write with the statements after it and report
//! its constraint violation from a later call or from `commit_push`. Where
//! the violation surfaces is the dialect's choice; what persists is not:
//! the rejection of the violating operation, and nothing of the push.

use sync_core::{
    ErrorCode, PushCommitOutcome, PushOperationResult, PushPreludeRequest, PushStatus,
    ServerStorage, StorageTransaction, StoredPushResult, StoredRow,
};

use crate::check::{CheckDef, CheckResult, Failure};
use crate::context::{Ctx, NOW};
use crate::fixtures::{fix1, push, task, Op, PushOutcome};
use crate::registry::check;
use crate::{check, check_eq};

use super::support_rows::{commit_of, upsert_change};

/// Group name.
pub(crate) const GROUP: &str = "deferred-violations";

/// The checks of this group.
pub(crate) const CHECKS: &[CheckDef] = &[check(
    GROUP,
    "C-354",
    "a push deferring its violations is rejected at the violating operation, whichever later call reports it",
    c354_deferred_violation_rejection,
)];

const PARTITION: &str = "p1";
const CLIENT: &str = "client-1";

fn rejection(op_index: u32) -> StoredPushResult {
    StoredPushResult {
        status: PushStatus::Rejected,
        commit_seq: None,
        recorded_at_ms: Some(NOW),
        cache_identity: Some(format!("rejection-{op_index}")),
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

/// What a step of the push reported.
enum Reported {
    /// The step ran.
    Ran,
    /// The step reported a constraint violation at this operation.
    Violation(u32),
}

/// Runs one step; a constraint violation is reported, any other error fails.
fn step<T>(result: sync_core::Result<T>, what: &str) -> CheckResult<Reported> {
    match result {
        Ok(_) => Ok(Reported::Ran),
        Err(e) if e.is(ErrorCode::ConstraintViolation) => match e.op_index_value() {
            Some(i) => Ok(Reported::Violation(i)),
            None => Err(Failure::new(format!(
                "{what}: constraint_violation without op_index"
            ))),
        },
        Err(e) => Err(Failure::new(format!("{what}: {e:?}"))),
    }
}

/// A push of `rows` (operation i writes `rows[i]`) begun with the prelude,
/// `deferred_violations` as given, with `read_after` read through the
/// transaction after the writes; returns the operation whose violation
/// was reported and the call that reported it.
fn violating_push(
    storage: &dyn ServerStorage,
    commit_id: &str,
    rows: &[StoredRow],
    read_after: Option<&str>,
    deferred_violations: bool,
) -> CheckResult<(u32, String)> {
    let mut tx = storage.begin(PARTITION)?;
    let request = PushPreludeRequest {
        running_schema_version: tx.writer_version(),
        client_id: CLIENT.to_owned(),
        client_commit_id: commit_id.to_owned(),
        rows: vec![(
            "tasks".to_owned(),
            rows.iter().map(|r| r.row_id.clone()).collect(),
        )],
        deferred_violations,
    };
    let prelude = tx.begin_push(&request)?;
    check!(
        matches!(prelude.push_result, Ok(None)),
        "{commit_id}: no stored result before the push"
    );
    let mut reported = None;
    for (i, row) in rows.iter().enumerate() {
        let op = u32::try_from(i).map_err(|e| Failure::new(e.to_string()))?;
        if let Reported::Violation(at) = step(
            tx.upsert_row("tasks", row, Some(op)),
            &format!("upsert_row {i}"),
        )? {
            reported = Some((at, format!("upsert_row {i}")));
            break;
        }
    }
    if let (None, Some(id)) = (&reported, read_after) {
        if let Reported::Violation(at) = step(tx.get_row("tasks", id), "get_row")? {
            reported = Some((at, "get_row".to_owned()));
        }
    }
    if reported.is_none() {
        reported = finish(tx.as_mut(), commit_id, rows)?;
    }
    match reported {
        Some((at, call)) => {
            tx.commit_rejected_push_result(CLIENT, commit_id, &rejection(at))?;
            Ok((at, call))
        }
        None => match tx.commit_push(CLIENT, commit_id, &rejection)? {
            PushCommitOutcome::Rejected { op_index } => Ok((op_index, "commit_push".to_owned())),
            PushCommitOutcome::Committed => Err(Failure::new(format!(
                "{commit_id}: the violating push committed"
            ))),
        },
    }
}

/// The append and the push result; a violation one of them reports.
fn finish(
    tx: &mut (dyn StorageTransaction + '_),
    commit_id: &str,
    rows: &[StoredRow],
) -> CheckResult<Option<(u32, String)>> {
    let changes = rows.iter().map(|r| upsert_change("tasks", r)).collect();
    let commit = commit_of(commit_id, changes);
    if let Reported::Violation(at) = step(tx.append_commit(&commit), "append_commit")? {
        return Ok(Some((at, "append_commit".to_owned())));
    }
    let applied = StoredPushResult::applied(2);
    if let Reported::Violation(at) = step(
        tx.put_push_result(CLIENT, commit_id, &applied),
        "put_push_result",
    )? {
        return Ok(Some((at, "put_push_result".to_owned())));
    }
    Ok(None)
}

/// Nothing of a rejected push persisted, and its rejection is stored.
fn assert_rejected(
    storage: &dyn ServerStorage,
    commit_id: &str,
    op_index: u32,
    fresh: &[&str],
) -> CheckResult {
    check_eq!(
        storage.get_push_result(PARTITION, CLIENT, commit_id)?,
        Some(rejection(op_index)),
        "{commit_id}: the stored result"
    );
    check_eq!(
        storage.get_max_commit_seq(PARTITION)?,
        1,
        "{commit_id}: the counter"
    );
    for id in fresh {
        check_eq!(
            storage.get_row(PARTITION, "tasks", id)?,
            None,
            "{commit_id}: row {id} of the rejected push"
        );
    }
    Ok(())
}

fn c354_deferred_violation_rejection(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let storage = ctx.ensured(&schema)?;
    let first = push(
        storage.as_ref(),
        PARTITION,
        CLIENT,
        "cc-0",
        &[Op::upsert("tasks", task(&schema, "t0", "pA", "dup")?)],
    )?;
    check_eq!(first, PushOutcome::Applied(1), "first push");
    let fresh = task(&schema, "ta", "pA", "fresh")?;
    let colliding = task(&schema, "tb", "pA", "dup")?;

    // The last write collides: reported by the write or by a later call,
    // `commit_push` included.
    let rows = [fresh.clone(), colliding.clone()];
    let (at, call) = violating_push(storage.as_ref(), "cc-1", &rows, None, true)?;
    check_eq!(at, 1, "cc-1: the violating operation (reported by {call})");
    assert_rejected(storage.as_ref(), "cc-1", 1, &["ta", "tb"])?;

    // The first write collides and a read follows it.
    let rows = [colliding.clone(), fresh.clone()];
    let (at, call) = violating_push(storage.as_ref(), "cc-2", &rows, Some("t0"), true)?;
    check_eq!(at, 0, "cc-2: the violating operation (reported by {call})");
    assert_rejected(storage.as_ref(), "cc-2", 0, &["ta", "tb"])?;

    // Without `deferred_violations` the write reports its own violation.
    let rows = [fresh, colliding];
    let (at, call) = violating_push(storage.as_ref(), "cc-3", &rows, None, false)?;
    check_eq!(
        (at, call.as_str()),
        (1, "upsert_row 1"),
        "cc-3: the violation of a push that does not defer"
    );
    assert_rejected(storage.as_ref(), "cc-3", 1, &["ta", "tb"])?;

    // The partition goes on: the next push applies as commit 2.
    let next = push(
        storage.as_ref(),
        PARTITION,
        CLIENT,
        "cc-4",
        &[Op::upsert("tasks", task(&schema, "tc", "pA", "next")?)],
    )?;
    check_eq!(next, PushOutcome::Applied(2), "the next push");
    check!(
        storage.get_row(PARTITION, "tasks", "t0")?.is_some(),
        "the earlier row t0 must remain"
    );
    Ok(())
}
