//! The candidate reader handed to hooks that run inside a push
//! (`engine.md` §4.8): reads see the commit's staged writes.

use sync_core::{ScopeFilter, StoredScopes};

use super::validators::RowValues;

/// A candidate row: decoded values plus its version and stored scopes.
#[derive(Debug, Clone, PartialEq)]
pub struct CandidateRow {
    /// Row id.
    pub row_id: String,
    /// Server version.
    pub server_version: i64,
    /// Stored scopes.
    pub scopes: StoredScopes,
    /// Decoded column values.
    pub values: RowValues,
}

/// A scope scan through the reader.
#[derive(Debug, Clone, PartialEq)]
pub struct CandidateScan {
    /// Table.
    pub table: String,
    /// Scope filter (must not be empty).
    pub scope_filter: ScopeFilter,
    /// Keyset cursor: rows with a greater id.
    pub after_row_id: Option<String>,
    /// At most this many rows; `None` = 100; allowed 1..=1000.
    pub limit: Option<i64>,
}

/// Reads the candidate state of the partition inside the push transaction.
/// Errors are storage errors; a transaction-poisoning one fails the request
/// whatever the hook then returns.
pub trait CandidateReader {
    /// The candidate row, if present.
    fn get_row(&mut self, table: &str, row_id: &str) -> sync_core::Result<Option<CandidateRow>>;

    /// Rows matching a scope filter, ascending by row id.
    fn scan_rows(&mut self, scan: &CandidateScan) -> sync_core::Result<Vec<CandidateRow>>;
}
