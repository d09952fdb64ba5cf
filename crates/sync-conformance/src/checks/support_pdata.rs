//! Helpers shared by the reactions, scope-reads, lookups, pruning, clients
//! and blobs-admin groups: building commits and queries, writing rows and
//! commits directly through transactions, and projecting results to ids.

use std::thread;

use sync_core::{
    CommitWindowQuery, IndexRowScanQuery, NewChange, NewCommit, RowScanQuery, RowValue,
    ScopeFilter, ServerStorage, StoredCommit, StoredRow,
};

use crate::check::{CheckResult, Failure};
use crate::context::NOW;

/// The partition most checks of these groups write to.
pub(crate) const P: &str = "part-1";

/// The log epoch partitions are registered with.
pub(crate) const EPOCH: &str = "epoch-1";

/// A scope filter from `(variable, values)` pairs.
pub(crate) fn filter(pairs: &[(&str, &[&str])]) -> ScopeFilter {
    pairs
        .iter()
        .map(|(variable, values)| {
            (
                (*variable).to_owned(),
                values.iter().map(|v| (*v).to_owned()).collect(),
            )
        })
        .collect()
}

/// `{project_id: [project]}`.
pub(crate) fn project(project: &str) -> ScopeFilter {
    filter(&[("project_id", &[project])])
}

/// An upsert change carrying the row's version, scopes and payload.
pub(crate) fn upsert_change(table: &str, row: &StoredRow) -> NewChange {
    NewChange::upsert(
        table,
        row.row_id.clone(),
        row.server_version,
        row.scopes.clone(),
        row.payload.clone(),
    )
}

/// A commit of `client-1` created at `created_at_ms`.
pub(crate) fn commit_at(
    client_commit_id: &str,
    created_at_ms: i64,
    changes: Vec<NewChange>,
) -> NewCommit {
    NewCommit {
        client_id: "client-1".to_owned(),
        client_commit_id: client_commit_id.to_owned(),
        actor_id: "actor-1".to_owned(),
        created_at_ms,
        changes,
    }
}

/// Appends one commit in its own committed transaction (under the push lock).
pub(crate) fn append(
    storage: &dyn ServerStorage,
    partition: &str,
    commit: &NewCommit,
) -> CheckResult<i64> {
    let mut tx = storage.begin(partition)?;
    tx.lock_partition_for_push()?;
    let seq = tx.append_commit(commit)?;
    tx.commit()?;
    Ok(seq)
}

/// Appends one commit of `changes` created at [`NOW`].
pub(crate) fn append_changes(
    storage: &dyn ServerStorage,
    partition: &str,
    client_commit_id: &str,
    changes: Vec<NewChange>,
) -> CheckResult<i64> {
    append(
        storage,
        partition,
        &commit_at(client_commit_id, NOW, changes),
    )
}

/// Appends `count` empty commits created at [`NOW`]; returns the last seq.
pub(crate) fn append_empty(
    storage: &dyn ServerStorage,
    partition: &str,
    count: usize,
) -> CheckResult<i64> {
    let mut last = 0;
    for n in 0..count {
        last = append_changes(storage, partition, &format!("empty-{n}"), Vec::new())?;
    }
    Ok(last)
}

/// Writes rows of one table in one committed transaction (no commit-log entry).
pub(crate) fn write_rows(
    storage: &dyn ServerStorage,
    partition: &str,
    table: &str,
    rows: &[StoredRow],
) -> CheckResult {
    let mut tx = storage.begin(partition)?;
    for row in rows {
        tx.upsert_row(table, row, None)?;
    }
    tx.commit()?;
    Ok(())
}

/// Registers a partition with [`EPOCH`] at [`NOW`].
pub(crate) fn touch(storage: &dyn ServerStorage, partition: &str) -> CheckResult {
    storage.touch_partition(partition, NOW, EPOCH)?;
    Ok(())
}

/// A commit window over the whole log.
pub(crate) fn window(
    table: &str,
    scope_filter: ScopeFilter,
    after_seq: i64,
    limit_changes: i64,
) -> CommitWindowQuery {
    CommitWindowQuery {
        table: table.to_owned(),
        scope_filter,
        after_seq,
        through_seq: sync_core::limits::MAX_SAFE_INTEGER,
        limit_changes,
    }
}

/// A scope scan.
pub(crate) fn row_scan(
    table: &str,
    scope_filter: ScopeFilter,
    after_row_id: Option<&str>,
    limit: i64,
) -> RowScanQuery {
    RowScanQuery {
        table: table.to_owned(),
        scope_filter,
        after_row_id: after_row_id.map(str::to_owned),
        limit,
    }
}

/// A trusted index lookup.
pub(crate) fn index_scan(
    table: &str,
    index: &str,
    values: Vec<RowValue>,
    after_row_id: Option<&str>,
    limit: i64,
) -> IndexRowScanQuery {
    IndexRowScanQuery {
        table: table.to_owned(),
        index: index.to_owned(),
        values,
        after_row_id: after_row_id.map(str::to_owned),
        limit,
    }
}

/// A string row value.
pub(crate) fn text(value: &str) -> RowValue {
    RowValue::String(value.to_owned())
}

/// The `commit_seq` of every commit, in order.
pub(crate) fn seqs(commits: &[StoredCommit]) -> Vec<i64> {
    commits.iter().map(|c| c.commit_seq).collect()
}

/// The row id of every row, in order.
pub(crate) fn ids(rows: &[StoredRow]) -> Vec<String> {
    rows.iter().map(|r| r.row_id.clone()).collect()
}

/// Owned strings from literals (for comparisons with `ids`).
pub(crate) fn strings(values: &[&str]) -> Vec<String> {
    values.iter().map(|v| (*v).to_owned()).collect()
}

/// The value of a joined scoped thread, turning a panic into a failure.
pub(crate) fn joined<T>(result: thread::Result<T>) -> CheckResult<T> {
    result.map_err(|_| Failure::new("a worker thread panicked"))
}
