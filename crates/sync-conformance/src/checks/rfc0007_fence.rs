//! §15 RFC 0007 writer fence, C-241…C-252; C-365 (beyond the checklist):
//! the barrier's rules hold against writers that bypass the storage.

use sync_core::{
    writer_fence_allows, ActivationOutcome, CheckpointState, ErrorCode, NewChange, NewCommit,
    PushStatus, StoredPushResult,
};

use crate::check::{expect_code, CheckDef, CheckResult, Failure};
use crate::checks::support_barrier::{
    checkpoint, commit_rows, commit_writer_version, database_fence, decl, empty_commit,
    ensured_with, fix1_storage, fix2_at, partition_fence, push_task, tables, CLIENT,
};
use crate::context::{Ctx, NOW};
use crate::fixtures::{fix1, task};
use crate::harness::{BarrierAttack, RawAccess};
use crate::registry::check;
use crate::{check, check_eq};

/// Group name.
pub(crate) const GROUP: &str = "rfc0007-fence";

/// The checks of this group.
pub(crate) const CHECKS: &[CheckDef] = &[
    check(
        GROUP,
        "C-241",
        "without any fence a raw commit insert with NULL writer version succeeds",
        c241_no_fence_inert,
    ),
    check(
        GROUP,
        "C-242",
        "effective fence 1: raw insert with writer version 1 / NULL / 0",
        c242_fence_one,
    ),
    check(
        GROUP,
        "C-243",
        "partition fence 99: raw insert with writer version 1 is rejected",
        c243_fence_ninety_nine,
    ),
    check(
        GROUP,
        "C-244",
        "database-wide fence 2 fences a partition never seen before",
        c244_database_fence_new_partition,
    ),
    check(
        GROUP,
        "C-245",
        "append_commit after a fence rejection elsewhere succeeds and stamps the ensured version",
        c245_append_after_rejection,
    ),
    check(
        GROUP,
        "C-246",
        "an instance that never ensured is fenced out; rollback leaves nothing",
        c246_unensured_instance_fenced,
    ),
    check(
        GROUP,
        "C-247",
        "fence rejection inside a push is not a constraint violation and cannot be finalized",
        c247_rejection_inside_push,
    ),
    check(
        GROUP,
        "C-248",
        "after declare + claim an old writer's commit insert is rejected",
        c248_old_writer_during_backfill,
    ),
    check(
        GROUP,
        "C-249",
        "after activation the old writer stays fenced; the current writer commits",
        c249_old_writer_after_activation,
    ),
    check(
        GROUP,
        "C-250",
        "declaring at version 1 never lowers a partition fence of 5",
        c250_fence_never_lowered,
    ),
    check(
        GROUP,
        "C-251",
        "required_writer_version is the max of partition and database-wide fence",
        c251_required_writer_version,
    ),
    check(
        GROUP,
        "C-252",
        "writer_fence_allows: true without fence, false below, true at or above",
        c252_writer_fence_allows,
    ),
    check(
        GROUP,
        "C-365",
        "a writer that is not the storage cannot lower or remove a fence, nor activate, delete or forge a checkpoint",
        c356_barrier_rules_in_the_database,
    ),
];

/// Expects a raw insert to be refused by the fence trigger.
fn expect_rejected(
    raw: &dyn RawAccess,
    partition: &str,
    seq: i64,
    version: Option<i32>,
) -> CheckResult {
    expect_code(
        raw.insert_commit(partition, seq, version),
        ErrorCode::WriterFenceRejected,
        &format!("raw insert of ({partition}, {seq}) with writer version {version:?}"),
    )?;
    Ok(())
}

fn c241_no_fence_inert(ctx: &mut Ctx<'_>) -> CheckResult {
    fix1_storage(ctx)?;
    let raw = ctx.raw()?;
    raw.set_database_fence(None)?;
    raw.set_partition_fence("p1", None)?;
    raw.insert_commit("p1", 1, None)?;
    check_eq!(commit_rows(raw.as_ref(), "p1")?, 1, "commit rows of p1");
    Ok(())
}

fn c242_fence_one(ctx: &mut Ctx<'_>) -> CheckResult {
    fix1_storage(ctx)?;
    let raw = ctx.raw()?;
    raw.set_database_fence(Some(1))?;
    raw.insert_commit("p1", 1, Some(1))?;
    expect_rejected(raw.as_ref(), "p1", 2, None)?;
    expect_rejected(raw.as_ref(), "p1", 2, Some(0))?;
    check_eq!(commit_rows(raw.as_ref(), "p1")?, 1, "commit rows of p1");
    Ok(())
}

fn c243_fence_ninety_nine(ctx: &mut Ctx<'_>) -> CheckResult {
    fix1_storage(ctx)?;
    let raw = ctx.raw()?;
    raw.set_partition_fence("p1", Some(99))?;
    expect_rejected(raw.as_ref(), "p1", 1, Some(1))?;
    check_eq!(commit_rows(raw.as_ref(), "p1")?, 0, "commit rows of p1");
    Ok(())
}

fn c244_database_fence_new_partition(ctx: &mut Ctx<'_>) -> CheckResult {
    fix1_storage(ctx)?;
    let bumped = ctx.ensured(&fix2_at(2)?)?;
    check_eq!(
        database_fence(bumped.as_ref())?,
        Some(2),
        "database-wide fence after the bump"
    );
    let raw = ctx.raw()?;
    check_eq!(
        partition_fence(raw.as_ref(), "fresh")?,
        None,
        "partition fence of the new partition"
    );
    expect_rejected(raw.as_ref(), "fresh", 1, Some(1))?;
    check_eq!(
        commit_rows(raw.as_ref(), "fresh")?,
        0,
        "commit rows of the new partition"
    );
    Ok(())
}

fn c245_append_after_rejection(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = fix1_storage(ctx)?;
    let raw = ctx.raw()?;
    expect_rejected(raw.as_ref(), "p1", 1, None)?;
    let mut tx = storage.begin("p1")?;
    tx.lock_partition_for_push()?;
    let seq = tx.append_commit(&empty_commit("c1"))?;
    tx.commit()?;
    check_eq!(seq, 1, "appended seq");
    let ensured = storage.ensured_version().map(i64::from);
    check_eq!(
        commit_writer_version(raw.as_ref(), "p1", 1)?,
        ensured,
        "stored writer_version"
    );
    Ok(())
}

fn c246_unensured_instance_fenced(ctx: &mut Ctx<'_>) -> CheckResult {
    let a = fix1_storage(ctx)?;
    let b = ctx.open()?;
    let mut tx = b.begin("p1")?;
    check_eq!(
        tx.writer_version(),
        0,
        "writer version of the unensured instance"
    );
    tx.lock_partition_for_push()?;
    expect_code(
        tx.append_commit(&empty_commit("c1")),
        ErrorCode::WriterFenceRejected,
        "append by writer version 0",
    )?;
    expect_code(
        tx.max_commit_seq(),
        ErrorCode::TransactionAborted,
        "read after the rejection",
    )?;
    tx.rollback()?;
    check_eq!(a.get_max_commit_seq("p1")?, 0, "max_commit_seq of p1");
    let raw = ctx.raw()?;
    check_eq!(commit_rows(raw.as_ref(), "p1")?, 0, "commit rows of p1");
    Ok(())
}

fn c247_rejection_inside_push(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = fix1_storage(ctx)?;
    let raw = ctx.raw()?;
    raw.set_partition_fence("p1", Some(99))?;
    let row = task(&fix1()?, "r1", "proj", "one")?;
    let mut tx = storage.begin("p1")?;
    tx.lock_partition_for_push()?;
    tx.upsert_row("tasks", &row, Some(0))?;
    let commit = NewCommit {
        changes: vec![NewChange::upsert(
            "tasks",
            "r1",
            1,
            row.scopes.clone(),
            row.payload.clone(),
        )],
        ..empty_commit("c1")
    };
    expect_code(
        tx.append_commit(&commit),
        ErrorCode::WriterFenceRejected,
        "append under fence 99",
    )?;
    let rejection = StoredPushResult {
        status: PushStatus::Rejected,
        commit_seq: None,
        recorded_at_ms: Some(NOW),
        cache_identity: None,
        results: Vec::new(),
        actor_id: None,
    };
    expect_code(
        tx.commit_rejected_push_result(CLIENT, "c1", &rejection),
        ErrorCode::TransactionAborted,
        "commit_rejected_push_result after the fence rejection",
    )?;
    check_eq!(storage.get_row("p1", "tasks", "r1")?, None, "row r1");
    check_eq!(storage.get_max_commit_seq("p1")?, 0, "max_commit_seq of p1");
    check_eq!(commit_rows(raw.as_ref(), "p1")?, 0, "commit rows of p1");
    check_eq!(
        storage.get_push_result("p1", CLIENT, "c1")?,
        None,
        "push result"
    );
    Ok(())
}

fn c248_old_writer_during_backfill(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = fix1_storage(ctx)?;
    let raw = ctx.raw()?;
    // Without a database-wide fence only the declaration's partition fence can refuse.
    raw.set_database_fence(None)?;
    storage.declare_checkpoint("p1", "search_v1", 1, NOW)?;
    storage.claim_checkpoint("p1", "search_v1", 1, NOW)?;
    let mut old = raw.old_writer("p1")?;
    old.lock()?;
    expect_code(
        old.insert_commit(None),
        ErrorCode::WriterFenceRejected,
        "old-writer insert",
    )?;
    drop(old);
    check_eq!(commit_rows(raw.as_ref(), "p1")?, 0, "commit rows of p1");
    Ok(())
}

fn c249_old_writer_after_activation(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = fix1_storage(ctx)?;
    let raw = ctx.raw()?;
    raw.set_database_fence(None)?;
    storage.declare_checkpoint("p1", "search_v1", 1, NOW)?;
    let epoch = storage
        .claim_checkpoint("p1", "search_v1", 1, NOW)?
        .owner_epoch;
    let outcome =
        storage.activate_checkpoint("p1", "search_v1", epoch, 0, &tables(&["tasks"]), NOW)?;
    check_eq!(outcome, ActivationOutcome::Activated, "activation");
    let mut old = raw.old_writer("p1")?;
    old.lock()?;
    expect_code(
        old.insert_commit(None),
        ErrorCode::WriterFenceRejected,
        "old-writer insert",
    )?;
    drop(old);
    check_eq!(
        push_task(storage.as_ref(), "p1", "c1", "r1")?,
        1,
        "current writer's seq"
    );
    Ok(())
}

fn c250_fence_never_lowered(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = fix1_storage(ctx)?;
    let raw = ctx.raw()?;
    raw.set_partition_fence("p1", Some(5))?;
    storage.declare_checkpoint("p1", "search_v1", 1, NOW)?;
    check_eq!(
        partition_fence(raw.as_ref(), "p1")?,
        Some(5),
        "partition fence of p1"
    );
    check_eq!(
        storage.required_writer_version("p1")?,
        Some(5),
        "required_writer_version(p1)"
    );
    Ok(())
}

fn c251_required_writer_version(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = fix1_storage(ctx)?;
    let s = storage.as_ref();
    let raw = ctx.raw()?;
    raw.set_database_fence(None)?;
    check_eq!(s.required_writer_version("p1")?, None, "no fence at all");
    raw.set_partition_fence("p1", Some(3))?;
    check_eq!(
        s.required_writer_version("p1")?,
        Some(3),
        "partition 3, database none"
    );
    check_eq!(
        s.required_writer_version("p2")?,
        None,
        "other partition, database none"
    );
    raw.set_database_fence(Some(5))?;
    check_eq!(
        s.required_writer_version("p1")?,
        Some(5),
        "partition 3, database 5"
    );
    check_eq!(
        s.required_writer_version("p2")?,
        Some(5),
        "no partition fence, database 5"
    );
    raw.set_partition_fence("p1", Some(7))?;
    check_eq!(
        s.required_writer_version("p1")?,
        Some(7),
        "partition 7, database 5"
    );
    Ok(())
}

fn c252_writer_fence_allows(_ctx: &mut Ctx<'_>) -> CheckResult {
    check!(writer_fence_allows(None, 0), "no fence, writer 0");
    check!(writer_fence_allows(None, 1), "no fence, writer 1");
    check!(
        !writer_fence_allows(Some(2), 1),
        "fence 2, writer 1 allowed"
    );
    check!(
        !writer_fence_allows(Some(2), 0),
        "fence 2, writer 0 allowed"
    );
    check!(writer_fence_allows(Some(2), 2), "fence 2, writer 2 refused");
    check!(writer_fence_allows(Some(2), 3), "fence 2, writer 3 refused");
    Ok(())
}

/// C-365 (beyond the checklist, `docs/decisions.md`): "fences are never
/// lowered or deleted" and "a checkpoint becomes activated only through the
/// protocol" hold against writers that bypass the storage's API — a raw
/// connection on SQLite, a role with only DML on Postgres.
fn c356_barrier_rules_in_the_database(ctx: &mut Ctx<'_>) -> CheckResult {
    fix1_storage(ctx)?;
    let storage = ensured_with(ctx, &fix2_at(2)?, vec![decl("p1", "search_v2", 2)])?;
    let s = storage.as_ref();
    s.declare_checkpoint("p1", "claimed_v2", 2, NOW)?;
    let claimed = s.claim_checkpoint("p1", "claimed_v2", 2, NOW)?;
    s.declare_checkpoint("p2", "other_v2", 2, NOW)?;
    let raw = ctx.raw()?;
    raw.attack_barrier(BarrierAttack::RaisePartitionFence("p2"))
        .map_err(|e| Failure::new(format!("the control write (a raise) was refused: {e:?}")))?;
    check_eq!(
        partition_fence(raw.as_ref(), "p2")?,
        Some(3),
        "raised fence of p2"
    );

    use BarrierAttack as A;
    let attacks = [
        A::LowerDatabaseFence,
        A::ClearDatabaseFence,
        A::DeleteMarker,
        A::LowerPartitionFence("p1"),
        A::DeletePartitionFence("p1"),
        A::ReplacePartitionFence("p1"),
        A::LowerPartitionFence("p2"),
        A::ActivateCheckpoint("p1", "search_v2"),
        A::ActivateCheckpoint("p1", "claimed_v2"),
        A::DeleteCheckpoint("p1", "search_v2"),
        A::InsertActivatedCheckpoint("p1", "search_v2"),
        A::InsertActivatedCheckpoint("p1", "forged_v2"),
    ];
    for attack in attacks {
        match raw.attack_barrier(attack) {
            Ok(()) => return Err(Failure::new(format!("{attack:?} was accepted"))),
            Err(e) if e.is(ErrorCode::CapabilityUnsupported) => {
                return Err(Failure::new(format!(
                    "{attack:?}: the harness cannot attack: {e:?}"
                )))
            }
            Err(_) => {}
        }
        check_eq!(
            database_fence(s)?,
            Some(2),
            "database-wide fence after {attack:?}"
        );
        check_eq!(
            partition_fence(raw.as_ref(), "p1")?,
            Some(2),
            "fence of p1 after {attack:?}"
        );
        check_eq!(
            partition_fence(raw.as_ref(), "p2")?,
            Some(3),
            "fence of p2 after {attack:?}"
        );
        check_eq!(
            checkpoint(s, "p1", "search_v2")?.state,
            CheckpointState::Declared,
            "never-claimed checkpoint after {attack:?}"
        );
        check_eq!(
            checkpoint(s, "p1", "claimed_v2")?,
            claimed.clone(),
            "claimed checkpoint after {attack:?}"
        );
        check_eq!(
            s.read_checkpoint("p1", "forged_v2")?,
            None,
            "forged checkpoint after {attack:?}"
        );
    }
    expect_code(
        raw.insert_commit("p1", 900, None),
        ErrorCode::WriterFenceRejected,
        "a fence-unaware commit after the attacks",
    )?;

    // The storage itself still activates, and then nobody changes the row.
    check_eq!(
        s.activate_checkpoint("p1", "search_v2", 0, 0, &[], NOW)?,
        ActivationOutcome::Activated,
        "activation through the storage"
    );
    let activated = checkpoint(s, "p1", "search_v2")?;
    for attack in [
        A::DeleteCheckpoint("p1", "search_v2"),
        A::InsertActivatedCheckpoint("p1", "search_v2"),
    ] {
        check!(
            raw.attack_barrier(attack).is_err(),
            "{attack:?} on the activated row was accepted"
        );
        check_eq!(
            checkpoint(s, "p1", "search_v2")?,
            activated.clone(),
            "activated checkpoint after {attack:?}"
        );
    }
    Ok(())
}
