//! A commit re-sent at wire version 3 with an earlier client's ids, encoded
//! by the reference's own codec (0.49.2) and posted over raw HTTP: what a
//! client upgraded with its outbox sends (design §5.3).

use serde_json::Value;
use ssp2_v3::model::{Frame, Message, MsgKind, Op, OpResult, Operation, PushStatus};
use ssp2_v3::segment::{Column, ColumnType, ColumnValue, SparseSlot};

/// The SSP2 media type (every wire version).
const SSP2: &str = "application/vnd.syncular.sync.v2";

/// The push result of a replay: status and per-operation results.
#[derive(Debug)]
pub struct Replayed {
    /// The commit's status.
    pub status: PushStatus,
    /// Its `commitSeq`.
    pub commit_seq: Option<i64>,
    /// Its operation results.
    pub results: Vec<OpResult>,
}

/// The columns of `todos(2)` (see `schema::todos`), in declaration order.
pub fn todo_columns() -> Vec<Column> {
    let column = |name: &str, ty, nullable| Column {
        name: name.to_owned(),
        ty,
        nullable,
    };
    vec![
        column("id", ColumnType::String, false),
        column("list_id", ColumnType::String, false),
        column("title", ColumnType::String, false),
        column("done", ColumnType::Boolean, false),
        column("note", ColumnType::String, true),
    ]
}

/// A whole todo as a sparse row with every column present.
pub fn full_todo(id: &str, list: &str, title: &str, done: bool, note: Option<&str>) -> Vec<u8> {
    let text = |v: &str| SparseSlot::Value(ColumnValue::String(v.to_owned()));
    let row = vec![
        text(id),
        text(list),
        text(title),
        SparseSlot::Value(ColumnValue::Boolean(done)),
        note.map_or(SparseSlot::Null, text),
    ];
    ssp2_v3::encode_sparse_row(&todo_columns(), 0, &row)
}

/// One commit of one upsert, as a client's outbox holds it.
#[derive(Debug)]
pub struct Resend<'a> {
    /// The client's bearer token.
    pub token: &'a str,
    /// The client id.
    pub client_id: &'a str,
    /// The commit id.
    pub commit: &'a str,
    /// The row.
    pub row_id: &'a str,
    /// The operation's `baseVersion`.
    pub base_version: Option<i64>,
    /// The sparse row.
    pub payload: Vec<u8>,
}

/// The schema version of every request here (`todos(2)`).
const SCHEMA_VERSION: i32 = 2;

/// Posts one version 3 request of `client_id` with `frames` after its
/// header and returns the decoded response; fails the test unless it is a
/// 200 at version 3.
fn round(base_url: &str, token: &str, header: Frame, frames: Vec<Frame>) -> Message {
    let mut all = vec![header];
    all.extend(frames);
    let request = ssp2_v3::encode_message(&Message {
        wire_version: 3,
        msg_kind: MsgKind::Request,
        frames: all,
    });
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let mut response = agent
        .post(format!("{base_url}/sync"))
        .header("content-type", SSP2)
        .header("authorization", format!("Bearer {token}"))
        .send(&request[..])
        .unwrap_or_else(|e| panic!("the HTTP request failed: {e}"));
    let status = response.status().as_u16();
    let body = response
        .body_mut()
        .read_to_vec()
        .unwrap_or_else(|e| panic!("reading the body failed: {e}"));
    assert_eq!(
        status,
        200,
        "the request was refused: {}",
        String::from_utf8_lossy(&body)
    );
    let message = ssp2_v3::decode_message(&body)
        .unwrap_or_else(|e| panic!("the reference codec refused the response: {e:?}"));
    assert_eq!(message.wire_version, 3, "the response's wire version");
    message
}

/// The log epoch the server hands `client_id` on a pull-only round at
/// version 3 (a client pushes only with the epoch it holds).
pub fn log_epoch(base_url: &str, token: &str, client_id: &str) -> String {
    let header = Frame::ReqHeader {
        client_id: client_id.to_owned(),
        schema_version: SCHEMA_VERSION,
        log_epoch: None,
    };
    let pull = Frame::PullHeader {
        limit_commits: 0,
        limit_snapshot_rows: 0,
        max_snapshot_pages: 0,
        accept: 1,
    };
    round(base_url, token, header, vec![pull])
        .frames
        .into_iter()
        .find_map(|frame| match frame {
            Frame::RespHeader { log_epoch, .. } => log_epoch,
            _ => None,
        })
        .unwrap_or_else(|| panic!("no log epoch in the response to {client_id}"))
}

/// Posts one version 3 request pushing `resend` with the client's log
/// epoch, and returns its push result.
pub fn push_upsert(base_url: &str, resend: Resend<'_>) -> Replayed {
    let Resend {
        token,
        client_id,
        commit,
        row_id,
        base_version,
        payload,
    } = resend;
    let header = Frame::ReqHeader {
        client_id: client_id.to_owned(),
        schema_version: SCHEMA_VERSION,
        log_epoch: Some(log_epoch(base_url, token, client_id)),
    };
    let push = Frame::PushCommit {
        client_commit_id: commit.to_owned(),
        operations: vec![Operation {
            table: "todos".to_owned(),
            row_id: row_id.to_owned(),
            op: Op::Upsert,
            base_version,
            payload: Some(payload),
        }],
    };
    round(base_url, token, header, vec![push])
        .frames
        .into_iter()
        .find_map(|frame| match frame {
            Frame::PushResult {
                client_commit_id,
                status,
                commit_seq,
                results,
            } => {
                assert_eq!(client_commit_id, commit);
                Some(Replayed {
                    status,
                    commit_seq,
                    results,
                })
            }
            Frame::Error { code, message, .. } => {
                panic!("the replay was answered with ERROR {code}: {message}")
            }
            _ => None,
        })
        .unwrap_or_else(|| panic!("no PUSH_RESULT for {commit}"))
}

/// The stored row of a conflict, decoded by the reference codec as a full
/// row of `todos(2)`, values by column name.
pub fn decode_server_row(server_row: &[u8]) -> serde_json::Map<String, Value> {
    let columns = todo_columns();
    let mut reader = ssp2_v3::primitives::Reader::new(server_row);
    let row = ssp2_v3::segment::decode_row(&mut reader, &columns)
        .unwrap_or_else(|e| panic!("serverRow does not decode: {e:?}"));
    columns
        .iter()
        .zip(row)
        .map(|(column, value)| {
            let value = match value {
                None => Value::Null,
                Some(ColumnValue::String(s)) => Value::String(s),
                Some(ColumnValue::Boolean(b)) => Value::Bool(b),
                Some(other) => panic!("unexpected value {other:?}"),
            };
            (column.name.clone(), value)
        })
        .collect()
}
