//! Request bytes → the engine's typed request.

use sync_core::ScopeFilter;
use sync_engine::{
    Operation, PullHeader, PushCommit, ReqHeader, Subscription, SyncRequest, WireError,
};
use sync_ssp2::{DecodeError, PushOp};

use crate::failure::WireFailure;

/// The wire versions a round is served in, oldest first: every version
/// the codec reads ([`sync_ssp2::SUPPORTED_WIRE_VERSIONS`]). Versions 1
/// and 2 push full rows, version 3 sparse rows with column-level conflict
/// rules; the engine picks the rules from the request's version
/// (`docs/design/wire-v3.md` §5). Any other version is refused before
/// anything is read or written.
pub const SERVED_WIRE_VERSIONS: [u16; 3] = [1, 2, 3];

/// Decodes an SSP2 request body into a [`SyncRequest`].
///
/// The envelope header is checked first: a wire version other than those
/// served ([`SERVED_WIRE_VERSIONS`]) is refused before any frame is read,
/// as `sync.invalid_request` (HTTP 400) whose `details.supportedWireVersions`
/// names the versions served. Any other decode error (§1.7) is HTTP 400
/// with the error's code (`sync.invalid_request`, or `sync.empty_commit`
/// for a commit without operations) and `details.reason` saying what is
/// wrong. Validation that needs the schema or the partition (duplicate
/// subscription ids, unknown tables, row payloads) is the round's.
pub fn decode_sync_request(bytes: &[u8]) -> Result<SyncRequest, WireFailure> {
    let header = sync_ssp2::peek_envelope(bytes).map_err(|e| decode_failure(&e))?;
    let version = header.wire_version.number();
    if !SERVED_WIRE_VERSIONS.contains(&version) {
        return Err(decode_failure(&DecodeError::UnsupportedWireVersion {
            version,
        }));
    }
    let request = sync_ssp2::decode_request(bytes).map_err(|e| decode_failure(&e))?;
    Ok(to_engine_request(request))
}

/// The failure answering a decode error.
pub(crate) fn decode_failure(error: &DecodeError) -> WireFailure {
    let wire = match error {
        DecodeError::UnsupportedWireVersion { version } => {
            WireError::new("sync.invalid_request", "unsupported wire version")
                .with_detail("reason", "unsupported_wire_version")
                .with_detail("wireVersion", *version)
                .with_detail("supportedWireVersions", SERVED_WIRE_VERSIONS.to_vec())
        }
        other => WireError::new(other.code(), "malformed request")
            .with_detail("reason", other.to_string()),
    };
    WireFailure {
        status: 400,
        body: wire.to_body(),
    }
}

fn scope_filter(map: &sync_ssp2::ScopeMap) -> ScopeFilter {
    map.iter()
        .map(|(key, values)| (key.to_owned(), values.clone()))
        .collect()
}

fn to_engine_request(request: sync_ssp2::Request) -> SyncRequest {
    let wire_version = request.wire_version.number();
    let mut header = None;
    let mut pushes = Vec::new();
    let mut pull = None;
    let mut subscriptions = Vec::new();
    for frame in request.frames {
        match frame {
            sync_ssp2::RequestFrame::ReqHeader(h) => {
                header = Some(ReqHeader {
                    client_id: h.client_id,
                    schema_version: h.schema_version,
                    log_epoch: h.log_epoch,
                });
            }
            sync_ssp2::RequestFrame::PushCommit(c) => pushes.push(PushCommit {
                client_commit_id: c.client_commit_id,
                operations: c.operations.into_iter().map(operation).collect(),
            }),
            sync_ssp2::RequestFrame::PullHeader(p) => {
                pull = Some(PullHeader {
                    limit_commits: p.limit_commits,
                    limit_snapshot_rows: p.limit_snapshot_rows,
                    max_snapshot_pages: p.max_snapshot_pages,
                    accept: p.accept.bits(),
                });
            }
            sync_ssp2::RequestFrame::Subscription(s) => subscriptions.push(Subscription {
                id: s.id,
                table: s.table,
                scopes: scope_filter(&s.scopes),
                params: s.params.map(sync_ssp2::RawJson::into_string),
                cursor: s.cursor,
                bootstrap_state: s.bootstrap_state.map(sync_ssp2::RawJson::into_string),
            }),
            // Frames with no layout in this wire version are skipped (§1.2).
            _ => {}
        }
    }
    SyncRequest {
        wire_version,
        // The decoder refuses a request that does not open with REQ_HEADER.
        header: header.unwrap_or_else(|| ReqHeader {
            client_id: String::new(),
            schema_version: 0,
            log_epoch: None,
        }),
        pushes,
        pull,
        subscriptions,
    }
}

fn operation(op: sync_ssp2::PushOperation) -> Operation {
    match op.op {
        PushOp::Upsert { payload } => Operation {
            table: op.table,
            row_id: op.row_id,
            op: sync_engine::OpKind::Upsert,
            base_version: op.base_version,
            payload: Some(payload),
        },
        PushOp::Delete => Operation {
            table: op.table,
            row_id: op.row_id,
            op: sync_engine::OpKind::Delete,
            base_version: op.base_version,
            payload: None,
        },
    }
}
