//! `engine.md` §3 entry sequence and §1.5 construction: E-001…E-016, E-063.

use sync_core::{ClientRecord, PushStatus};
use sync_engine::{EngineError, PullHeader, PushResultStatus, RespHeader};

use super::engine_doubles::{scope_map, ResolverMode};
use super::engine_fixture::{efix, efix_v2, P};
use super::engine_round::{
    commit, del, env, expect_applied, pull_req, push_req, request, run, run_in, sub, sub_p1, up,
    EPOCH,
};
use crate::check::{CheckDef, CheckResult, Failure};
use crate::context::{Ctx, NOW};
use crate::registry::check;
use crate::{check, check_eq};

/// Group name.
pub(crate) const GROUP: &str = "engine";

/// The checks of this file.
pub(crate) const CHECKS: &[CheckDef] = &[
    check(
        GROUP,
        "E-001",
        "an insert is applied at commitSeq 1 with the header of the registry epoch",
        e001_insert_applied,
    ),
    check(
        GROUP,
        "E-002",
        "first contact registers the partition with the IdSource id as log epoch",
        e002_first_contact_epoch,
    ),
    check(
        GROUP,
        "E-003",
        "a newer client schema gets the floor response and nothing else",
        e003_schema_floor,
    ),
    check(
        GROUP,
        "E-004",
        "wire 2 without logEpoch, pull only: reset-required header",
        e004_epoch_acquisition,
    ),
    check(
        GROUP,
        "E-005",
        "wire 2 without logEpoch with a push is invalid_request",
        e005_push_without_epoch,
    ),
    check(
        GROUP,
        "E-006",
        "a stale epoch with a push gets the reset response",
        e006_stale_epoch,
    ),
    check(
        GROUP,
        "E-007",
        "wire 1 is served before a rotation and refused after",
        e007_wire1_after_rotation,
    ),
    check(
        GROUP,
        "E-008",
        "a remote-command client id is invalid_client_id",
        e008_command_client_id,
    ),
    check(
        GROUP,
        "E-009",
        "a client id bound to another actor is invalid_client_id",
        e009_client_bound_to_actor,
    ),
    check(
        GROUP,
        "E-010",
        "501 operations over three commits is too_many_operations; 500 are served",
        e010_operation_cap,
    ),
    check(
        GROUP,
        "E-011",
        "accept without inline or external rows is invalid_request",
        e011_accept_bits,
    ),
    check(
        GROUP,
        "E-012",
        "duplicate subscription ids are invalid_subscription",
        e012_duplicate_subscription,
    ),
    check(
        GROUP,
        "E-013",
        "a subscription on an unknown table is unknown_table (400)",
        e013_unknown_table,
    ),
    check(
        GROUP,
        "E-014",
        "undeclared or wildcard requested scopes are invalid_subscription",
        e014_bad_requested_scopes,
    ),
    check(
        GROUP,
        "E-015",
        "a resolver key no table declares is invalid_subscription",
        e015_resolver_unknown_key,
    ),
    check(
        GROUP,
        "E-016",
        "frame invariants fail before touch_partition",
        e016_invariants_before_touch,
    ),
    check(
        GROUP,
        "E-063",
        "Engine::new refuses a storage not ensured at the schema version; at its own version a round runs at it",
        e063_construction_refused,
    ),
];

fn expect_header(header: &RespHeader, expected: &RespHeader) -> CheckResult {
    check_eq!(header, expected, "response header");
    Ok(())
}

fn e001_insert_applied(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    let engine = env.engine()?;
    let payload = env.task("t1", "p1")?;
    let req = push_req(
        "dev-a",
        vec![commit("c1", vec![up("tasks", "t1", None, payload.clone())])],
    );
    let round = run(&engine, "alice", req);
    round.ok()?;
    expect_header(
        round.header()?,
        &RespHeader {
            required_schema_version: None,
            latest_schema_version: Some(1),
            log_epoch: Some(EPOCH.to_owned()),
            reset_required: false,
        },
    )?;
    let seq = expect_applied(round.result(0)?, PushResultStatus::Applied, 1)?;
    check_eq!(seq, 1, "commitSeq");
    let row = env
        .storage
        .get_row(P, "tasks", "t1")?
        .ok_or_else(|| Failure::new("t1 not stored"))?;
    check_eq!(row.server_version, 1, "row version");
    check_eq!(
        row.scopes,
        crate::fixtures::scopes(&[("project_id", "p1")]),
        "row scopes"
    );
    check_eq!(row.payload, payload, "stored payload");
    let stored = env
        .storage
        .get_push_result(P, "dev-a", "c1")?
        .ok_or_else(|| Failure::new("result not stored"))?;
    check_eq!(stored.status, PushStatus::Applied, "stored status");
    check_eq!(stored.commit_seq, Some(1), "stored commitSeq");
    Ok(())
}

fn e002_first_contact_epoch(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    let engine = env.engine()?;
    let mut req = pull_req("dev-a", vec![sub_p1("s", -1)]);
    req.header.log_epoch = None;
    let round = run_in(&engine, "N", "alice", req);
    round.ok()?;
    let stored = env
        .storage
        .get_partition_log_epoch("N")?
        .ok_or_else(|| Failure::new("partition N not registered"))?;
    let issued = env.ids.issued();
    check!(
        issued.contains(&stored),
        "registry epoch {stored:?} is not an IdSource id ({issued:?})"
    );
    check_eq!(
        round.header()?.log_epoch.as_deref(),
        Some(stored.as_str()),
        "Header.logEpoch"
    );
    Ok(())
}

fn e003_schema_floor(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    let engine = env.engine()?;
    let mut req = pull_req("dev-a", vec![sub_p1("s", -1)]);
    req.header.schema_version = 2;
    req.pushes = vec![commit(
        "c1",
        vec![up("tasks", "t1", None, env.task("t1", "p1")?)],
    )];
    let round = run(&engine, "alice", req);
    round.ok()?;
    check_eq!(
        round.frames(),
        ["RESP_HEADER", "END"],
        "floor response frames"
    );
    expect_header(
        round.header()?,
        &RespHeader {
            required_schema_version: Some(1),
            latest_schema_version: Some(1),
            log_epoch: Some(EPOCH.to_owned()),
            reset_required: false,
        },
    )?;
    check_eq!(env.max_seq()?, 0, "max_commit_seq");
    check_eq!(env.resolver.calls(), 0, "resolver calls");
    check!(
        env.storage.get_client_record(P, "dev-a")?.is_none(),
        "floor response wrote a client record"
    );
    Ok(())
}

fn e004_epoch_acquisition(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    let engine = env.engine()?;
    let mut req = pull_req("dev-a", vec![sub_p1("s", -1)]);
    req.header.log_epoch = None;
    let round = run(&engine, "alice", req);
    round.ok()?;
    check_eq!(
        round.frames(),
        ["RESP_HEADER", "END"],
        "reset response frames"
    );
    let header = round.header()?;
    check_eq!(header.log_epoch.as_deref(), Some(EPOCH), "Header.logEpoch");
    check!(
        header.reset_required,
        "resetRequired must be true: {header:?}"
    );
    check!(
        env.storage.get_client_record(P, "dev-a")?.is_none(),
        "reset response wrote a client record"
    );
    Ok(())
}

fn e005_push_without_epoch(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    let engine = env.engine()?;
    let mut req = env.insert_req("dev-a", "c1", "t1", "p1")?;
    req.header.log_epoch = None;
    run(&engine, "alice", req).expect_error("sync.invalid_request")?;
    check_eq!(env.max_seq()?, 0, "max_commit_seq");
    check!(
        env.storage.get_row(P, "tasks", "t1")?.is_none(),
        "t1 was applied"
    );
    Ok(())
}

fn e006_stale_epoch(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    let engine = env.engine()?;
    let mut req = env.insert_req("dev-a", "c1", "t1", "p1")?;
    req.header.log_epoch = Some("epoch-old".to_owned());
    let round = run(&engine, "alice", req);
    round.ok()?;
    check_eq!(
        round.frames(),
        ["RESP_HEADER", "END"],
        "reset response frames"
    );
    let header = round.header()?;
    check!(
        header.reset_required && header.log_epoch.as_deref() == Some(EPOCH),
        "expected resetRequired with the registry epoch, got {header:?}"
    );
    check_eq!(env.max_seq()?, 0, "max_commit_seq");
    Ok(())
}

fn e007_wire1_after_rotation(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    let engine = env.engine()?;
    let wire1 = |ccid: &str, payload: Vec<u8>| {
        let mut req = request("dev-a", None);
        req.wire_version = 1;
        req.pushes = vec![commit(ccid, vec![up("tasks", ccid, None, payload)])];
        req
    };
    let before = run(&engine, "alice", wire1("t1", env.task("t1", "p1")?));
    before.ok()?;
    expect_applied(before.result(0)?, PushResultStatus::Applied, 1)?;
    env.storage.rotate_partition_log_epoch(P, "epoch-2", NOW)?;
    run(&engine, "alice", wire1("t2", env.task("t2", "p1")?))
        .expect_error("sync.client_wire_unsupported")?;
    check_eq!(
        env.max_seq()?,
        1,
        "max_commit_seq after the refused request"
    );
    Ok(())
}

fn e008_command_client_id(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    let engine = env.engine()?;
    let req = push_req(
        r#"["remote-command","x","y"]"#,
        vec![commit(
            "c1",
            vec![up("tasks", "t1", None, env.task("t1", "p1")?)],
        )],
    );
    run(&engine, "alice", req).expect_error("sync.invalid_client_id")?;
    check_eq!(env.max_seq()?, 0, "max_commit_seq");
    Ok(())
}

fn e009_client_bound_to_actor(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    let engine = env.engine()?;
    env.storage.put_client_record(
        P,
        &ClientRecord {
            client_id: "dev-a".to_owned(),
            actor_id: "alice".to_owned(),
            wire_version: 2,
            cursor: -1,
            updated_at_ms: NOW,
            subscriptions: Vec::new(),
        },
    )?;
    let req = env.insert_req("dev-a", "c1", "t2", "p2")?;
    run(&engine, "bob", req).expect_error("sync.invalid_client_id")?;
    check_eq!(env.max_seq()?, 0, "max_commit_seq");
    check!(
        env.storage.get_row(P, "tasks", "t2")?.is_none(),
        "t2 was applied"
    );
    Ok(())
}

fn e010_operation_cap(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    let engine = env.engine()?;
    let mut commits = Vec::new();
    for (c, count) in [200, 200, 101].into_iter().enumerate() {
        let mut ops = Vec::new();
        for i in 0..count {
            let id = format!("t{c}-{i}");
            ops.push(up("tasks", &id, None, env.task(&id, "p1")?));
        }
        commits.push(commit(&format!("c{c}"), ops));
    }
    run(&engine, "alice", push_req("dev-a", commits.clone()))
        .expect_error("sync.too_many_operations")?;
    check_eq!(env.max_seq()?, 0, "max_commit_seq");
    // Exactly the cap is served.
    if let Some(last) = commits.last_mut() {
        last.operations.pop();
    }
    let round = run(&engine, "alice", push_req("dev-a", commits));
    round.ok()?;
    for (i, count) in [200, 200, 100].into_iter().enumerate() {
        expect_applied(round.result(i)?, PushResultStatus::Applied, count)?;
    }
    check_eq!(env.max_seq()?, 3, "max_commit_seq after 500 operations");
    Ok(())
}

fn e011_accept_bits(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    let engine = env.engine()?;
    let mut req = pull_req("dev-a", vec![sub_p1("s", -1)]);
    req.pull = Some(PullHeader {
        accept: 0b0100,
        ..PullHeader::default()
    });
    run(&engine, "alice", req).expect_error("sync.invalid_request")?;
    Ok(())
}

fn e012_duplicate_subscription(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    let engine = env.engine()?;
    let req = pull_req("dev-a", vec![sub_p1("a", -1), sub_p1("a", -1)]);
    run(&engine, "alice", req).expect_error("sync.invalid_subscription")?;
    check_eq!(env.resolver.calls(), 0, "resolver calls");
    Ok(())
}

fn e013_unknown_table(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    let engine = env.engine()?;
    let req = pull_req(
        "dev-a",
        vec![sub("s", "nope", &[("project_id", &["p1"])], -1)],
    );
    let round = run(&engine, "alice", req);
    let error = round.expect_error("sync.unknown_table")?;
    check_eq!(error.http_status, 400, "HTTP status");
    Ok(())
}

fn e014_bad_requested_scopes(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    let engine = env.engine()?;
    let undeclared = pull_req("dev-a", vec![sub("s", "tasks", &[("team", &["x"])], -1)]);
    run(&engine, "alice", undeclared).expect_error("sync.invalid_subscription")?;
    let wildcard = pull_req(
        "dev-a",
        vec![
            sub_p1("ok", -1),
            sub("s", "tasks", &[("project_id", &["*"])], -1),
        ],
    );
    run(&engine, "root", wildcard).expect_error("sync.invalid_subscription")?;
    Ok(())
}

fn e015_resolver_unknown_key(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    env.resolver
        .set(ResolverMode::Fixed(scope_map(&[("planet", &["x"])])));
    let engine = env.engine()?;
    let round = run(&engine, "alice", pull_req("dev-a", vec![sub_p1("s", -1)]));
    round.expect_error("sync.invalid_subscription")?;
    check_eq!(env.resolver.calls(), 1, "resolver calls");
    Ok(())
}

fn e016_invariants_before_touch(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    let engine = env.engine()?;
    let payload = env.task("t1", "p1")?;
    let mut no_payload = up("tasks", "t1", None, payload.clone());
    no_payload.payload = None;
    let mut delete_with_payload = del("tasks", "t1");
    delete_with_payload.payload = Some(payload);
    let cases = [
        (commit("c1", Vec::new()), "sync.empty_commit"),
        (commit("c1", vec![no_payload]), "sync.invalid_request"),
        (
            commit("c1", vec![delete_with_payload]),
            "sync.invalid_request",
        ),
    ];
    for (pushed, code) in cases {
        run_in(&engine, "N", "alice", push_req("dev-a", vec![pushed])).expect_error(code)?;
    }
    check!(
        env.storage.get_partition_log_epoch("N")?.is_none(),
        "partition N was touched by a request failing its frame invariants"
    );
    check!(
        env.ids.issued().is_empty(),
        "an id was drawn: {:?}",
        env.ids.issued()
    );
    Ok(())
}

fn e063_construction_refused(ctx: &mut Ctx<'_>) -> CheckResult {
    let v1 = std::sync::Arc::new(efix()?);
    let env = env(ctx)?;
    let unensured = ctx.open()?;
    let v2 = std::sync::Arc::new(efix_v2()?);
    let ahead = ctx.ensured(&v2)?;
    for (what, storage) in [("ensured at v2", ahead.clone()), ("unensured", unensured)] {
        match sync_engine::Engine::new(storage, v1.clone(), env.config()) {
            Err(EngineError::Config { .. }) => {}
            other => {
                return Err(Failure::new(format!(
                    "Engine::new on a storage {what}: expected Config, got {:?}",
                    other.map(|_| ())
                )))
            }
        }
    }
    // At its own version the same storage serves: the header, the push's
    // gate and the bootstrap page all carry the running version 2.
    let engine = sync_engine::Engine::new(ahead, v2.clone(), env.config())
        .map_err(|e| Failure::new(format!("Engine::new at v2: {e:?}")))?;
    let mut req = pull_req("dev-a", vec![sub_p1("s", -1)]);
    req.header.schema_version = 2;
    req.pushes = vec![commit(
        "c1",
        vec![up(
            "tasks",
            "t1",
            None,
            super::engine_fixture::task_payload(&v2, "t1", "p1", "at v2")?,
        )],
    )];
    let round = run(&engine, "alice", req);
    round.ok()?;
    check_eq!(
        round.header()?.latest_schema_version,
        Some(2),
        "latestSchemaVersion at v2"
    );
    expect_applied(round.result(0)?, PushResultStatus::Applied, 1)?;
    let section = round.section()?;
    let versions: Vec<i32> = section.pages.iter().map(|p| p.schema_version).collect();
    check_eq!(versions, vec![2], "the bootstrap page's schemaVersion");
    Ok(())
}
