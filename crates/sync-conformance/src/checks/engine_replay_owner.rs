//! `engine.md` §8 item 7: a stored push result is answered only to the
//! actor that pushed it (E-093).

use sync_core::{PushOperationResult, ServerStorage, StoredPushResult};
use sync_engine::{
    Engine, PullHeader, PushResultStatus, RequestContext, ResponseItem, Sink, SinkError,
};

use super::engine_entry::GROUP;
use super::engine_fixture::{seed_task, P};
use super::engine_round::{commit, env, expect_applied, expect_conflict, push_req, run, up};
use crate::check::{CheckDef, CheckResult, Failure};
use crate::context::Ctx;
use crate::registry::check;
use crate::{check, check_eq};

/// The checks of this file.
pub(crate) const CHECKS: &[CheckDef] = &[check(
    GROUP,
    "E-093",
    "a stored result is answered only to the actor that pushed it; one without its actor only on a client id bound to the round's actor",
    e093_replay_by_another_actor,
)];

/// A client that disconnects when its first push result arrives: the
/// round stops after storing the result and before its client record.
#[derive(Default)]
struct GoneAtFirstResult {
    items: Vec<ResponseItem>,
}

impl Sink for GoneAtFirstResult {
    fn emit(&mut self, item: ResponseItem) -> Result<(), SinkError> {
        if matches!(item, ResponseItem::PushResult(_)) {
            return Err(SinkError {
                reason: "client disconnected".to_owned(),
            });
        }
        self.items.push(item);
        Ok(())
    }
}

/// Runs alice's round on `dev-a` into a sink that fails at the result.
fn alice_disconnects(engine: &Engine, req: &sync_engine::SyncRequest) -> CheckResult {
    let mut sink = GoneAtFirstResult::default();
    let result = engine.handle(&RequestContext::new(P, "alice"), req, &mut sink);
    check!(
        matches!(result, Err(sync_engine::EngineError::Sink(_))),
        "alice's round should stop at the sink, got {result:?}"
    );
    Ok(())
}

fn no_record(storage: &dyn ServerStorage, when: &str) -> CheckResult {
    no_record_of(storage, "dev-a", when)
}

fn no_record_of(storage: &dyn ServerStorage, client: &str, when: &str) -> CheckResult {
    let record = storage.get_client_record(P, client)?;
    check!(
        record.is_none(),
        "client record of {client} {when}: {record:?}"
    );
    Ok(())
}

fn e093_replay_by_another_actor(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    seed_task(env.storage.as_ref(), &env.schema, "t1", "p1", 3)?;
    let engine = env.engine()?;
    let conflicting = commit(
        "c1",
        vec![up("tasks", "t1", Some(1), env.task("t1", "p1")?)],
    );
    let applied = commit("c2", vec![up("tasks", "t2", None, env.task("t2", "p1")?)]);
    alice_disconnects(&engine, &push_req("dev-a", vec![conflicting.clone()]))?;
    // With a pull the record is written after the pull, not staged in the
    // push's transaction (which a round without a pull may do).
    let mut with_pull = push_req("dev-a", vec![applied.clone()]);
    with_pull.pull = Some(PullHeader::default());
    alice_disconnects(&engine, &with_pull)?;
    no_record(env.storage.as_ref(), "after alice's interrupted rounds")?;
    let max_seq = env.max_seq()?;

    let replay = push_req("dev-a", vec![conflicting.clone(), applied.clone()]);
    let mallory = run(&engine, "mallory", replay.clone());
    mallory.ok()?;
    for (i, ccid) in ["c1", "c2"].into_iter().enumerate() {
        let r = mallory.result(i)?;
        let expected = sync_engine::PushResult {
            client_commit_id: ccid.to_owned(),
            status: PushResultStatus::Rejected,
            commit_seq: None,
            results: vec![PushOperationResult::Error {
                op_index: 0,
                code: "sync.invalid_client_id".to_owned(),
                message: match &r.results[..] {
                    [PushOperationResult::Error { message, .. }] => message.clone(),
                    _ => String::new(),
                },
                retryable: false,
                details: None,
            }],
        };
        check_eq!(r, &expected, "mallory's replay of {ccid}");
    }
    no_record(env.storage.as_ref(), "after mallory's replay")?;
    check_eq!(env.max_seq()?, max_seq, "max_commit_seq after mallory");

    let alice = run(&engine, "alice", replay);
    alice.ok()?;
    let (version, _) = expect_conflict(alice.result(0)?, 0)?;
    check_eq!(version, 3, "alice's replayed conflict serverVersion");
    expect_applied(alice.result(1)?, PushResultStatus::Cached, 1)?;
    let record = env
        .storage
        .get_client_record(P, "dev-a")?
        .ok_or_else(|| Failure::new("alice's round wrote no client record"))?;
    check_eq!(record.actor_id, "alice", "dev-a bound to");
    legacy_results(
        &engine,
        env.storage.as_ref(),
        &env.task("t3", "p1")?,
        max_seq,
    )?;
    let fresh = commit("k2", vec![up("tasks", "t4", None, env.task("t4", "p2")?)]);
    a_foreign_replay_stages_no_record(&engine, env.storage.as_ref(), conflicting, fresh)
}

/// A round without a pull whose last push is fresh and applies, after a
/// replay of another actor's result under the same client id: that push's
/// transaction stages no client record, so `dev-c` stays bound to nobody.
fn a_foreign_replay_stages_no_record(
    engine: &Engine,
    storage: &dyn ServerStorage,
    alices: sync_engine::PushCommit,
    fresh: sync_engine::PushCommit,
) -> CheckResult {
    alice_disconnects(engine, &push_req("dev-c", vec![alices.clone()]))?;
    no_record_of(storage, "dev-c", "after alice's interrupted round")?;
    let bob = run(engine, "bob", push_req("dev-c", vec![alices, fresh]));
    bob.ok()?;
    let r = bob.result(0)?;
    check!(
        matches!(&r.results[..], [PushOperationResult::Error { code, .. }] if code == "sync.invalid_client_id"),
        "bob's replay of alice's result on dev-c: {r:?}"
    );
    expect_applied(bob.result(1)?, PushResultStatus::Applied, 1)?;
    no_record_of(
        storage,
        "dev-c",
        "after bob's fresh push behind a foreign replay",
    )
}

/// A stored result without its actor (written before results carried one)
/// is answered only where the client id is already bound to the round's
/// actor: `dev-a` is bound to alice by now, `dev-b` to nobody.
fn legacy_results(
    engine: &Engine,
    storage: &dyn ServerStorage,
    payload: &[u8],
    seq: i64,
) -> CheckResult {
    let mut tx = storage.begin(P)?;
    for client in ["dev-a", "dev-b"] {
        tx.put_push_result(client, "old", &StoredPushResult::applied(seq))?;
    }
    tx.commit()?;
    let replay = |client: &str| {
        let old = commit("old", vec![up("tasks", "t3", None, payload.to_vec())]);
        run(engine, "alice", push_req(client, vec![old]))
    };
    let bound = replay("dev-a");
    bound.ok()?;
    let r = bound.result(0)?;
    check_eq!(
        (r.status, r.commit_seq),
        (PushResultStatus::Cached, Some(seq)),
        "alice's replay of an actor-less result on dev-a, bound to her"
    );
    let unbound = replay("dev-b");
    unbound.ok()?;
    let r = unbound.result(0)?;
    check!(
        r.status == PushResultStatus::Rejected
            && r.commit_seq.is_none()
            && matches!(&r.results[..], [PushOperationResult::Error { code, .. }] if code == "sync.invalid_client_id"),
        "alice's replay of an actor-less result on dev-b, bound to nobody: {r:?}"
    );
    no_record_of(storage, "dev-b", "after the replay on an unbound client id")?;
    check!(
        storage.get_row(P, "tasks", "t3")?.is_none(),
        "a replay applied its commit"
    );
    Ok(())
}
