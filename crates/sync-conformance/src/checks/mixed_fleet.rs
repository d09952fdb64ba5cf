//! §23 Mixed fleet with the reference at the RFC 0007 release, C-330…C-334
//! (amended 2026-12): the database-wide writer fence holds while a
//! reference process starts and restarts against the same database, when
//! the fence trigger is broken behind the storage's back, with the
//! reference's `BIGINT` writer-version column, and against a role that
//! shadows the fence tables; C-364 (beyond the checklist): the trigger
//! re-created under its own name with another condition or event.
//!
//! A reference start is [`RawAccess::replay_reference_start`]; set A is the
//! reference fixture set restored through [`Harness::load_reference`].

use std::sync::Arc;

use sync_core::{CompiledSchema, ErrorCode, FenceTriggerState, ServerStorage, TriggerDifference};

use crate::check::{expect_code, CheckDef, CheckResult, Failure, Requires};
use crate::checks::support_barrier::{
    commit_writer_version, database_fence, decl, empty_commit, ensured_with, fix1_storage, fix2_at,
};
use crate::context::Ctx;
use crate::harness::{FenceTamper, Harness, RawAccess};
use crate::reference::{fixture_dir, Manifest};
use crate::registry::check;
use crate::{check, check_eq};

/// Group name.
pub(crate) const GROUP: &str = "mixed-fleet";

/// The checks of this group.
pub(crate) const CHECKS: &[CheckDef] = &[
    check(
        GROUP,
        "C-330",
        "reference start replayed before our open: old writers stay fenced after a v2 bump",
        c330_reference_start_before_open,
    )
    .requires(Requires::ReferenceStartReplay),
    check(
        GROUP,
        "C-331",
        "reference start replayed again after the bump: old writers stay fenced, our trigger enabled",
        c331_reference_restart_after_bump,
    )
    .requires(Requires::ReferenceStartReplay),
    check(
        GROUP,
        "C-332",
        "fence trigger dropped or disabled: reported not enforced, re-created by the next open",
        c332_trigger_repaired_on_open,
    )
    .requires(Requires::TriggerTamper),
    check(
        GROUP,
        "C-333",
        "the reference's BIGINT writer_version works for push, read_commits and the fence",
        c333_bigint_writer_version,
    )
    .requires(Requires::ReferenceStartReplay),
    check(
        GROUP,
        "C-334",
        "a role shadowing the fence tables with its own cannot insert an old writer's commit",
        c334_shadowing_role_fenced,
    )
    .requires(Requires::DatabaseRoles),
    check(
        GROUP,
        "C-364",
        "fence trigger re-created under its own name and check but WHEN (false) or BEFORE UPDATE: reported not enforced, repaired by the next ensure",
        c355_trigger_redefined_under_its_name,
    ),
];

/// Fixture directory used when `SYNCSTORE_FIXTURES` is not set: the
/// specification's fixtures next to the workspace.
const DEFAULT_FIXTURES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../shared/fixtures/reference-0.15"
);

/// The reference fixture set the group restores.
const SET: &str = "A";

/// Partition of set A that the bump declares a checkpoint in.
const DECLARED: &str = "acme";

/// A partition no writer has seen before the bump.
const LATE: &str = "created-after-bump";

/// Restores set A into the check's database and returns its manifest.
fn restore_set_a(ctx: &mut Ctx<'_>) -> CheckResult<Manifest> {
    let dir = fixture_dir(DEFAULT_FIXTURES)?;
    let manifest = Manifest::load(&dir, SET)?;
    let harness: &dyn Harness = ctx.harness();
    harness
        .load_reference(ctx.db()?, &dir, SET)
        .map_err(|e| Failure::new(format!("restoring set {SET} failed: {e:?}")))?;
    Ok(manifest)
}

/// Set A as a reference 0.23 process leaves it, then our open with its v1
/// schema and the bump to its v2 declaring `(acme, c)`; returns the bumped
/// instance and the v2 schema.
fn bumped_set_a(
    ctx: &mut Ctx<'_>,
    raw: &dyn RawAccess,
) -> CheckResult<(Arc<dyn ServerStorage>, CompiledSchema)> {
    let manifest = restore_set_a(ctx)?;
    raw.replay_reference_start()?;
    ctx.ensured(manifest.schema())?;
    let v2 = manifest.schema_v2()?.clone();
    let bumped = ensured_with(ctx, &v2, vec![decl(DECLARED, "c", v2.version)])?;
    check_eq!(
        database_fence(bumped.as_ref())?,
        Some(v2.version),
        "database-wide fence after the bump"
    );
    Ok((bumped, v2))
}

/// Raw inserts of an old writer (`writer_version` NULL and 1) into the
/// declared partition and into one created after the bump are refused; a
/// writer at `version` passes in the new partition.
fn expect_old_writers_fenced(
    storage: &dyn ServerStorage,
    raw: &dyn RawAccess,
    version: i32,
) -> CheckResult {
    for partition in [DECLARED, LATE] {
        let seq = storage.get_max_commit_seq(partition)? + 1_000;
        for old in [None, Some(1)] {
            expect_code(
                raw.insert_commit(partition, seq, old),
                ErrorCode::WriterFenceRejected,
                &format!("raw insert into {partition} with writer version {old:?}"),
            )?;
        }
    }
    let seq = storage.get_max_commit_seq(LATE)? + 2_000;
    raw.insert_commit(LATE, seq, Some(version))
        .map_err(|e| Failure::new(format!("a v{version} raw insert was refused: {e:?}")))?;
    check_eq!(
        commit_writer_version(raw, LATE, seq)?,
        Some(i64::from(version)),
        "stored writer version of the v{version} insert"
    );
    Ok(())
}

fn c330_reference_start_before_open(ctx: &mut Ctx<'_>) -> CheckResult {
    let raw = ctx.raw()?;
    let (bumped, v2) = bumped_set_a(ctx, raw.as_ref())?;
    expect_old_writers_fenced(bumped.as_ref(), raw.as_ref(), v2.version)
}

fn c331_reference_restart_after_bump(ctx: &mut Ctx<'_>) -> CheckResult {
    let raw = ctx.raw()?;
    let (bumped, v2) = bumped_set_a(ctx, raw.as_ref())?;
    raw.replay_reference_start()?;
    expect_old_writers_fenced(bumped.as_ref(), raw.as_ref(), v2.version)?;
    check_eq!(
        bumped.writer_fence_trigger()?,
        FenceTriggerState::Enforced,
        "fence trigger state after the reference restarted"
    );
    check!(
        raw.fence_trigger_definition()?.is_some(),
        "our fence trigger is present after the reference restarted"
    );
    Ok(())
}

fn c332_trigger_repaired_on_open(ctx: &mut Ctx<'_>) -> CheckResult {
    let raw = ctx.raw()?;
    let mut seq = 100;
    for (tamper, state) in [
        (FenceTamper::Drop, FenceTriggerState::Missing),
        (FenceTamper::Disable, FenceTriggerState::Disabled),
    ] {
        let storage = fix1_storage(ctx)?;
        check_eq!(
            storage.writer_fence_trigger()?,
            FenceTriggerState::Enforced,
            "fence trigger state before {tamper:?}"
        );
        raw.tamper_fence_trigger(tamper)?;
        let operator = ctx.open()?;
        for (who, reader) in [
            ("the running instance", &storage),
            ("a new instance", &operator),
        ] {
            let read = reader.writer_fence_trigger()?;
            check_eq!(read, state, "state read by {who} after {tamper:?}");
            check!(
                !read.is_enforced() && read.cause().is_some(),
                "after {tamper:?} the state must be an error with a cause, got {read:?}"
            );
        }
        seq += 1;
        raw.insert_commit("p1", seq, None)
            .map_err(|e| Failure::new(format!("without the trigger nothing fences: {e:?}")))?;

        let reopened = fix1_storage(ctx)?;
        check_eq!(
            reopened.writer_fence_trigger()?,
            FenceTriggerState::Enforced,
            "fence trigger state after a new instance opened ({tamper:?})"
        );
        seq += 1;
        expect_code(
            raw.insert_commit("p1", seq, None),
            ErrorCode::WriterFenceRejected,
            &format!("raw insert with NULL writer version after the repair of {tamper:?}"),
        )?;
    }
    Ok(())
}

/// C-364 (beyond the checklist, `docs/decisions.md`): a trigger of the
/// storage's name that runs the storage's check is not enough — its
/// timing, events and condition must be the storage's too.
fn c355_trigger_redefined_under_its_name(ctx: &mut Ctx<'_>) -> CheckResult {
    let raw = ctx.raw()?;
    let mut seq = 100;
    for tamper in [FenceTamper::WhenFalse, FenceTamper::BeforeUpdate] {
        let storage = fix1_storage(ctx)?;
        check_eq!(
            storage.writer_fence_trigger()?,
            FenceTriggerState::Enforced,
            "fence trigger state before {tamper:?}"
        );
        raw.tamper_fence_trigger(tamper)?;
        let read = storage.writer_fence_trigger()?;
        check!(
            !read.is_enforced() && read.cause().is_some(),
            "after {tamper:?} the state must be an error with a cause, got {read:?}"
        );
        if tamper == FenceTamper::BeforeUpdate {
            check_eq!(
                read,
                FenceTriggerState::Tampered(TriggerDifference::Events),
                "state after {tamper:?}"
            );
        }
        seq += 1;
        raw.insert_commit("p1", seq, None).map_err(|e| {
            Failure::new(format!("after {tamper:?} the trigger fires no more: {e:?}"))
        })?;

        let reopened = fix1_storage(ctx)?;
        check_eq!(
            reopened.writer_fence_trigger()?,
            FenceTriggerState::Enforced,
            "fence trigger state after a new instance ensured ({tamper:?})"
        );
        seq += 1;
        expect_code(
            raw.insert_commit("p1", seq, None),
            ErrorCode::WriterFenceRejected,
            &format!("raw insert with NULL writer version after the repair of {tamper:?}"),
        )?;
    }
    Ok(())
}

fn c333_bigint_writer_version(ctx: &mut Ctx<'_>) -> CheckResult {
    let manifest = restore_set_a(ctx)?;
    let raw = ctx.raw()?;
    raw.replay_reference_start()?;
    let column_type = |raw: &dyn RawAccess, column: &str| -> CheckResult<String> {
        raw.list_columns("sync_commits")?
            .into_iter()
            .find(|(name, _, _)| name == column)
            .map(|(_, declared, _)| declared)
            .ok_or_else(|| Failure::new(format!("sync_commits.{column} is missing")))
    };
    let reference_type = column_type(raw.as_ref(), "writer_version")?;
    check_eq!(
        reference_type,
        column_type(raw.as_ref(), "commit_seq")?,
        "the reference's writer_version is as wide as commit_seq"
    );

    let storage = ctx.ensured(manifest.schema())?;
    let mut tx = storage.begin(DECLARED)?;
    tx.lock_partition_for_push()?;
    let seq = tx.append_commit(&empty_commit("bigint-v1"))?;
    tx.commit()?;
    let read = storage.read_commits(DECLARED, seq - 1, 1)?;
    check_eq!(
        read.first().map(|c| (c.commit_seq, c.writer_version)),
        Some((seq, Some(manifest.schema().version))),
        "read_commits of our v1 commit"
    );

    let v2 = manifest.schema_v2()?.clone();
    let bumped = ensured_with(ctx, &v2, vec![decl(DECLARED, "c", v2.version)])?;
    expect_old_writers_fenced(bumped.as_ref(), raw.as_ref(), v2.version)?;
    let late = bumped.read_commits(LATE, 0, 10)?;
    check_eq!(
        late.iter().map(|c| c.writer_version).collect::<Vec<_>>(),
        [Some(v2.version)],
        "read_commits of the v2 raw insert"
    );
    check_eq!(
        column_type(raw.as_ref(), "writer_version")?,
        reference_type,
        "bootstrap and the bump leave the column type alone"
    );
    Ok(())
}

fn c334_shadowing_role_fenced(ctx: &mut Ctx<'_>) -> CheckResult {
    fix1_storage(ctx)?;
    let v2 = fix2_at(2)?;
    ensured_with(ctx, &v2, vec![decl("p1", "c", 2)])?;
    let raw = ctx.raw()?;
    for (partition, seq) in [("p1", 1_000), (LATE, 1)] {
        for old in [None, Some(1)] {
            expect_code(
                raw.insert_commit_as_shadowing_role(partition, seq, old),
                ErrorCode::WriterFenceRejected,
                &format!("shadowing role's insert into {partition} with writer version {old:?}"),
            )?;
        }
    }
    raw.insert_commit_as_shadowing_role(LATE, 2, Some(2))
        .map_err(|e| Failure::new(format!("the role's v2 insert was refused: {e:?}")))?;
    Ok(())
}
