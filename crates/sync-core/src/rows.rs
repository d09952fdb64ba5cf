//! Rows, changes and commits (`storage-contract.md` §2.2).

use crate::scope::StoredScopes;

/// The current state of one application row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredRow {
    /// Row id (rendering of the primary-key value); non-empty.
    pub row_id: String,
    /// 1 on insert, +1 per applied upsert (maintained by the push layer).
    pub server_version: i64,
    /// Stored scopes (variable → value).
    pub scopes: StoredScopes,
    /// Row codec bytes, returned byte-identical to what was written.
    pub payload: Vec<u8>,
    /// The row's column versions (wire version 3,
    /// [`crate::column_versions`]) as stored in `_sync_column_versions`:
    /// opaque to storage, written with the payload and returned
    /// byte-identical by `get_row` and the push path's reads. `None` is SQL
    /// `NULL` (every column at `server_version`). Reads that serve pulls
    /// (scans, pages, windows) do not read it and leave `None`.
    pub column_versions: Option<Vec<u8>>,
}

/// A row as a bootstrap serves it: a [`StoredRow`] without its scopes and
/// column versions (`ServerStorage::scan_row_payloads`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScannedRow {
    /// Row id (rendering of the primary-key value); non-empty.
    pub row_id: String,
    /// The row's version.
    pub server_version: i64,
    /// Row codec bytes, returned byte-identical to what was written.
    pub payload: Vec<u8>,
}

impl From<StoredRow> for ScannedRow {
    fn from(row: StoredRow) -> Self {
        Self {
            row_id: row.row_id,
            server_version: row.server_version,
            payload: row.payload,
        }
    }
}

/// The operation of a change. Stored as 1 (upsert) / 2 (delete).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChangeOp {
    /// Insert or replace.
    Upsert,
    /// Delete.
    Delete,
}

impl ChangeOp {
    /// The stored integer form.
    pub fn as_i16(self) -> i16 {
        match self {
            ChangeOp::Upsert => 1,
            ChangeOp::Delete => 2,
        }
    }

    /// Reads the stored form: 1 is an upsert, anything else a delete.
    pub fn from_stored(value: i64) -> Self {
        if value == 1 {
            ChangeOp::Upsert
        } else {
            ChangeOp::Delete
        }
    }

    /// `upsert` / `delete`.
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeOp::Upsert => "upsert",
            ChangeOp::Delete => "delete",
        }
    }
}

/// One row-level change to append. Upserts carry `row_version` and
/// `payload`; deletes carry neither (`sync.storage.invalid_change` otherwise).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewChange {
    /// Table name.
    pub table: String,
    /// Row id.
    pub row_id: String,
    /// Operation.
    pub op: ChangeOp,
    /// Row version after the change (upserts only).
    pub row_version: Option<i64>,
    /// The row's stored scopes (for deletes: the deleted row's scopes).
    pub scopes: StoredScopes,
    /// Row codec bytes (upserts only).
    pub payload: Option<Vec<u8>>,
}

impl NewChange {
    /// An upsert change.
    pub fn upsert(
        table: impl Into<String>,
        row_id: impl Into<String>,
        row_version: i64,
        scopes: StoredScopes,
        payload: Vec<u8>,
    ) -> Self {
        Self {
            table: table.into(),
            row_id: row_id.into(),
            op: ChangeOp::Upsert,
            row_version: Some(row_version),
            scopes,
            payload: Some(payload),
        }
    }

    /// A delete change carrying the deleted row's stored scopes.
    pub fn delete(
        table: impl Into<String>,
        row_id: impl Into<String>,
        scopes: StoredScopes,
    ) -> Self {
        Self {
            table: table.into(),
            row_id: row_id.into(),
            op: ChangeOp::Delete,
            row_version: None,
            scopes,
            payload: None,
        }
    }

    /// Why the fields do not match the operation, `None` when they do.
    pub fn consistency_error(&self) -> Option<&'static str> {
        match (self.op, self.row_version.is_some(), self.payload.is_some()) {
            (ChangeOp::Upsert, true, true) | (ChangeOp::Delete, false, false) => None,
            (ChangeOp::Upsert, false, _) => Some("upsert_without_row_version"),
            (ChangeOp::Upsert, true, false) => Some("upsert_without_payload"),
            (ChangeOp::Delete, true, _) => Some("delete_with_row_version"),
            (ChangeOp::Delete, false, true) => Some("delete_with_payload"),
        }
    }
}

/// A stored change; same fields as [`NewChange`].
pub type StoredChange = NewChange;

/// A commit to append.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewCommit {
    /// Pushing client.
    pub client_id: String,
    /// The client's id of this commit.
    pub client_commit_id: String,
    /// Acting user or service.
    pub actor_id: String,
    /// Creation time (ms since the epoch).
    pub created_at_ms: i64,
    /// Ordered changes; may be empty (still consumes a `commit_seq`).
    pub changes: Vec<NewChange>,
}

impl NewCommit {
    /// For each change, whether appending the commit leaves a tombstone for
    /// its row: a delete that no later change of the same row in this
    /// commit follows. A row deleted and then written again in one commit
    /// is live afterwards and keeps no tombstone of that commit; a row
    /// written and then deleted keeps one (`docs/design/wire-v3.md` §3.3).
    pub fn tombstones(&self) -> Vec<bool> {
        let mut later: std::collections::HashSet<(&str, &str)> =
            std::collections::HashSet::with_capacity(self.changes.len());
        let mut leaves = vec![false; self.changes.len()];
        for (i, change) in self.changes.iter().enumerate().rev() {
            let first_from_the_end = later.insert((change.table.as_str(), change.row_id.as_str()));
            leaves[i] = first_from_the_end && change.op == ChangeOp::Delete;
        }
        leaves
    }
}

/// A commit returned by window reads: only the matching changes of the
/// queried table, in original index order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredCommit {
    /// Dense per-partition sequence number.
    pub commit_seq: i64,
    /// Creation time.
    pub created_at_ms: i64,
    /// Acting user or service.
    pub actor_id: String,
    /// Matching changes.
    pub changes: Vec<StoredChange>,
}

/// Admin view of one commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitMetadata {
    /// Sequence number.
    pub commit_seq: i64,
    /// Pushing client.
    pub client_id: String,
    /// The client's commit id.
    pub client_commit_id: String,
    /// Actor.
    pub actor_id: String,
    /// Creation time.
    pub created_at_ms: i64,
    /// Number of changes of the commit (all tables).
    pub change_count: i64,
    /// Distinct tables touched, byte-ordered.
    pub tables: Vec<String>,
}

/// One entry of the RFC 0007 catch-up listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceChange {
    /// Sequence number of the change's commit.
    pub commit_seq: i64,
    /// Position of the change in its commit.
    pub idx: i64,
    /// The commit's client id.
    pub client_id: String,
    /// Table.
    pub table: String,
    /// Row id.
    pub row_id: String,
    /// Operation.
    pub op: ChangeOp,
}

/// A whole stored commit with every change (admin read, oldest first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitRecord {
    /// Sequence number.
    pub commit_seq: i64,
    /// Pushing client.
    pub client_id: String,
    /// The client's commit id.
    pub client_commit_id: String,
    /// Actor.
    pub actor_id: String,
    /// Creation time.
    pub created_at_ms: i64,
    /// Writer version stamped on the commit (`None` for fence-unaware writers).
    pub writer_version: Option<i32>,
    /// Every change in index order.
    pub changes: Vec<StoredChange>,
}
