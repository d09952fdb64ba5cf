//! The default body of `StorageTransaction::begin_push` (the single methods
//! in the lock → gate → idempotency order, then the candidate rows of a
//! fresh key) and `PushPrelude::row`, the lookup of one prefetched row.

#![allow(unused_variables)]

use std::collections::BTreeMap;

use sync_core::*;

fn row(id: &str) -> StoredRow {
    StoredRow {
        row_id: id.to_owned(),
        server_version: 1,
        scopes: BTreeMap::new(),
        payload: id.as_bytes().to_vec(),
    }
}

fn not_called() -> Error {
    Error::backend("not called by begin_push")
}

/// A transaction that answers the prelude's single methods from its fields
/// and records the order of the calls.
struct PreludeTx {
    stored: Option<StoredPushResult>,
    rows: BTreeMap<(String, String), StoredRow>,
    calls: Vec<String>,
}

impl PreludeTx {
    fn new(stored: Option<StoredPushResult>) -> Self {
        let rows = [("tasks", "t1"), ("tasks", "t3"), ("docs", "d1")]
            .into_iter()
            .map(|(t, id)| ((t.to_owned(), id.to_owned()), row(id)))
            .collect();
        Self {
            stored,
            rows,
            calls: Vec::new(),
        }
    }
}

impl StorageTransaction for PreludeTx {
    fn partition(&self) -> &str {
        "p1"
    }
    fn writer_version(&self) -> i32 {
        1
    }
    fn get_row(&mut self, table: &str, row_id: &str) -> Result<Option<StoredRow>> {
        self.calls.push(format!("get_row {table} {row_id}"));
        Ok(self
            .rows
            .get(&(table.to_owned(), row_id.to_owned()))
            .cloned())
    }
    fn get_tombstone_seq(&mut self, table: &str, row_id: &str) -> Result<Option<i64>> {
        Err(not_called())
    }
    fn get_push_result(
        &mut self,
        client_id: &str,
        client_commit_id: &str,
    ) -> Result<Option<StoredPushResult>> {
        self.calls
            .push(format!("get_push_result {client_id} {client_commit_id}"));
        Ok(self.stored.clone())
    }
    fn scan_rows(&mut self, query: &RowScanQuery) -> Result<Vec<StoredRow>> {
        Err(not_called())
    }
    fn scan_partition_rows(
        &mut self,
        table: &str,
        after_row_id: Option<&str>,
        limit: i64,
    ) -> Result<Vec<StoredRow>> {
        Err(not_called())
    }
    fn max_commit_seq(&mut self) -> Result<i64> {
        Err(not_called())
    }
    fn lock_partition_for_push(&mut self) -> Result<()> {
        self.calls.push("lock".to_owned());
        Ok(())
    }
    fn commit_rejected_push_result(
        self: Box<Self>,
        client_id: &str,
        client_commit_id: &str,
        result: &StoredPushResult,
    ) -> Result<()> {
        Err(not_called())
    }
    fn upsert_row(&mut self, table: &str, row: &StoredRow, op_index: Option<u32>) -> Result<()> {
        Err(not_called())
    }
    fn delete_row(&mut self, table: &str, row_id: &str) -> Result<()> {
        Err(not_called())
    }
    fn clear_tombstone(&mut self, table: &str, row_id: &str) -> Result<()> {
        Err(not_called())
    }
    fn append_commit(&mut self, commit: &NewCommit) -> Result<i64> {
        Err(not_called())
    }
    fn put_push_result(
        &mut self,
        client_id: &str,
        client_commit_id: &str,
        result: &StoredPushResult,
    ) -> Result<()> {
        Err(not_called())
    }
    fn read_serve_gate(&mut self, running_schema_version: i32) -> Result<ServeGate> {
        self.calls.push(format!("gate {running_schema_version}"));
        Ok(ServeGate {
            partition: "p1".to_owned(),
            stored_schema_version: 2,
            log_epoch: None,
            pending: Vec::new(),
        })
    }
    fn read_checkpoint(&mut self, name: &str) -> Result<Option<StoredCheckpoint>> {
        Err(not_called())
    }
    fn advance_checkpoint(
        &mut self,
        name: &str,
        owner_epoch: i64,
        watermark: i64,
        observed_rows: i64,
        now_ms: i64,
    ) -> Result<bool> {
        Err(not_called())
    }
    fn activate_checkpoint(
        &mut self,
        name: &str,
        owner_epoch: i64,
        watermark: i64,
        sources: &[String],
        now_ms: i64,
    ) -> Result<ActivationOutcome> {
        Err(not_called())
    }
    fn has_source_changes_above(&mut self, tables: &[String], seq: i64) -> Result<Coverage> {
        Err(not_called())
    }
    fn list_source_changes(
        &mut self,
        tables: &[String],
        after_seq: i64,
        limit: i64,
    ) -> Result<Vec<SourceChange>> {
        Err(not_called())
    }
    fn commit(self: Box<Self>) -> Result<()> {
        Err(not_called())
    }
    fn rollback(self: Box<Self>) -> Result<()> {
        Err(not_called())
    }
}

fn request() -> PushPreludeRequest {
    PushPreludeRequest {
        running_schema_version: 2,
        client_id: "c1".to_owned(),
        client_commit_id: "k1".to_owned(),
        rows: vec![
            ("tasks".to_owned(), vec!["t1".to_owned(), "t2".to_owned()]),
            ("docs".to_owned(), vec!["d1".to_owned()]),
            ("tasks".to_owned(), vec!["t3".to_owned()]),
        ],
    }
}

#[test]
fn a_fresh_key_reads_the_gate_then_the_key_then_the_candidate_rows() {
    let mut tx = PreludeTx::new(None);
    let request = request();
    let prelude = tx.begin_push(&request).unwrap();
    assert_eq!(
        tx.calls,
        [
            "lock",
            "gate 2",
            "get_push_result c1 k1",
            "get_row tasks t1",
            "get_row tasks t2",
            "get_row docs d1",
            "get_row tasks t3",
        ]
    );
    assert_eq!(prelude.gate.stored_schema_version, 2);
    assert_eq!(prelude.push_result.unwrap(), None);
    let rows = prelude.rows.as_ref().expect("a fresh key reads its rows");
    assert_eq!(
        rows,
        &vec![
            vec![Some(row("t1")), None],
            vec![Some(row("d1"))],
            vec![Some(row("t3"))],
        ]
    );
}

#[test]
fn a_replay_reads_no_row() {
    let mut tx = PreludeTx::new(Some(StoredPushResult::applied(7)));
    let prelude = tx.begin_push(&request()).unwrap();
    assert_eq!(tx.calls, ["lock", "gate 2", "get_push_result c1 k1"]);
    assert_eq!(
        prelude.push_result.unwrap(),
        Some(StoredPushResult::applied(7))
    );
    assert!(prelude.rows.is_none());
}

#[test]
fn a_prefetched_row_is_found_by_its_table_and_id() {
    let request = request();
    let prelude = PreludeTx::new(None).begin_push(&request).unwrap();
    // Read and present, in either group of its table.
    assert_eq!(prelude.row(&request, "tasks", "t1"), Some(Some(&row("t1"))));
    assert_eq!(prelude.row(&request, "tasks", "t3"), Some(Some(&row("t3"))));
    assert_eq!(prelude.row(&request, "docs", "d1"), Some(Some(&row("d1"))));
    // Read and absent.
    assert_eq!(prelude.row(&request, "tasks", "t2"), Some(None));
    // Not asked for: under another table, or not at all.
    assert_eq!(prelude.row(&request, "docs", "t1"), None);
    assert_eq!(prelude.row(&request, "tasks", "d1"), None);
    assert_eq!(prelude.row(&request, "tasks", "t9"), None);
    // A prelude without rows answers nothing.
    let replay = PreludeTx::new(Some(StoredPushResult::applied(7)))
        .begin_push(&request)
        .unwrap();
    assert_eq!(replay.row(&request, "tasks", "t1"), None);
}
