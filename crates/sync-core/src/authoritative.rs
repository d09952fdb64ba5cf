//! Registered (authoritative) queries (`storage-contract.md` §2.7, §4.13).

use crate::value::SqlValue;

/// A registered query bound to one partition.
#[derive(Debug, Clone, PartialEq)]
pub struct AuthoritativeQueryRequest {
    /// Generated SQLite-family SQL with positional `?` / `?N` binds.
    pub sql: String,
    /// Bind values.
    pub params: Vec<SqlValue>,
    /// Declared dependency set: exactly the tables the SQL references.
    pub tables: Vec<String>,
}

/// Rows of a registered query with the partition's `max_commit_seq` from the same snapshot.
#[derive(Debug, Clone, PartialEq)]
pub struct AuthoritativeQueryResult {
    /// Column names.
    pub columns: Vec<String>,
    /// Rows.
    pub rows: Vec<Vec<SqlValue>>,
    /// The partition counter in the query's snapshot.
    pub max_commit_seq: i64,
}
