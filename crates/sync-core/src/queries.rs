//! Query and result types of the read surface (`storage-contract.md` §2.5).

use crate::scope::{ScopeFilter, StoredScopes};
use crate::value::RowValue;

/// A scope-filtered commit window: `after_seq < commit_seq ≤ through_seq`, oldest first.
#[derive(Debug, Clone, PartialEq)]
pub struct CommitWindowQuery {
    /// Table whose changes are returned.
    pub table: String,
    /// Scope filter.
    pub scope_filter: ScopeFilter,
    /// Exclusive lower bound.
    pub after_seq: i64,
    /// Inclusive upper bound.
    pub through_seq: i64,
    /// Stop after the commit that brings the matching-change count to this limit.
    pub limit_changes: i64,
}

/// A scope-filtered row scan with an exclusive resume key.
#[derive(Debug, Clone, PartialEq)]
pub struct RowScanQuery {
    /// Table.
    pub table: String,
    /// Scope filter (must not be empty).
    pub scope_filter: ScopeFilter,
    /// Resume after this row id.
    pub after_row_id: Option<String>,
    /// Maximum rows.
    pub limit: i64,
}

/// A trusted exact lookup through a declared index.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexRowScanQuery {
    /// Table.
    pub table: String,
    /// Declared index name.
    pub index: String,
    /// One value per index column, in declaration order (`Null` matches SQL NULL).
    pub values: Vec<RowValue>,
    /// Resume after this row id.
    pub after_row_id: Option<String>,
    /// Maximum rows, 1..=1000.
    pub limit: i64,
}

/// Admin listing of commit metadata, newest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitMetadataQuery {
    /// Exclusive lower bound.
    pub after_seq: i64,
    /// Exclusive upper bound (paging), if any.
    pub before_seq: Option<i64>,
    /// Maximum commits.
    pub limit: i64,
    /// Only commits with at least one change to this table.
    pub table: Option<String>,
}

/// Admin listing of commits touching one scope value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScopeActivityQuery {
    /// Scope variable.
    pub variable: String,
    /// Scope value.
    pub value: String,
    /// Maximum entries.
    pub limit: i64,
}

/// One `(commit, table)` pair of scope activity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScopeCommitActivity {
    /// Commit.
    pub commit_seq: i64,
    /// Table.
    pub table: String,
    /// Commit time.
    pub created_at_ms: i64,
    /// Commit actor.
    pub actor_id: String,
    /// Number of that table's changes in the commit.
    pub change_count: i64,
}

/// A row referencing a blob.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlobReferencingRow {
    /// Table.
    pub table: String,
    /// Row id.
    pub row_id: String,
    /// The row's current stored scopes.
    pub scopes: StoredScopes,
}

/// Epoch-fenced pruning request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitPruneQuery {
    /// The log epoch the retention inputs were computed under.
    pub log_epoch: String,
    /// Prune commits with `commit_seq ≤ through_seq`.
    pub through_seq: i64,
}

/// Outcome of a prune.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommitPruneResult {
    /// Horizon before the prune.
    pub previous_horizon_seq: i64,
    /// Horizon after the prune.
    pub horizon_seq: i64,
    /// Number of deleted commit rows.
    pub removed_commits: i64,
}
