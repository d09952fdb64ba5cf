//! The JSON-lines rendering of response items (SSP2 §11 debug rendering,
//! `engine.md` §2.3). A rejected `PUSH_RESULT` whose error records carry
//! details is followed by its `PUSH_RESULT_DETAILS` companion line, as the
//! codec emits it; parsing folds the companion back into the result.

use serde_json::{Map, Value};
use sync_core::{PushOperationResult, RejectionDetails, ScopeFilter, StoredScopes};

use super::json_fields::{
    array, i32_of, i64_of, object, opt_bool, opt_bytes, opt_i32, opt_i64, opt_raw_json, opt_string,
    raw_json_value, string, string_list, wrong, JsonFrameError, Obj,
};
use super::json_request::scope_filter_json;
use super::request::OpKind;
use super::response::{
    BootstrapPage, BootstrapRow, CommitItem, PushResult, PushResultStatus, RespHeader,
    ResponseItem, SectionStatus, SubEnd, SubStart, WireChange,
};
use super::wire_error::WireError;
use crate::base64;

impl ResponseItem {
    /// Renders the item as its JSON frames: one value, or two for a
    /// rejected push result with details (`PUSH_RESULT`, `PUSH_RESULT_DETAILS`).
    pub fn to_json_frames(&self) -> Vec<Value> {
        match self {
            ResponseItem::Header(h) => vec![header_json(h)],
            ResponseItem::PushResult(r) => push_result_json(r),
            ResponseItem::SubStart(s) => vec![sub_start_json(s)],
            ResponseItem::Commit(c) => vec![commit_json(c)],
            ResponseItem::BootstrapPage(p) => vec![page_json(p)],
            ResponseItem::SubEnd(e) => vec![sub_end_json(e)],
            ResponseItem::Error(e) => {
                let mut body = e.to_body();
                if let Value::Object(map) = &mut body {
                    let mut out = Map::new();
                    out.insert("type".into(), "ERROR".into());
                    out.extend(std::mem::take(map));
                    return vec![Value::Object(out)];
                }
                vec![body]
            }
            ResponseItem::End => vec![tagged("END")],
        }
    }

    /// Renders the item as JSON lines, each terminated by `\n`.
    pub fn to_json_lines(&self) -> String {
        super::json_fields::lines(self.to_json_frames())
    }

    /// Parses a whole response rendered as JSON lines (blank lines ignored).
    pub fn parse_json_lines(text: &str) -> Result<Vec<ResponseItem>, JsonFrameError> {
        let mut items: Vec<ResponseItem> = Vec::new();
        for (no, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let value: Value = serde_json::from_str(line)
                .map_err(|_| JsonFrameError::new("not a JSON value").at_line(no + 1))?;
            parse_frame_into(&mut items, &value).map_err(|e| e.at_line(no + 1))?;
        }
        Ok(items)
    }
}

fn tagged(kind: &str) -> Value {
    let mut out = Map::new();
    out.insert("type".into(), kind.into());
    Value::Object(out)
}

fn with_type(kind: &str) -> Obj {
    let mut out = Map::new();
    out.insert("type".into(), kind.into());
    out
}

fn header_json(h: &RespHeader) -> Value {
    let mut out = with_type("RESP_HEADER");
    if let Some(v) = h.required_schema_version {
        out.insert("requiredSchemaVersion".into(), v.into());
    }
    if let Some(v) = h.latest_schema_version {
        out.insert("latestSchemaVersion".into(), v.into());
    }
    if let Some(epoch) = &h.log_epoch {
        out.insert("logEpoch".into(), epoch.clone().into());
    }
    out.insert("resetRequired".into(), h.reset_required.into());
    Value::Object(out)
}

fn push_result_json(r: &PushResult) -> Vec<Value> {
    let mut out = with_type("PUSH_RESULT");
    out.insert("clientCommitId".into(), r.client_commit_id.clone().into());
    out.insert("status".into(), r.status.as_str().into());
    if let Some(seq) = r.commit_seq {
        out.insert("commitSeq".into(), seq.into());
    }
    let results = r.results.iter().map(record_json).collect();
    out.insert("results".into(), Value::Array(results));
    let mut frames = vec![Value::Object(out)];
    let entries: Vec<Value> = r
        .results
        .iter()
        .filter_map(|record| match record {
            PushOperationResult::Error {
                op_index,
                details: Some(details),
                ..
            } => {
                let mut entry = Map::new();
                entry.insert("opIndex".into(), (*op_index).into());
                entry.insert(
                    "detailsJson".into(),
                    details_json(details).to_string().into(),
                );
                Some(Value::Object(entry))
            }
            _ => None,
        })
        .collect();
    if r.status == PushResultStatus::Rejected && !entries.is_empty() {
        let mut companion = with_type("PUSH_RESULT_DETAILS");
        companion.insert("clientCommitId".into(), r.client_commit_id.clone().into());
        companion.insert("entries".into(), Value::Array(entries));
        frames.push(Value::Object(companion));
    }
    frames
}

/// A result record as in the stored format, without `details` (they
/// travel in the `PUSH_RESULT_DETAILS` companion).
fn record_json(record: &PushOperationResult) -> Value {
    let mut value = record.to_json_value();
    if let Value::Object(map) = &mut value {
        map.remove("details");
    }
    value
}

/// The normalized details object (`fieldPaths`, `reason`, `requiredAction`,
/// `references`, in this member order).
pub(crate) fn details_json(details: &RejectionDetails) -> Value {
    details.to_json_value()
}

fn sub_start_json(s: &SubStart) -> Value {
    let mut out = with_type("SUB_START");
    out.insert("id".into(), s.id.clone().into());
    out.insert("status".into(), s.status.as_str().into());
    out.insert("reasonCode".into(), s.reason_code.clone().into());
    out.insert(
        "effectiveScopes".into(),
        scope_filter_json(&s.effective_scopes),
    );
    out.insert("bootstrap".into(), s.bootstrap.into());
    Value::Object(out)
}

fn scopes_json(scopes: &StoredScopes) -> Value {
    Value::Object(
        scopes
            .iter()
            .map(|(k, v)| (k.clone(), Value::from(v.clone())))
            .collect(),
    )
}

fn commit_json(c: &CommitItem) -> Value {
    let mut out = with_type("COMMIT");
    out.insert("commitSeq".into(), c.commit_seq.into());
    out.insert("createdAtMs".into(), c.created_at_ms.into());
    out.insert("actorId".into(), c.actor_id.clone().into());
    let tables = c.tables.iter().cloned().map(Value::from).collect();
    out.insert("tables".into(), Value::Array(tables));
    let changes = c
        .changes
        .iter()
        .map(|ch| {
            let mut m = Map::new();
            m.insert("tableIndex".into(), ch.table_index.into());
            m.insert("rowId".into(), ch.row_id.clone().into());
            m.insert("op".into(), ch.op.as_str().into());
            if let Some(v) = ch.row_version {
                m.insert("rowVersion".into(), v.into());
            }
            m.insert("scopes".into(), scopes_json(&ch.scopes));
            if let Some(row) = &ch.row {
                m.insert("row".into(), base64::encode(row).into());
            }
            Value::Object(m)
        })
        .collect();
    out.insert("changes".into(), Value::Array(changes));
    Value::Object(out)
}

fn page_json(p: &BootstrapPage) -> Value {
    let mut out = with_type("BOOTSTRAP_PAGE");
    out.insert("table".into(), p.table.clone().into());
    out.insert("schemaVersion".into(), p.schema_version.into());
    out.insert("asOfCommitSeq".into(), p.as_of_commit_seq.into());
    out.insert(
        "rowCursor".into(),
        p.row_cursor.clone().map_or(Value::Null, Value::from),
    );
    out.insert(
        "nextRowCursor".into(),
        p.next_row_cursor.clone().map_or(Value::Null, Value::from),
    );
    let rows = p
        .rows
        .iter()
        .map(|r| {
            let mut m = Map::new();
            m.insert("rowId".into(), r.row_id.clone().into());
            m.insert("rowVersion".into(), r.row_version.into());
            m.insert("row".into(), base64::encode(&r.row).into());
            Value::Object(m)
        })
        .collect();
    out.insert("rows".into(), Value::Array(rows));
    Value::Object(out)
}

fn sub_end_json(e: &SubEnd) -> Value {
    let mut out = with_type("SUB_END");
    out.insert("nextCursor".into(), e.next_cursor.into());
    if let Some(state) = &e.bootstrap_state {
        out.insert("bootstrapState".into(), raw_json_value(state));
    }
    Value::Object(out)
}

fn parse_frame_into(items: &mut Vec<ResponseItem>, value: &Value) -> Result<(), JsonFrameError> {
    let obj = object(value, "a frame")?;
    let kind = obj
        .get("type")
        .and_then(Value::as_str)
        .ok_or_else(|| wrong("type", "a frame name"))?;
    let item = match kind {
        "RESP_HEADER" => ResponseItem::Header(RespHeader {
            required_schema_version: opt_i32(obj, "requiredSchemaVersion")?,
            latest_schema_version: opt_i32(obj, "latestSchemaVersion")?,
            log_epoch: opt_string(obj, "logEpoch")?,
            reset_required: opt_bool(obj, "resetRequired")?.unwrap_or(false),
        }),
        "PUSH_RESULT" => ResponseItem::PushResult(parse_push_result(obj)?),
        "PUSH_RESULT_DETAILS" => return attach_details(items, obj),
        "SUB_START" => ResponseItem::SubStart(parse_sub_start(obj)?),
        "COMMIT" => ResponseItem::Commit(parse_commit(obj)?),
        "BOOTSTRAP_PAGE" => ResponseItem::BootstrapPage(parse_page(obj)?),
        "SUB_END" => ResponseItem::SubEnd(SubEnd {
            next_cursor: i64_of(obj, "nextCursor")?,
            bootstrap_state: opt_raw_json(obj, "bootstrapState")?,
        }),
        "ERROR" => ResponseItem::Error(parse_error(obj)?),
        "END" => ResponseItem::End,
        other => return Err(JsonFrameError::new(format!("unknown frame type `{other}`"))),
    };
    items.push(item);
    Ok(())
}

fn parse_push_result(obj: &Obj) -> Result<PushResult, JsonFrameError> {
    let status = PushResultStatus::parse(&string(obj, "status")?)
        .ok_or_else(|| wrong("status", "applied, cached or rejected"))?;
    let results = array(obj, "results")?
        .iter()
        .map(parse_record)
        .collect::<Result<_, _>>()?;
    Ok(PushResult {
        client_commit_id: string(obj, "clientCommitId")?,
        status,
        commit_seq: opt_i64(obj, "commitSeq")?,
        results,
    })
}

fn parse_record(value: &Value) -> Result<PushOperationResult, JsonFrameError> {
    PushOperationResult::from_json_value(value).map_err(|_| wrong("results", "result records"))
}

fn attach_details(items: &mut [ResponseItem], obj: &Obj) -> Result<(), JsonFrameError> {
    let Some(ResponseItem::PushResult(result)) = items.last_mut() else {
        return Err(JsonFrameError::new(
            "PUSH_RESULT_DETAILS must follow a PUSH_RESULT",
        ));
    };
    for entry in array(obj, "entries")? {
        let entry = object(entry, "a details entry")?;
        let index = i64_of(entry, "opIndex")?;
        let text = string(entry, "detailsJson")?;
        let value: Value =
            serde_json::from_str(&text).map_err(|_| wrong("detailsJson", "a JSON object"))?;
        let details = parse_details(&value)?;
        for record in &mut result.results {
            if let PushOperationResult::Error {
                op_index,
                details: slot,
                ..
            } = record
            {
                if i64::from(*op_index) == index {
                    *slot = Some(details.clone());
                }
            }
        }
    }
    Ok(())
}

fn parse_details(value: &Value) -> Result<RejectionDetails, JsonFrameError> {
    RejectionDetails::from_json_value(value).map_err(|_| wrong("detailsJson", "a details object"))
}

fn parse_sub_start(obj: &Obj) -> Result<SubStart, JsonFrameError> {
    let status = SectionStatus::parse(&string(obj, "status")?)
        .ok_or_else(|| wrong("status", "active, revoked or reset"))?;
    let mut effective = ScopeFilter::new();
    if let Some(Value::Object(map)) = obj.get("effectiveScopes") {
        for (k, v) in map {
            effective.insert(k.clone(), string_list(v, "effectiveScopes")?);
        }
    }
    Ok(SubStart {
        id: string(obj, "id")?,
        status,
        reason_code: opt_string(obj, "reasonCode")?.unwrap_or_default(),
        effective_scopes: effective,
        bootstrap: opt_bool(obj, "bootstrap")?.unwrap_or(false),
    })
}

fn parse_scopes(value: Option<&Value>) -> Result<StoredScopes, JsonFrameError> {
    let mut scopes = StoredScopes::new();
    if let Some(Value::Object(map)) = value {
        for (k, v) in map {
            let text = v
                .as_str()
                .ok_or_else(|| wrong("scopes", "an object of strings"))?;
            scopes.insert(k.clone(), text.to_owned());
        }
    }
    Ok(scopes)
}

fn parse_commit(obj: &Obj) -> Result<CommitItem, JsonFrameError> {
    let changes = array(obj, "changes")?
        .iter()
        .map(|v| {
            let ch = object(v, "a change")?;
            let op = OpKind::parse(&string(ch, "op")?)
                .ok_or_else(|| wrong("op", "`upsert` or `delete`"))?;
            Ok(WireChange {
                table_index: u32::try_from(opt_i64(ch, "tableIndex")?.unwrap_or(0))
                    .map_err(|_| wrong("tableIndex", "a non-negative integer"))?,
                row_id: string(ch, "rowId")?,
                op,
                row_version: opt_i64(ch, "rowVersion")?,
                scopes: parse_scopes(ch.get("scopes"))?,
                row: opt_bytes(ch, "row")?,
            })
        })
        .collect::<Result<_, JsonFrameError>>()?;
    Ok(CommitItem {
        commit_seq: i64_of(obj, "commitSeq")?,
        created_at_ms: i64_of(obj, "createdAtMs")?,
        actor_id: string(obj, "actorId")?,
        tables: obj
            .get("tables")
            .map(|v| string_list(v, "tables"))
            .transpose()?
            .unwrap_or_default(),
        changes,
    })
}

fn parse_page(obj: &Obj) -> Result<BootstrapPage, JsonFrameError> {
    let rows = array(obj, "rows")?
        .iter()
        .map(|v| {
            let r = object(v, "a row")?;
            Ok(BootstrapRow {
                row_id: string(r, "rowId")?,
                row_version: i64_of(r, "rowVersion")?,
                row: opt_bytes(r, "row")?.unwrap_or_default(),
            })
        })
        .collect::<Result<_, JsonFrameError>>()?;
    Ok(BootstrapPage {
        table: string(obj, "table")?,
        schema_version: i32_of(obj, "schemaVersion")?,
        as_of_commit_seq: i64_of(obj, "asOfCommitSeq")?,
        row_cursor: opt_string(obj, "rowCursor")?,
        next_row_cursor: opt_string(obj, "nextRowCursor")?,
        rows,
    })
}

fn parse_error(obj: &Obj) -> Result<WireError, JsonFrameError> {
    let code = string(obj, "code")?;
    let mut error = WireError::new(&code, opt_string(obj, "message")?.unwrap_or_default());
    if let Some(category) = opt_string(obj, "category")? {
        error.category = category;
    }
    if let Some(retryable) = opt_bool(obj, "retryable")? {
        error.retryable = retryable;
    }
    if let Some(action) = opt_string(obj, "recommendedAction")? {
        error.recommended_action = action;
    }
    error.details = match obj.get("details") {
        Some(Value::Object(map)) => Some(Box::new(map.clone())),
        _ => None,
    };
    Ok(error)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SyncRequest;

    const SPEC_LINES: &str = r#"{"type":"REQ_HEADER","clientId":"c","schemaVersion":1,"logEpoch":"e"}
{"type":"PUSH_COMMIT","clientCommitId":"c-0003","operations":[{"table":"tasks","rowId":"t1","op":"upsert","baseVersion":1,"payload":"AgMA"},{"table":"tasks","rowId":"t9","op":"delete"}]}
{"type":"PULL_HEADER","limitCommits":5,"limitSnapshotRows":0,"maxSnapshotPages":0,"accept":1}
{"type":"SUBSCRIPTION","id":"sub-tasks","table":"tasks","scopes":{"project_id":["p1"]},"cursor":42}
"#;

    #[test]
    fn spec_request_lines_parse_and_round_trip() {
        let request = SyncRequest::from_json_lines(SPEC_LINES).unwrap();
        assert_eq!(request.wire_version, 2);
        assert_eq!(request.pushes[0].operations[0].base_version, Some(1));
        assert_eq!(request.pushes[0].operations[0].payload, Some(vec![2, 3, 0]));
        assert_eq!(request.pushes[0].operations[1].op, OpKind::Delete);
        assert_eq!(request.subscriptions[0].cursor, 42);
        let again = SyncRequest::from_json_lines(&request.to_json_lines()).unwrap();
        assert_eq!(again, request);
    }

    #[test]
    fn malformed_request_lines_name_the_line() {
        let bad = "{\"type\":\"REQ_HEADER\",\"clientId\":\"c\",\"schemaVersion\":1}\n{\"type\":\"PUSH_COMMIT\"}\n";
        let err = SyncRequest::from_json_lines(bad).unwrap_err();
        assert_eq!(err.line, 2);
        assert_eq!(err.to_wire_error().code, "sync.invalid_request");
        assert!(SyncRequest::from_json_lines("{\"type\":\"PULL_HEADER\"}").is_err());
    }

    fn every_item() -> Vec<ResponseItem> {
        let details = RejectionDetails {
            field_paths: Some(vec!["title".into()]),
            reason: Some("too_long".into()),
            required_action: None,
            references: None,
        };
        vec![
            ResponseItem::Header(RespHeader {
                required_schema_version: None,
                latest_schema_version: Some(1),
                log_epoch: Some("e".into()),
                reset_required: false,
            }),
            ResponseItem::PushResult(PushResult {
                client_commit_id: "c-0004".into(),
                status: PushResultStatus::Rejected,
                commit_seq: None,
                results: vec![PushOperationResult::Conflict {
                    op_index: 0,
                    code: "sync.version_conflict".into(),
                    message: "m".into(),
                    server_version: 7,
                    server_row: vec![1, 2, 3],
                    conflict_columns: None,
                }],
            }),
            ResponseItem::PushResult(PushResult {
                client_commit_id: "c-0005".into(),
                status: PushResultStatus::Rejected,
                commit_seq: None,
                results: vec![PushOperationResult::Error {
                    op_index: 2,
                    code: "task.title_too_long".into(),
                    message: "m".into(),
                    retryable: false,
                    details: Some(details),
                }],
            }),
            ResponseItem::SubStart(SubStart {
                id: "s".into(),
                status: SectionStatus::Active,
                reason_code: String::new(),
                effective_scopes: [("project_id".into(), vec!["p1".into()])].into(),
                bootstrap: false,
            }),
            ResponseItem::Commit(CommitItem {
                commit_seq: 43,
                created_at_ms: 1_700_000_000_000,
                actor_id: "alice".into(),
                tables: vec!["tasks".into()],
                changes: vec![WireChange {
                    table_index: 0,
                    row_id: "t9".into(),
                    op: OpKind::Delete,
                    row_version: None,
                    scopes: [("project_id".into(), "p1".into())].into(),
                    row: None,
                }],
            }),
            ResponseItem::BootstrapPage(BootstrapPage {
                table: "tasks".into(),
                schema_version: 1,
                as_of_commit_seq: 100,
                row_cursor: None,
                next_row_cursor: Some("t1".into()),
                rows: vec![BootstrapRow {
                    row_id: "t1".into(),
                    row_version: 3,
                    row: vec![9],
                }],
            }),
            ResponseItem::SubEnd(SubEnd {
                next_cursor: 100,
                bootstrap_state: Some(
                    r#"{"asOfCommitSeq":100,"tables":["tasks"],"tableIndex":0,"rowCursor":"t1"}"#
                        .into(),
                ),
            }),
            ResponseItem::Error(
                WireError::new("sync.schema_not_ready", "m").with_detail("reason", "schema_ahead"),
            ),
            ResponseItem::End,
        ]
    }

    #[test]
    fn every_response_item_round_trips() {
        let items = every_item();
        let text: String = items.iter().map(ResponseItem::to_json_lines).collect();
        assert_eq!(ResponseItem::parse_json_lines(&text).unwrap(), items);
    }

    #[test]
    fn rendering_matches_the_spec_shapes() {
        let items = every_item();
        let lines: Vec<String> = items
            .iter()
            .flat_map(ResponseItem::to_json_frames)
            .map(|v| v.to_string())
            .collect();
        assert_eq!(
            lines[1],
            r#"{"type":"PUSH_RESULT","clientCommitId":"c-0004","status":"rejected","results":[{"opIndex":0,"status":"conflict","code":"sync.version_conflict","message":"m","serverVersion":7,"serverRow":"AQID"}]}"#
        );
        assert_eq!(
            lines[3],
            r#"{"type":"PUSH_RESULT_DETAILS","clientCommitId":"c-0005","entries":[{"opIndex":2,"detailsJson":"{\"fieldPaths\":[\"title\"],\"reason\":\"too_long\"}"}]}"#
        );
        assert_eq!(
            lines[5],
            r#"{"type":"COMMIT","commitSeq":43,"createdAtMs":1700000000000,"actorId":"alice","tables":["tasks"],"changes":[{"tableIndex":0,"rowId":"t9","op":"delete","scopes":{"project_id":"p1"}}]}"#
        );
        assert_eq!(
            lines[7],
            r#"{"type":"SUB_END","nextCursor":100,"bootstrapState":{"asOfCommitSeq":100,"tables":["tasks"],"tableIndex":0,"rowCursor":"t1"}}"#
        );
        assert!(lines[8].starts_with(r#"{"type":"ERROR","code":"sync.schema_not_ready""#));
    }

    #[test]
    fn a_frame_error_shows_its_line_only_when_it_has_one() {
        let bare = JsonFrameError::new("not a JSON value");
        assert_eq!(bare.to_string(), "not a JSON value");
        assert_eq!(
            bare.clone().at_line(1).to_string(),
            "line 1: not a JSON value"
        );
        assert_eq!(bare.at_line(12).to_string(), "line 12: not a JSON value");
    }

    #[test]
    fn response_errors_name_the_one_based_line_of_their_frame() {
        let end = ResponseItem::End.to_json_lines();
        let unparsable = format!("{end}\n{end}not json\n");
        let err = ResponseItem::parse_json_lines(&unparsable).unwrap_err();
        assert_eq!(err.line, 4, "{err}");
        let bad_frame = format!("{end}{{\"type\":\"PUSH_RESULT\"}}\n");
        let err = ResponseItem::parse_json_lines(&bad_frame).unwrap_err();
        assert_eq!(err.line, 2, "{err}");
    }

    #[test]
    fn schema_versions_other_than_one_survive_a_round_trip() {
        let page = ResponseItem::BootstrapPage(BootstrapPage {
            table: "tasks".into(),
            schema_version: 7,
            as_of_commit_seq: 100,
            row_cursor: None,
            next_row_cursor: None,
            rows: Vec::new(),
        });
        let again = ResponseItem::parse_json_lines(&page.to_json_lines()).unwrap();
        assert_eq!(again, vec![page]);
        let lines = SPEC_LINES.replace("\"schemaVersion\":1", "\"schemaVersion\":3");
        let request = SyncRequest::from_json_lines(&lines).unwrap();
        assert_eq!(request.header.schema_version, 3);
    }

    #[test]
    fn every_status_name_parses_back() {
        for status in [
            PushResultStatus::Applied,
            PushResultStatus::Cached,
            PushResultStatus::Rejected,
        ] {
            assert_eq!(PushResultStatus::parse(status.as_str()), Some(status));
        }
        for status in [
            SectionStatus::Active,
            SectionStatus::Revoked,
            SectionStatus::Reset,
        ] {
            assert_eq!(SectionStatus::parse(status.as_str()), Some(status));
        }
        assert_eq!(PushResultStatus::parse("Applied"), None);
        assert_eq!(SectionStatus::parse(""), None);
    }
}
