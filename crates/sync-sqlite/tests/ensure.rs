//! `ensure_schema`: fresh, memoized, same version, bump with keyset rewrite,
//! refusals, physical checks and legacy index upgrade.

mod common;

use common::*;
use sync_core::codec;
use sync_core::{CheckpointDeclaration, EnsureOptions, ErrorCode, RowValue, ServerStorage};

fn indexes(db: &Db, table: &str) -> Vec<(String, bool, Vec<String>)> {
    let raw = db.raw();
    let mut list = raw
        .prepare(
            "SELECT name, \"unique\" FROM pragma_index_list(?1) WHERE origin = 'c' ORDER BY name",
        )
        .unwrap();
    let names: Vec<(String, bool)> = list
        .query_map([table], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    names
        .into_iter()
        .map(|(name, unique)| {
            let mut info = raw
                .prepare("SELECT name FROM pragma_index_info(?1) ORDER BY seqno")
                .unwrap();
            let cols = info
                .query_map([&name], |r| r.get(0))
                .unwrap()
                .map(Result::unwrap)
                .collect();
            (name, unique, cols)
        })
        .collect()
}

fn marker(db: &Db) -> (i64, String, Option<i64>) {
    db.raw()
        .query_row(
            "SELECT schema_version, layouts, required_writer_version FROM sync_schema_meta WHERE id = 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap()
}

#[test]
fn fresh_database_gets_tables_marker_and_fence() {
    let db = Db::new();
    let storage = db.open();
    assert_eq!(storage.ensured_version(), None);
    assert_eq!(storage.begin("p").unwrap().writer_version(), 0);
    let schema = fix1();
    storage
        .ensure_schema(&schema, &EnsureOptions::default())
        .unwrap();
    assert_eq!(storage.ensured_version(), Some(1));
    let (version, layouts, fence) = marker(&db);
    assert_eq!((version, fence), (1, Some(1)));
    assert_eq!(layouts, sync_schema::layouts_json(&schema));
    assert_eq!(storage.required_writer_version("any").unwrap(), Some(1));
    let tasks = indexes(&db, "tasks");
    assert!(tasks.contains(&(
        "sync_ix_tasks_by_title".into(),
        false,
        vec![
            "_sync_partition".into(),
            "title".into(),
            "_sync_row_id".into()
        ]
    )));
    assert!(indexes(&db, "secrets").is_empty());
    let marker = storage.read_schema_marker().unwrap().unwrap();
    assert_eq!(marker.schema_version, 1);
    assert_eq!(marker.required_writer_version, Some(1));
}

#[test]
fn memo_fast_path_reads_nothing_but_a_new_instance_verifies() {
    let db = Db::new();
    let storage = db.ready();
    db.raw()
        .execute("UPDATE sync_schema_meta SET layouts = 'not json'", [])
        .unwrap();
    storage
        .ensure_schema(&fix1(), &EnsureOptions::default())
        .unwrap();
    let err = db
        .open()
        .ensure_schema(&fix1(), &EnsureOptions::default())
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::LayoutsCorrupt);
    assert_eq!(err.get_detail("reason"), Some("not_json"));
}

#[test]
fn same_version_checks_layouts_and_physical_shape() {
    let db = Db::new();
    db.ready();
    // a new declared index at the same version
    let more = compile(&schema_json(1, false, true).replace(
        r#"{"name":"tasks_by_title","columns":["title"]}"#,
        r#"{"name":"tasks_by_title","columns":["title"]},{"name":"tasks_by_done","columns":["done"]}"#,
    ));
    let err = db
        .open()
        .ensure_schema(&more, &EnsureOptions::default())
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::PhysicalLayoutMismatch);
    assert_eq!(err.get_detail("reason"), Some("missing_index"));
    // operator index is tolerated
    db.raw()
        .execute_batch("CREATE INDEX ops_tasks_tuning ON tasks (priority)")
        .unwrap();
    db.open()
        .ensure_schema(&fix1(), &EnsureOptions::default())
        .unwrap();
    // a dropped projection column is refused
    db.raw()
        .execute_batch("ALTER TABLE tasks DROP COLUMN score")
        .unwrap();
    let err = db
        .open()
        .ensure_schema(&fix1(), &EnsureOptions::default())
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::PhysicalLayoutMismatch);
    assert_eq!(err.get_detail("reason"), Some("missing_column"));
    // newer database
    db.raw()
        .execute("UPDATE sync_schema_meta SET schema_version = 5", [])
        .unwrap();
    let err = db
        .open()
        .ensure_schema(&fix1(), &EnsureOptions::default())
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::SchemaNewerThanCode);
    assert_eq!(err.get_detail("stored"), Some("5"));
    assert_eq!(err.get_detail("configured"), Some("1"));
}

#[test]
fn empty_layouts_are_refused_at_same_version() {
    let db = Db::new();
    db.ready();
    db.raw()
        .execute("UPDATE sync_schema_meta SET layouts = '{}'", [])
        .unwrap();
    let err = db
        .open()
        .ensure_schema(&fix1(), &EnsureOptions::default())
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::StoredLayoutMismatch);
    assert_eq!(err.get_detail("table"), Some("tasks"));
    assert_eq!(err.get_detail("column"), Some("id"));
}

#[test]
fn bump_rewrites_every_row_of_every_partition_in_pages() {
    let db = Db::new();
    let storage = db.ready();
    for (partition, count) in [("part-a", 1201), ("part-b", 3)] {
        let mut tx = storage.begin(partition).unwrap();
        for i in 0..count {
            tx.upsert_row(
                "tasks",
                &task_row(&format!("t{i:05}"), "proj", &format!("title {i}")),
                None,
            )
            .unwrap();
        }
        tx.commit().unwrap();
    }
    let change_payload_before: Vec<u8> = {
        let mut tx = storage.begin("part-a").unwrap();
        let row = task_row("t00000", "proj", "title 0");
        tx.append_commit(&commit_of("c", "1", vec![upsert_change(&row)]))
            .unwrap();
        tx.commit().unwrap();
        row.payload
    };
    let v2 = fix2();
    let fresh = db.open();
    fresh.ensure_schema(&v2, &EnsureOptions::default()).unwrap();
    let (version, _, fence) = marker(&db);
    assert_eq!((version, fence), (2, Some(2)));
    let table = v2.table("tasks").unwrap();
    for (partition, count) in [("part-a", 1201), ("part-b", 3)] {
        let mut after: Option<String> = None;
        let mut seen = 0;
        loop {
            let page = fresh
                .scan_partition_rows(partition, "tasks", after.as_deref(), 1000)
                .unwrap();
            if page.is_empty() {
                break;
            }
            for row in &page {
                let values = codec::decode_row(table, &row.payload).unwrap();
                assert_eq!(values.last(), Some(&RowValue::Null));
            }
            seen += page.len();
            after = page.last().map(|r| r.row_id.clone());
        }
        assert_eq!(seen, count);
    }
    let assignee_nulls: i64 = db
        .raw()
        .query_row(
            "SELECT count(*) FROM tasks WHERE assignee IS NULL",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(assignee_nulls, 1204);
    // change-log payloads are untouched
    let stored: Vec<u8> = db
        .raw()
        .query_row(
            "SELECT payload FROM sync_changes WHERE partition = 'part-a'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(stored, change_payload_before);
    // the old instance still runs v1 and is fenced
    let mut tx = storage.begin("part-a").unwrap();
    assert_eq!(
        tx.append_commit(&commit_of("c", "2", vec![]))
            .unwrap_err()
            .code(),
        ErrorCode::WriterFenceRejected
    );
}

#[test]
fn bump_refusals_leave_everything_unchanged() {
    let db = Db::new();
    db.ready();
    let not_nullable = compile(&schema_json(2, false, true).replace(
        r#"{"name":"attachment","type":"blob_ref","nullable":true}"#,
        r#"{"name":"attachment","type":"blob_ref","nullable":true},{"name":"x","type":"string"}"#,
    ));
    let err = db
        .open()
        .ensure_schema(&not_nullable, &EnsureOptions::default())
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::MigrationRefused);
    assert_eq!(err.get_detail("reason"), Some("column_not_nullable"));
    assert_eq!(marker(&db).0, 1);
    // declaration at another version: refused before any write
    let opts = EnsureOptions::with_declarations(vec![CheckpointDeclaration::new("p", "n", 3)]);
    let err = db.open().ensure_schema(&fix2(), &opts).unwrap_err();
    assert_eq!(err.code(), ErrorCode::CheckpointDeclarationInvalid);
    assert_eq!(err.get_detail("reason"), Some("version_mismatch"));
    // corrupt layouts met by a bump
    db.raw()
        .execute("UPDATE sync_schema_meta SET layouts = 'nope'", [])
        .unwrap();
    let err = db
        .open()
        .ensure_schema(&fix2(), &EnsureOptions::default())
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::LayoutsCorrupt);
    assert_eq!(marker(&db).0, 1);
}

#[test]
fn bump_installs_declarations_and_startup_check_requires_them() {
    let db = Db::new();
    db.ready();
    let decl = CheckpointDeclaration::new("p1", "search_v2", 2);
    let storage = db.open();
    storage
        .ensure_schema(
            &fix2(),
            &EnsureOptions::with_declarations(vec![decl.clone()]),
        )
        .unwrap();
    let cp = storage.read_checkpoint("p1", "search_v2").unwrap().unwrap();
    assert_eq!(cp.state, sync_core::CheckpointState::Declared);
    assert_eq!(cp.updated_at_ms, NOW);
    assert_eq!(storage.required_writer_version("p1").unwrap(), Some(2));
    let err = db
        .open()
        .ensure_schema(&fix2(), &EnsureOptions::default())
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::CheckpointIncomplete);
    assert_eq!(err.get_detail("name"), Some("search_v2"));
    db.open()
        .ensure_schema(&fix2(), &EnsureOptions::with_declarations(vec![decl]))
        .unwrap();
}

#[test]
fn bump_retires_removed_tables_and_rebuilds_owned_indexes() {
    let db = Db::new();
    let storage = db.ready();
    let mut tx = storage.begin("p").unwrap();
    let doc = sync_core::StoredRow {
        row_id: "d1".into(),
        server_version: 1,
        scopes: scopes(&[("org_id", "o"), ("project_id", "p")]),
        payload: codec::encode_row(
            fix1().table("docs").unwrap(),
            &[
                RowValue::String("d1".into()),
                RowValue::String("o".into()),
                RowValue::String("p".into()),
                RowValue::Null,
            ],
        )
        .unwrap(),
        column_versions: None,
    };
    tx.upsert_row("docs", &doc, None).unwrap();
    tx.set_blob_refs("docs", "d1", &["b1".into()]).unwrap();
    tx.commit().unwrap();
    db.raw().execute_batch("CREATE INDEX tasks_by_title ON tasks (title); CREATE INDEX ops_tasks_tuning ON tasks (priority)").unwrap();
    let mut v2: serde_json::Value = serde_json::from_str(&schema_json(2, true, false).replace(
        r#"{"name":"tasks_by_title","columns":["title"]}"#,
        r#"{"name":"tasks_by_title","columns":["project_id","title"],"unique":true}"#,
    ))
    .unwrap();
    v2["tables"]
        .as_array_mut()
        .unwrap()
        .retain(|t| t["name"] != "docs");
    let v2 = compile(&v2.to_string());
    db.open()
        .ensure_schema(&v2, &EnsureOptions::default())
        .unwrap();
    let raw = db.raw();
    let exists: i64 = raw
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE name = 'docs'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(exists, 0);
    for table in ["sync_row_scopes", "sync_blob_refs", "sync_tombstones"] {
        let n: i64 = raw
            .query_row(
                &format!("SELECT count(*) FROM {table} WHERE tbl = 'docs'"),
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(n, 0, "{table}");
    }
    let tasks = indexes(&db, "tasks");
    let names: Vec<&str> = tasks.iter().map(|(n, _, _)| n.as_str()).collect();
    assert_eq!(names, ["ops_tasks_tuning", "sync_ix_tasks_by_title"]);
    assert_eq!(
        tasks[1],
        (
            "sync_ix_tasks_by_title".to_string(),
            true,
            vec![
                "_sync_partition".into(),
                "project_id".into(),
                "title".into()
            ]
        )
    );
}

#[test]
fn legacy_index_shape_is_upgraded_at_same_version() {
    let db = Db::new();
    db.ready();
    db.raw()
        .execute_batch("DROP INDEX sync_ix_tasks_by_title; CREATE INDEX sync_ix_tasks_by_title ON tasks (title)")
        .unwrap();
    db.open()
        .ensure_schema(&fix1(), &EnsureOptions::default())
        .unwrap();
    let tasks = indexes(&db, "tasks");
    assert!(tasks.contains(&(
        "sync_ix_tasks_by_title".into(),
        false,
        vec![
            "_sync_partition".into(),
            "title".into(),
            "_sync_row_id".into()
        ]
    )));
    assert_eq!(marker(&db).0, 1);
}

#[test]
fn concurrent_instances_bump_once() {
    let db = Db::new();
    let storage = db.ready();
    let mut tx = storage.begin("p").unwrap();
    tx.upsert_row("tasks", &task_row("t1", "proj", "x"), None)
        .unwrap();
    tx.commit().unwrap();
    let a = db.open();
    let b = db.open();
    std::thread::scope(|s| {
        let ha = s.spawn(|| a.ensure_schema(&fix2(), &EnsureOptions::default()));
        let hb = s.spawn(|| b.ensure_schema(&fix2(), &EnsureOptions::default()));
        ha.join().unwrap().unwrap();
        hb.join().unwrap().unwrap();
    });
    let row = a.get_row("p", "tasks", "t1").unwrap().unwrap();
    let values = codec::decode_row(fix2().table("tasks").unwrap(), &row.payload).unwrap();
    assert_eq!(values.len(), 10);
}
