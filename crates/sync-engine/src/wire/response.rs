//! Response items (`engine.md` §2.2), in emission order: one [`RespHeader`],
//! one [`PushResult`] per push commit, then per subscription a
//! [`SubStart`], zero or more [`CommitItem`]s or [`BootstrapPage`]s and a
//! [`SubEnd`]; an `Error` may replace the remainder; `End` last.

use sync_core::{PushOperationResult, StoredScopes};

use super::request::OpKind;
use super::wire_error::WireError;

/// One item of a sync round's response.
#[derive(Debug, Clone, PartialEq)]
pub enum ResponseItem {
    /// `RESP_HEADER`.
    Header(RespHeader),
    /// `PUSH_RESULT` (plus its `PUSH_RESULT_DETAILS` companion in the rendering).
    PushResult(PushResult),
    /// `SUB_START`.
    SubStart(SubStart),
    /// `COMMIT`.
    Commit(CommitItem),
    /// One page of bootstrap rows (the transport encodes it as a segment).
    BootstrapPage(BootstrapPage),
    /// `SUB_END`.
    SubEnd(SubEnd),
    /// `ERROR`: a request-level error after the first item.
    Error(WireError),
    /// `END`.
    End,
}

impl ResponseItem {
    /// The frame name of the item (`"RESP_HEADER"`, `"PUSH_RESULT"`, …).
    pub fn frame_type(&self) -> &'static str {
        match self {
            ResponseItem::Header(_) => "RESP_HEADER",
            ResponseItem::PushResult(_) => "PUSH_RESULT",
            ResponseItem::SubStart(_) => "SUB_START",
            ResponseItem::Commit(_) => "COMMIT",
            ResponseItem::BootstrapPage(_) => "BOOTSTRAP_PAGE",
            ResponseItem::SubEnd(_) => "SUB_END",
            ResponseItem::Error(_) => "ERROR",
            ResponseItem::End => "END",
        }
    }
}

/// The `RESP_HEADER` frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RespHeader {
    /// `requiredSchemaVersion`: present on floor responses only.
    pub required_schema_version: Option<i32>,
    /// `latestSchemaVersion`: the running schema version.
    pub latest_schema_version: Option<i32>,
    /// `logEpoch` (wire version 2): the partition's registry epoch.
    pub log_epoch: Option<String>,
    /// `resetRequired` (wire version 2).
    pub reset_required: bool,
}

/// Commit status of a push result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PushResultStatus {
    /// Applied by this delivery (1).
    Applied,
    /// Applied by an earlier delivery; the stored outcome is replayed (2).
    Cached,
    /// Rejected; one terminating record (3).
    Rejected,
}

impl PushResultStatus {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            PushResultStatus::Applied => "applied",
            PushResultStatus::Cached => "cached",
            PushResultStatus::Rejected => "rejected",
        }
    }

    /// Parses a wire name.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "applied" => Some(PushResultStatus::Applied),
            "cached" => Some(PushResultStatus::Cached),
            "rejected" => Some(PushResultStatus::Rejected),
            _ => None,
        }
    }
}

/// The `PUSH_RESULT` frame. Result records are [`PushOperationResult`]s:
/// `applied`, `conflict` (`code`, `message`, `serverVersion`, `serverRow`)
/// or `error` (`code`, `message`, `retryable`, optional details, rendered
/// as the `PUSH_RESULT_DETAILS` companion frame).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushResult {
    /// `clientCommitId` of the commit.
    pub client_commit_id: String,
    /// `status`.
    pub status: PushResultStatus,
    /// `commitSeq`: present iff applied or cached.
    pub commit_seq: Option<i64>,
    /// `results`: one record per operation when applied, the terminating
    /// record when rejected.
    pub results: Vec<PushOperationResult>,
}

/// Status of a pull section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SectionStatus {
    /// Served (1).
    Active,
    /// No effective scope remains (2).
    Revoked,
    /// The cursor is behind the horizon; the client re-bootstraps (3).
    Reset,
}

impl SectionStatus {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            SectionStatus::Active => "active",
            SectionStatus::Revoked => "revoked",
            SectionStatus::Reset => "reset",
        }
    }

    /// Parses a wire name.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "active" => Some(SectionStatus::Active),
            "revoked" => Some(SectionStatus::Revoked),
            "reset" => Some(SectionStatus::Reset),
            _ => None,
        }
    }
}

/// The `SUB_START` frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubStart {
    /// `id` of the subscription.
    pub id: String,
    /// `status`.
    pub status: SectionStatus,
    /// `reasonCode`: `""` when active, `sync.scope_revoked` or `sync.cursor_expired`.
    pub reason_code: String,
    /// `effectiveScopes`: empty unless active.
    pub effective_scopes: sync_core::ScopeFilter,
    /// `bootstrap`: whether `BootstrapPage`s follow.
    pub bootstrap: bool,
}

/// One change of a `COMMIT` frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireChange {
    /// `tableIndex` into the commit's `tables` (always 0 here).
    pub table_index: u32,
    /// `rowId`.
    pub row_id: String,
    /// `op`.
    pub op: OpKind,
    /// `rowVersion` (upserts only).
    pub row_version: Option<i64>,
    /// `scopes`: the row's stored scopes.
    pub scopes: StoredScopes,
    /// `row`: the row codec bytes (upserts only).
    pub row: Option<Vec<u8>>,
}

/// The `COMMIT` frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitItem {
    /// `commitSeq`.
    pub commit_seq: i64,
    /// `createdAtMs`.
    pub created_at_ms: i64,
    /// `actorId`.
    pub actor_id: String,
    /// `tables`: the subscription's table.
    pub tables: Vec<String>,
    /// `changes` in their original index order.
    pub changes: Vec<WireChange>,
}

/// One row of a bootstrap page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BootstrapRow {
    /// `rowId`.
    pub row_id: String,
    /// `rowVersion`: the row's server version.
    pub row_version: i64,
    /// `row`: the row codec bytes of the running schema version.
    pub row: Vec<u8>,
}

/// A page of bootstrap rows (`engine.md` §5.4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BootstrapPage {
    /// `table`.
    pub table: String,
    /// `schemaVersion`: the running schema version (row codec).
    pub schema_version: i32,
    /// `asOfCommitSeq`: the bootstrap's pin.
    pub as_of_commit_seq: i64,
    /// `rowCursor`: the page start (None for the table's first page).
    pub row_cursor: Option<String>,
    /// `nextRowCursor`: last row id of the page iff more rows follow.
    pub next_row_cursor: Option<String>,
    /// `rows` in ascending row id order.
    pub rows: Vec<BootstrapRow>,
}

/// The `SUB_END` frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubEnd {
    /// `nextCursor`.
    pub next_cursor: i64,
    /// `bootstrapState`: the resume token as compact JSON text, present iff
    /// the bootstrap is incomplete.
    pub bootstrap_state: Option<String>,
}
