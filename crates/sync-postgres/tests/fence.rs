//! The database-side writer fence (`tables.md` §4).

mod common;

use common::*;
use sync_core::{EnsureOptions, ErrorCode, ServerStorage};

fn raw_insert(
    db: &TestDb,
    partition: &str,
    seq: i64,
    version: Option<i32>,
) -> Result<u64, postgres::Error> {
    db.raw().execute(
        "INSERT INTO sync_commits (partition, commit_seq, client_id, client_commit_id, actor_id, \
           created_at_ms, writer_version) VALUES ($1, $2, 'raw', 'raw', 'raw', 0, $3)",
        &[&partition, &seq, &version],
    )
}

fn expect_fence_error(result: Result<u64, postgres::Error>) {
    let error = result.expect_err("the fence must reject the insert");
    let db_error = error.as_db_error().expect("a server error");
    assert_eq!(db_error.code().code(), "P0001");
    assert!(db_error
        .message()
        .contains("sync.storage.writer_fence_rejected"));
}

#[test]
fn trigger_rejects_null_and_low_writer_versions() {
    let db = TestDb::new();
    let storage = ensured(&db);
    assert_eq!(storage.required_writer_version("p1").unwrap(), Some(1));
    expect_fence_error(raw_insert(&db, "p1", 1, None));
    expect_fence_error(raw_insert(&db, "p1", 1, Some(0)));
    raw_insert(&db, "p1", 1, Some(1)).unwrap();
    db.raw()
        .batch_execute("INSERT INTO sync_writer_fence VALUES ('p1', 5)")
        .unwrap();
    assert_eq!(storage.required_writer_version("p1").unwrap(), Some(5));
    expect_fence_error(raw_insert(&db, "p1", 2, Some(4)));
    raw_insert(&db, "p2", 1, Some(1)).unwrap();

    // Through the storage: a writer below the partition fence is refused and poisoned.
    let mut tx = storage.begin("p1").unwrap();
    tx.lock_partition_for_push().unwrap();
    let error = tx.append_commit(&commit("c", "cc", vec![])).unwrap_err();
    assert_eq!(error.code(), ErrorCode::WriterFenceRejected);
    assert_eq!(
        tx.commit_rejected_push_result("c", "cc", &sync_core::StoredPushResult::applied(1))
            .unwrap_err()
            .code(),
        ErrorCode::TransactionAborted
    );
    // Raw inserts bypass the counter; the refused append allocated nothing.
    assert_eq!(storage.get_max_commit_seq("p1").unwrap(), 0);
    assert_eq!(
        db.count("SELECT count(*) FROM sync_commits WHERE partition = 'p1'"),
        1
    );
    assert_eq!(storage.get_push_result("p1", "c", "cc").unwrap(), None);
}

#[test]
fn an_instance_that_never_ensured_is_fenced_out() {
    let db = TestDb::new();
    ensured(&db);
    let stranger = db.open();
    assert_eq!(stranger.ensured_version(), None);
    let mut tx = stranger.begin("p1").unwrap();
    assert_eq!(tx.writer_version(), 0);
    assert_eq!(
        tx.append_commit(&commit("c", "cc", vec![]))
            .unwrap_err()
            .code(),
        ErrorCode::WriterFenceRejected
    );
    tx.rollback().unwrap();
    assert_eq!(stranger.get_max_commit_seq("p1").unwrap(), 0);
    stranger
        .ensure_schema(&fix1(), &EnsureOptions::default())
        .unwrap();
    let mut tx = stranger.begin("p1").unwrap();
    assert_eq!(tx.append_commit(&commit("c", "cc", vec![])).unwrap(), 1);
    tx.commit().unwrap();
}

#[test]
fn fence_function_follows_its_schema_whatever_the_session_search_path() {
    let db = TestDb::new();
    ensured(&db);
    let mut other = client();
    let result = other.execute(
        &format!(
            "INSERT INTO \"{}\".sync_commits (partition, commit_seq, client_id, client_commit_id, \
               actor_id, created_at_ms, writer_version) VALUES ('p1', 1, 'x', 'x', 'x', 0, NULL)",
            db.schema
        ),
        &[],
    );
    expect_fence_error(result);
}
