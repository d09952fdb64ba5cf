//! The engine's response items → SSP2 response frames (bootstrap pages
//! excepted: they become segments, `segments.rs`).

use sync_core::{PushOperationResult, ScopeFilter, StoredScopes};
use sync_engine::{
    CommitItem, OpKind, PushResult, PushResultStatus, RespHeader, SectionStatus, SubEnd, SubStart,
    WireError,
};
use sync_ssp2::{
    Change, ChangeOp, Commit, DetailEntry, ErrorFrame, OpResult, OpResultKind, PushResultDetails,
    PushStatus, RawJson, ResponseEpoch, ResponseFrame, SubStatus, WireVersion,
};

/// `RESP_HEADER`: wire versions 2 and 3 carry the log epoch, version 1
/// never.
pub(crate) fn header(h: &RespHeader, version: WireVersion) -> ResponseFrame {
    let epoch = match version {
        WireVersion::V1 => None,
        WireVersion::V2 | WireVersion::V3 => Some(ResponseEpoch {
            log_epoch: h.log_epoch.clone().unwrap_or_default(),
            reset_required: h.reset_required,
        }),
    };
    ResponseFrame::RespHeader(sync_ssp2::RespHeader {
        required_schema_version: h.required_schema_version,
        latest_schema_version: h.latest_schema_version,
        epoch,
    })
}

fn op_index(index: u32) -> i32 {
    i32::try_from(index).unwrap_or(i32::MAX)
}

/// `PUSH_RESULT`, followed by `PUSH_RESULT_DETAILS` when a rejected
/// commit's error record carries details.
pub(crate) fn push_result(r: &PushResult) -> Vec<ResponseFrame> {
    let status = match (r.status, r.commit_seq) {
        (PushResultStatus::Applied, Some(commit_seq)) => PushStatus::Applied { commit_seq },
        (PushResultStatus::Cached, Some(commit_seq)) => PushStatus::Cached { commit_seq },
        _ => PushStatus::Rejected,
    };
    let mut entries = Vec::new();
    let results = r
        .results
        .iter()
        .map(|record| match record {
            PushOperationResult::Applied { op_index: i } => OpResult {
                op_index: op_index(*i),
                kind: OpResultKind::Applied,
            },
            PushOperationResult::Conflict {
                op_index: i,
                code,
                message,
                server_version,
                server_row,
                conflict_columns,
            } => OpResult {
                op_index: op_index(*i),
                kind: OpResultKind::Conflict {
                    code: code.clone(),
                    message: message.clone(),
                    server_version: *server_version,
                    server_row: server_row.clone(),
                    // The engine answers with the bitmap exactly at
                    // version 3 (and drops it below).
                    conflict_columns: conflict_columns.clone(),
                },
            },
            PushOperationResult::Error {
                op_index: i,
                code,
                message,
                retryable,
                details,
            } => {
                if let Some(details) = details {
                    entries.push(DetailEntry {
                        op_index: op_index(*i),
                        details_json: details.to_json_value().to_string(),
                    });
                }
                OpResult {
                    op_index: op_index(*i),
                    kind: OpResultKind::Error {
                        code: code.clone(),
                        message: message.clone(),
                        retryable: *retryable,
                    },
                }
            }
        })
        .collect();
    let mut frames = vec![ResponseFrame::PushResult(sync_ssp2::PushResult {
        client_commit_id: r.client_commit_id.clone(),
        status,
        results,
    })];
    if r.status == PushResultStatus::Rejected && !entries.is_empty() {
        frames.push(ResponseFrame::PushResultDetails(PushResultDetails {
            client_commit_id: r.client_commit_id.clone(),
            entries,
        }));
    }
    frames
}

/// The wire form of a scope filter (keys in UTF-16 order).
pub(crate) fn scope_map(filter: &ScopeFilter) -> sync_ssp2::ScopeMap {
    let mut map = sync_ssp2::ScopeMap::new();
    for (key, values) in filter {
        map.insert(key.clone(), values.clone());
    }
    map
}

fn stored_scopes(scopes: &StoredScopes) -> sync_ssp2::StoredScopes {
    let mut map = sync_ssp2::StoredScopes::new();
    for (key, value) in scopes {
        map.insert(key.clone(), value.clone());
    }
    map
}

/// `SUB_START`.
pub(crate) fn sub_start(s: &SubStart) -> ResponseFrame {
    ResponseFrame::SubStart(sync_ssp2::SubStart {
        id: s.id.clone(),
        status: match s.status {
            SectionStatus::Active => SubStatus::Active,
            SectionStatus::Revoked => SubStatus::Revoked,
            SectionStatus::Reset => SubStatus::Reset,
        },
        reason_code: s.reason_code.clone(),
        effective_scopes: scope_map(&s.effective_scopes),
        bootstrap: s.bootstrap,
    })
}

/// `COMMIT`.
pub(crate) fn commit(c: &CommitItem) -> ResponseFrame {
    let changes = c
        .changes
        .iter()
        .map(|change| Change {
            table_index: u16::try_from(change.table_index).unwrap_or(u16::MAX),
            row_id: change.row_id.clone(),
            scopes: stored_scopes(&change.scopes),
            op: match (change.op, change.row_version, &change.row) {
                (OpKind::Upsert, Some(row_version), Some(row)) => ChangeOp::Upsert {
                    row_version,
                    row: row.clone(),
                },
                _ => ChangeOp::Delete,
            },
        })
        .collect();
    ResponseFrame::Commit(Commit {
        commit_seq: c.commit_seq,
        created_at_ms: c.created_at_ms,
        actor_id: c.actor_id.clone(),
        tables: c.tables.clone(),
        changes,
    })
}

/// `SUB_END`; a resume token that is not JSON (never produced by the
/// engine) is dropped rather than sent broken.
pub(crate) fn sub_end(s: &SubEnd) -> ResponseFrame {
    ResponseFrame::SubEnd(sync_ssp2::SubEnd {
        next_cursor: s.next_cursor,
        bootstrap_state: s
            .bootstrap_state
            .as_ref()
            .and_then(|text| RawJson::new(text.clone()).ok()),
    })
}

/// `ERROR`.
pub(crate) fn error(e: &WireError) -> ResponseFrame {
    ResponseFrame::Error(ErrorFrame {
        code: e.code.clone(),
        message: e.message.clone(),
        category: e.category.clone(),
        retryable: e.retryable,
        recommended_action: e.recommended_action.clone(),
        details: e
            .details
            .as_ref()
            .map(|d| RawJson::from_value(&serde_json::Value::Object((**d).clone()))),
    })
}
