//! `engine.md` §5.9 acknowledgements and §6 retention: E-079…E-081.

use sync_core::{ClientRecord, ErrorCode};
use sync_engine::{RequestContext, SectionStatus};

use super::engine_fixture::{seed_empty_commits, P};
use super::engine_round::{env, pull_req, run, sub_p1, Env, EPOCH};
use crate::check::{CheckDef, CheckResult, Failure};
use crate::context::{Ctx, NOW};
use crate::registry::check;
use crate::{check, check_eq};

use super::engine_entry::GROUP;

/// The checks of this file.
pub(crate) const CHECKS: &[CheckDef] = &[
    check(
        GROUP,
        "E-079",
        "acknowledge is monotonic, actor-bound and epoch-bound",
        e079_acknowledge,
    ),
    check(
        GROUP,
        "E-080",
        "prune holds the horizon at the active floor; idle clients reset",
        e080_prune_floor,
    ),
    check(
        GROUP,
        "E-081",
        "prune on an unregistered partition is partition_unregistered",
        e081_prune_unregistered,
    ),
];

const DAY_MS: i64 = 24 * 60 * 60 * 1000;

fn put_record(env: &Env, client: &str, cursor: i64, updated_at_ms: i64) -> CheckResult {
    env.storage.put_client_record(
        P,
        &ClientRecord {
            client_id: client.to_owned(),
            actor_id: "alice".to_owned(),
            wire_version: 2,
            cursor,
            updated_at_ms,
            subscriptions: Vec::new(),
        },
    )?;
    Ok(())
}

fn cursor_of(env: &Env, client: &str) -> CheckResult<Option<i64>> {
    Ok(env.storage.get_client_record(P, client)?.map(|r| r.cursor))
}

fn e079_acknowledge(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    seed_empty_commits(env.storage.as_ref(), P, 70)?;
    put_record(&env, "dev-a", 40, NOW)?;
    let engine = env.engine()?;
    let alice = RequestContext::new(P, "alice");
    let ack = |ctx: &RequestContext, cursor: i64| -> CheckResult<bool> {
        engine
            .acknowledge(ctx, "dev-a", EPOCH, cursor)
            .map_err(|e| Failure::new(format!("acknowledge({cursor}) failed: {e:?}")))
    };
    check!(ack(&alice, 60)?, "ack 60 refused");
    check_eq!(cursor_of(&env, "dev-a")?, Some(60), "cursor after ack 60");
    check!(ack(&alice, 55)?, "ack 55 refused");
    check_eq!(cursor_of(&env, "dev-a")?, Some(60), "cursor after ack 55");
    check!(
        !ack(&RequestContext::new(P, "bob"), 65)?,
        "bob acknowledged alice's client"
    );
    check_eq!(
        cursor_of(&env, "dev-a")?,
        Some(60),
        "cursor after bob's ack"
    );
    env.storage
        .rotate_partition_log_epoch(P, "epoch-rotated", NOW)?;
    check!(
        !ack(&alice, 65)?,
        "ack under the old epoch accepted after a rotation"
    );
    check_eq!(cursor_of(&env, "dev-a")?, None, "record after the rotation");
    Ok(())
}

fn e080_prune_floor(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    seed_empty_commits(env.storage.as_ref(), P, 2000)?;
    put_record(&env, "dev-a", 40, NOW)?;
    put_record(&env, "dev-b", 30, NOW - 15 * DAY_MS)?;
    let engine = env.engine()?;
    let result = engine.prune(P, NOW)?;
    check_eq!(result.horizon_seq, 40, "horizon");
    check_eq!(env.storage.get_horizon_seq(P)?, 40, "stored horizon");
    for (client, cursor, status) in [
        ("dev-a", 40, SectionStatus::Active),
        ("dev-b", 30, SectionStatus::Reset),
    ] {
        let round = run(
            &engine,
            "alice",
            pull_req(client, vec![sub_p1("s", cursor)]),
        );
        let section = round.section()?;
        check!(
            section.start.status == status && !section.start.bootstrap,
            "{client} at {cursor}: expected {}, got {:?}",
            status.as_str(),
            section.start
        );
    }
    Ok(())
}

fn e081_prune_unregistered(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    let engine = env.engine()?;
    match engine.prune("N", NOW) {
        Err(e) if e.code() == ErrorCode::PartitionUnregistered => Ok(()),
        other => Err(Failure::new(format!(
            "expected sync.storage.partition_unregistered, got {other:?}"
        ))),
    }
}
