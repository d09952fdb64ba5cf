//! The JSON-lines rendering of requests (SSP2 §11 debug rendering,
//! `engine.md` §2.3): one frame per line, a `"type"` tag per frame, binary
//! as base64, enums by name. `REQ_HEADER` comes first and carries
//! `"wireVersion"` (default 2).

use serde_json::{Map, Value};
use sync_core::ScopeFilter;

use super::json_fields::{
    array, i32_of, i64_of, object, opt_i32, opt_i64, opt_raw_json, opt_string, raw_json_value,
    string, string_list, wrong, JsonFrameError, Obj,
};
use super::request::{
    OpKind, Operation, PullHeader, PushCommit, ReqHeader, Subscription, SyncRequest,
};
use crate::base64;

/// Converts an operation's `payload` member into row codec bytes. The
/// default accepts base64 text only; a front end may accept other shapes
/// (e.g. a JSON object of column values encoded with the schema's codec).
pub type PayloadDecoder<'a> = dyn Fn(&str, &Value) -> Result<Vec<u8>, JsonFrameError> + 'a;

impl SyncRequest {
    /// Parses a request from JSON lines (blank lines ignored); payloads are
    /// base64 row codec bytes.
    pub fn from_json_lines(text: &str) -> Result<Self, JsonFrameError> {
        Self::from_json_lines_with(text, &base64_payload)
    }

    /// Parses a request from JSON lines, converting every present `payload`
    /// member with `decode_payload(table, member)`.
    pub fn from_json_lines_with(
        text: &str,
        decode_payload: &PayloadDecoder<'_>,
    ) -> Result<Self, JsonFrameError> {
        let mut frames = text
            .lines()
            .enumerate()
            .filter(|(_, line)| !line.trim().is_empty());
        let (first_no, first) = frames
            .next()
            .ok_or_else(|| JsonFrameError::new("the request has no REQ_HEADER"))?;
        let parse = |no: usize, line: &str| -> Result<Value, JsonFrameError> {
            serde_json::from_str(line)
                .map_err(|_| JsonFrameError::new("not a JSON value").at_line(no + 1))
        };
        let head = parse(first_no, first)?;
        let (wire_version, header) =
            parse_req_header(&head).map_err(|e| e.at_line(first_no + 1))?;
        let mut request = SyncRequest {
            wire_version,
            header,
            pushes: Vec::new(),
            pull: None,
            subscriptions: Vec::new(),
        };
        for (no, line) in frames {
            let value = parse(no, line)?;
            add_frame(&mut request, &value, decode_payload).map_err(|e| e.at_line(no + 1))?;
        }
        Ok(request)
    }

    /// Renders the request as JSON lines (one frame per line, each line
    /// terminated by `\n`).
    pub fn to_json_lines(&self) -> String {
        super::json_fields::lines(self.to_json_frames())
    }

    /// Renders the request as one JSON value per frame, in wire order.
    pub fn to_json_frames(&self) -> Vec<Value> {
        let mut frames = vec![req_header_json(self.wire_version, &self.header)];
        frames.extend(self.pushes.iter().map(push_commit_json));
        if let Some(pull) = &self.pull {
            frames.push(pull_header_json(pull));
        }
        frames.extend(self.subscriptions.iter().map(subscription_json));
        frames
    }
}

fn base64_payload(_table: &str, member: &Value) -> Result<Vec<u8>, JsonFrameError> {
    member
        .as_str()
        .and_then(base64::decode)
        .ok_or_else(|| wrong("payload", "base64 text"))
}

fn frame_type(obj: &Obj) -> Result<&str, JsonFrameError> {
    obj.get("type")
        .and_then(Value::as_str)
        .ok_or_else(|| wrong("type", "a frame name"))
}

fn parse_req_header(value: &Value) -> Result<(u16, ReqHeader), JsonFrameError> {
    let obj = object(value, "a frame")?;
    if frame_type(obj)? != "REQ_HEADER" {
        return Err(JsonFrameError::new("the first frame must be REQ_HEADER"));
    }
    let wire_version = match opt_i64(obj, "wireVersion")? {
        None => 2,
        Some(v) => u16::try_from(v).map_err(|_| wrong("wireVersion", "1, 2 or 3"))?,
    };
    Ok((
        wire_version,
        ReqHeader {
            client_id: string(obj, "clientId")?,
            schema_version: i32_of(obj, "schemaVersion")?,
            log_epoch: opt_string(obj, "logEpoch")?,
        },
    ))
}

fn add_frame(
    request: &mut SyncRequest,
    value: &Value,
    decode_payload: &PayloadDecoder<'_>,
) -> Result<(), JsonFrameError> {
    let obj = object(value, "a frame")?;
    match frame_type(obj)? {
        "PUSH_COMMIT" => request.pushes.push(parse_push_commit(obj, decode_payload)?),
        "PULL_HEADER" => {
            if request.pull.is_some() {
                return Err(JsonFrameError::new("at most one PULL_HEADER"));
            }
            request.pull = Some(parse_pull_header(obj)?);
        }
        "SUBSCRIPTION" => request.subscriptions.push(parse_subscription(obj)?),
        "REQ_HEADER" => return Err(JsonFrameError::new("REQ_HEADER must be the only header")),
        other => return Err(JsonFrameError::new(format!("unknown frame type `{other}`"))),
    }
    Ok(())
}

fn parse_push_commit(
    obj: &Obj,
    decode_payload: &PayloadDecoder<'_>,
) -> Result<PushCommit, JsonFrameError> {
    let operations = array(obj, "operations")?
        .iter()
        .map(|op| parse_operation(op, decode_payload))
        .collect::<Result<_, _>>()?;
    Ok(PushCommit {
        client_commit_id: string(obj, "clientCommitId")?,
        operations,
    })
}

fn parse_operation(
    value: &Value,
    decode_payload: &PayloadDecoder<'_>,
) -> Result<Operation, JsonFrameError> {
    let obj = object(value, "an operation")?;
    let table = string(obj, "table")?;
    let op_name = string(obj, "op")?;
    let op = OpKind::parse(&op_name).ok_or_else(|| wrong("op", "`upsert` or `delete`"))?;
    let payload = match obj.get("payload") {
        None | Some(Value::Null) => None,
        Some(member) => Some(decode_payload(&table, member)?),
    };
    Ok(Operation {
        row_id: string(obj, "rowId")?,
        table,
        op,
        base_version: opt_i64(obj, "baseVersion")?,
        payload,
    })
}

fn parse_pull_header(obj: &Obj) -> Result<PullHeader, JsonFrameError> {
    let accept = match opt_i64(obj, "accept")? {
        None => 1,
        Some(v) => u8::try_from(v).map_err(|_| wrong("accept", "an integer 0..=255"))?,
    };
    Ok(PullHeader {
        limit_commits: opt_i32(obj, "limitCommits")?.unwrap_or(0),
        limit_snapshot_rows: opt_i32(obj, "limitSnapshotRows")?.unwrap_or(0),
        max_snapshot_pages: opt_i32(obj, "maxSnapshotPages")?.unwrap_or(0),
        accept,
    })
}

fn parse_subscription(obj: &Obj) -> Result<Subscription, JsonFrameError> {
    let mut scopes = ScopeFilter::new();
    match obj.get("scopes") {
        None | Some(Value::Null) => {}
        Some(Value::Object(map)) => {
            for (key, values) in map {
                scopes.insert(key.clone(), string_list(values, "scopes")?);
            }
        }
        Some(_) => return Err(wrong("scopes", "an object of string arrays")),
    }
    Ok(Subscription {
        id: string(obj, "id")?,
        table: string(obj, "table")?,
        scopes,
        params: opt_raw_json(obj, "params")?,
        cursor: i64_of(obj, "cursor")?,
        bootstrap_state: opt_raw_json(obj, "bootstrapState")?,
    })
}

fn req_header_json(wire_version: u16, header: &ReqHeader) -> Value {
    let mut out = Map::new();
    out.insert("type".into(), "REQ_HEADER".into());
    out.insert("wireVersion".into(), wire_version.into());
    out.insert("clientId".into(), header.client_id.clone().into());
    out.insert("schemaVersion".into(), header.schema_version.into());
    if let Some(epoch) = &header.log_epoch {
        out.insert("logEpoch".into(), epoch.clone().into());
    }
    Value::Object(out)
}

fn push_commit_json(commit: &PushCommit) -> Value {
    let mut out = Map::new();
    out.insert("type".into(), "PUSH_COMMIT".into());
    out.insert(
        "clientCommitId".into(),
        commit.client_commit_id.clone().into(),
    );
    let ops = commit.operations.iter().map(operation_json).collect();
    out.insert("operations".into(), Value::Array(ops));
    Value::Object(out)
}

fn operation_json(op: &Operation) -> Value {
    let mut out = Map::new();
    out.insert("table".into(), op.table.clone().into());
    out.insert("rowId".into(), op.row_id.clone().into());
    out.insert("op".into(), op.op.as_str().into());
    if let Some(base) = op.base_version {
        out.insert("baseVersion".into(), base.into());
    }
    if let Some(payload) = &op.payload {
        out.insert("payload".into(), base64::encode(payload).into());
    }
    Value::Object(out)
}

fn pull_header_json(pull: &PullHeader) -> Value {
    let mut out = Map::new();
    out.insert("type".into(), "PULL_HEADER".into());
    out.insert("limitCommits".into(), pull.limit_commits.into());
    out.insert("limitSnapshotRows".into(), pull.limit_snapshot_rows.into());
    out.insert("maxSnapshotPages".into(), pull.max_snapshot_pages.into());
    out.insert("accept".into(), pull.accept.into());
    Value::Object(out)
}

pub(crate) fn scope_filter_json(filter: &ScopeFilter) -> Value {
    Value::Object(
        filter
            .iter()
            .map(|(k, v)| {
                let values = v.iter().cloned().map(Value::from).collect();
                (k.clone(), Value::Array(values))
            })
            .collect(),
    )
}

fn subscription_json(sub: &Subscription) -> Value {
    let mut out = Map::new();
    out.insert("type".into(), "SUBSCRIPTION".into());
    out.insert("id".into(), sub.id.clone().into());
    out.insert("table".into(), sub.table.clone().into());
    out.insert("scopes".into(), scope_filter_json(&sub.scopes));
    if let Some(params) = &sub.params {
        out.insert("params".into(), raw_json_value(params));
    }
    out.insert("cursor".into(), sub.cursor.into());
    if let Some(state) = &sub.bootstrap_state {
        out.insert("bootstrapState".into(), raw_json_value(state));
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str =
        r#"{"type":"REQ_HEADER","wireVersion":2,"clientId":"c","schemaVersion":1,"logEpoch":"e"}"#;
    const PULL: &str = r#"{"type":"PULL_HEADER"}"#;

    fn error_at(text: &str) -> (usize, String) {
        let e = SyncRequest::from_json_lines(text).expect_err("a malformed request");
        (e.line, e.reason)
    }

    #[test]
    fn blank_lines_are_skipped_and_counted() {
        let text = format!("\n{HEADER}\n\n  \n{PULL}\n\n");
        let request = SyncRequest::from_json_lines(&text).expect("parses");
        assert_eq!(
            (request.wire_version, request.header.client_id.as_str()),
            (2, "c")
        );
        assert!(request.pull.is_some());
    }

    #[test]
    fn a_pull_header_keeps_its_limits_and_accept_bits() {
        let text = format!(
            "{HEADER}\n{}",
            r#"{"type":"PULL_HEADER","limitCommits":7,"limitSnapshotRows":30,"maxSnapshotPages":2,"accept":3}"#
        );
        let request = SyncRequest::from_json_lines(&text).expect("parses");
        let expected = PullHeader {
            limit_commits: 7,
            limit_snapshot_rows: 30,
            max_snapshot_pages: 2,
            accept: 3,
        };
        assert_eq!(request.pull, Some(expected));
        let rendered = request.to_json_lines();
        assert_eq!(
            SyncRequest::from_json_lines(&rendered).expect("parses back"),
            request
        );
    }

    #[test]
    fn errors_name_the_one_based_line_of_their_frame() {
        assert_eq!(error_at("\n\n").0, 0, "no frame at all");
        assert_eq!(
            error_at("\n{not json"),
            (2, "not a JSON value".to_owned()),
            "an unparsable first frame"
        );
        assert_eq!(
            error_at(&format!("\n\n{PULL}")),
            (3, "the first frame must be REQ_HEADER".to_owned()),
            "a first frame that is not the header"
        );
        assert_eq!(
            error_at(&format!("{HEADER}\n\n[1")).0,
            3,
            "an unparsable frame"
        );
        assert_eq!(
            error_at(&format!("{HEADER}\n{PULL}\n\n{PULL}")),
            (4, "at most one PULL_HEADER".to_owned()),
            "a frame the request refuses"
        );
    }
}
