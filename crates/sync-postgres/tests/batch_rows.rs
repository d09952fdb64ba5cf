//! `StorageTransaction::get_rows` / `upsert_rows`: the set-based Postgres
//! overrides round-trip a batch, maintain the scope index and classify
//! constraint violations as the per-row upsert does.

mod common;

use common::*;
use sync_core::{ErrorCode, RowScanQuery, ServerStorage, StoredRow};

fn scan_ids(tx: &mut dyn sync_core::StorageTransaction, project: &str) -> Vec<String> {
    let mut ids = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = tx
            .scan_rows(&RowScanQuery {
                table: "tasks".into(),
                scope_filter: filter("project_id", &[project]),
                after_row_id: after.clone(),
                limit: 1000,
            })
            .unwrap();
        let Some(last) = page.last() else { break };
        after = Some(last.row_id.clone());
        ids.extend(page.into_iter().map(|r| r.row_id));
    }
    ids
}

#[test]
fn batch_of_600_round_trips_and_maintains_scopes() {
    let db = TestDb::new();
    let storage = ensured(&db);
    let schema = fix1();
    let rows: Vec<StoredRow> = (0..600)
        .map(|i| {
            let project = if i % 2 == 0 { "p1" } else { "p2" };
            task_row(
                &schema,
                &format!("t{i:04}"),
                project,
                &format!("title {i}"),
                1,
            )
        })
        .collect();
    let ids: Vec<String> = rows.iter().map(|r| r.row_id.clone()).collect();

    let mut tx = storage.begin("acme").unwrap();
    tx.upsert_rows("tasks", &rows).unwrap();
    let mut with_absent = ids.clone();
    with_absent.insert(3, "absent".into());
    with_absent.push("t0000".into());
    let read = tx.get_rows("tasks", &with_absent).unwrap();
    assert_eq!(read.len(), 602);
    assert_eq!(read[3], None);
    assert_eq!(read[0].as_ref(), Some(&rows[0]));
    assert_eq!(read[601].as_ref(), Some(&rows[0]), "a repeated id repeats");
    let found: Vec<StoredRow> = read.into_iter().flatten().take(600).collect();
    assert_eq!(found, rows);
    assert_eq!(scan_ids(tx.as_mut(), "p1").len(), 300);
    assert_eq!(scan_ids(tx.as_mut(), "p2").len(), 300);
    tx.commit().unwrap();

    // Re-scope two rows in a second batch (t0000 twice: the later one wins).
    let mut tx = storage.begin("acme").unwrap();
    let moved = vec![
        task_row(&schema, "t0000", "p9", "title 0", 2),
        task_row(&schema, "t0001", "p9", "title 1", 2),
        task_row(&schema, "t0000", "p3", "title 0", 3),
    ];
    tx.upsert_rows("tasks", &moved).unwrap();
    tx.commit().unwrap();
    assert_eq!(
        storage.get_row("acme", "tasks", "t0000").unwrap(),
        Some(moved[2].clone())
    );
    let mut tx = storage.begin("acme").unwrap();
    assert_eq!(scan_ids(tx.as_mut(), "p3"), vec!["t0000".to_owned()]);
    assert_eq!(scan_ids(tx.as_mut(), "p9"), vec!["t0001".to_owned()]);
    assert_eq!(scan_ids(tx.as_mut(), "p1").len(), 299);
    assert_eq!(scan_ids(tx.as_mut(), "p2").len(), 299);
    assert!(tx.get_rows("tasks", &[]).unwrap().is_empty());
    tx.upsert_rows("tasks", &[]).unwrap();
    tx.rollback().unwrap();
    assert_eq!(
        db.count("SELECT count(*) FROM sync_row_scopes WHERE tbl = 'tasks'"),
        600
    );
}

#[test]
fn batch_validation_and_constraint_violation() {
    let db = TestDb::new();
    let storage = ensured(&db);
    let schema = fix1();
    let mut tx = storage.begin("acme").unwrap();
    let mut bad = task_row(&schema, "t2", "p1", "b", 1);
    bad.row_id.clear();
    let batch = vec![task_row(&schema, "t1", "p1", "a", 1), bad];
    assert_eq!(
        tx.upsert_rows("tasks", &batch).unwrap_err().code(),
        ErrorCode::InvalidRowId
    );
    assert_eq!(
        tx.upsert_rows("nope", &batch[..1]).unwrap_err().code(),
        ErrorCode::UnknownTable
    );
    assert_eq!(
        tx.get_rows("tasks", &["t1".to_owned()]).unwrap(),
        vec![None],
        "a validation error writes nothing and does not poison"
    );

    // tasks_by_project_title is unique: t2 collides with t1 inside the batch.
    let colliding = vec![
        task_row(&schema, "t1", "p1", "same", 1),
        task_row(&schema, "t2", "p1", "same", 1),
    ];
    let error = tx.upsert_rows("tasks", &colliding).unwrap_err();
    assert_eq!(error.code(), ErrorCode::ConstraintViolation);
    assert_eq!(error.op_index_value(), None);
    assert_eq!(
        tx.get_rows("tasks", &["t1".to_owned()]).unwrap_err().code(),
        ErrorCode::TransactionAborted
    );
    assert_eq!(
        tx.commit().unwrap_err().code(),
        ErrorCode::TransactionAborted
    );
    assert_eq!(storage.get_row("acme", "tasks", "t1").unwrap(), None);
}

#[test]
fn batch_projects_every_column_type_as_the_per_row_upsert() {
    let db = TestDb::new();
    let storage = ensured(&db);
    let schema = fix1();
    let table = schema.table("tasks").unwrap();
    let row = |id: &str, project: &str| {
        let values = vec![
            sync_core::RowValue::String(id.into()),
            sync_core::RowValue::String(project.into()),
            sync_core::RowValue::String(format!("title {id}")),
            sync_core::RowValue::Boolean(true),
            sync_core::RowValue::Integer(7),
            sync_core::RowValue::Float(1.5),
            sync_core::RowValue::Json("{\"a\":[1,2]}".into()),
            sync_core::RowValue::Bytes(vec![0, 1, 2]),
            sync_core::RowValue::BlobRef("{\"blobId\":\"b1\"}".into()),
        ];
        StoredRow {
            row_id: id.into(),
            server_version: 1,
            scopes: scopes(&[("project_id", project)]),
            payload: sync_core::codec::encode_row(table, &values).unwrap(),
            column_versions: None,
        }
    };
    let mut tx = storage.begin("acme").unwrap();
    tx.upsert_row("tasks", &row("single", "p1"), None).unwrap();
    tx.upsert_rows("tasks", &[row("batch", "p1")]).unwrap();
    tx.commit().unwrap();
    let projected = |id: &str| -> String {
        db.raw()
            .query_one(
                "SELECT concat_ws('|', project_id, done, priority, score, meta::text, \
                 encode(thumb, 'hex'), attachment, \"_sync_scopes\"::text) \
                 FROM tasks WHERE \"_sync_row_id\" = $1",
                &[&id],
            )
            .unwrap()
            .get(0)
    };
    assert_eq!(projected("single"), projected("batch"));
    assert!(projected("batch").contains("{\"a\": [1, 2]}"));
}
