//! `engine.md` §3.1 E3, §4.1 P5, §4.10 writer fence and §5.2 L4: the
//! serve gate at every serve point, with races injected through the
//! `test-hooks` callbacks — E-057…E-062.

use std::sync::Arc;

use serde_json::Value;
use sync_core::{CheckpointDeclaration, ServerStorage};
use sync_engine::{PushResultStatus, ResponseItem, WireError};

use super::engine_doubles::HookLog;
use super::engine_fixture::{efix_v2, P, Q};
use super::engine_round::{commit, env, expect_applied, pull_req, run, run_in, sub_p1, up, Round};
use crate::check::{CheckDef, CheckResult, Failure};
use crate::context::{Ctx, NOW};
use crate::registry::check;
use crate::{check, check_eq};

use super::engine_entry::GROUP;

/// The checks of this file.
pub(crate) const CHECKS: &[CheckDef] = &[
    check(
        GROUP,
        "E-057",
        "an undeclared pending checkpoint refuses its partition only",
        e057_pending_checkpoint,
    ),
    check(
        GROUP,
        "E-058",
        "the declaring engine serves while the checkpoint is pending",
        e058_declared_checkpoint,
    ),
    check(
        GROUP,
        "E-059",
        "a bump after P1 of the 2nd commit is refused inside its transaction",
        e059_bump_between_commits,
    ),
    check(
        GROUP,
        "E-060",
        "a raw partition fence above the marker is writer_fenced, never persisted",
        e060_writer_fenced,
    ),
    check(
        GROUP,
        "E-061",
        "a rotation after P1 is log_epoch_rotated; nothing stored",
        e061_rotation_in_push,
    ),
    check(
        GROUP,
        "E-062",
        "a rotation between sections errors before the 2nd SubEnd",
        e062_rotation_between_sections,
    ),
];

/// `details.reason` of a wire error.
fn reason(error: &WireError) -> Option<&str> {
    error
        .details
        .as_ref()?
        .get("reason")
        .and_then(Value::as_str)
}

fn expect_not_ready(round: &Round, why: &str) -> CheckResult {
    let error = round.expect_error("sync.schema_not_ready")?;
    check_eq!(reason(error), Some(why), "details.reason");
    check!(
        error.retryable && error.http_status == 503,
        "not retryable 503: {error:?}"
    );
    Ok(())
}

fn e057_pending_checkpoint(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    env.storage.declare_checkpoint(P, "search_v1", 1, NOW)?;
    env.storage
        .touch_partition(Q, NOW, super::engine_round::EPOCH)?;
    let engine = env.engine()?;
    let req = |ccid: &str| env.insert_req("dev-a", ccid, ccid, "p1");
    let refused = run(&engine, "alice", req("t1")?);
    expect_not_ready(&refused, "checkpoint_pending")?;
    check!(
        refused.items.is_empty(),
        "entry refusal emitted items: {:?}",
        refused.items
    );
    check_eq!(env.max_seq()?, 0, "max_commit_seq of P");
    let served = run_in(&engine, Q, "alice", req("t2")?);
    expect_applied(served.result(0)?, PushResultStatus::Applied, 1)?;
    Ok(())
}

fn e058_declared_checkpoint(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    env.storage.declare_checkpoint(P, "search_v1", 1, NOW)?;
    let engine = env.engine_with(|c| {
        c.declarations = vec![CheckpointDeclaration::new(P, "search_v1", 1)];
    })?;
    let req = env.insert_req("dev-a", "c1", "t1", "p1")?;
    expect_applied(
        run(&engine, "alice", req).result(0)?,
        PushResultStatus::Applied,
        1,
    )?;
    Ok(())
}

fn e059_bump_between_commits(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    let other: Arc<dyn ServerStorage> = ctx.open()?;
    let v2 = Arc::new(efix_v2()?);
    let log = HookLog::default();
    let hook_log = log.clone();
    let engine = env.engine_with(|c| {
        c.test_hooks.after_p1 = Some(Arc::new(move |ccid: &str| {
            if ccid == "c2" {
                if let Err(e) = other.ensure_schema(&v2, &sync_core::EnsureOptions::default()) {
                    hook_log.note(format!("bump failed: {e:?}"));
                }
            }
        }));
    })?;
    let mut req = pull_req("dev-a", vec![sub_p1("s", -1)]);
    req.pushes = vec![
        commit("c1", vec![up("tasks", "t1", None, env.task("t1", "p1")?)]),
        commit("c2", vec![up("tasks", "t2", None, env.task("t2", "p1")?)]),
    ];
    let round = run(&engine, "alice", req);
    log.check_empty()?;
    expect_applied(round.result(0)?, PushResultStatus::Applied, 1)?;
    check_eq!(round.results().len(), 1, "push results");
    expect_not_ready(&round, "schema_ahead")?;
    check_eq!(
        round.frames(),
        ["RESP_HEADER", "PUSH_RESULT", "ERROR", "END"],
        "frames"
    );
    check!(
        env.storage.get_push_result(P, "dev-a", "c2")?.is_none(),
        "c2 result stored"
    );
    check!(
        env.storage.get_row(P, "tasks", "t2")?.is_none(),
        "t2 stored"
    );
    check!(
        env.storage.get_client_record(P, "dev-a")?.is_none(),
        "client record written"
    );
    Ok(())
}

fn e060_writer_fenced(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    ctx.raw()?.set_partition_fence(P, Some(2))?;
    let engine = env.engine()?;
    let req = env.insert_req("dev-a", "c1", "t1", "p1")?;
    let round = run(&engine, "alice", req);
    expect_not_ready(&round, "writer_fenced")?;
    check!(
        round.results().is_empty(),
        "a push result was emitted: {:?}",
        round.items
    );
    check!(
        env.storage.get_push_result(P, "dev-a", "c1")?.is_none(),
        "a result was stored"
    );
    check!(
        env.storage.get_row(P, "tasks", "t1")?.is_none(),
        "t1 stored"
    );
    Ok(())
}

fn e061_rotation_in_push(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    let storage = env.storage.clone();
    let log = HookLog::default();
    let hook_log = log.clone();
    let engine = env.engine_with(|c| {
        c.test_hooks.after_p1 = Some(Arc::new(move |_: &str| {
            if let Err(e) = storage.rotate_partition_log_epoch(P, "epoch-rotated", NOW) {
                hook_log.note(format!("rotation failed: {e:?}"));
            }
        }));
    })?;
    let req = env.insert_req("dev-a", "c1", "t1", "p1")?;
    let round = run(&engine, "alice", req);
    log.check_empty()?;
    expect_not_ready(&round, "log_epoch_rotated")?;
    check!(
        round.results().is_empty(),
        "a push result was emitted: {:?}",
        round.items
    );
    check!(
        env.storage.get_push_result(P, "dev-a", "c1")?.is_none(),
        "a result was stored"
    );
    check_eq!(env.max_seq()?, 0, "max_commit_seq");
    Ok(())
}

fn e062_rotation_between_sections(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    let storage = env.storage.clone();
    let log = HookLog::default();
    let hook_log = log.clone();
    let engine = env.engine_with(|c| {
        c.test_hooks.between_sections = Some(Arc::new(move |_: usize| {
            if let Err(e) = storage.rotate_partition_log_epoch(P, "epoch-rotated", NOW) {
                hook_log.note(format!("rotation failed: {e:?}"));
            }
        }));
    })?;
    let round = run(
        &engine,
        "alice",
        pull_req("dev-a", vec![sub_p1("a", -1), sub_p1("b", -1)]),
    );
    log.check_empty()?;
    let error = round.expect_error("sync.schema_not_ready")?;
    check!(
        matches!(reason(error), Some("log_epoch_rotated" | "token_changed")),
        "details.reason {:?}",
        reason(error)
    );
    let ends: Vec<usize> = round
        .items
        .iter()
        .enumerate()
        .filter(|(_, i)| matches!(i, ResponseItem::SubEnd(_)))
        .map(|(n, _)| n)
        .collect();
    let error_at = round
        .items
        .iter()
        .position(|i| matches!(i, ResponseItem::Error(_)))
        .ok_or_else(|| Failure::new("no Error item"))?;
    check_eq!(ends.len(), 1, "SubEnd items");
    check!(
        ends[0] < error_at,
        "the first SubEnd does not precede the Error: {:?}",
        round.frames()
    );
    check_eq!(round.items.last(), Some(&ResponseItem::End), "last item");
    Ok(())
}
