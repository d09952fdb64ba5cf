//! Push and pull through the validating front on a live server: a fresh
//! database is migrated to FIX1, commits are pushed with the standard push
//! sequence, and rows, windows, scans, client records and the gate read
//! back what was written.

use std::sync::Arc;

use sync_conformance::fixtures::{self, Op, PushOutcome};
use sync_core::{
    ClientRecord, ClientSubscription, CommitWindowQuery, EnsureOptions, EnsureOutcome, ErrorCode,
    PushStatus, RowScanQuery, ScopeFilter, ServerStorage,
};
use sync_mariadb::scratch::{url_from_env, ScratchDatabase};
use sync_mariadb::{MariadbConfig, MariadbStorage};

fn scratch() -> ScratchDatabase {
    ScratchDatabase::from_env()
        .unwrap_or_else(|e| panic!("cannot reach MariaDB at {} ({e:?})", url_from_env()))
}

fn open(db: &ScratchDatabase) -> Arc<dyn ServerStorage> {
    Arc::new(
        MariadbStorage::connect_to(db.url().clone(), MariadbConfig::default()).expect("connect"),
    )
}

fn upsert(row: sync_core::StoredRow) -> Op {
    Op::Upsert {
        table: "tasks".to_owned(),
        row,
    }
}

fn project(values: &[&str]) -> ScopeFilter {
    [(
        "project_id".to_owned(),
        values.iter().map(|v| (*v).to_owned()).collect(),
    )]
    .into()
}

#[test]
fn a_fresh_database_migrates_then_verifies_on_every_instance() {
    let db = scratch();
    let schema = fixtures::fix1().expect("fix1");
    let storage = open(&db);
    let opts = EnsureOptions::default();
    assert_eq!(
        storage.ensure_schema_outcome(&schema, &opts).expect("bump"),
        EnsureOutcome::Migrated
    );
    assert_eq!(
        storage.ensure_schema_outcome(&schema, &opts).expect("memo"),
        EnsureOutcome::Verified
    );
    let other = open(&db);
    assert_eq!(
        other
            .ensure_schema_outcome(&schema, &opts)
            .expect("same version"),
        EnsureOutcome::Verified,
        "the introspected tables pass the physical checks"
    );
    let marker = storage
        .read_schema_marker()
        .expect("marker")
        .expect("stored");
    assert_eq!(marker.schema_version, 1);
    assert_eq!(marker.required_writer_version, Some(1));
    assert_eq!(
        storage.required_writer_version("p1").expect("fence"),
        Some(1)
    );

    // A second bump (same tables, version 2) rebuilds the declared
    // indexes; code at version 1 is then refused.
    let v2 = fixtures::fix1_at(2).expect("fix1 at 2");
    assert_eq!(
        open(&db)
            .ensure_schema_outcome(&v2, &opts)
            .expect("second bump"),
        EnsureOutcome::Migrated
    );
    assert_eq!(
        storage.required_writer_version("p1").expect("fence"),
        Some(2)
    );
    let err = open(&db)
        .ensure_schema_outcome(&schema, &opts)
        .expect_err("older code");
    assert_eq!(err.code(), ErrorCode::SchemaNewerThanCode);
    assert_eq!(
        open(&db)
            .ensure_schema_outcome(&v2, &opts)
            .expect("verified"),
        EnsureOutcome::Verified
    );
}

#[test]
fn pushes_are_applied_replayed_and_rejected_and_pulls_read_them() {
    let db = scratch();
    let schema = fixtures::fix1().expect("fix1");
    let storage = open(&db);
    storage
        .ensure_schema(&schema, &EnsureOptions::default())
        .expect("ensure");
    let s = storage.as_ref();

    let t1 = fixtures::task(&schema, "t1", "proj-1", "first").expect("t1");
    let t2 = fixtures::task(&schema, "t2", "proj-2", "second").expect("t2");
    let applied =
        fixtures::push(s, "p1", "c1", "cc1", &[upsert(t1.clone()), upsert(t2)]).expect("push");
    assert!(matches!(applied, PushOutcome::Applied(1)), "{applied:?}");
    let replayed = fixtures::push(s, "p1", "c1", "cc1", &[]).expect("replay");
    assert!(
        matches!(replayed, PushOutcome::Replayed(ref r) if r.commit_seq == Some(1)),
        "{replayed:?}"
    );

    // A unique collision on (project_id, title) is a rejection of op 0.
    let clash = fixtures::task(&schema, "t3", "proj-1", "first").expect("t3");
    let rejected = fixtures::push(s, "p1", "c1", "cc2", &[upsert(clash)]).expect("push");
    match rejected {
        PushOutcome::Rejected(result) => assert_eq!(result.status, PushStatus::Rejected),
        other => panic!("expected a rejection, got {other:?}"),
    }
    assert_eq!(s.get_max_commit_seq("p1").expect("max"), 1);
    assert!(s.get_row("p1", "tasks", "t3").expect("get").is_none());
    assert_eq!(
        s.get_push_result("p1", "c1", "cc2")
            .expect("stored")
            .map(|r| r.status),
        Some(PushStatus::Rejected)
    );

    // Rows and scans.
    assert_eq!(
        s.get_row("p1", "tasks", "t1").expect("get"),
        Some(t1.clone())
    );
    assert!(s
        .get_row("p2", "tasks", "t1")
        .expect("other partition")
        .is_none());
    let scanned = s
        .scan_rows(
            "p1",
            &RowScanQuery {
                table: "tasks".into(),
                scope_filter: project(&["proj-1"]),
                after_row_id: None,
                limit: 10,
            },
        )
        .expect("scan");
    assert_eq!(scanned, vec![t1.clone()]);
    let all = s
        .scan_partition_rows("p1", "tasks", None, 10)
        .expect("partition scan");
    assert_eq!(
        all.iter().map(|r| r.row_id.as_str()).collect::<Vec<_>>(),
        ["t1", "t2"]
    );

    // An update moves t1 to another project: the scope index follows.
    let moved = fixtures::task(&schema, "t1", "proj-2", "first").expect("moved");
    let second = fixtures::push(s, "p1", "c1", "cc3", &[upsert(moved)]).expect("push");
    assert!(matches!(second, PushOutcome::Applied(2)), "{second:?}");
    let query = |values: &[&str]| RowScanQuery {
        table: "tasks".into(),
        scope_filter: project(values),
        after_row_id: None,
        limit: 10,
    };
    assert!(s
        .scan_rows("p1", &query(&["proj-1"]))
        .expect("scan")
        .is_empty());
    assert_eq!(
        s.scan_rows("p1", &query(&["proj-2"])).expect("scan").len(),
        2
    );

    // The window reads commits whose changes match, in order.
    let window = s
        .read_commit_window(
            "p1",
            &CommitWindowQuery {
                table: "tasks".into(),
                scope_filter: project(&["proj-1", "proj-2"]),
                after_seq: 0,
                through_seq: 2,
                limit_changes: 100,
            },
        )
        .expect("window");
    assert_eq!(
        window.iter().map(|c| c.commit_seq).collect::<Vec<_>>(),
        [1, 2]
    );
    assert_eq!(window[0].changes.len(), 2);
    assert_eq!(
        s.latest_scoped_change_seq("p1", "tasks", &project(&["proj-1"]))
            .expect("latest"),
        1
    );

    // A delete leaves a tombstone and removes the row and its entries.
    let deleted = fixtures::push(
        s,
        "p1",
        "c1",
        "cc4",
        &[Op::Delete {
            table: "tasks".into(),
            row_id: "t2".into(),
        }],
    )
    .expect("delete");
    assert!(matches!(deleted, PushOutcome::Applied(3)), "{deleted:?}");
    assert!(s.get_row("p1", "tasks", "t2").expect("get").is_none());
    assert_eq!(
        s.scan_rows("p1", &query(&["proj-2"])).expect("scan").len(),
        1
    );
}

#[test]
fn client_records_registry_and_gate() {
    let db = scratch();
    let schema = fixtures::fix1().expect("fix1");
    let storage = open(&db);
    storage
        .ensure_schema(&schema, &EnsureOptions::default())
        .expect("ensure");
    let s = storage.as_ref();
    let entry = s.touch_partition("p1", 100, "e1").expect("touch");
    assert_eq!(
        (entry.log_epoch.as_str(), entry.last_authenticated_at_ms),
        ("e1", 100)
    );
    let again = s.touch_partition("p1", 200, "e2").expect("touch again");
    assert_eq!(
        (again.log_epoch.as_str(), again.last_authenticated_at_ms),
        ("e1", 200)
    );
    assert_eq!(s.list_partitions().expect("list"), vec!["p1".to_owned()]);

    let record = ClientRecord {
        client_id: "c1".into(),
        actor_id: "a1".into(),
        wire_version: 2,
        cursor: 5,
        updated_at_ms: 1000,
        subscriptions: vec![ClientSubscription {
            id: "s1".into(),
            table: "tasks".into(),
            scopes: project(&["proj-1"]),
        }],
    };
    s.put_client_record("p1", &record).expect("put");
    assert_eq!(s.get_client_record("p1", "c1").expect("get"), Some(record));
    assert!(s.update_client_cursor("p1", "c1", 9, 1100).expect("update"));
    assert!(!s
        .update_client_cursor("p1", "nobody", 9, 1100)
        .expect("absent"));
    assert_eq!(
        s.get_active_client_cursor_floor("p1", 0).expect("floor"),
        Some(9)
    );

    let gate = s.read_serve_gate("p1", 1).expect("gate");
    assert_eq!(gate.stored_schema_version, 1);
    assert_eq!(gate.log_epoch.as_deref(), Some("e1"));
    assert!(gate.pending.is_empty());
}

#[test]
fn reactions_are_enqueued_claimed_once_and_completed() {
    use sync_core::{NewReaction, ReactionClaimQuery, ReactionStatus};
    let db = scratch();
    let schema = fixtures::fix1().expect("fix1");
    let storage = open(&db);
    storage
        .ensure_schema(&schema, &EnsureOptions::default())
        .expect("ensure");
    let s = storage.as_ref();
    let reaction = |key: &str| NewReaction {
        idempotency_key: key.to_owned(),
        kind: "mail".to_owned(),
        version: 1,
        payload: serde_json::json!({"to": "a"}),
        source_client_id: "c1".to_owned(),
        source_client_commit_id: "cc1".to_owned(),
        source_commit_seq: 1,
        created_at_ms: 100,
        max_attempts: 3,
    };
    let mut tx = s.begin("p1").expect("begin");
    tx.lock_partition_for_push().expect("lock");
    tx.enqueue_reactions(&[reaction("k1"), reaction("k2")])
        .expect("enqueue");
    tx.commit().expect("commit");
    let mut tx = s.begin("p1").expect("begin");
    tx.lock_partition_for_push().expect("lock");
    let err = tx
        .enqueue_reactions(&[reaction("k1")])
        .expect_err("duplicate");
    assert_eq!(err.code(), ErrorCode::DuplicateReaction);
    tx.rollback().expect("rollback");

    let query = |owner: &str| ReactionClaimQuery {
        lease_owner: owner.to_owned(),
        kinds: vec!["mail".to_owned()],
        now_ms: 200,
        lease_duration_ms: 1000,
        limit: 10,
    };
    let first = s.claim_reactions("p1", &query("w1")).expect("claim");
    assert_eq!(first.len(), 2);
    assert!(first
        .iter()
        .all(|r| r.status == ReactionStatus::Leased && r.attempts == 1));
    assert!(s
        .claim_reactions("p1", &query("w2"))
        .expect("claim again")
        .is_empty());
    assert!(!s
        .complete_reaction("p1", "k1", "w2", 300)
        .expect("not the owner"));
    assert!(s
        .complete_reaction("p1", "k1", "w1", 300)
        .expect("complete"));
    let stored = s.get_reaction("p1", "k1").expect("get").expect("stored");
    assert_eq!(stored.status, ReactionStatus::Completed);
}

#[test]
fn index_lookups_read_exact_values_in_row_id_order() {
    use sync_core::{IndexRowScanQuery, RowValue};
    let db = scratch();
    let schema = fixtures::fix1().expect("fix1");
    let storage = open(&db);
    storage
        .ensure_schema(&schema, &EnsureOptions::default())
        .expect("ensure");
    let s = storage.as_ref();
    let rows = [
        ("t2", "proj-1", "same"),
        ("t1", "proj-2", "same"),
        ("t3", "proj-1", "other"),
    ];
    for (i, (id, project, title)) in rows.iter().enumerate() {
        let row = fixtures::task(&schema, id, project, title).expect("row");
        let pushed =
            fixtures::push(s, "p1", "c1", &format!("cc{i}"), &[upsert(row)]).expect("push");
        assert!(matches!(pushed, PushOutcome::Applied(_)), "{pushed:?}");
    }
    let lookup = |index: &str, values: Vec<RowValue>| IndexRowScanQuery {
        table: "tasks".into(),
        index: index.into(),
        values,
        after_row_id: None,
        limit: 10,
    };
    let same = s
        .scan_rows_by_index(
            "p1",
            &lookup("tasks_by_title", vec![RowValue::String("same".into())]),
        )
        .expect("lookup");
    assert_eq!(
        same.iter().map(|r| r.row_id.as_str()).collect::<Vec<_>>(),
        ["t1", "t2"]
    );
    let unique = s
        .scan_rows_by_index(
            "p1",
            &lookup(
                "tasks_by_project_title",
                vec![
                    RowValue::String("proj-1".into()),
                    RowValue::String("other".into()),
                ],
            ),
        )
        .expect("lookup");
    assert_eq!(
        unique.iter().map(|r| r.row_id.as_str()).collect::<Vec<_>>(),
        ["t3"]
    );
}

#[test]
fn registered_queries_read_the_partition_and_refuse_mariadb_constructs() {
    use sync_core::{AuthoritativeQueryRequest, ServeContext, SqlValue};
    let db = scratch();
    let schema = fixtures::fix1().expect("fix1");
    let storage = open(&db);
    storage
        .ensure_schema(&schema, &EnsureOptions::default())
        .expect("ensure");
    let s = storage.as_ref();
    for (partition, id, title) in [("p1", "t1", "mine"), ("p2", "t2", "SECRET-OF-P2")] {
        let row = fixtures::task(&schema, id, "proj-1", title).expect("row");
        fixtures::push(s, partition, "c1", "cc1", &[upsert(row)]).expect("push");
    }
    let request = |sql: &str| AuthoritativeQueryRequest {
        sql: sql.to_owned(),
        params: vec![],
        tables: vec!["tasks".to_owned()],
    };
    let result = s
        .query_authoritative(
            "p1",
            &request("SELECT id, title, done, priority FROM tasks ORDER BY id"),
            &ServeContext::default(),
        )
        .expect("query");
    assert_eq!(result.columns, ["id", "title", "done", "priority"]);
    assert_eq!(
        result.rows,
        vec![vec![
            SqlValue::Text("t1".into()),
            SqlValue::Text("mine".into()),
            SqlValue::Integer(0),
            SqlValue::Null
        ]]
    );
    assert_eq!(result.max_commit_seq, 1);
    for (sql, construct) in [
        (
            "SELECT id FROM tasks WHERE id = 't1' /*! UNION SELECT title FROM tasks */",
            "executable_comment",
        ),
        (
            "SELECT id FROM tasks # '\nUNION SELECT title FROM tasks -- '",
            "hash_comment",
        ),
        ("SELECT 1 --1", "dash_dash_without_space"),
        (
            "SELECT id FROM tasks WHERE title = 'a\\' OR 1 = 1 -- '",
            "backslash_in_literal",
        ),
        ("SELECT @x FROM tasks", "session_variable"),
    ] {
        let err = s
            .query_authoritative("p1", &request(sql), &ServeContext::default())
            .expect_err(sql);
        assert_eq!(err.code(), ErrorCode::QueryRejected, "{sql}");
        assert_eq!(err.get_detail("construct"), Some(construct), "{sql}");
    }
    let err = s
        .query_authoritative(
            "p1",
            &request("SELECT SLEEP(1) FROM tasks"),
            &ServeContext::default(),
        )
        .expect_err("sleep");
    assert_eq!(err.get_detail("reason"), Some("reserved_reference"));
}

/// Scans of several values read range by range up to 128 values and by
/// one sorted statement above; both page in row-id order, skip nothing and
/// repeat nothing, and a list far above the server's 65 535 parameters of
/// ranges is answered.
#[test]
fn scans_of_many_values_page_in_row_id_order() {
    let db = scratch();
    let schema = fixtures::fix1().expect("fix1");
    let storage = open(&db);
    storage
        .ensure_schema(&schema, &EnsureOptions::default())
        .expect("ensure");
    let s = storage.as_ref();
    // 30 rows over 6 projects, pushed in an order unrelated to their ids.
    let ops: Vec<Op> = (0..30)
        .map(|i| {
            let n = (i * 7) % 30;
            let row = fixtures::task(
                &schema,
                &format!("t{n:02}"),
                &format!("proj-{}", n % 6),
                &format!("title {n}"),
            )
            .expect("task");
            upsert(row)
        })
        .collect();
    let pushed = fixtures::push(s, "p1", "c1", "cc1", &ops).expect("push");
    assert!(matches!(pushed, PushOutcome::Applied(1)), "{pushed:?}");
    let expected = |wanted: &[usize]| -> Vec<String> {
        (0..30)
            .filter(|n| wanted.contains(&(n % 6)))
            .map(|n| format!("t{n:02}"))
            .collect()
    };
    let paged = |values: Vec<String>| -> Vec<String> {
        let mut out = Vec::new();
        let mut after = None;
        loop {
            let page = s
                .scan_rows(
                    "p1",
                    &RowScanQuery {
                        table: "tasks".into(),
                        scope_filter: [("project_id".to_owned(), values.clone())].into(),
                        after_row_id: after.clone(),
                        limit: 4,
                    },
                )
                .expect("scan");
            if page.is_empty() {
                return out;
            }
            after = page.last().map(|r| r.row_id.clone());
            out.extend(page.into_iter().map(|r| r.row_id));
        }
    };
    let named = |projects: &[usize], padding: usize| -> Vec<String> {
        let mut values: Vec<String> = projects.iter().map(|p| format!("proj-{p}")).collect();
        values.extend((0..padding).map(|i| format!("absent-{i}")));
        values
    };
    // Three values: ranges merged; a repeated value repeats no row.
    assert_eq!(paged(named(&[1, 3, 4], 0)), expected(&[1, 3, 4]));
    assert_eq!(paged(named(&[3, 1, 3], 0)), expected(&[1, 3]));
    // 128 values: still ranges; 129 and 20 000: one sorted statement.
    for padding in [125, 126, 19_997] {
        assert_eq!(
            paged(named(&[0, 2, 5], padding)),
            expected(&[0, 2, 5]),
            "{} values",
            padding + 3
        );
    }
}

/// An inspection handle reads what a writer wrote and the server refuses
/// its writes; a database without the storage tables is not opened.
#[test]
fn a_read_only_storage_reads_and_cannot_write() {
    let db = scratch();
    let url = format!(
        "{}/{}",
        url_from_env()
            .rsplit_once('/')
            .expect("a database in the URL")
            .0,
        db.url().database()
    );
    let refused = MariadbStorage::connect_read_only(&url, MariadbConfig::default())
        .expect_err("no storage tables yet");
    assert_eq!(refused.code(), ErrorCode::NotASyncDatabase);
    let schema = fixtures::fix1().expect("fix1");
    let writer = open(&db);
    writer
        .ensure_schema(&schema, &EnsureOptions::default())
        .expect("ensure");
    let t1 = fixtures::task(&schema, "t1", "proj-1", "first").expect("t1");
    let pushed = fixtures::push(writer.as_ref(), "p1", "c1", "cc1", &[upsert(t1)]);
    assert!(matches!(pushed, Ok(PushOutcome::Applied(1))), "{pushed:?}");

    let reader =
        MariadbStorage::connect_read_only(&url, MariadbConfig::default()).expect("read-only open");
    // Without an ensured schema it reads what operator tools read.
    assert_eq!(reader.get_max_commit_seq("p1").expect("read"), 1);
    let record = ClientRecord {
        client_id: "c9".into(),
        actor_id: "a".into(),
        wire_version: 2,
        cursor: 0,
        updated_at_ms: 1,
        subscriptions: Vec::new(),
    };
    assert!(
        reader.put_client_record("p1", &record).is_err(),
        "a read-only session wrote a client record"
    );
    assert!(writer
        .get_client_record("p1", "c9")
        .expect("read")
        .is_none());
}
