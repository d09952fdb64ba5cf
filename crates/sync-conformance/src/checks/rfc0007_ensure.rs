//! §17 RFC 0007 `ensure_schema` and declarations, C-267…C-277.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use sync_core::{ActivationOutcome, CheckpointKey, CheckpointState, EnsureOptions, ErrorCode};

use crate::check::{expect_code, expect_detail, CheckDef, CheckResult, Failure, Requires};
use crate::checks::support_barrier::{
    checkpoint, database_fence, decl, ensure_with, ensured_with, fix1_storage, fix2_at, has_column,
    marker_version, partition_fence,
};
use crate::context::{Ctx, NOW};
use crate::fixtures::{fix1, fix2_json};
use crate::registry::check;
use crate::{check, check_eq};

/// Group name.
pub(crate) const GROUP: &str = "rfc0007-ensure";

/// The checks of this group.
pub(crate) const CHECKS: &[CheckDef] = &[
    check(
        GROUP,
        "C-267",
        "bump with a declaration: marker 2, declared checkpoint and partition fence 2",
        c267_bump_installs_declaration,
    ),
    check(
        GROUP,
        "C-268",
        "declaration at version 3 in a bump to 2: checkpoint_declaration_invalid before any write",
        c268_declaration_wrong_version,
    ),
    check(
        GROUP,
        "C-269",
        "failed declaration install rolls the whole bump back",
        c269_failed_install_rolls_back,
    )
    .requires(Requires::TransactionalDdl),
    check(
        GROUP,
        "C-270",
        "failed v2 -> v3 bump leaves only the v2 checkpoint, fence and marker",
        c270_failed_second_bump,
    )
    .requires(Requires::TransactionalDdl),
    check(
        GROUP,
        "C-271",
        "pending checkpoint, new instance without declarations: checkpoint_incomplete",
        c271_pending_without_declarations,
    ),
    check(
        GROUP,
        "C-272",
        "pending checkpoint through ensure_ready: schema_not_ready (storage_migration)",
        c272_pending_through_ensure_ready,
    ),
    check(
        GROUP,
        "C-273",
        "pending checkpoint with the matching declaration: no-op restart",
        c273_matching_declaration_noop,
    ),
    check(
        GROUP,
        "C-274",
        "after activation a new instance starts without declarations",
        c274_after_activation,
    ),
    check(
        GROUP,
        "C-275",
        "two pending names: declaring one fails, declaring both succeeds",
        c275_two_pending_names,
    ),
    check(
        GROUP,
        "C-276",
        "the startup check is database-wide",
        c276_startup_check_database_wide,
    ),
    check(
        GROUP,
        "C-277",
        "same-version restart with declarations of absent names installs nothing",
        c277_absent_declarations_install_nothing,
    ),
];

/// `FIX1` ensured, then a bump to `FIX2` declaring `(p1, search_v2, 2)`.
fn bumped_with_search_v2(ctx: &mut Ctx<'_>) -> CheckResult<Arc<dyn sync_core::ServerStorage>> {
    fix1_storage(ctx)?;
    ensured_with(ctx, &fix2_at(2)?, vec![decl("p1", "search_v2", 2)])
}

fn c267_bump_installs_declaration(ctx: &mut Ctx<'_>) -> CheckResult {
    let bumped = bumped_with_search_v2(ctx)?;
    let observer = ctx.open()?;
    let raw = ctx.raw()?;
    check_eq!(marker_version(observer.as_ref())?, Some(2), "marker");
    let row = checkpoint(observer.as_ref(), "p1", "search_v2")?;
    check_eq!(row.state, CheckpointState::Declared, "checkpoint state");
    check_eq!(row.schema_version, 2, "checkpoint version");
    check_eq!(row.owner_epoch, 0, "checkpoint epoch");
    check_eq!(
        partition_fence(raw.as_ref(), "p1")?,
        Some(2),
        "partition fence of p1"
    );
    check_eq!(
        bumped.ensured_version(),
        Some(2),
        "ensured_version of the bumping instance"
    );
    Ok(())
}

fn c268_declaration_wrong_version(ctx: &mut Ctx<'_>) -> CheckResult {
    let v1 = fix1_storage(ctx)?;
    let raw = ctx.raw()?;
    let locked = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&locked);
    let opts = EnsureOptions {
        after_migration_lock: Some(Arc::new(move || flag.store(true, Ordering::SeqCst))),
        ..EnsureOptions::with_declarations(vec![decl("p1", "search_v3", 3)])
    };
    let bumper = ctx.open()?;
    expect_code(
        bumper.ensure_schema(&fix2_at(2)?, &opts),
        ErrorCode::CheckpointDeclarationInvalid,
        "bump to 2 declaring at 3",
    )?;
    check!(
        !locked.load(Ordering::SeqCst),
        "the migration lock was taken before the declaration was validated"
    );
    check_eq!(marker_version(v1.as_ref())?, Some(1), "marker");
    check!(
        !has_column(raw.as_ref(), "tasks", "assignee")?,
        "tasks.assignee exists after the refused bump"
    );
    check_eq!(
        v1.read_checkpoint("p1", "search_v3")?,
        None,
        "checkpoint row"
    );
    check_eq!(
        bumper.ensured_version(),
        None,
        "ensured_version of the refused instance"
    );
    Ok(())
}

fn c269_failed_install_rolls_back(ctx: &mut Ctx<'_>) -> CheckResult {
    let v1 = fix1_storage(ctx)?;
    let raw = ctx.raw()?;
    raw.insert_checkpoint("p1", "search", 1, "declared", 0)?;
    let (_, outcome) = ensure_with(
        ctx,
        &fix2_at(2)?,
        vec![decl("p2", "other_v2", 2), decl("p1", "search", 2)],
    )?;
    expect_code(
        outcome,
        ErrorCode::CheckpointVersionMismatch,
        "bump re-declaring a v1 row at v2",
    )?;
    check_eq!(marker_version(v1.as_ref())?, Some(1), "marker");
    check_eq!(database_fence(v1.as_ref())?, Some(1), "database-wide fence");
    check!(
        !has_column(raw.as_ref(), "tasks", "assignee")?,
        "tasks.assignee exists after the failed bump"
    );
    check_eq!(
        v1.read_checkpoint("p2", "other_v2")?,
        None,
        "checkpoint other_v2"
    );
    check_eq!(
        checkpoint(v1.as_ref(), "p1", "search")?.schema_version,
        1,
        "version of the existing row"
    );
    check_eq!(
        partition_fence(raw.as_ref(), "p1")?,
        None,
        "partition fence of p1"
    );
    check_eq!(
        partition_fence(raw.as_ref(), "p2")?,
        None,
        "partition fence of p2"
    );
    Ok(())
}

fn c270_failed_second_bump(ctx: &mut Ctx<'_>) -> CheckResult {
    let v2 = bumped_with_search_v2(ctx)?;
    let raw = ctx.raw()?;
    let (_, outcome) = ensure_with(
        ctx,
        &fix2_at(3)?,
        vec![decl("p2", "search_v3", 3), decl("p1", "search_v2", 3)],
    )?;
    expect_code(
        outcome,
        ErrorCode::CheckpointVersionMismatch,
        "bump to 3 re-declaring search_v2",
    )?;
    check_eq!(marker_version(v2.as_ref())?, Some(2), "marker");
    check_eq!(database_fence(v2.as_ref())?, Some(2), "database-wide fence");
    let p1: Vec<(String, i32)> = v2
        .read_checkpoints("p1")?
        .into_iter()
        .map(|c| (c.name, c.schema_version))
        .collect();
    check_eq!(p1, vec![("search_v2".to_owned(), 2)], "checkpoints of p1");
    check_eq!(v2.read_checkpoints("p2")?.len(), 0, "checkpoints of p2");
    check_eq!(
        partition_fence(raw.as_ref(), "p1")?,
        Some(2),
        "partition fence of p1"
    );
    check_eq!(
        partition_fence(raw.as_ref(), "p2")?,
        None,
        "partition fence of p2"
    );
    Ok(())
}

fn c271_pending_without_declarations(ctx: &mut Ctx<'_>) -> CheckResult {
    bumped_with_search_v2(ctx)?;
    let schema = fix2_at(2)?;
    let without = ctx.open()?;
    expect_code(
        without.ensure_schema(&schema, &EnsureOptions::default()),
        ErrorCode::CheckpointIncomplete,
        "ensure without declarations",
    )?;
    let (empty, outcome) = ensure_with(ctx, &schema, Vec::new())?;
    expect_code(outcome, ErrorCode::CheckpointIncomplete, "ensure with []")?;
    check_eq!(
        without.ensured_version(),
        None,
        "ensured_version without declarations"
    );
    check_eq!(empty.ensured_version(), None, "ensured_version with []");
    Ok(())
}

fn c272_pending_through_ensure_ready(ctx: &mut Ctx<'_>) -> CheckResult {
    bumped_with_search_v2(ctx)?;
    let input = sync_schema::parse_schema_value(&fix2_json())
        .map_err(|e| Failure::new(format!("FIX2 does not parse: {e:?}")))?;
    let storage = ctx.open()?;
    let error = expect_code(
        sync_schema::ensure_ready(&input, storage.as_ref(), &EnsureOptions::default()),
        ErrorCode::SchemaNotReady,
        "ensure_ready with a pending checkpoint",
    )?;
    expect_detail(&error, "phase", "storage_migration")?;
    expect_detail(&error, "cause", "sync.storage.checkpoint_incomplete")?;
    Ok(())
}

fn c273_matching_declaration_noop(ctx: &mut Ctx<'_>) -> CheckResult {
    let bumped = bumped_with_search_v2(ctx)?;
    bumped.claim_checkpoint("p1", "search_v2", 2, NOW + 5)?;
    let raw = ctx.raw()?;
    let before = checkpoint(bumped.as_ref(), "p1", "search_v2")?;
    let fence_before = partition_fence(raw.as_ref(), "p1")?;
    ctx.clock.advance(1_000);
    let restarted = ensured_with(ctx, &fix2_at(2)?, vec![decl("p1", "search_v2", 2)])?;
    check_eq!(restarted.ensured_version(), Some(2), "ensured_version");
    let after = checkpoint(restarted.as_ref(), "p1", "search_v2")?;
    check_eq!(after.state, before.state, "state");
    check_eq!(after.owner_epoch, before.owner_epoch, "owner_epoch");
    check_eq!(after, before, "checkpoint row");
    check_eq!(
        partition_fence(raw.as_ref(), "p1")?,
        fence_before,
        "partition fence of p1"
    );
    Ok(())
}

fn c274_after_activation(ctx: &mut Ctx<'_>) -> CheckResult {
    let bumped = bumped_with_search_v2(ctx)?;
    let outcome = bumped.activate_checkpoint("p1", "search_v2", 0, 0, &[], NOW)?;
    check_eq!(outcome, ActivationOutcome::Activated, "activation");
    let restarted = ensured_with(ctx, &fix2_at(2)?, Vec::new())?;
    check_eq!(restarted.ensured_version(), Some(2), "ensured_version");
    Ok(())
}

fn c275_two_pending_names(ctx: &mut Ctx<'_>) -> CheckResult {
    fix1_storage(ctx)?;
    let schema = fix2_at(2)?;
    ensured_with(
        ctx,
        &schema,
        vec![decl("p1", "a_v2", 2), decl("p1", "b_v2", 2)],
    )?;
    let (_, one) = ensure_with(ctx, &schema, vec![decl("p1", "a_v2", 2)])?;
    expect_code(one, ErrorCode::CheckpointIncomplete, "declaring only a_v2")?;
    let both = ensured_with(
        ctx,
        &schema,
        vec![decl("p1", "b_v2", 2), decl("p1", "a_v2", 2)],
    )?;
    check_eq!(
        both.ensured_version(),
        Some(2),
        "ensured_version declaring both"
    );
    Ok(())
}

fn c276_startup_check_database_wide(ctx: &mut Ctx<'_>) -> CheckResult {
    fix1_storage(ctx)?;
    let schema = fix2_at(2)?;
    ensured_with(ctx, &schema, vec![decl("A", "search_v2", 2)])?;
    let (_, outcome) = ensure_with(ctx, &schema, vec![decl("B", "search_v2", 2)])?;
    expect_code(
        outcome,
        ErrorCode::CheckpointIncomplete,
        "instance declaring only partition B",
    )?;
    Ok(())
}

fn c277_absent_declarations_install_nothing(ctx: &mut Ctx<'_>) -> CheckResult {
    let v1 = fix1_storage(ctx)?;
    let raw = ctx.raw()?;
    let restarted = ensured_with(ctx, &fix1()?, vec![decl("p1", "ghost_v1", 1)])?;
    check_eq!(restarted.ensured_version(), Some(1), "ensured_version");
    check_eq!(v1.read_checkpoints("p1")?.len(), 0, "checkpoints of p1");
    check_eq!(
        v1.list_pending_checkpoints(1)?,
        Vec::<CheckpointKey>::new(),
        "pending checkpoints"
    );
    check_eq!(
        partition_fence(raw.as_ref(), "p1")?,
        None,
        "partition fence of p1"
    );
    Ok(())
}
