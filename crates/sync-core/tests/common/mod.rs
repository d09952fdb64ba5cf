//! A storage transaction for the tests of default bodies: it answers the
//! push prelude's single methods from its fields, records their calls in
//! order, keeps every optional method's default body, and fails every other
//! required method.

#![allow(unused_variables, dead_code)]

use std::collections::BTreeMap;

use sync_core::*;

pub fn row(id: &str) -> StoredRow {
    StoredRow {
        row_id: id.to_owned(),
        server_version: 1,
        scopes: BTreeMap::new(),
        payload: id.as_bytes().to_vec(),
        column_versions: None,
    }
}

fn not_called() -> Error {
    Error::backend("not called by begin_push")
}

/// A transaction that answers the prelude's single methods from its fields
/// and records the order of the calls.
pub struct PreludeTx {
    stored: Option<StoredPushResult>,
    rows: BTreeMap<(String, String), StoredRow>,
    pub calls: Vec<String>,
}

impl PreludeTx {
    pub fn new(stored: Option<StoredPushResult>) -> Self {
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
    fn get_delete_scopes(
        &mut self,
        table: &str,
        row_id: &str,
        commit_seq: i64,
    ) -> Result<Option<sync_core::StoredScopes>> {
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
