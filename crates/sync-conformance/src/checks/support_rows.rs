//! Helpers shared by the commit-log, rows and idempotency groups: scope
//! filters, scans reduced to row ids, commits built from rows, and a `tasks`
//! row with every column set.

use sync_core::{
    CompiledSchema, NewChange, NewCommit, RowScanQuery, RowValue, ScopeFilter, ServerStorage,
    StorageTransaction, StoredRow,
};

use crate::check::CheckResult;
use crate::context::NOW;
use crate::fixtures::task_with;

/// `{variable: values}`.
pub(crate) fn filter(variable: &str, values: &[&str]) -> ScopeFilter {
    [(
        variable.to_owned(),
        values.iter().map(|v| (*v).to_owned()).collect(),
    )]
    .into()
}

/// A row scan of `table` in `partition` filtered on one scope value (limit 100).
pub(crate) fn scan_query(table: &str, variable: &str, value: &str) -> RowScanQuery {
    RowScanQuery {
        table: table.to_owned(),
        scope_filter: filter(variable, &[value]),
        after_row_id: None,
        limit: 100,
    }
}

/// The row ids a committed `scan_rows` returns for one scope value.
pub(crate) fn scan_ids(
    storage: &dyn ServerStorage,
    partition: &str,
    table: &str,
    variable: &str,
    value: &str,
) -> CheckResult<Vec<String>> {
    let rows = storage.scan_rows(partition, &scan_query(table, variable, value))?;
    Ok(rows.into_iter().map(|r| r.row_id).collect())
}

/// The row ids a transaction's `scan_rows` returns for one scope value.
pub(crate) fn tx_scan_ids(
    tx: &mut dyn StorageTransaction,
    table: &str,
    variable: &str,
    value: &str,
) -> CheckResult<Vec<String>> {
    let rows = tx.scan_rows(&scan_query(table, variable, value))?;
    Ok(rows.into_iter().map(|r| r.row_id).collect())
}

/// A commit of client `client-1` with these changes.
pub(crate) fn commit_of(client_commit_id: &str, changes: Vec<NewChange>) -> NewCommit {
    NewCommit {
        client_id: "client-1".to_owned(),
        client_commit_id: client_commit_id.to_owned(),
        actor_id: "actor-1".to_owned(),
        created_at_ms: NOW,
        changes,
    }
}

/// The upsert change of `row` in `table`.
pub(crate) fn upsert_change(table: &str, row: &StoredRow) -> NewChange {
    NewChange::upsert(
        table,
        row.row_id.clone(),
        row.server_version,
        row.scopes.clone(),
        row.payload.clone(),
    )
}

/// Upserts `rows` into `table` of `partition` under the push lock, appends
/// their commit and commits; returns the `commit_seq`.
pub(crate) fn write_rows(
    storage: &dyn ServerStorage,
    partition: &str,
    table: &str,
    client_commit_id: &str,
    rows: &[StoredRow],
) -> CheckResult<i64> {
    let mut tx = storage.begin(partition)?;
    tx.lock_partition_for_push()?;
    for (index, row) in rows.iter().enumerate() {
        tx.upsert_row(table, row, u32::try_from(index).ok())?;
    }
    let changes = rows.iter().map(|r| upsert_change(table, r)).collect();
    let seq = tx.append_commit(&commit_of(client_commit_id, changes))?;
    tx.commit()?;
    Ok(seq)
}

/// A `tasks` row with every column non-NULL (`done` as given).
pub(crate) fn full_task(
    schema: &CompiledSchema,
    id: &str,
    project: &str,
    title: &str,
    done: bool,
) -> CheckResult<StoredRow> {
    let mut values = vec![
        RowValue::String(id.to_owned()),
        RowValue::String(project.to_owned()),
        RowValue::String(title.to_owned()),
        RowValue::Boolean(done),
        RowValue::Integer(7),
        RowValue::Float(2.5),
        RowValue::Json(r#"{"k":[1,2],"é":null}"#.to_owned()),
        RowValue::Bytes(vec![0x00, 0x01, 0xff]),
        RowValue::BlobRef(r#"{"blobId":"blob-1"}"#.to_owned()),
    ];
    let width = schema
        .table("tasks")
        .map_or(values.len(), |t| t.columns.len());
    values.resize(width, RowValue::Null);
    task_with(schema, values)
}
