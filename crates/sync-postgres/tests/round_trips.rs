//! Counts the client→server round trips of a warm single-row push through a
//! counting TCP proxy (each round trip is one flush of the client followed by
//! a wait for the reply, so it arrives at the proxy as one read).

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;

use common::*;
use postgres::config::Host;
use postgres::NoTls;
use r2d2_postgres::PostgresConnectionManager;
use sync_core::{
    ClientRecord, EnsureOptions, PushCommitOutcome, PushPreludeRequest, RoundEntryRequest,
    ServerStorage, StoredPushResult,
};
use sync_postgres::PostgresStorage;

/// Forwards a local port to the server and counts client writes.
fn proxy(upstream: (String, u16)) -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let count = Arc::new(AtomicUsize::new(0));
    let counter = count.clone();
    thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(client) = client else { return };
            let Ok(server) = TcpStream::connect((upstream.0.as_str(), upstream.1)) else {
                return;
            };
            client.set_nodelay(true).unwrap();
            server.set_nodelay(true).unwrap();
            let (mut c_read, mut s_write) =
                (client.try_clone().unwrap(), server.try_clone().unwrap());
            let (mut s_read, mut c_write) = (server, client);
            let counter = counter.clone();
            thread::spawn(move || {
                let mut buf = [0u8; 65536];
                while let Ok(n) = c_read.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    // Counted before it is forwarded: the reply cannot reach
                    // the client (and the test read the count) before this
                    // write is counted, however the threads are scheduled.
                    counter.fetch_add(1, Ordering::SeqCst);
                    if s_write.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            });
            thread::spawn(move || {
                let mut buf = [0u8; 65536];
                while let Ok(n) = s_read.read(&mut buf) {
                    if n == 0 || c_write.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            });
        }
    });
    (port, count)
}

#[derive(Debug)]
struct SearchPath(String);

impl r2d2::CustomizeConnection<postgres::Client, postgres::Error> for SearchPath {
    fn on_acquire(&self, conn: &mut postgres::Client) -> Result<(), postgres::Error> {
        conn.batch_execute(&format!("SET search_path TO \"{}\"", self.0))
    }
}

/// A storage whose one pooled connection goes through the counting proxy.
fn proxied_storage(db: &TestDb) -> (PostgresStorage, Arc<AtomicUsize>) {
    let (storage, count, _pool) = proxied_storage_and_pool(db);
    (storage, count)
}

/// [`proxied_storage`] with the host's handle on the one-connection pool.
fn proxied_storage_and_pool(db: &TestDb) -> (PostgresStorage, Arc<AtomicUsize>, Pool) {
    let config: postgres::Config = pg_url().parse().unwrap();
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(host)) => host.clone(),
        other => panic!("the round-trip test needs a TCP server URL, got {other:?}"),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let (proxy_port, count) = proxy((host, port));
    let mut proxied = postgres::Config::new();
    proxied.host("127.0.0.1").port(proxy_port);
    if let Some(user) = config.get_user() {
        proxied.user(user);
    }
    if let Some(dbname) = config.get_dbname() {
        proxied.dbname(dbname);
    }
    if let Some(password) = config.get_password() {
        proxied.password(password);
    }
    // A host-built pool (the `new` constructor): one connection, no
    // validation query on checkout, search_path set on acquire.
    let pool = r2d2::Pool::builder()
        .max_size(1)
        .test_on_check_out(false)
        .connection_customizer(Box::new(SearchPath(db.schema.clone())))
        .build(PostgresConnectionManager::new(proxied, NoTls))
        .unwrap();
    let storage = PostgresStorage::new(pool.clone(), db.config());
    storage
        .ensure_schema(&fix1(), &EnsureOptions::default())
        .unwrap();
    (storage, count, pool)
}

type Pool = r2d2::Pool<PostgresConnectionManager<NoTls>>;

#[test]
fn a_warm_single_row_push_costs_four_round_trips() {
    let db = TestDb::new();
    let (storage, count) = proxied_storage(&db);
    let schema = fix1();
    let single_row_push = |id: &str| {
        let row = task_row(&schema, id, "p1", id, 1);
        let mut tx = storage.begin("acme").unwrap();
        tx.lock_partition_for_push().unwrap();
        let gate = tx.read_serve_gate(1).unwrap();
        assert_eq!(gate.stored_schema_version, 1);
        assert!(tx.get_push_result("c", id).unwrap().is_none());
        tx.upsert_row("tasks", &row, Some(0)).unwrap();
        let seq = tx
            .append_commit(&commit("c", id, vec![upsert_change(&row, "tasks")]))
            .unwrap();
        tx.put_push_result("c", id, &StoredPushResult::applied(seq))
            .unwrap();
        tx.commit().unwrap();
    };
    single_row_push("warm-up");
    let before = count.load(Ordering::SeqCst);
    single_row_push("measured");
    let round_trips = count.load(Ordering::SeqCst) - before;
    assert_eq!(
        round_trips, 4,
        "begin+lock+savepoint+fence+gate, get_push_result, upsert_row, append_commit+put_push_result+commit"
    );
}

#[test]
fn a_warm_round_entry_costs_one_round_trip() {
    let db = TestDb::new();
    let (storage, count) = proxied_storage(&db);
    let request = |ids: &[&str]| RoundEntryRequest {
        partition: "acme".into(),
        authenticated_at_ms: 1_700_000_000_000,
        initial_log_epoch: "epoch-1".into(),
        refresh_after_ms: 0,
        running_schema_version: 1,
        client_id: "c".into(),
        client_commit_ids: ids.iter().map(|id| (*id).to_owned()).collect(),
        log_bounds: true,
    };
    storage.enter_round(&request(&["warm-up"])).unwrap();
    let before = count.load(Ordering::SeqCst);
    let entry = storage.enter_round(&request(&["a", "b", "c"])).unwrap();
    let round_trips = count.load(Ordering::SeqCst) - before;
    assert_eq!(entry.registry.log_epoch, "epoch-1");
    assert_eq!(entry.gate.stored_schema_version, 1);
    assert!(entry.client_record.is_none());
    assert_eq!(entry.push_results.len(), 3);
    assert_eq!(
        round_trips, 1,
        "touch, gate, client record, three push results and the log bounds in one statement"
    );

    // With a refresh interval: a fresh entry is one plain read, a stale one
    // adds the touch.
    let at = |ms: i64| RoundEntryRequest {
        authenticated_at_ms: ms,
        refresh_after_ms: 1_000,
        ..request(&["a"])
    };
    // Warm both statements: a fresh read, then a stale one (read + touch).
    storage.enter_round(&at(1_700_000_000_500)).unwrap();
    storage.enter_round(&at(1_700_000_001_600)).unwrap();
    let before = count.load(Ordering::SeqCst);
    let fresh = storage.enter_round(&at(1_700_000_001_900)).unwrap();
    assert_eq!(count.load(Ordering::SeqCst) - before, 1, "a fresh entry");
    assert_eq!(fresh.registry.last_authenticated_at_ms, 1_700_000_001_600);
    assert_eq!(fresh.gate.log_epoch.as_deref(), Some("epoch-1"));
    let before = count.load(Ordering::SeqCst);
    let stale = storage.enter_round(&at(1_700_000_003_000)).unwrap();
    assert_eq!(
        count.load(Ordering::SeqCst) - before,
        2,
        "a stale entry: read, touch"
    );
    assert_eq!(stale.registry.last_authenticated_at_ms, 1_700_000_003_000);
    // Exactly one interval after the last touch is stale too (C-350 leaves
    // the boundary to the dialect; this one refreshes, as SQLite does).
    let before = count.load(Ordering::SeqCst);
    let boundary = storage.enter_round(&at(1_700_000_004_000)).unwrap();
    assert_eq!(
        count.load(Ordering::SeqCst) - before,
        2,
        "one interval old: read, touch"
    );
    assert_eq!(
        boundary.registry.last_authenticated_at_ms,
        1_700_000_004_000
    );
}

/// The prelude of a push to `id`: the gate, the key `("c", id)` and the row.
fn prelude_request(id: &str) -> PushPreludeRequest {
    PushPreludeRequest {
        running_schema_version: 1,
        client_id: "c".into(),
        client_commit_id: id.into(),
        rows: vec![("tasks".into(), vec![id.to_owned()])],
        deferred_violations: false,
    }
}

/// A single-row push of the new row `row` through the prelude, as the
/// engine pushes (`deferred`: with `deferred_violations`); its sequence.
fn prelude_push(storage: &PostgresStorage, row: &sync_core::StoredRow, deferred: bool) -> i64 {
    let id = row.row_id.as_str();
    let mut tx = storage.begin("acme").unwrap();
    let request = PushPreludeRequest {
        deferred_violations: deferred,
        ..prelude_request(id)
    };
    let prelude = tx.begin_push(&request).unwrap();
    assert_eq!(prelude.gate.stored_schema_version, 1);
    assert!(prelude.push_result.unwrap().is_none());
    assert_eq!(prelude.rows, Some(vec![vec![None]]));
    tx.upsert_row("tasks", row, Some(0)).unwrap();
    let seq = tx
        .append_commit(&commit("c", id, vec![upsert_change(row, "tasks")]))
        .unwrap();
    tx.put_push_result("c", id, &StoredPushResult::applied(seq))
        .unwrap();
    let outcome = tx
        .commit_push("c", id, &|_| panic!("no violation"))
        .unwrap();
    assert_eq!(outcome, PushCommitOutcome::Committed);
    seq
}

/// Round trips of a warm single-row push through the prelude, and what it
/// wrote: the row, the result, the counter.
fn warm_prelude_push_round_trips(deferred: bool) -> usize {
    let db = TestDb::new();
    let (storage, count) = proxied_storage(&db);
    let schema = fix1();
    prelude_push(
        &storage,
        &task_row(&schema, "warm-up", "p1", "w", 1),
        deferred,
    );
    let row = task_row(&schema, "measured", "p1", "m", 1);
    let before = count.load(Ordering::SeqCst);
    let seq = prelude_push(&storage, &row, deferred);
    let round_trips = count.load(Ordering::SeqCst) - before;
    assert_eq!(
        storage.get_row("acme", "tasks", "measured").unwrap(),
        Some(row)
    );
    let stored = storage.get_push_result("acme", "c", "measured").unwrap();
    assert_eq!(stored.and_then(|r| r.commit_seq), Some(seq));
    assert_eq!(storage.get_max_commit_seq("acme").unwrap(), seq);
    round_trips
}

#[test]
fn a_warm_single_row_push_through_the_prelude_costs_three_round_trips() {
    assert_eq!(
        warm_prelude_push_round_trips(false),
        3,
        "begin+lock+savepoint+fence+gate+push result+rows, upsert_row, append_commit+put_push_result+commit"
    );
}

#[test]
fn a_warm_single_row_push_deferring_its_violations_costs_two_round_trips() {
    assert_eq!(
        warm_prelude_push_round_trips(true),
        2,
        "begin+lock+savepoint+fence+gate+push result+rows, upsert_row+append_commit+put_push_result+commit"
    );
}

/// A rejection stored for a violation at `op_index`.
fn rejection(op_index: u32) -> StoredPushResult {
    StoredPushResult {
        status: sync_core::PushStatus::Rejected,
        commit_seq: None,
        recorded_at_ms: Some(1),
        cache_identity: None,
        results: vec![sync_core::PushOperationResult::Error {
            op_index,
            code: "sync.constraint_violation".into(),
            message: "rejected".into(),
            retryable: false,
            details: None,
        }],
        actor_id: None,
    }
}

#[test]
fn a_deferred_write_reports_its_violation_from_the_commit_or_the_next_statement() {
    let db = TestDb::new();
    let (storage, _count) = proxied_storage(&db);
    let schema = fix1();
    let t0 = task_row(&schema, "t0", "p1", "dup", 1);
    let mut tx = storage.begin("acme").unwrap();
    tx.begin_push(&prelude_request("cc-0")).unwrap();
    tx.upsert_row("tasks", &t0, Some(0)).unwrap();
    let seq = tx
        .append_commit(&commit("c", "cc-0", vec![upsert_change(&t0, "tasks")]))
        .unwrap();
    tx.put_push_result("c", "cc-0", &StoredPushResult::applied(seq))
        .unwrap();
    tx.commit().unwrap();
    let deferring = |id: &str| PushPreludeRequest {
        deferred_violations: true,
        rows: vec![("tasks".into(), vec!["ta".into(), "tb".into()])],
        ..prelude_request(id)
    };
    let fresh = task_row(&schema, "ta", "p1", "fresh", 1);
    let colliding = task_row(&schema, "tb", "p1", "dup", 1);

    // The colliding write travels with the COMMIT: commit_push finalizes
    // the rejection on the same transaction.
    let mut tx = storage.begin("acme").unwrap();
    tx.begin_push(&deferring("cc-1")).unwrap();
    tx.upsert_row("tasks", &fresh, Some(0)).unwrap();
    tx.upsert_row("tasks", &colliding, Some(1)).unwrap();
    let changes = vec![
        upsert_change(&fresh, "tasks"),
        upsert_change(&colliding, "tasks"),
    ];
    let seq = tx.append_commit(&commit("c", "cc-1", changes)).unwrap();
    tx.put_push_result("c", "cc-1", &StoredPushResult::applied(seq))
        .unwrap();
    let outcome = tx.commit_push("c", "cc-1", &rejection).unwrap();
    assert_eq!(outcome, PushCommitOutcome::Rejected { op_index: 1 });

    assert_eq!(
        storage.get_push_result("acme", "c", "cc-1").unwrap(),
        Some(rejection(1))
    );
    assert_eq!(storage.get_max_commit_seq("acme").unwrap(), 1);
    assert_eq!(storage.get_row("acme", "tasks", "ta").unwrap(), None);

    // A deferred write is sent before the next statement, which reports
    // the write's violation with its operation.
    let mut tx = storage.begin("acme").unwrap();
    tx.begin_push(&deferring("cc-2")).unwrap();
    tx.upsert_row("tasks", &colliding, Some(0)).unwrap();
    let error = tx.get_row("tasks", "t0").unwrap_err();
    assert_eq!(error.code(), sync_core::ErrorCode::ConstraintViolation);
    assert_eq!(error.op_index_value(), Some(0));
    tx.commit_rejected_push_result("c", "cc-2", &rejection(0))
        .unwrap();
    assert_eq!(
        storage.get_push_result("acme", "c", "cc-2").unwrap(),
        Some(rejection(0))
    );
    assert_eq!(storage.get_row("acme", "tasks", "tb").unwrap(), None);
    assert_eq!(storage.get_max_commit_seq("acme").unwrap(), 1);
}

/// Edge values of every projected type: what a deferred write renders as
/// literals must land exactly as the bound parameters of the immediate one.
#[test]
fn a_deferred_write_projects_every_value_as_the_immediate_write_does() {
    use sync_core::{codec, RowValue, StoredRow};
    let db = TestDb::new();
    let (storage, _count) = proxied_storage(&db);
    let schema = fix1();
    let table = schema.table("tasks").unwrap();
    let edges: Vec<(RowValue, RowValue, RowValue, RowValue)> = vec![
        (
            RowValue::Integer(-9_007_199_254_740_991),
            RowValue::Float(0.1),
            RowValue::Json(r#"{"a":[1,2.5,"x\\y'z"]}"#.into()),
            RowValue::Bytes(vec![0, 1, 0x27, 0x5c, 0xff]),
        ),
        (
            RowValue::Integer(9_007_199_254_740_991),
            RowValue::Float(-0.0),
            RowValue::Json("null".into()),
            RowValue::Bytes(Vec::new()),
        ),
        (
            RowValue::Integer(-1),
            RowValue::Float(f64::MIN_POSITIVE / 4.0),
            RowValue::Null,
            RowValue::Null,
        ),
        (
            RowValue::Null,
            RowValue::Float(1e300),
            RowValue::Json("\"é \\u0000 ok\"".into()),
            RowValue::Bytes(vec![7; 40]),
        ),
        (
            RowValue::Integer(0),
            RowValue::Float(f64::NAN),
            RowValue::Json("[]".into()),
            RowValue::Null,
        ),
        (
            RowValue::Integer(1),
            RowValue::Float(f64::INFINITY),
            RowValue::Null,
            RowValue::Null,
        ),
        (
            RowValue::Integer(2),
            RowValue::Float(f64::NEG_INFINITY),
            RowValue::Null,
            RowValue::Null,
        ),
    ];
    let row =
        |id: &str,
         i: usize,
         (priority, score, meta, thumb): &(RowValue, RowValue, RowValue, RowValue)| {
            let mut values = vec![
                RowValue::String(id.into()),
                RowValue::String("p1".into()),
                RowValue::String(format!("it's \\ {id}")),
                RowValue::Boolean(i % 2 == 0),
                priority.clone(),
                score.clone(),
                meta.clone(),
                thumb.clone(),
                RowValue::Null,
            ];
            values.resize(table.columns.len(), RowValue::Null);
            StoredRow {
                row_id: id.into(),
                server_version: 1,
                scopes: scopes(&[("project_id", "p1")]),
                payload: codec::encode_row(table, &values).expect("encode"),
                column_versions: None,
            }
        };
    for (i, edge) in edges.iter().enumerate() {
        for (id, deferred) in [(format!("now{i}"), false), (format!("later{i}"), true)] {
            let written = row(&id, i, edge);
            prelude_push(&storage, &written, deferred);
            assert_eq!(
                storage.get_row("acme", "tasks", &id).unwrap(),
                Some(written)
            );
        }
        let columns = "done::text, priority::text, score::text, meta::text, \
            encode(thumb, 'hex'), title, _sync_scopes::text, _sync_server_version::text";
        let read = |id: &str| -> Vec<Option<String>> {
            let row = db
                .raw()
                .query_one(
                    &format!("SELECT {columns} FROM tasks WHERE _sync_row_id = $1"),
                    &[&id],
                )
                .unwrap();
            (0..8).map(|c| row.get(c)).collect()
        };
        let now = read(&format!("now{i}"));
        let later = read(&format!("later{i}"));
        assert!(now[1].is_some() || now[2].is_some(), "edge {i}: projected");
        assert_eq!(now[..2], later[..2], "edge {i}: done, priority");
        assert_eq!(now[2..5], later[2..5], "edge {i}: score, meta, thumb");
        assert_eq!(now[6..], later[6..], "edge {i}: scopes, version");
    }
}

#[test]
fn the_prelude_reads_what_the_single_methods_read_under_the_lock() {
    let db = TestDb::new();
    let (storage, _count) = proxied_storage(&db);
    let schema = fix1();
    let stored = task_row(&schema, "t1", "p1", "it's \\ 'quoted'", 1);
    let mut tx = storage.begin("acme").unwrap();
    tx.lock_partition_for_push().unwrap();
    tx.upsert_row("tasks", &stored, Some(0)).unwrap();
    let seq = tx
        .append_commit(&commit("c", "k1", vec![upsert_change(&stored, "tasks")]))
        .unwrap();
    tx.put_push_result("c", "k1", &StoredPushResult::applied(seq))
        .unwrap();
    tx.commit().unwrap();

    let request = PushPreludeRequest {
        running_schema_version: 1,
        client_id: "c".into(),
        client_commit_id: "k1".into(),
        rows: vec![
            (
                "tasks".into(),
                vec!["absent".into(), "t1".into(), "t1".into()],
            ),
            ("tasks".into(), Vec::new()),
        ],
        deferred_violations: false,
    };
    let mut tx = storage.begin("acme").unwrap();
    let prelude = tx.begin_push(&request).unwrap();
    let stored_result = prelude
        .push_result
        .as_ref()
        .unwrap()
        .clone()
        .expect("the stored result");
    assert_eq!(stored_result.commit_seq, Some(seq));
    let rows = prelude.rows.clone().expect("Postgres reads the rows");
    assert_eq!(
        rows,
        vec![
            vec![None, Some(stored.clone()), Some(stored.clone())],
            vec![]
        ]
    );
    assert_eq!(prelude.row(&request, "tasks", "t1"), Some(Some(&stored)));
    assert_eq!(prelude.row(&request, "tasks", "absent"), Some(None));
    assert_eq!(prelude.row(&request, "tasks", "never-asked"), None);
    // Under the same lock, the single methods agree.
    assert_eq!(tx.read_serve_gate(1).unwrap(), prelude.gate);
    assert_eq!(tx.get_rows("tasks", &request.rows[0].1).unwrap(), rows[0]);
    assert_eq!(tx.get_push_result("c", "k1").unwrap(), Some(stored_result));
    tx.rollback().unwrap();

    // A key that cannot be a literal falls back to the single methods: no rows.
    let mut odd = prelude_request("k2");
    odd.client_id = "c\0".into();
    let mut tx = storage.begin("acme").unwrap();
    let prelude = tx.begin_push(&odd).unwrap();
    assert!(prelude.rows.is_none());
    tx.rollback().unwrap();
}

/// A pull's client record: `cursor` for actor `actor`.
fn client_record(actor: &str, cursor: i64) -> ClientRecord {
    ClientRecord {
        client_id: "c".into(),
        actor_id: actor.into(),
        wire_version: 2,
        cursor,
        updated_at_ms: 1_700_000_000_000 + cursor,
        subscriptions: Vec::new(),
    }
}

/// `SHOW synchronous_commit` on the pool's one connection.
fn session_level(pool: &Pool) -> String {
    let mut conn = pool.get().unwrap();
    conn.query_one("SHOW synchronous_commit", &[])
        .unwrap()
        .get(0)
}

#[test]
fn a_client_record_refresh_is_one_round_trip_that_leaves_the_session_level() {
    let db = TestDb::new();
    let (storage, count, pool) = proxied_storage_and_pool(&db);
    storage
        .touch_partition("acme", 1_700_000_000_000, "epoch-1")
        .unwrap();
    assert_eq!(session_level(&pool), "on");
    // The first record binds the client to its actor: the refresh finds
    // nothing, then a durable write (liveness check, upsert).
    storage
        .put_client_record("acme", &client_record("alice", 1))
        .unwrap();
    storage
        .put_client_record("acme", &client_record("alice", 2))
        .unwrap();
    let before = count.load(Ordering::SeqCst);
    storage
        .put_client_record("acme", &client_record("alice", 3))
        .unwrap();
    assert_eq!(
        count.load(Ordering::SeqCst) - before,
        1,
        "a refresh of the same actor's record is one statement"
    );
    // `synchronous_commit = off` held for that transaction only.
    assert_eq!(session_level(&pool), "on");
    assert!(storage
        .advance_client_cursor("acme", "c", "alice", "epoch-1", 9, 1_700_000_000_009)
        .unwrap());
    assert_eq!(session_level(&pool), "on");
    let stored = storage.get_client_record("acme", "c").unwrap().unwrap();
    assert_eq!((stored.actor_id.as_str(), stored.cursor), ("alice", 9));
    // Another actor's record replaces the binding through the durable write.
    storage
        .put_client_record("acme", &client_record("bob", 4))
        .unwrap();
    let stored = storage.get_client_record("acme", "c").unwrap().unwrap();
    assert_eq!((stored.actor_id.as_str(), stored.cursor), ("bob", 4));
    assert_eq!(session_level(&pool), "on");
}

/// Writes `rows` tasks to partition `acme` in one transaction: task `t<n>`
/// in project `p<n % projects>`.
fn seed_tasks(storage: &PostgresStorage, rows: usize, projects: usize) {
    let schema = fix1();
    let mut tx = storage.begin("acme").unwrap();
    tx.lock_partition_for_push().unwrap();
    let mut changes = Vec::new();
    for n in 0..rows {
        let id = format!("t{n:04}");
        let row = task_row(&schema, &id, &format!("p{}", n % projects), &id, 1);
        tx.upsert_row("tasks", &row, Some(0)).unwrap();
        changes.push(upsert_change(&row, "tasks"));
    }
    tx.append_commit(&commit("c", "seed", changes)).unwrap();
    tx.commit().unwrap();
}

/// The round trips of one `scan_rows` page on the pool (warm statements).
fn scan_round_trips(
    storage: &PostgresStorage,
    count: &AtomicUsize,
    projects: &[&str],
    limit: i64,
) -> (usize, usize) {
    let query = sync_core::RowScanQuery {
        table: "tasks".into(),
        scope_filter: [(
            "project_id".to_owned(),
            projects.iter().map(|p| (*p).to_owned()).collect(),
        )]
        .into(),
        after_row_id: None,
        limit,
    };
    storage.scan_rows("acme", &query).unwrap();
    let before = count.load(Ordering::SeqCst);
    let rows = storage.scan_rows("acme", &query).unwrap().len();
    (count.load(Ordering::SeqCst) - before, rows)
}

#[test]
fn a_dense_many_value_scan_page_is_one_round_trip_and_a_sparse_one_two() {
    let db = TestDb::new();
    let (storage, count) = proxied_storage(&db);
    seed_tasks(&storage, 400, 10);
    // 2 of 3 projects match: the probe opens the walk, which fills the page.
    let dense = scan_round_trips(&storage, &count, &["p1", "p2", "p3"], 30);
    assert_eq!(dense, (1, 30), "the gated walk alone (round trips, rows)");
    // 2 of 10 projects match: the probe closes the walk, the merged ranges
    // read the page.
    let sparse = scan_round_trips(&storage, &count, &["p1", "p2"], 30);
    assert_eq!(sparse, (2, 30), "the probe, then the merged ranges");
}

/// Two storage instances (two processes' pools) pushing through the
/// prelude with deferred writes to one partition at once, every third push
/// colliding with a stored row's unique title: each push ends applied or
/// rejected exactly as stored, and the log stays dense.
#[test]
fn two_instances_pushing_deferred_writes_at_once_keep_every_outcome() {
    let db = TestDb::new();
    let first = Arc::new(db.open());
    first
        .ensure_schema(&fix1(), &EnsureOptions::default())
        .unwrap();
    let second = Arc::new(db.open());
    second
        .ensure_schema(&fix1(), &EnsureOptions::default())
        .unwrap();
    let schema = fix1();
    prelude_push(&first, &task_row(&schema, "seed", "p1", "taken", 1), true);
    let start = Arc::new(std::sync::Barrier::new(4));
    let workers: Vec<_> = (0..4)
        .map(|w| {
            let storage = if w % 2 == 0 {
                first.clone()
            } else {
                second.clone()
            };
            let (schema, start) = (schema.clone(), start.clone());
            thread::spawn(move || {
                start.wait();
                (0..30)
                    .map(|i| {
                        let id = format!("w{w}-{i}");
                        let title = if i % 3 == 0 {
                            "taken".to_owned()
                        } else {
                            id.clone()
                        };
                        let row = task_row(&schema, &id, "p1", &title, 1);
                        let mut tx = storage.begin("acme").unwrap();
                        let request = PushPreludeRequest {
                            deferred_violations: true,
                            ..prelude_request(&id)
                        };
                        tx.begin_push(&request).unwrap();
                        tx.upsert_row("tasks", &row, Some(0)).unwrap();
                        let seq = tx
                            .append_commit(&commit("c", &id, vec![upsert_change(&row, "tasks")]))
                            .unwrap();
                        tx.put_push_result("c", &id, &StoredPushResult::applied(seq))
                            .unwrap();
                        let outcome = tx.commit_push("c", &id, &rejection).unwrap();
                        (id, i % 3 == 0, outcome)
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut applied = 0;
    for worker in workers {
        for (id, collides, outcome) in worker.join().unwrap() {
            let stored = first.get_push_result("acme", "c", &id).unwrap().unwrap();
            let row = first.get_row("acme", "tasks", &id).unwrap();
            if collides {
                assert_eq!(outcome, PushCommitOutcome::Rejected { op_index: 0 }, "{id}");
                assert_eq!(stored, rejection(0), "{id}");
                assert_eq!(row, None, "{id}");
            } else {
                assert_eq!(outcome, PushCommitOutcome::Committed, "{id}");
                assert!(stored.commit_seq.is_some(), "{id}");
                assert!(row.is_some(), "{id}");
                applied += 1;
            }
        }
    }
    assert_eq!(applied, 80);
    assert_eq!(first.get_max_commit_seq("acme").unwrap(), 1 + applied);
    assert_eq!(
        db.count("SELECT count(*) FROM sync_commits WHERE partition = 'acme'"),
        1 + applied
    );
}

/// Versions of `sync_partitions` rows whose `xmax` is a MultiXact
/// (`HEAP_XMAX_IS_MULTI`), read from the table's first page with
/// `pageinspect` (created in `public` under an advisory lock, since
/// parallel tests share the database).
fn multixact_counter_versions(db: &TestDb) -> i64 {
    let mut raw = db.raw();
    let mut tx = raw.transaction().expect("transaction");
    tx.batch_execute(
        "SELECT pg_advisory_xact_lock(hashtext('syncstore-tests-pageinspect')); \
         CREATE EXTENSION IF NOT EXISTS pageinspect SCHEMA public",
    )
    .expect("pageinspect");
    tx.commit().expect("commit");
    let table = format!("\"{}\".sync_partitions", db.schema);
    raw.query_one(
        "SELECT count(*) FROM public.heap_page_items(public.get_raw_page($1::text, 0)) \
         WHERE (t_infomask & 4096) <> 0",
        &[&table],
    )
    .expect("heap_page_items")
    .get(0)
}

/// The append updates the counter row the push lock holds; the rejection
/// savepoint is released before it, so the update runs in the transaction
/// that locked the row and no push makes a MultiXact of the lock and the
/// update (a MultiXact per push, with its WAL record and its share of the
/// MultiXact space). The counter's old versions are still on the page, as
/// nothing vacuumed it.
#[test]
fn a_push_through_the_prelude_makes_no_multixact_of_the_counter_row() {
    for deferred in [false, true] {
        let db = TestDb::new();
        let storage = db.open();
        let schema = fix1();
        storage
            .ensure_schema(&schema, &EnsureOptions::default())
            .unwrap();
        for i in 0..3 {
            let row = task_row(&schema, &format!("m{i}"), "p1", &format!("title {i}"), 1);
            assert_eq!(prelude_push(&storage, &row, deferred), i + 1);
        }
        assert_eq!(multixact_counter_versions(&db), 0, "deferred={deferred}");
        let versions = db.count(&format!(
            "SELECT count(*) FROM public.heap_page_items(public.get_raw_page('\"{}\".sync_partitions', 0))",
            db.schema
        ));
        assert!(
            versions >= 3,
            "the old versions are on the page: {versions}"
        );
    }
}

/// A row write queued after the deferred append can still be rejected:
/// the savepoint is released before the append only when no row write
/// follows it, so the violation rolls back to it and the rejection is
/// stored, with nothing of the push persisted.
#[test]
fn a_write_queued_after_the_deferred_append_is_still_rejected() {
    let db = TestDb::new();
    let (storage, _count) = proxied_storage(&db);
    let schema = fix1();
    let t0 = task_row(&schema, "t0", "p1", "dup", 1);
    prelude_push(&storage, &t0, true);
    let colliding = task_row(&schema, "tb", "p1", "dup", 1);
    let mut tx = storage.begin("acme").unwrap();
    tx.begin_push(&PushPreludeRequest {
        deferred_violations: true,
        ..prelude_request("tb")
    })
    .unwrap();
    let seq = tx
        .append_commit(&commit("c", "tb", vec![upsert_change(&colliding, "tasks")]))
        .unwrap();
    assert_eq!(seq, 2);
    tx.upsert_row("tasks", &colliding, Some(0)).unwrap();
    let outcome = tx.commit_push("c", "tb", &rejection).unwrap();
    assert_eq!(outcome, PushCommitOutcome::Rejected { op_index: 0 });
    assert_eq!(
        storage.get_push_result("acme", "c", "tb").unwrap(),
        Some(rejection(0))
    );
    assert_eq!(storage.get_max_commit_seq("acme").unwrap(), 1);
    assert_eq!(storage.get_row("acme", "tasks", "tb").unwrap(), None);
}
