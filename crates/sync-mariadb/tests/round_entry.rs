//! The round entry in one statement (`enter_round`) answers what the
//! single methods called in the contract's order answer (touch, gate,
//! client record, each push result, log bounds): two databases get the
//! same state, one answers through `enter_round`, the other through the
//! single calls, for an unregistered partition, a registered one with a
//! client record, stored, missing, repeated, overlong and unreadable push
//! results, a pending checkpoint, a rotated epoch and an open migration,
//! with and without log bounds. With a refresh interval a fresh registry
//! entry is returned as stored and not written, a stale or missing one is
//! touched.

mod common;

use mysql::prelude::Queryable;
use sync_conformance::fixtures::{self, Op, PushOutcome};
use sync_core::{
    ClientRecord, ClientSubscription, ErrorCode, LogBounds, PartitionRegistryEntry,
    RoundEntryRequest, ServeGate, ServerStorage, StoredPushResult,
};
use sync_mariadb::scratch::ScratchDatabase;
use sync_mariadb::MariadbStorage;

const T0: i64 = 1_700_000_000_000;

struct World {
    db: ScratchDatabase,
    storage: MariadbStorage,
}

fn world() -> World {
    let (db, storage) = common::fix1_storage();
    World { db, storage }
}

/// The state every comparison starts from, built alike in each world.
fn seed(w: &World) {
    let s = &w.storage;
    let schema = fixtures::fix1().expect("fix1");
    s.touch_partition("busy", T0, "epoch-busy").expect("touch");
    for ccid in ["k1", "k2"] {
        let row = fixtures::task(&schema, &format!("row-{ccid}"), "p1", ccid).expect("row");
        let pushed = fixtures::push(s, "busy", "c1", ccid, &[Op::upsert("tasks", row)]);
        assert!(matches!(pushed, Ok(PushOutcome::Applied(_))), "{pushed:?}");
    }
    s.put_client_record(
        "busy",
        &ClientRecord {
            client_id: "c1".into(),
            actor_id: "actor:c1".into(),
            wire_version: 2,
            cursor: 2,
            updated_at_ms: T0,
            subscriptions: vec![ClientSubscription {
                id: "s1".into(),
                table: "tasks".into(),
                scopes: [("project_id".to_owned(), vec!["p1".to_owned()])].into(),
            }],
        },
    )
    .expect("client record");
    w.db.raw()
        .expect("raw")
        .exec_drop(
            "INSERT INTO `sync_push_results` (`partition`, `client_id`, `client_commit_id`, \
             `result`) VALUES ('busy', 'c1', 'unreadable', '{not json')",
            (),
        )
        .expect("an unreadable result");
    s.touch_partition("pending", T0, "epoch-pending")
        .expect("touch");
    s.declare_checkpoint("pending", "backfill-a", 1, T0)
        .expect("declare");
    s.touch_partition("rotated", T0, "epoch-old")
        .expect("touch");
    s.rotate_partition_log_epoch("rotated", "epoch-new", T0)
        .expect("rotate");
}

/// A comparable answer: errors by code.
#[derive(Debug, PartialEq)]
struct Answer {
    registry: PartitionRegistryEntry,
    gate: ServeGate,
    client_record: Option<ClientRecord>,
    push_results: Vec<Result<Option<StoredPushResult>, ErrorCode>>,
    log_bounds: Option<LogBounds>,
}

fn batched(s: &MariadbStorage, r: &RoundEntryRequest) -> Answer {
    let entry = s.enter_round(r).expect("enter_round");
    Answer {
        registry: entry.registry,
        gate: entry.gate,
        client_record: entry.client_record,
        push_results: entry
            .push_results
            .into_iter()
            .map(|p| p.map_err(|e| e.code()))
            .collect(),
        log_bounds: entry.log_bounds,
    }
}

/// The single methods in the order of the contract.
fn single_calls(s: &MariadbStorage, r: &RoundEntryRequest) -> Answer {
    let p = r.partition.as_str();
    let registry = s
        .touch_partition(p, r.authenticated_at_ms, &r.initial_log_epoch)
        .expect("touch");
    let gate = s
        .read_serve_gate(p, r.running_schema_version)
        .expect("gate");
    let client_record = s.get_client_record(p, &r.client_id).expect("record");
    let push_results = r
        .client_commit_ids
        .iter()
        .map(|id| s.get_push_result(p, &r.client_id, id).map_err(|e| e.code()))
        .collect();
    let log_bounds = r.log_bounds.then(|| LogBounds {
        max_commit_seq: s.get_max_commit_seq(p).expect("max"),
        horizon_seq: s.get_horizon_seq(p).expect("horizon"),
    });
    Answer {
        registry,
        gate,
        client_record,
        push_results,
        log_bounds,
    }
}

fn request(partition: &str, client: &str, ids: &[&str], bounds: bool) -> RoundEntryRequest {
    RoundEntryRequest {
        partition: partition.into(),
        authenticated_at_ms: T0 + 10_000,
        initial_log_epoch: format!("epoch-{partition}"),
        refresh_after_ms: 0,
        running_schema_version: 1,
        client_id: client.into(),
        client_commit_ids: ids.iter().map(|id| (*id).to_owned()).collect(),
        log_bounds: bounds,
    }
}

#[test]
fn the_one_statement_answers_what_the_single_calls_answer() {
    let (one, other) = (world(), world());
    seed(&one);
    seed(&other);
    let overlong = "k".repeat(300);
    let cases = [
        request("fresh", "c1", &[], true),
        request("fresh-2", "c9", &["k1"], false),
        request("busy", "c1", &[], false),
        request("busy", "c1", &["k1"], true),
        request(
            "busy",
            "c1",
            &[
                "k2",
                "missing",
                "k1",
                "k2",
                "unreadable",
                &overlong,
                "é\"\\",
            ],
            true,
        ),
        request("busy", "c2", &["k1"], true),
        request("pending", "c1", &["k1"], true),
        request("rotated", "c1", &[], true),
    ];
    for case in &cases {
        for refresh_after_ms in [0, 1_000] {
            let case = RoundEntryRequest {
                refresh_after_ms,
                ..case.clone()
            };
            let expected = single_calls(&other.storage, &case);
            let got = batched(&one.storage, &case);
            assert_eq!(got, expected, "{case:?}");
        }
    }
    // A stored result that cannot be read is that id's own error.
    let answer = batched(&one.storage, &request("busy", "c1", &["unreadable"], false));
    assert_eq!(answer.push_results, [Err(ErrorCode::IdempotencyCacheMiss)]);
}

#[test]
fn an_open_migration_is_in_the_gate_as_the_single_calls_read_it() {
    let (one, other) = (world(), world());
    for w in [&one, &other] {
        seed(w);
        w.db.raw()
            .expect("raw")
            .query_drop("UPDATE `sync_schema_meta` SET `migrating_to` = 2 WHERE `id` = 1")
            .expect("open a migration");
    }
    for running in [1, 2] {
        let case = RoundEntryRequest {
            running_schema_version: running,
            ..request("busy", "c1", &["k1"], true)
        };
        let got = batched(&one.storage, &case);
        assert_eq!(got, single_calls(&other.storage, &case), "{case:?}");
        assert_eq!(
            got.gate.stored_schema_version,
            if running == 1 { 2 } else { 0 }
        );
    }
}

#[test]
fn a_fresh_entry_is_returned_as_stored_and_a_stale_one_is_touched() {
    let w = world();
    let s = &w.storage;
    let at = |ms: i64| RoundEntryRequest {
        authenticated_at_ms: ms,
        refresh_after_ms: 1_000,
        ..request("acme", "c1", &[], false)
    };
    // Unregistered: touched, with the request's epoch.
    let first = s.enter_round(&at(T0)).expect("first");
    assert_eq!(first.registry.last_authenticated_at_ms, T0);
    assert_eq!(first.registry.log_epoch, "epoch-acme");
    assert_eq!(first.gate.log_epoch.as_deref(), Some("epoch-acme"));
    // Fresh: returned as stored, nothing written.
    let fresh = s.enter_round(&at(T0 + 900)).expect("fresh");
    assert_eq!(fresh.registry, first.registry);
    let stored = s.list_partition_registry().expect("registry");
    assert_eq!(stored, vec![first.registry.clone()]);
    // Stale: touched.
    let stale = s.enter_round(&at(T0 + 1_000)).expect("stale");
    assert_eq!(stale.registry.last_authenticated_at_ms, T0 + 1_000);
    assert_eq!(
        s.list_partition_registry().expect("registry"),
        vec![stale.registry.clone()]
    );
    // Without an interval every call touches.
    let always = RoundEntryRequest {
        refresh_after_ms: 0,
        ..at(T0 + 1_001)
    };
    let touched = s.enter_round(&always).expect("touched");
    assert_eq!(touched.registry.last_authenticated_at_ms, T0 + 1_001);
}
