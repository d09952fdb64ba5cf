//! Statements (each one round trip) a warm single-row push and a warm
//! engine round send, counted by the fault-injection feature's plan, which
//! every statement of the storage's connections passes: upper bounds, so
//! that a statement added to the hot paths fails here first. Counted after
//! a warm-up (the partition, the registry entry and the client exist).

mod common;

use std::sync::Arc;

use sync_conformance::fixtures;
use sync_core::fault::FaultPlan;
use sync_core::{
    NewChange, NewCommit, PushCommitOutcome, PushPreludeRequest, RoundEntryRequest, ServerStorage,
    StoredPushResult, StoredRow,
};
use sync_engine::{
    Engine, EngineConfig, Operation, PushCommit, PushResultStatus, ReqHeader, RequestContext,
    ResolveError, ResponseItem, ScopeMap, SyncRequest,
};
use sync_mariadb::scratch::ScratchDatabase;
use sync_mariadb::MariadbStorage;

/// A single-row push through the prelude, as the engine pushes.
const PRELUDE_PUSH: usize = 12;
/// A single-row push through the single calls (the raw client's sequence
/// plus the savepoint).
const SINGLE_CALL_PUSH: usize = 14;
/// An engine round carrying one single-row push.
const ENGINE_ROUND: usize = 14;
/// A round entry whose registry entry is fresh.
const ROUND_ENTRY: usize = 1;

fn open() -> (ScratchDatabase, Arc<MariadbStorage>) {
    let (db, storage) = common::fix1_storage();
    (db, Arc::new(storage))
}

/// The statements `f` sends through `storage`'s connections.
fn statements_of<T>(storage: &MariadbStorage, f: impl FnOnce() -> T) -> (T, Vec<String>) {
    let plan = FaultPlan::count_only();
    storage.set_fault_plan(Some(Arc::clone(&plan)));
    let out = f();
    storage.set_fault_plan(None);
    (out, plan.statement_log())
}

fn task(id: &str) -> StoredRow {
    let schema = fixtures::fix1().expect("fix1");
    fixtures::task(&schema, id, "p1", id).expect("task")
}

fn commit(ccid: &str, row: &StoredRow) -> NewCommit {
    NewCommit {
        client_id: "c1".into(),
        client_commit_id: ccid.into(),
        actor_id: "actor:c1".into(),
        created_at_ms: 1_700_000_000_000,
        changes: vec![NewChange::upsert(
            "tasks",
            row.row_id.clone(),
            row.server_version,
            row.scopes.clone(),
            row.payload.clone(),
        )],
    }
}

/// The engine's storage sequence of one push: the prelude, the row, the
/// commit, the result, `commit_push`.
fn prelude_push(storage: &MariadbStorage, ccid: &str) {
    let row = task(&format!("row-{ccid}"));
    let mut tx = storage.begin("acme").expect("begin");
    let request = PushPreludeRequest {
        running_schema_version: 1,
        client_id: "c1".into(),
        client_commit_id: ccid.into(),
        rows: vec![("tasks".into(), vec![row.row_id.clone()])],
        deferred_violations: true,
    };
    let prelude = tx.begin_push(&request).expect("prelude");
    assert_eq!(prelude.push_result.expect("no result"), None);
    tx.upsert_row("tasks", &row, Some(0)).expect("upsert");
    let seq = tx.append_commit(&commit(ccid, &row)).expect("append");
    tx.put_push_result("c1", ccid, &StoredPushResult::applied(seq))
        .expect("result");
    let outcome = tx
        .commit_push("c1", ccid, &|_| StoredPushResult::applied(0))
        .expect("commit");
    assert_eq!(outcome, PushCommitOutcome::Committed);
}

/// The standard push sequence of single calls (the bench's W1).
fn single_call_push(storage: &MariadbStorage, ccid: &str) {
    let row = task(&format!("row-{ccid}"));
    let mut tx = storage.begin("acme").expect("begin");
    tx.lock_partition_for_push().expect("lock");
    let gate = tx.read_serve_gate(1).expect("gate");
    assert_eq!(gate.stored_schema_version, 1);
    assert_eq!(tx.get_push_result("c1", ccid).expect("read"), None);
    tx.upsert_row("tasks", &row, Some(0)).expect("upsert");
    let seq = tx.append_commit(&commit(ccid, &row)).expect("append");
    tx.put_push_result("c1", ccid, &StoredPushResult::applied(seq))
        .expect("result");
    tx.commit().expect("commit");
}

fn assert_at_most(what: &str, log: &[String], bound: usize) {
    assert!(
        log.len() <= bound,
        "{what}: {} statements, at most {bound} expected:\n{log:#?}",
        log.len()
    );
}

#[test]
fn a_single_row_push_through_the_prelude() {
    let (_db, storage) = open();
    prelude_push(&storage, "warm-up");
    let ((), log) = statements_of(&storage, || prelude_push(&storage, "measured"));
    assert_at_most("prelude push", &log, PRELUDE_PUSH);
}

#[test]
fn a_single_row_push_through_the_single_calls() {
    let (_db, storage) = open();
    single_call_push(&storage, "warm-up");
    let ((), log) = statements_of(&storage, || single_call_push(&storage, "measured"));
    assert_at_most("single-call push", &log, SINGLE_CALL_PUSH);
}

#[test]
fn a_round_entry_with_a_fresh_registry_entry() {
    let (_db, storage) = open();
    let request = RoundEntryRequest {
        partition: "acme".into(),
        authenticated_at_ms: 1_700_000_000_000,
        initial_log_epoch: "epoch-1".into(),
        refresh_after_ms: 1_000,
        running_schema_version: 1,
        client_id: "c1".into(),
        client_commit_ids: vec!["k1".into(), "k2".into(), "k3".into()],
        log_bounds: true,
    };
    storage.enter_round(&request).expect("warm-up");
    let (entry, log) = statements_of(&storage, || storage.enter_round(&request));
    entry.expect("entry");
    assert_at_most("round entry", &log, ROUND_ENTRY);
}

fn allow_all(_: &str, _: &str, _: &str) -> Result<ScopeMap, ResolveError> {
    Ok(ScopeMap::from([(
        "project_id".to_owned(),
        vec!["*".to_owned()],
    )]))
}

fn push_request(epoch: &str, ccid: &str) -> SyncRequest {
    let row = task(&format!("row-{ccid}"));
    SyncRequest {
        wire_version: 2,
        header: ReqHeader {
            client_id: "c1".into(),
            schema_version: 1,
            log_epoch: Some(epoch.to_owned()),
        },
        pushes: vec![PushCommit {
            client_commit_id: ccid.into(),
            operations: vec![Operation::upsert("tasks", row.row_id, None, row.payload)],
        }],
        pull: None,
        subscriptions: Vec::new(),
    }
}

#[test]
fn an_engine_round_with_one_single_row_push() {
    let (_db, storage) = open();
    let schema = Arc::new(fixtures::fix1().expect("fix1"));
    let engine = Engine::new(
        Arc::clone(&storage) as Arc<dyn ServerStorage>,
        schema,
        EngineConfig::new(Arc::new(allow_all)),
    )
    .expect("engine");
    let ctx = RequestContext::new("acme", "actor:c1");
    let round = |request: &SyncRequest| -> Vec<ResponseItem> {
        let mut items = Vec::new();
        let outcome = engine.handle(&ctx, request, &mut items).expect("round");
        assert!(outcome.error.is_none(), "{:?}", outcome.error);
        items
    };
    // First contact: the partition's epoch.
    let mut first = push_request("", "none");
    first.header.log_epoch = None;
    first.pushes.clear();
    first.pull = Some(sync_engine::PullHeader::default());
    let epoch = match round(&first).first() {
        Some(ResponseItem::Header(header)) => header.log_epoch.clone().expect("epoch"),
        other => panic!("no header: {other:?}"),
    };
    round(&push_request(&epoch, "warm-up"));
    let (items, log) = statements_of(&storage, || round(&push_request(&epoch, "measured")));
    match items.get(1) {
        Some(ResponseItem::PushResult(r)) => assert_eq!(r.status, PushResultStatus::Applied),
        other => panic!("no push result: {other:?}"),
    }
    assert_at_most("engine round", &log, ENGINE_ROUND);
}
