//! The round's batch methods, C-347 and C-348 (beyond the checklist;
//! `docs/decisions.md`): `enter_round` reads what `touch_partition`,
//! `read_serve_gate`, `get_client_record` and `get_push_result` read when
//! called in that order, whether a dialect batches them or not; a client
//! record staged in a push transaction is written by its commit exactly as
//! `put_client_record` writes it, and by nothing else; the engine stores a
//! push-only round's record on both paths, staged or written after.

use sync_core::{
    ClientRecord, ClientSubscription, ErrorCode, LogBounds, PartitionRegistryEntry,
    Result as StorageResult, RoundEntryRequest, ServerStorage, StoredPushResult,
};

use std::sync::Arc;

use sync_engine::{PullHeader, PushResultStatus, ResponseItem};

use super::engine_busy::BusyScans;
use super::engine_fixture::P as P_ENGINE;
use super::engine_round::{
    build, commit, env, expect_applied, pull_req, push_req, run, sub_p1, up,
};
use crate::check::{expect_code, CheckDef, CheckResult};
use crate::checks::support_pdata::{append_empty, EPOCH, P};
use crate::context::{Ctx, NOW};
use crate::fixtures::fix1;
use crate::registry::check;
use crate::{check, check_eq};

/// Group name.
pub(crate) const GROUP: &str = "round_entry";

/// The checks of this group.
pub(crate) const CHECKS: &[CheckDef] = &[
    check(
        GROUP,
        "C-347",
        "enter_round returns what touch_partition, read_serve_gate, get_client_record and get_push_result return in that order (first contact, refresh, refresh interval, unreadable result, bad input)",
        c347_enter_round_matches_the_single_reads,
    ),
    check(
        GROUP,
        "C-348",
        "a client record staged in a push transaction is stored by its commit as put_client_record stores it, and not at all by a rollback or an empty client id",
        c348_staged_client_record,
    ),
    check(
        GROUP,
        "C-350",
        "an engine round rewrites a client record that changes in nothing but its time only when the stored time is older than activity_refresh_ms; a changed record always",
        c350_unchanged_record_refresh,
    ),
    check(
        GROUP,
        "C-351",
        "a round that pushes and pulls reads its pull's bounds after its pushes: the section delivers the round's own commit and ends at the new head",
        c351_push_then_pull_sees_the_push,
    ),
    check(
        GROUP,
        "C-349",
        "a push-only engine round stores its client record whether or not the storage's transactions stage it; only its last push's transaction is asked to",
        c349_push_only_round_stores_the_record,
    ),
];

const CLIENT: &str = "client-1";

fn request(at_ms: i64, epoch: &str, running: i32, ids: &[&str]) -> RoundEntryRequest {
    RoundEntryRequest {
        partition: P.to_owned(),
        authenticated_at_ms: at_ms,
        initial_log_epoch: epoch.to_owned(),
        refresh_after_ms: 0,
        running_schema_version: running,
        client_id: CLIENT.to_owned(),
        client_commit_ids: ids.iter().map(|id| (*id).to_owned()).collect(),
        log_bounds: true,
    }
}

/// The log bounds as the single reads return them.
fn single_bounds(storage: &dyn ServerStorage, partition: &str) -> CheckResult<LogBounds> {
    Ok(LogBounds {
        max_commit_seq: storage.get_max_commit_seq(partition)?,
        horizon_seq: storage.get_horizon_seq(partition)?,
    })
}

/// A push-result read as comparable text: the result, or the error code.
fn shown(read: &StorageResult<Option<StoredPushResult>>) -> String {
    match read {
        Ok(found) => format!("{found:?}"),
        Err(error) => error.code().as_str().to_owned(),
    }
}

fn single_reads(storage: &dyn ServerStorage, ids: &[&str]) -> Vec<String> {
    ids.iter()
        .map(|id| shown(&storage.get_push_result(P, CLIENT, id)))
        .collect()
}

fn c347_enter_round_matches_the_single_reads(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let running = schema.version;
    let storage = ctx.ensured(&schema)?;
    let ids = ["cc-1", "cc-2", "cc-bad", "cc-1"];

    // First contact: registers the partition with the given epoch.
    let first = storage.enter_round(&request(NOW, EPOCH, running, &ids))?;
    let registered = PartitionRegistryEntry {
        partition: P.to_owned(),
        log_epoch: EPOCH.to_owned(),
        epoch_required: false,
        last_authenticated_at_ms: NOW,
    };
    check_eq!(
        first.registry,
        registered,
        "registry entry of a first contact"
    );
    check_eq!(
        storage.list_partition_registry()?,
        vec![registered],
        "stored registry after a first contact"
    );
    check_eq!(
        first.gate,
        storage.read_serve_gate(P, running)?,
        "gate of a first contact"
    );
    check_eq!(first.client_record, None, "record of an unknown client");
    check_eq!(
        first.log_bounds,
        Some(LogBounds::default()),
        "log bounds of a partition without commits"
    );
    let none: Vec<String> = ids.iter().map(|_| "None".to_owned()).collect();
    check_eq!(
        first.push_results.iter().map(shown).collect::<Vec<_>>(),
        none,
        "push results before any is stored"
    );

    // A known client, stored results (one unreadable), a pending checkpoint.
    let record = ClientRecord {
        client_id: CLIENT.to_owned(),
        actor_id: "actor-1".to_owned(),
        wire_version: 2,
        cursor: 7,
        updated_at_ms: NOW,
        subscriptions: Vec::new(),
    };
    storage.put_client_record(P, &record)?;
    let mut tx = storage.begin(P)?;
    tx.put_push_result(CLIENT, "cc-1", &StoredPushResult::applied(3))?;
    tx.commit()?;
    ctx.raw()?
        .set_push_result_text(P, CLIENT, "cc-bad", "not json")?;
    storage.declare_checkpoint(P, "entry_backfill", running, NOW)?;
    append_empty(storage.as_ref(), P, 3)?;
    storage.set_horizon_seq(P, 2)?;

    let second = storage.enter_round(&request(NOW + 500, "epoch-other", running, &ids))?;
    let refreshed = PartitionRegistryEntry {
        last_authenticated_at_ms: NOW + 500,
        ..storage.list_partition_registry()?.remove(0)
    };
    check_eq!(
        second.registry,
        PartitionRegistryEntry {
            partition: P.to_owned(),
            log_epoch: EPOCH.to_owned(),
            epoch_required: false,
            last_authenticated_at_ms: NOW + 500,
        },
        "registry entry of a refresh (the stored epoch wins)"
    );
    check_eq!(
        storage.list_partition_registry()?,
        vec![refreshed],
        "stored registry after a refresh"
    );
    let gate = storage.read_serve_gate(P, running)?;
    check_eq!(
        gate.pending,
        vec!["entry_backfill".to_owned()],
        "the single gate read lists the pending checkpoint"
    );
    check_eq!(second.gate, gate, "gate after a refresh");
    check_eq!(
        second.client_record,
        Some(record),
        "record of a known client"
    );
    check_eq!(
        second.log_bounds,
        Some(single_bounds(storage.as_ref(), P)?),
        "log bounds as get_max_commit_seq and get_horizon_seq read them"
    );
    check_eq!(
        second.log_bounds.map(|b| (b.max_commit_seq, b.horizon_seq)),
        Some((3, 2)),
        "log bounds after three commits and a horizon"
    );
    // Not asked for: absent, or (a dialect may return them unasked) right.
    let mut unasked = request(NOW + 500, EPOCH, running, &[]);
    unasked.log_bounds = false;
    let unasked = storage.enter_round(&unasked)?;
    if let Some(bounds) = unasked.log_bounds {
        check_eq!(
            bounds,
            single_bounds(storage.as_ref(), P)?,
            "log bounds returned unasked"
        );
    }
    check_eq!(
        second.push_results.iter().map(shown).collect::<Vec<_>>(),
        single_reads(storage.as_ref(), &ids),
        "push results as get_push_result reads them, in the request's order"
    );
    check_eq!(
        shown(&second.push_results[2]),
        ErrorCode::IdempotencyCacheMiss.as_str().to_owned(),
        "an unreadable stored result"
    );

    // With a refresh interval a fresh entry may come back as stored (or be
    // refreshed); a stale one is refreshed; stored and returned agree.
    let mut within = request(NOW + 900, EPOCH, running, &[]);
    within.refresh_after_ms = 1_000;
    let third = storage.enter_round(&within)?;
    let stamp = third.registry.last_authenticated_at_ms;
    if stamp != NOW + 500 && stamp != NOW + 900 {
        return Err(crate::Failure::new(format!(
            "an entry inside the refresh interval came back at {stamp}, neither as stored nor refreshed"
        )));
    }
    check_eq!(
        storage.list_partition_registry()?[0].last_authenticated_at_ms,
        stamp,
        "stored entry inside the refresh interval"
    );
    check_eq!(
        third.gate,
        storage.read_serve_gate(P, running)?,
        "gate inside the refresh interval"
    );
    let mut after = request(NOW + 2_000, EPOCH, running, &[]);
    after.refresh_after_ms = 1_000;
    let fourth = storage.enter_round(&after)?;
    check_eq!(
        fourth.registry.last_authenticated_at_ms,
        NOW + 2_000,
        "an entry older than the refresh interval is refreshed"
    );
    check_eq!(
        storage.list_partition_registry()?[0].last_authenticated_at_ms,
        NOW + 2_000,
        "stored entry after the interval"
    );
    let mut first_contact = request(NOW + 3_000, "epoch-2", running, &[]);
    first_contact.partition = "part-2".to_owned();
    first_contact.refresh_after_ms = 1_000;
    let fifth = storage.enter_round(&first_contact)?;
    check_eq!(
        fifth.registry.log_epoch,
        "epoch-2".to_owned(),
        "a first contact with a refresh interval registers"
    );
    check_eq!(
        fifth.gate,
        storage.read_serve_gate("part-2", running)?,
        "gate of a first contact with a refresh interval"
    );

    // Bad input is refused before anything is written.
    let mut bad = request(NOW + 900, "", running, &[]);
    bad.partition = "part-new".to_owned();
    expect_code(
        storage.enter_round(&bad),
        ErrorCode::InvalidLogEpoch,
        "an empty initial epoch",
    )?;
    let mut negative = request(NOW + 900, EPOCH, -1, &[]);
    negative.partition = "part-new".to_owned();
    if storage.enter_round(&negative).is_ok() {
        return Err(crate::Failure::new(
            "a negative running version was accepted",
        ));
    }
    check_eq!(
        storage.list_partitions()?,
        vec![P.to_owned(), "part-2".to_owned()],
        "no partition registered by refused entries"
    );
    Ok(())
}

fn c348_staged_client_record(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.ensured(&fix1()?)?;
    storage.touch_partition(P, NOW, EPOCH)?;
    let record = |client_id: &str, cursor: i64| ClientRecord {
        client_id: client_id.to_owned(),
        actor_id: "actor-1".to_owned(),
        wire_version: 2,
        cursor,
        updated_at_ms: NOW + cursor,
        subscriptions: vec![ClientSubscription {
            id: "sub-1".to_owned(),
            table: "tasks".to_owned(),
            scopes: [(
                "project_id".to_owned(),
                vec!["p1".to_owned(), "it's".to_owned()],
            )]
            .into_iter()
            .collect(),
        }],
    };

    // Staged, then committed with a push: stored as put_client_record would.
    let first = record("client-staged", 5);
    let mut tx = storage.begin(P)?;
    tx.lock_partition_for_push()?;
    let staged = tx.stage_client_record(&first)?;
    tx.put_push_result("client-staged", "cc-1", &StoredPushResult::applied(1))?;
    tx.commit()?;
    if !staged {
        // The dialect leaves the write to the caller: nothing is stored.
        check_eq!(
            storage.get_client_record(P, "client-staged")?,
            None,
            "a record the dialect declined to stage"
        );
        return Ok(());
    }
    check_eq!(
        storage.get_client_record(P, "client-staged")?,
        Some(first.clone()),
        "the staged record after the commit"
    );
    storage.put_client_record(P, &record("client-put", 5))?;
    check_eq!(
        storage
            .get_client_record(P, "client-put")?
            .map(|r| r.subscriptions),
        Some(first.subscriptions.clone()),
        "put_client_record stores the same subscriptions"
    );

    // A replacement staged in a transaction that rolls back changes nothing.
    let mut tx = storage.begin(P)?;
    tx.lock_partition_for_push()?;
    tx.stage_client_record(&record("client-staged", 9))?;
    tx.rollback()?;
    check_eq!(
        storage.get_client_record(P, "client-staged")?,
        Some(first.clone()),
        "the record after a rolled-back replacement"
    );

    // A replacement committed replaces the whole record.
    let replacement = ClientRecord {
        subscriptions: Vec::new(),
        ..record("client-staged", 11)
    };
    let mut tx = storage.begin(P)?;
    tx.lock_partition_for_push()?;
    tx.stage_client_record(&replacement)?;
    tx.commit()?;
    check_eq!(
        storage.get_client_record(P, "client-staged")?,
        Some(replacement),
        "the record after a committed replacement"
    );

    // An empty client id is refused as put_client_record refuses it.
    let mut tx = storage.begin(P)?;
    tx.lock_partition_for_push()?;
    expect_code(
        tx.stage_client_record(&record("", 1)),
        ErrorCode::InvalidArgument,
        "an empty client id",
    )?;
    tx.rollback()?;
    Ok(())
}

fn c349_push_only_round_stores_the_record(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    // Through the dialect itself (it may stage the record in the push), then
    // through a wrapper whose transactions keep the default (no staging):
    // the engine writes the record after the round instead.
    let declining: Arc<dyn ServerStorage> = Arc::new(BusyScans::new(env.storage.clone()));
    let paths = [
        ("dev-a", "t1", env.engine()?, "the dialect"),
        (
            "dev-b",
            "t2",
            build(declining, env.schema.clone(), env.config())?,
            "a storage that does not stage",
        ),
    ];
    for (client, row, engine, through) in paths {
        let req = env.insert_req(client, "c1", row, "p1")?;
        expect_applied(
            run(&engine, "alice", req).result(0)?,
            PushResultStatus::Applied,
            1,
        )?;
        let stored = env.storage.get_client_record(P_ENGINE, client)?;
        check!(
            stored
                .as_ref()
                .is_some_and(|r| r.actor_id == "alice" && r.cursor == -1 && r.wire_version == 2),
            "the record of a push-only round through {through}: {stored:?}"
        );
    }
    which_transaction_is_asked_to_stage(&env)
}

/// A push-only round asks its last push's transaction, and only that one,
/// to stage the record; a round with a pull asks none (the pull's cursors
/// come after the pushes).
fn which_transaction_is_asked_to_stage(env: &super::engine_round::Env) -> CheckResult {
    for (client, with_pull, expected) in [("dev-c", false, vec![1]), ("dev-d", true, vec![])] {
        let wrapper = Arc::new(BusyScans::new(env.storage.clone()));
        let storage: Arc<dyn ServerStorage> = wrapper.clone();
        let engine = build(storage, env.schema.clone(), env.config())?;
        let commits = ["s1", "s2"]
            .into_iter()
            .map(|id| {
                let row = format!("{client}-{id}");
                Ok(commit(
                    id,
                    vec![up("tasks", &row, None, env.task(&row, "p1")?)],
                ))
            })
            .collect::<CheckResult<Vec<_>>>()?;
        let req = if with_pull {
            let mut req = pull_req(client, vec![sub_p1("s", -1)]);
            req.pushes = commits;
            req
        } else {
            push_req(client, commits)
        };
        let round = run(&engine, "alice", req);
        round.ok()?;
        check_eq!(
            wrapper.stage_requests(),
            expected,
            "the transactions asked to stage the record (pull: {with_pull})"
        );
    }
    Ok(())
}

fn c350_unchanged_record_refresh(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    let clock = env.clock.clone();
    let engine = env.engine_with(|c| c.activity_refresh_ms = 1_000)?;
    let stamp = |what: &str| -> CheckResult<i64> {
        env.storage
            .get_client_record(P_ENGINE, "dev-a")?
            .map(|r| r.updated_at_ms)
            .ok_or_else(|| crate::Failure::new(format!("no client record {what}")))
    };
    let pull = |id: &str| pull_req("dev-a", vec![sub_p1(id, 0)]);
    // (advance the clock by, subscription, stored time expected, what)
    let steps = [
        (0, "s1", NOW, "the first record"),
        (
            400,
            "s1",
            NOW,
            "an unchanged record inside the interval is not rewritten",
        ),
        (
            700,
            "s1",
            NOW + 1_100,
            "an unchanged record older than the interval is rewritten",
        ),
        (
            100,
            "s2",
            NOW + 1_200,
            "a changed record is written at once",
        ),
    ];
    for (advance, subscription, expected, what) in steps {
        clock.advance(advance);
        run(&engine, "alice", pull(subscription)).ok()?;
        check_eq!(stamp(what)?, expected, "{what}");
    }
    check_eq!(
        env.storage.get_client_record(P_ENGINE, "dev-a")?.map(|r| r
            .subscriptions
            .into_iter()
            .map(|s| s.id)
            .collect::<Vec<_>>()),
        Some(vec!["s2".to_owned()]),
        "the changed subscription list"
    );
    let every_round = env.engine_with(|c| c.activity_refresh_ms = 0)?;
    clock.advance(1);
    run(&every_round, "alice", pull("s2")).ok()?;
    check_eq!(
        stamp("with interval 0")?,
        NOW + 1_201,
        "interval 0 rewrites on every round (engine.md 5.8 as written)"
    );
    Ok(())
}

fn c351_push_then_pull_sees_the_push(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    let engine = env.engine()?;
    let mut req = env.insert_req("dev-a", "c1", "t1", "p1")?;
    req.pull = Some(PullHeader::default());
    req.subscriptions = vec![sub_p1("s1", 0)];
    let round = run(&engine, "alice", req);
    round.ok()?;
    expect_applied(round.result(0)?, PushResultStatus::Applied, 1)?;
    let head = env.max_seq()?;
    let next = round.items.iter().find_map(|item| match item {
        ResponseItem::SubEnd(end) => Some(end.next_cursor),
        _ => None,
    });
    check_eq!(
        next,
        Some(head),
        "the section's nextCursor after the round's push"
    );
    check!(
        round
            .items
            .iter()
            .any(|item| matches!(item, ResponseItem::Commit(c) if c.commit_seq == head)),
        "the round's own commit {head} was not delivered by its pull: {:?}",
        round.items
    );
    Ok(())
}
