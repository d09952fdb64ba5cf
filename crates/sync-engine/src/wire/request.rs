//! Request frames (`engine.md` §2.1): `REQ_HEADER`, `PUSH_COMMIT`,
//! `PULL_HEADER` and `SUBSCRIPTION`, assembled into one [`SyncRequest`].

use sync_core::ScopeFilter;

/// One decoded sync request: the frames of one round in wire order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncRequest {
    /// Wire version of the envelope (1, 2 or 3): it selects the write
    /// rules of the pushes and the encoding of the response.
    pub wire_version: u16,
    /// The `REQ_HEADER` frame.
    pub header: ReqHeader,
    /// `PUSH_COMMIT` frames in client order.
    pub pushes: Vec<PushCommit>,
    /// The optional `PULL_HEADER` frame.
    pub pull: Option<PullHeader>,
    /// `SUBSCRIPTION` frames in request order (only with a pull).
    pub subscriptions: Vec<Subscription>,
}

/// The `REQ_HEADER` frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReqHeader {
    /// `clientId`: stable per device, non-empty.
    pub client_id: String,
    /// `schemaVersion`: the client's schema version, at least 1.
    pub schema_version: i32,
    /// `logEpoch` (wire version 2 only); absent = epoch acquisition.
    pub log_epoch: Option<String>,
}

/// One `PUSH_COMMIT` frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushCommit {
    /// `clientCommitId`: the idempotency key together with the partition and `clientId`.
    pub client_commit_id: String,
    /// `operations`, at least one.
    pub operations: Vec<Operation>,
}

/// Operation kind of a push operation and of a change (`upsert` = 1, `delete` = 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpKind {
    /// Insert or update.
    Upsert,
    /// Delete.
    Delete,
}

impl OpKind {
    /// The wire name (`"upsert"` / `"delete"`).
    pub fn as_str(self) -> &'static str {
        match self {
            OpKind::Upsert => "upsert",
            OpKind::Delete => "delete",
        }
    }

    /// Parses a wire name.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "upsert" => Some(OpKind::Upsert),
            "delete" => Some(OpKind::Delete),
            _ => None,
        }
    }

    /// The storage change operation of this kind.
    pub fn change_op(self) -> sync_core::ChangeOp {
        match self {
            OpKind::Upsert => sync_core::ChangeOp::Upsert,
            OpKind::Delete => sync_core::ChangeOp::Delete,
        }
    }

    /// The kind of a storage change operation.
    pub fn of_change(op: sync_core::ChangeOp) -> Self {
        match op {
            sync_core::ChangeOp::Upsert => OpKind::Upsert,
            sync_core::ChangeOp::Delete => OpKind::Delete,
        }
    }
}

/// One operation of a push commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operation {
    /// `table`: any string; an unknown table is a commit-level error.
    pub table: String,
    /// `rowId`: the primary key rendering.
    pub row_id: String,
    /// `op`.
    pub op: OpKind,
    /// `baseVersion`: absent = last write wins; ignored on deletes.
    pub base_version: Option<i64>,
    /// `payload`: row codec bytes, present iff `op = upsert`.
    pub payload: Option<Vec<u8>>,
}

impl Operation {
    /// An upsert of `payload` (row codec bytes) into `table`.
    pub fn upsert(
        table: impl Into<String>,
        row_id: impl Into<String>,
        base_version: Option<i64>,
        payload: Vec<u8>,
    ) -> Self {
        Self {
            table: table.into(),
            row_id: row_id.into(),
            op: OpKind::Upsert,
            base_version,
            payload: Some(payload),
        }
    }

    /// A delete of `row_id` from `table`.
    pub fn delete(table: impl Into<String>, row_id: impl Into<String>) -> Self {
        Self {
            table: table.into(),
            row_id: row_id.into(),
            op: OpKind::Delete,
            base_version: None,
            payload: None,
        }
    }
}

/// The `PULL_HEADER` frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PullHeader {
    /// `limitCommits`: changes per subscription (0 = default; clamped).
    pub limit_commits: i32,
    /// `limitSnapshotRows`: rows per bootstrap page (0 = default; clamped).
    pub limit_snapshot_rows: i32,
    /// `maxSnapshotPages`: pages per subscription per round (0 = default; clamped).
    pub max_snapshot_pages: i32,
    /// `accept`: bit 0 inline rows, bit 1 external rows, bit 2 sqlite,
    /// bit 3 signed URLs; bits 4–7 must be zero.
    pub accept: u8,
}

impl Default for PullHeader {
    /// Defaults for every limit and inline rows accepted.
    fn default() -> Self {
        Self {
            limit_commits: 0,
            limit_snapshot_rows: 0,
            max_snapshot_pages: 0,
            accept: 0b0001,
        }
    }
}

/// One `SUBSCRIPTION` frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subscription {
    /// `id`: unique within the request.
    pub id: String,
    /// `table`: a schema table.
    pub table: String,
    /// `scopes`: the requested scope values per variable.
    pub scopes: ScopeFilter,
    /// `params`: host-opaque JSON text, accepted and ignored.
    pub params: Option<String>,
    /// `cursor`: last fully applied `commitSeq`; −1 = never synced.
    pub cursor: i64,
    /// `bootstrapState`: the resume token as JSON text (opaque to clients).
    pub bootstrap_state: Option<String>,
}

impl Subscription {
    /// A subscription without params or resume token.
    pub fn new(
        id: impl Into<String>,
        table: impl Into<String>,
        scopes: ScopeFilter,
        cursor: i64,
    ) -> Self {
        Self {
            id: id.into(),
            table: table.into(),
            scopes,
            params: None,
            cursor,
            bootstrap_state: None,
        }
    }
}
