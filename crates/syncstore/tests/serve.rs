//! `serve` on SQLite and Postgres: the `listening on` line, push and pull
//! rounds over HTTP with our SSP2 codec as the client, 401 without a known
//! token, and SIGTERM letting a round in flight finish before exit 0.

mod common;

use common::http::{read_answer, Answer};

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};

use common::{compile, todos_schema, write_file, Db};
use serde_json::Value;
use sync_core::RowValue;
use sync_ssp2::{
    PullHeader, PushCommit, PushOp, PushOperation, ReqHeader, Request, ResponseFrame, Subscription,
    WireVersion,
};

macro_rules! on_both {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[test]
            fn sqlite() {
                super::$name(super::Db::sqlite());
            }
            #[test]
            fn postgres() {
                super::$name(super::Db::postgres());
            }
            #[test]
            fn mariadb() {
                super::$name(super::Db::mariadb());
            }
        }
    )*};
}

on_both!(
    a_push_and_pull_round_over_http,
    unknown_or_absent_tokens_are_refused_with_401,
    a_large_bootstrap_goes_by_reference_and_downloads_reauthorized,
    sigterm_lets_the_round_in_flight_finish_and_exits_zero,
);

const TOKENS: &str = r#"{
  "alice-token": {"partition": "acme", "actor": "alice", "allow": {"list_id": ["l1"]}},
  "bob-token": {"partition": "acme", "actor": "bob", "allow": {"list_id": ["*"]}},
  "carol-token": {"partition": "acme", "actor": "carol", "allow": {"list_id": ["l2"]}}
}"#;

/// A running `syncstore serve`, killed when dropped.
struct Server {
    child: Child,
    address: String,
    _dir: tempfile::TempDir,
    schema_text: String,
}

impl Server {
    fn start(db: &Db) -> Self {
        let dir = db.scratch();
        let schema_text = todos_schema(1, false, "");
        let schema = write_file(&dir, "v1.json", &schema_text);
        let tokens = write_file(&dir, "tokens.json", TOKENS);
        db.json(&["migrate", "--schema", &schema]);
        let url = db.url();
        let mut child = Command::new(env!("CARGO_BIN_EXE_syncstore"))
            .args(["--db", &url, "serve", "--schema", &schema])
            .args(["--listen", "127.0.0.1:0", "--tokens", &tokens])
            .env_remove("SYNCSTORE_DATABASE_URL")
            .env_remove("SYNCSTORE_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the syncstore binary runs");
        let stdout = child.stdout.take().expect("stdout is piped");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("read the first line");
        let address = line
            .trim_end()
            .strip_prefix("listening on http://")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .to_owned();
        Self {
            child,
            address,
            _dir: dir,
            schema_text,
        }
    }

    fn row(&self, id: &str, list: &str, title: &str) -> Vec<u8> {
        let schema = compile(&self.schema_text);
        let table = schema.table("todos").expect("todos");
        sync_core::codec::encode_row(
            table,
            &[
                RowValue::String(id.into()),
                RowValue::String(list.into()),
                RowValue::String(title.into()),
                RowValue::Boolean(false),
            ],
        )
        .expect("row encodes")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("a JSON body")
    }

    fn frames(&self) -> Vec<ResponseFrame> {
        assert_eq!(self.status, 200, "{}", String::from_utf8_lossy(&self.body));
        sync_ssp2::decode_response(&self.body)
            .expect("an SSP2 response")
            .frames
    }
}

fn request_head(address: &str, token: Option<&str>, body_len: usize, expect: bool) -> String {
    let mut head = format!(
        "POST /sync HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\
         Content-Type: application/vnd.syncular.sync.v2\r\nContent-Length: {body_len}\r\n"
    );
    if let Some(token) = token {
        head.push_str(&format!("Authorization: Bearer {token}\r\n"));
    }
    if expect {
        head.push_str("Expect: 100-continue\r\n");
    }
    head.push_str("\r\n");
    head
}

fn post(address: &str, token: Option<&str>, body: &[u8]) -> Answer {
    let mut stream = TcpStream::connect(address).expect("connect");
    stream
        .write_all(request_head(address, token, body.len(), false).as_bytes())
        .and_then(|()| stream.write_all(body))
        .expect("send the request");
    read_answer(&mut BufReader::new(stream))
}

fn get(address: &str, path: &str, token: &str, scopes: &str) -> Answer {
    let mut stream = TcpStream::connect(address).expect("connect");
    let head = format!(
        "GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\
         Authorization: Bearer {token}\r\nX-Syncular-Scopes: {scopes}\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).expect("send the request");
    read_answer(&mut BufReader::new(stream))
}

fn header(client: &str, epoch: Option<String>) -> ReqHeader {
    ReqHeader {
        client_id: client.into(),
        schema_version: 1,
        log_epoch: epoch,
    }
}

fn subscription(list: &str, cursor: i64) -> Subscription {
    let mut scopes = sync_ssp2::ScopeMap::new();
    scopes.insert("list_id", vec![list.to_owned()]);
    Subscription {
        id: "todos".into(),
        table: "todos".into(),
        scopes,
        params: None,
        cursor,
        bootstrap_state: None,
    }
}

fn encode(request: Request) -> Vec<u8> {
    sync_ssp2::encode_request(&request).expect("the request encodes")
}

/// The partition's log epoch, as a client without one acquires it.
fn acquire_epoch(server: &Server, token: &str, client: &str) -> String {
    let body = encode(Request::pull_only(
        WireVersion::V2,
        header(client, None),
        PullHeader::default(),
        Vec::new(),
    ));
    let frames = post(&server.address, Some(token), &body).frames();
    match &frames[0] {
        ResponseFrame::RespHeader(h) => h.epoch.clone().expect("a v2 epoch").log_epoch,
        other => panic!("expected RESP_HEADER, got {other:?}"),
    }
}

fn push_and_pull(server: &Server, epoch: &str) -> Vec<u8> {
    encode(Request::from_parts(
        WireVersion::V2,
        header("phone-a", Some(epoch.to_owned())),
        vec![PushCommit {
            client_commit_id: "commit-1".into(),
            operations: vec![PushOperation {
                table: "todos".into(),
                row_id: "t1".into(),
                base_version: None,
                op: PushOp::Upsert {
                    payload: server.row("t1", "l1", "buy milk"),
                },
            }],
        }],
        Some((PullHeader::default(), vec![subscription("l1", -1)])),
    ))
}

fn segment_rows(frames: &[ResponseFrame]) -> Vec<String> {
    frames
        .iter()
        .filter_map(|f| match f {
            ResponseFrame::SegmentInline(inline) => Some(inline),
            _ => None,
        })
        .flat_map(|inline| {
            let segment = sync_ssp2::decode_segment(inline.as_bytes()).expect("a rows segment");
            segment
                .blocks
                .into_iter()
                .flatten()
                .map(|row| match &row.values[0] {
                    sync_ssp2::ColumnValue::String(id) => id.clone(),
                    other => panic!("id column {other:?}"),
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

fn a_push_and_pull_round_over_http(db: Db) {
    let server = Server::start(&db);
    let epoch = acquire_epoch(&server, "alice-token", "phone-a");
    let frames = post(
        &server.address,
        Some("alice-token"),
        &push_and_pull(&server, &epoch),
    )
    .frames();
    let applied = frames.iter().any(|f| {
        matches!(f, ResponseFrame::PushResult(r)
            if r.client_commit_id == "commit-1" && matches!(r.status, sync_ssp2::PushStatus::Applied { .. }))
    });
    assert!(applied, "{frames:?}");
    assert_eq!(segment_rows(&frames), ["t1"]);

    // Another actor's device bootstraps the row pushed by alice.
    let epoch = acquire_epoch(&server, "bob-token", "phone-b");
    let body = encode(Request::pull_only(
        WireVersion::V2,
        header("phone-b", Some(epoch)),
        PullHeader::default(),
        vec![subscription("l1", -1)],
    ));
    let frames = post(&server.address, Some("bob-token"), &body).frames();
    assert_eq!(segment_rows(&frames), ["t1"]);
    let next_cursor = frames.iter().find_map(|f| match f {
        ResponseFrame::SubEnd(end) => Some(end.next_cursor),
        _ => None,
    });
    assert_eq!(next_cursor, Some(1));
}

fn unknown_or_absent_tokens_are_refused_with_401(db: Db) {
    let server = Server::start(&db);
    let body = encode(Request::pull_only(
        WireVersion::V2,
        header("phone-a", None),
        PullHeader::default(),
        Vec::new(),
    ));
    for token in [None, Some("stolen")] {
        let answer = post(&server.address, token, &body);
        assert_eq!(answer.status, 401);
        let json = answer.json();
        assert_eq!(json["code"], "sync.auth_required");
        assert_eq!(json["category"], "auth-required");
        assert_eq!(json["retryable"], true);
        assert_eq!(json["recommendedAction"], "refreshAuth");
    }
}

fn sigterm_lets_the_round_in_flight_finish_and_exits_zero(db: Db) {
    let mut server = Server::start(&db);
    let epoch = acquire_epoch(&server, "alice-token", "phone-a");
    let body = push_and_pull(&server, &epoch);
    let mut stream = TcpStream::connect(&server.address).expect("connect");
    stream
        .write_all(request_head(&server.address, Some("alice-token"), body.len(), true).as_bytes())
        .expect("send the head");
    // `100 Continue` comes once the handler reads the body: the round is
    // in flight.
    let mut reader = BufReader::new(stream.try_clone().expect("clone the stream"));
    let mut line = String::new();
    reader.read_line(&mut line).expect("interim status");
    assert!(line.starts_with("HTTP/1.1 100"), "{line:?}");
    reader.read_line(&mut line).expect("blank line");
    let killed = Command::new("kill")
        .args(["-TERM", &server.child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(killed.success());
    stream.write_all(&body).expect("send the body");
    let frames = read_answer(&mut reader).frames();
    assert_eq!(segment_rows(&frames), ["t1"]);
    let status = server.child.wait().expect("serve exits");
    assert_eq!(status.code(), Some(0));
}

fn a_large_bootstrap_goes_by_reference_and_downloads_reauthorized(db: Db) {
    let server = Server::start(&db);
    let epoch = acquire_epoch(&server, "alice-token", "phone-a");
    // 300 rows of 1 000 characters: a page above the 256 KiB inline limit.
    let operations = (0..300)
        .map(|i| {
            let id = format!("t{i:04}");
            PushOperation {
                table: "todos".into(),
                row_id: id.clone(),
                base_version: None,
                op: PushOp::Upsert {
                    payload: server.row(&id, "l1", &"x".repeat(1000)),
                },
            }
        })
        .collect();
    let push = encode(Request::from_parts(
        WireVersion::V2,
        header("phone-a", Some(epoch.clone())),
        vec![PushCommit {
            client_commit_id: "bulk".into(),
            operations,
        }],
        None,
    ));
    post(&server.address, Some("alice-token"), &push).frames();
    let pull = encode(Request::pull_only(
        WireVersion::V2,
        header("phone-a", Some(epoch)),
        PullHeader {
            limit_snapshot_rows: 1000,
            ..PullHeader::default()
        },
        vec![subscription("l1", -1)],
    ));
    let frames = post(&server.address, Some("alice-token"), &pull).frames();
    let reference = frames
        .iter()
        .find_map(|f| match f {
            ResponseFrame::SegmentRef(r) => Some(r.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("expected a SEGMENT_REF in {:?}", frames.len()));
    assert_eq!(reference.row_count, 300);
    assert!(reference.byte_length > 256 * 1024);

    let path = format!("/segments/{}", reference.segment_id);
    let l1 = r#"{"list_id":["l1"]}"#;
    let answer = get(&server.address, &path, "alice-token", l1);
    assert_eq!(answer.status, 200);
    assert_eq!(
        sync_ssp2::sha256::segment_id(&answer.body),
        reference.segment_id
    );
    let segment = sync_ssp2::decode_segment(&answer.body).expect("a rows segment");
    assert_eq!(segment.blocks.concat().len(), 300);
    // bob may read l1 as well: the same effective scopes, the same segment.
    assert_eq!(get(&server.address, &path, "bob-token", l1).status, 200);
    // carol may not read l1; asking for other scopes gives another digest.
    let refused = get(&server.address, &path, "carol-token", l1);
    assert_eq!(refused.status, 403);
    assert_eq!(refused.json()["code"], "sync.forbidden");
    let other = get(
        &server.address,
        &path,
        "bob-token",
        r#"{"list_id":["l1","l2"]}"#,
    );
    assert_eq!(other.status, 403);
    let unknown = format!("/segments/sha256:{}", "0".repeat(64));
    let missing = get(&server.address, &unknown, "alice-token", l1);
    assert_eq!(missing.status, 404);
    assert_eq!(missing.json()["code"], "sync.not_found");
}
