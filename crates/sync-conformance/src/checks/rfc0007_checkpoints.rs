//! §14 RFC 0007 checkpoint primitives, C-219…C-240.

use std::collections::BTreeSet;
use std::sync::Barrier;

use sync_core::{
    ChangeOp, CheckpointKey, CheckpointState, CommitPruneQuery, Coverage, ErrorCode, SourceChange,
};

use crate::check::{expect_code, expect_detail, CheckDef, CheckResult, Failure, Requires};
use crate::checks::support_barrier::{
    checkpoint, fix1_storage, fix2_at, join_result, partition_fence, push_doc, push_task, tables,
    CLIENT,
};
use crate::context::{Ctx, NOW};
use crate::fixtures::{fix1, push, task, Op};
use crate::harness::{HotPath, RawFilter};
use crate::registry::check;
use crate::{check, check_eq};

/// Group name.
pub(crate) const GROUP: &str = "rfc0007-checkpoints";

/// The checks of this group.
pub(crate) const CHECKS: &[CheckDef] = &[
    check(GROUP, "C-219", "declare at the marker version: declared, epoch 0, watermark 0, partition fence 1", c219_declare_at_marker),
    check(GROUP, "C-220", "declare at a version other than the marker: checkpoint_declaration_invalid, nothing written", c220_declare_wrong_version),
    check(GROUP, "C-221", "re-declare at the same version returns the existing row unchanged", c221_redeclare_unchanged),
    check(GROUP, "C-222", "declare over an existing row of another version: checkpoint_version_mismatch, fence unchanged", c222_declare_version_mismatch),
    check(GROUP, "C-223", "declare with a 129-byte name: invalid_argument", c223_declare_long_name),
    check(GROUP, "C-224", "two parallel claims obtain epochs 1 and 2", c224_parallel_claims),
    check(GROUP, "C-225", "claim of an absent name: checkpoint_not_declared", c225_claim_absent),
    check(GROUP, "C-226", "claim with another schema version: checkpoint_version_mismatch, epoch unchanged", c226_claim_version_mismatch),
    check(GROUP, "C-227", "advance with a superseded epoch returns false and changes nothing", c227_advance_superseded),
    check(GROUP, "C-228", "advance with the current epoch sets watermark, observed rows and updated_at", c228_advance_current),
    check(GROUP, "C-229", "advance on a never-claimed declared row returns false", c229_advance_never_claimed),
    check(GROUP, "C-230", "advance to a lower watermark: checkpoint_watermark_invalid (regression)", c230_advance_regression),
    check(GROUP, "C-231", "advance beyond max_commit_seq: checkpoint_watermark_invalid (ahead_of_log)", c231_advance_ahead_of_log),
    check(GROUP, "C-232", "advance with watermark -1: checkpoint_watermark_invalid (negative)", c232_advance_negative),
    check(GROUP, "C-233", "source_coverage_seq: per-table maxima, multi-table max, [] is 0", c233_source_coverage_seq),
    check(GROUP, "C-234", "has_source_changes_above: Clean / Changed by source tables only", c234_has_source_changes_above),
    check(GROUP, "C-235", "pruned source history: Unverifiable from 0, Clean from the horizon", c235_coverage_after_prune),
    check(GROUP, "C-236", "list_source_changes: (commit_seq, idx) order, client ids, exclusive after_seq, limit", c236_list_source_changes),
    check(GROUP, "C-237", "coverage methods with an unknown table: unknown_table", c237_coverage_unknown_table),
    check(GROUP, "C-238", "internal RFC 0007 tables are not addressable through get_row", c238_internal_tables_not_rows),
    check(GROUP, "C-239", "read_checkpoints / read_checkpoint / list_pending_checkpoints ordering and filtering", c239_checkpoint_listings),
    check(GROUP, "C-240", "coverage probe and coverage seq plans use sync_changes_by_table", c240_coverage_plans)
        .requires(Requires::PlansByShape),
];

fn c219_declare_at_marker(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = fix1_storage(ctx)?;
    let raw = ctx.raw()?;
    let row = storage.declare_checkpoint("p1", "search_v1", 1, NOW)?;
    check_eq!(row.state, CheckpointState::Declared, "state");
    check_eq!(row.owner_epoch, 0, "owner_epoch");
    check_eq!(row.watermark, 0, "watermark");
    check_eq!(row.schema_version, 1, "schema_version");
    check_eq!(
        partition_fence(raw.as_ref(), "p1")?,
        Some(1),
        "partition fence of p1"
    );
    Ok(())
}

fn c220_declare_wrong_version(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = fix1_storage(ctx)?;
    let raw = ctx.raw()?;
    let error = expect_code(
        storage.declare_checkpoint("p1", "search_v2", 2, NOW),
        ErrorCode::CheckpointDeclarationInvalid,
        "declare at v2 while the marker is 1",
    )?;
    expect_detail(&error, "reason", "version_not_current")?;
    check_eq!(
        storage.read_checkpoint("p1", "search_v2")?,
        None,
        "checkpoint row"
    );
    check_eq!(
        raw.count("sync_backfill_checkpoints", RawFilter::all())?,
        0,
        "checkpoint rows"
    );
    check_eq!(
        partition_fence(raw.as_ref(), "p1")?,
        None,
        "partition fence of p1"
    );
    Ok(())
}

fn c221_redeclare_unchanged(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = fix1_storage(ctx)?;
    push_task(storage.as_ref(), "p1", "c1", "r1")?;
    storage.declare_checkpoint("p1", "search_v1", 1, NOW)?;
    storage.claim_checkpoint("p1", "search_v1", 1, NOW + 10)?;
    check!(
        storage.advance_checkpoint("p1", "search_v1", 1, 1, 3, NOW + 20)?,
        "advance by the owner was refused"
    );
    let before = checkpoint(storage.as_ref(), "p1", "search_v1")?;
    let again = storage.declare_checkpoint("p1", "search_v1", 1, NOW + 30)?;
    check_eq!(again, before, "re-declared row");
    check_eq!(
        checkpoint(storage.as_ref(), "p1", "search_v1")?,
        before,
        "stored row"
    );
    Ok(())
}

fn c222_declare_version_mismatch(ctx: &mut Ctx<'_>) -> CheckResult {
    fix1_storage(ctx)?;
    let raw = ctx.raw()?;
    raw.insert_checkpoint("p1", "search", 1, "declared", 0)?;
    let storage = ctx.ensured(&fix2_at(2)?)?;
    let fence_before = partition_fence(raw.as_ref(), "p1")?;
    expect_code(
        storage.declare_checkpoint("p1", "search", 2, NOW),
        ErrorCode::CheckpointVersionMismatch,
        "declare at v2 over a v1 row",
    )?;
    check_eq!(
        partition_fence(raw.as_ref(), "p1")?,
        fence_before,
        "partition fence of p1"
    );
    check_eq!(
        checkpoint(storage.as_ref(), "p1", "search")?.schema_version,
        1,
        "stored version"
    );
    Ok(())
}

fn c223_declare_long_name(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = fix1_storage(ctx)?;
    let name = "n".repeat(129);
    let error = expect_code(
        storage.declare_checkpoint("p1", &name, 1, NOW),
        ErrorCode::InvalidArgument,
        "declare with a 129-byte name",
    )?;
    expect_detail(&error, "argument", "name")?;
    Ok(())
}

fn c224_parallel_claims(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = fix1_storage(ctx)?;
    storage.declare_checkpoint("p1", "search_v1", 1, NOW)?;
    let barrier = Barrier::new(2);
    let results: Vec<sync_core::Result<sync_core::StoredCheckpoint>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..2)
            .map(|_| {
                let storage = storage.as_ref();
                let barrier = &barrier;
                s.spawn(move || {
                    barrier.wait();
                    storage.claim_checkpoint("p1", "search_v1", 1, NOW)
                })
            })
            .collect();
        handles.into_iter().map(join_result).collect()
    });
    let mut epochs = BTreeSet::new();
    for result in results {
        let row = result?;
        check_eq!(row.state, CheckpointState::Backfilling, "claimed state");
        epochs.insert(row.owner_epoch);
    }
    check_eq!(epochs, BTreeSet::from([1, 2]), "claimed epochs");
    let stored = storage.read_checkpoints("p1")?;
    check_eq!(stored.len(), 1, "checkpoint rows");
    check_eq!(stored[0].owner_epoch, 2, "stored epoch");
    Ok(())
}

fn c225_claim_absent(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = fix1_storage(ctx)?;
    expect_code(
        storage.claim_checkpoint("p1", "missing_v1", 1, NOW),
        ErrorCode::CheckpointNotDeclared,
        "claim of an absent checkpoint",
    )?;
    check_eq!(
        storage.read_checkpoint("p1", "missing_v1")?,
        None,
        "row after the claim"
    );
    Ok(())
}

fn c226_claim_version_mismatch(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = fix1_storage(ctx)?;
    storage.declare_checkpoint("p1", "search_v1", 1, NOW)?;
    storage.claim_checkpoint("p1", "search_v1", 1, NOW)?;
    expect_code(
        storage.claim_checkpoint("p1", "search_v1", 2, NOW),
        ErrorCode::CheckpointVersionMismatch,
        "claim at v2 of a v1 checkpoint",
    )?;
    check_eq!(
        checkpoint(storage.as_ref(), "p1", "search_v1")?.owner_epoch,
        1,
        "epoch"
    );
    Ok(())
}

fn c227_advance_superseded(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = fix1_storage(ctx)?;
    push_task(storage.as_ref(), "p1", "c1", "r1")?;
    storage.declare_checkpoint("p1", "search_v1", 1, NOW)?;
    storage.claim_checkpoint("p1", "search_v1", 1, NOW)?;
    storage.claim_checkpoint("p1", "search_v1", 1, NOW)?;
    let before = checkpoint(storage.as_ref(), "p1", "search_v1")?;
    check!(
        !storage.advance_checkpoint("p1", "search_v1", 1, 1, 5, NOW + 100)?,
        "advance with the superseded epoch 1 returned true"
    );
    check_eq!(
        checkpoint(storage.as_ref(), "p1", "search_v1")?,
        before,
        "row after the refused advance"
    );
    Ok(())
}

fn c228_advance_current(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = fix1_storage(ctx)?;
    push_task(storage.as_ref(), "p1", "c1", "r1")?;
    storage.declare_checkpoint("p1", "search_v1", 1, NOW)?;
    let claimed = storage.claim_checkpoint("p1", "search_v1", 1, NOW)?;
    check!(
        storage.advance_checkpoint("p1", "search_v1", claimed.owner_epoch, 1, 7, NOW + 500)?,
        "advance with the current epoch returned false"
    );
    let row = checkpoint(storage.as_ref(), "p1", "search_v1")?;
    check_eq!(row.watermark, 1, "watermark");
    check_eq!(row.observed_rows, 7, "observed_rows");
    check_eq!(row.updated_at_ms, NOW + 500, "updated_at_ms");
    check_eq!(row.state, CheckpointState::Backfilling, "state");
    check_eq!(row.owner_epoch, claimed.owner_epoch, "owner_epoch");
    Ok(())
}

fn c229_advance_never_claimed(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = fix1_storage(ctx)?;
    storage.declare_checkpoint("p1", "search_v1", 1, NOW)?;
    let before = checkpoint(storage.as_ref(), "p1", "search_v1")?;
    check!(
        !storage.advance_checkpoint("p1", "search_v1", 0, 0, 3, NOW + 100)?,
        "advance on a never-claimed row returned true"
    );
    check_eq!(
        checkpoint(storage.as_ref(), "p1", "search_v1")?,
        before,
        "row after the refused advance"
    );
    Ok(())
}

/// Declares and claims `search_v1` in `p1` after `commits` task pushes; returns the epoch.
fn claimed_after(storage: &dyn sync_core::ServerStorage, commits: usize) -> CheckResult<i64> {
    for i in 0..commits {
        push_task(storage, "p1", &format!("c{i}"), &format!("r{i}"))?;
    }
    storage.declare_checkpoint("p1", "search_v1", 1, NOW)?;
    Ok(storage
        .claim_checkpoint("p1", "search_v1", 1, NOW)?
        .owner_epoch)
}

fn c230_advance_regression(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = fix1_storage(ctx)?;
    let epoch = claimed_after(storage.as_ref(), 2)?;
    check!(
        storage.advance_checkpoint("p1", "search_v1", epoch, 2, 0, NOW)?,
        "advance to 2 refused"
    );
    let error = expect_code(
        storage.advance_checkpoint("p1", "search_v1", epoch, 1, 0, NOW),
        ErrorCode::CheckpointWatermarkInvalid,
        "advance from 2 to 1",
    )?;
    expect_detail(&error, "reason", "regression")?;
    check_eq!(
        checkpoint(storage.as_ref(), "p1", "search_v1")?.watermark,
        2,
        "watermark"
    );
    Ok(())
}

fn c231_advance_ahead_of_log(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = fix1_storage(ctx)?;
    let epoch = claimed_after(storage.as_ref(), 1)?;
    let error = expect_code(
        storage.advance_checkpoint("p1", "search_v1", epoch, 2, 0, NOW),
        ErrorCode::CheckpointWatermarkInvalid,
        "advance to 2 with max_commit_seq 1",
    )?;
    expect_detail(&error, "reason", "ahead_of_log")?;
    Ok(())
}

fn c232_advance_negative(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = fix1_storage(ctx)?;
    let epoch = claimed_after(storage.as_ref(), 0)?;
    let error = expect_code(
        storage.advance_checkpoint("p1", "search_v1", epoch, -1, 0, NOW),
        ErrorCode::CheckpointWatermarkInvalid,
        "advance to -1",
    )?;
    expect_detail(&error, "reason", "negative")?;
    Ok(())
}

fn c233_source_coverage_seq(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = fix1_storage(ctx)?;
    let s = storage.as_ref();
    push_doc(s, "p1", "c1", "d1")?;
    push_task(s, "p1", "c2", "r1")?;
    push_doc(s, "p1", "c3", "d2")?;
    push_task(s, "p1", "c4", "r2")?;
    push_doc(s, "p2", "c1", "d9")?;
    push_doc(s, "p2", "c2", "d9b")?;
    push_doc(s, "p2", "c3", "d9c")?;
    push_doc(s, "p2", "c4", "d9d")?;
    push_doc(s, "p2", "c5", "d9e")?;
    check_eq!(
        s.source_coverage_seq("p1", &tables(&["tasks"]))?,
        4,
        "tasks in p1"
    );
    check_eq!(
        s.source_coverage_seq("p1", &tables(&["docs"]))?,
        3,
        "docs in p1"
    );
    check_eq!(
        s.source_coverage_seq("p1", &tables(&["secrets"]))?,
        0,
        "secrets in p1"
    );
    check_eq!(
        s.source_coverage_seq("p1", &tables(&["docs", "secrets"]))?,
        3,
        "docs+secrets in p1"
    );
    check_eq!(
        s.source_coverage_seq("p1", &tables(&["docs", "tasks"]))?,
        4,
        "docs+tasks in p1"
    );
    check_eq!(s.source_coverage_seq("p1", &[])?, 0, "[] in p1");
    check_eq!(
        s.source_coverage_seq("p3", &tables(&["tasks"]))?,
        0,
        "unknown partition"
    );
    Ok(())
}

fn c234_has_source_changes_above(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = fix1_storage(ctx)?;
    let s = storage.as_ref();
    push_task(s, "p1", "c1", "r1")?;
    check_eq!(
        s.has_source_changes_above("p1", &tables(&["docs"]), 0)?,
        Coverage::Clean,
        "non-source write (tasks) with sources [docs]"
    );
    push_doc(s, "p1", "c2", "d1")?;
    check_eq!(
        s.has_source_changes_above("p1", &tables(&["docs"]), 1)?,
        Coverage::Changed,
        "docs write at 2 above 1"
    );
    check_eq!(
        s.has_source_changes_above("p1", &tables(&["docs"]), 2)?,
        Coverage::Clean,
        "seq 2 = latest"
    );
    check_eq!(
        s.has_source_changes_above("p1", &tables(&["docs"]), 3)?,
        Coverage::Clean,
        "seq 3 > latest"
    );
    check_eq!(
        s.has_source_changes_above("p1", &tables(&["tasks"]), 0)?,
        Coverage::Changed,
        "from 0 with a tasks change"
    );
    check_eq!(
        s.has_source_changes_above("p1", &[], 0)?,
        Coverage::Clean,
        "sources []"
    );
    Ok(())
}

fn c235_coverage_after_prune(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = fix1_storage(ctx)?;
    let s = storage.as_ref();
    s.touch_partition("p1", NOW, "e1")?;
    push_task(s, "p1", "c1", "r1")?;
    let pruned = s.prune_commits_through(
        "p1",
        &CommitPruneQuery {
            log_epoch: "e1".to_owned(),
            through_seq: 1,
        },
    )?;
    check_eq!(pruned.horizon_seq, 1, "horizon after the prune");
    check_eq!(
        s.has_source_changes_above("p1", &tables(&["tasks"]), 0)?,
        Coverage::Unverifiable,
        "from 0 after pruning through 1"
    );
    check_eq!(
        s.has_source_changes_above("p1", &tables(&["tasks"]), 1)?,
        Coverage::Clean,
        "from the horizon"
    );
    Ok(())
}

fn source_change(
    seq: i64,
    idx: i64,
    client: &str,
    table: &str,
    row: &str,
    op: ChangeOp,
) -> SourceChange {
    SourceChange {
        commit_seq: seq,
        idx,
        client_id: client.to_owned(),
        table: table.to_owned(),
        row_id: row.to_owned(),
        op,
    }
}

fn c236_list_source_changes(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = fix1_storage(ctx)?;
    let s = storage.as_ref();
    let schema = fix1()?;
    let doc = crate::fixtures::doc(&schema, "d1", "org", "proj", None)?;
    push(
        s,
        "p1",
        "client-a",
        "k1",
        &[
            Op::upsert("tasks", task(&schema, "r1", "proj", "one")?),
            Op::upsert("docs", doc),
            Op::upsert("tasks", task(&schema, "r2", "proj", "two")?),
        ],
    )?
    .seq()?;
    push(
        s,
        "p1",
        "client-b",
        "k2",
        &[
            Op::upsert("tasks", task(&schema, "r3", "proj", "three")?),
            Op::delete("tasks", "r1"),
        ],
    )?
    .seq()?;
    push_doc(s, "p1", "k3", "d2")?;
    let upsert = ChangeOp::Upsert;
    let all_tasks = vec![
        source_change(1, 0, "client-a", "tasks", "r1", upsert),
        source_change(1, 2, "client-a", "tasks", "r2", upsert),
        source_change(2, 0, "client-b", "tasks", "r3", upsert),
        source_change(2, 1, "client-b", "tasks", "r1", ChangeOp::Delete),
    ];
    check_eq!(
        s.list_source_changes("p1", &tables(&["tasks"]), 0, 100)?,
        all_tasks,
        "tasks from 0"
    );
    let both = s.list_source_changes("p1", &tables(&["docs", "tasks"]), 0, 100)?;
    let positions: Vec<(i64, i64, String)> = both
        .iter()
        .map(|c| (c.commit_seq, c.idx, c.client_id.clone()))
        .collect();
    check_eq!(
        positions,
        vec![
            (1, 0, "client-a".to_owned()),
            (1, 1, "client-a".to_owned()),
            (1, 2, "client-a".to_owned()),
            (2, 0, "client-b".to_owned()),
            (2, 1, "client-b".to_owned()),
            (3, 0, CLIENT.to_owned()),
        ],
        "docs+tasks positions and client ids"
    );
    check_eq!(
        s.list_source_changes("p1", &tables(&["tasks"]), 1, 100)?,
        all_tasks[2..].to_vec(),
        "tasks after 1 (exclusive)"
    );
    check_eq!(
        s.list_source_changes("p1", &tables(&["tasks"]), 0, 2)?,
        all_tasks[..2].to_vec(),
        "tasks with limit 2"
    );
    expect_code(
        s.list_source_changes("p1", &tables(&["tasks"]), 0, 0),
        ErrorCode::InvalidLimit,
        "limit 0",
    )?;
    Ok(())
}

fn c237_coverage_unknown_table(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = fix1_storage(ctx)?;
    let s = storage.as_ref();
    let nope = tables(&["tasks", "nope"]);
    expect_code(
        s.source_coverage_seq("p1", &nope),
        ErrorCode::UnknownTable,
        "source_coverage_seq",
    )?;
    expect_code(
        s.has_source_changes_above("p1", &nope, 0),
        ErrorCode::UnknownTable,
        "has_source_changes_above",
    )?;
    expect_code(
        s.list_source_changes("p1", &nope, 0, 10),
        ErrorCode::UnknownTable,
        "list_source_changes",
    )?;
    let mut tx = s.begin("p1")?;
    expect_code(
        tx.has_source_changes_above(&nope, 0),
        ErrorCode::UnknownTable,
        "tx has_source_changes_above",
    )?;
    expect_code(
        tx.list_source_changes(&nope, 0, 10),
        ErrorCode::UnknownTable,
        "tx list_source_changes",
    )?;
    tx.rollback()?;
    Ok(())
}

fn c238_internal_tables_not_rows(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = fix1_storage(ctx)?;
    storage.declare_checkpoint("p1", "search_v1", 1, NOW)?;
    for table in ["sync_backfill_checkpoints", "sync_writer_fence"] {
        expect_code(
            storage.get_row("p1", table, "p1"),
            ErrorCode::UnknownTable,
            &format!("get_row on {table}"),
        )?;
    }
    Ok(())
}

fn key(partition: &str, name: &str) -> CheckpointKey {
    CheckpointKey {
        partition: partition.to_owned(),
        name: name.to_owned(),
    }
}

fn c239_checkpoint_listings(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = fix1_storage(ctx)?;
    let s = storage.as_ref();
    s.declare_checkpoint("p2", "a_v1", 1, NOW)?;
    s.declare_checkpoint("p1", "b_v1", 1, NOW)?;
    s.declare_checkpoint("p1", "c_v1", 1, NOW)?;
    s.declare_checkpoint("p1", "a_v1", 1, NOW)?;
    let outcome = s.activate_checkpoint("p1", "c_v1", 0, 0, &[], NOW)?;
    check_eq!(
        outcome,
        sync_core::ActivationOutcome::Activated,
        "activation of c_v1"
    );
    let names: Vec<String> = s
        .read_checkpoints("p1")?
        .into_iter()
        .map(|c| c.name)
        .collect();
    check_eq!(
        names,
        vec!["a_v1", "b_v1", "c_v1"],
        "read_checkpoints(p1) names"
    );
    let one = s
        .read_checkpoint("p1", "b_v1")?
        .ok_or_else(|| Failure::new("read_checkpoint(p1, b_v1) is None"))?;
    check_eq!(
        (one.partition.as_str(), one.name.as_str()),
        ("p1", "b_v1"),
        "read_checkpoint key"
    );
    check_eq!(
        one.state,
        CheckpointState::Declared,
        "read_checkpoint state"
    );
    check_eq!(
        s.read_checkpoint("p1", "zz_v1")?,
        None,
        "read_checkpoint of an absent name"
    );
    check_eq!(
        s.read_checkpoint("p3", "a_v1")?,
        None,
        "read_checkpoint in another partition"
    );
    check_eq!(
        s.list_pending_checkpoints(1)?,
        vec![key("p1", "a_v1"), key("p1", "b_v1"), key("p2", "a_v1")],
        "list_pending_checkpoints(1)"
    );
    check_eq!(
        s.list_pending_checkpoints(2)?,
        Vec::<CheckpointKey>::new(),
        "list_pending_checkpoints(2)"
    );
    Ok(())
}

fn c240_coverage_plans(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = fix1_storage(ctx)?;
    for i in 0..20 {
        push_task(storage.as_ref(), "p1", &format!("c{i}"), &format!("r{i}"))?;
        push_doc(storage.as_ref(), "p1", &format!("d{i}"), &format!("d{i}"))?;
    }
    let raw = ctx.raw()?;
    for path in [HotPath::CoverageProbe, HotPath::CoverageSeq] {
        let plan = raw.explain(path)?;
        check!(
            plan.uses_index("sync_changes", "sync_changes_by_table"),
            "{path:?} does not use sync_changes_by_table: {}",
            plan.raw
        );
    }
    Ok(())
}
