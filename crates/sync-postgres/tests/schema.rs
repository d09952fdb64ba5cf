//! `ensure_schema`: fresh database, same version, bump with a rewrite of more
//! than one page, and a warm restart that issues no DDL.

mod common;

use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use common::*;
use sync_core::{codec, EnsureOptions, ErrorCode, RowValue, ServerStorage};

fn indexes(db: &TestDb, table: &str) -> Vec<(String, String)> {
    db.raw()
        .query(
            "SELECT ic.relname::text, pg_get_indexdef(ix.indexrelid) FROM pg_index ix \
             JOIN pg_class ic ON ic.oid = ix.indexrelid \
             WHERE ix.indrelid = to_regclass(quote_ident($1)) AND NOT ix.indisprimary ORDER BY 1",
            &[&table],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect()
}

#[test]
fn fresh_then_same_version_then_newer_code() {
    let db = TestDb::new();
    let storage = ensured(&db);
    let marker = storage.read_schema_marker().unwrap().unwrap();
    assert_eq!(marker.schema_version, 1);
    assert_eq!(marker.layouts, sync_schema::layouts_json(&fix1()));
    assert_eq!(marker.required_writer_version, Some(1));
    let tasks = indexes(&db, "tasks");
    assert_eq!(tasks.len(), 2);
    assert!(
        tasks
            .iter()
            .all(|(_, def)| def.contains("(_sync_partition, ")),
        "{tasks:?}"
    );
    assert!(indexes(&db, "secrets").is_empty());
    let collation: String = db
        .raw()
        .query_one(
            "SELECT co.collname::text FROM pg_attribute a JOIN pg_collation co ON co.oid = a.attcollation \
             WHERE a.attrelid = 'tasks'::regclass AND a.attname = '_sync_row_id'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(collation, "C");

    // Same version on a new instance: verified, nothing written.
    let second = db.open();
    second
        .ensure_schema(&fix1(), &EnsureOptions::default())
        .unwrap();
    assert_eq!(second.ensured_version(), Some(1));
    // A different schema at the same version is refused.
    let changed = compile(&FIX1.replace("{\"name\":\"docs_by_body\",\"columns\":[\"body\"]}", "{\"name\":\"docs_by_body\",\"columns\":[\"body\"]},{\"name\":\"docs_by_org\",\"columns\":[\"org_id\"]}"));
    let error = second
        .ensure_schema(&changed, &EnsureOptions::default())
        .unwrap_err();
    assert_eq!(error.code(), ErrorCode::PhysicalLayoutMismatch);
    assert_eq!(error.get_detail("reason"), Some("missing_index"));
    // Older code against a newer database.
    let bumper = db.open();
    bumper
        .ensure_schema(&fix2(), &EnsureOptions::default())
        .unwrap();
    let stale = db
        .open()
        .ensure_schema(&fix1(), &EnsureOptions::default())
        .unwrap_err();
    assert_eq!(stale.code(), ErrorCode::SchemaNewerThanCode);
    assert_eq!(stale.get_detail("stored"), Some("2"));
}

#[test]
fn bump_rewrites_every_row_of_every_partition_in_pages() {
    let db = TestDb::new();
    let storage = ensured(&db);
    let v1 = fix1();
    for (partition, count) in [("a", 1201usize), ("b", 3)] {
        let rows: Vec<_> = (0..count)
            .map(|i| task_row(&v1, &format!("t{i:05}"), "p1", &format!("title {i}"), 1))
            .collect();
        for (n, chunk) in rows.chunks(400).enumerate() {
            push(&storage, partition, "seed", &format!("{n}"), chunk).unwrap();
        }
    }
    let v2 = fix2();
    let bumper = db.open();
    bumper
        .ensure_schema(&v2, &EnsureOptions::default())
        .unwrap();
    assert_eq!(bumper.required_writer_version("a").unwrap(), Some(2));
    let tasks = v2.table("tasks").unwrap();
    for (partition, count) in [("a", 1201usize), ("b", 3)] {
        let mut after: Option<String> = None;
        let mut seen = 0;
        loop {
            let page = bumper
                .scan_partition_rows(partition, "tasks", after.as_deref(), 1000)
                .unwrap();
            for row in &page {
                let values =
                    codec::decode_row(tasks, &row.payload).expect("payload decodes under v2");
                assert_eq!(values.last(), Some(&RowValue::Null));
            }
            seen += page.len();
            after = page.last().map(|r| r.row_id.clone());
            if page.len() < 1000 {
                break;
            }
        }
        assert_eq!(seen, count);
    }
    assert_eq!(
        db.count("SELECT count(*) FROM tasks WHERE assignee IS NOT NULL"),
        0
    );
    let names: Vec<String> = indexes(&db, "tasks").into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        names,
        vec!["sync_ix_tasks_by_assignee", "sync_ix_tasks_by_title"]
    );
    // The old instance is refused by its own gate, and fenced by the database.
    let mut tx = storage.begin("a").unwrap();
    tx.lock_partition_for_push().unwrap();
    assert_eq!(tx.read_serve_gate(1).unwrap().stored_schema_version, 2);
    assert_eq!(
        tx.append_commit(&commit("c", "old", vec![]))
            .unwrap_err()
            .code(),
        ErrorCode::WriterFenceRejected
    );
}

#[test]
fn warm_restart_issues_no_ddl_and_takes_no_table_lock() {
    let db = TestDb::new();
    let storage = ensured(&db);
    let schema = fix1();
    let catalog = |db: &TestDb| -> (String, String) {
        let row = db
            .raw()
            .query_one(
                "SELECT (SELECT xmin::text FROM pg_proc WHERE proname = 'sync_writer_fence_check' \
                   AND pronamespace = current_schema()::regnamespace), \
                 (SELECT xmin::text FROM pg_trigger WHERE tgname = 'sync_commits_effective_writer_fence' \
                   AND tgrelid = 'sync_commits'::regclass)",
                &[],
            )
            .unwrap();
        (row.get(0), row.get(1))
    };
    let before = catalog(&db);
    // A push holds the partition lock and has inserted into sync_commits.
    let mut held = storage.begin("acme").unwrap();
    held.lock_partition_for_push().unwrap();
    let row = task_row(&schema, "t1", "p1", "held", 1);
    held.upsert_row("tasks", &row, None).unwrap();
    held.append_commit(&commit("c", "held", vec![upsert_change(&row, "tasks")]))
        .unwrap();
    let (done_tx, done_rx) = mpsc::channel();
    thread::scope(|scope| {
        let db = &db;
        let schema = &schema;
        scope.spawn(move || {
            let warm = db.open();
            let _ = done_tx.send(warm.ensure_schema(schema, &EnsureOptions::default()));
        });
        let outcome = done_rx.recv_timeout(Duration::from_secs(30));
        held.commit().unwrap();
        outcome
            .expect("a warm ensure must not wait for the held push")
            .unwrap();
    });
    assert_eq!(catalog(&db), before, "fence function and trigger untouched");
}
