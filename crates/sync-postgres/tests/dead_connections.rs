//! Pooled connections the server closed while they were idle (a restart, a
//! backend terminated with `pg_terminate_backend`): the next call on the
//! pool — every pool-level method and a push — succeeds the first time,
//! on a fresh connection, and the dead one leaves the pool.

mod common;

use common::*;
use sync_core::{ClientRecord, CommitWindowQuery, RowScanQuery, ServerStorage, StorageTransaction};
use sync_postgres::PostgresStorage;

const POOL: u32 = 3;

/// A storage on its own `application_name`, so its backends can be found.
fn tagged(db: &TestDb, tag: &str) -> PostgresStorage {
    let url = pg_url();
    let sep = if url.contains('?') { '&' } else { '?' };
    let config = sync_postgres::PostgresConfig {
        pool_size: POOL,
        ..db.config()
    };
    let storage = PostgresStorage::connect(&format!("{url}{sep}application_name={tag}"), config)
        .expect("connect");
    storage
        .ensure_schema(&fix1(), &Default::default())
        .expect("ensure");
    storage
}

/// Opens every connection of the pool (all checked out at once, nothing
/// sent on them), then returns them idle.
fn fill_pool(storage: &PostgresStorage) {
    let held: Vec<Box<dyn StorageTransaction + '_>> = (0..POOL)
        .map(|_| storage.begin("acme").expect("checkout"))
        .collect();
    drop(held);
}

/// Terminates every backend of `tag` and waits until each is gone; returns
/// how many there were.
fn kill_backends(tag: &str) -> i64 {
    let mut admin = client();
    let rows = admin
        .query(
            "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity \
             WHERE application_name = $1",
            &[&tag],
        )
        .expect("terminate");
    rows.len() as i64
}

type Call<'a> = (
    &'a str,
    Box<dyn Fn(&PostgresStorage) -> sync_core::Result<()> + 'a>,
);

fn calls<'a>() -> Vec<Call<'a>> {
    let schema = fix1();
    let row = task_row(&schema, "t-dead", "p1", "after", 1);
    vec![
        (
            "push",
            Box::new(move |s: &PostgresStorage| {
                push(s, "acme", "c-dead", "cc-dead", std::slice::from_ref(&row)).map(drop)
            }),
        ),
        (
            "get_max_commit_seq",
            Box::new(|s: &PostgresStorage| s.get_max_commit_seq("acme").map(drop)),
        ),
        (
            "get_push_result",
            Box::new(|s: &PostgresStorage| s.get_push_result("acme", "c1", "cc1").map(drop)),
        ),
        (
            "read_commit_window",
            Box::new(|s: &PostgresStorage| {
                s.read_commit_window(
                    "acme",
                    &CommitWindowQuery {
                        table: "tasks".into(),
                        scope_filter: filter("project_id", &["p1"]),
                        after_seq: 0,
                        through_seq: 1_000,
                        limit_changes: 10,
                    },
                )
                .map(drop)
            }),
        ),
        (
            "scan_rows",
            Box::new(|s: &PostgresStorage| {
                s.scan_rows(
                    "acme",
                    &RowScanQuery {
                        table: "tasks".into(),
                        scope_filter: filter("project_id", &["p1"]),
                        after_row_id: None,
                        limit: 10,
                    },
                )
                .map(drop)
            }),
        ),
        (
            "list_partitions",
            Box::new(|s: &PostgresStorage| s.list_partitions().map(drop)),
        ),
        (
            "read_commits",
            Box::new(|s: &PostgresStorage| s.read_commits("acme", 0, 10).map(drop)),
        ),
        (
            "touch_partition",
            Box::new(|s: &PostgresStorage| s.touch_partition("acme", NOW, "e1").map(drop)),
        ),
        (
            "put_client_record",
            Box::new(|s: &PostgresStorage| {
                s.put_client_record(
                    "acme",
                    &ClientRecord {
                        client_id: "c-dead".into(),
                        actor_id: "a".into(),
                        wire_version: 1,
                        cursor: 0,
                        updated_at_ms: NOW,
                        subscriptions: Vec::new(),
                    },
                )
            }),
        ),
        (
            "declare_checkpoint",
            Box::new(|s: &PostgresStorage| {
                s.declare_checkpoint("acme", "dead_cp", 1, NOW).map(drop)
            }),
        ),
        (
            "claim_checkpoint",
            Box::new(|s: &PostgresStorage| s.claim_checkpoint("acme", "dead_cp", 1, NOW).map(drop)),
        ),
    ]
}

#[test]
fn every_pool_method_and_a_push_succeed_first_time_after_idle_backends_are_killed() {
    let db = TestDb::new();
    let tag = format!("dead_{}", db.schema);
    let storage = tagged(&db, &tag);
    let schema = fix1();
    push(
        &storage,
        "acme",
        "c1",
        "cc1",
        &[task_row(&schema, "t1", "p1", "x", 1)],
    )
    .expect("push");
    for (name, call) in calls() {
        fill_pool(&storage);
        let killed = kill_backends(&tag);
        assert_eq!(
            killed,
            i64::from(POOL),
            "{name}: idle backends before the call"
        );
        if let Err(error) = call(&storage) {
            panic!("{name} failed on a pool of dead connections: {error:?}");
        }
    }
    assert_eq!(storage.get_max_commit_seq("acme").unwrap(), 2);
}
