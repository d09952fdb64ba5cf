//! The debug JSON rendering of §11.1: one JSON document per message or
//! segment, for tooling and the golden vectors. Never parsed back in
//! production paths.

use serde_json::{json, Map, Number, Value};

use crate::base64;
use crate::canonical_json::js_number;
use crate::envelope::{MessageKind, WireVersion};
use crate::frames::{
    Change, ChangeOp, Commit, ErrorFrame, OpResult, OpResultKind, PushCommit, PushOp,
    PushOperation, PushResult, PushResultDetails, ReqHeader, RespHeader, SegmentRef, SubEnd,
    SubStart, Subscription, UnknownFrame,
};
use crate::request::{Request, RequestFrame};
use crate::response::{Response, ResponseFrame};
use crate::segment::{ColumnValue, RowsSegment};
use crate::values::{RawJson, ScopeMap, StoredScopes};

/// A frame object under construction: `type` first, fields in table order.
struct Obj(Map<String, Value>);

impl Obj {
    fn frame(name: &str) -> Self {
        let mut map = Map::new();
        map.insert("type".into(), Value::String(name.into()));
        Self(map)
    }

    fn new() -> Self {
        Self(Map::new())
    }

    fn put(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.0.insert(key.into(), value.into());
        self
    }

    /// Absent `opt()` fields are omitted, never `null`.
    fn opt(self, key: &str, value: Option<impl Into<Value>>) -> Self {
        match value {
            Some(v) => self.put(key, v),
            None => self,
        }
    }

    fn done(self) -> Value {
        Value::Object(self.0)
    }
}

fn b64(bytes: &[u8]) -> Value {
    Value::String(base64::encode(bytes))
}

fn raw(v: &RawJson) -> Value {
    v.value()
}

fn scopes(map: &ScopeMap) -> Value {
    Value::Object(map.iter().map(|(k, v)| (k.to_owned(), json!(v))).collect())
}

fn stored_scopes(map: &StoredScopes) -> Value {
    Value::Object(map.iter().map(|(k, v)| (k.to_owned(), json!(v))).collect())
}

fn envelope(kind: MessageKind, version: WireVersion, frames: Vec<Value>) -> Value {
    json!({
        "magic": "SSP2",
        "wireVersion": version.number(),
        "msgKind": kind.name(),
        "frames": frames,
    })
}

/// The §11 rendering of a request message.
pub fn render_request(request: &Request) -> Value {
    let frames = request.frames.iter().map(render_request_frame).collect();
    envelope(MessageKind::Request, request.wire_version, frames)
}

/// The §11 rendering of a response message.
pub fn render_response(response: &Response) -> Value {
    let frames = response.frames.iter().map(render_response_frame).collect();
    envelope(MessageKind::Response, response.wire_version, frames)
}

/// The §11 rendering of one request frame.
pub fn render_request_frame(frame: &RequestFrame) -> Value {
    match frame {
        RequestFrame::ReqHeader(f) => req_header(f),
        RequestFrame::PushCommit(f) => push_commit(f),
        RequestFrame::PullHeader(f) => Obj::frame("PULL_HEADER")
            .put("limitCommits", f.limit_commits)
            .put("limitSnapshotRows", f.limit_snapshot_rows)
            .put("maxSnapshotPages", f.max_snapshot_pages)
            .put("accept", f.accept.bits())
            .done(),
        RequestFrame::Subscription(f) => subscription(f),
        RequestFrame::Unknown(f) => unknown(f),
    }
}

/// The §11 rendering of one response frame.
pub fn render_response_frame(frame: &ResponseFrame) -> Value {
    match frame {
        ResponseFrame::RespHeader(f) => resp_header(f),
        ResponseFrame::Lease(f) => Obj::frame("LEASE")
            .put("leaseId", f.lease_id.as_str())
            .put("expiresAtMs", f.expires_at_ms)
            .done(),
        ResponseFrame::PushResult(f) => push_result(f),
        ResponseFrame::PushResultDetails(f) => push_result_details(f),
        ResponseFrame::SubStart(f) => sub_start(f),
        ResponseFrame::Commit(f) => commit(f),
        ResponseFrame::SegmentRef(f) => segment_ref(f),
        ResponseFrame::SegmentInline(f) => Obj::frame("SEGMENT_INLINE")
            .put("payload", b64(f.as_bytes()))
            .done(),
        ResponseFrame::SubEnd(f) => sub_end(f),
        ResponseFrame::Error(f) => error_frame(f),
        ResponseFrame::Unknown(f) => unknown(f),
    }
}

fn req_header(f: &ReqHeader) -> Value {
    Obj::frame("REQ_HEADER")
        .put("clientId", f.client_id.as_str())
        .put("schemaVersion", f.schema_version)
        .opt("logEpoch", f.log_epoch.as_deref())
        .done()
}

fn push_commit(f: &PushCommit) -> Value {
    Obj::frame("PUSH_COMMIT")
        .put("clientCommitId", f.client_commit_id.as_str())
        .put(
            "operations",
            f.operations.iter().map(operation).collect::<Vec<_>>(),
        )
        .done()
}

fn operation(op: &PushOperation) -> Value {
    let payload = match &op.op {
        PushOp::Upsert { payload } => Some(b64(payload)),
        PushOp::Delete => None,
    };
    Obj::new()
        .put("table", op.table.as_str())
        .put("rowId", op.row_id.as_str())
        .put("op", op.op.name())
        .opt("baseVersion", op.base_version)
        .opt("payload", payload)
        .done()
}

fn subscription(f: &Subscription) -> Value {
    Obj::frame("SUBSCRIPTION")
        .put("id", f.id.as_str())
        .put("table", f.table.as_str())
        .put("scopes", scopes(&f.scopes))
        .opt("params", f.params.as_ref().map(raw))
        .put("cursor", f.cursor)
        .opt("bootstrapState", f.bootstrap_state.as_ref().map(raw))
        .done()
}

fn resp_header(f: &RespHeader) -> Value {
    let obj = Obj::frame("RESP_HEADER")
        .opt("requiredSchemaVersion", f.required_schema_version)
        .opt("latestSchemaVersion", f.latest_schema_version);
    match &f.epoch {
        Some(epoch) => obj
            .put("logEpoch", epoch.log_epoch.as_str())
            .put("resetRequired", epoch.reset_required)
            .done(),
        None => obj.done(),
    }
}

fn push_result(f: &PushResult) -> Value {
    Obj::frame("PUSH_RESULT")
        .put("clientCommitId", f.client_commit_id.as_str())
        .put("status", f.status.name())
        .opt("commitSeq", f.status.commit_seq())
        .put(
            "results",
            f.results.iter().map(op_result).collect::<Vec<_>>(),
        )
        .done()
}

fn op_result(r: &OpResult) -> Value {
    let obj = Obj::new()
        .put("opIndex", r.op_index)
        .put("status", r.kind.name());
    match &r.kind {
        OpResultKind::Applied => obj.done(),
        OpResultKind::Conflict {
            code,
            message,
            server_version,
            server_row,
            conflict_columns,
        } => obj
            .put("code", code.as_str())
            .put("message", message.as_str())
            .put("serverVersion", *server_version)
            .put("serverRow", b64(server_row))
            .opt("conflictColumns", conflict_columns.as_deref().map(b64))
            .done(),
        OpResultKind::Error {
            code,
            message,
            retryable,
        } => obj
            .put("code", code.as_str())
            .put("message", message.as_str())
            .put("retryable", *retryable)
            .done(),
    }
}

fn push_result_details(f: &PushResultDetails) -> Value {
    let entries: Vec<Value> = f
        .entries
        .iter()
        .map(|e| {
            Obj::new()
                .put("opIndex", e.op_index)
                .put("detailsJson", e.details_json.as_str())
                .done()
        })
        .collect();
    Obj::frame("PUSH_RESULT_DETAILS")
        .put("clientCommitId", f.client_commit_id.as_str())
        .put("entries", entries)
        .done()
}

fn sub_start(f: &SubStart) -> Value {
    Obj::frame("SUB_START")
        .put("id", f.id.as_str())
        .put("status", f.status.name())
        .put("reasonCode", f.reason_code.as_str())
        .put("effectiveScopes", scopes(&f.effective_scopes))
        .put("bootstrap", f.bootstrap)
        .done()
}

fn commit(f: &Commit) -> Value {
    Obj::frame("COMMIT")
        .put("commitSeq", f.commit_seq)
        .put("createdAtMs", f.created_at_ms)
        .put("actorId", f.actor_id.as_str())
        .put("tables", json!(f.tables))
        .put("changes", f.changes.iter().map(change).collect::<Vec<_>>())
        .done()
}

fn change(c: &Change) -> Value {
    let (version, row) = match &c.op {
        ChangeOp::Upsert { row_version, row } => (Some(*row_version), Some(b64(row))),
        ChangeOp::Delete => (None, None),
    };
    Obj::new()
        .put("tableIndex", c.table_index)
        .put("rowId", c.row_id.as_str())
        .put("op", c.op.name())
        .opt("rowVersion", version)
        .put("scopes", stored_scopes(&c.scopes))
        .opt("row", row)
        .done()
}

fn segment_ref(f: &SegmentRef) -> Value {
    Obj::frame("SEGMENT_REF")
        .put("segmentId", f.segment_id.as_str())
        .put("mediaType", f.media_type.name())
        .put("table", f.table.as_str())
        .put("byteLength", f.byte_length)
        .put("rowCount", f.row_count)
        .put("asOfCommitSeq", f.as_of_commit_seq)
        .put("scopeDigest", f.scope_digest.as_str())
        .opt("rowCursor", f.row_cursor.as_deref())
        .opt("nextRowCursor", f.next_row_cursor.as_deref())
        .opt("url", f.url.as_ref().map(|u| u.url.as_str()))
        .opt("urlExpiresAtMs", f.url.as_ref().map(|u| u.expires_at_ms))
        .done()
}

fn sub_end(f: &SubEnd) -> Value {
    Obj::frame("SUB_END")
        .put("nextCursor", f.next_cursor)
        .opt("bootstrapState", f.bootstrap_state.as_ref().map(raw))
        .done()
}

fn error_frame(f: &ErrorFrame) -> Value {
    Obj::frame("ERROR")
        .put("code", f.code.as_str())
        .put("message", f.message.as_str())
        .put("category", f.category.as_str())
        .put("retryable", f.retryable)
        .put("recommendedAction", f.recommended_action.as_str())
        .opt("details", f.details.as_ref().map(raw))
        .done()
}

fn unknown(f: &UnknownFrame) -> Value {
    Obj::frame("UNKNOWN")
        .put("frameType", f.frame_type)
        .put("payload", b64(&f.payload))
        .done()
}

/// A float as JavaScript's JSON would carry it: shortest digits, and
/// `null` for NaN and the infinities (§11.1 rule 10).
///
/// The JavaScript text decides the kind of number (an integer when it has
/// no fraction and no exponent, as `3` for `3.0`); a fractional one keeps
/// `f` itself, bit for bit, rather than what a parse of the text gives
/// back (serde_json's default float parser can land one ULP away).
fn float(f: f64) -> Value {
    let Some(text) = js_number(f) else {
        return Value::Null;
    };
    match serde_json::from_str::<Number>(&text) {
        Ok(n) if n.is_f64() => Number::from_f64(f).map_or(Value::Null, Value::Number),
        Ok(n) => Value::Number(n),
        Err(_) => Value::Null,
    }
}

fn column_value(v: &ColumnValue) -> Value {
    match v {
        ColumnValue::Null => Value::Null,
        ColumnValue::String(s) => Value::String(s.clone()),
        ColumnValue::Integer(i) => Value::from(*i),
        ColumnValue::Float(f) => float(*f),
        ColumnValue::Boolean(b) => Value::Bool(*b),
        ColumnValue::Json(j) | ColumnValue::BlobRef(j) => raw(j),
        ColumnValue::Bytes(b) | ColumnValue::Crdt(b) => b64(b),
    }
}

/// The §11 rendering of a rows segment (rule 8).
pub fn render_segment(segment: &RowsSegment) -> Value {
    let columns: Vec<Value> = segment
        .columns
        .iter()
        .map(|c| json!({"name": c.name, "type": c.column_type.name(), "nullable": c.nullable}))
        .collect();
    let blocks: Vec<Value> = segment
        .blocks
        .iter()
        .map(|block| {
            Value::Array(
                block
                    .iter()
                    .map(|row| {
                        let values: Map<String, Value> = segment
                            .columns
                            .iter()
                            .zip(&row.values)
                            .map(|(c, v)| (c.name.clone(), column_value(v)))
                            .collect();
                        json!({"serverVersion": row.server_version, "values": values})
                    })
                    .collect(),
            )
        })
        .collect();
    json!({
        "magic": "SSG2",
        "formatVersion": crate::segment::SEGMENT_FORMAT_VERSION,
        "table": segment.table,
        "schemaVersion": segment.schema_version,
        "columns": columns,
        "blocks": blocks,
    })
}
