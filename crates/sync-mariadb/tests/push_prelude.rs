//! The push prelude in one go (`begin_push`: the lock and the savepoint,
//! then the gate, the push result and the candidate rows in one statement)
//! answers what the single calls answer in a transaction of their own
//! (lock, gate, push result, then each table's rows when no result is
//! stored): for a new partition, present, absent, repeated, overlong and
//! odd row ids over two tables (binary payloads and column versions
//! included), a replayed push, an unreadable stored result, a pending
//! checkpoint, an open migration with its raised fence, and a table the
//! schema does not know. A push goes on after the prelude: applied,
//! replayed, or rejected at the savepoint. And the prelude is the lock, the
//! savepoint and one read (counted by the fault-injection feature's plan).

mod common;

use mysql::prelude::Queryable;
use sync_conformance::fixtures::{self, Op, PushOutcome};
use sync_core::{
    ErrorCode, NewChange, NewCommit, PushCommitOutcome, PushOperationResult, PushPreludeRequest,
    PushStatus, RowScanQuery, ServeGate, ServerStorage, StoredPushResult, StoredRow,
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

fn task(id: &str, title: &str) -> StoredRow {
    let schema = fixtures::fix1().expect("fix1");
    fixtures::task(&schema, id, "p1", title).expect("task")
}

/// Rows in `acme` (one with column versions), a stored and an unreadable
/// push result, a partition with a pending checkpoint.
fn seed(w: &World) {
    let s = &w.storage;
    let schema = fixtures::fix1().expect("fix1");
    let versioned = StoredRow {
        column_versions: Some(vec![0x00, 0xff, 0x10]),
        ..task("t-versioned", "versioned")
    };
    let ops = [
        Op::upsert("tasks", task("t1", "first")),
        Op::upsert("tasks", versioned),
        Op::upsert("tasks", task("é\"\\", "odd id")),
        Op::upsert(
            "docs",
            fixtures::doc(&schema, "d1", "o1", "p1", Some("body")).expect("doc"),
        ),
    ];
    let pushed = fixtures::push(s, "acme", "c1", "k1", &ops);
    assert_eq!(pushed.expect("seed push"), PushOutcome::Applied(1));
    w.db.raw()
        .expect("raw")
        .exec_drop(
            "INSERT INTO `sync_push_results` (`partition`, `client_id`, `client_commit_id`, \
             `result`) VALUES ('acme', 'c1', 'unreadable', '{not json')",
            (),
        )
        .expect("an unreadable result");
    s.touch_partition("gated", T0, "epoch-gated")
        .expect("touch");
    s.declare_checkpoint("gated", "backfill-a", 1, T0)
        .expect("declare");
}

/// A comparable prelude: errors by code.
#[derive(Debug, PartialEq)]
struct Prelude {
    gate: ServeGate,
    push_result: Result<Option<StoredPushResult>, ErrorCode>,
    rows: Option<Vec<Vec<Option<StoredRow>>>>,
}

fn batched(s: &MariadbStorage, p: &str, r: &PushPreludeRequest) -> Result<Prelude, ErrorCode> {
    let mut tx = s.begin(p).map_err(|e| e.code())?;
    let prelude = tx.begin_push(r).map_err(|e| e.code());
    tx.rollback().expect("rollback");
    let prelude = prelude?;
    Ok(Prelude {
        gate: prelude.gate,
        push_result: prelude.push_result.map_err(|e| e.code()),
        rows: prelude.rows,
    })
}

/// The single calls in the prelude's order, in a transaction of their own.
fn single_calls(s: &MariadbStorage, p: &str, r: &PushPreludeRequest) -> Result<Prelude, ErrorCode> {
    let mut tx = s.begin(p).map_err(|e| e.code())?;
    let read = (|| {
        tx.lock_partition_for_push()?;
        let gate = tx.read_serve_gate(r.running_schema_version)?;
        let push_result = tx.get_push_result(&r.client_id, &r.client_commit_id);
        let rows = match push_result {
            Ok(None) => Some(
                r.rows
                    .iter()
                    .map(|(table, ids)| tx.get_rows(table, ids))
                    .collect::<sync_core::Result<Vec<_>>>()?,
            ),
            _ => None,
        };
        Ok::<_, sync_core::Error>(Prelude {
            gate,
            push_result: push_result.map_err(|e| e.code()),
            rows,
        })
    })();
    tx.rollback().expect("rollback");
    read.map_err(|e| e.code())
}

fn request(ccid: &str, rows: &[(&str, &[&str])]) -> PushPreludeRequest {
    PushPreludeRequest {
        running_schema_version: 1,
        client_id: "c1".into(),
        client_commit_id: ccid.into(),
        rows: rows
            .iter()
            .map(|(t, ids)| {
                (
                    (*t).to_owned(),
                    ids.iter().map(|id| (*id).to_owned()).collect(),
                )
            })
            .collect(),
        deferred_violations: true,
    }
}

#[test]
fn the_one_statement_reads_what_the_single_calls_read() {
    let w = world();
    seed(&w);
    let s = &w.storage;
    let overlong = "t".repeat(1_100);
    let cases: [(&str, PushPreludeRequest); 8] = [
        ("new", request("k1", &[("tasks", &["t1", "t2"])])),
        ("acme", request("k2", &[])),
        (
            "acme",
            request(
                "k2",
                &[
                    (
                        "tasks",
                        &["t1", "missing", "t-versioned", "t1", "é\"\\", &overlong],
                    ),
                    ("docs", &["d1", "d2"]),
                    ("tasks", &[]),
                ],
            ),
        ),
        ("acme", request("k1", &[("tasks", &["t1"])])),
        ("acme", request("unreadable", &[("tasks", &["t1"])])),
        ("gated", request("k1", &[("tasks", &["t1"])])),
        (
            "acme",
            request("k2", &[("tasks", &["t1"]), ("nope", &["x"])]),
        ),
        (
            "acme",
            PushPreludeRequest {
                running_schema_version: 2,
                ..request("k2", &[("tasks", &["t1"])])
            },
        ),
    ];
    for (partition, case) in &cases {
        let expected = single_calls(s, partition, case);
        let got = batched(s, partition, case);
        assert_eq!(got, expected, "{partition}: {case:?}");
    }

    // What the cases covered, spelled out.
    let found = batched(s, "acme", &cases[2].1).expect("prelude");
    assert_eq!(found.push_result, Ok(None));
    let rows = found.rows.expect("rows read");
    let present: Vec<Vec<bool>> = rows
        .iter()
        .map(|t| t.iter().map(Option::is_some).collect())
        .collect();
    assert_eq!(
        present,
        [
            vec![true, false, true, true, true, false],
            vec![true, false],
            vec![]
        ]
    );
    assert_eq!(
        rows[0][2].as_ref().and_then(|r| r.column_versions.clone()),
        Some(vec![0x00, 0xff, 0x10])
    );
    let replay = batched(s, "acme", &cases[3].1).expect("replay");
    assert!(matches!(replay.push_result, Ok(Some(_))));
    assert_eq!(replay.rows, None);
    let unreadable = batched(s, "acme", &cases[4].1).expect("unreadable");
    assert_eq!(unreadable.push_result, Err(ErrorCode::IdempotencyCacheMiss));
    let gated = batched(s, "gated", &cases[5].1).expect("gated");
    assert_eq!(gated.gate.pending, ["backfill-a"]);
    assert!(batched(s, "acme", &cases[6].1).is_err(), "unknown table");
}

#[test]
fn an_open_migration_and_its_fence_read_alike() {
    let w = world();
    seed(&w);
    w.db.raw()
        .expect("raw")
        .query_drop(
            "UPDATE `sync_schema_meta` SET `migrating_to` = 2, `required_writer_version` = 2 \
             WHERE `id` = 1",
        )
        .expect("open a migration");
    let s = &w.storage;
    for running in [1, 2] {
        let case = PushPreludeRequest {
            running_schema_version: running,
            ..request("k2", &[("tasks", &["t1"])])
        };
        let got = batched(s, "acme", &case);
        assert_eq!(got, single_calls(s, "acme", &case), "running {running}");
        let gate = got.expect("prelude").gate;
        assert_eq!(gate.stored_schema_version, if running == 1 { 2 } else { 0 });
    }
    // The fence refuses this writer's commit after the prelude as after
    // the single calls.
    let mut tx = s.begin("acme").expect("begin");
    tx.begin_push(&request("k2", &[("tasks", &["t9"])]))
        .expect("prelude");
    let error = tx
        .append_commit(&commit("k2", &task("t9", "fenced")))
        .expect_err("fenced");
    assert_eq!(error.code(), ErrorCode::WriterFenceRejected);
}

fn commit(ccid: &str, row: &StoredRow) -> NewCommit {
    NewCommit {
        client_id: "c1".into(),
        client_commit_id: ccid.into(),
        actor_id: "actor:c1".into(),
        created_at_ms: T0,
        changes: vec![NewChange::upsert(
            "tasks",
            row.row_id.clone(),
            row.server_version,
            row.scopes.clone(),
            row.payload.clone(),
        )],
    }
}

#[test]
fn a_push_goes_on_after_the_prelude() {
    let w = world();
    seed(&w);
    let s = &w.storage;

    // Applied.
    let row = task("t2", "second");
    let mut tx = s.begin("acme").expect("begin");
    let prelude = tx
        .begin_push(&request("k2", &[("tasks", &["t2"])]))
        .expect("prelude");
    assert_eq!(prelude.rows, Some(vec![vec![None]]));
    tx.upsert_row("tasks", &row, Some(0)).expect("upsert");
    let seq = tx.append_commit(&commit("k2", &row)).expect("append");
    assert_eq!(seq, 2);
    tx.put_push_result("c1", "k2", &StoredPushResult::applied(seq))
        .expect("result");
    let outcome = tx
        .commit_push("c1", "k2", &|_| StoredPushResult::applied(0))
        .expect("commit");
    assert_eq!(outcome, PushCommitOutcome::Committed);
    assert_eq!(s.get_row("acme", "tasks", "t2").expect("row"), Some(row));

    // Replayed: the prelude finds the result.
    let mut tx = s.begin("acme").expect("begin");
    let replay = tx
        .begin_push(&request("k2", &[("tasks", &["t2"])]))
        .expect("prelude");
    assert_eq!(
        replay.push_result.expect("read"),
        Some(StoredPushResult::applied(2))
    );
    tx.rollback().expect("rollback");

    // Rejected at the savepoint: a row colliding with t1 on the declared
    // unique (project, title) index.
    let colliding = task("t3", "first");
    let mut tx = s.begin("acme").expect("begin");
    tx.begin_push(&request("k3", &[("tasks", &["t3"])]))
        .expect("prelude");
    let error = tx
        .upsert_row("tasks", &colliding, Some(0))
        .expect_err("collides");
    assert_eq!(error.code(), ErrorCode::ConstraintViolation);
    let rejected = StoredPushResult {
        status: PushStatus::Rejected,
        commit_seq: None,
        recorded_at_ms: Some(T0),
        cache_identity: None,
        results: vec![PushOperationResult::Error {
            op_index: 0,
            code: "sync.constraint_violation".into(),
            message: "unique".into(),
            retryable: false,
            details: None,
        }],
        actor_id: None,
    };
    tx.commit_rejected_push_result("c1", "k3", &rejected)
        .expect("rejection stored");
    assert_eq!(s.get_row("acme", "tasks", "t3").expect("row"), None);
    assert_eq!(
        s.get_push_result("acme", "c1", "k3").expect("result"),
        Some(rejected)
    );
    assert_eq!(s.get_max_commit_seq("acme").expect("seq"), 2);
}

/// The ids of the `tasks` rows in project `project`, through the scope
/// index.
fn in_project(s: &MariadbStorage, project: &str) -> Vec<String> {
    let query = RowScanQuery {
        table: "tasks".into(),
        scope_filter: [("project_id".to_owned(), vec![project.to_owned()])].into(),
        after_row_id: None,
        limit: 100,
    };
    let rows = s.scan_rows("acme", &query).expect("scan");
    rows.into_iter().map(|r| r.row_id).collect()
}

fn task_in(project: &str, id: &str, title: &str) -> StoredRow {
    let schema = fixtures::fix1().expect("fix1");
    fixtures::task(&schema, id, project, title).expect("task")
}

#[test]
fn row_writes_after_the_prelude_keep_the_scope_index() {
    let w = world();
    seed(&w);
    let s = &w.storage;
    let mut tx = s.begin("acme").expect("begin");
    tx.begin_push(&request("k2", &[("tasks", &["t1", "t5", "t-versioned"])]))
        .expect("prelude");
    // A read row whose scopes change, twice.
    tx.upsert_row("tasks", &task_in("p2", "t1", "first"), Some(0))
        .expect("t1 to p2");
    tx.upsert_row("tasks", &task_in("p3", "t1", "first"), Some(1))
        .expect("t1 to p3");
    // A row the prelude found absent, inserted, then written again.
    tx.upsert_row("tasks", &task_in("p2", "t5", "fifth"), Some(2))
        .expect("t5 inserted");
    tx.upsert_row("tasks", &task_in("p3", "t5", "fifth"), Some(3))
        .expect("t5 updated");
    // A read row deleted, then written again.
    tx.delete_row("tasks", "t-versioned").expect("delete");
    tx.upsert_row("tasks", &task_in("p2", "t-versioned", "again"), Some(4))
        .expect("t-versioned again");
    tx.commit().expect("commit");
    assert_eq!(in_project(s, "p1"), ["é\"\\"]);
    assert_eq!(in_project(s, "p2"), ["t-versioned"]);
    assert_eq!(in_project(s, "p3"), ["t1", "t5"]);
    assert_eq!(
        s.get_row("acme", "tasks", "t5").expect("row"),
        Some(task_in("p3", "t5", "fifth"))
    );
}

#[cfg(feature = "fault-injection")]
#[test]
fn a_row_the_prelude_read_is_written_without_reading_it_again() {
    use std::sync::Arc;
    use sync_core::fault::FaultPlan;

    let w = world();
    seed(&w);
    let plan = FaultPlan::count_only();
    w.storage.set_fault_plan(Some(Arc::clone(&plan)));
    let mut tx = w.storage.begin("acme").expect("begin");
    tx.begin_push(&request("k2", &[("tasks", &["t1", "t5"])]))
        .expect("prelude");
    let before = plan.statements();
    tx.upsert_row("tasks", &task_in("p2", "t1", "first"), Some(0))
        .expect("t1");
    tx.upsert_row("tasks", &task_in("p2", "t5", "fifth"), Some(1))
        .expect("t5");
    let log = plan.statement_log();
    tx.rollback().expect("rollback");
    w.storage.set_fault_plan(None);
    let writes = &log[usize::try_from(before).expect("count")..];
    assert!(
        writes.iter().all(|sql| !sql.starts_with("SELECT")),
        "{writes:#?}"
    );
}

#[cfg(feature = "fault-injection")]
#[test]
fn the_prelude_is_the_lock_the_savepoint_and_one_read() {
    use std::sync::Arc;
    use sync_core::fault::FaultPlan;

    let w = world();
    seed(&w);
    let plan = FaultPlan::count_only();
    w.storage.set_fault_plan(Some(Arc::clone(&plan)));
    let mut tx = w.storage.begin("acme").expect("begin");
    tx.begin_push(&request(
        "k2",
        &[("tasks", &["t1", "t2"]), ("docs", &["d1"])],
    ))
    .expect("prelude");
    let log = plan.statement_log();
    tx.rollback().expect("rollback");
    w.storage.set_fault_plan(None);
    assert_eq!(log.len(), 4, "{log:#?}");
    assert_eq!(log[0], "START TRANSACTION");
    assert!(
        log[1].starts_with("INSERT INTO `sync_partitions`"),
        "{log:#?}"
    );
    assert_eq!(log[2], "SAVEPOINT sync_push_candidate");
    assert!(log[3].starts_with("SELECT 0, "), "{log:#?}");
}
