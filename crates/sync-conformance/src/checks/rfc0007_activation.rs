//! §16 RFC 0007 activation, C-253…C-266.

use sync_core::{
    ActivationOutcome, CheckpointState, CommitPruneQuery, ErrorCode, NewChange, NewCommit,
    ServeContext, ServerStorage,
};

use crate::check::{expect_code, expect_detail, CheckDef, CheckResult};
use crate::checks::support_barrier::{
    checkpoint, decl, empty_commit, fix1_storage, push_task, tables, tx_checkpoint, CLIENT,
};
use crate::context::{Ctx, NOW};
use crate::fixtures::{doc, fix1, push_with, task, Op};
use crate::registry::check;
use crate::{check, check_eq};

/// Group name.
pub(crate) const GROUP: &str = "rfc0007-activation";

/// The checks of this group.
pub(crate) const CHECKS: &[CheckDef] = &[
    check(
        GROUP,
        "C-253",
        "activating an absent checkpoint: checkpoint_not_declared",
        c253_activate_absent,
    ),
    check(
        GROUP,
        "C-254",
        "activation without a sufficient effective fence: checkpoint_fence_missing",
        c254_fence_missing,
    ),
    check(
        GROUP,
        "C-255",
        "activation at the current source watermark",
        c255_activate_current,
    ),
    check(
        GROUP,
        "C-256",
        "second activation is Stale and changes nothing",
        c256_second_activation_stale,
    ),
    check(
        GROUP,
        "C-257",
        "superseded owner: activation Stale, advance false; current owner activates",
        c257_superseded_owner,
    ),
    check(
        GROUP,
        "C-258",
        "source write after claim: Stale at the old watermark, Activated at the new one",
        c258_source_write_after_claim,
    ),
    check(
        GROUP,
        "C-259",
        "pruned source history: Unverifiable, state stays backfilling",
        c259_pruned_unverifiable,
    ),
    check(
        GROUP,
        "C-260",
        "re-activation after a later prune is Stale, never Unverifiable",
        c260_reactivation_after_prune,
    ),
    check(
        GROUP,
        "C-261",
        "never-claimed declared row with clean sources activates with epoch 0",
        c261_activate_never_claimed,
    ),
    check(
        GROUP,
        "C-262",
        "activation is one-way: claim, re-declare, re-activate",
        c262_one_way,
    ),
    check(
        GROUP,
        "C-263",
        "superseded batch: tx advance false, rollback leaves no projection rows",
        c263_superseded_batch,
    ),
    check(
        GROUP,
        "C-264",
        "activation below the stored watermark: checkpoint_watermark_invalid (regression)",
        c264_activate_regression,
    ),
    check(
        GROUP,
        "C-265",
        "transaction-bound activation at the transaction's own commit seq",
        c265_tx_activation_own_commit,
    ),
    check(
        GROUP,
        "C-266",
        "activation with an unknown source table: unknown_table",
        c266_activate_unknown_table,
    ),
];

const NAME: &str = "search_v1";

/// Declares and claims `NAME` in `p1`; returns the epoch.
fn declare_and_claim(storage: &dyn ServerStorage) -> CheckResult<i64> {
    storage.declare_checkpoint("p1", NAME, 1, NOW)?;
    Ok(storage.claim_checkpoint("p1", NAME, 1, NOW)?.owner_epoch)
}

fn activate(
    storage: &dyn ServerStorage,
    epoch: i64,
    watermark: i64,
    now: i64,
) -> sync_core::Result<ActivationOutcome> {
    storage.activate_checkpoint("p1", NAME, epoch, watermark, &tables(&["tasks"]), now)
}

fn c253_activate_absent(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = fix1_storage(ctx)?;
    expect_code(
        activate(storage.as_ref(), 0, 0, NOW),
        ErrorCode::CheckpointNotDeclared,
        "activation of an absent name",
    )?;
    check_eq!(
        storage.read_checkpoint("p1", NAME)?,
        None,
        "row after the activation"
    );
    Ok(())
}

fn c254_fence_missing(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = fix1_storage(ctx)?;
    let raw = ctx.raw()?;
    raw.set_database_fence(None)?;
    raw.insert_checkpoint("p1", "a_v1", 1, "declared", 0)?;
    expect_code(
        storage.activate_checkpoint("p1", "a_v1", 0, 0, &[], NOW),
        ErrorCode::CheckpointFenceMissing,
        "v1 row without any fence",
    )?;
    raw.insert_checkpoint("p2", "b_v2", 2, "declared", 0)?;
    raw.set_partition_fence("p2", Some(1))?;
    raw.set_database_fence(Some(1))?;
    expect_code(
        storage.activate_checkpoint("p2", "b_v2", 0, 0, &[], NOW),
        ErrorCode::CheckpointFenceMissing,
        "v2 row with both fences at 1",
    )?;
    check_eq!(
        checkpoint(storage.as_ref(), "p1", "a_v1")?.state,
        CheckpointState::Declared,
        "state of a_v1"
    );
    check_eq!(
        checkpoint(storage.as_ref(), "p2", "b_v2")?.state,
        CheckpointState::Declared,
        "state of b_v2"
    );
    Ok(())
}

fn c255_activate_current(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = fix1_storage(ctx)?;
    let s = storage.as_ref();
    push_task(s, "p1", "c1", "r1")?;
    push_task(s, "p1", "c2", "r2")?;
    let epoch = declare_and_claim(s)?;
    check!(
        s.advance_checkpoint("p1", NAME, epoch, 1, 10, NOW + 10)?,
        "advance refused"
    );
    check_eq!(
        activate(s, epoch, 2, NOW + 1000)?,
        ActivationOutcome::Activated,
        "activation at 2"
    );
    let row = checkpoint(s, "p1", NAME)?;
    check_eq!(row.state, CheckpointState::Activated, "state");
    check_eq!(row.watermark, 2, "watermark");
    check_eq!(row.observed_rows, 10, "observed_rows");
    Ok(())
}

fn c256_second_activation_stale(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = fix1_storage(ctx)?;
    let s = storage.as_ref();
    push_task(s, "p1", "c1", "r1")?;
    let epoch = declare_and_claim(s)?;
    check_eq!(
        activate(s, epoch, 1, NOW + 10)?,
        ActivationOutcome::Activated,
        "first activation"
    );
    let before = checkpoint(s, "p1", NAME)?;
    check_eq!(
        activate(s, epoch, 1, NOW + 20)?,
        ActivationOutcome::Stale,
        "second activation"
    );
    let after = checkpoint(s, "p1", NAME)?;
    check_eq!(after.state, before.state, "state");
    check_eq!(after.watermark, before.watermark, "watermark");
    check_eq!(after.updated_at_ms, before.updated_at_ms, "updated_at_ms");
    Ok(())
}

fn c257_superseded_owner(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = fix1_storage(ctx)?;
    let s = storage.as_ref();
    push_task(s, "p1", "c1", "r1")?;
    let old = declare_and_claim(s)?;
    let current = s.claim_checkpoint("p1", NAME, 1, NOW)?.owner_epoch;
    check_eq!(
        activate(s, old, 1, NOW)?,
        ActivationOutcome::Stale,
        "activation by the superseded owner"
    );
    check!(
        !s.advance_checkpoint("p1", NAME, old, 1, 1, NOW)?,
        "advance by the superseded owner returned true"
    );
    check_eq!(
        checkpoint(s, "p1", NAME)?.state,
        CheckpointState::Backfilling,
        "state after the superseded attempts"
    );
    check_eq!(
        activate(s, current, 1, NOW)?,
        ActivationOutcome::Activated,
        "activation by the current owner"
    );
    Ok(())
}

fn c258_source_write_after_claim(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = fix1_storage(ctx)?;
    let s = storage.as_ref();
    push_task(s, "p1", "c1", "r1")?;
    let epoch = declare_and_claim(s)?;
    let row = task(&fix1()?, "r2", "proj", "two")?;
    let declaring = ServeContext {
        declarations: vec![decl("p1", NAME, 1)],
        expected_log_epoch: None,
    };
    push_with(
        s,
        &declaring,
        "p1",
        CLIENT,
        "c2",
        &[Op::upsert("tasks", row)],
    )?
    .seq()?;
    check_eq!(
        activate(s, epoch, 1, NOW)?,
        ActivationOutcome::Stale,
        "activation at the old watermark 1"
    );
    check_eq!(
        checkpoint(s, "p1", NAME)?.state,
        CheckpointState::Backfilling,
        "state after Stale"
    );
    check_eq!(
        activate(s, epoch, 2, NOW)?,
        ActivationOutcome::Activated,
        "activation at the new watermark 2"
    );
    check_eq!(checkpoint(s, "p1", NAME)?.watermark, 2, "stored watermark");
    Ok(())
}

fn prune(storage: &dyn ServerStorage, through: i64) -> CheckResult {
    storage.prune_commits_through(
        "p1",
        &CommitPruneQuery {
            log_epoch: "e1".to_owned(),
            through_seq: through,
        },
    )?;
    Ok(())
}

fn c259_pruned_unverifiable(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = fix1_storage(ctx)?;
    let s = storage.as_ref();
    s.touch_partition("p1", NOW, "e1")?;
    push_task(s, "p1", "c1", "r1")?;
    prune(s, 1)?;
    let epoch = declare_and_claim(s)?;
    check_eq!(
        activate(s, epoch, 0, NOW)?,
        ActivationOutcome::Unverifiable,
        "activation at 0 after pruning 1"
    );
    check_eq!(
        checkpoint(s, "p1", NAME)?.state,
        CheckpointState::Backfilling,
        "state"
    );
    Ok(())
}

fn c260_reactivation_after_prune(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = fix1_storage(ctx)?;
    let s = storage.as_ref();
    s.touch_partition("p1", NOW, "e1")?;
    push_task(s, "p1", "c1", "r1")?;
    let epoch = declare_and_claim(s)?;
    check_eq!(
        activate(s, epoch, 1, NOW)?,
        ActivationOutcome::Activated,
        "first activation"
    );
    push_task(s, "p1", "c2", "r2")?;
    prune(s, 2)?;
    check_eq!(
        activate(s, epoch, 1, NOW)?,
        ActivationOutcome::Stale,
        "re-activation after pruning 2"
    );
    check_eq!(
        checkpoint(s, "p1", NAME)?.state,
        CheckpointState::Activated,
        "state"
    );
    Ok(())
}

fn c261_activate_never_claimed(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = fix1_storage(ctx)?;
    let s = storage.as_ref();
    push_task(s, "p1", "c1", "r1")?;
    s.declare_checkpoint("p1", NAME, 1, NOW)?;
    check_eq!(
        activate(s, 0, 1, NOW)?,
        ActivationOutcome::Activated,
        "activation with epoch 0"
    );
    let row = checkpoint(s, "p1", NAME)?;
    check_eq!(row.state, CheckpointState::Activated, "state");
    check_eq!(row.owner_epoch, 0, "owner_epoch");
    check_eq!(row.watermark, 1, "watermark");
    Ok(())
}

fn c262_one_way(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = fix1_storage(ctx)?;
    let s = storage.as_ref();
    let epoch = declare_and_claim(s)?;
    check_eq!(
        activate(s, epoch, 0, NOW)?,
        ActivationOutcome::Activated,
        "activation"
    );
    expect_code(
        s.claim_checkpoint("p1", NAME, 1, NOW),
        ErrorCode::CheckpointNotDeclared,
        "claim after activation",
    )?;
    let redeclared = s.declare_checkpoint("p1", NAME, 1, NOW)?;
    check_eq!(
        redeclared.state,
        CheckpointState::Activated,
        "re-declared state"
    );
    check_eq!(redeclared.owner_epoch, epoch, "re-declared epoch");
    check_eq!(
        activate(s, epoch, 0, NOW)?,
        ActivationOutcome::Stale,
        "re-activation"
    );
    check_eq!(
        checkpoint(s, "p1", NAME)?.state,
        CheckpointState::Activated,
        "final state"
    );
    Ok(())
}

fn c263_superseded_batch(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = fix1_storage(ctx)?;
    let s = storage.as_ref();
    push_task(s, "p1", "c1", "r1")?;
    let old = declare_and_claim(s)?;
    s.claim_checkpoint("p1", NAME, 1, NOW)?;
    let before = checkpoint(s, "p1", NAME)?;
    let projection = doc(&fix1()?, "proj-r1", "org", "proj", Some("title r1"))?;
    let mut tx = s.begin("p1")?;
    tx.lock_partition_for_push()?;
    tx.upsert_row("docs", &projection, None)?;
    tx.append_commit(&NewCommit {
        changes: vec![NewChange::upsert(
            "docs",
            "proj-r1",
            1,
            projection.scopes.clone(),
            projection.payload.clone(),
        )],
        ..empty_commit("batch-1")
    })?;
    check!(
        !tx.advance_checkpoint(NAME, old, 1, 1, NOW + 10)?,
        "tx advance with the superseded epoch returned true"
    );
    tx.rollback()?;
    check_eq!(
        s.get_row("p1", "docs", "proj-r1")?,
        None,
        "projection row of the batch"
    );
    check_eq!(s.get_max_commit_seq("p1")?, 1, "max_commit_seq");
    let after = checkpoint(s, "p1", NAME)?;
    check_eq!(after.watermark, before.watermark, "watermark");
    check_eq!(after, before, "checkpoint row");
    Ok(())
}

fn c264_activate_regression(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = fix1_storage(ctx)?;
    let s = storage.as_ref();
    push_task(s, "p1", "c1", "r1")?;
    push_task(s, "p1", "c2", "r2")?;
    let epoch = declare_and_claim(s)?;
    check!(
        s.advance_checkpoint("p1", NAME, epoch, 2, 0, NOW)?,
        "advance to 2 refused"
    );
    let error = expect_code(
        activate(s, epoch, 1, NOW),
        ErrorCode::CheckpointWatermarkInvalid,
        "activation at 1 below 2",
    )?;
    expect_detail(&error, "reason", "regression")?;
    check_eq!(
        checkpoint(s, "p1", NAME)?.state,
        CheckpointState::Backfilling,
        "state"
    );
    Ok(())
}

fn c265_tx_activation_own_commit(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = fix1_storage(ctx)?;
    let s = storage.as_ref();
    push_task(s, "p1", "c1", "r1")?;
    let epoch = declare_and_claim(s)?;
    let row = task(&fix1()?, "r2", "proj", "two")?;
    let mut tx = s.begin("p1")?;
    tx.lock_partition_for_push()?;
    tx.upsert_row("tasks", &row, None)?;
    let seq = tx.append_commit(&NewCommit {
        changes: vec![NewChange::upsert(
            "tasks",
            "r2",
            1,
            row.scopes.clone(),
            row.payload.clone(),
        )],
        ..empty_commit("seal")
    })?;
    check_eq!(seq, 2, "own commit seq");
    let outcome = tx.activate_checkpoint(NAME, epoch, seq, &tables(&["tasks"]), NOW + 10)?;
    check_eq!(
        outcome,
        ActivationOutcome::Activated,
        "activation at the own seq"
    );
    check_eq!(
        tx_checkpoint(tx.as_mut(), NAME)?.state,
        CheckpointState::Activated,
        "state inside the transaction"
    );
    tx.commit()?;
    let stored = checkpoint(s, "p1", NAME)?;
    check_eq!(stored.state, CheckpointState::Activated, "state");
    check_eq!(stored.watermark, 2, "watermark");
    Ok(())
}

fn c266_activate_unknown_table(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = fix1_storage(ctx)?;
    let s = storage.as_ref();
    s.declare_checkpoint("p1", NAME, 1, NOW)?;
    expect_code(
        s.activate_checkpoint("p1", NAME, 0, 0, &tables(&["nope"]), NOW),
        ErrorCode::UnknownTable,
        "activation with source nope",
    )?;
    check_eq!(
        checkpoint(s, "p1", NAME)?.state,
        CheckpointState::Declared,
        "state"
    );
    Ok(())
}
