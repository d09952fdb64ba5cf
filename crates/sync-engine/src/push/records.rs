//! Result records and conversions between stored and wire push results.

use sync_core::{PushOperationResult, PushStatus, StoredPushResult};

use crate::wire::response::{PushResult, PushResultStatus};

/// An `error` record with a protocol code.
pub(crate) fn error(op_index: u32, code: &str, message: &str) -> PushOperationResult {
    PushOperationResult::Error {
        op_index,
        code: code.to_owned(),
        message: message.to_owned(),
        retryable: false,
        details: None,
    }
}

/// A `conflict` record carrying the stored version and payload, and at
/// wire version 3 the bitmap of the conflicting columns.
pub(crate) fn conflict(
    op_index: u32,
    server_version: i64,
    server_row: Vec<u8>,
    conflict_columns: Option<Vec<u8>>,
) -> PushOperationResult {
    PushOperationResult::Conflict {
        op_index,
        code: "sync.version_conflict".to_owned(),
        message: "row version does not match baseVersion".to_owned(),
        server_version,
        server_row,
        conflict_columns,
    }
}

/// The `sync.constraint_violation` record.
pub(crate) fn constraint_violation(op_index: u32) -> PushOperationResult {
    error(
        op_index,
        "sync.constraint_violation",
        "write violates a relational constraint",
    )
}

/// The wire result of a stored outcome (`engine.md` §4.12): applied +
/// replay → `cached`, applied + fresh → `applied`, rejected → `rejected`.
pub(crate) fn from_stored(
    client_commit_id: &str,
    stored: StoredPushResult,
    fresh: bool,
) -> PushResult {
    let status = match (stored.status, fresh) {
        (PushStatus::Applied, true) => PushResultStatus::Applied,
        (PushStatus::Applied, false) => PushResultStatus::Cached,
        (PushStatus::Rejected, _) => PushResultStatus::Rejected,
    };
    PushResult {
        client_commit_id: client_commit_id.to_owned(),
        status,
        commit_seq: match stored.status {
            PushStatus::Applied => stored.commit_seq,
            PushStatus::Rejected => None,
        },
        results: stored.results,
    }
}

/// The never-persisted result for a key whose stored outcome belongs to
/// another actor (`engine.md` §8 item 7): one `sync.invalid_client_id`
/// record, nothing of the stored outcome.
pub(crate) fn foreign(client_commit_id: &str) -> PushResult {
    PushResult {
        client_commit_id: client_commit_id.to_owned(),
        status: PushResultStatus::Rejected,
        commit_seq: None,
        results: vec![error(
            0,
            "sync.invalid_client_id",
            "clientId is bound to another actor",
        )],
    }
}

/// The never-persisted result for an unreadable stored outcome.
pub(crate) fn cache_miss(client_commit_id: &str) -> PushResult {
    PushResult {
        client_commit_id: client_commit_id.to_owned(),
        status: PushResultStatus::Rejected,
        commit_seq: None,
        results: vec![PushOperationResult::Error {
            op_index: 0,
            code: "sync.idempotency_cache_miss".to_owned(),
            message: "persisted push result unreadable".to_owned(),
            retryable: true,
            details: None,
        }],
    }
}
